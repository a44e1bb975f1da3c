// Tests of the model-guided strategies (simulated annealing, evolutionary): validity, no
// repeats, exhaustion, determinism, and search quality against random search on a synthetic
// objective with a nearest-neighbour test model. Every test runs for each strategy.
#include "search/evolutionary_strategy.h"
#include "search/sa_strategy.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "search/diversity.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tests/common/fake_cost_model.h"
#include "tests/common/strategy_driver.h"
#include "tests/common/toy_space.h"

namespace tune::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- Test harness ------------------------------------------------------------------------

// A synthetic tuning problem: a space and the measured cost of each config (+inf = failure).
struct Problem {
  ConfigSpace space;
  std::function<double(const Config&)> cost;

  MeasuredConfig Measure(const Config& c) const {
    const double seconds = cost(c);
    return {c, seconds, std::isfinite(seconds)};
  }
};

// A separable quadratic bowl over 6 choice knobs (8*8*8*6*6*6 = 110592 points, above
// RandomStrategy's pool limit) in knob-index coordinates. Constraints cut ~44% of the
// points, including the unconstrained optimum (x0 + x1 = 12 > 10); configs with x2 = 7 and
// x5 = 0 fail when measured. The constrained optimum is (5,5,2,3,1,4).
Problem Bowl() {
  Problem p;
  for (int k = 0; k < 6; ++k) {
    const int n = k < 3 ? 8 : 6;
    std::vector<int64_t> values;
    for (int v = 0; v < n; ++v) values.push_back(v);
    p.space.AddChoice("x" + std::to_string(k), values);
  }
  p.space.AddConstraint("x0_plus_x1_le_10", [](const Config& c) { return c[0] + c[1] <= 10; });
  p.space.AddConstraint("x2_plus_x3_not_div3",
                        [](const Config& c) { return (c[2] + c[3]) % 3 != 0; });
  p.cost = [](const Config& c) {
    static const double kCentre[] = {6, 6, 2, 3, 1, 4};
    static const double kWeight[] = {1.0, 0.8, 0.6, 0.5, 0.4, 0.3};
    if (c[2] == 7 && c[5] == 0) return kInf;
    double s = 1;
    for (int k = 0; k < 6; ++k) s += kWeight[k] * (c[k] - kCentre[k]) * (c[k] - kCentre[k]);
    return 1e-3 * s;
  };
  return p;
}

// Split knobs with constraints, 28 * 10 * 5 * 4 = 5600 points (RandomStrategy's pool mode).
Problem Tiles() {
  Problem p;
  p.space.AddSplit("m", 64, 3);
  p.space.AddSplit("n", 48, 2);
  p.space.AddChoice("unroll", {0, 1, 2, 4, 8});
  p.space.AddChoice("vec", {1, 2, 4, 8});
  const ConfigSpace* space = &p.space;
  p.space.AddConstraint("inner_tile_le_64", [space](const Config& c) {
    return space->Get(c, "m").back() * space->Get(c, "n").back() <= 64;
  });
  p.space.AddConstraint("unroll_vec_le_16", [](const Config& c) {
    static const int kUnroll[] = {0, 1, 2, 4, 8};
    static const int kVec[] = {1, 2, 4, 8};
    return kUnroll[c[2]] * kVec[c[3]] <= 16;
  });
  p.cost = [space](const Config& c) {
    const double mi = space->Get(c, "m").back();
    const double ni = space->Get(c, "n").back();
    return 1e-3 * (1 + std::fabs(std::log2(mi) - 3) + std::fabs(std::log2(ni) - 2) + c[2] +
                   (c[3] == 2 ? 0 : 1));
  };
  return p;
}

// 6 * 4 * 3 = 72 points, 27 of them valid (test::ConstrainedSpace).
Problem Small() { return {test::ConstrainedSpace(), test::LinearCost}; }

double BestCost(const Problem& p) {
  return test::BestCost(p.space, [&p](const Config& c) { return p.Measure(c); });
}

// A perfect model: the negated objective (failures very low). Trained from the start.
test::FunctionCostModel OracleModel(const Problem& p) {
  return test::FunctionCostModel([&p](const Config& c) {
    const double cost = p.cost(c);
    return std::isfinite(cost) ? -cost : -1e9;
  });
}

using test::AllValid;
using test::MakeStrategy;
using test::NearestNeighbourModel;
using test::Seeded;

// The tuning loop for `rounds` batches of `batch` (test::Drive), fitting `model` (when not
// null) on every result so far after each batch.
test::DriveResult Drive(SearchStrategy& s, const Problem& p, CostModel* model, int rounds, int batch) {
  return test::Drive(s, p.space, rounds * batch, batch, [&p](const Config& c) { return p.Measure(c); },
                     model);
}

// Mean over seeds of best-found / optimum - 1 at a budget of `rounds` * `batch` measurements.
double MeanRegret(const std::string& name, const Problem& p, int seeds, int rounds, int batch) {
  const double optimum = BestCost(p);
  double sum = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    NearestNeighbourModel model;
    auto s = MakeStrategy(name, &p.space, 1000 + seed);
    sum += Drive(*s, p, &model, rounds, batch).best / optimum - 1;
  }
  return sum / seeds;
}

// --- The strategies under test ------------------------------------------------------------

struct StrategyCase {
  const char* name;
  int max_rounds_to_optimum;  // batches of 8 a perfect model needs at most
};

class ModelGuidedStrategyTest : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(ModelGuidedStrategyTest, CreatedByName) {
  Problem p = Small();
  EXPECT_EQ(MakeStrategy(GetParam().name, &p.space)->name(), GetParam().name);
}

TEST_P(ModelGuidedStrategyTest, NeverProposesInvalidOrSeenConfigs) {
  for (Problem p : {Bowl(), Tiles()}) {
    NearestNeighbourModel model;
    auto s = MakeStrategy(GetParam().name, &p.space, 3);
    // A resume: configs reported before any proposal are never proposed.
    std::vector<Config> resumed;
    std::mt19937_64 rng(7);
    std::vector<MeasuredConfig> results;
    std::vector<double> costs;
    for (int i = 0; i < 40; ++i) {
      Config c = *p.space.Sample(rng);
      resumed.push_back(c);
      results.push_back(p.Measure(c));
      costs.push_back(p.cost(c));
    }
    ASSERT_TRUE(model.Fit(resumed, costs).ok());
    s->Update(results);
    test::DriveResult run = Drive(*s, p, &model, 20, 12);
    EXPECT_EQ(run.proposed.size(), 20u * 12u);
    std::set<Config> resumed_set(resumed.begin(), resumed.end());
    for (const Config& c : run.proposed) EXPECT_EQ(resumed_set.count(c), 0u);
  }
}

TEST_P(ModelGuidedStrategyTest, ExhaustsASmallSpaceExactlyOnce) {
  Problem p = Small();
  const std::set<Config> valid = AllValid(p.space);
  for (bool with_model : {false, true}) {
    NearestNeighbourModel model;
    auto s = MakeStrategy(GetParam().name, &p.space, 11);
    test::DriveResult run = Drive(*s, p, with_model ? &model : nullptr, 1000, 5);
    EXPECT_EQ(std::set<Config>(run.proposed.begin(), run.proposed.end()), valid);
    EXPECT_EQ(run.proposed.size(), valid.size());
    EXPECT_TRUE(s->Propose(5).empty());
    EXPECT_TRUE(s->Propose(1).empty());
  }
}

TEST_P(ModelGuidedStrategyTest, NearlyOrFullyInvalidSpaces) {
  // Six valid points in 110592: random draws rarely hit them, model-guided moves from the
  // measured ones do.
  Problem p = Bowl();
  p.space.AddConstraint("six_points", [](const Config& c) {
    return c[0] == 0 && c[1] == 0 && c[2] == 1 && c[3] == 1 && c[4] == 0;
  });
  NearestNeighbourModel model;
  auto s = MakeStrategy(GetParam().name, &p.space, 2);
  s->Update({{Config{0, 0, 1, 1, 0, 0}, 1e-3, true}});  // resumed: one measured point
  ASSERT_TRUE(model.Fit({Config{0, 0, 1, 1, 0, 0}}, {1e-3}).ok());
  test::DriveResult run = Drive(*s, p, &model, 5, 4);
  EXPECT_EQ(run.proposed.size(), 5u);  // Drive checks validity and repeats
  EXPECT_TRUE(s->Propose(4).empty());

  p.space.AddConstraint("none", [](const Config&) { return false; });
  auto empty = MakeStrategy(GetParam().name, &p.space, 2);
  test::FunctionCostModel oracle = OracleModel(p);
  empty->SetCostModel(&oracle);
  EXPECT_TRUE(empty->Propose(8).empty());
}

TEST_P(ModelGuidedStrategyTest, RespectsBatchSizes) {
  Problem p = Tiles();
  NearestNeighbourModel model;
  auto s = MakeStrategy(GetParam().name, &p.space, 4);
  EXPECT_TRUE(s->Propose(0).empty());
  EXPECT_TRUE(s->Propose(-1).empty());
  Drive(*s, p, &model, 3, 8);  // trains the model
  for (int batch : {1, 1, 3, 7, 64, 200}) {
    EXPECT_EQ(Drive(*s, p, &model, 1, batch).proposed.size(), static_cast<size_t>(batch));
  }
}

TEST_P(ModelGuidedStrategyTest, DeterministicForASeed) {
  Problem p = Bowl();
  NearestNeighbourModel model_a, model_b, model_c;
  auto a = MakeStrategy(GetParam().name, &p.space, 5);
  auto b = MakeStrategy(GetParam().name, &p.space, 5);
  auto c = MakeStrategy(GetParam().name, &p.space, 6);
  const std::vector<Config> run_a = Drive(*a, p, &model_a, 6, 8).proposed;
  EXPECT_EQ(run_a, Drive(*b, p, &model_b, 6, 8).proposed);
  EXPECT_NE(run_a, Drive(*c, p, &model_c, 6, 8).proposed);
}

TEST_P(ModelGuidedStrategyTest, ModelPicksInABatchDifferInTwoKnobs) {
  Problem p = Bowl();
  NearestNeighbourModel model;
  StrategyOptions options = Seeded(8);
  options.model_guided.eps_greedy = 0;
  auto s = MakeStrategy(GetParam().name, &p.space, options);
  Drive(*s, p, &model, 1, 8);  // random first batch trains the model
  for (int round = 0; round < 5; ++round) {
    test::DriveResult run = Drive(*s, p, &model, 1, 8);
    for (size_t i = 0; i < run.proposed.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        EXPECT_GE(HammingDistance(run.proposed[i], run.proposed[j]), 2);
      }
    }
  }
}

// With a perfect model the search reaches the model's (= the objective's) optimum within a few
// batches: annealing in its first batch, evolution within three (each Propose starts from the
// best measured configs).
TEST_P(ModelGuidedStrategyTest, ReachesTheOptimumOfAPerfectModel) {
  Problem p = Bowl();
  const double optimum = BestCost(p);
  test::FunctionCostModel model = OracleModel(p);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    StrategyOptions options = Seeded(seed);
    options.model_guided.eps_greedy = 0;
    auto s = MakeStrategy(GetParam().name, &p.space, options);
    s->SetCostModel(&model);
    int rounds = 0;
    double best = kInf;
    while (best > optimum && rounds < 20) {
      ++rounds;
      std::vector<MeasuredConfig> results;
      for (const Config& c : s->Propose(8)) {
        best = std::min(best, p.cost(c));
        results.push_back(p.Measure(c));
      }
      s->Update(results);
    }
    std::printf("seed %d: optimum in batch %d\n", int(seed), rounds);
    EXPECT_LE(rounds, GetParam().max_rounds_to_optimum) << "seed " << seed;
  }
}

// The search-quality claim: at 64 measurements (8 batches of 8), with a model that only
// interpolates the measured history, the mean regret (best found / optimum - 1) over 20
// seeds is below a fifth of random search's (measured: about 0.04 against 1.8).
TEST_P(ModelGuidedStrategyTest, BeatsRandomSearchOnABowl) {
  Problem p = Bowl();
  const double learned = MeanRegret(GetParam().name, p, 20, 8, 8);
  const double random = MeanRegret("random", p, 20, 8, 8);
  std::printf("mean regret at 64 measurements over 20 seeds: %s %.3f, random %.3f\n", GetParam().name, learned,
              random);
  EXPECT_LT(learned, 0.2 * random);
}

// Options under which only a stall brings random picks: eps_greedy 0, and every slot random
// (eps_stalled 1) after `explore_after` results without a gain; `stalled_local` of them
// neighbours of the best measured configs.
StrategyOptions StallOptions(uint64_t seed, int explore_after, double stalled_local) {
  StrategyOptions options = Seeded(seed);
  options.model_guided.eps_greedy = 0;
  options.model_guided.eps_stalled = 1;
  options.model_guided.explore_after = explore_after;
  options.model_guided.stalled_local = stalled_local;
  return options;
}

// Stall-driven exploration: while results keep improving, every pick is the model's (x0 = 0,
// eps_greedy 0); after explore_after results without a gain of more than 1%, the picks are
// random (eps_stalled 1: x0 = 0 for about an eighth of them); one improving result brings the
// model back.
TEST_P(ModelGuidedStrategyTest, ExploresAtRandomWhileStalled) {
  Problem p = Bowl();
  // Prefers knob x0 = 0 (an eighth of the Bowl space) above everything else, so model picks
  // and random picks can be told apart by their x0.
  test::FunctionCostModel model([](const Config& c) { return c[0] == 0 ? 1.0 : 0.0; });
  auto s = MakeStrategy(GetParam().name, &p.space, StallOptions(7, 16, /*stalled_local=*/0));  // uniform
  s->SetCostModel(&model);
  auto report = [&](const std::vector<Config>& configs, double cost) {
    std::vector<MeasuredConfig> results;
    for (const Config& c : configs) results.push_back({c, cost, true});
    s->Update(results);
  };
  auto share_x0 = [](const std::vector<Config>& configs) {
    double n = 0;
    for (const Config& c : configs) n += c[0] == 0;
    return n / configs.size();
  };
  // Improving results: each batch is 2% faster than the last.
  double cost = 1.0;
  for (int round = 0; round < 4; ++round) {
    std::vector<Config> got = s->Propose(8);
    EXPECT_EQ(share_x0(got), 1.0) << "round " << round;
    cost *= 0.98;
    report(got, cost);
  }
  // 16 results that gain only 0.5% in all: stalled, so the next batches are random.
  for (int round = 0; round < 2; ++round) {
    std::vector<Config> got = s->Propose(8);
    EXPECT_EQ(share_x0(got), 1.0) << "not stalled yet, round " << round;
    cost *= 0.9975;
    report(got, cost);
  }
  std::vector<Config> random_picks;
  for (int round = 0; round < 4; ++round) {
    std::vector<Config> got = s->Propose(8);
    random_picks.insert(random_picks.end(), got.begin(), got.end());
    report(got, cost);
  }
  EXPECT_LT(share_x0(random_picks), 0.4) << "random picks hit x0 = 0 with chance 1/8";
  // One result 5% better ends the stall.
  std::vector<Config> got = s->Propose(1);
  report(got, cost * 0.95);
  EXPECT_EQ(share_x0(s->Propose(8)), 1.0);
}

// While stalled, stalled_local of the random slots are neighbours of the best measured
// configs: valid, unseen, one knob away from one of the three best. The first batch's first
// three results stay the best (everything later is slower), so the search is stalled from
// the second batch on.
TEST_P(ModelGuidedStrategyTest, MeasuresTheBestConfigsNeighboursWhileStalled) {
  Problem p = Bowl();
  test::FunctionCostModel model([](const Config& c) { return c[0] == 0 ? 1.0 : 0.0; });
  auto s = MakeStrategy(GetParam().name, &p.space, StallOptions(11, 4, /*stalled_local=*/1));
  s->SetCostModel(&model);
  std::set<Config> seen;
  double cost = 1.0;
  auto report = [&](const std::vector<Config>& configs) {
    std::vector<MeasuredConfig> results;
    for (const Config& c : configs) {
      results.push_back({c, cost, true});
      cost += 0.01;
      seen.insert(c);
    }
    s->Update(results);
  };
  const std::vector<Config> first = s->Propose(8);
  ASSERT_EQ(first.size(), 8u);
  report(first);
  const std::vector<Config> best(first.begin(), first.begin() + 3);
  auto distance = [](const Config& a, const Config& b) {
    int d = 0;
    for (size_t k = 0; k < a.size(); ++k) d += a[k] != b[k];
    return d;
  };
  std::set<size_t> knobs_changed;
  for (int round = 0; round < 4; ++round) {
    const std::vector<Config> got = s->Propose(8);
    ASSERT_EQ(got.size(), 8u);
    for (const Config& c : got) {
      EXPECT_TRUE(p.space.IsValid(c));
      EXPECT_EQ(seen.count(c), 0u);
      int nearest = INT_MAX;
      for (const Config& b : best) {
        nearest = std::min(nearest, distance(c, b));
        if (distance(c, b) == 1) {
          for (size_t k = 0; k < c.size(); ++k) {
            if (c[k] != b[k]) knobs_changed.insert(k);
          }
        }
      }
      EXPECT_EQ(nearest, 1) << "round " << round;
    }
    report(got);
  }
  EXPECT_GE(knobs_changed.size(), 4u) << "the knob to change is drawn, not fixed";
}

// A model right about everything but one knob (it ranks the Bowl's configs by their cost,
// except that it puts x5 = 0 above all, where the optimum has x5 = 4; it never learns): the
// search finds the best config with x5 = 0 and stalls there. Measuring the best configs'
// neighbours while stalled moves x5; uniform draws in the same slots are almost never better
// than a config that is optimal in five knobs of six.
TEST_P(ModelGuidedStrategyTest, NeighboursFindWhatAModelWrongInOneKnobHides) {
  Problem p = Bowl();
  const double optimum = BestCost(p);
  auto regret = [&](double local) {
    double sum = 0;
    for (int seed = 0; seed < 8; ++seed) {
      test::FunctionCostModel model([&p](const Config& c) {
        const double cost = p.cost(c);
        return (std::isfinite(cost) ? -cost : -1e9) + (c[5] == 0 ? 1.0 : 0.0);
      });
      StrategyOptions options = Seeded(100 + seed);
      options.model_guided.stalled_local = local;
      auto s = MakeStrategy(GetParam().name, &p.space, options);
      sum += Drive(*s, p, &model, 16, 8).best / optimum - 1;
    }
    return sum / 8;
  };
  const double uniform = regret(0), local = regret(1);
  std::printf("mean regret at 128 measurements, a model wrong in one knob: stalled_local 0 %.3f, 1 %.3f\n", uniform,
              local);
  EXPECT_LT(local, 0.5 * uniform);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ModelGuidedStrategyTest,
                         ::testing::Values(StrategyCase{"sa", 1}, StrategyCase{"evolutionary", 3}),
                         [](const ::testing::TestParamInfo<StrategyCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tune::search
