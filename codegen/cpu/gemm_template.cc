// The GEMM template: space definition and schedule construction for dense/matmul/batch_matmul.
#include "codegen/cpu/gemm_template.h"

#include <algorithm>
#include <array>
#include <functional>

#include "base/check.h"

namespace tune::codegen {
namespace {

enum Order { kMNOuterMN = 0, kNMOuterNM = 1, kKBetweenMN = 2 };
constexpr int64_t kMaxTile = 256;          // floats in the register accumulator tile, any ISA
constexpr int64_t kMaxRegisterRows = 16;   // mr: rows of the register tile
constexpr int64_t kMaxUnrolledFma = 2048;  // bound on unrolled vector FMAs (code size)

}  // namespace

GemmTemplate::GemmTemplate(Workload w, CpuLimits cpu) : Template(std::move(w)), cpu_(std::move(cpu)) {
  const Workload& wl = workload_;
  auto& s = space_;
  // Tails (factors that do not divide the extent) are lowered as a guarded last tile.
  constexpr auto kTails = search::SplitTails::kAllowed;
  // Register-tile sizes beyond divisors and powers of two: every row count up to 16 and every
  // multiple of the vector lanes up to 64 (6x16, 14x32, 8x24, ...).
  std::vector<int64_t> rows, columns;
  for (int64_t r = 1; r <= kMaxRegisterRows; ++r) rows.push_back(r);
  for (int64_t c = cpu_.vector_lanes; c <= 64; c += cpu_.vector_lanes) columns.push_back(c);
  int tm = s.AddSplit("tile_m", wl.m, 3, kMaxRegisterRows, kTails, rows);
  int tn = s.AddSplit("tile_n", wl.n, 3, 64, kTails, columns);
  int tk = s.AddSplit("tile_k", wl.k, 2, 64, kTails);
  int order = s.AddChoice("order", {0, 1, 2}, {"m0,n0,m1,n1,k0,k1,m2,n2", "n0,m0,n1,m1,k0,k1,m2,n2",
                                               "m0,n0,m1,n1,k0,m2,k1,n2"});
  int vec = s.AddChoice("vectorize", {1, 0});
  int unroll_m = s.AddChoice("unroll_m", {1, 0});
  int unroll_k = s.AddChoice("unroll_k", {0, 1});
  int pack = s.AddChoice("pack_b", {1, 0});
  int cache = s.AddChoice("acc_tile", {1, 0});
  // 1: the outermost loop runs on the thread pool; 2: the two outermost (M and N blocks) fused
  // into one parallel loop, so a few large row blocks still give every thread an even share
  // (the pool gives each thread one contiguous chunk of the fused iterations: whole rows of
  // blocks and at most one partial row each). batch_matmul fuses its batch axis with the
  // outermost for 1 already.
  const bool batched = wl.op == OpKind::kBatchMatmul;
  int par = s.AddChoice("parallel", batched ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{1, 0, 2});
  s.AddChoice("pack_a", {0, 1});
  s.AllowMissing("pack_a");  // configs recorded before A could be packed read A in place
  if (wl.op == OpKind::kDense) {
    // dense's B is a layer's weight, a constant of the model: packed once and kept across
    // calls (1), or packed in every call (0, what configs recorded before the knob meant).
    // matmul's and batch_matmul's operands are activations: always packed per call.
    s.AddChoice("prepack", {0, 1});
    s.AddCondition("prepack", "pack_b", {1});
    s.AllowMissing("prepack");
  }
  const search::ConfigSpace* sp = &space_;
  const int64_t lanes = cpu_.vector_lanes;
  // Accumulators plus one B vector and one broadcast A value in registers.
  const int64_t register_floats = std::max<int64_t>(kMaxTile, lanes * (cpu_.vector_registers - 2));
  auto inner = [sp](const search::Config& c, int knob) { return sp->knobs()[knob].options[c[knob]].back(); };
  auto value = [sp](const search::Config& c, int knob) { return sp->knobs()[knob].options[c[knob]][0]; };
  s.AddConstraint("register_tile", [=](const search::Config& c) {
    return inner(c, tm) * inner(c, tn) <= register_floats;
  });
  s.AddConstraint("unroll_size", [=](const search::Config& c) {
    int64_t n_vectors = value(c, vec) ? (inner(c, tn) + lanes - 1) / lanes : inner(c, tn);
    int64_t m = value(c, unroll_m) ? inner(c, tm) : 1;
    int64_t k = value(c, unroll_k) ? inner(c, tk) : 1;
    return m * k * n_vectors <= kMaxUnrolledFma && (!value(c, unroll_k) || inner(c, tk) <= 16);
  });
  s.AddConstraint("vector_width", [=](const search::Config& c) {
    return !value(c, vec) || inner(c, tn) > 1;
  });
  s.AddConstraint("order_needs_tile", [=](const search::Config& c) {
    return value(c, order) != kKBetweenMN || value(c, cache) == 1;
  });
  if (cpu_.threads > 1) {
    // The pool gives each thread one contiguous chunk of the parallel loop's iterations, so
    // that loop must have at least one per thread and a count that divides evenly, or enough
    // to leave the last thread at most 1/8 short (3 blocks on 2 threads run at 2/3 speed). At
    // one thread a parallel loop runs serially: any block count will do (and configs chosen
    // elsewhere, given or transferred, stay valid there).
    const int64_t threads = cpu_.threads, batch = batched ? wl.batch : 1;
    s.AddConstraint("parallel_balance", [=](const search::Config& c) {
      const int64_t p = value(c, par);
      if (p == 0) return true;
      // The outer factors of M and N: the block counts of the two outermost loops.
      const int64_t m_blocks = value(c, tm), n_blocks = value(c, tn);
      const int64_t first = value(c, order) == kNMOuterNM ? n_blocks : m_blocks;
      const int64_t extent = p == 2 ? m_blocks * n_blocks : batch * first;
      return extent >= threads && (extent % threads == 0 || extent >= 8 * threads);
    });
  }
  (void)pack;
}

search::Config GemmTemplate::DefaultConfig() const {
  const Workload& wl = workload_;
  // As the conv2d template's: on a target of several threads the M and N block loops fused
  // into one parallel loop (batch_matmul: the batch with the M blocks), else serial.
  const search::Config serial = ConfigOf({{"tile_m", {wl.m, 1, 1}},
                                          {"tile_n", {wl.n, 1, 1}},
                                          {"tile_k", {wl.k, 1}},
                                          {"order", {0}},
                                          {"vectorize", {0}},
                                          {"unroll_m", {0}},
                                          {"unroll_k", {0}},
                                          {"pack_b", {0}},
                                          {"acc_tile", {1}},
                                          {"parallel", {0}},
                                          {"pack_a", {0}}});
  return ParallelFormOf(serial);
}

search::Config GemmTemplate::ParallelFormOf(const search::Config& config) const {
  return ParallelDefault(config, cpu_.threads, {2, 1});
}

std::vector<search::Config> GemmTemplate::StartConfigs() const {
  const Workload& wl = workload_;
  const int64_t lanes = cpu_.vector_lanes, registers = cpu_.vector_registers;
  if (lanes < 4) return {};
  struct Tile {
    int64_t rows, vectors;
    bool divides;
    std::vector<int64_t> tile_m, tile_n;  // the splits' options
  };
  // The split of `knob` over `extent` with inner factor `inner` and the fewest outer
  // iterations; empty where the splits do not offer it (with a tail, a tile much wider than
  // what is left is not).
  auto split = [&](const std::string& knob, int64_t extent, int64_t inner) {
    return SplitOption(knob, (extent + inner - 1) / inner, inner);
  };
  std::vector<Tile> tiles;
  for (int64_t v = 1; v <= 4 && v * lanes <= 64; ++v) {
    if (v > 1 && (v - 1) * lanes >= wl.n) break;  // (no wider than N needs)
    std::vector<int64_t> tile_n = split("tile_n", wl.n, v * lanes);
    if (tile_n.empty()) continue;
    int64_t rows = std::min({kMaxRegisterRows, (registers - v - 1) / v, wl.m});
    std::vector<int64_t> tile_m = split("tile_m", wl.m, rows);
    while (rows > 1 && tile_m.empty()) tile_m = split("tile_m", wl.m, --rows);
    // (A tile whose rows the splits do not offer keeps its place and gives no config.)
    tiles.push_back({rows, v, wl.n % (v * lanes) == 0, std::move(tile_m), std::move(tile_n)});
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) {
    return a.divides != b.divides ? a.divides : a.rows * a.vectors > b.rows * b.vectors;
  });
  if (tiles.size() > 2) tiles.resize(2);
  std::vector<search::Config> out;
  // The widest inner K chunk offered (at most 64).
  int64_t kc = 1;
  for (const std::vector<int64_t>& o : space_.knobs()[space_.KnobIndex("tile_k")].options) kc = std::max(kc, o.back());
  for (const Tile& t : tiles) {
    for (int64_t pack_a : {1, 0}) {
      std::vector<std::pair<std::string, std::vector<int64_t>>> values = {
          {"tile_m", t.tile_m},
          {"tile_n", t.tile_n},
          {"tile_k", split("tile_k", wl.k, kc)},
          {"order", {kNMOuterNM}},
          {"vectorize", {1}},
          {"unroll_m", {1}},
          {"unroll_k", {0}},
          {"pack_b", {1}},
          {"acc_tile", {1}},
          {"parallel", {0}},
          {"pack_a", {pack_a}}};
      if (wl.op == OpKind::kDense) values.push_back({"prepack", {1}});
      AddStartConfig(values, &out);
    }
  }
  return out;
}

Schedule GemmTemplate::Build(const search::Config& c) const {
  const Workload& wl = workload_;
  const auto& s = space_;
  auto fm = s.Get(c, "tile_m"), fn = s.Get(c, "tile_n"), fk = s.Get(c, "tile_k");
  int64_t order = s.GetInt(c, "order");
  bool vectorize = s.GetInt(c, "vectorize"), unroll_m = s.GetInt(c, "unroll_m");
  bool unroll_k = s.GetInt(c, "unroll_k"), pack = s.GetInt(c, "pack_b");
  bool acc_tile = s.GetInt(c, "acc_tile"), parallel = s.GetInt(c, "parallel");
  bool pack_a = s.GetInt(c, "pack_a");
  const bool prepack = wl.op == OpKind::kDense && s.GetInt(c, "prepack");
  bool batched = wl.op == OpKind::kBatchMatmul;
  int64_t nb = fn[2];

  Schedule sched;
  const ArgBuffers buffers = MakeArgBuffers();
  const Buffer a = buffers.input0, b = buffers.input1, bias = buffers.bias, out = buffers.out;
  sched.args = buffers.args();

  IterVar vb = MakeIterVar("b", wl.batch), vm = MakeIterVar("m", wl.m), vn = MakeIterVar("n", wl.n);
  IterVar vk = MakeIterVar("k", wl.k);
  auto bidx = [&](std::vector<Expr> rest) {
    if (batched) rest.insert(rest.begin(), vb.var);
    return rest;
  };
  // B(b, k, n) as the definition reads it, from the original or the packed layout.
  auto b_at = [&](Expr k, Expr n) -> Expr {
    if (wl.op == OpKind::kDense) return Load(b, {n, k});
    return Load(b, bidx({k, n}));
  };
  // Copies `count` rows or columns of an operand (at(i, k): element i at depth k) into
  // ceil(count / width) panels of [K][width]; where width does not divide count the last
  // panel is padded with zeros (the index clamped so nothing past the operand is read).
  // `once`: a buffer kept across calls (prepack) of `tiled` panels, as many as the tiled loop
  // reaches, all written (zeros past count): the masked-off lanes of a partial tile address
  // panels past ceil(count / width), and there they must find memory that is in place rather
  // than pages never touched (a masked load of those costs a page walk each time).
  auto pack_panels = [&](const Buffer& operand, int64_t count, int64_t width, const std::array<const char*, 3>& names,
                         const std::function<Expr(Expr, Expr)>& at, bool vectorize, bool once, int64_t tiled) {
    const int64_t panels = once ? std::max(tiled, (count + width - 1) / width) : (count + width - 1) / width;
    std::vector<int64_t> shape = {panels, wl.k, width};
    if (batched) shape.insert(shape.begin(), wl.batch);
    Buffer packed = once ? MakePrepackedBuffer(operand->name + ".packed", shape, operand)
                         : MakeBuffer(operand->name + ".packed", shape, BufferScope::kHeap);
    sched.scratch.push_back(packed);
    IterVar po = MakeIterVar(names[0], panels), pk = MakeIterVar(names[1], wl.k), pi = MakeIterVar(names[2], width);
    std::vector<IterVar> pack_axes = {po, pk, pi};
    if (batched) pack_axes.insert(pack_axes.begin(), vb);
    Expr index = po.var * Expr(width) + pi.var;
    Expr src = panels * width == count
                   ? at(index, pk.var)
                   : Select(index < Expr(count), at(Min(index, Expr(count - 1)), pk.var), FloatImm(0.0));
    Stage pack_stage(packed, pack_axes, src);
    if (parallel) pack_stage.Parallel(pack_stage.axis(0));
    if (vectorize) pack_stage.Vectorize(pack_stage.axis(batched ? 3 : 2));
    sched.stages.push_back(std::move(pack_stage));
    return packed;
  };
  // B in [N/nb][K][nb] blocks: the register tile's nb columns are one contiguous vector.
  Expr b_value = b_at(vk.var, vn.var);
  if (pack) {
    Buffer packed = pack_panels(b, wl.n, nb, {"no", "kk", "ni"}, [&](Expr n, Expr k) { return b_at(k, n); },
                                wl.op != OpKind::kDense && nb > 1, prepack, fn[0] * fn[1]);
    b_value = Load(packed, bidx({vn.var / Expr(nb), vk.var, vn.var % Expr(nb)}));
  }
  // A in [M/mr][K][mr] panels with the rows interleaved, so the register tile's broadcasts of A
  // read consecutive floats.
  Expr a_value = Load(a, bidx({vm.var, vk.var}));
  if (pack_a) {
    const int64_t mr = fm[2];
    Buffer packed = pack_panels(a, wl.m, mr, {"mo", "ka", "mi"}, [&](Expr m, Expr k) { return Load(a, bidx({m, k})); },
                                false, false, 0);
    a_value = Load(packed, bidx({vm.var / Expr(mr), vk.var, vm.var % Expr(mr)}));
  }

  std::vector<IterVar> axes = {vm, vn};
  if (batched) axes.insert(axes.begin(), vb);
  Stage st(out, axes, {vk}, a_value * b_value);
  if (wl.bias || wl.relu || wl.relu6) {
    Expr acc = MakeVar("acc");
    st.SetEpilogue(acc, ApplyEpilogue(wl, acc, bias, vn.var));
  }
  int off = batched ? 1 : 0;
  constexpr auto kTails = search::SplitTails::kAllowed;
  // M and N by their three factors [f0, f1, f2]. Without a tail as SplitFactors makes them.
  // With one, the register tile's panels first (E -> ceil(E / f2) panels of f2), then the
  // panels into f0 blocks of f1 (the same loops: ceil(ceil(E / f2) / f1) = ceil(E / (f1 f2))),
  // so the tail costs where it lies: the last panel runs the guarded (masked, not unrolled)
  // register tile, the last block skips its missing panels with one guard per panel, and every
  // other panel of that block keeps the full register tile (one outermost tail would guard
  // each row of the whole last block inside the K loop). The loops are then named
  // E00, E01, E1 for f0, f1, f2.
  auto split3 = [&](int loop, const std::vector<int64_t>& f) {
    const int64_t extent = st.extent(loop);
    if (f[0] * f[1] * f[2] == extent) return st.SplitFactors(loop, f, kTails);
    std::vector<int> panels = st.SplitFactors(loop, {(extent + f[2] - 1) / f[2], f[2]}, kTails);
    std::vector<int> blocks = st.SplitFactors(panels[0], {f[0], f[1]}, kTails);
    return std::vector<int>{blocks[0], blocks[1], panels[1]};
  };
  auto m = split3(st.axis(off), fm);
  auto n = split3(st.axis(off + 1), fn);
  auto k = st.SplitFactors(st.reduce_axis(0), fk, kTails);
  std::vector<int> leaves;
  if (batched) leaves.push_back(st.axis(0));
  int attach;
  switch (order) {
    case kNMOuterNM:
      leaves.insert(leaves.end(), {n[0], m[0], n[1], m[1], k[0], k[1], m[2], n[2]});
      attach = m[1];
      break;
    case kKBetweenMN:
      leaves.insert(leaves.end(), {m[0], n[0], m[1], n[1], k[0], m[2], k[1], n[2]});
      attach = n[1];
      break;
    default:
      leaves.insert(leaves.end(), {m[0], n[0], m[1], n[1], k[0], k[1], m[2], n[2]});
      attach = n[1];
      break;
  }
  st.Reorder(leaves);
  if (vectorize) st.Vectorize(n[2]);
  if (unroll_m) st.Unroll(m[2]);
  if (unroll_k) st.Unroll(k[1]);
  if (acc_tile) st.CacheWrite(attach);
  if (parallel) {
    int outer = leaves[0];
    if (batched || s.GetInt(c, "parallel") == 2) outer = st.Fuse(leaves[0], leaves[1]);
    st.Parallel(outer);
  }
  sched.stages.push_back(std::move(st));
  return sched;
}

}  // namespace tune::codegen
