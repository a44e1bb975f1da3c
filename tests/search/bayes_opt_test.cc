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
#include "tests/common/fake_cost_model.h"
#include "tests/common/strategy_driver.h"
#include "tests/common/toy_space.h"

namespace tune::search {
namespace {

// The spaces: ConstrainedSpace (72 points, small: the strategy enumerates it) and BowlSpace
// (10^5 points, above the enumeration limit: sampled by rejection), with Bowl and RuggedBowl
// as their costs.
using test::AllValid;
using test::Bowl;
using test::ConstrainedSpace;
using test::Drain;
using test::Drive;
using test::MakeStrategy;

// BowlSpace with a single-option knob, which exercises the 0.5 coordinate.
ConfigSpace BowlWithFixedKnob() { return test::BowlSpace(/*with_fixed_knob=*/true); }

class BayesOptTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BayesOptTest, CreatedByName) {
  ConfigSpace space = ConstrainedSpace();
  const std::string expected = GetParam() == "bo" ? "bo_multi" : GetParam();
  EXPECT_EQ(MakeStrategy(GetParam(), &space, 0)->name(), expected);
}

TEST_P(BayesOptTest, ExhaustsSmallSpaceExactlyOnceWithoutUpdates) {
  ConfigSpace space = ConstrainedSpace();
  const std::set<Config> valid = AllValid(space);
  auto s = MakeStrategy(GetParam(), &space, 11);
  std::vector<Config> all = Drain(*s, 5, 100000);
  std::set<Config> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a config was proposed twice";
  EXPECT_EQ(unique, valid);
  EXPECT_TRUE(s->Propose(3).empty());
}

TEST_P(BayesOptTest, ExhaustsSmallSpaceExactlyOnceWithUpdates) {
  ConfigSpace space = ConstrainedSpace();
  const std::set<Config> valid = AllValid(space);
  auto s = MakeStrategy(GetParam(), &space, 12);
  auto objective = [](const Config& c) {
    if (c[2] == 2 && c[0] == 5) return MeasuredConfig{c, INFINITY, false};
    return MeasuredConfig{c, test::LinearCost(c), true};
  };
  const std::vector<Config> order = Drive(*s, space, 1000, 4, objective).proposed;
  EXPECT_EQ(std::set<Config>(order.begin(), order.end()), valid);
  EXPECT_EQ(order.size(), valid.size());
  EXPECT_TRUE(s->Propose(4).empty());
}

TEST_P(BayesOptTest, NeverProposesInvalidOrReportedConfigsOverManyRounds) {
  ConfigSpace space = BowlWithFixedKnob();
  auto s = MakeStrategy(GetParam(), &space, 3);
  // 40 configs loaded on resume (some of them failures), then 30 rounds of 1 to 7; every third
  // round's results arrive late (pipelined measuring): proposals made meanwhile must be new.
  test::ExpectFreshProposalsAfterResume(*s, space, Bowl, 40, 30, 7, 3);
  EXPECT_TRUE(s->Propose(-2).empty());
}

TEST_P(BayesOptTest, DeterministicForASeedAndHistory) {
  ConfigSpace space = BowlWithFixedKnob();
  auto a = MakeStrategy(GetParam(), &space, 99);
  auto b = MakeStrategy(GetParam(), &space, 99);
  auto c = MakeStrategy(GetParam(), &space, 100);
  const std::vector<Config> order_a = Drive(*a, space, 40, 6, Bowl).proposed;
  const std::vector<Config> order_b = Drive(*b, space, 40, 6, Bowl).proposed;
  const std::vector<Config> order_c = Drive(*c, space, 40, 6, Bowl).proposed;
  EXPECT_EQ(order_a, order_b);
  EXPECT_NE(order_a, order_c);
}

TEST_P(BayesOptTest, SpaceWithNoValidPointGivesNothing) {
  ConfigSpace small = ConstrainedSpace();
  small.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(MakeStrategy(GetParam(), &small, 1)->Propose(8).empty());
  ConfigSpace large = BowlWithFixedKnob();
  large.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(MakeStrategy(GetParam(), &large, 1)->Propose(8).empty());
}

TEST_P(BayesOptTest, AllFailuresStillProposeValidNewConfigs) {
  ConfigSpace space = BowlWithFixedKnob();
  auto s = MakeStrategy(GetParam(), &space, 4);
  auto fail = [](const Config& c) { return MeasuredConfig{c, INFINITY, false}; };
  Drive(*s, space, 30, 5, fail);
}

INSTANTIATE_TEST_SUITE_P(Strategies, BayesOptTest,
                         ::testing::Values("bo_ei", "bo_pi", "bo_ucb", "bo_multi", "bo"),
                         [](const auto& info) { return info.param; });

// The comparison rule (test::ExpectBeatRandomOnRuggedBowl), on RuggedBowl at a budget of 50
// evaluations in batches of 5 over 20 seeds: a strategy's mean excess over the optimum (mean
// best/optimum - 1) must be at most a quarter of random search's, a rule random search itself
// does not meet under other seeds. (Measured when written: random 4.22, bo_ei 1.05, bo_multi
// 1.09, i.e. excess shares of about 0.02 and 0.03; random under other seeds: 0.78.)
TEST(BayesOptComparisonTest, BeatRandomSearchOnARuggedConstrainedBowl) {
  test::ExpectBeatRandomOnRuggedBowl({"bo_ei", "bo_multi"}, BowlWithFixedKnob(), /*control_seed=*/1000,
                                     /*share=*/0.25);
}

TEST(BayesOptMultiTest, PortfolioBookkeepingIsConsistent) {
  ConfigSpace space = BowlWithFixedKnob();
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

TEST(BayesOptModelTest, TrainedCostModelNominatesCandidates) {
  ConfigSpace space = BowlWithFixedKnob();
  // Trained from the start; prefers configs near (a, b, c, d, e) = (5, 5, 2, 5, 4).
  test::FunctionCostModel model([](const Config& c) {
    return -std::abs(c[0] - 5) - std::abs(c[1] - 5) - std::abs(c[2] - 2) - std::abs(c[3] - 5) -
           std::abs(c[4] - 4);
  });
  auto a = MakeStrategy("bo_ei", &space, 21);
  auto b = MakeStrategy("bo_ei", &space, 21);
  a->SetCostModel(&model);
  b->SetCostModel(&model);
  const std::vector<Config> order_a = Drive(*a, space, 30, 5, Bowl).proposed;
  const std::vector<Config> order_b = Drive(*b, space, 30, 5, Bowl).proposed;
  EXPECT_GT(model.calls(), 0);
  EXPECT_EQ(order_a, order_b);
}

// A knob with labels is categorical (one-hot): its options are all at the same distance from
// each other; an unlabelled numeric knob keeps its order.
TEST(BayesOptEncodingTest, LabelledKnobOptionsAreEquidistantAndNumericKnobsKeepOrder) {
  ConfigSpace space;
  space.AddChoice("order", {0, 1, 2, 3}, {"mnk", "mkn", "nmk", "kmn"});
  space.AddChoice("unroll", {1, 2, 4, 8, 16});
  BayesOptStrategy s(&space, 3, BayesOptOptions{}, BayesOptStrategy::Mode::kExpectedImprovement);
  ASSERT_EQ(s.encoded_dimension(), 4 + 1);
  auto distance = [&](const Config& a, const Config& b) {
    const std::vector<double> pa = s.Encode(a);
    const std::vector<double> pb = s.Encode(b);
    double d = 0;
    for (size_t k = 0; k < pa.size(); ++k) d += (pa[k] - pb[k]) * (pa[k] - pb[k]);
    return std::sqrt(d);
  };
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) EXPECT_NEAR(distance({a, 2}, {b, 2}), 1.0, 1e-12) << a << " vs " << b;
    }
  }
  for (int u = 0; u + 1 < 5; ++u) {
    EXPECT_LT(distance({0, 0}, {0, u}), distance({0, 0}, {0, u + 1}));
  }
  EXPECT_NEAR(distance({1, 0}, {1, 4}), 1.0, 1e-12);
}

// The initial design is a Latin hypercube: on 4 knobs of 5 options, the first 10 proposals
// cover every option of a knob far more often than 10 uniform draws do (for those, the chance
// that one knob shows all 5 options is about 0.52).
TEST(BayesOptDesignTest, InitialDesignCoversEveryKnobsRange) {
  ConfigSpace space;
  for (const char* name : {"p", "q", "r", "s"}) space.AddChoice(name, {1, 2, 3, 4, 5});
  int covered = 0;
  int total = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    BayesOptStrategy s(&space, seed * 7919, BayesOptOptions{},
                       BayesOptStrategy::Mode::kExpectedImprovement);
    std::vector<Config> design;
    while (design.size() < 10) {
      std::vector<Config> got = s.Propose(1);
      ASSERT_EQ(got.size(), 1u);
      design.push_back(got[0]);
      s.Update({{got[0], 1e-3 * (1 + got[0][0] + got[0][1]), true}});
    }
    for (int k = 0; k < 4; ++k) {
      std::set<int> values;
      for (const Config& c : design) values.insert(c[k]);
      covered += values.size() == 5 ? 1 : 0;
      ++total;
    }
  }
  EXPECT_GE(covered, total * 9 / 10) << covered << " of " << total;
}

// 10^4 points, knobs a..d with options 0..9; every config with a >= 7 fails at run time (30% of
// the space). The ok cost is a bowl centred at a = 8.5, so the model alone extrapolates the
// best costs into the failing region.
ConfigSpace BoFailureRegionSpace() {
  ConfigSpace space;
  for (const char* name : {"a", "b", "c", "d"}) space.AddChoice(name, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  return space;
}

MeasuredConfig BoFailureRegionCost(const Config& c) {
  if (c[0] >= 7) return {c, INFINITY, false};
  static const double kCentre[] = {8.5, 3.3, 6.1, 4.4};
  double q = 0;
  for (int k = 0; k < 4; ++k) q += ((c[k] - kCentre[k]) / 9.0) * ((c[k] - kCentre[k]) / 9.0);
  return {c, 1e-3 * std::exp(6.0 * q), true};
}

// Share of the proposals after the initial design that land in the failing region, over seeds.
double BoFailingShare(const std::string& name, double feasibility_weight) {
  ConfigSpace space = BoFailureRegionSpace();
  int failing = 0;
  int counted = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    StrategyOptions options = test::Seeded(seed * 104729);
    options.bo.feasibility_weight = feasibility_weight;
    if (feasibility_weight == 0) options.bo.min_feasibility = 0;
    auto s = MakeStrategy(name, &space, options);
    const std::vector<Config> order = Drive(*s, space, 60, 1, BoFailureRegionCost).proposed;
    for (size_t i = options.bo.initial_samples; i < order.size(); ++i) {
      failing += order[i][0] >= 7 ? 1 : 0;
      ++counted;
    }
  }
  return static_cast<double>(failing) / counted;
}

// Failures change where BO proposes: after seeing failures in the region, its proposals avoid
// it far more than random search (30%) does, and far more than the same strategy whose
// acquisition ignores failures (feasibility weight 0), which the bowl pulls into the region.
TEST(BayesOptFailureTest, ProposalsAvoidARegionThatAlwaysFails) {
  for (const char* name : {"bo_ei", "bo_ucb"}) {
    const double with_model = BoFailingShare(name, 1.0);
    const double ignoring = BoFailingShare(name, 0.0);
    std::printf("[ share ] %s: failing-region share %.3f (feasibility ignored: %.3f, random 0.3)\n",
                name, with_model, ignoring);
    EXPECT_LT(with_model, 0.1) << name;
    EXPECT_LT(with_model, 0.5 * ignoring) << name;
  }
}

TEST(BayesOptSpeedTest, ProposeOnALargeSpaceWithManyObservations) {
  // 10^5 points, 200 observations: prints the time of one Propose (not asserted on).
  ConfigSpace space = BowlWithFixedKnob();
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
