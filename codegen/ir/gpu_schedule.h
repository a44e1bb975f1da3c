// GPU schedule primitives: loop-AST building blocks for CUDA kernels (bindings, cooperative
// tile copies, register tiles, double-buffered shared-memory stages).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/ir/ir.h"

namespace tune::codegen {

/// Wraps `body` in a loop over `var` bound to a grid or block axis (ForKind::kBlockX ...
/// kThreadZ): the loop is not run, `var` is the block or thread index and `extent` that
/// launch dimension.
Stmt Bind(Expr var, int64_t extent, ForKind axis, Stmt body);

/// The threads of a thread block (threadIdx.x = tx over nx, threadIdx.y = ty over ny,
/// threadIdx.z = tz over nz; tz may be undefined when nz is 1).
struct ThreadBlock {
  Expr tx, ty;
  int64_t nx = 1, ny = 1;
  Expr tz;
  int64_t nz = 1;
  int64_t count() const { return nx * ny * nz; }
  /// The linear thread id (tz * ny + ty) * nx + tx.
  Expr Linear() const;
};

/// The blocks of a launch (blockIdx.x = bx over nx, blockIdx.y = by over ny, blockIdx.z = bz
/// over nz; bz may be undefined when nz is 1).
struct BlockGrid {
  Expr bx, by;
  int64_t nx = 1, ny = 1;
  Expr bz;
  int64_t nz = 1;
};

/// `body` bound to a launch of `grid` blocks of `threads`: Binds of threadIdx.x, y, z, then
/// blockIdx.x, y, z around it (threadIdx.x innermost), the z axes left out where their
/// variable is undefined.
Stmt BindLaunch(const BlockGrid& grid, const ThreadBlock& threads, Stmt body);

/// A cooperative copy of a rows x cols tile by all threads of a block: every thread moves
/// `VectorsPerThread()` runs of `vector` elements that are contiguous along cols, so the
/// source reads of a warp are consecutive (coalesced) and each run can become one 64/128-bit
/// access. Requires cols to be a multiple of vector. When rows * cols is not a multiple of
/// threads * vector (a tile smaller than the block, say), the last round has threads with
/// nothing to copy: they read a valid element (the index is clamped) and `valid` tells the
/// body to send their store somewhere harmless (a spare row of the destination).
struct TileCopy {
  int64_t rows = 1, cols = 1, vector = 1;
  ThreadBlock threads;

  int64_t VectorsPerThread() const {
    const int64_t per_round = threads.count() * vector;
    return (rows * cols + per_round - 1) / per_round;
  }
  /// Elements each thread moves (VectorsPerThread() * vector): the size of a staging buffer.
  int64_t ElementsPerThread() const { return VectorsPerThread() * vector; }
  bool Fits() const;
  /// True when every thread copies in every round (no `valid` guard).
  bool Exact() const { return (rows * cols) % (threads.count() * vector) == 0; }
  /// for e in VectorsPerThread() (unrolled) { i = (e * threads + tid) * vector, clamped to the
  ///   tile; for v in vector (vectorized) body(row = i / cols, col = i % cols + v,
  ///   slot = e * vector + v, valid) } with `slot` numbering this thread's elements
  /// 0 .. ElementsPerThread()-1 (a staging index) and `valid` the unclamped i < rows * cols
  /// (undefined when Exact()).
  Stmt Emit(const std::string& prefix,
            const std::function<Stmt(const Expr& row, const Expr& col, const Expr& slot, const Expr& valid)>& body)
      const;
  /// Emit for a tile that may run past the matrix it is copied from (a partial last tile):
  /// `inside(row, col)` says whether element (row, col) of the tile exists; it must be a box
  /// (row below one bound and col below another, either part possibly absent), so a run is
  /// inside when its first and last elements are. A run wholly inside is copied as Emit copies
  /// it (`vector` lanes, `guard` undefined); any other run lane by lane (an unrolled loop,
  /// scalar accesses) with `guard` = inside(row, col) of the element, for the body to load zero
  /// (or copy nothing) where it is false. With vector 1 every element gets its guard.
  Stmt EmitGuarded(const std::string& prefix, const std::function<Expr(const Expr& row, const Expr& col)>& inside,
                   const std::function<Stmt(const Expr& row, const Expr& col, const Expr& slot, const Expr& valid,
                                            const Expr& guard)>& body) const;
};

/// for var in extent: body(var), with the loop split into (extent / 4 unrolled) x (4
/// vectorized) when 4 divides extent, else unrolled whole: register-tile loops whose
/// contiguous shared or global accesses can become 128-bit ones.
Stmt VectorizedLoop(const std::string& name, int64_t extent, const std::function<Stmt(const Expr&)>& body);
/// The same, the body also getting the split: var = quad * 4 + lane (quad and lane are
/// undefined Exprs when 4 does not divide extent), for addresses built from the parts.
Stmt VectorizedLoop(const std::string& name, int64_t extent,
                    const std::function<Stmt(const Expr& var, const Expr& quad, const Expr& lane)>& body);
/// for var in extent (unrolled): body(var).
Stmt UnrolledLoop(const std::string& name, int64_t extent, const std::function<Stmt(const Expr&)>& body);

/// The main loop of a tiled reduction over `tiles` tiles with shared-memory stages.
///  - Single-buffered: for t { load(t, stage 0); sync; compute(stage 0); sync }.
///  - Double-buffered (register-staged, two shared stages): load(0, stage 0); sync;
///    for t < tiles - 1 { fetch(t + 1) into registers; compute(t % 2); store the registers
///    to stage (t + 1) % 2; sync }; compute((tiles - 1) % 2). One barrier per tile, and the
///    global reads of the next tile are in flight while this one computes.
///  - Asynchronous (EmitAsync, S >= 2 shared stages, cp.async): issue tiles 0 .. S-2 into
///    stages 0 .. S-2, one commit group each; for t { wait until tile t's group landed
///    (wait_group S-2); sync; issue tile t + S-1 into stage (t + S-1) % S, the one computed
///    in the previous iteration, and commit; compute(t % S) }, the last S-1 iterations peeled
///    (they issue nothing and wait for fewer groups). One barrier per tile; the copies of
///    S-1 tiles are in flight while one computes, with no registers or shared stores of this
///    thread on the way. Hybrid (EmitAsync with `fetch` set): the part of each tile that
///    cannot be copied asynchronously (a transposed tile) is register-staged alongside:
///    load(i, i) after issuing tile i in the prologue; in the loop fetch(t + S-1) after the
///    commit, compute(t % S), then store((t + S-1) % S) -- the stage computed in the previous
///    iteration, which the barrier at the top of this one released; the barrier of the next
///    iteration orders the store before any read of it. Those parts see one tile of look-ahead
///    (as double-buffered), the asynchronous ones S-1.
/// `load(t, stage)` copies tile t straight to shared memory; `fetch(t)` copies it to the
/// staging registers and `store(stage)` the registers to shared memory; `issue(t, stage)`
/// starts asynchronous copies of tile t to a stage (no commit); `compute(stage)` reads a
/// stage. Stage and tile arguments are expressions (loop variable or constant).
struct PipelinedLoop {
  std::function<Stmt(const Expr& tile, const Expr& stage)> load;
  std::function<Stmt(const Expr& tile)> fetch;
  std::function<Stmt(const Expr& stage)> store;
  std::function<Stmt(const Expr& tile, const Expr& stage)> issue;
  std::function<Stmt(const Expr& stage)> compute;
  /// Unrolls the main loop by its stage count (2 double-buffered, S asynchronous), so every
  /// stage index is a constant: no stage arithmetic per tile and shared addresses that fold
  /// into immediate offsets, for twice (S times) the code. The remainder iterations are peeled.
  bool unroll_stages = false;
  Stmt Emit(const std::string& prefix, int64_t tiles, bool double_buffer) const;
  /// The asynchronous pipeline over `stages` (>= 2) shared stages; uses issue and compute,
  /// and load, fetch and store too when fetch is set (hybrid).
  Stmt EmitAsync(const std::string& prefix, int64_t tiles, int64_t stages) const;

 private:
  /// for var < iterations / stages: iteration(var * stages + r, r) for r < stages; then the
  /// remaining iterations with constant tiles.
  static Stmt StageUnrolled(const Expr& var, int64_t iterations, int64_t stages,
                            const std::function<Stmt(const Expr& tile, int64_t stage)>& iteration);
};

/// The asynchronous form of `store`, a Store of a plain Load from a kArg buffer into a kShared
/// one: an AsyncCopy between the same elements. Aborts on any other statement.
Stmt AsAsyncCopy(const Stmt& store);

}  // namespace tune::codegen

namespace tune::codegen {

/// What one thread block may use on the target GPU; GPU templates exclude configs beyond it
/// before compiling. Defaults: compute capability 9.0 (H100 / H200).
struct GpuLimits {
  int64_t max_threads_per_block = 1024;
  int64_t max_shared_bytes_per_block = 227 * 1024;  // with the opt-in above 48 KiB
  int64_t max_registers_per_thread = 255;
  int64_t max_registers_per_block = 64 * 1024;  // a block's threads share one SM's file
  int64_t multiprocessors = 132;
};

}  // namespace tune::codegen
