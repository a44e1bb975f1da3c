// The GEMM kernel: block and thread tiling, operand copies, the main-loop pipelines, the
// register-tile FMAs, the K-slice reduction, the split-K fix-up and the epilogue.
#include "codegen/cuda/cuda_gemm_kernel.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "base/check.h"
#include "codegen/ir/gpu_schedule.h"

namespace tune::codegen {

GemmDims GemmDimsOf(const Workload& w) {
  if (w.op == OpKind::kConv2d) {
    return {w.out_c / w.groups, w.batch * w.out_h() * w.out_w(), w.in_c / w.groups * w.kernel_h * w.kernel_w};
  }
  return {w.m, w.n, w.k};
}

namespace {

// min(a, b) for either kind of index RasterOf computes (host integers, kernel expressions).
int64_t RasterMin(int64_t a, int64_t b) { return std::min(a, b); }
Expr RasterMin(const Expr& a, const Expr& b) { return Min(a, b); }

// RasterTile's mapping, on host integers or on the kernel's index expressions: {tile row, tile
// column} of block `linear`. A group of g full rows takes g * grid_n blocks; in the last group,
// partial when g does not divide grid_m, a column has only the rows left (grid_m - first).
template <typename Index>
std::pair<Index, Index> RasterOf(const Index& linear, int64_t grid_m, int64_t grid_n, int64_t raster) {
  if (raster <= 1) return {linear / Index(grid_n), linear % Index(grid_n)};
  const int64_t g = std::min(raster, grid_m);
  const Index group = linear / Index(g * grid_n), within = linear % Index(g * grid_n);
  const Index first = group * Index(g);
  const Index rows = grid_m % g == 0 ? Index(g) : RasterMin(Index(grid_m) - first, Index(g));
  return {first + within % rows, within / rows};
}

}  // namespace

TileIndex RasterTile(int64_t linear, int64_t grid_m, int64_t grid_n, int64_t raster) {
  TUNE_CHECK(0 <= linear && linear < grid_m * grid_n) << "block " << linear << " of " << grid_m << " x " << grid_n;
  const auto [m, n] = RasterOf<int64_t>(linear, grid_m, grid_n, raster);
  return {m, n};
}

namespace {

using IndexFn = std::function<Stmt(const Expr& i, const Expr& j)>;
/// Whether element (row, col) of an operand tile exists in its matrix (undefined: every one).
using InsideFn = std::function<Expr(const Expr& row, const Expr& col)>;
/// A tile copy's body: TileCopy::EmitGuarded's, `guard` undefined where the element exists.
using CopyFn = std::function<Stmt(const Expr& row, const Expr& col, const Expr& slot, const Expr& valid,
                                  const Expr& guard)>;
/// emit(i, j, m, n): row i, column j of a thread's register tile, at C[m][n].
using ElementFn = std::function<Stmt(const Expr& i, const Expr& j, const Expr& m, const Expr& n)>;

/// The register tile's FMAs, fma(i, j) for every row i < TM and column j < TN, in the order of
/// fma_order: rows (unrolled loops, row by row: consecutive FMAs share the row's A value),
/// columns (column by column), blocked (2 x 2 blocks, the rows of blocks in turn, every other
/// row of blocks in reverse: each FMA shares one operand with the FMA before it and the other
/// with the one before that), quads (per 4 rows -- one 128-bit fragment load -- column pairs in
/// turn, each pair over the rows two by two, the row pairs in alternating order).
Stmt Fmas(const GemmTiles& t, const IndexFn& fma) {
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

/// The kernel of one config, built step by step: Build() is init, main loop, write-back and
/// split-K fix-up, allocated and bound to the launch.
class GemmKernel {
 public:
  GemmKernel(const Workload& wl, const GemmTiles& t, const ArgBuffers& args);
  Schedule Build() const;

 private:
  // Block and thread tiling.
  std::vector<Expr> AtBatch(std::vector<Expr> rest) const;
  std::vector<Expr> AtLayer(std::vector<Expr> rest) const;
  Expr KTile(const Expr& tile) const;
  Expr RowOf(const Expr& i, const Expr& quad, const Expr& lane) const;
  Expr ColOf(const Expr& j, const Expr& quad, const Expr& lane) const;
  // Operand tiles: global sources, shared destinations, the main loop over the K tiles.
  InsideFn InsideA(const Expr& step) const;
  InsideFn InsideB(const Expr& step) const;
  Stmt Copy(const TileCopy& copy, const std::string& prefix, const InsideFn& inside, const CopyFn& body) const;
  Expr ASource(const Expr& step, const Expr& r, const Expr& col, bool clamp = false) const;
  Expr BSource(const Expr& step, const Expr& r, const Expr& col, bool clamp = false) const;
  Stmt ADest(const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) const;
  Stmt BDest(const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) const;
  PipelinedLoop MainLoop() const;
  Stmt Compute(const Expr& stage) const;
  // Results: the accumulators, their way to the output (or to split-K's partial tiles).
  Stmt InitAccumulators() const;
  Expr OutRow(const Expr& i) const;
  std::vector<Expr> OutAt(const Expr& m, const Expr& n) const;
  Expr Epilogue(Expr v, const Expr& m, const Expr& n) const;
  std::vector<Expr> WsAt(const Expr& s, const Expr& m, const Expr& n) const;
  Stmt Columns(const Expr& i, const Expr& m, const ElementFn& emit) const;
  Stmt Walk(const ElementFn& emit) const;
  Stmt Result(Expr v, const Expr& m, const Expr& n) const;
  Stmt WriteTile() const;
  Stmt SplitKFixUp() const;
  Stmt AllocateAndBind(Stmt body) const;

  const Workload& wl_;
  const GemmTiles& t_;
  bool batched_, dense_, conv_;
  // A grouped convolution: one GEMM per group, on blockIdx.z as batch_matmul's batch; layered_:
  // batched or grouped, blockIdx.z (before the K splits) runs over `layers_` GEMMs.
  bool grouped_, layered_;
  int64_t layers_;
  GemmDims dims_;
  // Tails: the tiles cover more than the extent (the last block or K tile is partial), so
  // copies guard what lies past the matrix and the output stores what lies inside it.
  bool m_tail_, n_tail_, k_tail_;
  int64_t bm_, bn_, bk_, split_, tiles_per_split_, slice_k_;
  Buffer a_, b_, bias_, out_;
  std::vector<Buffer> args_;
  Buffer ws_, arrivals_;  // split-K's partial tiles and per-tile counters
  Expr bx_, by_, bz_, batch_index_, split_index_, row0_, col0_;
  Expr tile_m_, tile_n_;  // the block's output tile (row and column of tiles): by, bx under raster 1
  Expr oc0_;  // a grouped convolution's first output channel: group * M (undefined otherwise)
  ThreadBlock threads_;
  TileCopy copy_a_, copy_b_;
  Buffer as_, bs_, acc_, af_, bf_;
  Buffer stage_a_, stage_b_;  // staging registers of the register-staged copies
  Buffer partial_, last_;     // K slices' partial tiles; split-K's last-block flag
};

GemmKernel::GemmKernel(const Workload& wl, const GemmTiles& t, const ArgBuffers& args) : wl_(wl), t_(t) {
  batched_ = wl.op == OpKind::kBatchMatmul;
  dense_ = wl.op == OpKind::kDense;
  conv_ = wl.op == OpKind::kConv2d;
  grouped_ = conv_ && wl.groups > 1;
  layered_ = batched_ || grouped_;
  layers_ = batched_ ? wl.batch : grouped_ ? wl.groups : 1;
  bm_ = t.bm(), bn_ = t.bn(), bk_ = t.bk;
  split_ = t.split, tiles_per_split_ = t.k_tiles / split_;
  slice_k_ = bk_ / t.slices;  // k values of a BK step each slice accumulates
  const GemmDims dims = GemmDimsOf(wl);
  dims_ = dims;
  m_tail_ = t.grid_m * bm_ > dims.m, n_tail_ = t.grid_n * bn_ > dims.n, k_tail_ = t.k_tiles * bk_ > dims.k;
  Buffer input0 = args.input0, input1 = args.input1, out = args.out;
  if (conv_) {
    // The kernel's pointers seen as the GEMM's matrices: weight[OC][C/G*KH*KW] (the same bytes
    // as [OC][C/G][KH][KW]; group g's A is rows g * M on) and the output flat; the input stays
    // 4-D for the window gather.
    input1 = MakeBuffer(input1->name, {wl.out_c, dims.k}, BufferScope::kArg, input1->arg_index);
    out = MakeBuffer(out->name, {out->NumElements()}, BufferScope::kArg, out->arg_index);
  }
  a_ = conv_ ? input1 : input0, b_ = conv_ ? input0 : input1;
  bias_ = args.bias, out_ = out;
  args_ = {input0, input1};
  if (bias_) args_.push_back(bias_);
  args_.push_back(out_);
  // Split-K: blockIdx.z (after the batch, z = batch * k_split + split) picks a range of K
  // tiles; the blocks of an output tile leave their partial tiles in `ws` and count
  // themselves in `arrivals`; the last to arrive sums the partials and writes the output.
  if (split_ > 1) {
    const int arg = static_cast<int>(args_.size());
    std::vector<int64_t> ws_shape = {split_, dims.m, dims.n}, count_shape = {t.grid_m, t.grid_n};
    if (layered_) {
      ws_shape.insert(ws_shape.begin(), layers_);
      count_shape.insert(count_shape.begin(), layers_);
    }
    ws_ = MakeScratchBuffer("ws", ws_shape, arg, DType::kFloat32, /*zero_init=*/false, /*coherent=*/true);
    arrivals_ = MakeScratchBuffer("arrivals", count_shape, arg + 1, DType::kInt32, /*zero_init=*/true,
                                  /*coherent=*/false);
    args_.push_back(ws_);
    args_.push_back(arrivals_);
  }

  // One block per BM x BN output tile (blockIdx.z over the batch or the groups and the K
  // splits), TX x TY threads of TM x TN outputs each, K slices on threadIdx.z.
  if (layered_ || split_ > 1) bz_ = MakeVar("bz");
  by_ = MakeVar("by"), bx_ = MakeVar("bx");
  batch_index_ = layered_ && split_ > 1 ? bz_ / Expr(split_) : bz_;
  split_index_ = split_ == 1 ? Expr() : layered_ ? bz_ % Expr(split_) : bz_;
  if (grouped_) oc0_ = batch_index_ * Expr(dims.m);
  threads_ = ThreadBlock{MakeVar("tx"), MakeVar("ty"), t.tx, t.ty, t.slices > 1 ? MakeVar("tz") : Expr(), t.slices};
  // The block's output tile: blockIdx.y and .x under raster 1 (the kernel as before the knob),
  // else block by * grid_n + bx in grouped order (RasterTile).
  if (t.raster <= 1) {
    tile_m_ = by_, tile_n_ = bx_;
  } else {
    std::tie(tile_m_, tile_n_) = RasterOf<Expr>(by_ * Expr(t.grid_n) + bx_, t.grid_m, t.grid_n, t.raster);
  }
  row0_ = tile_m_ * Expr(bm_), col0_ = tile_n_ * Expr(bn_);

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
  copy_a_ = TileCopy{bm_, bk_, a_async ? 1 : t.vector, threads_};
  copy_b_ = dense_ ? TileCopy{bn_, bk_, t.async > 0 ? 1 : t.vector, threads_} : TileCopy{bk_, bn_, t.vector, threads_};
  const int64_t a_rows = copy_a_.Exact() ? bk_ : bk_ + 1, b_rows = copy_b_.Exact() ? bk_ : bk_ + 1;
  as_ = MakeBuffer("As", {t.stages(), a_rows, bm_ + t.pad}, BufferScope::kShared);
  bs_ = MakeBuffer("Bs", {t.stages(), b_rows, bn_ + t.pad}, BufferScope::kShared);
  acc_ = MakeBuffer("acc", {t.tm, t.tn}, BufferScope::kLocal);
  af_ = MakeBuffer("a_frag", {t.tm}, BufferScope::kLocal);
  bf_ = MakeBuffer("b_frag", {t.tn}, BufferScope::kLocal);
  if (t.double_buffer || t.a_registers) {
    stage_a_ = MakeBuffer("a_stage", {copy_a_.ElementsPerThread()}, BufferScope::kLocal);
  }
  if (t.double_buffer) stage_b_ = MakeBuffer("b_stage", {copy_b_.ElementsPerThread()}, BufferScope::kLocal);
  if (t.slices > 1) partial_ = MakeBuffer("partial", {t.slices, t.tm, t.tn, t.ty, t.tx}, BufferScope::kShared);
  if (split_ > 1) last_ = MakeBuffer("last", {1}, BufferScope::kShared);
}

Schedule GemmKernel::Build() const {
  const PipelinedLoop loop = MainLoop();
  Stmt main_loop = t_.async > 0 ? loop.EmitAsync("kt", tiles_per_split_, t_.async)
                                : loop.Emit("kt", tiles_per_split_, t_.double_buffer);
  Schedule sched;
  sched.args = args_;
  sched.body = AllocateAndBind(Seq({InitAccumulators(), main_loop, WriteTile(), SplitKFixUp()}));
  return sched;
}

std::vector<Expr> GemmKernel::AtBatch(std::vector<Expr> rest) const {
  if (batched_) rest.insert(rest.begin(), batch_index_);
  return rest;
}

// Split-K's partial tiles and counters: one set per batch or group.
std::vector<Expr> GemmKernel::AtLayer(std::vector<Expr> rest) const {
  if (layered_) rest.insert(rest.begin(), batch_index_);
  return rest;
}

// The K tile a split's `tile`-th step reads.
Expr GemmKernel::KTile(const Expr& tile) const {
  return split_ == 1 ? tile : split_index_ * Expr(tiles_per_split_) + tile;
}

// Offset in the block tile of a thread's i-th row / j-th column. Interleaved, an 8-wide
// thread tile is two 4-wide halves half a block tile apart, so a warp's 128-bit shared
// loads cover consecutive addresses (no bank conflicts) and its stores are contiguous.
// (i = quad * 4 + lane; quad undefined when the loop was not split in fours.)
Expr TileOffset(const GemmTiles& t, const Expr& thread, int64_t per_thread, int64_t block, const Expr& i,
                const Expr& quad, const Expr& lane) {
  if (!t.Interleaved(per_thread)) return thread * Expr(per_thread) + i;
  TUNE_CHECK(quad.defined()) << "an interleaved tile is walked in fours";
  return quad * Expr(block / (per_thread / 4)) + thread * Expr(4) + lane;
}

Expr GemmKernel::RowOf(const Expr& i, const Expr& quad, const Expr& lane) const {
  return TileOffset(t_, threads_.ty, t_.tm, bm_, i, quad, lane);
}

Expr GemmKernel::ColOf(const Expr& j, const Expr& quad, const Expr& lane) const {
  return TileOffset(t_, threads_.tx, t_.tn, bn_, j, quad, lane);
}

// `a` and `b` under their bounds where a tail exists (an undefined part is no bound).
Expr BothBelow(const Expr& a, const Expr& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a && b;
}

// A's tile (rows m, cols k) of K step `step`: rows past M and columns past K do not exist.
InsideFn GemmKernel::InsideA(const Expr& step) const {
  if (!m_tail_ && !k_tail_) return nullptr;
  const Expr k0 = KTile(step) * Expr(bk_);
  return [this, k0](const Expr& r, const Expr& col) {
    return BothBelow(m_tail_ ? row0_ + r < Expr(dims_.m) : Expr(), k_tail_ ? k0 + col < Expr(dims_.k) : Expr());
  };
}

// B's tile: rows n, cols k (dense) or rows k, cols n.
InsideFn GemmKernel::InsideB(const Expr& step) const {
  if (!n_tail_ && !k_tail_) return nullptr;
  const Expr k0 = KTile(step) * Expr(bk_);
  return [this, k0](const Expr& r, const Expr& col) {
    const Expr& n = dense_ ? r : col;
    const Expr& k = dense_ ? col : r;
    return BothBelow(n_tail_ ? col0_ + n < Expr(dims_.n) : Expr(), k_tail_ ? k0 + k < Expr(dims_.k) : Expr());
  };
}

// `copy` of a tile: plain where every element exists (the kernel of a config without tails is
// unchanged), else guarded (TileCopy::EmitGuarded).
Stmt GemmKernel::Copy(const TileCopy& copy, const std::string& prefix, const InsideFn& inside,
                      const CopyFn& body) const {
  if (!inside) {
    return copy.Emit(prefix, [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
      return body(r, col, slot, valid, Expr());
    });
  }
  return copy.EmitGuarded(prefix, inside, body);
}

// `v`, or zero where `guard` (when defined) says the element lies past the matrix.
Expr OrZero(const Expr& guard, Expr v) { return guard.defined() ? Select(guard, std::move(v), FloatImm(0.0)) : v; }

// With `clamp`, a row past M (a tail) reads row M - 1 instead: an element of the matrix whose
// product only reaches outputs that are never stored (see MainLoop's asynchronous copies).
Expr GemmKernel::ASource(const Expr& step, const Expr& r, const Expr& col, bool clamp) const {
  const Expr tile = KTile(step);
  Expr m = row0_ + r;
  if (clamp && m_tail_) m = Min(m, Expr(dims_.m - 1));
  if (grouped_) m = oc0_ + m;  // the group's rows of the weight
  return Load(a_, AtBatch({m, tile * Expr(bk_) + col}));
}

// With `clamp`, a column past N (a tail) reads column N - 1 instead, as ASource's rows.
Expr GemmKernel::BSource(const Expr& step, const Expr& r, const Expr& col, bool clamp) const {
  const Expr tile = KTile(step);
  auto n_of = [&](const Expr& offset) {
    Expr n = col0_ + offset;
    return clamp && n_tail_ ? Min(n, Expr(dims_.n - 1)) : n;
  };
  if (dense_) return Load(b_, {n_of(r), tile * Expr(bk_) + col});
  if (conv_) {
    // im2col on the fly: k -> (c, kh, kw), n -> (image, oh, ow); zero outside the input. A
    // group reads its own C / groups input channels.
    const Workload& wl = wl_;
    const Expr k = tile * Expr(bk_) + r, p = col0_ + col;
    const int64_t window = wl.kernel_h * wl.kernel_w, pixels = wl.out_h() * wl.out_w();
    Expr c = k / Expr(window);
    if (grouped_) c = batch_index_ * Expr(wl.in_c / wl.groups) + c;
    const Expr kh = (k % Expr(window)) / Expr(wl.kernel_w), kw = k % Expr(wl.kernel_w);
    const Expr img = p / Expr(pixels), oh = (p % Expr(pixels)) / Expr(wl.out_w()), ow = p % Expr(wl.out_w());
    const Expr ih = oh * Expr(wl.stride_h) + kh * Expr(wl.dilation_h) - Expr(wl.pad_h);
    const Expr iw = ow * Expr(wl.stride_w) + kw * Expr(wl.dilation_w) - Expr(wl.pad_w);
    const Expr inside = (Expr(int64_t{0}) <= ih) && (ih < Expr(wl.in_h)) && (Expr(int64_t{0}) <= iw) &&
                        (iw < Expr(wl.in_w));
    return Select(inside, Load(b_, {img, c, ih, iw}), FloatImm(0.0));
  }
  return Load(b_, AtBatch({tile * Expr(bk_) + r, n_of(col)}));
}

// An idle lane's store goes to the spare k row (index bk).
Expr Spare(const Expr& valid, const Expr& k, int64_t bk) {
  return valid.defined() ? Select(valid, k, Expr(bk)) : k;
}

Stmt GemmKernel::ADest(const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) const {
  return Store(as_, {stage, Spare(valid, col, bk_), r}, std::move(v));
}

Stmt GemmKernel::BDest(const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) const {
  if (dense_) return Store(bs_, {stage, Spare(valid, col, bk_), r}, std::move(v));
  return Store(bs_, {stage, Spare(valid, r, bk_), col}, std::move(v));
}

PipelinedLoop GemmKernel::MainLoop() const {
  // Each operand's copies of tile `tile` into stage `stage`: straight (load), to its staging
  // registers (fetch) and from them (store), or asynchronous (issue).
  using TileStep = std::function<Stmt(const Expr& tile, const Expr& stage)>;
  const TileStep load_a = [this](const Expr& tile, const Expr& stage) {
    return Copy(copy_a_, "la", InsideA(tile),
                [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid, const Expr& guard) {
                  return ADest(stage, r, col, valid, OrZero(guard, ASource(tile, r, col)));
                });
  };
  const TileStep load_b = [this](const Expr& tile, const Expr& stage) {
    return Copy(copy_b_, "lb", InsideB(tile),
                [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid, const Expr& guard) {
                  return BDest(stage, r, col, valid, OrZero(guard, BSource(tile, r, col)));
                });
  };
  auto fetch_a = [this](const Expr& tile) {
    return Copy(copy_a_, "fa", InsideA(tile),
                [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&, const Expr& guard) {
                  return Store(stage_a_, {slot}, OrZero(guard, ASource(tile, r, col)));
                });
  };
  auto fetch_b = [this](const Expr& tile) {
    return Copy(copy_b_, "fb", InsideB(tile),
                [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&, const Expr& guard) {
                  return Store(stage_b_, {slot}, OrZero(guard, BSource(tile, r, col)));
                });
  };
  auto store_a = [this](const Expr& stage) {
    return copy_a_.Emit("sa", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
      return ADest(stage, r, col, valid, Load(stage_a_, {slot}));
    });
  };
  auto store_b = [this](const Expr& stage) {
    return copy_b_.Emit("sb", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
      return BDest(stage, r, col, valid, Load(stage_b_, {slot}));
    });
  };
  // Asynchronous copies take no guard: a branch per element around cp.async makes ptxas take
  // minutes. K has no tail under the pipeline (a constraint of the template), and rows of A past
  // M or columns of B past N are read clamped to the last row or column: finite values that
  // only reach outputs that are never stored.
  const TileStep issue_a = [this](const Expr& tile, const Expr& stage) {
    return copy_a_.Emit("ca", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return AsAsyncCopy(ADest(stage, r, col, valid, ASource(tile, r, col, /*clamp=*/true)));
    });
  };
  const TileStep issue_b = [this](const Expr& tile, const Expr& stage) {
    return copy_b_.Emit("cb", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
      return AsAsyncCopy(BDest(stage, r, col, valid, BSource(tile, r, col, /*clamp=*/true)));
    });
  };

  PipelinedLoop loop;
  if (t_.a_registers) {
    // Hybrid: B by cp.async, A register-staged within the same stages (see EmitAsync).
    loop.load = load_a;
    loop.fetch = fetch_a;
    loop.store = store_a;
    loop.issue = issue_b;
  } else {
    loop.load = [=](const Expr& tile, const Expr& stage) { return Seq({load_a(tile, stage), load_b(tile, stage)}); };
    if (t_.async == 0) {  // a fetch would make EmitAsync stage through registers
      loop.fetch = [=](const Expr& tile) { return Seq({fetch_a(tile), fetch_b(tile)}); };
      loop.store = [=](const Expr& stage) { return Seq({store_a(stage), store_b(stage)}); };
    }
    loop.issue = [=](const Expr& tile, const Expr& stage) {
      return Seq({issue_a(tile, stage), issue_b(tile, stage)});
    };
  }
  loop.compute = [this](const Expr& stage) { return Compute(stage); };
  loop.unroll_stages = t_.unroll_stages;
  return loop;
}

// One K step's share of this thread's slice: the A and B fragments from shared memory, then
// the register tile's FMAs.
Stmt GemmKernel::Compute(const Expr& stage) const {
  Expr kslice = MakeVar("kk");
  Expr kk = t_.slices > 1 ? threads_.tz * Expr(slice_k_) + kslice : kslice;
  Stmt step = Seq({
      VectorizedLoop("i", t_.tm, [&](const Expr& i, const Expr& quad, const Expr& lane) {
        return Store(af_, {i}, Load(as_, {stage, kk, RowOf(i, quad, lane)}));
      }),
      VectorizedLoop("j", t_.tn, [&](const Expr& j, const Expr& quad, const Expr& lane) {
        return Store(bf_, {j}, Load(bs_, {stage, kk, ColOf(j, quad, lane)}));
      }),
      Fmas(t_, [&](const Expr& i, const Expr& j) {
        return Store(acc_, {i, j}, Load(acc_, {i, j}) + Load(af_, {i}) * Load(bf_, {j}));
      }),
  });
  return For(kslice, slice_k_, t_.unroll_k ? ForKind::kUnrolled : ForKind::kSerial, step);
}

Stmt GemmKernel::InitAccumulators() const {
  return UnrolledLoop("i", t_.tm, [&](const Expr& i) {
    return UnrolledLoop("j", t_.tn, [&](const Expr& j) { return Store(acc_, {i, j}, FloatImm(0.0)); });
  });
}

// Row i of a thread's tile in the block tile; interleaved, (i / 4) * BM/2 + ty * 4 + i % 4
// (constants fold when i is one).
Expr GemmKernel::OutRow(const Expr& i) const {
  if (!t_.Interleaved(t_.tm)) return threads_.ty * Expr(t_.tm) + i;
  return (i / Expr(4)) * Expr(bm_ / (t_.tm / 4)) + threads_.ty * Expr(4) + i % Expr(4);
}

// C[m][n] -> the output: out[n][m] for the GEMMs, out[image][oc = m][pixel] for conv2d (oc =
// group * M + m for a grouped one).
std::vector<Expr> GemmKernel::OutAt(const Expr& m, const Expr& n) const {
  if (!conv_) return AtBatch({m, n});
  const int64_t pixels = wl_.out_h() * wl_.out_w();
  const Expr oc = grouped_ ? oc0_ + m : m;
  if (wl_.batch == 1) return {oc * Expr(pixels) + n};
  return {((n / Expr(pixels)) * Expr(wl_.out_c) + oc) * Expr(pixels) + n % Expr(pixels)};
}

Expr GemmKernel::Epilogue(Expr v, const Expr& m, const Expr& n) const {
  return ApplyEpilogue(wl_, std::move(v), bias_, conv_ ? (grouped_ ? oc0_ + m : m) : n);
}

std::vector<Expr> GemmKernel::WsAt(const Expr& s, const Expr& m, const Expr& n) const {
  return AtLayer({s, m, n});
}

// This thread's share of the output tile, element by element: emit(i, j, m, n) for row i,
// column j of its register tile at C[m][n]. Without K slices every element; with them, slice
// s takes rows s, s + slices, ... of every thread's tile (after the partial tiles met).
Stmt GemmKernel::Walk(const ElementFn& emit) const {
  std::vector<Stmt> rows;
  if (t_.slices == 1) {
    for (int64_t i = 0; i < t_.tm; ++i) rows.push_back(Columns(Expr(i), row0_ + OutRow(Expr(i)), emit));
  } else {
    rows.push_back(UnrolledLoop("r", t_.tm / t_.slices, [&](const Expr& r) {
      Expr i = r * Expr(t_.slices) + threads_.tz;
      return Columns(i, row0_ + OutRow(i), emit);
    }));
  }
  return Seq(std::move(rows));
}

// Row i of this thread's tile, at C row m: its TN columns in a vectorized loop. With a tail
// along N, a run of four columns wholly inside stays vectorized and the others go element by
// element, each emitted only inside; with a tail along M, the row only where m < M.
Stmt GemmKernel::Columns(const Expr& i, const Expr& m, const ElementFn& emit) const {
  auto at = [&](const Expr& j, const Expr& quad, const Expr& lane) {
    return emit(i, j, m, col0_ + ColOf(j, quad, lane));
  };
  Stmt row;
  if (!n_tail_) {
    row = VectorizedLoop("j", t_.tn, at);
  } else {
    const Expr n_bound(dims_.n);
    auto guarded = [&](const Expr& j, const Expr& quad, const Expr& lane) {
      return If(col0_ + ColOf(j, quad, lane) < n_bound, at(j, quad, lane));
    };
    if (t_.tn % 4 != 0) {
      row = UnrolledLoop("j", t_.tn, [&](const Expr& j) { return guarded(j, Expr(), Expr()); });
    } else {
      Expr quad = MakeVar("j_o"), lane = MakeVar("j_v"), each = MakeVar("j_t");
      Expr run_inside = col0_ + ColOf(quad * Expr(4) + Expr(3), quad, Expr(3)) < n_bound;
      row = For(quad, t_.tn / 4, ForKind::kUnrolled,
                Seq({If(run_inside, For(lane, 4, ForKind::kVectorized, at(quad * Expr(4) + lane, quad, lane))),
                     If(run_inside == Expr(int64_t{0}),
                        For(each, 4, ForKind::kUnrolled, guarded(quad * Expr(4) + each, quad, each)))}));
    }
  }
  return m_tail_ ? If(m < Expr(dims_.m), row) : row;
}

// A finished sum for C[m][n]: the output through the epilogue, or with split-K this split's
// partial tile.
Stmt GemmKernel::Result(Expr v, const Expr& m, const Expr& n) const {
  if (split_ > 1) return Store(ws_, WsAt(split_index_, m, n), std::move(v));
  return Store(out_, OutAt(m, n), Epilogue(std::move(v), m, n));
}

Stmt GemmKernel::WriteTile() const {
  if (t_.slices == 1) {
    return Walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
      return Result(Load(acc_, {i, j}), m, n);
    });
  }
  // Each slice leaves its partial tile in shared memory (consecutive threads, consecutive
  // words); after a barrier, slice s sums rows s, s + slices, ... of every thread's tile over
  // the slices and writes them.
  const ThreadBlock& th = threads_;
  return Seq({
      UnrolledLoop("i", t_.tm, [&](const Expr& i) {
        return UnrolledLoop("j", t_.tn, [&](const Expr& j) {
          return Store(partial_, {th.tz, i, j, th.ty, th.tx}, Load(acc_, {i, j}));
        });
      }),
      Sync(),
      Walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
        Expr sum = Load(partial_, {Expr(int64_t{0}), i, j, th.ty, th.tx});
        for (int64_t s = 1; s < t_.slices; ++s) sum = sum + Load(partial_, {Expr(s), i, j, th.ty, th.tx});
        return Result(sum, m, n);
      }),
  });
}

Stmt GemmKernel::SplitKFixUp() const {
  if (split_ == 1) return nullptr;
  // The serial fix-up: every thread fences its partial tile; after a barrier the first thread
  // counts the block in (fencing again, so the partials of the blocks counted before are
  // seen) and tells the block through shared memory whether it was the last of the tile's
  // k_split blocks. The last one sums the partials in split order (the same result whichever
  // block comes last), writes the output and resets the counter for the next launch.
  Expr first_thread = (threads_.tx == Expr(int64_t{0})) && (threads_.ty == Expr(int64_t{0}));
  if (t_.slices > 1) first_thread = first_thread && (threads_.tz == Expr(int64_t{0}));
  const std::vector<Expr> counter = AtLayer({tile_m_, tile_n_});
  Expr arrived = MakeVar("arrived");
  Stmt count_in = If(first_thread, AtomicAdd(arrivals_, counter, Expr(1), arrived,
                                             Seq({Fence(), Store(last_, {Expr(int64_t{0})},
                                                                 Select(arrived == Expr(split_ - 1), FloatImm(1.0),
                                                                        FloatImm(0.0)))})));
  Stmt fixup = Walk([&](const Expr& i, const Expr& j, const Expr& m, const Expr& n) {
    Expr sum = Load(ws_, WsAt(Expr(int64_t{0}), m, n));
    for (int64_t s = 1; s < split_; ++s) sum = sum + Load(ws_, WsAt(Expr(s), m, n));
    return Store(out_, OutAt(m, n), Epilogue(sum, m, n));
  });
  return Seq({Fence(), Sync(), count_in, Sync(),
              If(FloatImm(0.0) < Load(last_, {Expr(int64_t{0})}),
                 Seq({fixup, If(first_thread, Store(arrivals_, counter, Expr(int64_t{0})))}))});
}

Stmt GemmKernel::AllocateAndBind(Stmt body) const {
  for (const Buffer& scratch : {stage_b_, stage_a_, partial_, last_}) {
    if (scratch) body = Allocate(scratch, body);
  }
  body = Allocate(as_, Allocate(bs_, Allocate(acc_, Allocate(af_, Allocate(bf_, body)))));
  const int64_t grid_z = layers_ * split_;
  return BindLaunch(BlockGrid{bx_, by_, t_.grid_n, t_.grid_m, bz_, grid_z}, threads_, body);
}

}  // namespace

Schedule BuildGemmKernel(const Workload& workload, const GemmTiles& tiles, const ArgBuffers& args) {
  return GemmKernel(workload, tiles, args).Build();
}

}  // namespace tune::codegen
