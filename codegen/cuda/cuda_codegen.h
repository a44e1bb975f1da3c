// The CUDA backend's source generator: a loop AST with GPU bindings -> one CUDA C kernel.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/kernel.h"

namespace tune::codegen {

/// CUDA C source of one kernel and how to launch it.
struct CudaKernel {
  std::string name;    // the extern "C" __global__ entry point
  std::string source;  // one translation unit, for NVRTC
  std::array<int64_t, 3> grid = {1, 1, 1};   // blocks per grid (x, y, z)
  std::array<int64_t, 3> block = {1, 1, 1};  // threads per block (x, y, z)
  /// Dynamic shared memory per block, bytes: every kShared buffer lives in one
  /// `extern __shared__` array at a 16-byte aligned offset (launch with this many bytes;
  /// above 48 KiB the function's limit must be raised first).
  int64_t shared_bytes = 0;
  /// The scratch arguments (BufferNode::scratch) that follow the tensors, in argument order.
  std::vector<CudaScratch> scratch;

  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
  int64_t blocks() const { return grid[0] * grid[1] * grid[2]; }
};

/// Lowers `func` to CUDA C. Arguments become `float*` parameters in order (const and
/// __restrict__ for buffers the kernel only reads; `int*` for kInt32 buffers); indices are
/// 32-bit ints. Scratch arguments must follow every tensor argument.
///
/// GPU-bound loops become blockIdx/threadIdx reads and give the launch shape: each binding
/// kind may appear in several places (peeled code, for instance) but always with the same
/// extent, and never nested in itself. kShared buffers share the dynamic shared array,
/// kLocal ones are per-thread arrays (registers when indexed by constants after unrolling),
/// kSync is __syncthreads(), kFence __threadfence(), kAtomicAdd a `const int` bound to
/// atomicAdd's result, kIf an if, kAsyncCopy / kAsyncCommit / kAsyncWait the cp.async
/// instructions (through small inline-asm helpers printed before the kernel when it uses
/// them; sm_80 and later). Loads of coherent buffers are __ldcg (L2, not L1).
/// Unrolled loops carry `#pragma unroll`.
///
/// A vectorized loop of 2 or 4 lanes whose body is stores only, where no buffer is both read
/// and written, becomes one float2/float4 access per contiguous (stride 1), provably aligned
/// global or shared access (its lane-0 flat index a multiple of the lane count; loads under
/// a select are guarded and stay scalar) and scalar accesses for the rest; otherwise it is unrolled lane by lane. Either way it computes what
/// the serial loop computes. A vectorized loop of asynchronous copies only becomes one 8- or
/// 16-byte cp.async per copy whose source and destination are both contiguous and provably
/// aligned, 4-byte ones lane by lane for the rest.
///
/// InvalidArgument for what a GPU kernel cannot hold: kHeap buffers, a buffer of 2^31 or more
/// elements, conflicting or nested bindings, a block over 1024 threads or grid or block
/// dimensions over CUDA's limits.
absl::StatusOr<CudaKernel> GenerateCuda(const LoweredFunc& func);

}  // namespace tune::codegen
