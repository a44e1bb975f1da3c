// Tests of the bandit's credit (improvement per evaluation, failures penalised) and of its
// exploration floor, with scripted arms whose configs encode their own cost.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/bandit_strategy.h"
#include "search/space.h"
#include "search/strategy.h"
#include "search/strategy_registry.h"

namespace tune::search {
namespace {

// Knobs: x (cost = x + 1 ms), fail (1: the config fails), arm (which scripted arm proposed
// it) and serial (the arm's proposal count), so every scripted proposal is new.
constexpr int kCreditX = 10000;
constexpr int kCreditSerials = 1000;

ConfigSpace CreditSpace() {
  ConfigSpace space;
  std::vector<int64_t> xs(kCreditX);
  for (int i = 0; i < kCreditX; ++i) xs[i] = i;
  space.AddChoice("x", xs);
  space.AddChoice("fail", {0, 1});
  space.AddChoice("arm", {0, 1, 2, 3});
  std::vector<int64_t> serials(kCreditSerials);
  for (int i = 0; i < kCreditSerials; ++i) serials[i] = i;
  space.AddChoice("serial", serials);
  return space;
}

MeasuredConfig CreditMeasure(const Config& c) {
  if (c[1] == 1) return {c, INFINITY, false};
  return {c, 1e-3 * (c[0] + 1), true};
}

enum class CreditArmKind { kImprover, kRare, kIdle, kFailing };

// A scripted arm. kImprover proposes one below the best x reported so far (every proposal
// improves), kRare does so on every tenth proposal and otherwise proposes a slow config,
// kIdle only proposes slow configs (never improving, never failing), kFailing only failing
// ones.
class CreditArm : public SearchStrategy {
 public:
  CreditArm(CreditArmKind kind, int id) : kind_(kind), id_(id) {}
  std::string name() const override { return "credit_arm"; }
  std::vector<Config> Propose(int batch) override {
    std::vector<Config> out;
    for (int i = 0; i < batch; ++i, ++count_) {
      const int slow = kCreditX - 500 + (count_ % 500);  // ascending: never improves twice
      int x = slow;
      int fail = 0;
      switch (kind_) {
        case CreditArmKind::kImprover: x = std::max(0, best_x_ - 1 - i); break;
        case CreditArmKind::kRare: x = count_ % 10 == 9 ? std::max(0, best_x_ - 1 - i) : slow; break;
        case CreditArmKind::kIdle: break;
        case CreditArmKind::kFailing: fail = 1; break;
      }
      out.push_back({x, fail, id_, count_ % kCreditSerials});
    }
    return out;
  }
  void Update(const std::vector<MeasuredConfig>& results) override {
    for (const MeasuredConfig& r : results) {
      if (r.ok) best_x_ = std::min(best_x_, static_cast<int>(r.config[0]));
    }
  }

 private:
  CreditArmKind kind_;
  int id_;
  int count_ = 0;
  int best_x_ = kCreditX - 1;
};

// A registry of the four scripted arms; each arm's id (its "arm" knob) is its kind's number.
StrategyRegistry CreditRegistry() {
  StrategyRegistry registry;
  const std::pair<const char*, CreditArmKind> kinds[] = {{"improver", CreditArmKind::kImprover},
                                                         {"rare", CreditArmKind::kRare},
                                                         {"idle", CreditArmKind::kIdle},
                                                         {"failing", CreditArmKind::kFailing}};
  for (const auto& [name, kind] : kinds) {
    const CreditArmKind k = kind;
    registry.Register({name,
                       [k](const ConfigSpace*, const StrategyOptions&)
                           -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
                         return std::unique_ptr<SearchStrategy>(
                             new CreditArm(k, static_cast<int>(k)));
                       },
                       {}});
  }
  return registry;
}

// Runs a bandit over `arms` for `budget` configs in batches of 1..4 (drawn from `seed`),
// calling `check` after each Update; the final arm statistics.
std::vector<BanditStrategy::ArmStats> RunCreditBandit(
    const std::vector<std::string>& arms, int budget, uint64_t seed,
    const std::function<void(const BanditStrategy&)>& check = nullptr) {
  ConfigSpace space = CreditSpace();
  StrategyOptions options;
  options.seed = seed;
  options.bandit.arms = arms;
  auto bandit = BanditStrategy::Create(&space, options, CreditRegistry());
  EXPECT_TRUE(bandit.ok()) << bandit.status();
  if (!bandit.ok()) return {};
  uint64_t state = seed * 2654435761u + 1;
  int used = 0;
  while (used < budget) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int batch = std::min(budget - used, 1 + static_cast<int>((state >> 33) % 4));
    std::vector<Config> proposed = (*bandit)->Propose(batch);
    EXPECT_EQ(static_cast<int>(proposed.size()), batch);
    if (proposed.empty()) break;
    std::vector<MeasuredConfig> results;
    for (const Config& c : proposed) results.push_back(CreditMeasure(c));
    (*bandit)->Update(results);
    used += static_cast<int>(proposed.size());
    if (check) check(**bandit);
  }
  return (*bandit)->arm_stats();
}

TEST(BanditCreditTest, AnArmWhoseProposalsAlwaysFailGetsAboutTheFloorShare) {
  const double floor = StrategyOptions{}.bandit.floor;
  for (uint64_t seed : {3u, 17u, 40u}) {
    const std::vector<std::string> arms = {"improver", "rare", "failing"};
    const int budget = 300;
    std::vector<BanditStrategy::ArmStats> stats = RunCreditBandit(arms, budget, seed);
    ASSERT_EQ(stats.size(), 3u);
    EXPECT_EQ(stats[2].failures, stats[2].measured);
    EXPECT_LT(stats[2].reward_sum, 0);
    // Its floor is floor / 3 of the slots; a slot or two more while the first results come in.
    EXPECT_LE(stats[2].proposed, std::ceil(floor / 3 * budget) + 2) << "seed " << seed;
    EXPECT_GE(stats[2].proposed, std::floor(floor / 3 * budget) - 1) << "seed " << seed;
  }
  // Against an arm that never improves but never fails either, the failing arm still gets
  // well below an even split (UCB exploration adds a little to its floor).
  std::vector<BanditStrategy::ArmStats> stats = RunCreditBandit({"idle", "failing"}, 300, 5);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_LE(stats[1].proposed, 0.15 * 300);
  EXPECT_GT(stats[0].proposed, 4 * stats[1].proposed);
}

TEST(BanditCreditTest, AnArmThatImprovesMorePerEvaluationGetsMoreSlots) {
  for (uint64_t seed : {1u, 2u, 9u}) {
    std::vector<BanditStrategy::ArmStats> stats = RunCreditBandit({"rare", "improver"}, 200, seed);
    ASSERT_EQ(stats.size(), 2u);
    EXPECT_GT(stats[1].improvements, stats[1].measured * 9 / 10);  // the script works
    EXPECT_LT(stats[0].improvements, stats[0].measured / 4);
    // Per evaluation, not per volume: the improver gets most of the slots.
    EXPECT_GT(stats[1].proposed, 3 * stats[0].proposed) << "seed " << seed;
    EXPECT_GT(stats[1].reward_sum / stats[1].measured, stats[0].reward_sum / stats[0].measured);
  }
}

TEST(BanditCreditTest, NoArmFallsBelowTheFloor) {
  const double floor = StrategyOptions{}.bandit.floor;
  for (uint64_t seed : {4u, 8u}) {
    int checks = 0;
    RunCreditBandit({"improver", "idle", "failing", "idle"}, 400, seed,
                    [&](const BanditStrategy& bandit) {
                      std::vector<BanditStrategy::ArmStats> stats = bandit.arm_stats();
                      int total = 0;
                      for (const auto& arm : stats) total += arm.proposed;
                      for (const auto& arm : stats) {
                        // At most one batch (4 slots) behind, when a batch went elsewhere.
                        EXPECT_GE(arm.proposed, floor / 4 * total - 4)
                            << arm.name << " at " << total << " slots, seed " << seed;
                      }
                      ++checks;
                    });
    EXPECT_GT(checks, 80);
  }
}

TEST(BanditCreditTest, TheFloorIsWhatKeepsAnUnrewardedArmAlive) {
  auto idle_slots = [](double floor) {
    ConfigSpace space = CreditSpace();
    StrategyOptions options;
    options.bandit.arms = {"improver", "idle"};
    options.bandit.floor = floor;
    auto bandit = BanditStrategy::Create(&space, options, CreditRegistry());
    EXPECT_TRUE(bandit.ok());
    for (int i = 0; i < 200; ++i) {
      std::vector<Config> got = (*bandit)->Propose(1);
      EXPECT_EQ(got.size(), 1u);
      if (got.empty()) break;
      (*bandit)->Update({CreditMeasure(got[0])});
    }
    return (*bandit)->arm_stats()[1].proposed;
  };
  // Without a floor only UCB exploration reaches the idle arm: a few slots (11 when written).
  EXPECT_LE(idle_slots(0), 15);
  EXPECT_GE(idle_slots(0.3), 0.3 / 2 * 200 - 1);
}

TEST(BanditCreditTest, OptionsOutOfRangeAreRefused) {
  ConfigSpace space = CreditSpace();
  for (const char* bad : {"bandit_floor=1.5", "bandit_floor=-0.1", "bandit_failure_penalty=-1",
                          "bandit_window=0", "bandit_exploration=-2"}) {
    StrategyOptions options;
    EXPECT_FALSE(SetStrategyOption(options, bad).ok()) << bad;
  }
  StrategyOptions options;
  ASSERT_TRUE(SetStrategyOption(options, "bandit_floor=0.3").ok());
  ASSERT_TRUE(SetStrategyOption(options, "bandit_window=7").ok());
  EXPECT_EQ(options.bandit.floor, 0.3);
  EXPECT_EQ(options.bandit.window, 7);
  options.bandit.floor = 2;  // set directly, past the key's check
  EXPECT_EQ(BanditStrategy::Create(&space, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tune::search
