// Tests of the random and grid strategies, the SearchStrategy factory and its registry, and
// the text form of StrategyOptions.
#include "search/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/auto_strategy.h"
#include "search/grid_strategy.h"
#include "search/random_strategy.h"
#include "search/space.h"
#include "search/strategy_registry.h"
#include "tests/common/strategy_driver.h"
#include "tests/common/test_seed.h"
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
  for (const std::string& name : StrategyRegistry::Global().Names()) {
    EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr(name))
        << "the error lists the registered names";
  }
}

TEST(StrategyRegistryTest, RegistersTheBuiltInStrategiesInOrder) {
  const StrategyRegistry& registry = StrategyRegistry::Global();
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"random", "grid", "sa", "evolutionary", "bo", "bo_ei",
                                                        "bo_pi", "bo_ucb", "bo_multi", "bandit", "auto"}));
  ConfigSpace space = ConstrainedSpace();
  for (const std::string& name : registry.Names()) {
    auto s = SearchStrategy::Create(name, &space, StrategyOptions{3});
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    const std::string expected = name == "bo" ? "bo_multi" : name == "auto" ? AutoStrategy::Choice() : name;
    EXPECT_EQ((*s)->name(), expected);
  }
  EXPECT_EQ(registry.Find("no-such-strategy"), nullptr);
}

std::vector<std::string> KeysOf(const std::string& strategy) {
  const StrategyEntry* entry = StrategyRegistry::Global().Find(strategy);
  EXPECT_NE(entry, nullptr) << strategy;
  std::vector<std::string> keys;
  if (entry != nullptr) {
    for (const StrategyOptionKey& k : entry->option_keys) keys.push_back(k.name);
  }
  return keys;
}

TEST(StrategyRegistryTest, EachStrategyListsTheKeysItReads) {
  const std::vector<std::string> guided = {"eps_greedy", "eps_stalled", "explore_after", "stalled_local", "measured_share",
                                           "diversity_min_distance", "failure_threshold"};
  const std::vector<std::string> bo_keys = {"bo_initial_samples", "bo_candidates",         "bo_xi",
                                            "bo_kappa",           "bo_feasibility_weight", "bo_min_feasibility",
                                            "bo_climb_starts",    "bo_ard",                "bo_log_values"};
  const std::vector<std::string> bandit_keys = {"bandit_arms", "bandit_floor", "bandit_failure_penalty",
                                                "bandit_exploration", "bandit_window"};
  auto with = [&](std::vector<std::string> own) {
    std::vector<std::string> keys = guided;
    keys.insert(keys.end(), own.begin(), own.end());
    return keys;
  };
  EXPECT_EQ(KeysOf("random"), std::vector<std::string>{});
  EXPECT_EQ(KeysOf("grid"), std::vector<std::string>{});
  EXPECT_EQ(KeysOf("sa"), with({"sa_chains", "sa_steps", "sa_early_stop"}));
  EXPECT_EQ(KeysOf("evolutionary"),
            with({"evo_population", "evo_generations", "evo_crossover_prob", "evo_mutation_prob"}));
  for (const char* bo : {"bo", "bo_ei", "bo_pi", "bo_ucb", "bo_multi"}) {
    EXPECT_EQ(KeysOf(bo), bo_keys) << bo;
  }
  EXPECT_EQ(KeysOf("bandit"), bandit_keys);
  EXPECT_EQ(KeysOf("auto"), std::vector<std::string>{}) << "auto's choice lists the keys it reads";
  // StrategyOptionNames: seed, then the union in registration order, each key once.
  std::vector<std::string> all = {"seed"};
  std::vector<std::string> own = {"sa_chains",       "sa_steps",           "sa_early_stop",
                                  "evo_population",  "evo_generations",    "evo_crossover_prob",
                                  "evo_mutation_prob"};
  own.insert(own.end(), bo_keys.begin(), bo_keys.end());
  own.insert(own.end(), bandit_keys.begin(), bandit_keys.end());
  for (const std::string& key : with(own)) all.push_back(key);
  EXPECT_EQ(StrategyOptionNames(), all);
}

// A strategy registered on a registry of its own: the factory gets the options, and its keys
// become known to that registry.
TEST(StrategyRegistryTest, RegistersAFactoryAndItsKeys) {
  StrategyRegistry registry;
  uint64_t created_with_seed = 0;
  registry.Register({"fixed_grid",
                     [&](const ConfigSpace* space, const StrategyOptions& options)
                         -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
                       created_with_seed = options.seed;
                       return std::unique_ptr<SearchStrategy>(new GridStrategy(space));
                     },
                     {IntOptionKey("fixed_chains", &StrategyOptions::sa, &SaOptions::chains, 1, 4)}});
  ConfigSpace space = ConstrainedSpace();
  const StrategyEntry* entry = registry.Find("fixed_grid");
  ASSERT_NE(entry, nullptr);
  auto s = entry->create(&space, StrategyOptions{42});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->name(), "grid");
  EXPECT_EQ(created_with_seed, 42u);
  EXPECT_EQ(registry.OptionNames(), (std::vector<std::string>{"seed", "fixed_chains"}));
  StrategyOptions o;
  const StrategyOptionKey* key = registry.FindOption("fixed_chains");
  ASSERT_NE(key, nullptr);
  EXPECT_TRUE(key->set(o, "3").ok());
  EXPECT_EQ(o.sa.chains, 3);
  EXPECT_EQ(key->set(o, "5").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.sa.chains, 3);
  EXPECT_EQ(registry.FindOption("sa_chains"), nullptr) << "not registered here";
  EXPECT_NE(registry.FindOption("seed"), nullptr);
}

// "auto" is another registered strategy: it makes its choice, which proposes exactly what that
// strategy proposes for the same seed and options, and it is the tuner's default.
TEST(AutoStrategyTest, IsItsChoiceForTheSameSeed) {
  ConfigSpace space = ConstrainedSpace();
  const std::string choice = AutoStrategy::Choice();
  EXPECT_NE(choice, "auto");
  ASSERT_NE(StrategyRegistry::Global().Find(choice), nullptr) << choice << " is not registered";
  auto a = SearchStrategy::Create("auto", &space, StrategyOptions{test::kTestSeed});
  auto b = SearchStrategy::Create(choice, &space, StrategyOptions{test::kTestSeed});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int round = 0; round < 3; ++round) {
    const std::vector<Config> pa = (*a)->Propose(4), pb = (*b)->Propose(4);
    EXPECT_EQ(pa, pb) << "round " << round;
    ASSERT_FALSE(pa.empty());
    std::vector<MeasuredConfig> results;
    for (size_t i = 0; i < pa.size(); ++i) results.push_back({pa[i], 1.0 + 0.25 * static_cast<double>(i), true});
    (*a)->Update(results);
    (*b)->Update(results);
  }
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

TEST(StrategyOptionTest, EveryKeySetsItsStrategysField) {
  StrategyOptions o;
  for (const char* text :
       {"eps_stalled=0.75", "explore_after=5", "stalled_local=0.25", "measured_share=0.5", "diversity_min_distance=3", "sa_steps=7",
        "sa_early_stop=9", "evo_population=64", "evo_generations=2", "evo_crossover_prob=0.125",
        "evo_mutation_prob=0.25", "bo_initial_samples=4", "bo_candidates=300", "bo_xi=0.5", "bo_kappa=1.5"}) {
    ASSERT_TRUE(SetStrategyOption(o, text).ok()) << text;
  }
  EXPECT_EQ(o.model_guided.eps_stalled, 0.75);
  EXPECT_EQ(o.model_guided.explore_after, 5);
  EXPECT_EQ(o.model_guided.stalled_local, 0.25);
  EXPECT_EQ(o.model_guided.measured_share, 0.5);
  EXPECT_EQ(o.model_guided.diversity_min_distance, 3);
  EXPECT_EQ(o.sa.steps, 7);
  EXPECT_EQ(o.sa.early_stop, 9);
  EXPECT_EQ(o.evolutionary.population, 64);
  EXPECT_EQ(o.evolutionary.generations, 2);
  EXPECT_EQ(o.evolutionary.crossover_prob, 0.125);
  EXPECT_EQ(o.evolutionary.mutation_prob, 0.25);
  EXPECT_EQ(o.bo.initial_samples, 4);
  EXPECT_EQ(o.bo.candidates, 300);
  EXPECT_EQ(o.bo.xi, 0.5);
  EXPECT_EQ(o.bo.kappa, 1.5);
}

// Options that size a pool of configs held at once are refused beyond kMaxPoolOption, so a
// request cannot make a strategy allocate a billion configs.
TEST(StrategyOptionTest, PoolSizesAreBounded) {
  std::mt19937_64 rng = test::TestRng();
  for (const char* key : {"sa_chains", "evo_population", "bo_candidates"}) {
    StrategyOptions o;
    EXPECT_TRUE(SetStrategyOption(o, key, std::to_string(kMaxPoolOption)).ok()) << key;
    const int over = std::uniform_int_distribution<int>(kMaxPoolOption + 1, kMaxCountOption)(rng);
    absl::Status st = SetStrategyOption(o, key, std::to_string(over));
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << key << "=" << over << ": " << st;
  }
}

// The defaults are part of every recorded run's behaviour (replays, saved fractions).
TEST(StrategyOptionTest, Defaults) {
  const StrategyOptions o;
  EXPECT_EQ(o.seed, 0u);
  EXPECT_EQ(o.model_guided.eps_greedy, 0.05);
  EXPECT_EQ(o.model_guided.eps_stalled, 0.5);
  EXPECT_EQ(o.model_guided.explore_after, 16);
  EXPECT_EQ(o.model_guided.stalled_local, 0.5);
  EXPECT_EQ(o.model_guided.measured_share, 0.25);
  EXPECT_EQ(o.model_guided.diversity_min_distance, 2);
  EXPECT_EQ(o.sa.chains, 128);
  EXPECT_EQ(o.sa.steps, 200);
  EXPECT_EQ(o.sa.early_stop, 50);
  EXPECT_EQ(o.evolutionary.population, 256);
  EXPECT_EQ(o.evolutionary.generations, 8);
  EXPECT_EQ(o.evolutionary.crossover_prob, 0.3);
  EXPECT_EQ(o.evolutionary.mutation_prob, 0.5);
  EXPECT_EQ(o.bo.initial_samples, 10);
  EXPECT_EQ(o.bo.candidates, 2000);
  EXPECT_EQ(o.bo.xi, 0.01);
  EXPECT_EQ(o.bo.kappa, 2.0);
  EXPECT_EQ(o.bandit.arms, (std::vector<std::string>{"sa", "bo_ucb"}));
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
  const absl::Status unknown = SetStrategyOption(o, "bogus=1");
  EXPECT_THAT(std::string(unknown.message()), ::testing::HasSubstr("unknown strategy option 'bogus'"));
  for (const std::string& key : StrategyOptionNames()) {
    EXPECT_THAT(std::string(unknown.message()), ::testing::HasSubstr(key))
        << "the error lists the known keys";
  }
}

}  // namespace
}  // namespace tune::search
