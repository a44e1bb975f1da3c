// Replay: the tuning loop run against a recorded Kernel Tuner space, and how its runs are scored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/kernel_tuner_cache.h"
#include "measure/replay_space.h"
#include "measure/replay_task.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::tuner {

using measure::ReplaySpace;
using measure::ReplayTrace;

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

/// How one replayed search is run.
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

/// Runs the tuning loop (tuner::Tuner) on a measure::ReplayTask over `space`, into a private
/// in-memory record database, with strategy `options.strategy` (seeded with `options.seed`)
/// until `options.budget` evaluations or until it proposes nothing (at the latest once every
/// recorded config was evaluated, whatever the budget). InvalidArgument for an
/// unknown strategy or bad options; Internal when the strategy breaks its contract (proposes
/// an infeasible or already proposed config, or more than asked). A failing cost-model fit is
/// not an error: the loop goes on with the model's last fit.
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
/// A run's best time (ms) at each checkpoint (ReplayTrace::BestAt): all SummarizeReplay needs of it.
std::vector<double> BestAtCheckpoints(const ReplayTrace& run, const std::vector<int>& checkpoints);
/// SummarizeReplay from each run's BestAtCheckpoints (at least one run).
std::vector<ReplayCheckpoint> SummarizeReplayBests(const ReplaySpace& space,
                                                   const std::vector<std::vector<double>>& best_ms,
                                                   const std::vector<int>& checkpoints);

/// `tune replay CACHE --strategy S --budget B --runs R [--seed S] [--batch N] [--jobs J]
/// [--cost-model M]`: argv[1] is "replay". A budget beyond the recorded configs is clamped to
/// them (said in the header). Prints the checkpoint table; returns 0, 2 for bad
/// flags or a malformed/unreadable cache (one line on stderr), 1 for a strategy failure.
int ReplayCommand(int argc, char** argv);

}  // namespace tune::tuner
