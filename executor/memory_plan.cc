// MemoryPlan: greedy best-fit placement of live intervals in one arena.
#include "executor/memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tune::executor {

int64_t AlignArena(int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of placed buffers live with this one
  for (size_t i : order) {
    const BufferLifetime& b = buffers[i];
    const int64_t size = AlignArena(b.bytes);
    plan.total_bytes += size;
    busy.clear();
    for (size_t j : placed) {
      const BufferLifetime& o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({plan.offsets[j], plan.offsets[j] + AlignArena(o.bytes)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor) {
        const int64_t gap = begin - cursor;
        if (gap >= size && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0) best = cursor;  // above every live buffer
    plan.offsets[i] = best;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace tune::executor
