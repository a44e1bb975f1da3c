// The CUDA GEMM template: knobs, constraints, the default config and the choice of kernel.
#include "codegen/cuda/cuda_gemm_template.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "codegen/cuda/cuda_direct_conv.h"
#include "codegen/cuda/cuda_gemm_kernel.h"

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
constexpr int64_t kRasterMinTileOutputs = 32 * 32;  // raster: the tile its waves are counted in

/// The sizes a config stands for.
GemmTiles TilesOf(const search::ConfigSpace& s, const search::Config& c) {
  const auto& fm = s.Get(c, "tile_m");
  const auto& fn = s.Get(c, "tile_n");
  const auto& fk = s.Get(c, "tile_k");
  const int64_t async = s.GetInt(c, "cp_async");
  // Under cp_async the double_buffer knob is pinned (and means nothing); without it cp_async_a.
  return GemmTiles{fm[0], fm[1], fm[2], fn[0], fn[1], fn[2], fk[0], fk[1], s.GetInt(c, "vector"),
               async == 0 && s.GetInt(c, "double_buffer") != 0, s.GetInt(c, "unroll_k") != 0, s.GetInt(c, "pad"),
               s.GetInt(c, "interleave") != 0, s.GetInt(c, "k_slices"), s.GetInt(c, "k_split"), async,
               async > 0 && s.GetInt(c, "cp_async_a") == kCpAsyncARegisters, s.GetInt(c, "unroll_stages") != 0,
               s.GetInt(c, "fma_order"), s.GetInt(c, "raster")};
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

bool CudaGemmTemplate::Handles(const Workload& w) { return !w.depthwise(); }

CudaGemmTemplate::CudaGemmTemplate(Workload w, const GpuLimits& limits) : Template(std::move(w)), limits_(limits) {
  const Workload& wl = workload_;
  TUNE_CHECK(Handles(wl)) << "depthwise convolution " << wl.Key() << " has its own template";
  const GemmDims dims = GemmDimsOf(wl);
  auto& s = space_;
  // Tails allowed: the kernel guards the partial last tile (loads past the matrix read zero,
  // stores past the output are skipped), so extents with few divisors still get tiles of
  // every size. Divisor splits come first and keep their kernels.
  s.AddSplit("tile_m", dims.m, 3, kMaxThreadTile, search::SplitTails::kAllowed);
  s.AddSplit("tile_n", dims.n, 3, kMaxThreadTile, search::SplitTails::kAllowed);
  s.AddSplit("tile_k", dims.k, 2, kMaxBk, search::SplitTails::kAllowed);
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
    // A grouped convolution's direct kernel computes one group per block: tile_m splits the
    // output channels of a group, tile_c its input channels.
    s.AddChoice("variant", {kVariantImplicitGemm, kVariantDirect}, {"implicit_gemm", "direct"});
    s.AddSplit("tile_oh", wl.out_h(), 3, kMaxPixelsPerThread);
    s.AddSplit("tile_ow", wl.out_w(), 3, kMaxPixelsPerThread);
    s.AddSplit("tile_c", wl.in_c / wl.groups, 2, kMaxBk);
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
  // The GEMMs on blockIdx.z: batch_matmul's batch, a grouped convolution's groups.
  const int64_t batch = wl.op == OpKind::kBatchMatmul ? wl.batch : conv ? wl.groups : 1;
  // The order the blocks walk the output tiles (RasterTile): 1 row by row, else groups of that
  // many tile rows walked column by column. It decides which blocks share L2 only where a grid
  // has several waves of blocks, so it is offered where the output holds more than two waves
  // of 32 x 32 tiles (at one block per multiprocessor) and pinned elsewhere: in a smaller
  // output most tiles give a wave or two, and the knob would cost the search rejected draws (see
  // raster_matters) more than it could give. Pinned under the direct variant. Configs recorded
  // before the knob walked row by row.
  if (dims.m < 2 || dims.n < 2 || dims.m * dims.n * batch <= 2 * limits.multiprocessors * kRasterMinTileOutputs) {
    s.AddChoice("raster", {1});
  } else {
    s.AddChoice("raster", {1, 4, 8, 16, 32});
    if (conv) s.AddCondition("raster", "variant", {kVariantImplicitGemm});
  }
  s.AllowMissing("raster");
  const search::ConfigSpace* sp = &space_;
  const bool dense = wl.op == OpKind::kDense;
  auto plan = [sp, wl](const search::Config& c) { return PlanDirectConv(wl, DirectTilesOf(*sp, c)); };
  s.AddConstraint("threads", [sp, limits, conv, plan, wl](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) {
      const DirectConvTiles t = plan(c).tiles;
      const bool whole = t.grid_m == 1 && t.grid_h == 1 && t.grid_w == 1;
      return t.threads() <= limits.max_threads_per_block && (t.threads() % kWarp == 0 || whole) &&
             t.tz <= kMaxBlockZ && t.grid_m * wl.groups * wl.batch <= kMaxGridZ;
    }
    GemmTiles t = TilesOf(*sp, c);
    const bool whole = t.grid_m == 1 && t.grid_n == 1;  // a problem smaller than a warp's work
    return t.threads() <= limits.max_threads_per_block && (t.threads() % kWarp == 0 || whole);
  });
  s.AddConstraint("tile_copy", [sp, dense, conv, plan](const search::Config& c) {  // conv's B is copied like matmul's
    if (IsDirect(*sp, c, conv)) {
      const DirectConvPlan p = plan(c);
      return p.halo.Fits() && p.weights.Fits();
    }
    GemmTiles t = TilesOf(*sp, c);
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
    GemmTiles t = TilesOf(*sp, c);
    int64_t regs = t.tm * t.tn + t.tm + t.tn + kRegisterOverhead;
    if (t.double_buffer) regs += (t.bm() + t.bn()) * t.bk / t.threads();
    if (t.a_registers) regs += t.bm() * t.bk / t.threads();
    return regs <= std::min(limits.max_registers_per_thread, limits.max_registers_per_block / t.threads());
  });
  s.AddConstraint("shared_memory", [sp, limits, conv, plan](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return plan(c).SharedFloats() * 4 <= limits.max_shared_bytes_per_block;
    GemmTiles t = TilesOf(*sp, c);
    int64_t floats = t.stages() * ((t.bk + 1) * (t.bm() + t.pad) + (t.bk + 1) * (t.bn() + t.pad));
    if (t.slices > 1) floats += t.slices * t.bm() * t.bn();  // the partial sums of every slice
    if (t.split > 1) floats += 4;                               // the last-block flag (aligned)
    return floats * 4 <= limits.max_shared_bytes_per_block;
  });
  // The direct variant has no tails: its output-channel tile (tile_m) divides the channels (of
  // a group).
  if (conv) {
    const int64_t group_oc = dims.m;
    s.AddConstraint("direct_tile_m_divides", [sp, conv, group_oc](const search::Config& c) {
      return !IsDirect(*sp, c, conv) || search::PaddedExtent(sp->Get(c, "tile_m")) == group_oc;
    });
  }
  // The rest concern the implicit GEMM only (its knobs are pinned under the direct variant).
  s.AddConstraint("k_slices_divide", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.bk % t.slices == 0 && t.tm % t.slices == 0;
  });
  // Slicing K pays only when there are too few output tiles to give every multiprocessor two
  // blocks; elsewhere it only adds a reduction, so those configs are not searched.
  s.AddConstraint("k_slices_few_blocks", [sp, limits, batch, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.slices == 1 || t.grid_m * t.grid_n * batch < 2 * limits.multiprocessors;
  });
  // Split-K: the K tiles divide evenly over the splits, and splitting pays, like slicing, only
  // where the output tiles are too few to give every multiprocessor two blocks. The partial
  // tiles (k_split x M x N floats per batch) stay within a bounded workspace.
  s.AddConstraint("k_split_divide", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.k_tiles % t.split == 0;
  });
  s.AddConstraint("k_split_few_blocks", [sp, limits, batch, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.split == 1 || t.grid_m * t.grid_n * batch < 2 * limits.multiprocessors;
  });
  const int64_t outputs = dims.m * dims.n * batch;
  s.AddConstraint("k_split_workspace", [sp, batch, conv, outputs](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.split == 1 || (t.split * outputs * 4 <= kMaxSplitWorkspaceBytes && batch * t.split <= kMaxGridZ);
  });
  s.AddConstraint("interleave_needs_8_or_16", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return !t.interleave || t.Interleaved(t.tm) || t.Interleaved(t.tn);
  });
  s.AddConstraint("unroll_size", [sp, conv, plan](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return plan(c).UnrolledFma() <= kMaxUnrolledFma;
    GemmTiles t = TilesOf(*sp, c);
    const int64_t copies = t.unroll_stages ? t.stages() : 1;  // of the K step's body
    return !t.unroll_k || t.bk * t.tm * t.tn * copies <= kMaxUnrolledFma;
  });
  s.AddConstraint("fma_order_fits", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    if (t.fma_order == kFmaOrderBlocked) return t.tm % 2 == 0 && t.tn % 2 == 0;
    if (t.fma_order == kFmaOrderQuads) return t.tm % 4 == 0 && t.tn % 2 == 0;
    return true;
  });
  // The cp.async pipeline copies without guards (see BuildGemmKernel): K has no tail under it.
  const int64_t k_extent = dims.k;
  s.AddConstraint("cp_async_whole_k", [sp, conv, k_extent](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return t.async == 0 || t.k_tiles * t.bk == k_extent;
  });
  // A grouped order only where it changes which blocks run together: two or more tile rows and
  // columns, more blocks than multiprocessors (per split: k_split's blocks come after one
  // another on blockIdx.z), and a group size below the tile rows or the smallest of those at
  // or above them -- every larger one is the same column-by-column walk.
  std::vector<int64_t> rasters;
  for (const std::vector<int64_t>& option : s.knobs()[s.KnobIndex("raster")].options) rasters.push_back(option[0]);
  s.AddConstraint("raster_matters", [sp, limits, batch, conv, rasters](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    const GemmTiles t = TilesOf(*sp, c);
    if (t.raster == 1) return true;
    if (t.grid_m == 1 || t.grid_n == 1 || t.grid_m * t.grid_n * batch <= limits.multiprocessors) return false;
    for (int64_t smaller : rasters) {
      if (1 < smaller && smaller < t.raster && smaller >= t.grid_m) return false;
    }
    return true;
  });
  // Unrolling by the stages needs two or more of them.
  s.AddConstraint("unroll_stages_pipelined", [sp, conv](const search::Config& c) {
    if (IsDirect(*sp, c, conv)) return true;
    GemmTiles t = TilesOf(*sp, c);
    return !t.unroll_stages || t.stages() >= 2;
  });
}

search::Config CudaGemmTemplate::DefaultConfig() const {
  // The plain shared-memory kernel of CUDA's programming guide where the shape allows it: 16x16
  // threads, one output each, K steps of 16, scalar loads, one stage. Otherwise the valid config
  // closest to it (fewest elements per thread, then the most threads up to 256, then BK nearest
  // 16, then the squarest block; among equals the least padding, so a shape whose divisors
  // allow it keeps a config without tails). For conv2d, the implicit GEMM (the direct
  // variant's knobs held at option 0). Only the three tile knobs vary: every other knob is held
  // at the one value the score accepts (no split-K, no pipeline), so the walk stays small
  // however many tiles with tails the shape has.
  const auto& knobs = space_.knobs();
  search::Config base(knobs.size(), 0);
  auto hold = [&](const std::string& name, int64_t value) {
    const int k = space_.KnobIndex(name);
    for (size_t o = 0; o < knobs[k].options.size(); ++o) {
      if (knobs[k].options[o][0] == value) base[k] = static_cast<int32_t>(o);
    }
  };
  hold("vector", 1), hold("double_buffer", 0), hold("pad", 0), hold("unroll_k", 0), hold("interleave", 0);
  hold("k_slices", 1), hold("k_split", 1), hold("cp_async", 0), hold("raster", 1);
  const int km = space_.KnobIndex("tile_m"), kn = space_.KnobIndex("tile_n"), kk = space_.KnobIndex("tile_k");
  const GemmDims dims = GemmDimsOf(workload_);
  const double volume = static_cast<double>(dims.m) * static_cast<double>(dims.n) * static_cast<double>(dims.k);
  search::Config best;
  int64_t best_score = 0;
  for (size_t om = 0; om < knobs[km].options.size(); ++om) {
    for (size_t on = 0; on < knobs[kn].options.size(); ++on) {
      for (size_t ok = 0; ok < knobs[kk].options.size(); ++ok) {
        search::Config c = base;
        c[km] = static_cast<int32_t>(om), c[kn] = static_cast<int32_t>(on), c[kk] = static_cast<int32_t>(ok);
        const GemmTiles t = TilesOf(space_, c);
        const double padded = static_cast<double>(search::PaddedExtent(knobs[km].options[om])) *
                              static_cast<double>(search::PaddedExtent(knobs[kn].options[on])) *
                              static_cast<double>(search::PaddedExtent(knobs[kk].options[ok]));
        const int64_t waste = static_cast<int64_t>(std::lround(100.0 * (padded / volume - 1.0)));  // < 1000
        const int64_t score = -(t.tm * t.tn) * 1000000000 - std::abs(t.threads() - 256) * 1000000 -
                              std::abs(t.bk - 16) * 10000 - std::abs(t.tx - t.ty) * 1000 - waste;
        if ((best.empty() || score > best_score) && space_.IsValid(c)) {
          best = std::move(c);
          best_score = score;
        }
      }
    }
  }
  return best;  // empty when none: ValidDefaultConfig says so
}

Schedule CudaGemmTemplate::Build(const search::Config& c) const {
  const ArgBuffers args = MakeArgBuffers();
  if (IsDirect(space_, c, workload_.op == OpKind::kConv2d)) {
    return BuildDirectConv(workload_, PlanDirectConv(workload_, DirectTilesOf(space_, c)), args);
  }
  return BuildGemmKernel(workload_, TilesOf(space_, c), args);
}

}  // namespace tune::codegen
