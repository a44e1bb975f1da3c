// The SearchStrategy interface: proposes batches of configs and learns from their results.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "search/space.h"

namespace tune::search {

/// The outcome of one measured config as a strategy sees it. `cost` is seconds per call
/// (lower is better); a failed measurement has ok = false and cost = +infinity.
struct MeasuredConfig {
  Config config;
  double cost = std::numeric_limits<double>::infinity();
  bool ok = false;
};

struct StrategyOptions {
  uint64_t seed = 0;

  // Bayesian optimisation ("bo_ei", "bo_pi", "bo_ucb", "bo_multi" = "bo"; see
  // search/bayes_opt_strategy.h).
  /// Configs reported or pending before the Gaussian process guides proposals; until then
  /// proposals are uniformly random.
  int bo_initial_samples = 10;
  /// Random valid unseen configs scored by the acquisition per Propose (neighbours and
  /// mutations of the best measured configs are added to them).
  int bo_candidates = 2000;
  /// EI/PI exploration margin, in standard deviations of the observed log costs.
  double bo_xi = 0.01;
  /// UCB exploration weight: minimizes predicted log cost - bo_kappa * its deviation.
  double bo_kappa = 2.0;
  /// "bandit": the strategies it chooses between (created by name; not "bandit"). "sa" and
  /// "evolutionary" may join.
  std::vector<std::string> bandit_arms = {"random", "bo_ei"};

  // Model-guided strategies ("sa", "evolutionary"); both propose uniformly random configs
  // until the cost model is trained.
  /// Share of proposals, once the model is trained, that are uniformly random valid unseen
  /// configs, in [0, 1]. Carried across calls (0.05 with batches of 8 gives one random config
  /// every two or three batches) so small batches neither lose nor overspend it.
  double eps_greedy = 0.05;
  /// The random share while stalled: after `explore_after` results in a row that did not
  /// improve the best cost by more than 1% (search/model_guided_strategy.h).
  double eps_stalled = 0.5;
  int explore_after = 16;
  /// Share of SA chains / of the initial population started at the best measured configs
  /// (the rest: SA's persisted chain states, then random samples), in [0, 1].
  double measured_share = 0.25;
  /// Configs the model picks for one batch differ pairwise in at least this many knobs while
  /// candidates allow (search/diversity.h: SelectDiverse); 1 turns the rule off.
  int diversity_min_distance = 2;
  /// "sa": parallel Markov chains, annealing steps per Propose (temperature 1 -> 0), and
  /// the number of steps without a new top candidate after which a Propose stops early.
  int sa_chains = 128;
  int sa_steps = 200;
  int sa_early_stop = 50;
  /// "evolutionary": population size, generations per Propose, the chance a child is made
  /// by crossover of two parents (else by mutating one), and the chance a crossover child is
  /// mutated as well.
  int evo_population = 256;
  int evo_generations = 8;
  double evo_crossover_prob = 0.3;
  double evo_mutation_prob = 0.5;
};

/// Sets one field of `options` from text, as given by `--strategy-option KEY=VALUE`: KEY is the
/// field's name (eps_greedy, sa_chains, bo_kappa, bandit_arms as a comma-separated list, ...;
/// StrategyOptionNames lists them). InvalidArgument for an unknown key, a value that does not
/// parse or is out of the field's range; `options` is unchanged then.
absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key, const std::string& value);
/// Parses "KEY=VALUE" and calls SetStrategyOption.
absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key_equals_value);
/// The keys SetStrategyOption knows, in declaration order.
std::vector<std::string> StrategyOptionNames();

/// Proposes configs to measure. One instance serves one task's space and is not
/// thread-safe. The space must outlive the strategy.
class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;

  /// Creates a strategy by name ("random", "grid"); InvalidArgument for an unknown name.
  static absl::StatusOr<std::unique_ptr<SearchStrategy>> Create(const std::string& name,
                                                               const ConfigSpace* space,
                                                               const StrategyOptions& options);

  virtual std::string name() const = 0;
  /// Up to `batch` valid configs that were never proposed nor reported before. Fewer (or
  /// none) means the strategy has exhausted the space or could not find new valid points.
  virtual std::vector<Config> Propose(int batch) = 0;
  /// Reports measured results (proposed by this strategy or loaded from a record database on
  /// resume); reported configs are never proposed again.
  virtual void Update(const std::vector<MeasuredConfig>& results) = 0;
  /// Gives the strategy a cost model to rank candidates with; not owned, may be null.
  virtual void SetCostModel(CostModel* model) { cost_model_ = model; }

 protected:
  CostModel* cost_model_ = nullptr;
};

}  // namespace tune::search
