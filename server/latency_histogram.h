// LatencyHistogram: lock-free counts of durations in logarithmic buckets (four per octave).
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tune::server {

/// Bucket 0 counts durations under 1 us; bucket i >= 1 counts [2^((i-1)/4), 2^(i/4)) us; the
/// last bucket also takes everything longer. Thread-safe.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 100;  // the last one starts at 2^24.5 us, about 24 s

  /// The upper edge of bucket `i` in seconds (what a percentile read from it reports).
  static double UpperEdgeSeconds(int i) { return 1e-6 * std::exp2(static_cast<double>(i) / 4); }

  static int BucketOf(double seconds) {
    const double us = seconds * 1e6;
    if (!(us >= 1)) return 0;
    const int i = 1 + static_cast<int>(std::floor(4 * std::log2(us)));
    return i < kBuckets ? i : kBuckets - 1;
  }

  void Record(double seconds) { counts_[BucketOf(seconds)].fetch_add(1, std::memory_order_relaxed); }

  std::vector<uint64_t> Counts() const {
    std::vector<uint64_t> out(kBuckets);
    for (int i = 0; i < kBuckets; ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
    return out;
  }

  /// The upper bucket edge (seconds) at quantile `q` of `counts` (e.g. the difference of two
  /// Counts() snapshots); 0 when empty.
  static double Quantile(const std::vector<uint64_t>& counts, double q) {
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    if (total == 0) return 0;
    const double want = q * static_cast<double>(total);
    uint64_t seen = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (static_cast<double>(seen) >= want && counts[i] > 0) return UpperEdgeSeconds(static_cast<int>(i));
    }
    return UpperEdgeSeconds(static_cast<int>(counts.size()) - 1);
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

}  // namespace tune::server
