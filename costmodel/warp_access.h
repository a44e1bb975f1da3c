// How one warp's access to a buffer maps onto GPU memory transactions: the 32-byte sectors of
// a global access (coalescing) and the wavefronts of a shared-memory access (bank conflicts).
// Read off the loop AST alone, for the first warp of a block with every other loop at 0.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/ir/ir.h"

namespace tune::costmodel {

/// The threads of a block as a warp sees them: CUDA numbers a block's threads x fastest, then
/// y, then z, and a warp is 32 consecutive ones.
struct WarpShape {
  std::array<const codegen::VarNode*, 3> thread_vars{};  // the threadIdx.x/y/z loop vars (null: unbound)
  std::array<int64_t, 3> thread_extents{1, 1, 1};        // blockDim.x/y/z [threads]
  const codegen::VarNode* vector_var = nullptr;  // the vectorized loop around the access (null: none)
  int64_t vector_lanes = 1;                      // its extent: elements one thread moves at once
};

/// The warp of a statement nested in `loops` (outermost first; each has `var`, `extent` and
/// `kind`): its threadIdx loops and the innermost vectorized loop. Nullopt outside GPU thread
/// loops.
template <typename Loop>
std::optional<WarpShape> WarpShapeOf(const std::vector<Loop>& loops) {
  WarpShape warp;
  bool threads = false;
  for (const Loop& l : loops) {
    if (codegen::IsGpuBinding(l.kind) && !codegen::IsGpuBlockBinding(l.kind)) {
      threads = true;
      warp.thread_vars[codegen::GpuBindingAxis(l.kind)] = l.var;
      warp.thread_extents[codegen::GpuBindingAxis(l.kind)] = l.extent;
    }
  }
  if (!threads) return std::nullopt;
  for (size_t i = loops.size(); i-- > 0;) {
    if (loops[i].kind == codegen::ForKind::kVectorized) {
      warp.vector_var = loops[i].var;
      warp.vector_lanes = loops[i].extent;
      break;
    }
  }
  return warp;
}

/// One warp-wide access of fp32 elements (4 bytes each).
struct WarpAccess {
  bool known = false;  // false when an index could not be computed (it reads memory, say)
  double sectors = 0;  // distinct 32-byte sectors the warp's lanes touch [sectors]
  double min_sectors = 0;  // the fewest sectors that could hold the distinct elements touched:
                           // ceil(4 x distinct elements / 32) [sectors]
  double wavefronts = 0;   // shared-memory passes: per phase of the request (32 / lanes threads
                           // for 1- and 2-lane accesses, 8 threads for 4 or more lanes), the
                           // most distinct 4-byte words that fall into one of the 32 banks,
                           // summed over the phases [wavefronts]
  double min_wavefronts = 0;  // phases of the request: what the access costs without bank
                              // conflicts [wavefronts]
};

/// The first warp's access to a row-major buffer of `shape` at `indices`, lanes taken from
/// `warp`; every variable other than the thread and vector vars is 0.
WarpAccess AnalyzeWarpAccess(const std::vector<int64_t>& shape, const std::vector<codegen::Expr>& indices,
                             const WarpShape& warp);

/// Weighted sums of a warp's accesses by kind (global loads, global stores, shared memory),
/// and the three feature values they give (AstFeatures::global_load_efficiency and the two
/// after it; the program graph's statement fields 69-71).
class WarpTransactions {
 public:
  /// Adds the access of `warp` to `buffer` at `indices` with `weight` (executions); only
  /// global (kArg) and shared buffers count, and only accesses whose index is computable.
  void Add(const WarpShape& warp, const codegen::BufferNode& buffer, const std::vector<codegen::Expr>& indices,
           bool write, double weight);
  /// Fewest sectors / touched sectors of the global loads and of the global stores [0..1], and
  /// log2(wavefronts / conflict-free wavefronts) of the shared accesses; 0 where none counted.
  std::array<float, 3> Fields() const;

 private:
  // {fewest, actual}: sectors for global memory, wavefronts for shared memory.
  double load_[2] = {0, 0}, store_[2] = {0, 0}, shared_[2] = {0, 0};
};

}  // namespace tune::costmodel
