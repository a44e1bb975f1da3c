// How well a cost model ranks measured configs: TenSet's top-k score, pairwise accuracy, Kendall tau, Spearman rho.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tune::costmodel {

// Conventions used below.
//  * A task's configs are given as two parallel vectors: the measured latency of each config
//    and the model's score of the same config. Both vectors have one entry per config, in the
//    same order; a size mismatch or a NaN is a caller bug (TUNE_CHECK).
//  * Latency is in seconds (the record's median time). A config whose measurement failed
//    (any status other than ok) is kept with latency +infinity: a model that ranks a failing
//    config first has picked a failure, which is what TenSet charges it with (its datasets
//    give failed configs a huge cost). Negative latencies are a caller bug.
//  * Scores: higher means predicted faster. Only their order matters, not their scale.
//  * The metrics are pure functions of their arguments: no I/O, no randomness, no state.

/// One task's measured configs and the model's predictions for them.
struct RankedTask {
  std::vector<double> latencies_s;  // measured latency per config [s]; failed configs: +inf
  std::vector<double> scores;       // the model's score per config [higher = predicted faster]
};

/// The best measured latency of the task [s]: the minimum of latencies_s (+inf when every
/// config failed or there is none).
double BestLatency(const RankedTask& task);

/// The best measured latency [s] among the model's `k` top-ranked configs of the task: the
/// configs are ordered by score, highest first, and the minimum latency of the first
/// min(k, n) is returned. Ties in the score are broken against the model: among configs with
/// equal scores the slower one ranks first, so a constant model gets no credit from the order
/// in which configs happen to be listed. +inf when k < 1, the task is empty or every picked
/// config failed.
double TopKLatency(const RankedTask& task, int k);

/// One task of a network and how much it weighs there.
struct WeightedTask {
  size_t task = 0;    // index into the `tasks` vector the network is evaluated against
  double weight = 1;  // how many times the network runs the task (its layer count), > 0
};

/// A network as a list of distinct tasks with their weights.
struct Network {
  std::string name;
  std::vector<WeightedTask> tasks;
};

/// TenSet's top-k score of a network:
///   sum over its tasks of weight x BestLatency(task)
///   ---------------------------------------------------
///   sum over its tasks of weight x TopKLatency(task, k)
/// i.e. the estimated network latency with the best measured config of every task, divided by
/// the estimated latency with the best config among the model's k picks of every task. 1 is a
/// perfect ranking; smaller is worse; 0 when some pick set holds only failed configs. Tasks
/// with no finite measured latency (every config failed, or none measured) are skipped: they
/// have no best to compare with. nullopt when no task is left. A task index out of range or a
/// weight that is not positive and finite is a caller bug.
std::optional<double> TopKScore(const std::vector<RankedTask>& tasks, const Network& network, int k);

/// Top-k scores of several networks (e.g. the held-out ones) and how they combine.
struct TopKSummary {
  std::vector<std::optional<double>> per_network;  // TopKScore of each network, in order
  /// The arithmetic mean of the defined per-network scores (each network counts once,
  /// whatever its size, as TenSet averages over its held-out networks); nullopt when none is
  /// defined.
  std::optional<double> mean;
};
TopKSummary TopKScores(const std::vector<RankedTask>& tasks, const std::vector<Network>& networks, int k);

/// Pairwise comparison accuracy of one task: over every unordered pair of configs whose
/// latencies differ (pairs of equal latency, two failures included, are skipped), the
/// fraction the model orders right (the faster config has the higher score). A pair the model
/// scores equally counts as half right, so a constant model scores exactly 0.5. nullopt when
/// no pair has different latencies.
std::optional<double> PairwiseAccuracy(const RankedTask& task);

/// Kendall's tau-b between the scores and the negated latencies of one task, in [-1, 1]:
/// (concordant - discordant) / sqrt((n0 - ties_in_scores) * (n0 - ties_in_latency)) over the
/// n0 = n(n-1)/2 pairs (a pair tied in either is neither concordant nor discordant). 1 for a
/// perfect ranking, -1 for the reversed one. nullopt when every score or every latency is the
/// same (or fewer than 2 configs).
std::optional<double> KendallTau(const RankedTask& task);

/// Spearman's rank correlation between the scores and the negated latencies of one task, in
/// [-1, 1]: the Pearson correlation of their ranks, tied values sharing the mean of their
/// ranks (all failures tie as the slowest). nullopt when every score or every latency is the
/// same (or fewer than 2 configs).
std::optional<double> SpearmanRho(const RankedTask& task);

}  // namespace tune::costmodel
