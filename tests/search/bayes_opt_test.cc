// Tests of the Bayesian-optimisation strategies (bo_ei, bo_pi, bo_ucb, bo_multi, bo).
#include "search/bayes_opt_strategy.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::search {
namespace {

// 6 * 4 * 3 = 72 points, of which those with inner product <= 8 are valid (small: the
// strategy enumerates it).
ConfigSpace SmallSpace() {
  ConfigSpace space;
  space.AddSplit("tile_m", 12, 2);
  space.AddSplit("tile_n", 8, 2);
  space.AddChoice("unroll", {0, 4, 16});
  space.AddConstraint("inner_le_8", [](const Config& c) {
    static const int kM[] = {12, 6, 4, 3, 2, 1};
    static const int kN[] = {8, 4, 2, 1};
    return kM[c[0]] * kN[c[1]] <= 8;
  });
  return space;
}

// 10^5 points (above the enumeration limit: sampled by rejection); x0 + x1 <= 12 holds for
// 79% of them. The single-option knob exercises the 0.5 coordinate.
ConfigSpace BowlSpace() {
  ConfigSpace space;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    space.AddChoice(name, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  space.AddChoice("fixed", {1});
  space.AddConstraint("a_plus_b_le_12", [](const Config& c) { return c[0] + c[1] <= 12; });
  return space;
}

// Quadratic bowl in log cost whose unconstrained minimum (a, b near 7) violates the
// constraint, so the best valid point lies on its boundary. Configs with c >= 8 and e >= 8
// fail at run time.
MeasuredConfig Bowl(const Config& c) {
  static const double kCentre[] = {7.3, 6.6, 2.2, 5.6, 4.1};
  static const double kWeight[] = {1.0, 0.7, 1.5, 0.5, 1.2};
  if (c[2] >= 8 && c[4] >= 8) return {c, INFINITY, false};
  double q = 0;
  for (int k = 0; k < 5; ++k) {
    const double d = (c[k] - kCentre[k]) / 9.0;
    q += kWeight[k] * d * d;
  }
  return {c, 1e-3 * std::exp(8.0 * q), true};
}

// The bowl with cosine ripples: local minima around the basin, for the comparisons.
MeasuredConfig RuggedBowl(const Config& c) {
  MeasuredConfig r = Bowl(c);
  if (!r.ok) return r;
  double ripple = 0;
  for (int k = 0; k < 5; ++k) ripple += std::cos(2.1 * c[k] + k);
  r.cost *= std::exp(0.15 * ripple);
  return r;
}

double RuggedBowlOptimum(const ConfigSpace& space) {
  double best = INFINITY;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    if (!space.IsValid(c)) continue;
    MeasuredConfig r = RuggedBowl(c);
    if (r.ok) best = std::min(best, r.cost);
  }
  return best;
}

std::unique_ptr<SearchStrategy> Make(const std::string& name, const ConfigSpace* space,
                                     uint64_t seed, StrategyOptions options = {}) {
  options.seed = seed;
  auto s = SearchStrategy::Create(name, space, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

std::set<Config> AllValid(const ConfigSpace& space) {
  std::set<Config> out;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    if (space.IsValid(c)) out.insert(c);
  }
  return out;
}

// The tuning loop in miniature: Propose(batch) -> objective -> Update, for `budget`
// evaluations. Checks every proposal and returns the best cost found.
double Drive(SearchStrategy& s, const ConfigSpace& space, int budget, int batch,
             const std::function<MeasuredConfig(const Config&)>& objective,
             std::vector<Config>* order = nullptr) {
  std::set<Config> seen;
  double best = INFINITY;
  int used = 0;
  while (used < budget) {
    const int want = std::min(batch, budget - used);
    std::vector<Config> got = s.Propose(want);
    EXPECT_LE(static_cast<int>(got.size()), want);
    if (got.empty()) break;
    std::vector<MeasuredConfig> results;
    for (const Config& c : got) {
      EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      EXPECT_TRUE(seen.insert(c).second) << "config proposed twice";
      results.push_back(objective(c));
      if (results.back().ok) best = std::min(best, results.back().cost);
      if (order != nullptr) order->push_back(c);
    }
    used += static_cast<int>(got.size());
    s.Update(results);
  }
  return best;
}

std::vector<Config> Drain(SearchStrategy& s, int batch) {
  std::vector<Config> all;
  for (int i = 0; i < 100000; ++i) {
    std::vector<Config> got = s.Propose(batch);
    EXPECT_LE(static_cast<int>(got.size()), batch);
    if (got.empty()) break;
    all.insert(all.end(), got.begin(), got.end());
  }
  return all;
}

class BayesOptTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BayesOptTest, CreatedByName) {
  ConfigSpace space = SmallSpace();
  const std::string expected = GetParam() == "bo" ? "bo_multi" : GetParam();
  EXPECT_EQ(Make(GetParam(), &space, 0)->name(), expected);
}

TEST_P(BayesOptTest, ExhaustsSmallSpaceExactlyOnceWithoutUpdates) {
  ConfigSpace space = SmallSpace();
  const std::set<Config> valid = AllValid(space);
  auto s = Make(GetParam(), &space, 11);
  std::vector<Config> all = Drain(*s, 5);
  std::set<Config> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a config was proposed twice";
  EXPECT_EQ(unique, valid);
  EXPECT_TRUE(s->Propose(3).empty());
}

TEST_P(BayesOptTest, ExhaustsSmallSpaceExactlyOnceWithUpdates) {
  ConfigSpace space = SmallSpace();
  const std::set<Config> valid = AllValid(space);
  auto s = Make(GetParam(), &space, 12);
  std::vector<Config> order;
  auto objective = [](const Config& c) {
    if (c[2] == 2 && c[0] == 5) return MeasuredConfig{c, INFINITY, false};
    return MeasuredConfig{c, 1e-3 * (1 + c[0] + 2 * c[1] + c[2]), true};
  };
  Drive(*s, space, 1000, 4, objective, &order);
  EXPECT_EQ(std::set<Config>(order.begin(), order.end()), valid);
  EXPECT_EQ(order.size(), valid.size());
  EXPECT_TRUE(s->Propose(4).empty());
}

TEST_P(BayesOptTest, NeverProposesInvalidOrReportedConfigsOverManyRounds) {
  ConfigSpace space = BowlSpace();
  auto s = Make(GetParam(), &space, 3);
  // Configs loaded on resume, some of them failures.
  std::vector<MeasuredConfig> resumed;
  std::set<Config> reported;
  std::mt19937_64 rng(5);
  while (resumed.size() < 40) {
    Config c(6, 0);
    for (int k = 0; k < 5; ++k) c[k] = static_cast<int32_t>(UniformBelow(rng, 10));
    if (!space.IsValid(c) || !reported.insert(c).second) continue;
    resumed.push_back(Bowl(c));
  }
  s->Update(resumed);
  std::set<Config> proposed;
  for (int round = 0; round < 30; ++round) {
    const int batch = 1 + round % 7;
    std::vector<Config> got = s->Propose(batch);
    ASSERT_EQ(static_cast<int>(got.size()), batch);
    std::vector<MeasuredConfig> results;
    for (const Config& c : got) {
      EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      EXPECT_EQ(reported.count(c), 0u) << "reported config proposed";
      EXPECT_TRUE(proposed.insert(c).second) << "config proposed twice";
      results.push_back(Bowl(c));
    }
    // Every third round the results arrive late (pipelined measuring): proposals made
    // meanwhile must still be new.
    if (round % 3 != 2) s->Update(results);
  }
  EXPECT_TRUE(s->Propose(0).empty());
  EXPECT_TRUE(s->Propose(-2).empty());
}

TEST_P(BayesOptTest, DeterministicForASeedAndHistory) {
  ConfigSpace space = BowlSpace();
  auto a = Make(GetParam(), &space, 99);
  auto b = Make(GetParam(), &space, 99);
  auto c = Make(GetParam(), &space, 100);
  std::vector<Config> order_a;
  std::vector<Config> order_b;
  std::vector<Config> order_c;
  Drive(*a, space, 40, 6, Bowl, &order_a);
  Drive(*b, space, 40, 6, Bowl, &order_b);
  Drive(*c, space, 40, 6, Bowl, &order_c);
  EXPECT_EQ(order_a, order_b);
  EXPECT_NE(order_a, order_c);
}

TEST_P(BayesOptTest, SpaceWithNoValidPointGivesNothing) {
  ConfigSpace small = SmallSpace();
  small.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(Make(GetParam(), &small, 1)->Propose(8).empty());
  ConfigSpace large = BowlSpace();
  large.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(Make(GetParam(), &large, 1)->Propose(8).empty());
}

TEST_P(BayesOptTest, AllFailuresStillProposeValidNewConfigs) {
  ConfigSpace space = BowlSpace();
  auto s = Make(GetParam(), &space, 4);
  auto fail = [](const Config& c) { return MeasuredConfig{c, INFINITY, false}; };
  Drive(*s, space, 30, 5, fail);
}

INSTANTIATE_TEST_SUITE_P(Strategies, BayesOptTest,
                         ::testing::Values("bo_ei", "bo_pi", "bo_ucb", "bo_multi", "bo"),
                         [](const auto& info) { return info.param; });

// Mean over seeds of best-found / optimum (1 = the optimum every time).
double MeanBestRatio(const std::string& name, uint64_t first_seed, int seeds, int budget,
                     int batch) {
  ConfigSpace space = BowlSpace();
  static const double optimum = RuggedBowlOptimum(BowlSpace());
  double sum = 0;
  for (int i = 0; i < seeds; ++i) {
    auto s = Make(name, &space, first_seed + i);
    sum += Drive(*s, space, budget, batch, RuggedBowl) / optimum;
  }
  return sum / seeds;
}

// The comparison rule, on RuggedBowl at a budget of 50 evaluations in batches of 5 over 20
// seeds: a strategy's mean excess over the optimum (mean best/optimum - 1) must be at most a
// quarter of random search's. (Measured when written: random 4.22, bo_ei 1.05, bo_multi
// 1.09, i.e. excess shares of about 0.02 and 0.03; random under other seeds: 0.78.)
constexpr double kRequiredExcessShare = 0.25;
bool BeatsRandom(double strategy_ratio, double random_ratio) {
  return strategy_ratio - 1.0 <= kRequiredExcessShare * (random_ratio - 1.0);
}

TEST(BayesOptComparisonTest, BeatRandomSearchOnARuggedConstrainedBowl) {
  const double random = MeanBestRatio("random", 0, 20, 50, 5);
  // The rule is not met by random search itself under other seeds.
  const double random_control = MeanBestRatio("random", 1000, 20, 50, 5);
  EXPECT_FALSE(BeatsRandom(random_control, random))
      << "random " << random << " vs random " << random_control;
  for (const std::string name : {"bo_ei", "bo_multi"}) {
    const double ratio = MeanBestRatio(name, 0, 20, 50, 5);
    std::printf("[ rugged bowl ] %-8s mean best/optimum %.4f (random %.4f, random control %.4f)\n",
                name.c_str(), ratio, random, random_control);
    EXPECT_TRUE(BeatsRandom(ratio, random)) << name << " " << ratio << " vs random " << random;
  }
}

TEST(BayesOptMultiTest, PortfolioBookkeepingIsConsistent) {
  ConfigSpace space = BowlSpace();
  const BayesOptOptions options;
  BayesOptStrategy s(&space, 7, options, BayesOptStrategy::Mode::kMulti);
  Drive(s, space, 120, 6, Bowl);
  int proposed = 0;
  int measured = 0;
  int active = 0;
  ASSERT_EQ(s.portfolio().size(), 3u);
  for (const auto& a : s.portfolio()) {
    proposed += a.proposed;
    measured += a.measured;
    active += a.active ? 1 : 0;
    EXPECT_LE(a.improvements, a.measured);
    EXPECT_LE(a.measured, a.proposed);
  }
  EXPECT_GE(active, 1);
  // All but the initial random design were chosen by an acquisition, and all were measured.
  EXPECT_EQ(proposed, 120 - options.initial_samples);
  EXPECT_EQ(measured, proposed);
}

// A fake trained model that prefers configs near (a, b, c, d, e) = (5, 5, 2, 5, 4).
class FakeModel : public CostModel {
 public:
  bool trained() const override { return true; }
  absl::Status Fit(const std::vector<Config>&, const std::vector<double>&) override {
    return absl::OkStatus();
  }
  std::vector<double> Predict(const std::vector<Config>& configs,
                              std::vector<double>* variance) override {
    ++calls;
    std::vector<double> out;
    for (const Config& c : configs) {
      out.push_back(-std::abs(c[0] - 5) - std::abs(c[1] - 5) - std::abs(c[2] - 2) -
                    std::abs(c[3] - 5) - std::abs(c[4] - 4));
    }
    if (variance != nullptr) variance->assign(configs.size(), 0.0);
    return out;
  }
  absl::StatusOr<std::string> Save() const override { return std::string(); }
  absl::Status Load(const std::string&) override { return absl::OkStatus(); }
  int calls = 0;
};

TEST(BayesOptModelTest, TrainedCostModelNominatesCandidates) {
  ConfigSpace space = BowlSpace();
  FakeModel model;
  auto a = Make("bo_ei", &space, 21);
  auto b = Make("bo_ei", &space, 21);
  a->SetCostModel(&model);
  b->SetCostModel(&model);
  std::vector<Config> order_a;
  std::vector<Config> order_b;
  Drive(*a, space, 30, 5, Bowl, &order_a);
  Drive(*b, space, 30, 5, Bowl, &order_b);
  EXPECT_GT(model.calls, 0);
  EXPECT_EQ(order_a, order_b);
}

TEST(BayesOptSpeedTest, ProposeOnALargeSpaceWithManyObservations) {
  // 10^5 points, 200 observations: prints the time of one Propose (not asserted on).
  ConfigSpace space = BowlSpace();
  BayesOptStrategy s(&space, 1, BayesOptOptions{}, BayesOptStrategy::Mode::kMulti);
  Drive(s, space, 200, 50, Bowl);
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  std::vector<Config> got = s.Propose(10);
  const double cpu_ms = 1e3 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got.size(), 10u);
  std::printf("[ speed ] bo_multi Propose(10), 200 observations, 1e5 points: %.1f ms wall, "
              "%.1f ms cpu\n", ms, cpu_ms);
}

}  // namespace
}  // namespace tune::search
