// Tests of the random and grid strategies and the SearchStrategy factory.
#include "search/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/random_strategy.h"
#include "search/space.h"
#include "tests/common/strategy_driver.h"
#include "tests/common/toy_space.h"

namespace tune::search {
namespace {

using test::AllValid;
using test::ConstrainedSpace;
using test::Drain;
using test::MakeStrategy;

TEST(FactoryTest, CreatesByNameAndRejectsUnknown) {
  ConfigSpace space = ConstrainedSpace();
  EXPECT_EQ(MakeStrategy("random", &space)->name(), "random");
  EXPECT_EQ(MakeStrategy("grid", &space)->name(), "grid");
  auto bad = SearchStrategy::Create("annealing-typo", &space, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("annealing-typo"));
}

class EveryStrategyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategyTest, ExhaustsValidPointsExactlyOnce) {
  ConfigSpace space = ConstrainedSpace();
  std::set<Config> valid = AllValid(space);
  ASSERT_GT(valid.size(), 5u);
  ASSERT_LT(valid.size(), space.Size());
  auto s = MakeStrategy(GetParam(), &space, 11);
  std::vector<Config> all = Drain(*s, 5);
  std::set<Config> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "a config was proposed twice";
  EXPECT_EQ(unique, valid);
  EXPECT_TRUE(s->Propose(5).empty());
  EXPECT_TRUE(s->Propose(1).empty());
}

TEST_P(EveryStrategyTest, ReportedConfigsAreNeverProposed) {
  ConfigSpace space = ConstrainedSpace();
  std::set<Config> valid = AllValid(space);
  auto s = MakeStrategy(GetParam(), &space, 5);
  // Report every third valid config up front, as a resume from a record database would.
  std::vector<MeasuredConfig> reported;
  int i = 0;
  for (const Config& c : valid) {
    if (i++ % 3 == 0) reported.push_back({c, 1e-3, true});
  }
  s->Update(reported);
  std::vector<Config> first = s->Propose(4);
  // Then report the proposed ones, as the tuning loop does after measuring.
  std::vector<MeasuredConfig> results;
  for (const Config& c : first) results.push_back({c, 2e-3, true});
  s->Update(results);
  std::vector<Config> rest = Drain(*s, 3);

  std::set<Config> reported_set;
  for (const auto& r : reported) reported_set.insert(r.config);
  std::set<Config> proposed(first.begin(), first.end());
  for (const Config& c : rest) {
    EXPECT_EQ(reported_set.count(c), 0u) << "reported config proposed";
    EXPECT_TRUE(proposed.insert(c).second) << "config proposed twice";
  }
  for (const Config& c : first) EXPECT_EQ(reported_set.count(c), 0u);
  EXPECT_EQ(proposed.size() + reported_set.size(), valid.size());
}

TEST_P(EveryStrategyTest, DeterministicForASeed) {
  ConfigSpace space = ConstrainedSpace();
  auto a = MakeStrategy(GetParam(), &space, 99);
  auto b = MakeStrategy(GetParam(), &space, 99);
  EXPECT_EQ(Drain(*a, 4), Drain(*b, 4));
}

TEST_P(EveryStrategyTest, NonPositiveBatchProposesNothing) {
  ConfigSpace space = ConstrainedSpace();
  auto s = MakeStrategy(GetParam(), &space);
  EXPECT_TRUE(s->Propose(0).empty());
  EXPECT_TRUE(s->Propose(-3).empty());
  EXPECT_EQ(Drain(*s, 100).size(), AllValid(space).size());
}

TEST_P(EveryStrategyTest, SpaceWithNoValidPointGivesNothing) {
  ConfigSpace space = ConstrainedSpace();
  space.AddConstraint("never", [](const Config&) { return false; });
  auto s = MakeStrategy(GetParam(), &space);
  EXPECT_TRUE(s->Propose(8).empty());
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategyTest, ::testing::Values("random", "grid"),
                         [](const auto& info) { return info.param; });

TEST(RandomStrategyTest, DifferentSeedsGiveDifferentOrders) {
  ConfigSpace space = ConstrainedSpace();
  auto a = MakeStrategy("random", &space, 1);
  auto b = MakeStrategy("random", &space, 2);
  std::vector<Config> order_a = Drain(*a, 4);
  std::vector<Config> order_b = Drain(*b, 4);
  EXPECT_NE(order_a, order_b);
  EXPECT_EQ(std::set<Config>(order_a.begin(), order_a.end()),
            std::set<Config>(order_b.begin(), order_b.end()));
}

TEST(RandomStrategyTest, OrderIsNotTheGridOrder) {
  ConfigSpace space = ConstrainedSpace();
  EXPECT_NE(Drain(*MakeStrategy("random", &space, 3), 4), Drain(*MakeStrategy("grid", &space), 4));
}

// A space above RandomStrategy::kPoolLimit points, sampled by rejection.
ConfigSpace LargeSpace() {
  ConfigSpace space;
  space.AddSplit("a", 1024, 3);  // 66 options
  space.AddSplit("b", 1024, 3);
  space.AddChoice("c", {0, 1, 2, 3, 4, 5, 6, 7});
  space.AddChoice("d", {0, 1, 2, 3});  // 66 * 66 * 8 * 4 = 139392 points
  return space;
}

TEST(RandomStrategyTest, LargeSpaceSamplesValidDistinctReproducibly) {
  ConfigSpace space = LargeSpace();
  space.AddConstraint("even_c", [](const Config& c) { return c[2] % 2 == 0; });
  ASSERT_GT(space.Size(), RandomStrategy::kPoolLimit);
  auto a = MakeStrategy("random", &space, 8);
  auto b = MakeStrategy("random", &space, 8);
  std::set<Config> seen;
  for (int round = 0; round < 20; ++round) {
    std::vector<Config> got = a->Propose(50);
    ASSERT_EQ(got.size(), 50u);
    EXPECT_EQ(got, b->Propose(50));
    std::vector<MeasuredConfig> results;
    for (const Config& c : got) {
      EXPECT_TRUE(space.IsValid(c));
      EXPECT_TRUE(seen.insert(c).second) << "repeat";
      results.push_back({c, 1.0, true});
    }
    a->Update(results);
  }
}

TEST(RandomStrategyTest, LargeSpaceNearlyAllInvalidGivesUpGracefully) {
  ConfigSpace space = LargeSpace();
  space.AddConstraint("tiny", [](const Config& c) { return c[0] == 0 && c[1] == 0 && c[3] == 0; });
  auto s = MakeStrategy("random", &space, 4);
  std::set<Config> seen;
  for (int round = 0; round < 3; ++round) {
    for (const Config& c : s->Propose(100)) {
      EXPECT_TRUE(space.IsValid(c));
      EXPECT_TRUE(seen.insert(c).second);
    }
  }
  EXPECT_LE(seen.size(), 8u);  // only 8 valid points exist
}

TEST(GridStrategyTest, WalksIndexOrderSkippingInvalid) {
  ConfigSpace space = ConstrainedSpace();
  auto s = MakeStrategy("grid", &space);
  std::vector<Config> all = Drain(*s, 7);
  std::vector<Config> expected;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    if (space.IsValid(c)) expected.push_back(c);
  }
  EXPECT_EQ(all, expected);
  // Batch size does not change the order.
  EXPECT_EQ(Drain(*MakeStrategy("grid", &space), 1), expected);
  EXPECT_EQ(Drain(*MakeStrategy("grid", &space), 1000), expected);
}

TEST(GridStrategyTest, UpdateAheadOfTheCursorSkipsThosePoints) {
  ConfigSpace space;
  space.AddChoice("x", {10, 20, 30, 40, 50});
  auto s = MakeStrategy("grid", &space);
  s->Update({{Config{1}, 1.0, true}, {Config{3}, INFINITY, false}});
  EXPECT_EQ(s->Propose(10), (std::vector<Config>{{0}, {2}, {4}}));
  EXPECT_TRUE(s->Propose(10).empty());
}

}  // namespace
}  // namespace tune::search

namespace tune::search {
namespace {

TEST(StrategyOptionTest, SetsNamedFields) {
  StrategyOptions o;
  ASSERT_TRUE(SetStrategyOption(o, "eps_greedy=0.25").ok());
  ASSERT_TRUE(SetStrategyOption(o, "sa_chains", "32").ok());
  ASSERT_TRUE(SetStrategyOption(o, "bandit_arms=random,sa").ok());
  ASSERT_TRUE(SetStrategyOption(o, "seed=18446744073709551615").ok());
  EXPECT_EQ(o.model_guided.eps_greedy, 0.25);
  EXPECT_EQ(o.sa.chains, 32);
  EXPECT_EQ(o.bandit.arms, (std::vector<std::string>{"random", "sa"}));
  EXPECT_EQ(o.seed, UINT64_MAX);
  const std::vector<std::string> names = StrategyOptionNames();
  for (const char* key : {"eps_greedy", "eps_stalled", "explore_after", "sa_steps", "evo_population", "bo_kappa"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), key), names.end()) << key;
  }
}

TEST(StrategyOptionTest, RejectsBadKeysAndValuesLeavingOptionsUnchanged) {
  StrategyOptions o;
  const StrategyOptions before = o;
  for (const char* text : {"no_such_option=1", "eps_greedy=1.5", "eps_greedy=-0.1", "eps_greedy=abc",
                           "sa_chains=0", "sa_chains=2.5", "bandit_arms=", "bandit_arms=random,bandit",
                           "eps_greedy", "=3", "seed=-1"}) {
    absl::Status st = SetStrategyOption(o, text);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_FALSE(st.message().empty()) << text;
  }
  EXPECT_EQ(o.model_guided.eps_greedy, before.model_guided.eps_greedy);
  EXPECT_EQ(o.sa.chains, before.sa.chains);
  EXPECT_EQ(o.bandit.arms, before.bandit.arms);
  EXPECT_EQ(o.seed, before.seed);
  EXPECT_NE(SetStrategyOption(o, "bogus=1").message().find("eps_greedy"), std::string::npos)
      << "the error lists the known keys";
}

}  // namespace
}  // namespace tune::search
