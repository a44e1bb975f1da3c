// BanditStrategy: a multi-armed bandit over other strategies (credit by improvement per
// evaluation, failures penalised, UCB exploration, a floor of slots per arm).
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
  /// least one; a name may repeat (each copy is an arm with its own seed). Default: "sa" (a
  /// model-guided search, steady on every recorded space) and "bo_ucb" (Bayesian optimisation,
  /// far ahead where the space is smooth), chosen by replay on recorded spaces
  /// (docs/BENCHMARKS.md, "Search strategies").
  std::vector<std::string> arms = {"sa", "bo_ucb"};
  /// [bandit_floor] Share of all slots reserved for exploration, split evenly between the arms
  /// not exhausted: each such arm gets at least floor / (their number) of the slots proposed so
  /// far; a fraction in [0, 1], where 0 turns the floor off.
  double floor = 0.1;
  /// [bandit_failure_penalty] A failed result (not ok, or no finite cost) earns its arm
  /// -failure_penalty; >= 0, in the units of the improvement rewards (which lie in [0, 1)).
  double failure_penalty = 0.1;
  /// [bandit_exploration] Weight of the UCB term of an arm's score (see BanditStrategy); >= 0.
  double exploration = 0.2;
  /// [bandit_window] Rewards per arm that its score averages (the most recent); a count >= 1.
  int window = 50;
};

/// "bandit": chooses, for every slot of a batch, which of several strategies (its arms,
/// StrategyOptions::bandit.arms, each made by SearchStrategy::Create from the same options with
/// a seed derived from options.seed and the arm's position) proposes it.
///
/// Reward of a reported result, credited to the arm that proposed it:
///   - a failure (not ok, or no finite cost): -failure_penalty;
///   - an ok result that improved the best ok cost seen so far, from b to c < b: with the gain
///     g = ln(b / c) and the running scale s (an exponential moving average, weight 1/4, of
///     the gains of all improvements so far, this one included), g / (g + s): an improvement
///     of typical size earns 1/2, a large one nearly 1, a marginal one nearly 0;
///   - any other ok result (the first one too: there is nothing to improve on): 0.
/// Score of an arm: over its last `window` rewards r_1..r_h (oldest first), the AUC-weighted
/// mean sum(i * r_i) / (h (h + 1) / 2) (OpenTuner's AUC credit: recent results weigh more;
/// a mean per evaluation, so an arm is not favoured for the number of configs it proposed),
/// plus exploration * sqrt(2 ln N / n_a), with n_a the arm's reported plus pending proposals
/// and N their sum over arms; an arm with n_a = 0 goes first.
/// Exploration floor: a slot goes first to an arm, not exhausted, whose slots so far (all it
/// proposed, this batch's assigned ones included) are below floor / A of all slots so far
/// plus this one, A being the number of arms not exhausted (the one furthest below first);
/// otherwise to the arm of the highest score (ties: the first arm). So no arm is starved, and
/// an arm whose proposals keep failing gets about its floor share and no more. Slots of one
/// batch are assigned one at a time, each counting as pending for the next, so a batch
/// spreads over arms while their scores are uncertain.
///
/// Every arm hears every Update (so no arm re-proposes what another measured) and gets the
/// cost model. A config an arm proposes that was already proposed by this bandit (by another
/// arm) or reported is dropped, and that arm is asked again; an arm that returns fewer
/// configs than asked is exhausted and no longer asked. Propose returns fewer than `batch`
/// once every arm is exhausted. Deterministic for a seed and a sequence of Update calls.
class BanditStrategy : public SearchStrategy {
 public:
  /// Weight of a new gain in the running scale of improvement gains.
  static constexpr double kScaleWeight = 0.25;

  /// What an arm did so far.
  struct ArmStats {
    std::string name;
    int proposed = 0;         // configs of this arm that the bandit proposed
    int measured = 0;         // of those, results reported
    int improvements = 0;     // of those, results that improved the best ok cost
    int failures = 0;         // of those, failed results
    double reward_sum = 0.0;  // sum of all its rewards (see the class comment)
    bool exhausted = false;
  };

  /// Registers "bandit" with `registry`. It reads StrategyOptions::bandit and passes the whole
  /// StrategyOptions on to its arms, so it lists only its own key (bandit_arms).
  static void Register(StrategyRegistry& registry);

  /// InvalidArgument when `options.bandit.arms` is empty, names "bandit", or names a strategy
  /// SearchStrategy::Create does not know, or when a bandit option is out of range. `space` is
  /// not owned and must outlive the result.
  static absl::StatusOr<std::unique_ptr<BanditStrategy>> Create(const ConfigSpace* space,
                                                                const StrategyOptions& options);
  /// The same with the arms made by `registry`'s factories instead of the global registry's
  /// (`registry` is only read during the call).
  static absl::StatusOr<std::unique_ptr<BanditStrategy>> Create(const ConfigSpace* space,
                                                                const StrategyOptions& options,
                                                                const StrategyRegistry& registry);

  std::string name() const override { return "bandit"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;
  /// Forwards to every arm.
  void SetCostModel(CostModel* model) override;

  /// Each arm's statistics, in the order of BanditOptions::arms.
  std::vector<ArmStats> arm_stats() const;

 private:
  struct Arm {
    std::unique_ptr<SearchStrategy> strategy;
    ArmStats stats;
    std::deque<double> rewards;  // last `window` rewards, oldest first
    int pending = 0;
  };

  BanditStrategy(const ConfigSpace* space, const BanditOptions& options, std::vector<Arm> arms);
  int PickArm(const std::vector<int>& extra) const;

  const ConfigSpace* space_;
  BanditOptions options_;
  std::vector<Arm> arms_;
  std::unordered_set<Config, ConfigHash> seen_;           // proposed or reported
  std::unordered_map<Config, int, ConfigHash> proposer_;  // pending config -> arm
  double best_cost_;
  double gain_scale_ = 0.0;  // running scale of improvement gains (0: none yet)
};

}  // namespace tune::search
