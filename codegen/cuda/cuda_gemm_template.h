// The CUDA GEMM template: shared-memory tiled dense / matmul / batch_matmul for NVIDIA GPUs.
#pragma once

#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/template.h"

namespace tune::codegen {

/// C = A * B (+ bias, relu) with one thread block per BM x BN output tile (blockIdx.z runs
/// over the batch). conv2d (NCHW, any batch, stride, padding, dilation) is the implicit GEMM
/// C[OC][N*OH*OW] = weight[OC][C*KH*KW] x im2col(data): the B tile is gathered from the input
/// window by window (zero outside it) while it is copied to shared memory. A grouped conv2d
/// (not depthwise: that has its own template) is one such GEMM per group, on blockIdx.z as
/// batch_matmul's batch: M = OC / groups, K = C / groups x KH x KW, group g reading weight rows
/// and input channels of its own and writing output channels g * M to (g + 1) * M - 1.
/// Each thread owns a TM x TN register accumulator tile; per K step of BK the block copies an
/// A tile (transposed, so both operands are read along M and N) and a B tile to shared memory
/// cooperatively with `vector`-wide coalesced loads, then every thread
/// reads TM + TN values per k into registers (128-bit shared loads where TM / TN allow) and
/// does TM * TN FMAs.
///
/// Knobs: tile_m = [ceil(M / BM), threads along M (threadIdx.y), TM], tile_n = [ceil(N / BN),
/// threads along N (threadIdx.x), TN], tile_k = [ceil(K / BK), BK] -- splits with tails
/// (search::SplitTails::kAllowed: BM, BN, BK need not divide M, N, K; the last block or K tile
/// is partial and the kernel guards it, see BuildGemmKernel), vector (global load width 1, 2 or 4),
/// double_buffer (two register-staged shared stages, see PipelinedLoop), pad (floats added
/// to each shared row against bank conflicts; 4 keeps rows 16-byte aligned), unroll_k,
/// interleave (an 8- or 16-wide thread tile as two or four 4-wide runs BM/2 or BM/4 (BN/2,
/// BN/4) apart: conflict-free 128-bit fragment loads and contiguous stores across a warp;
/// TM and TN go up to 16, so a thread may own 16 x 8 or 8 x 16 outputs), k_slices (threadIdx.z: 1, 2
/// or 4 groups of threads each accumulate their share of every K step; the partial tiles are
/// summed through shared memory at the end. More warps per block for shapes with few output
/// tiles, such as 128 x 768 with a long K), k_split (1, 2, 4 or 8 blocks split the K tiles of
/// one output tile, on blockIdx.z after the batch: each leaves its partial tile in a global
/// workspace and counts itself in on a per-tile counter; the last to arrive sums the partials
/// in split order -- the result does not depend on which block is last -- applies the epilogue,
/// writes the output and resets the counter, so one launch does it all and the next needs no
/// memset. The workspace (k_split x M x N floats per batch) and the counters are scratch
/// arguments after the output, see BufferNode::scratch), cp_async (0, 2, 3 or 4: with N > 0
/// the tiles are copied global -> shared by cp.async into N shared stages in rotation, N - 1
/// tiles in flight while one computes, one barrier per tile and no staging registers, see
/// PipelinedLoop::EmitAsync; 16-byte copies where a run of `vector` lands contiguous and
/// aligned in shared memory -- matmul's B tile -- and 4-byte copies per element elsewhere, such
/// as the transposed A tile, consecutive threads on consecutive k of a row so a warp's copy
/// reads whole 32-byte sectors; double_buffer is pinned under it. conv2d, whose B tile is
/// gathered, has only 0), cp_async_a (async or registers, pinned to async without the
/// pipeline: how the transposed A tile travels under it. registers is a hybrid: B alone is
/// copied by cp.async, A goes through registers -- `vector`-wide global loads issued before a
/// tile's FMAs, stored to the stage S-1 tiles ahead after them -- with one tile of look-ahead
/// for A, as double_buffer, and S-1 for B; see PipelinedLoop::EmitAsync), unroll_stages (0 or
/// 1: the main loop unrolled by its stage count, 2 or cp_async's, so stage indices are
/// constants -- PipelinedLoop::unroll_stages; needs two or more stages and counts in the
/// bound on unrolled code), fma_order (rows, blocked, columns or quads: the order the register
/// tile's FMAs are written in, where ptxas' scheduling and operand reuse start from -- row by
/// row, 2 x 2 blocks in serpentine order, column by column, or per 4-row fragment column pairs
/// over row pairs; blocked needs even TM and TN, quads TM a multiple of 4 and TN even), raster (1,
/// 4, 8, 16 or 32: the order the blocks of one GEMM walk its output tiles, see RasterTile -- 1
/// row by row, blockIdx.y the tile row and blockIdx.x the column; G > 1 grouped, as CUTLASS's
/// and Triton's swizzle: block blockIdx.y * grid_n + blockIdx.x takes tiles in groups of G tile
/// rows, down a column of the group before the next column, the last group holding the rows
/// left over; so the blocks running at once cover a squarer patch of C and share more of A
/// and B in L2. blockIdx.z is unchanged. G > 1 only with two or more tile rows and columns and
/// more blocks than multiprocessors, each G below the tile rows or the smallest at or above
/// them (every larger one is the same column-by-column walk); pinned to 1 under the direct
/// variant; a space whose output (over the batch or groups) is at most two waves of 32 x 32
/// tiles has 1 only).
/// Constraints (before compiling): threads per block a multiple of 32 (or the whole problem
/// in one block) and within the limits, tiles that split evenly over the threads, an
/// estimate of registers per thread and the shared memory within the limits; k_slices and
/// k_split only where the output tiles give fewer than two blocks per multiprocessor, k_split
/// dividing the K tiles, its workspace at most 64 MiB; the shared stages (1, 2 for
/// double_buffer, or cp_async's) count in the shared memory, A's staging registers (hybrid)
/// in the registers; no tail along K under cp_async (its copies are not guarded). Config text
/// recorded before k_split, cp_async, cp_async_a, unroll_stages, fma_order or raster existed
/// reads as k_split 1, cp_async 0, cp_async_a async, unroll_stages 0, fma_order rows, raster 1.
///
/// conv2d has a `variant` knob: implicit_gemm (the kernel above) or direct (cuda_direct_conv.h:
/// an OC x OH x OW output tile per block from a shared-memory input halo tile). The direct
/// variant's own knobs are tile_oh = [OH / (TH RH), TH (threadIdx.y), RH], tile_ow = [OW / (TW
/// RW), TW (threadIdx.x), RW] and tile_c = [C / BC, BC input channels per step]; tile_m keeps
/// its meaning (its thread factor on threadIdx.z), as do vector (weight loads), double_buffer,
/// pad (weight rows) and unroll_k (the channel loop of a step). tile_n, tile_k, interleave,
/// k_slices and k_split are pinned to option 0 under direct, tile_oh/ow/c under implicit_gemm, and the
/// thread, register and shared-memory limits hold for both. The direct variant has no tails:
/// its tile_m divides the output channels. For a grouped conv2d tile_m splits the output
/// channels of a group and tile_c its input channels; a block computes channels of one group.
/// Config text recorded before the knob existed reads as implicit_gemm.
class CudaGemmTemplate : public Template {
 public:
  CudaGemmTemplate(Workload workload, const GpuLimits& limits);
  /// False for what it leaves to another template (depthwise convolution).
  static bool Handles(const Workload& workload);
  std::string name() const override { return workload_.op == OpKind::kConv2d ? "cuda_conv2d" : "cuda_gemm"; }
  int version() const override { return 1; }
  search::Config DefaultConfig() const override;

 protected:
  Schedule Build(const search::Config& config) const override;

 private:
  GpuLimits limits_;
};

}  // namespace tune::codegen
