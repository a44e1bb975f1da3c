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
