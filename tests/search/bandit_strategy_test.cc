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

namespace tune::search {
namespace {

// 72 points, the valid ones have inner product <= 8 (small: arms enumerate it).
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

// 10^5 points, x0 + x1 <= 12 (79% valid).
ConfigSpace BowlSpace() {
  ConfigSpace space;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    space.AddChoice(name, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  space.AddConstraint("a_plus_b_le_12", [](const Config& c) { return c[0] + c[1] <= 12; });
  return space;
}

// Quadratic bowl in log cost, best valid point on the constraint boundary; c >= 8 and
// e >= 8 fail.
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

// Propose(batch) -> objective -> Update for `budget` evaluations; checks every proposal and
// returns the best cost found.
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

TEST(BanditStrategyTest, CreateValidatesArms) {
  ConfigSpace space = SmallSpace();
  EXPECT_EQ(Make("bandit", &space, 0)->name(), "bandit");
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
  ConfigSpace space = SmallSpace();
  auto s = BanditStrategy::Create(&space, StrategyOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<BanditStrategy::ArmStats> arms = (*s)->arm_stats();
  ASSERT_EQ(arms.size(), 2u);
  EXPECT_EQ(arms[0].name, "random");
  EXPECT_EQ(arms[1].name, "bo_ei");
}

class BanditArmsTest : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  StrategyOptions Options() const {
    StrategyOptions options;
    options.bandit.arms = GetParam();
    return options;
  }
};

TEST_P(BanditArmsTest, ExhaustsSmallSpaceExactlyOnce) {
  ConfigSpace space = SmallSpace();
  const std::set<Config> valid = AllValid(space);
  // Without updates (arms do not know each other's proposals: the bandit dedupes) ...
  auto s = Make("bandit", &space, 11, Options());
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
  auto t = Make("bandit", &space, 12, Options());
  std::vector<Config> order;
  auto objective = [](const Config& c) {
    return MeasuredConfig{c, 1e-3 * (1 + c[0] + 2 * c[1] + c[2]), c[2] != 1};
  };
  Drive(*t, space, 1000, 3, objective, &order);
  EXPECT_EQ(order.size(), valid.size());
  EXPECT_EQ(std::set<Config>(order.begin(), order.end()), valid);
}

TEST_P(BanditArmsTest, NeverProposesInvalidOrReportedConfigsOverManyRounds) {
  ConfigSpace space = BowlSpace();
  auto s = Make("bandit", &space, 3, Options());
  std::vector<MeasuredConfig> resumed;
  std::set<Config> reported;
  std::mt19937_64 rng(5);
  while (resumed.size() < 30) {
    Config c(5, 0);
    for (int k = 0; k < 5; ++k) c[k] = static_cast<int32_t>(UniformBelow(rng, 10));
    if (!space.IsValid(c) || !reported.insert(c).second) continue;
    resumed.push_back(Bowl(c));
  }
  s->Update(resumed);
  std::set<Config> proposed;
  for (int round = 0; round < 25; ++round) {
    const int batch = 1 + round % 6;
    std::vector<Config> got = s->Propose(batch);
    ASSERT_EQ(static_cast<int>(got.size()), batch);
    std::vector<MeasuredConfig> results;
    for (const Config& c : got) {
      EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      EXPECT_EQ(reported.count(c), 0u) << "reported config proposed";
      EXPECT_TRUE(proposed.insert(c).second) << "config proposed twice";
      results.push_back(Bowl(c));
    }
    if (round % 4 != 3) s->Update(results);
  }
  EXPECT_TRUE(s->Propose(0).empty());
}

TEST_P(BanditArmsTest, DeterministicForASeedAndHistory) {
  ConfigSpace space = BowlSpace();
  std::vector<Config> a;
  std::vector<Config> b;
  std::vector<Config> c;
  Drive(*Make("bandit", &space, 8, Options()), space, 40, 5, Bowl, &a);
  Drive(*Make("bandit", &space, 8, Options()), space, 40, 5, Bowl, &b);
  Drive(*Make("bandit", &space, 9, Options()), space, 40, 5, Bowl, &c);
  EXPECT_EQ(a, b);
  const std::vector<std::string>& arms = GetParam();
  const bool seeded = std::any_of(arms.begin(), arms.end(),
                                  [](const std::string& arm) { return arm != "grid"; });
  if (seeded) EXPECT_NE(a, c);  // grid arms ignore the seed
}

TEST_P(BanditArmsTest, SpaceWithNoValidPointGivesNothing) {
  ConfigSpace space = SmallSpace();
  space.AddConstraint("never", [](const Config&) { return false; });
  EXPECT_TRUE(Make("bandit", &space, 1, Options())->Propose(6).empty());
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

// Counts Predict calls; prefers small knob indices.
class CountingModel : public CostModel {
 public:
  bool trained() const override { return true; }
  absl::Status Fit(const std::vector<Config>&, const std::vector<double>&) override {
    return absl::OkStatus();
  }
  std::vector<double> Predict(const std::vector<Config>& configs,
                              std::vector<double>* variance) override {
    ++calls;
    std::vector<double> out;
    for (const Config& c : configs) out.push_back(-(c[0] + c[1] + c[2] + c[3] + c[4]));
    if (variance != nullptr) variance->assign(configs.size(), 0.0);
    return out;
  }
  absl::StatusOr<std::string> Save() const override { return std::string(); }
  absl::Status Load(const std::string&) override { return absl::OkStatus(); }
  int calls = 0;
};

TEST(BanditStrategyTest, ForwardsTheCostModelToItsArms) {
  ConfigSpace space = BowlSpace();
  StrategyOptions options;
  options.bandit.arms = {"bo_ei"};  // the only arm; it consults a trained model
  auto s = Make("bandit", &space, 2, options);
  CountingModel model;
  s->SetCostModel(&model);
  Drive(*s, space, 20, 5, Bowl);
  EXPECT_GT(model.calls, 0);
}

double MeanBestRatio(const std::string& name, uint64_t first_seed, int seeds, int budget,
                     int batch) {
  ConfigSpace space = BowlSpace();
  double optimum = INFINITY;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    Config c = space.FromIndex(i);
    MeasuredConfig r = RuggedBowl(c);
    if (space.IsValid(c) && r.ok) optimum = std::min(optimum, r.cost);
  }
  double sum = 0;
  for (int i = 0; i < seeds; ++i) {
    auto s = Make(name, &space, first_seed + i);
    sum += Drive(*s, space, budget, batch, RuggedBowl) / optimum;
  }
  return sum / seeds;
}

// The comparison rule, on RuggedBowl at a budget of 50 evaluations in batches of 5 over 20
// seeds: the mean excess over the optimum (mean best/optimum - 1) must be at most a quarter
// of random search's. (Measured when written: random 3.79, bandit 1.12, an excess share of
// about 0.04; random under other seeds: 0.95.)
constexpr double kRequiredExcessShare = 0.25;
bool BeatsRandom(double strategy_ratio, double random_ratio) {
  return strategy_ratio - 1.0 <= kRequiredExcessShare * (random_ratio - 1.0);
}

TEST(BanditComparisonTest, BeatsRandomSearchOnARuggedConstrainedBowl) {
  const double random = MeanBestRatio("random", 0, 20, 50, 5);
  const double random_control = MeanBestRatio("random", 2000, 20, 50, 5);
  EXPECT_FALSE(BeatsRandom(random_control, random))
      << "random " << random << " vs random " << random_control;
  const double bandit = MeanBestRatio("bandit", 0, 20, 50, 5);
  std::printf("[ rugged bowl ] bandit mean best/optimum %.4f (random %.4f, random control %.4f)\n",
              bandit, random, random_control);
  EXPECT_TRUE(BeatsRandom(bandit, random)) << bandit << " vs random " << random;
}

}  // namespace
}  // namespace tune::search
