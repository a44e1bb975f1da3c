// The GEMM / implicit-GEMM kernel of the CUDA GEMM template (its `variant` knob implicit_gemm).
#pragma once

#include <cstdint>

#include "codegen/ir/ir.h"
#include "codegen/ir/schedule.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"

namespace tune::codegen {

/// fma_order: the order of the register tile's FMAs in the source (see cuda_gemm_template.h).
constexpr int64_t kFmaOrderRows = 0, kFmaOrderBlocked = 1, kFmaOrderColumns = 2, kFmaOrderQuads = 3;

/// The sizes one config of the CUDA GEMM template stands for (its knobs are documented in
/// cuda_gemm_template.h). The tiles may cover more than the GEMM (a tail: grid_m * bm() > M,
/// grid_n * bn() > N or k_tiles * bk > K, the last block or K tile partial); the kernel then
/// guards what lies past it, and only then (see BuildGemmKernel).
struct GemmTiles {
  int64_t grid_m, ty, tm, grid_n, tx, tn, k_tiles, bk, vector;
  bool double_buffer, unroll_k;
  int64_t pad;
  bool interleave;
  int64_t slices;  // threadIdx.z: groups of threads that split each K step
  int64_t split;   // k_split: blocks that split the K tiles of one output tile
  int64_t async;   // cp_async: shared stages of the asynchronous-copy pipeline, 0 without it
  bool a_registers;  // cp_async_a: under the pipeline, A's tile is register-staged (hybrid)
  bool unroll_stages;  // the main loop unrolled by its stage count (constant stage indices)
  int64_t fma_order;  // the order of the register tile's FMAs in the source (kFmaOrder*)
  int64_t raster = 1;  // the order the blocks walk the output tiles: 1, or groups of `raster` tile rows
  int64_t bm() const { return ty * tm; }
  int64_t bn() const { return tx * tn; }
  int64_t threads() const { return tx * ty * slices; }
  /// Shared-memory stages of the main loop.
  int64_t stages() const { return async > 0 ? async : double_buffer ? 2 : 1; }
  /// Whether a thread's `per_thread` rows (or columns) are interleaved: with the knob on, a
  /// tile of 8 or 16 is walked as 2 or 4 runs of 4, each a block tile's half or quarter apart.
  bool Interleaved(int64_t per_thread) const { return interleave && (per_thread == 8 || per_thread == 16); }
};

/// An output tile of the grid: its row of tiles (along M, 0 .. grid_m - 1) and column (along N).
struct TileIndex {
  int64_t m, n;
};

/// The output tile that block `linear` of one GEMM's grid_m x grid_n tiles computes under the
/// `raster` knob (`linear` = blockIdx.y * grid_n + blockIdx.x, the order the blocks are
/// dispatched in, x fastest; blockIdx.z -- batch, group, split -- is not part of it). raster 1: row by row,
/// {linear / grid_n, linear % grid_n}. raster G > 1 (grouped, as CUTLASS's and Triton's swizzle):
/// the tile rows in groups of g = min(G, grid_m), the blocks of a group walking down its column
/// of g tiles before moving to the next column, so the blocks running at once cover a squarer
/// patch of the output and share more of A and B in L2. The last group holds the grid_m % g
/// rows left over (when there are any) and walks its shorter columns likewise; G >= grid_m is
/// column by column. A bijection of [0, grid_m * grid_n) onto the tiles for every G >= 1.
TileIndex RasterTile(int64_t linear, int64_t grid_m, int64_t grid_n, int64_t raster);

/// The GEMM a workload is: for conv2d (implicit GEMM), M = output channels, N = batch x
/// output pixels, K = input channels x kernel window; for a grouped conv2d the GEMM of one
/// group (M = output channels / groups, K = input channels / groups x kernel window).
struct GemmDims {
  int64_t m, n, k;
};
GemmDims GemmDimsOf(const Workload& workload);

/// C = A * B (+ bias, relu) with one thread block per BM x BN output tile, for dense, matmul,
/// batch_matmul and conv2d as an implicit GEMM (a grouped one as one GEMM per group on
/// blockIdx.z, as batch_matmul's batch); see CudaGemmTemplate for the kernel and its knobs.
/// With k_split > 1 the split-K scratch arguments (the partial tiles `ws` and the counters
/// `arrivals`, one set per batch or group) follow the output in Schedule::args. Tails, decided here
/// from the known extents: operand copies load zero for elements past [0, M) x [0, K) (A) or
/// [0, K) x [0, N) (B) -- a `vector`-wide run wholly inside keeps its wide load, a run across
/// the edge goes lane by lane, guarded (TileCopy::EmitGuarded); cp.async copies take no branch
/// (one per element makes ptxas take minutes): K has no tail under the pipeline, and their rows
/// past M / columns past N read the last row / column, values that only reach outputs never
/// stored -- and the output, split-K's partial tiles and
/// its fix-up are written only where row < M and col < N (a run of four columns wholly inside
/// keeps its wide store). A config whose tiles divide the GEMM gets no guard: its kernel is
/// the one it was before tails existed.
Schedule BuildGemmKernel(const Workload& workload, const GemmTiles& tiles, const ArgBuffers& args);

}  // namespace tune::codegen
