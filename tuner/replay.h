// Replay: search strategies run against a recorded Kernel Tuner space, and how they are scored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/kernel_tuner_cache.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::tuner {

/// The search space of a recorded cache: one choice knob per Kernel Tuner parameter, in
/// `tune_params_keys` order, whose options are that parameter's values in `tune_params` order
/// (so a Config's indices are the cache's value indices), plus one constraint, "recorded", that
/// holds iff the configuration is in the cache. Unrecorded configurations violate the kernel's
/// own constraints: they are infeasible, never proposed and never evaluated. Recorded failures
/// (compile/runtime) are feasible: proposing one costs an evaluation and yields a failure.
///
/// Immutable once created; const methods are safe to call from several threads. Not copyable
/// or movable (the constraint refers to the object).
class ReplaySpace {
 public:
  /// InvalidArgument (naming the file) when the cache has no successful configuration or its
  /// space has 2^63 or more points.
  static absl::StatusOr<std::unique_ptr<ReplaySpace>> Create(measure::KernelTunerCache cache);
  ReplaySpace(const ReplaySpace&) = delete;
  ReplaySpace& operator=(const ReplaySpace&) = delete;

  const search::ConfigSpace& space() const { return space_; }
  const measure::KernelTunerCache& cache() const { return cache_; }
  /// The recorded entry of `config`, or null when it is infeasible (or out of range).
  const measure::KernelTunerCache::Entry* Find(const search::Config& config) const;
  /// The replayed measurement of a recorded config: ok with cost = time_ms / 1000 (seconds),
  /// or ok = false with cost = +inf for a recorded failure. Aborts on an unrecorded config
  /// (callers check Find or space().IsValid first).
  search::MeasuredConfig Measure(const search::Config& config) const;

  /// Recorded configs (ok + failed): the population random search draws from.
  size_t recorded() const { return sorted_times_ms_.size(); }
  size_t failed() const { return failed_; }
  /// The fastest recorded time (ms), > 0.
  double optimum_ms() const { return sorted_times_ms_.front(); }
  /// Every recorded config's time (ms), ascending, failures as +inf at the end.
  const std::vector<double>& sorted_times_ms() const { return sorted_times_ms_; }

 private:
  explicit ReplaySpace(measure::KernelTunerCache cache);

  measure::KernelTunerCache cache_;
  search::ConfigSpace space_;
  std::unordered_map<uint64_t, uint32_t> entry_of_index_;  // ConfigSpace::ToIndex -> entry
  std::vector<double> sorted_times_ms_;
  size_t failed_ = 0;
};

// ---- Metrics -------------------------------------------------------------------------------
//
// Everything is scored on the FRACTION OF OPTIMUM f = optimum_ms / best_ms of a run after b
// evaluations (f in (0, 1]; f = 0 while a run has found no successful config). Time itself is
// not used because the expected best time of random search is +infinity whenever all b draws
// can be failures (b <= number of failed configs, e.g. pnpoly's 318), while f stays bounded.
//
// Random baseline (exact): random search draws b of the N recorded configs uniformly without
// replacement; failures are draws with time +inf (f = 0). With f_(1) >= f_(2) >= ... >= f_(N)
// the fractions sorted from the fastest config down, the best draw is the i-th fastest iff the
// i-th is drawn and none of the i-1 faster ones is:
//     P(best = i) = C(N-i, b-1) / C(N, b),
//     E[f_random(b)] = sum_{i=1}^{N-b+1} f_(i) * C(N-i, b-1) / C(N, b).
// Computed via the survival S(i) = P(none of the i-1 fastest drawn) = C(N-i+1, b) / C(N, b),
// S(1) = 1, S(i+1) = S(i) * (N-i+1-b) / (N-i+1), P(best = i) = S(i) - S(i+1). Ties are harmless
// (tied configs have equal f). For b >= N, E = 1.
//
// Methodology score (Willemsen et al.), on the fraction of optimum:
//     P(b) = (mean_runs f_strategy(b) - E[f_random(b)]) / (1 - E[f_random(b)]),
// 0 = no better than random search, 1 = the optimum in every run, negative = worse than
// random. P is affine in f, so the mean over runs of per-run P equals P of the mean fraction.
// Undefined (NaN) when E[f_random(b)] = 1, i.e. b >= N.

/// optimum_ms / best_ms; 0 when best_ms is +inf (nothing successful found yet).
double FractionOfOptimum(double optimum_ms, double best_ms);
/// E[f_random(draws)] over `sorted_times_ms` (ascending, +inf = failure, front() > 0 finite);
/// 0 for draws <= 0, 1 for draws >= size.
double RandomBaselineFraction(const std::vector<double>& sorted_times_ms, int64_t draws);
/// (strategy_fraction - random_fraction) / (1 - random_fraction); NaN when random_fraction >= 1.
double MethodologyScore(double strategy_fraction, double random_fraction);

// ---- Driver --------------------------------------------------------------------------------

struct ReplayOptions {
  std::string strategy = "random";
  int budget = 100;  // evaluations, failures included
  uint64_t seed = 0;
  /// Configs proposed per round. Default 1: the published methodology (and Kernel Tuner's
  /// strategies) evaluate one config at a time and let every result inform the next proposal;
  /// larger batches model a tuner that measures several candidates before learning.
  int batch = 1;
  /// Strategy settings (`--strategy-option`); their seed is replaced by `seed`.
  search::StrategyOptions strategy_options;
  /// Not owned; may be null. When set, the strategy gets it (SetCostModel) and, after each
  /// batch, the driver calls Fit with every result so far (failures at +inf), before the
  /// strategy's Update; batches before the first successful result skip the Fit.
  search::CostModel* cost_model = nullptr;
};

/// One replayed search.
struct ReplayTrace {
  std::vector<search::MeasuredConfig> evaluations;  // in evaluation order
  std::vector<double> best_ms;                      // best-so-far time after each evaluation (+inf: none ok)
  int failures = 0;                                 // evaluations of recorded failures
  bool exhausted = false;                           // the strategy stopped proposing before the budget

  /// Best time after min(b, evaluations) evaluations; +inf when none was ok (or b <= 0). A run
  /// that exhausted the space keeps its final best for larger b.
  double BestAt(int b) const;
};

/// Runs strategy `options.strategy` (SearchStrategy::Create, StrategyOptions{seed}) until
/// `options.budget` evaluations or until it proposes nothing. InvalidArgument for an unknown
/// strategy or bad options; Internal when the strategy breaks its contract (proposes an
/// infeasible or already proposed config, or more than asked); the cost model's Fit error.
absl::StatusOr<ReplayTrace> RunReplay(const ReplaySpace& space, const ReplayOptions& options);
/// The same with a caller-made strategy over space.space() (options.strategy is ignored).
absl::StatusOr<ReplayTrace> RunReplay(const ReplaySpace& space, search::SearchStrategy& strategy,
                                      const ReplayOptions& options);

/// The cost model called `name` for `space`, one per run, seeded with `seed`: costmodel/'s
/// CreateCostModel with the space as subject, so "xgb" / "xgb-reg" are XGBoost on knob-value
/// features (KnobCostModel; a replay space has no template). InvalidArgument for other names.
absl::StatusOr<std::unique_ptr<search::CostModel>> CreateReplayCostModel(const std::string& name,
                                                                        const ReplaySpace& space,
                                                                        uint64_t seed = 0);

// ---- Summary over runs ---------------------------------------------------------------------

/// 25, 50, 100, 200, ... (doubling) below `budget`, then `budget` itself.
std::vector<int> ReplayCheckpoints(int budget);

struct ReplayCheckpoint {
  int budget = 0;
  double mean_fraction = 0;    // mean over runs of f at this budget
  double sd_fraction = 0;      // sample standard deviation of f over runs (0 for one run)
  double random_fraction = 0;  // E[f_random(budget)], exact
  double score = 0;            // MethodologyScore(mean_fraction, random_fraction); NaN if undefined
  double mean_best_ms = 0;     // mean best time over runs; +inf when some run found none
  double min_best_ms = 0;      // best time any run found
};

/// Scores `runs` (at least one) at each checkpoint.
std::vector<ReplayCheckpoint> SummarizeReplay(const ReplaySpace& space, const std::vector<ReplayTrace>& runs,
                                              const std::vector<int>& checkpoints);

/// `tune replay CACHE --strategy S --budget B --runs R [--seed S] [--batch N] [--jobs J]
/// [--cost-model M]`: argv[1] is "replay". Prints the checkpoint table; returns 0, 2 for bad
/// flags or a malformed/unreadable cache (one line on stderr), 1 for a strategy failure.
int ReplayCommand(int argc, char** argv);

}  // namespace tune::tuner
