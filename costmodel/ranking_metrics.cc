// TenSet's ranking metrics of a cost model over measured configs.
#include "costmodel/ranking_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace tune::costmodel {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void CheckTask(const RankedTask& task) {
  TUNE_CHECK_MSG(task.latencies_s.size() == task.scores.size(),
                 "latencies and scores differ in size: " << task.latencies_s.size() << " vs " << task.scores.size());
  for (double l : task.latencies_s) TUNE_CHECK_MSG(!std::isnan(l) && l >= 0, "bad latency " << l);
  for (double s : task.scores) TUNE_CHECK_MSG(!std::isnan(s), "NaN score");
}

int Sign(double x) { return (x > 0) - (x < 0); }

// Ranks 1..n of `values` (ascending), ties sharing the mean of their ranks.
std::vector<double> AverageRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t m = i; m <= j; ++m) ranks[order[m]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

double BestLatency(const RankedTask& task) {
  CheckTask(task);
  double best = kInf;
  for (double l : task.latencies_s) best = std::min(best, l);
  return best;
}

double TopKLatency(const RankedTask& task, int k) {
  CheckTask(task);
  if (k < 1) return kInf;
  const size_t n = task.scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  // Highest score first; equal scores: slowest first (against the model); then by index.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (task.scores[a] != task.scores[b]) return task.scores[a] > task.scores[b];
    if (task.latencies_s[a] != task.latencies_s[b]) return task.latencies_s[a] > task.latencies_s[b];
    return a < b;
  });
  double best = kInf;
  for (size_t i = 0; i < std::min(n, static_cast<size_t>(k)); ++i) best = std::min(best, task.latencies_s[order[i]]);
  return best;
}

std::optional<double> TopKScore(const std::vector<RankedTask>& tasks, const Network& network, int k) {
  double best_sum = 0, picked_sum = 0;
  bool any = false;
  for (const WeightedTask& wt : network.tasks) {
    TUNE_CHECK_MSG(wt.task < tasks.size(), "task index " << wt.task << " out of range in network " << network.name);
    TUNE_CHECK_MSG(std::isfinite(wt.weight) && wt.weight > 0, "bad weight " << wt.weight);
    const double best = BestLatency(tasks[wt.task]);
    if (!std::isfinite(best)) continue;
    any = true;
    best_sum += wt.weight * best;
    picked_sum += wt.weight * TopKLatency(tasks[wt.task], k);
  }
  if (!any) return std::nullopt;
  if (std::isinf(picked_sum)) return 0.0;
  if (picked_sum == 0) return 1.0;  // every best latency is 0: the picks cannot be worse
  return best_sum / picked_sum;
}

TopKSummary TopKScores(const std::vector<RankedTask>& tasks, const std::vector<Network>& networks, int k) {
  TopKSummary summary;
  double sum = 0;
  int defined = 0;
  for (const Network& network : networks) {
    summary.per_network.push_back(TopKScore(tasks, network, k));
    if (summary.per_network.back().has_value()) {
      sum += *summary.per_network.back();
      ++defined;
    }
  }
  if (defined > 0) summary.mean = sum / defined;
  return summary;
}

std::optional<double> PairwiseAccuracy(const RankedTask& task) {
  CheckTask(task);
  const auto& lat = task.latencies_s;
  const auto& score = task.scores;
  double right = 0;
  int64_t pairs = 0;
  for (size_t i = 0; i < lat.size(); ++i) {
    for (size_t j = i + 1; j < lat.size(); ++j) {
      if (lat[i] == lat[j]) continue;
      ++pairs;
      // Right when the faster one (lower latency) has the higher score.
      const int want = Sign(lat[j] - lat[i]);  // +1: i is faster
      const int got = Sign(score[i] - score[j]);
      if (got == 0) {
        right += 0.5;
      } else if (got == want) {
        right += 1;
      }
    }
  }
  if (pairs == 0) return std::nullopt;
  return right / static_cast<double>(pairs);
}

std::optional<double> KendallTau(const RankedTask& task) {
  CheckTask(task);
  const auto& lat = task.latencies_s;
  const auto& score = task.scores;
  int64_t concordant = 0, discordant = 0, tied_score = 0, tied_lat = 0, n0 = 0;
  for (size_t i = 0; i < lat.size(); ++i) {
    for (size_t j = i + 1; j < lat.size(); ++j) {
      ++n0;
      const int s = Sign(score[i] - score[j]);
      const int l = lat[i] == lat[j] ? 0 : Sign(lat[j] - lat[i]);  // the sign of -lat[i] - (-lat[j])
      if (s == 0) ++tied_score;
      if (l == 0) ++tied_lat;
      if (s == 0 || l == 0) continue;
      if (s == l) {
        ++concordant;
      } else {
        ++discordant;
      }
    }
  }
  const double denom =
      std::sqrt(static_cast<double>(n0 - tied_score)) * std::sqrt(static_cast<double>(n0 - tied_lat));
  if (denom == 0) return std::nullopt;
  return static_cast<double>(concordant - discordant) / denom;
}

std::optional<double> SpearmanRho(const RankedTask& task) {
  CheckTask(task);
  const size_t n = task.latencies_s.size();
  if (n < 2) return std::nullopt;
  std::vector<double> neg_lat(n);
  for (size_t i = 0; i < n; ++i) neg_lat[i] = -task.latencies_s[i];
  const std::vector<double> a = AverageRanks(task.scores), b = AverageRanks(neg_lat);
  const double mean = (static_cast<double>(n) + 1) / 2;  // the mean of average ranks is always (n+1)/2
  double cov = 0, var_a = 0, var_b = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (a[i] - mean) * (b[i] - mean);
    var_a += (a[i] - mean) * (a[i] - mean);
    var_b += (b[i] - mean) * (b[i] - mean);
  }
  if (var_a == 0 || var_b == 0) return std::nullopt;
  return cov / std::sqrt(var_a * var_b);
}

}  // namespace tune::costmodel
