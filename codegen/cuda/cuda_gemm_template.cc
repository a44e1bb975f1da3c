// The CUDA GEMM template: knobs, constraints and the kernel built from GPU primitives.
#include "codegen/cuda/cuda_gemm_template.h"

#include <algorithm>

#include "codegen/cuda/cuda_direct_conv.h"

#include "base/check.h"

namespace tune::codegen {
namespace {

constexpr int64_t kWarp = 32;
constexpr int64_t kMaxThreadTile = 16;    // TM, TN
constexpr int64_t kMaxBk = 32;
constexpr int64_t kRegisterOverhead = 28;  // addresses, loop counters, indices (estimate)
constexpr int64_t kMaxUnrolledFma = 8192;  // code size bound for a fully unrolled K step
constexpr int64_t kMaxPixelsPerThread = 4;  // direct conv: RH, RW
constexpr int64_t kMaxBlockZ = 64;          // CUDA's limit on blockDim.z
constexpr int64_t kMaxGridZ = 65535;        // and on gridDim.z
constexpr int64_t kVariantImplicitGemm = 0, kVariantDirect = 1;
constexpr int64_t kMaxSplitWorkspaceBytes = int64_t{64} << 20;  // split-K's partial tiles
constexpr int64_t kCpAsyncAAsync = 0, kCpAsyncARegisters = 1;  // cp_async_a
constexpr int64_t kFmaOrderRows = 0, kFmaOrderBlocked = 1, kFmaOrderColumns = 2, kFmaOrderQuads = 3;  // fma_order

/// The sizes a config stands for.
struct Tiles {
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
  int64_t bm() const { return ty * tm; }
  /// Shared-memory stages of the main loop.
  int64_t stages() const { return async > 0 ? async : double_buffer ? 2 : 1; }
  int64_t bn() const { return tx * tn; }
  int64_t threads() const { return tx * ty * slices; }
};

Tiles TilesOf(const search::ConfigSpace& s, const search::Config& c) {
  const auto& fm = s.Get(c, "tile_m");
  const auto& fn = s.Get(c, "tile_n");
  const auto& fk = s.Get(c, "tile_k");
  const int64_t async = s.GetInt(c, "cp_async");
  // Under cp_async the double_buffer knob is pinned (and means nothing); without it cp_async_a.
  return Tiles{fm[0], fm[1], fm[2], fn[0], fn[1], fn[2], fk[0], fk[1], s.GetInt(c, "vector"),
               async == 0 && s.GetInt(c, "double_buffer") != 0, s.GetInt(c, "unroll_k") != 0, s.GetInt(c, "pad"),
               s.GetInt(c, "interleave") != 0, s.GetInt(c, "k_slices"), s.GetInt(c, "k_split"), async,
               async > 0 && s.GetInt(c, "cp_async_a") == kCpAsyncARegisters, s.GetInt(c, "unroll_stages") != 0,
               s.GetInt(c, "fma_order")};
}

/// Whether a thread's `per_thread` rows (or columns) are interleaved: with the knob on, a tile
/// of 8 or 16 is walked as 2 or 4 runs of 4, each a block tile's half or quarter apart.
bool Interleaved(const Tiles& t, int64_t per_thread) { return t.interleave && (per_thread == 8 || per_thread == 16); }

/// The register tile's FMAs, fma(i, j) for every row i < TM and column j < TN, in the order of
/// fma_order: rows (unrolled loops, row by row: consecutive FMAs share the row's A value),
/// columns (column by column), blocked (2 x 2 blocks, the rows of blocks in turn, every other
/// row of blocks in reverse: each FMA shares one operand with the FMA before it and the other
/// with the one before that), quads (per 4 rows -- one 128-bit fragment load -- column pairs in
/// turn, each pair over the rows two by two, the row pairs in alternating order).
Stmt Fmas(const Tiles& t, const std::function<Stmt(const Expr& i, const Expr& j)>& fma) {
  if (t.fma_order == kFmaOrderRows) {
    return UnrolledLoop("i", t.tm, [&](const Expr& i) {
      return UnrolledLoop("j", t.tn, [&](const Expr& j) { return fma(i, j); });
    });
  }
  if (t.fma_order == kFmaOrderColumns) {
    return UnrolledLoop("j", t.tn, [&](const Expr& j) {
      return UnrolledLoop("i", t.tm, [&](const Expr& i) { return fma(i, j); });
    });
  }
  std::vector<Stmt> seq;
  auto emit = [&](int64_t i, int64_t j) { seq.push_back(fma(Expr(i), Expr(j))); };
  if (t.fma_order == kFmaOrderBlocked) {
    for (int64_t ib = 0; ib < t.tm / 2; ++ib) {
      for (int64_t step = 0; step < t.tn / 2; ++step) {
        const int64_t jb = ib % 2 == 0 ? step : t.tn / 2 - 1 - step;
        for (int64_t i = 2 * ib; i < 2 * ib + 2; ++i) {
          for (int64_t j = 2 * jb; j < 2 * jb + 2; ++j) emit(i, j);
        }
      }
    }
  } else {  // quads
    for (int64_t q = 0; q < t.tm / 4; ++q) {
      for (int64_t p = 0; p < t.tn / 2; ++p) {
        for (int64_t half : {p % 2, 1 - p % 2}) {
          for (int64_t i = 4 * q + 2 * half; i < 4 * q + 2 * half + 2; ++i) {
            emit(i, 2 * p);
            emit(i, 2 * p + 1);
          }
        }
      }
    }
  }
  return Seq(std::move(seq));
}

/// The GEMM a workload is: for conv2d (implicit GEMM), M = output channels, N = batch x
/// output pixels, K = input channels x kernel window.
struct GemmDims {
  int64_t m, n, k;
};
GemmDims DimsOf(const Workload& w) {
  if (w.op == OpKind::kConv2d) return {w.out_c, w.batch * w.out_h() * w.out_w(), w.in_c * w.kernel_h * w.kernel_w};
  return {w.m, w.n, w.k};
}

bool IsDirect(const search::ConfigSpace& s, const search::Config& c, bool conv) {
  return conv && s.GetInt(c, "variant") == kVariantDirect;
}

/// The direct variant's sizes: tile_m, vector, double_buffer, pad and unroll_k keep their
/// meaning for the output-channel tile, the weight copy and the main loop.
DirectConvTiles DirectTilesOf(const search::ConfigSpace& s, const search::Config& c) {
  const auto& fm = s.Get(c, "tile_m");
  const auto& fh = s.Get(c, "tile_oh");
  const auto& fw = s.Get(c, "tile_ow");
  const auto& fc = s.Get(c, "tile_c");
  DirectConvTiles t;
  t.grid_m = fm[0], t.tz = fm[1], t.tm = fm[2];
  t.grid_h = fh[0], t.th = fh[1], t.rh = fh[2];
  t.grid_w = fw[0], t.tw = fw[1], t.rw = fw[2];
  t.c_steps = fc[0], t.bc = fc[1];
  t.vector = s.GetInt(c, "vector");
  t.pad = s.GetInt(c, "pad");
  t.double_buffer = s.GetInt(c, "double_buffer") != 0;
  t.unroll = s.GetInt(c, "unroll_k") != 0;
  return t;
}

}  // namespace

bool CudaGemmTemplate::Handles(const Workload& w) { return w.op != OpKind::kConv2d || w.groups == 1; }

CudaGemmTemplate::CudaGemmTemplate(Workload w, const GpuLimits& limits) : Template(std::move(w)), limits_(limits) {
  const Workload& wl = workload_;
  TUNE_CHECK(Handles(wl)) << "no CUDA template for grouped convolution " << wl.Key();
  const GemmDims dims = DimsOf(wl);
  auto& s = space_;
  s.AddSplit("tile_m", dims.m, 3, kMaxThreadTile);
  s.AddSplit("tile_n", dims.n, 3, kMaxThreadTile);
  s.AddSplit("tile_k", dims.k, 2, kMaxBk);
  s.AddChoice("vector", {4, 2, 1});
  s.AddChoice("double_buffer", {1, 0});
  s.AddChoice("pad", {0, 4});
  s.AddChoice("unroll_k", {1, 0});
  s.AddChoice("interleave", {1, 0});
  s.AddChoice("k_slices", {1, 2, 4});
  s.AddChoice("k_split", {1, 2, 4, 8});
  s.AllowMissing("k_split");  // configs recorded before split-K ran K in one block
  const bool conv = wl.op == OpKind::kConv2d;
  if (conv) {
    // The direct variant's own knobs (see cuda_direct_conv.h); knobs of one variant are pinned
    // under the other. Configs recorded before the knob existed are implicit GEMMs.
    s.AddChoice("variant", {kVariantImplicitGemm, kVariantDirect}, {"implicit_gemm", "direct"});
    s.AddSplit("tile_oh", wl.out_h(), 3, kMaxPixelsPerThread);
    s.AddSplit("tile_ow", wl.out_w(), 3, kMaxPixelsPerThread);
    s.AddSplit("tile_c", wl.in_c, 2, kMaxBk);
    for (const char* knob : {"tile_n", "tile_k", "interleave", "k_slices", "k_split"}) {
      s.AddCondition(knob, "variant", {kVariantImplicitGemm});
    }
    for (const char* knob : {"tile_oh", "tile_ow", "tile_c"}) s.AddCondition(knob, "variant", {kVariantDirect});
    for (const char* knob : {"variant", "tile_oh", "tile_ow", "tile_c"}) s.AllowMissing(knob);
  }
  // The cp.async pipeline: 0 = off (double_buffer decides), else that many shared stages. The
  // gathered B tile of conv2d is no plain copy, so conv2d keeps 0. Configs recorded before the
  // knob existed had no pipeline. cp_async_a: how A's tile, transposed on its way to shared
  // memory (so no 16-byte copy), travels under the pipeline: 4-byte cp.async copies, or
  // global loads into registers and stores to the stage (hybrid: B alone is copied
  // asynchronously). Pinned without the pipeline; configs recorded before it read as async.
  const std::vector<std::string> a_paths = {"async", "registers"};
  if (conv) {
    s.AddChoice("cp_async", {0});
    s.AddChoice("cp_async_a", {kCpAsyncAAsync}, {a_paths[0]});
  } else {
    s.AddChoice("cp_async", {0, 2, 3, 4});
    s.AddCondition("double_buffer", "cp_async", {0});
    s.AddChoice("cp_async_a", {kCpAsyncAAsync, kCpAsyncARegisters}, a_paths);
    s.AddCondition("cp_async_a", "cp_async", {2, 3, 4});
  }
  s.AllowMissing("cp_async");
  s.AllowMissing("cp_async_a");
  // The main loop unrolled by its stage count (PipelinedLoop::unroll_stages); implicit GEMM
  // only. Configs recorded before the knob had a rolled loop.
  s.AddChoice("unroll_stages", {0, 1});
  if (conv) s.AddCondition("unroll_stages", "variant", {kVariantImplicitGemm});
  s.AllowMissing("unroll_stages");
  // The order of the register tile's FMAs in the source, where ptxas' scheduling and operand
  // reuse start from (see Fmas).
  s.AddChoice("fma_order", {kFmaOrderRows, kFmaOrderBlocked, kFmaOrderColumns, kFmaOrderQuads},
              {"rows", "blocked", "columns", "quads"});
  if (conv) s.AddCondition("fma_order", "variant", {kVariantImplicitGemm});
  s.AllowMissing("fma_order");
  const search::ConfigSpace* sp = &space_;
  const bool dense = wl.op == OpKind::kDense;
  auto plan = [sp, wl](const search::Config& c) { return PlanDirectConv(wl, DirectTilesOf(*sp, c)); };
  s.AddConstraint("threads", [sp, limits, conv, plan, wl](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) {
      const DirectConvTiles t = plan(c).tiles;
      const bool whole = t.grid_m == 1 && t.grid_h == 1 && t.grid_w == 1;
      return t.threads() <= limits.max_threads_per_block && (t.threads() % kWarp == 0 || whole) &&
             t.tz <= kMaxBlockZ && t.grid_m * wl.batch <= kMaxGridZ;
    }
    Tiles t = TilesOf(*sp, c);
    const bool whole = t.grid_m == 1 && t.grid_n == 1;  // a problem smaller than a warp's work
    return t.threads() <= limits.max_threads_per_block && (t.threads() % kWarp == 0 || whole);
  });
  s.AddConstraint("tile_copy", [sp, dense, conv, plan](const search::Config& c) {  // conv's B is copied like matmul's
    if (IsDirect(*sp, c, conv)) {
      const DirectConvPlan p = plan(c);
      return p.halo.Fits() && p.weights.Fits();
    }
    Tiles t = TilesOf(*sp, c);
    ThreadBlock block{Expr(), Expr(), t.tx, t.ty, Expr(), t.slices};
    TileCopy a{t.bm(), t.bk, t.vector, block};
    TileCopy b = dense ? TileCopy{t.bn(), t.bk, t.vector, block} : TileCopy{t.bk, t.bn(), t.vector, block};
    return a.Fits() && b.Fits();
  });
  s.AddConstraint("registers", [sp, limits, conv, plan](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) {
      const DirectConvPlan p = plan(c);
      return p.Registers(kRegisterOverhead) <=
             std::min(limits.max_registers_per_thread, limits.max_registers_per_block / p.tiles.threads());
    }
    Tiles t = TilesOf(*sp, c);
    int64_t regs = t.tm * t.tn + t.tm + t.tn + kRegisterOverhead;
    if (t.double_buffer) regs += (t.bm() + t.bn()) * t.bk / t.threads();
    if (t.a_registers) regs += t.bm() * t.bk / t.threads();
    return regs <= std::min(limits.max_registers_per_thread, limits.max_registers_per_block / t.threads());
  });
  s.AddConstraint("shared_memory", [sp, limits, conv, plan](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return plan(c).SharedFloats() * 4 <= limits.max_shared_bytes_per_block;
    Tiles t = TilesOf(*sp, c);
    int64_t floats = t.stages() * ((t.bk + 1) * (t.bm() + t.pad) + (t.bk + 1) * (t.bn() + t.pad));
    if (t.slices > 1) floats += t.slices * t.bm() * t.bn();  // the partial sums of every slice
    if (t.split > 1) floats += 4;                               // the last-block flag (aligned)
    return floats * 4 <= limits.max_shared_bytes_per_block;
  });
  // The rest concern the implicit GEMM only (its knobs are pinned under the direct variant).
  s.AddConstraint("k_slices_divide", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return t.bk % t.slices == 0 && t.tm % t.slices == 0;
  });
  // Slicing K pays only when there are too few output tiles to give every multiprocessor two
  // blocks; elsewhere it only adds a reduction, so those configs are not searched.
  const int64_t batch = wl.op == OpKind::kBatchMatmul ? wl.batch : 1;
  s.AddConstraint("k_slices_few_blocks", [sp, limits, batch, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return t.slices == 1 || t.grid_m * t.grid_n * batch < 2 * limits.multiprocessors;
  });
  // Split-K: the K tiles divide evenly over the splits, and splitting pays, like slicing, only
  // where the output tiles are too few to give every multiprocessor two blocks. The partial
  // tiles (k_split x M x N floats per batch) stay within a bounded workspace.
  s.AddConstraint("k_split_divide", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return t.k_tiles % t.split == 0;
  });
  s.AddConstraint("k_split_few_blocks", [sp, limits, batch, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return t.split == 1 || t.grid_m * t.grid_n * batch < 2 * limits.multiprocessors;
  });
  const int64_t outputs = dims.m * dims.n * batch;
  s.AddConstraint("k_split_workspace", [sp, batch, conv, outputs](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return t.split == 1 || (t.split * outputs * 4 <= kMaxSplitWorkspaceBytes && batch * t.split <= kMaxGridZ);
  });
  s.AddConstraint("interleave_needs_8_or_16", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return !t.interleave || Interleaved(t, t.tm) || Interleaved(t, t.tn);
  });
  s.AddConstraint("unroll_size", [sp, conv, plan](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return plan(c).UnrolledFma() <= kMaxUnrolledFma;
    Tiles t = TilesOf(*sp, c);
    const int64_t copies = t.unroll_stages ? t.stages() : 1;  // of the K step's body
    return !t.unroll_k || t.bk * t.tm * t.tn * copies <= kMaxUnrolledFma;
  });
  s.AddConstraint("fma_order_fits", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    if (t.fma_order == kFmaOrderBlocked) return t.tm % 2 == 0 && t.tn % 2 == 0;
    if (t.fma_order == kFmaOrderQuads) return t.tm % 4 == 0 && t.tn % 2 == 0;
    return true;
  });
  // Unrolling by the stages needs two or more of them.
  s.AddConstraint("unroll_stages_pipelined", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    Tiles t = TilesOf(*sp, c);
    return !t.unroll_stages || t.stages() >= 2;
  });
}

search::Config CudaGemmTemplate::DefaultConfig() const {
  // The plain shared-memory kernel of CUDA's programming guide where the shape allows it: 16x16
  // threads, one output each, K steps of 16, scalar loads, one stage. Otherwise the valid config
  // closest to it (fewest elements per thread, then the most threads up to 256). For conv2d,
  // the implicit GEMM (the direct variant's knobs held at option 0).
  // k_split is held at 1 too (a default without split-K), so the walk costs what it did before.
  std::vector<std::string> held = {"k_split", "cp_async", "cp_async_a", "unroll_stages", "fma_order"};
  if (workload_.op == OpKind::kConv2d) {
    held = {"k_split", "cp_async", "cp_async_a", "unroll_stages", "fma_order", "variant", "tile_oh", "tile_ow",
            "tile_c"};
  }
  return BestScoring([this](const search::Config& c) -> std::optional<int64_t> {
    Tiles t = TilesOf(space_, c);
    if (t.vector != 1 || t.double_buffer || t.pad != 0 || t.unroll_k || t.interleave || t.slices != 1 ||
        t.split != 1 || t.async != 0) {
      return std::nullopt;
    }
    return -(t.tm * t.tn) * 1000000 - std::abs(t.threads() - 256) * 1000 - std::abs(t.bk - 16) * 10 -
           std::abs(t.tx - t.ty);
  }, held);
}

Schedule CudaGemmTemplate::Build(const search::Config& c) const {
  const Workload& wl = workload_;
  const Tiles t = TilesOf(space_, c);
  const bool batched = wl.op == OpKind::kBatchMatmul, dense = wl.op == OpKind::kDense;
  const bool conv = wl.op == OpKind::kConv2d;
  const int64_t bm = t.bm(), bn = t.bn(), bk = t.bk, stages = t.stages();

  Schedule sched;
  ArgBuffers buffers = MakeArgBuffers();
  if (IsDirect(space_, c, conv)) {
    return BuildDirectConv(wl, PlanDirectConv(wl, DirectTilesOf(space_, c)),
                           DirectConvArgs{buffers.input0, buffers.input1, buffers.bias, buffers.out});
  }
  if (conv) {
    // The kernel's pointers seen as the GEMM's matrices: weight[OC][C*KH*KW] (the same bytes
    // as [OC][C][KH][KW]) and the output flat; the input stays 4-D for the window gather.
    const GemmDims d = DimsOf(wl);
    buffers.input1 = MakeBuffer(buffers.input1->name, {d.m, d.k}, BufferScope::kArg, buffers.input1->arg_index);
    buffers.out = MakeBuffer(buffers.out->name, {buffers.out->NumElements()}, BufferScope::kArg,
                             buffers.out->arg_index);
  }
  const Buffer a = conv ? buffers.input1 : buffers.input0, b = conv ? buffers.input0 : buffers.input1;
  const Buffer bias = buffers.bias, out = buffers.out;
  sched.args = buffers.args();
  // Split-K: blockIdx.z (after the batch, z = batch * k_split + split) picks a range of K
  // tiles; the blocks of an output tile leave their partial tiles in `ws` and count
  // themselves in `arrivals`; the last to arrive sums the partials and writes the output.
  const int64_t split = t.split, tiles_per_split = t.k_tiles / split;
  const GemmDims dims = DimsOf(wl);
  Buffer ws, arrivals;
  if (split > 1) {
    const int arg = static_cast<int>(sched.args.size());
    std::vector<int64_t> ws_shape = {split, dims.m, dims.n}, count_shape = {t.grid_m, t.grid_n};
    if (batched) {
      ws_shape.insert(ws_shape.begin(), wl.batch);
      count_shape.insert(count_shape.begin(), wl.batch);
    }
    ws = MakeScratchBuffer("ws", ws_shape, arg, DType::kFloat32, /*zero_init=*/false, /*coherent=*/true);
    arrivals = MakeScratchBuffer("arrivals", count_shape, arg + 1, DType::kInt32, /*zero_init=*/true,
                                 /*coherent=*/false);
    sched.args.push_back(ws);
    sched.args.push_back(arrivals);
  }

  Expr bz = MakeVar("bz"), by = MakeVar("by"), bx = MakeVar("bx");
  const Expr batch_index = batched && split > 1 ? bz / Expr(split) : bz;
  const Expr split_index = split == 1 ? Expr() : batched ? bz % Expr(split) : bz;
  ThreadBlock threads{MakeVar("tx"), MakeVar("ty"), t.tx, t.ty, MakeVar("tz"), t.slices};
  const int64_t slice_k = bk / t.slices;  // k values of a BK step each slice accumulates
  auto at_batch = [&](std::vector<Expr> rest) {
    if (batched) rest.insert(rest.begin(), batch_index);
    return rest;
  };
  // The K tile a split's `tile`-th step reads.
  auto k_tile = [&](const Expr& tile) { return split == 1 ? tile : split_index * Expr(tiles_per_split) + tile; };
  const Expr row0 = by * Expr(bm), col0 = bx * Expr(bn);
  // Offset in the block tile of a thread's i-th row / j-th column. Interleaved, an 8-wide
  // thread tile is two 4-wide halves half a block tile apart, so a warp's 128-bit shared
  // loads cover consecutive addresses (no bank conflicts) and its stores are contiguous.
  // (i = quad * 4 + lane; quad undefined when the loop was not split in fours.)
  auto tile_offset = [&](const Expr& thread, int64_t per_thread, int64_t block, const Expr& i, const Expr& quad,
                         const Expr& lane) -> Expr {
    if (!Interleaved(t, per_thread)) return thread * Expr(per_thread) + i;
    TUNE_CHECK(quad.defined()) << "an interleaved tile is walked in fours";
    return quad * Expr(block / (per_thread / 4)) + thread * Expr(4) + lane;
  };
  auto row_of = [&](const Expr& i, const Expr& quad, const Expr& lane) {
    return tile_offset(threads.ty, t.tm, bm, i, quad, lane);
  };
  auto col_of = [&](const Expr& j, const Expr& quad, const Expr& lane) {
    return tile_offset(threads.tx, t.tn, bn, j, quad, lane);
  };

  // Shared stages: As[stage][k][m] (A transposed), Bs[stage][k][n]; rows padded.
  // Copies of one K tile: A rows m, cols k; B rows k, cols n (matmul, conv) or rows n, cols k
  // (dense). A copy that does not split evenly over the threads sends its idle lanes to a
  // spare k row (index bk) of its shared buffer.
  // Under the pipeline a transposed tile (A; dense's B too) is copied 4 bytes at a time, and
  // then element by element: consecutive threads take consecutive k of a row, so each copy
  // instruction of a warp reads whole 32-byte sectors (runs of `vector` per thread would have
  // every instruction touch `vector` times the sectors, a fraction of each used).
  // Register-staged (hybrid A), the copy keeps its `vector`-wide runs: 128-bit global loads.
  const bool a_async = t.async > 0 && !t.a_registers;
  TileCopy copy_a{bm, bk, a_async ? 1 : t.vector, threads};
  TileCopy copy_b = dense ? TileCopy{bn, bk, t.async > 0 ? 1 : t.vector, threads} : TileCopy{bk, bn, t.vector, threads};
  const int64_t a_rows = copy_a.Exact() ? bk : bk + 1, b_rows = copy_b.Exact() ? bk : bk + 1;
  Buffer as = MakeBuffer("As", {stages, a_rows, bm + t.pad}, BufferScope::kShared);
  Buffer bs = MakeBuffer("Bs", {stages, b_rows, bn + t.pad}, BufferScope::kShared);
  Buffer acc = MakeBuffer("acc", {t.tm, t.tn}, BufferScope::kLocal);
  Buffer af = MakeBuffer("a_frag", {t.tm}, BufferScope::kLocal);
  Buffer bf = MakeBuffer("b_frag", {t.tn}, BufferScope::kLocal);

  auto a_src = [&](const Expr& step, const Expr& r, const Expr& col) {
    const Expr tile = k_tile(step);
    return Load(a, at_batch({row0 + r, tile * Expr(bk) + col}));
  };
  auto b_src = [&](const Expr& step, const Expr& r, const Expr& col) -> Expr {
    const Expr tile = k_tile(step);
    if (dense) return Load(b, {col0 + r, tile * Expr(bk) + col});
    if (conv) {
      // im2col on the fly: k -> (c, kh, kw), n -> (image, oh, ow); zero outside the input.
      const Expr k = tile * Expr(bk) + r, p = col0 + col;
      const int64_t window = wl.kernel_h * wl.kernel_w, pixels = wl.out_h() * wl.out_w();
      const Expr c = k / Expr(window), kh = (k % Expr(window)) / Expr(wl.kernel_w), kw = k % Expr(wl.kernel_w);
      const Expr img = p / Expr(pixels), oh = (p % Expr(pixels)) / Expr(wl.out_w()), ow = p % Expr(wl.out_w());
      const Expr ih = oh * Expr(wl.stride_h) + kh * Expr(wl.dilation_h) - Expr(wl.pad_h);
      const Expr iw = ow * Expr(wl.stride_w) + kw * Expr(wl.dilation_w) - Expr(wl.pad_w);
      const Expr inside = (Expr(int64_t{0}) <= ih) && (ih < Expr(wl.in_h)) && (Expr(int64_t{0}) <= iw) &&
                          (iw < Expr(wl.in_w));
      return Select(inside, Load(b, {img, c, ih, iw}), FloatImm(0.0));
    }
    return Load(b, at_batch({tile * Expr(bk) + r, col0 + col}));
  };
  auto spare = [&](const Expr& valid, const Expr& k) { return valid.defined() ? Select(valid, k, Expr(bk)) : k; };
  auto a_dst = [&](const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) {
    return Store(as, {stage, spare(valid, col), r}, std::move(v));
  };
  auto b_dst = [&](const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) {
    if (dense) return Store(bs, {stage, spare(valid, col), r}, std::move(v));
    return Store(bs, {stage, spare(valid, r), col}, std::move(v));
  };
  Buffer stage_a, stage_b;
  if (t.double_buffer || t.a_registers) {
    stage_a = MakeBuffer("a_stage", {copy_a.ElementsPerThread()}, BufferScope::kLocal);
  }
  if (t.double_buffer) stage_b = MakeBuffer("b_stage", {copy_b.ElementsPerThread()}, BufferScope::kLocal);

  // Each operand's copies of tile `tile` into stage `stage`: straight (load), to its staging
  // registers (fetch) and from them (store), or asynchronous (issue).
  using TileStep = std::function<Stmt(const Expr& tile, const Expr& stage)>;
  const TileStep load_a = [&](const Expr& tile, const Expr& stage) {
    return copy_a.Emit("la", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return a_dst(stage, r, col, valid, a_src(tile, r, col));
    });
  };
  const TileStep load_b = [&](const Expr& tile, const Expr& stage) {
    return copy_b.Emit("lb", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return b_dst(stage, r, col, valid, b_src(tile, r, col));
    });
  };
  auto fetch_a = [&](const Expr& tile) {
    return copy_a.Emit("fa", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&) {
      return Store(stage_a, {slot}, a_src(tile, r, col));
    });
  };
  auto fetch_b = [&](const Expr& tile) {
    return copy_b.Emit("fb", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&) {
      return Store(stage_b, {slot}, b_src(tile, r, col));
    });
  };
  auto store_a = [&](const Expr& stage) {
    return copy_a.Emit("sa", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
      return a_dst(stage, r, col, valid, Load(stage_a, {slot}));
    });
  };
  auto store_b = [&](const Expr& stage) {
    return copy_b.Emit("sb", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
      return b_dst(stage, r, col, valid, Load(stage_b, {slot}));
    });
  };
  const TileStep issue_a = [&](const Expr& tile, const Expr& stage) {
    return copy_a.Emit("ca", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return AsAsyncCopy(a_dst(stage, r, col, valid, a_src(tile, r, col)));
    });
  };
  const TileStep issue_b = [&](const Expr& tile, const Expr& stage) {
    return copy_b.Emit("cb", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return AsAsyncCopy(b_dst(stage, r, col, valid, b_src(tile, r, col)));
    });
  };

  PipelinedLoop loop;
  if (t.a_registers) {
    // Hybrid: B by cp.async, A register-staged within the same stages (see EmitAsync).
    loop.load = load_a;
    loop.fetch = fetch_a;
    loop.store = store_a;
    loop.issue = issue_b;
  } else {
    loop.load = [&](const Expr& tile, const Expr& stage) { return Seq({load_a(tile, stage), load_b(tile, stage)}); };
    if (t.async == 0) {  // a fetch would make EmitAsync stage through registers
      loop.fetch = [&](const Expr& tile) { return Seq({fetch_a(tile), fetch_b(tile)}); };
      loop.store = [&](const Expr& stage) { return Seq({store_a(stage), store_b(stage)}); };
    }
    loop.issue = [&](const Expr& tile, const Expr& stage) {
      return Seq({issue_a(tile, stage), issue_b(tile, stage)});
    };
  }
  loop.compute = [&](const Expr& stage) {
    Expr kslice = MakeVar("kk");
    Expr kk = t.slices > 1 ? threads.tz * Expr(slice_k) + kslice : kslice;
    Stmt step = Seq({
        VectorizedLoop("i", t.tm, [&](const Expr& i, const Expr& quad, const Expr& lane) {
          return Store(af, {i}, Load(as, {stage, kk, row_of(i, quad, lane)}));
        }),
        VectorizedLoop("j", t.tn, [&](const Expr& j, const Expr& quad, const Expr& lane) {
          return Store(bf, {j}, Load(bs, {stage, kk, col_of(j, quad, lane)}));
        }),
        Fmas(t, [&](const Expr& i, const Expr& j) {
          return Store(acc, {i, j}, Load(acc, {i, j}) + Load(af, {i}) * Load(bf, {j}));
        }),
    });
    return For(kslice, slice_k, t.unroll_k ? ForKind::kUnrolled : ForKind::kSerial, step);
  };

  Stmt init = UnrolledLoop("i", t.tm, [&](const Expr& i) {
    return UnrolledLoop("j", t.tn, [&](const Expr& j) { return Store(acc, {i, j}, FloatImm(0.0)); });
  });
  // Row i of a thread's tile in the block tile; interleaved, (i / 4) * BM/2 + ty * 4 + i % 4
  // (constants fold when i is one).
  auto out_row = [&](const Expr& i) -> Expr {
    if (!Interleaved(t, t.tm)) return threads.ty * Expr(t.tm) + i;
    return (i / Expr(4)) * Expr(bm / (t.tm / 4)) + threads.ty * Expr(4) + i % Expr(4);
  };
  // C[m][n] -> the output: out[n][m] for the GEMMs, out[image][oc = m][pixel] for conv2d.
  const int64_t pixels = conv ? wl.out_h() * wl.out_w() : 0;
  auto out_at = [&](const Expr& m, const Expr& n) -> std::vector<Expr> {
    if (!conv) return at_batch({m, n});
    if (wl.batch == 1) return {m * Expr(pixels) + n};
    return {((n / Expr(pixels)) * Expr(wl.out_c) + m) * Expr(pixels) + n % Expr(pixels)};
  };
  auto epilogue = [&](Expr v, const Expr& m, const Expr& n) {
    if (bias) v = v + Load(bias, {conv ? m : n});
    if (wl.relu) v = Max(v, FloatImm(0.0));
    return v;
  };
  // This thread's share of the output tile, element by element: emit(i, j, m, n) for row i,
  // column j of its register tile at C[m][n]. Without K slices every element; with them, slice
  // s takes rows s, s + slices, ... of every thread's tile (after the partial tiles met).
  auto walk = [&](const std::function<Stmt(const Expr& i, const Expr& j, const Expr& m, const Expr& n)>& emit) {
    std::vector<Stmt> rows;
    if (t.slices == 1) {
      for (int64_t i = 0; i < t.tm; ++i) {
        rows.push_back(VectorizedLoop("j", t.tn, [&](const Expr& j, const Expr& quad, const Expr& lane) {
          Expr n = col0 + col_of(j, quad, lane), m = row0 + out_row(Expr(i));
          return emit(Expr(i), j, m, n);
        }));
      }
    } else {
      rows.push_back(UnrolledLoop("r", t.tm / t.slices, [&](const Expr& r) {
        Expr i = r * Expr(t.slices) + threads.tz;
        Expr row = out_row(i);
        return VectorizedLoop("j", t.tn, [&](const Expr& j, const Expr& quad, const Expr& lane) {
          return emit(i, j, row0 + row, col0 + col_of(j, quad, lane));
        });
      }));
    }
    return Seq(std::move(rows));
  };
  auto ws_at = [&](const Expr& s, const Expr& m, const Expr& n) {
    std::vector<Expr> at = {s, m, n};
    if (batched) at.insert(at.begin(), batch_index);
    return at;
  };
  // A finished sum for C[m][n]: the output through the epilogue, or with split-K this split's
  // partial tile.
  auto result = [&](Expr v, const Expr& m, const Expr& n) {
    if (split > 1) return Store(ws, ws_at(split_index, m, n), std::move(v));
    return Store(out, out_at(m, n), epilogue(std::move(v), m, n));
  };
  std::vector<Stmt> rows;
  Buffer partial;
  if (t.slices == 1) {
    rows.push_back(walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
      return result(Load(acc, {i, j}), m, n);
    }));
  } else {
    // Each slice leaves its partial tile in shared memory (consecutive threads, consecutive
    // words); after a barrier, slice s sums rows s, s + slices, ... of every thread's tile over
    // the slices and writes them.
    partial = MakeBuffer("partial", {t.slices, t.tm, t.tn, t.ty, t.tx}, BufferScope::kShared);
    rows.push_back(UnrolledLoop("i", t.tm, [&](const Expr& i) {
      return UnrolledLoop("j", t.tn, [&](const Expr& j) {
        return Store(partial, {threads.tz, i, j, threads.ty, threads.tx}, Load(acc, {i, j}));
      });
    }));
    rows.push_back(Sync());
    rows.push_back(walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
      Expr sum = Load(partial, {Expr(int64_t{0}), i, j, threads.ty, threads.tx});
      for (int64_t s = 1; s < t.slices; ++s) sum = sum + Load(partial, {Expr(s), i, j, threads.ty, threads.tx});
      return result(sum, m, n);
    }));
  }
  Buffer last;
  if (split > 1) {
    // The serial fix-up: every thread fences its partial tile; after a barrier the first thread
    // counts the block in (fencing again, so the partials of the blocks counted before are
    // seen) and tells the block through shared memory whether it was the last of the tile's
    // k_split blocks. The last one sums the partials in split order (the same result whichever
    // block comes last), writes the output and resets the counter for the next launch.
    last = MakeBuffer("last", {1}, BufferScope::kShared);
    Expr first_thread = (threads.tx == Expr(int64_t{0})) && (threads.ty == Expr(int64_t{0}));
    if (t.slices > 1) first_thread = first_thread && (threads.tz == Expr(int64_t{0}));
    const std::vector<Expr> counter = at_batch({by, bx});
    Expr arrived = MakeVar("arrived");
    rows.push_back(Fence());
    rows.push_back(Sync());
    rows.push_back(If(first_thread, AtomicAdd(arrivals, counter, Expr(1), arrived,
                                              Seq({Fence(), Store(last, {Expr(int64_t{0})},
                                                                  Select(arrived == Expr(split - 1), FloatImm(1.0),
                                                                         FloatImm(0.0)))}))));
    rows.push_back(Sync());
    Stmt fixup = walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
      Expr sum = Load(ws, ws_at(Expr(int64_t{0}), m, n));
      for (int64_t s = 1; s < split; ++s) sum = sum + Load(ws, ws_at(Expr(s), m, n));
      return Store(out, out_at(m, n), epilogue(sum, m, n));
    });
    rows.push_back(If(FloatImm(0.0) < Load(last, {Expr(int64_t{0})}),
                      Seq({fixup, If(first_thread, Store(arrivals, counter, Expr(int64_t{0})))})));
  }
  Stmt write = Seq(std::move(rows));
  loop.unroll_stages = t.unroll_stages;
  Stmt main_loop = t.async > 0 ? loop.EmitAsync("kt", tiles_per_split, t.async)
                               : loop.Emit("kt", tiles_per_split, t.double_buffer);
  Stmt body = Seq({init, main_loop, write});
  if (stage_b) body = Allocate(stage_b, body);
  if (stage_a) body = Allocate(stage_a, body);
  if (partial) body = Allocate(partial, body);
  if (last) body = Allocate(last, body);
  body = Allocate(as, Allocate(bs, Allocate(acc, Allocate(af, Allocate(bf, body)))));
  body = Bind(threads.tx, t.tx, ForKind::kThreadX, body);
  body = Bind(threads.ty, t.ty, ForKind::kThreadY, body);
  if (t.slices > 1) body = Bind(threads.tz, t.slices, ForKind::kThreadZ, body);
  body = Bind(bx, t.grid_n, ForKind::kBlockX, body);
  body = Bind(by, t.grid_m, ForKind::kBlockY, body);
  if (batched || split > 1) body = Bind(bz, (batched ? wl.batch : 1) * split, ForKind::kBlockZ, body);
  sched.body = body;
  return sched;
}

}  // namespace tune::codegen
