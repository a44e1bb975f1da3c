// The CUDA depthwise conv2d template: knobs, constraints and the direct kernel.
#include "codegen/cuda/cuda_depthwise_template.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/check.h"

namespace tune::codegen {
namespace {

constexpr int64_t kWarp = 32;
constexpr int64_t kMaxPerThread = 16;  // outputs in a thread's register tile
constexpr int64_t kMaxBlockZ = 64;     // CUDA's limit on blockDim.z

struct DwTiles {
  int64_t grid_c, tc, grid_h, th, rh, grid_w, tw, rw;
  bool unroll;
  int64_t threads() const { return tc * th * tw; }
};

DwTiles TilesOf(const search::ConfigSpace& s, const search::Config& c) {
  const auto& fc = s.Get(c, "tile_c");
  const auto& fh = s.Get(c, "tile_h");
  const auto& fw = s.Get(c, "tile_w");
  return DwTiles{fc[0], fc[1], fh[0], fh[1], fh[2], fw[0], fw[1], fw[2], s.GetInt(c, "unroll_window") != 0};
}

}  // namespace

CudaDepthwiseTemplate::CudaDepthwiseTemplate(Workload w, const GpuLimits& limits)
    : Template(std::move(w)), limits_(limits) {
  const Workload& wl = workload_;
  TUNE_CHECK(wl.depthwise()) << "not a depthwise convolution: " << wl.Key();
  auto& s = space_;
  // Tails allowed: a thread past the channels does nothing, an output past the image is not
  // stored (its input reads are guarded by the window's bounds already).
  s.AddSplit("tile_c", wl.out_c, 2, 0, search::SplitTails::kAllowed);
  s.AddSplit("tile_h", wl.out_h(), 3, 4, search::SplitTails::kAllowed);
  s.AddSplit("tile_w", wl.out_w(), 3, 4, search::SplitTails::kAllowed);
  s.AddChoice("unroll_window", {1, 0});
  const search::ConfigSpace* sp = &space_;
  s.AddConstraint("threads", [sp, limits](const search::Config& c) {
    DwTiles t = TilesOf(*sp, c);
    const bool whole = t.grid_c == 1 && t.grid_h == 1 && t.grid_w == 1;
    return t.threads() <= limits.max_threads_per_block && (t.threads() % kWarp == 0 || whole) &&
           t.tc <= kMaxBlockZ;
  });
  s.AddConstraint("register_tile", [sp](const search::Config& c) {
    DwTiles t = TilesOf(*sp, c);
    return t.rh * t.rw <= kMaxPerThread;
  });
}

search::Config CudaDepthwiseTemplate::DefaultConfig() const {
  // One output per thread, as close to 256 threads as the shape allows, x fastest; among
  // equals the least padding (a shape whose divisors allow it keeps a config without tails).
  const Workload& wl = workload_;
  const double outputs = static_cast<double>(wl.out_c) * static_cast<double>(wl.out_h() * wl.out_w());
  return BestScoring([this, outputs](const search::Config& c) -> std::optional<int64_t> {
    DwTiles t = TilesOf(space_, c);
    if (t.rh != 1 || t.rw != 1 || t.unroll) return std::nullopt;
    const double padded = static_cast<double>(search::PaddedExtent(space_.Get(c, "tile_c"))) *
                          static_cast<double>(search::PaddedExtent(space_.Get(c, "tile_h"))) *
                          static_cast<double>(search::PaddedExtent(space_.Get(c, "tile_w")));
    const int64_t waste = static_cast<int64_t>(std::lround(100.0 * (padded / outputs - 1.0)));  // < 1000
    return (-std::abs(t.threads() - 256) * 1000 - t.tc * 10 + t.tw) * 1000 - waste;
  });
}

Schedule CudaDepthwiseTemplate::Build(const search::Config& c) const {
  const Workload& wl = workload_;
  const DwTiles t = TilesOf(space_, c);
  Schedule sched;
  const ArgBuffers buffers = MakeArgBuffers();
  const Buffer data = buffers.input0, weight = buffers.input1, bias = buffers.bias, out = buffers.out;
  sched.args = buffers.args();

  Expr bx = MakeVar("bx"), by = MakeVar("by"), bz = MakeVar("bz");
  Expr tx = MakeVar("tx"), ty = MakeVar("ty"), tz = MakeVar("tz");
  const Expr image = bz / Expr(t.grid_c);
  const Expr channel = (bz % Expr(t.grid_c)) * Expr(t.tc) + tz;
  const Expr oh0 = (by * Expr(t.th) + ty) * Expr(t.rh), ow0 = (bx * Expr(t.tw) + tx) * Expr(t.rw);
  Buffer acc = MakeBuffer("acc", {t.rh, t.rw}, BufferScope::kLocal);

  Stmt init = UnrolledLoop("i", t.rh, [&](const Expr& i) {
    return UnrolledLoop("j", t.rw, [&](const Expr& j) { return Store(acc, {i, j}, FloatImm(0.0)); });
  });
  Expr kh = MakeVar("kh"), kw = MakeVar("kw");
  const ForKind window_kind = t.unroll ? ForKind::kUnrolled : ForKind::kSerial;
  Stmt accumulate = For(
      kh, wl.kernel_h, window_kind,
      For(kw, wl.kernel_w, window_kind, UnrolledLoop("i", t.rh, [&](const Expr& i) {
            return UnrolledLoop("j", t.rw, [&](const Expr& j) {
              const Expr ih = (oh0 + i) * Expr(wl.stride_h) + kh * Expr(wl.dilation_h) - Expr(wl.pad_h);
              const Expr iw = (ow0 + j) * Expr(wl.stride_w) + kw * Expr(wl.dilation_w) - Expr(wl.pad_w);
              const Expr inside = (Expr(int64_t{0}) <= ih) && (ih < Expr(wl.in_h)) && (Expr(int64_t{0}) <= iw) &&
                                  (iw < Expr(wl.in_w));
              const Expr x = Select(inside, Load(data, {image, channel, ih, iw}), FloatImm(0.0));
              return Store(acc, {i, j}, Load(acc, {i, j}) + x * Load(weight, {channel, Expr(int64_t{0}), kh, kw}));
            });
          })));
  // Tails: outputs past the image are not stored; a thread past the channels does nothing
  // (its loads would leave the tensors). Without tails no guard.
  const bool c_tail = t.grid_c * t.tc > wl.out_c, h_tail = t.grid_h * t.th * t.rh > wl.out_h(),
             w_tail = t.grid_w * t.tw * t.rw > wl.out_w();
  Stmt write = UnrolledLoop("i", t.rh, [&](const Expr& i) {
    return UnrolledLoop("j", t.rw, [&](const Expr& j) {
      Stmt store = Store(out, {image, channel, oh0 + i, ow0 + j}, ApplyEpilogue(wl, Load(acc, {i, j}), bias, channel));
      Expr inside;
      if (h_tail) inside = oh0 + i < Expr(wl.out_h());
      if (w_tail) inside = inside.defined() ? inside && ow0 + j < Expr(wl.out_w()) : ow0 + j < Expr(wl.out_w());
      return inside.defined() ? If(inside, store) : store;
    });
  });
  Stmt work = Seq({init, accumulate, write});
  if (c_tail) work = If(channel < Expr(wl.out_c), work);
  Stmt body = Allocate(acc, work);
  sched.body = BindLaunch(BlockGrid{bx, by, t.grid_w, t.grid_h, bz, t.grid_c * wl.batch},
                         ThreadBlock{tx, ty, t.tw, t.th, tz, t.tc}, body);
  return sched;
}

}  // namespace tune::codegen
