// The direct conv2d kernel: shared-memory halo and weight tiles, register tiles of outputs.
#include "codegen/cuda/cuda_direct_conv.h"

#include "base/check.h"

namespace tune::codegen {
namespace {

constexpr int64_t kSharedAlignFloats = 4;  // the CUDA printer aligns every shared buffer to 16 bytes

int64_t AlignedFloats(int64_t n) { return (n + kSharedAlignFloats - 1) / kSharedAlignFloats * kSharedAlignFloats; }

}  // namespace

DirectConvPlan PlanDirectConv(const Workload& w, const DirectConvTiles& t) {
  DirectConvPlan p;
  p.tiles = t;
  p.halo_h = (t.bh() - 1) * w.stride_h + (w.kernel_h - 1) * w.dilation_h + 1;
  p.halo_w = (t.bw() - 1) * w.stride_w + (w.kernel_w - 1) * w.dilation_w + 1;
  p.window = w.kernel_h * w.kernel_w;
  // Placeholder thread indices: a plan only needs the counts; the kernel builds its own copies.
  ThreadBlock threads{Expr(), Expr(), t.tw, t.th, Expr(), t.tz};
  p.halo = TileCopy{t.bc * p.halo_h, p.halo_w, 1, threads};
  p.weights = TileCopy{t.bm(), t.bc * p.window, t.vector, threads};
  p.stages = t.double_buffer ? 2 : 1;
  return p;
}

int64_t DirectConvPlan::SharedFloats() const {
  return AlignedFloats(stages * HaloRows() * halo_w) + AlignedFloats(stages * WeightRows() * (tiles.bm() + tiles.pad));
}

int64_t DirectConvPlan::Registers(int64_t overhead) const {
  const DirectConvTiles& t = tiles;
  int64_t regs = t.tm * t.rh * t.rw + t.tm + t.rh * t.rw + overhead;
  if (t.double_buffer) regs += halo.ElementsPerThread() + weights.ElementsPerThread();
  return regs;
}

int64_t DirectConvPlan::UnrolledFma() const {
  const DirectConvTiles& t = tiles;
  return (t.unroll ? t.bc : 1) * window * t.tm * t.rh * t.rw;
}

Schedule BuildDirectConv(const Workload& wl, const DirectConvPlan& p, const ArgBuffers& args) {
  TUNE_CHECK(wl.op == OpKind::kConv2d) << "direct conv2d of " << wl.Key();
  const DirectConvTiles& t = p.tiles;
  const int64_t bm = t.bm(), step_k = t.bc * p.window;
  const int64_t group_c = wl.in_c / wl.groups;  // input channels of a group
  TUNE_CHECK(t.grid_m * bm * wl.groups == wl.out_c && t.c_steps * t.bc == group_c) << "direct conv2d tiles of " << wl.Key();
  Schedule sched;
  // The weight seen as [OC][C/G * KH * KW] (the same bytes): a block's slice of one channel
  // step is BM rows of step_k consecutive floats.
  const Buffer weight = MakeBuffer(args.input1->name, {wl.out_c, group_c * p.window}, BufferScope::kArg,
                                   args.input1->arg_index);
  const Buffer data = args.input0, bias = args.bias, out = args.out;
  sched.args = {data, weight};
  if (bias) sched.args.push_back(bias);
  sched.args.push_back(out);

  Expr bx = MakeVar("bx"), by = MakeVar("by"), bz = MakeVar("bz");
  ThreadBlock threads{MakeVar("tx"), MakeVar("ty"), t.tw, t.th, MakeVar("tz"), t.tz};
  // bz = image * (groups * grid_m) + channel block; a block's channels lie in one group (BM
  // divides OC / groups), whose input channels it reads.
  const int64_t blocks_m = t.grid_m * wl.groups;
  const Expr image = wl.batch == 1 ? Expr(int64_t{0}) : bz / Expr(blocks_m);
  const Expr block_m = wl.batch == 1 ? bz : bz % Expr(blocks_m);
  const Expr oc0 = block_m * Expr(bm);
  const Expr c0 = wl.groups == 1 ? Expr() : (block_m / Expr(t.grid_m)) * Expr(group_c);
  const Expr oh0 = by * Expr(t.bh()), ow0 = bx * Expr(t.bw());
  // The halo's first input row and column (negative in the padding).
  const Expr ih0 = oh0 * Expr(wl.stride_h) - Expr(wl.pad_h), iw0 = ow0 * Expr(wl.stride_w) - Expr(wl.pad_w);

  // Shared stages: Hs[stage][c * halo_h + row][col] (the input), Ws[stage][k][m] (the weight,
  // transposed; k = (c * KH + kh) * KW + kw within the step). Spare rows take idle lanes.
  Buffer hs = MakeBuffer("Hs", {p.stages, p.HaloRows(), p.halo_w}, BufferScope::kShared);
  Buffer ws = MakeBuffer("Ws", {p.stages, p.WeightRows(), bm + t.pad}, BufferScope::kShared);
  Buffer acc = MakeBuffer("acc", {t.tm, t.rh, t.rw}, BufferScope::kLocal);
  Buffer wf = MakeBuffer("w_frag", {t.tm}, BufferScope::kLocal);
  Buffer xf = MakeBuffer("x_frag", {t.rh, t.rw}, BufferScope::kLocal);
  TileCopy copy_h = p.halo, copy_w = p.weights;
  copy_h.threads = copy_w.threads = threads;

  auto spare = [](const Expr& valid, const Expr& row, int64_t spare_row) {
    return valid.defined() ? Select(valid, row, Expr(spare_row)) : row;
  };
  // Halo element (r, col) of channel step `step`: zero where the window hangs over the padding.
  // Without padding the halo of every block lies inside the input (OH and OW are defined so),
  // so that dimension needs no guard.
  auto h_src = [&](const Expr& step, const Expr& r, const Expr& col) -> Expr {
    Expr c = step * Expr(t.bc) + r / Expr(p.halo_h);
    if (c0.defined()) c = c0 + c;
    const Expr ih = ih0 + r % Expr(p.halo_h), iw = iw0 + col;
    Expr inside;
    auto both = [&](Expr a, Expr b) { return inside.defined() ? inside && a && b : a && b; };
    if (wl.pad_h > 0) inside = both(Expr(int64_t{0}) <= ih, ih < Expr(wl.in_h));
    if (wl.pad_w > 0) inside = both(Expr(int64_t{0}) <= iw, iw < Expr(wl.in_w));
    Expr x = Load(data, {image, c, ih, iw});
    return inside.defined() ? Select(inside, x, FloatImm(0.0)) : x;
  };
  auto h_dst = [&](const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) {
    return Store(hs, {stage, spare(valid, r, copy_h.rows), col}, std::move(v));
  };
  auto w_src = [&](const Expr& step, const Expr& r, const Expr& col) {
    return Load(weight, {oc0 + r, step * Expr(step_k) + col});
  };
  auto w_dst = [&](const Expr& stage, const Expr& r, const Expr& col, const Expr& valid, Expr v) {
    return Store(ws, {stage, spare(valid, col, copy_w.cols), r}, std::move(v));
  };
  Buffer stage_h, stage_w;
  if (t.double_buffer) {
    stage_h = MakeBuffer("h_stage", {copy_h.ElementsPerThread()}, BufferScope::kLocal);
    stage_w = MakeBuffer("w_stage", {copy_w.ElementsPerThread()}, BufferScope::kLocal);
  }

  PipelinedLoop loop;
  loop.load = [&](const Expr& step, const Expr& stage) {
    return Seq({copy_h.Emit("lh", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
                  return h_dst(stage, r, col, valid, h_src(step, r, col));
                }),
                copy_w.Emit("lw", [&](const Expr& r, const Expr& col, const Expr&, const Expr& valid) {
                  return w_dst(stage, r, col, valid, w_src(step, r, col));
                })});
  };
  loop.fetch = [&](const Expr& step) {
    return Seq({copy_h.Emit("fh", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&) {
                  return Store(stage_h, {slot}, h_src(step, r, col));
                }),
                copy_w.Emit("fw", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr&) {
                  return Store(stage_w, {slot}, w_src(step, r, col));
                })});
  };
  loop.store = [&](const Expr& stage) {
    return Seq({copy_h.Emit("sh", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
                  return h_dst(stage, r, col, valid, Load(stage_h, {slot}));
                }),
                copy_w.Emit("sw", [&](const Expr& r, const Expr& col, const Expr& slot, const Expr& valid) {
                  return w_dst(stage, r, col, valid, Load(stage_w, {slot}));
                })});
  };
  // A thread's outputs: channel tz * TM + i, row a * th + ty, column b * tw + tx of the tile.
  auto out_row = [&](const Expr& a) { return a * Expr(t.th) + threads.ty; };
  auto out_col = [&](const Expr& b) { return b * Expr(t.tw) + threads.tx; };
  loop.compute = [&](const Expr& stage) {
    Expr c = MakeVar("c");
    Stmt tap = UnrolledLoop("kh", wl.kernel_h, [&](const Expr& kh) {
      return UnrolledLoop("kw", wl.kernel_w, [&](const Expr& kw) {
        const Expr k = (c * Expr(wl.kernel_h) + kh) * Expr(wl.kernel_w) + kw;
        return Seq({
            VectorizedLoop("i", t.tm, [&](const Expr& i) {
              return Store(wf, {i}, Load(ws, {stage, k, threads.tz * Expr(t.tm) + i}));
            }),
            UnrolledLoop("a", t.rh, [&](const Expr& a) {
              return UnrolledLoop("b", t.rw, [&](const Expr& b) {
                const Expr row = c * Expr(p.halo_h) + out_row(a) * Expr(wl.stride_h) + kh * Expr(wl.dilation_h);
                const Expr col = out_col(b) * Expr(wl.stride_w) + kw * Expr(wl.dilation_w);
                return Store(xf, {a, b}, Load(hs, {stage, row, col}));
              });
            }),
            UnrolledLoop("i", t.tm, [&](const Expr& i) {
              return UnrolledLoop("a", t.rh, [&](const Expr& a) {
                return UnrolledLoop("b", t.rw, [&](const Expr& b) {
                  return Store(acc, {i, a, b}, Load(acc, {i, a, b}) + Load(wf, {i}) * Load(xf, {a, b}));
                });
              });
            }),
        });
      });
    });
    return For(c, t.bc, t.unroll ? ForKind::kUnrolled : ForKind::kSerial, tap);
  };

  Stmt init = UnrolledLoop("i", t.tm, [&](const Expr& i) {
    return UnrolledLoop("a", t.rh, [&](const Expr& a) {
      return UnrolledLoop("b", t.rw, [&](const Expr& b) { return Store(acc, {i, a, b}, FloatImm(0.0)); });
    });
  });
  Stmt write = UnrolledLoop("i", t.tm, [&](const Expr& i) {
    const Expr oc = oc0 + threads.tz * Expr(t.tm) + i;
    return UnrolledLoop("a", t.rh, [&](const Expr& a) {
      return UnrolledLoop("b", t.rw, [&](const Expr& b) {
        return Store(out, {image, oc, oh0 + out_row(a), ow0 + out_col(b)},
                     ApplyEpilogue(wl, Load(acc, {i, a, b}), bias, oc));
      });
    });
  });
  Stmt body = Seq({init, loop.Emit("ct", t.c_steps, t.double_buffer), write});
  if (t.double_buffer) body = Allocate(stage_h, Allocate(stage_w, body));
  body = Allocate(hs, Allocate(ws, Allocate(acc, Allocate(wf, Allocate(xf, body)))));
  sched.body = BindLaunch(BlockGrid{bx, by, t.grid_w, t.grid_h, bz, blocks_m * wl.batch}, threads, body);
  return sched;
}

}  // namespace tune::codegen
