// MemoryPlan: offsets of a model's intermediate tensors in one arena, from their live intervals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tune::executor {

/// Offsets and sizes in the arena are multiples of this many bytes (the kernel ABI's alignment).
inline constexpr int64_t kArenaAlignment = 64;

/// A buffer that needs arena memory and the steps during which it must hold its data: it is
/// written by step `first` (or before step 0 for a graph input: first = 0) and last read by
/// step `last` (first <= last). Two buffers whose intervals [first, last] intersect are live
/// at once and never share bytes; a buffer may reuse the bytes of one whose interval ended.
struct BufferLifetime {
  std::string name;   // for messages and tests
  int64_t bytes = 0;  // > 0
  int first = 0;
  int last = 0;
};

/// Where each buffer lives: `offsets[i]` (bytes from the arena's start, a multiple of
/// kArenaAlignment) for the i-th buffer given to PlanMemory.
struct MemoryPlan {
  std::vector<int64_t> offsets;
  /// The arena's size in bytes: the end of the highest buffer (rounded up to the alignment).
  int64_t arena_bytes = 0;
  /// The sum of the buffers' sizes in bytes (each rounded up to the alignment): what a plan
  /// without reuse would take.
  int64_t total_bytes = 0;
};

/// Greedy best-fit by size: buffers are placed largest first (ties: earlier `first`, then
/// order given); each goes into the smallest gap between the buffers already placed that are
/// live at the same time and that fits it, else above the highest of them. Deterministic.
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers);

/// `bytes` rounded up to a multiple of kArenaAlignment.
int64_t AlignArena(int64_t bytes);

}  // namespace tune::executor
