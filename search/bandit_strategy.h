// BanditStrategy: a multi-armed bandit (AUC credit, UCB exploration) over other strategies.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

class StrategyRegistry;

/// Which strategies BanditStrategy chooses between. Each arm is made by SearchStrategy::Create
/// from the same StrategyOptions (so the other strategies' settings reach the arms) with a seed
/// of its own. Keys for SetStrategyOption in brackets.
struct BanditOptions {
  /// [bandit_arms, a comma-separated list] Registered strategy names other than "bandit", at
  /// least one; a name may repeat (each copy is an arm with its own seed).
  std::vector<std::string> arms = {"random", "bo_ei"};
};

/// "bandit": chooses, for every slot of a batch, which of several strategies (its arms,
/// StrategyOptions::bandit.arms, each made by SearchStrategy::Create from the same options with
/// a seed derived from options.seed and the arm's position) proposes it.
///
/// Reward: a reported result earns its proposing arm 1 if it improved the best ok cost seen
/// so far (the first ok result earns nothing: there is nothing to improve on), else 0.
/// Score of an arm (OpenTuner's AUC bandit): over its last kWindow rewards r_1..r_h (oldest
/// first), AUC = sum(i * r_i) / (h (h + 1) / 2), which favours recent successes, plus
/// kExploration * sqrt(2 ln N / n_a), with n_a the arm's reported plus pending proposals and
/// N their sum over arms; an arm with n_a = 0 goes first. Slots of one batch are assigned one
/// at a time, each counting as pending for the next, so a batch spreads over arms while
/// their scores are uncertain.
///
/// Every arm hears every Update (so no arm re-proposes what another measured) and gets the
/// cost model. A config an arm proposes that was already proposed by this bandit (by another
/// arm) or reported is dropped, and that arm is asked again; an arm that returns fewer
/// configs than asked is exhausted and no longer asked. Propose returns fewer than `batch`
/// once every arm is exhausted. Deterministic for a seed and a sequence of Update calls.
class BanditStrategy : public SearchStrategy {
 public:
  static constexpr int kWindow = 50;
  static constexpr double kExploration = 0.2;

  struct ArmStats {
    std::string name;
    int proposed = 0;      // configs of this arm that the bandit proposed
    int measured = 0;      // of those, results reported
    int improvements = 0;  // rewards earned
    bool exhausted = false;
  };

  /// Registers "bandit" with `registry`. It reads StrategyOptions::bandit and passes the whole
  /// StrategyOptions on to its arms, so it lists only its own key (bandit_arms).
  static void Register(StrategyRegistry& registry);

  /// InvalidArgument when `options.bandit.arms` is empty, names "bandit", or names a strategy
  /// SearchStrategy::Create does not know. `space` is not owned and must outlive the result.
  static absl::StatusOr<std::unique_ptr<BanditStrategy>> Create(const ConfigSpace* space,
                                                                const StrategyOptions& options);

  std::string name() const override { return "bandit"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;
  /// Forwards to every arm.
  void SetCostModel(CostModel* model) override;

  std::vector<ArmStats> arm_stats() const;

 private:
  struct Arm {
    std::unique_ptr<SearchStrategy> strategy;
    ArmStats stats;
    std::deque<bool> rewards;  // last kWindow rewards, oldest first
    int pending = 0;
  };

  BanditStrategy(const ConfigSpace* space, std::vector<Arm> arms);
  int PickArm(const std::vector<int>& extra) const;

  const ConfigSpace* space_;
  std::vector<Arm> arms_;
  std::unordered_set<Config, ConfigHash> seen_;           // proposed or reported
  std::unordered_map<Config, int, ConfigHash> proposer_;  // pending config -> arm
  double best_cost_;
};

}  // namespace tune::search
