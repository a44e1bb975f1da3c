// Tests of the bandit-over-strategies search strategy.
#include "search/bandit_strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tests/common/fake_cost_model.h"
#include "tests/common/strategy_driver.h"
#include "tests/common/toy_space.h"

namespace tune::search {
namespace {

// The spaces: ConstrainedSpace (72 points, small: arms enumerate it) and BowlSpace (10^5
// points, rejection-sampled), with Bowl and RuggedBowl as their costs.
using test::AllValid;
using test::Bowl;
using test::BowlSpace;
using test::ConstrainedSpace;
using test::Drive;
using test::MakeStrategy;

TEST(BanditStrategyTest, CreateValidatesArms) {
  ConfigSpace space = ConstrainedSpace();
  EXPECT_EQ(MakeStrategy("bandit", &space, 0)->name(), "bandit");
  StrategyOptions options;
  options.bandit.arms = {};
  EXPECT_EQ(SearchStrategy::Create("bandit", &space, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.bandit.arms = {"random", "bandit"};
  EXPECT_EQ(SearchStrategy::Create("bandit", &space, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.bandit.arms = {"random", "no-such-strategy"};
  auto bad = SearchStrategy::Create("bandit", &space, options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("no-such-strategy"));
}

TEST(BanditStrategyTest, DefaultArms) {
  ConfigSpace space = ConstrainedSpace();
  auto s = BanditStrategy::Create(&space, StrategyOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<BanditStrategy::ArmStats> arms = (*s)->arm_stats();
  ASSERT_EQ(arms.size(), 2u);
  EXPECT_EQ(arms[0].name, "sa");
  EXPECT_EQ(arms[1].name, "bo_ucb");
}

class BanditArmsTest : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  StrategyOptions Options(uint64_t seed) const {
    StrategyOptions options = test::Seeded(seed);
    options.bandit.arms = GetParam();
    return options;
  }
};

TEST_P(BanditArmsTest, ExhaustsSmallSpaceExactlyOnce) {
  ConfigSpace space = ConstrainedSpace();
  const std::set<Config> valid = AllValid(space);
  // Without updates (arms do not know each other's proposals: the bandit dedupes) ...
  auto s = MakeStrategy("bandit", &space, Options(11));
  std::vector<Config> all;
  for (int i = 0; i < 1000; ++i) {
    std::vector<Config> got = s->Propose(5);
    EXPECT_LE(got.size(), 5u);
    if (got.empty()) break;
    all.insert(all.end(), got.begin(), got.end());
  }
  std::set<Config> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a config was proposed twice";
  EXPECT_EQ(unique, valid);
  EXPECT_TRUE(s->Propose(5).empty());
  // ... and with them.
  auto t = MakeStrategy("bandit", &space, Options(12));
  auto objective = [](const Config& c) { return MeasuredConfig{c, test::LinearCost(c), c[2] != 1}; };
  const std::vector<Config> order = Drive(*t, space, 1000, 3, objective).proposed;
  EXPECT_EQ(order.size(), valid.size());
  EXPECT_EQ(std::set<Config>(order.begin(), order.end()), valid);
}

TEST_P(BanditArmsTest, NeverProposesInvalidOrReportedConfigsOverManyRounds) {
  ConfigSpace space = BowlSpace();
  auto s = MakeStrategy("bandit", &space, Options(3));
  // 30 resumed configs, 25 rounds of 1 to 6, every fourth round's results never reported.
  test::ExpectFreshProposalsAfterResume(*s, space, Bowl, 30, 25, 6, 4);
}

TEST_P(BanditArmsTest, DeterministicForASeedAndHistory) {
  ConfigSpace space = BowlSpace();
  auto run = [&](uint64_t seed) {
    return Drive(*MakeStrategy("bandit", &space, Options(seed)), space, 40, 5, Bowl).proposed;
  };
  const std::vector<Config> a = run(8);
  const std::vector<Config> b = run(8);
  const std::vector<Config> c = run(9);
  EXPECT_EQ(a, b);
  const std::vector<std::string>& arms = GetParam();
  const bool seeded = std::any_of(arms.begin(), arms.end(),
                                  [](const std::string& arm) { return arm != "grid"; });
  if (seeded) EXPECT_NE(a, c);  // grid arms ignore the seed
}

TEST_P(BanditArmsTest, SpaceWithNoValidPointGivesNothing) {
  ConfigSpace space = ConstrainedSpace();
  space.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(MakeStrategy("bandit", &space, Options(1))->Propose(6).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Arms, BanditArmsTest,
    ::testing::Values(std::vector<std::string>{"random", "bo_ei"},
                      std::vector<std::string>{"grid", "random", "bo_multi"},
                      std::vector<std::string>{"grid", "grid"}),
    [](const auto& info) {
      std::string name;
      for (const std::string& arm : info.param) name += (name.empty() ? "" : "_") + arm;
      return name;
    });

TEST(BanditStrategyTest, CreditGoesToTheArmsThatProposedTheResults) {
  ConfigSpace space = BowlSpace();
  auto s = BanditStrategy::Create(&space, StrategyOptions{});
  ASSERT_TRUE(s.ok());
  BanditStrategy& bandit = **s;
  // Results the bandit did not propose (a resume) credit no arm.
  bandit.Update({Bowl({0, 0, 0, 0, 0}), Bowl({1, 1, 1, 1, 1})});
  Drive(bandit, space, 60, 5, Bowl);
  int proposed = 0;
  int measured = 0;
  for (const auto& arm : bandit.arm_stats()) {
    proposed += arm.proposed;
    measured += arm.measured;
    EXPECT_LE(arm.improvements, arm.measured);
    EXPECT_GT(arm.proposed, 0) << arm.name << " never got a slot";
  }
  EXPECT_EQ(proposed, 60);
  EXPECT_EQ(measured, 60);
}

TEST(BanditStrategyTest, ForwardsTheCostModelToItsArms) {
  ConfigSpace space = BowlSpace();
  StrategyOptions options;
  options.seed = 2;
  options.bandit.arms = {"bo_ei"};  // the only arm; it consults a trained model
  auto s = MakeStrategy("bandit", &space, options);
  // Trained from the start; prefers small knob indices.
  test::FunctionCostModel model([](const Config& c) { return -(c[0] + c[1] + c[2] + c[3] + c[4]); });
  s->SetCostModel(&model);
  Drive(*s, space, 20, 5, Bowl);
  EXPECT_GT(model.calls(), 0);
}

// The comparison rule (test::ExpectBeatRandomOnRuggedBowl), on RuggedBowl at a budget of 50
// evaluations in batches of 5 over 20 seeds: the mean excess over the optimum (mean
// best/optimum - 1) must be at most a quarter of random search's. (Measured when written:
// random 3.79, bandit 1.12, an excess share of about 0.04; random under other seeds: 0.95.)
TEST(BanditComparisonTest, BeatsRandomSearchOnARuggedConstrainedBowl) {
  test::ExpectBeatRandomOnRuggedBowl({"bandit"}, BowlSpace(), /*control_seed=*/2000, /*share=*/0.25);
}

}  // namespace
}  // namespace tune::search
