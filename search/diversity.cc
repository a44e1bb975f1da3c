// TopCandidates and SelectDiverse: bounded best-k set and near-duplicate-free batch picking.
#include "search/diversity.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"

namespace tune::search {

TopCandidates::TopCandidates(size_t capacity) : capacity_(capacity) {
  TUNE_CHECK(capacity_ >= 1) << "TopCandidates needs a capacity of at least 1";
}

bool TopCandidates::Better(const Entry& a, const Entry& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.order < b.order;
}

bool TopCandidates::Offer(const Config& config, double score) {
  if (std::isnan(score) || members_.count(config) != 0) return false;
  Entry entry{score, next_order_++, config};
  if (heap_.size() == capacity_) {
    if (!Better(entry, heap_.front())) return false;
    std::pop_heap(heap_.begin(), heap_.end(), Better);
    members_.erase(heap_.back().config);
    heap_.pop_back();
  }
  members_.insert(config);
  heap_.push_back(std::move(entry));
  std::push_heap(heap_.begin(), heap_.end(), Better);
  return true;
}

std::vector<Config> TopCandidates::Sorted() const {
  std::vector<const Entry*> entries;
  entries.reserve(heap_.size());
  for (const Entry& e : heap_) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return Better(*a, *b); });
  std::vector<Config> out;
  out.reserve(entries.size());
  for (const Entry* e : entries) out.push_back(e->config);
  return out;
}

int HammingDistance(const Config& a, const Config& b) {
  TUNE_CHECK(a.size() == b.size()) << "configs of " << a.size() << " and " << b.size() << " knobs";
  int distance = 0;
  for (size_t i = 0; i < a.size(); ++i) distance += a[i] != b[i] ? 1 : 0;
  return distance;
}

std::vector<Config> SelectDiverse(const std::vector<Config>& ranked, int count, int min_distance) {
  std::vector<Config> picked;
  if (count <= 0) return picked;
  std::vector<bool> taken(ranked.size(), false);
  for (int threshold = std::max(min_distance, 1);
       threshold >= 1 && static_cast<int>(picked.size()) < count; --threshold) {
    for (size_t i = 0; i < ranked.size() && static_cast<int>(picked.size()) < count; ++i) {
      if (taken[i]) continue;
      const bool far_enough = std::all_of(picked.begin(), picked.end(), [&](const Config& p) {
        return HammingDistance(ranked[i], p) >= threshold;
      });
      if (!far_enough) continue;
      taken[i] = true;
      picked.push_back(ranked[i]);
    }
  }
  return picked;
}

}  // namespace tune::search
