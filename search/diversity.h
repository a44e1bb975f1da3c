// Batch selection for model-guided strategies: the best distinct candidates met during a
// search, and a pick of them for one batch that avoids near-duplicates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "search/space.h"

namespace tune::search {

/// The `capacity` highest-scoring distinct configs offered so far (scores: higher = expected
/// faster). Used by SA and evolutionary search to remember the best unseen configs they
/// visited. Not thread-safe.
class TopCandidates {
 public:
  /// `capacity` >= 1.
  explicit TopCandidates(size_t capacity);

  /// Offers `config` with `score`. A NaN score, a config already kept, or a score not better
  /// than the worst kept one when full (ties keep the earlier offer) leaves the set unchanged.
  /// Returns true iff the config entered the set.
  bool Offer(const Config& config, double score);
  bool Contains(const Config& config) const { return members_.count(config) != 0; }
  size_t size() const { return heap_.size(); }
  /// The kept configs, best first; equal scores in offer order.
  std::vector<Config> Sorted() const;

 private:
  struct Entry {
    double score;
    uint64_t order;  // offer sequence number, breaks ties
    Config config;
  };
  // True when `a` ranks before `b`: higher score, or equal score and offered earlier.
  static bool Better(const Entry& a, const Entry& b);

  size_t capacity_;
  uint64_t next_order_ = 0;
  std::vector<Entry> heap_;  // heap ordered by Better: heap_.front() is the worst kept
  std::unordered_set<Config, ConfigHash> members_;
};

/// Number of knobs whose option index differs between `a` and `b` (same knob count).
int HammingDistance(const Config& a, const Config& b);

/// Picks up to `count` configs for one batch from `ranked` (candidates sorted best first).
///
/// The rule: scan `ranked` in order and take a candidate when its Hamming distance (in knob
/// option indices) to every config taken so far is at least `min_distance`. If a scan ends
/// with fewer than `count` taken, the threshold drops by one and the candidates not yet
/// taken are scanned again in rank order, down to threshold 1, which takes any config not
/// already taken. So with the default 2 a batch first gets configs that differ pairwise in
/// at least two knobs (two single-knob tweaks of one config, which differ in two knobs,
/// qualify; two steps of one knob from the same config do not), and only when the
/// candidates run short does it accept configs one knob apart. Duplicates in `ranked` are
/// taken once. Returns the taken configs in the order taken (`count` of them when `ranked`
/// holds at least that many distinct configs). `min_distance` <= 1 means plain top-`count`.
std::vector<Config> SelectDiverse(const std::vector<Config>& ranked, int count,
                                  int min_distance = 2);

}  // namespace tune::search
