// The conv2d template: space definition and schedule construction for NCHW convolution.
#include "codegen/cpu/conv2d_template.h"

#include <algorithm>

#include "base/check.h"

namespace tune::codegen {
namespace {

constexpr int64_t kMaxTile = 256;          // floats in the register accumulator tile, any ISA
constexpr int64_t kMaxTileRows = 16;       // ow2: output columns of the register tile
constexpr int64_t kMaxTileChannels = 64;   // ob: output channels of the register tile
constexpr int64_t kMaxUnrolledOps = 2048;  // bound on unrolled vector FMAs (code size)
enum Layout { kNchw = 0, kBlocked = 1 };

}  // namespace

Conv2dTemplate::Conv2dTemplate(Workload w, CpuLimits cpu) : Template(std::move(w)), cpu_(std::move(cpu)) {
  const Workload& wl = workload_;
  auto& s = space_;
  int64_t icg = wl.in_c / wl.groups;
  // An NCHWc convolution (the workload's layout_block lb > 0) reads and writes activations in
  // channel blocks of lb: its register tile's channels are whole blocks, and it is the blocked
  // layout with the input read in blocks of lb. (A depthwise one reads the input block of the
  // output block it computes: no reduction over input channels, tile_ic is 1.)
  const int64_t lb = wl.layout_block;
  const bool contract = lb > 0;
  // Tails (factors that do not divide the extent) are lowered as a guarded last tile.
  constexpr auto kTails = search::SplitTails::kAllowed;
  // Register-tile sizes beyond divisors and powers of two: every column count up to 16 and
  // every multiple of the vector lanes up to 64 channels.
  std::vector<int64_t> rows, channels;
  for (int64_t r = 1; r <= kMaxTileRows; ++r) rows.push_back(r);
  const int64_t channel_step = contract ? lb : cpu_.vector_lanes;
  for (int64_t c = channel_step; c <= std::max(kMaxTileChannels, channel_step); c += channel_step) channels.push_back(c);
  int toc = s.AddSplit("tile_oc", wl.out_c, 3, kMaxTileChannels, kTails, channels);
  s.AddSplit("tile_oh", wl.out_h(), 2, 0, kTails);
  int tow = s.AddSplit("tile_ow", wl.out_w(), 3, 64, kTails, rows);
  s.AddSplit("tile_ic", icg, 2, 0, kTails);
  // Order 3 (the blocked layout, without the accumulator tile) runs the outer reduction loop
  // outside the OH and OW tiles: the register tiles accumulate in the output, one block of
  // input channels at a time, so that block's weights (of the oc1 x ob channels) stay in the
  // L1/L2 cache while every output row and column uses them; with 7x7 outputs and 512
  // channels the other orders stream all the tile's weights from beyond L2 once per row.
  const int order_knob = s.AddChoice("order", {0, 1, 2, 3}, {"oc0,oh0,ow0,oc1,oh1,ow1,ic0,kh,kw,ic1,tile",
                                                            "oc0,oh0,ow0,oh1,ow1,oc1,ic0,ic1,kh,kw,tile",
                                                            "oh0,oc0,ow0,oc1,oh1,ow1,ic0,kh,kw,ic1,tile",
                                                            "oc0,oh0,ow0,oc1,ic0,oh1,ow1,kh,kw,ic1,tile"});
  int vec = s.AddChoice("vector_axis", {1, 0, 2}, {"oc", "none", "ow"});
  int unroll = s.AddChoice("unroll", {1, 0});
  s.AddChoice("pack_weight", {1, 0});
  s.AddChoice("acc_tile", {1, 0});
  // 1: the outermost loop (with the batch) runs on the thread pool; 2: the batch and the two
  // outermost block loops (OC and OH blocks, in the order's order) fused into one parallel
  // loop, so a few large channel blocks still give every thread an even share (the pool gives
  // each thread one contiguous chunk of the fused iterations), and the copies around the
  // convolution (padding, weight packing, the blocked output's transform) are shared out by
  // rows rather than by channels or blocks alone.
  int par = s.AddChoice("parallel", {1, 0, 2});
  // Grouped convolutions other than depthwise ones have the nchw layout only.
  const bool blocked_ok = wl.groups == 1 || wl.depthwise();
  int layout = contract     ? s.AddChoice("layout", {kBlocked}, {"blocked"})
               : blocked_ok ? s.AddChoice("layout", {kNchw, kBlocked}, {"nchw", "blocked"})
                            : s.AddChoice("layout", {kNchw}, {"nchw"});
  s.AllowMissing("layout");  // configs recorded before the blocked layout wrote NCHW in place
  // The blocked layout always vectorizes its channel block and reads the packed weight.
  s.AddCondition("vector_axis", "layout", {kNchw});
  s.AddCondition("pack_weight", "layout", {kNchw});
  // The weight is a constant of the model: where it is packed (pack_weight, or the blocked
  // layout), packed once and kept across calls (1), or packed in every call (0, what configs
  // recorded before the knob meant).
  int prepack = s.AddChoice("prepack", {0, 1});
  s.AllowMissing("prepack");
  // The blocked layout of a dense (groups == 1) convolution: 1 reads a channel-blocked copy of
  // the padded input, [N][ceil(IC/icb)][H+2ph][W+2pw][icb] with icb the inner IC tile factor,
  // and a weight packed [OC/ob][IC/icb][KH][KW][icb][ob], so the register tile's broadcasts
  // step through consecutive floats; 0 (what configs recorded before the knob meant) reads
  // the NCHW input. Depthwise convolutions block their input by channel block already.
  if (contract) {
    s.AddChoice("in_block", {1}, {"blocked"});
    s.AddCondition("in_block", "layout", {kBlocked});
  } else if (wl.groups == 1) {
    s.AddChoice("in_block", {0, 1}, {"nchw", "blocked"});
    s.AddCondition("in_block", "layout", {kBlocked});
  } else {
    s.AddChoice("in_block", {0}, {"nchw"});
  }
  const int in_block = s.KnobIndex("in_block");
  s.AllowMissing("in_block");
  // The blocked layout of a dense (groups == 1) convolution on AVX-512 (32 vector registers,
  // vectors of 16 floats or, with blocks of 8, 8): 1 reads each input value of the register
  // tile as an embedded-broadcast memory operand of every FMA that uses it
  // (BufferNode::broadcast_operand) instead of broadcasting it into a register first, so the
  // tile may fill every register but its weight vectors (7 columns x 4 vectors: 28 accumulators
  // and 4 weights, oneDNN's tile), at one load per FMA; 0 (what configs recorded before the
  // knob meant) broadcasts into a register.
  const bool fold_ok = blocked_ok && wl.groups == 1 && cpu_.vector_registers >= 32 &&
                       (cpu_.vector_lanes == 16 || cpu_.vector_lanes == 8);
  const int fold = s.AddChoice("fold_broadcast", fold_ok ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0},
                               fold_ok ? std::vector<std::string>{"register", "memory"}
                                       : std::vector<std::string>{"register"});
  if (blocked_ok) s.AddCondition("fold_broadcast", "layout", {kBlocked});
  s.AllowMissing("fold_broadcast");
  const search::ConfigSpace* sp = &space_;
  const int64_t lanes = cpu_.vector_lanes, registers = cpu_.vector_registers;
  // nchw: accumulators plus one weight vector and one broadcast input value in registers.
  const int64_t register_floats = std::max<int64_t>(kMaxTile, lanes * (registers - 2));
  auto inner = [sp](const search::Config& c, int knob) { return sp->knobs()[knob].options[c[knob]].back(); };
  auto value = [sp](const search::Config& c, int knob) { return sp->knobs()[knob].options[c[knob]][0]; };
  s.AddConstraint("register_tile", [=](const search::Config& c) {
    if (value(c, layout) == kBlocked) {
      // ow2 accumulator vectors per weight vector of the block, the weight vectors and one
      // broadcast input value, all in registers (no spills in the reduction loop).
      // (An NCHWc tile's channels are ob / lb blocks, each its own vectors.)
      const int64_t weight_vectors =
          contract ? inner(c, toc) / lb * ((lb + lanes - 1) / lanes) : (inner(c, toc) + lanes - 1) / lanes;
      // (fold_broadcast 1: the input values are memory operands, no register.)
      return weight_vectors * inner(c, tow) + weight_vectors + (value(c, fold) ? 0 : 1) <= registers;
    }
    return inner(c, toc) * inner(c, tow) <= register_floats;
  });
  // Order 3 accumulates in the output across the outer reduction loop, the blocked layout's
  // tiles only; with the accumulator tile each visit of a tile loads its partial sums from the
  // output into registers and stores them back after its block of input channels.
  s.AddConstraint("order_3_in_output", [=](const search::Config& c) {
    return value(c, order_knob) != 3 || value(c, layout) == kBlocked;
  });
  // The back end folds broadcasts into FMAs of one vector of 8 or 16 floats (the blocked
  // layout's channel block: an NCHWc layout's lb, else ob); wider blocks would keep the
  // broadcast in a register after all, which the register bound above leaves no room for.
  s.AddConstraint("fold_broadcast_vectors", [=](const search::Config& c) {
    const int64_t width = contract ? lb : inner(c, toc);
    return !value(c, fold) || width == 8 || width == 16;
  });
  const int pack_weight = s.KnobIndex("pack_weight");
  s.AddConstraint("prepack_needs_pack", [=](const search::Config& c) {
    return !value(c, prepack) || value(c, layout) == kBlocked || value(c, pack_weight);
  });
  // A block of one input channel is the padded NCHW input again (or an extra copy of an
  // unpadded one): the same kernel as in_block 0, or a slower one.
  const int tic = s.KnobIndex("tile_ic");
  s.AddConstraint("in_block_needs_block", [=](const search::Config& c) {
    return contract || !value(c, in_block) || inner(c, tic) > 1;
  });
  if (contract) {
    // The input's channel block is the layout's: other inner IC factors build the same kernel.
    // (A depthwise convolution's one input channel per output channel has the single split 1.)
    if (wl.groups == 1) {
      s.AddConstraint("ic_block_is_layout_block", [=](const search::Config& c) { return inner(c, tic) == lb; });
    }
    // The register tile's channels are whole blocks of the layout.
    s.AddConstraint("oc_tile_whole_blocks", [=](const search::Config& c) { return inner(c, toc) % lb == 0; });
  }
  int64_t kw = wl.kernel_w;
  s.AddConstraint("unroll_size", [=](const search::Config& c) {
    if (!value(c, unroll)) return true;
    int64_t oc = inner(c, toc), ow = inner(c, tow);
    int64_t v = value(c, vec);
    int64_t ops = v == 1 ? (oc + lanes - 1) / lanes * ow : v == 2 ? (ow + lanes - 1) / lanes * oc : oc * ow;
    return ops * kw <= kMaxUnrolledOps;
  });
  s.AddConstraint("vector_width", [=](const search::Config& c) {
    int64_t v = value(c, vec);
    return v == 0 || (v == 1 ? inner(c, toc) : inner(c, tow)) > 1;
  });
  if (cpu_.threads > 1) {
    // As the GEMM template's: the pool gives each thread one contiguous chunk of the parallel
    // loop's iterations, so that loop must have at least one per thread and a count that
    // divides evenly, or enough to leave the last thread at most 1/8 short (one OC block of a
    // batch-1 convolution leaves a thread idle; 3 on 2 threads run at 2/3 speed). At one
    // thread a parallel loop runs serially: any count will do (and configs chosen elsewhere,
    // given or transferred, stay valid there).
    const int64_t threads = cpu_.threads, batch = wl.batch;
    const int toh = s.KnobIndex("tile_oh"), ord = s.KnobIndex("order");
    s.AddConstraint("parallel_balance", [=](const search::Config& c) {
      const int64_t p = value(c, par);
      if (p == 0) return true;
      // The outer factors of OC and OH: the counts of the outermost OC and OH block loops
      // (a blocked layout's ceil(ceil(OC / ob) / oc1) is the same ceil(OC / (oc1 ob))).
      const int64_t oc_blocks = value(c, toc), oh_blocks = value(c, toh);
      const int64_t first = value(c, ord) == 2 ? oh_blocks : oc_blocks;
      const int64_t extent = batch * (p == 2 ? oc_blocks * oh_blocks : first);
      return extent >= threads && (extent % threads == 0 || extent >= 8 * threads);
    });
  }
}

search::Config Conv2dTemplate::DefaultConfig() const {
  // On a target of several threads the default shares its outer loops out among them (the
  // batch with the OC and OH block loops fused: one OH row of one OC block an iteration), so
  // that a task whose search finds nothing faster still runs on every thread rather than one.
  return ParallelFormOf(SerialDefault());
}

search::Config Conv2dTemplate::ParallelFormOf(const search::Config& config) const {
  return ParallelDefault(config, cpu_.threads, {2, 1});
}

std::vector<search::Config> Conv2dTemplate::StartConfigs() const {
  const Workload& wl = workload_;
  const int64_t lanes = cpu_.vector_lanes, registers = cpu_.vector_registers;
  if (wl.groups != 1 || lanes < 4) return {};
  const int64_t lb = wl.layout_block, ow = wl.out_w(), oh = wl.out_h();
  const int64_t threads = std::max(cpu_.threads, 1);
  std::vector<search::Config> out;
  for (int64_t v : {2, 1}) {
    const int64_t ob = v * lanes;
    // (An NCHWc tile holds whole blocks of the layout; two vectors only where OC fills them.)
    if ((lb > 0 && ob % lb != 0) || (v > 1 && wl.out_c <= lanes)) continue;
    const int64_t blocks = (wl.out_c + ob - 1) / ob;
    // Columns: v accumulators each, beside v weight vectors and one broadcast input value.
    const int64_t fit = std::min((registers - v - 1) / v, ow);
    int64_t cols = 1;
    for (int64_t d = fit; d >= 1; --d) {
      if (ow % d == 0) {
        cols = d;
        break;
      }
    }
    if (2 * cols < fit) cols = std::min(fit, kMaxTileRows);  // no divisor near: a partial last tile
    const int64_t col_tiles = (ow + cols - 1) / cols;
    const int64_t icb = lb > 0 ? lb : std::min(lanes, wl.in_c);
    const std::vector<std::pair<std::string, std::vector<int64_t>>> common = {
        {"tile_ow", SplitOption("tile_ow", 1, cols)}, {"tile_ic", SplitOption("tile_ic", (wl.in_c + icb - 1) / icb, icb)},
        {"unroll", {1}},                        {"layout", {kBlocked}},
        {"prepack", {1}},                       {"in_block", {1}},
        {"parallel", {0}},                      {"fold_broadcast", {0}}};
    auto with = [&](std::vector<std::pair<std::string, std::vector<int64_t>>> values) {
      values.insert(values.end(), common.begin(), common.end());
      return values;
    };
    // (Several threads: the channel blocks split among them where they divide evenly.)
    const int64_t oc0 = threads > 1 && blocks % threads == 0 ? threads : 1;
    const std::vector<int64_t> oc = SplitOption("tile_oc", oc0, ob);
    AddStartConfig(with({{"tile_oc", oc}, {"tile_oh", {oh, 1}}, {"order", {0}}, {"acc_tile", {1}}}), &out);
    AddStartConfig(with({{"tile_oc", oc}, {"tile_oh", {1, oh}}, {"order", {3}}, {"acc_tile", {1}}}), &out);
    if (col_tiles == 1) {
      AddStartConfig(with({{"tile_oc", oc}, {"tile_oh", {1, oh}}, {"order", {3}}, {"acc_tile", {0}}}), &out);
    }
  }
  // Fewer input channels than a vector (an image's 3 at a CNN's stem), read unblocked: one
  // vector of output channels by a few columns (the input rows a tile reads stay few under a
  // large stride and kernel), the rows outermost and shared out among the threads, the input
  // values folded into the FMAs where the ISA can. The search's pick on ResNet's 7x7 stride-2
  // stem, 2.2-2.7x the configs above there (docs/BENCHMARKS.md).
  if (lb == 0 && wl.in_c < lanes && wl.out_c >= lanes) {
    const int64_t rows = std::min(threads, oh);
    for (int64_t cols : {int64_t{6}, int64_t{8}}) {
      if (cols > ow) continue;
      std::vector<std::pair<std::string, std::vector<int64_t>>> thin = {
          {"tile_oc", SplitOption("tile_oc", 1, lanes)},
          {"tile_oh", SplitOption("tile_oh", rows, (oh + rows - 1) / rows)},
          {"tile_ow", SplitOption("tile_ow", (ow + cols - 1) / cols, cols)},
          {"tile_ic", SplitOption("tile_ic", wl.in_c, 1)},
          {"order", {2}},
          {"unroll", {1}},
          {"acc_tile", {1}},
          {"parallel", {1}},
          {"layout", {kBlocked}},
          {"prepack", {1}},
          {"in_block", {0}},
          {"fold_broadcast", {1}}};
      const size_t before = out.size();
      AddStartConfig(thin, &out);
      if (out.size() == before) {  // no folding on this ISA
        thin.back() = {"fold_broadcast", {0}};
        AddStartConfig(thin, &out);
      }
    }
  }
  return out;
}

search::Config Conv2dTemplate::SerialDefault() const {
  const Workload& wl = workload_;
  if (wl.layout_block > 0) {
    const int64_t lb = wl.layout_block;
    return ConfigOf({{"tile_oc", {wl.out_c / lb, 1, lb}},
                     {"tile_oh", {wl.out_h(), 1}},
                     {"tile_ow", {wl.out_w(), 1, 1}},
                     {"tile_ic", wl.depthwise() ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{wl.in_c / lb, lb}},
                     {"order", {0}},
                     {"unroll", {1}},
                     {"acc_tile", {1}},
                     {"parallel", {0}},
                     {"layout", {kBlocked}},
                     {"prepack", {1}},
                     {"in_block", {1}}});
  }
  return ConfigOf({{"tile_oc", {wl.out_c, 1, 1}},
                   {"tile_oh", {wl.out_h(), 1}},
                   {"tile_ow", {wl.out_w(), 1, 1}},
                   {"tile_ic", {wl.in_c / wl.groups, 1}},
                   {"order", {0}},
                   {"vector_axis", {0}},
                   {"unroll", {0}},
                   {"pack_weight", {0}},
                   {"acc_tile", {1}},
                   {"parallel", {0}},
                   {"layout", {kNchw}}});
}

Schedule Conv2dTemplate::Build(const search::Config& c) const {
  const Workload& wl = workload_;
  const auto& s = space_;
  auto foc = s.Get(c, "tile_oc"), foh = s.Get(c, "tile_oh"), fow = s.Get(c, "tile_ow");
  auto fic = s.Get(c, "tile_ic");
  int64_t order = s.GetInt(c, "order"), vec = s.GetInt(c, "vector_axis");
  bool unroll = s.GetInt(c, "unroll"), pack = s.GetInt(c, "pack_weight");
  bool acc_tile = s.GetInt(c, "acc_tile"), parallel = s.GetInt(c, "parallel");
  // parallel 2: the convolution's batch and outer OC and OH block loops fused, and the copies
  // shared out by rows.
  const bool fused = s.GetInt(c, "parallel") == 2;
  const bool blocked = s.GetInt(c, "layout") == kBlocked;
  const bool prepack = s.GetInt(c, "prepack");
  int64_t icg = wl.in_c / wl.groups, ocg = wl.out_c / wl.groups;
  int64_t ob = foc[2];
  // ceil(OC / ob) blocks of ob output channels (the packed weight's and the blocked output's).
  const int64_t blocks = (wl.out_c + ob - 1) / ob;
  // NCHWc: input and output in the workload's channel blocks of lb, no copy of the output; the
  // register tile holds k = ob / lb whole blocks, and the weight is packed by blocks of lb.
  const int64_t lb = wl.layout_block;
  const bool contract = lb > 0;
  const int64_t k_blocks = contract ? ob / lb : 1;
  const int64_t layout_blocks = contract ? wl.out_c / lb : 0;
  // The layout's blocks one tile of the channel loop's two inner levels covers.
  const int64_t tile_blocks = foc[1] * k_blocks;
  if (blocked) {
    TUNE_CHECK(wl.groups == 1 || wl.depthwise()) << "blocked layout of a grouped convolution";
    pack = true;
    vec = 1;
  }
  // The input read channel-blocked: a depthwise convolution's in the blocked layout, in blocks
  // of ob (its channel block; NCHWc: the layout's blocks of lb), and a dense one's with
  // in_block, in blocks of icb (the inner IC tile factor; the reduction then runs over
  // ceil(IC/icb) whole blocks, zeros past IC).
  const bool in_block = blocked && wl.groups == 1 && s.GetInt(c, "in_block");
  const bool blocked_input = (blocked && wl.depthwise()) || in_block;
  const int64_t icb = contract ? lb : in_block ? fic[1] : ob;
  const int64_t ic_blocks = (wl.in_c + icb - 1) / icb;
  // A 1x1 convolution without padding reads only the rows and columns at multiples of the
  // stride: its blocked copy holds just those ([N][ceil(IC/icb)][OH][OW][icb]).
  // (An NCHWc input is read in place unless padded.)
  const bool sampled =
      !contract && in_block && wl.kernel_h == 1 && wl.kernel_w == 1 && wl.pad_h == 0 && wl.pad_w == 0;
  const bool padded = wl.pad_h > 0 || wl.pad_w > 0;

  // The register tile's input values read as embedded-broadcast memory operands of its FMAs:
  // the buffers the tile reads its input from (the input, or its padded or blocked copy) say so.
  const bool fold = blocked && wl.groups == 1 && s.GetInt(c, "fold_broadcast");
  auto input_buffer = [fold](Buffer b) {
    if (!fold) return b;
    auto node = std::make_shared<BufferNode>(*b);
    node->broadcast_operand = true;
    return Buffer(std::move(node));
  };

  Schedule sched;
  ArgBuffers buffers = MakeArgBuffers();
  buffers.input0 = input_buffer(buffers.input0);
  const Buffer data = buffers.input0, weight = buffers.input1, bias = buffers.bias, out = buffers.out;
  sched.args = buffers.args();

  // Padding stage: a zero-bordered copy of the input (indices clamped so no load is out of
  // bounds; the select picks zero outside).
  // Whether padded row h, column x lies inside the input (not in the zero border), and the input
  // row and column it reads, clamped so that no load is out of bounds.
  auto inside_input = [&](const Expr& h, const Expr& x) {
    return (Expr(wl.pad_h) <= h) && (h < Expr(wl.pad_h + wl.in_h)) && (Expr(wl.pad_w) <= x) &&
           (x < Expr(wl.pad_w + wl.in_w));
  };
  auto clamped_row = [&](const Expr& h) { return Min(Max(h - Expr(wl.pad_h), 0), wl.in_h - 1); };
  auto clamped_column = [&](const Expr& x) { return Min(Max(x - Expr(wl.pad_w), 0), wl.in_w - 1); };
  // A copy of the input shared out among the threads as the convolution is: by batch and
  // channel (block), and with `fused` by rows too.
  auto parallel_copy = [&](Stage& stage) {
    if (!parallel) return;
    int outer = stage.Fuse(stage.axis(0), stage.axis(1));
    if (fused) outer = stage.Fuse(outer, stage.axis(2));
    stage.Parallel(outer);
  };
  Buffer src = data;
  if (blocked_input && (padded || !contract)) {
    // [N][ceil(C/icb)][H+2ph][W+2pw][icb]: the padded input with its channels in blocks of icb,
    // zero past C, so the tile's input values are contiguous like its weight vectors (depthwise:
    // icb = ob, the tile's input vectors; dense: the broadcasts of consecutive input channels).
    // An NCHWc input is in those blocks already: only a padded one is copied, "data.pad", a row
    // of blocks at a time (an unpadded one is read in place).
    const int64_t ph = sampled ? wl.out_h() : wl.in_h + 2 * wl.pad_h;
    const int64_t pw = sampled ? wl.out_w() : wl.in_w + 2 * wl.pad_w;
    Buffer copy = input_buffer(MakeBuffer(data->name + (contract ? ".pad" : ".blocked"),
                                          {wl.batch, ic_blocks, ph, pw, icb}, BufferScope::kHeap));
    sched.scratch.push_back(copy);
    IterVar n = MakeIterVar("pn", wl.batch), cb = MakeIterVar("pc", ic_blocks);
    IterVar h = MakeIterVar("ph", ph), x = MakeIterVar("pw", pw), cv = MakeIterVar("pb", icb);
    Expr ch = cb.var * Expr(icb) + cv.var;
    Expr inside, ih = h.var, iw = x.var;
    if (sampled) {
      if (wl.stride_h > 1) ih = h.var * Expr(wl.stride_h);
      if (wl.stride_w > 1) iw = x.var * Expr(wl.stride_w);
    } else if (padded) {
      inside = inside_input(h.var, x.var);
      ih = clamped_row(h.var);
      iw = clamped_column(x.var);
    }
    if (wl.in_c % icb != 0) {
      inside = inside.defined() ? (inside && ch < Expr(wl.in_c)) : ch < Expr(wl.in_c);
      ch = Min(ch, Expr(wl.in_c - 1));
    }
    Expr load = contract ? Load(data, {n.var, cb.var, ih, iw, cv.var}) : Load(data, {n.var, ch, ih, iw});
    Stage copy_stage(copy, {n, cb, h, x, cv}, inside.defined() ? Select(inside, load, FloatImm(0.0)) : load);
    copy_stage.Vectorize(copy_stage.axis(4));
    parallel_copy(copy_stage);
    sched.stages.push_back(std::move(copy_stage));
    src = copy;
  } else if (padded) {
    int64_t ph = wl.in_h + 2 * wl.pad_h, pw = wl.in_w + 2 * wl.pad_w;
    Buffer padded = input_buffer(MakeBuffer(data->name + ".pad", {wl.batch, wl.in_c, ph, pw}, BufferScope::kHeap));
    sched.scratch.push_back(padded);
    IterVar n = MakeIterVar("pn", wl.batch), ch = MakeIterVar("pc", wl.in_c);
    IterVar h = MakeIterVar("ph", ph), x = MakeIterVar("pw", pw);
    Expr load = Load(data, {n.var, ch.var, clamped_row(h.var), clamped_column(x.var)});
    Stage pad(padded, {n, ch, h, x}, Select(inside_input(h.var, x.var), load, FloatImm(0.0)));
    parallel_copy(pad);
    sched.stages.push_back(std::move(pad));
    src = padded;
  }

  IterVar vn = MakeIterVar("n", wl.batch),
          voc = MakeIterVar("oc", contract ? layout_blocks : blocked ? blocks : wl.out_c);
  IterVar voh = MakeIterVar("oh", wl.out_h()), vow = MakeIterVar("ow", wl.out_w());
  IterVar vic = MakeIterVar("ic", icg), vkh = MakeIterVar("kh", wl.kernel_h), vkw = MakeIterVar("kw", wl.kernel_w);
  // With in_block the reduction runs over the input's channel blocks and the channels of a
  // block (the tiled ic loop's two levels, without a tail: the copies are zero past IC).
  IterVar vic0 = MakeIterVar("ic0", ic_blocks), vic1 = MakeIterVar("ic1", icb);
  // The blocked layout's channel within a block (its oc axis counts blocks).
  IterVar vob = MakeIterVar("ob", contract ? lb : ob);

  Expr w_value;
  if (pack) {
    // Where ob does not divide OC the last block is padded with zeros (the channel index
    // clamped so nothing past the weight is read). A buffer kept across calls (prepack) has as
    // many blocks as the tiled channel loop reaches, all written (zeros past OC): the
    // masked-off lanes of a partial tile address blocks past ceil(OC / ob), and there they must
    // find memory in place rather than pages never touched (a page walk per masked load).
    // (NCHWc packs by blocks of lb, as many as the tiled block loop reaches: a depthwise one
    // [blocks][1][KH][KW][lb], each block's lb channels one vector per tap.)
    const int64_t wb = contract ? lb : ob;
    const int64_t packed_blocks =
        contract  ? (layout_blocks + tile_blocks - 1) / tile_blocks * tile_blocks
        : prepack ? std::max(blocks, (blocks + foc[1] - 1) / foc[1] * foc[1])
                  : blocks;
    // With in_block: [blocks][ceil(IC/icb)][KH][KW][icb][ob], zeros past IC as well.
    const std::vector<int64_t> shape =
        in_block ? std::vector<int64_t>{packed_blocks, ic_blocks, wl.kernel_h, wl.kernel_w, icb, wb}
                 : std::vector<int64_t>{packed_blocks, icg, wl.kernel_h, wl.kernel_w, wb};
    Buffer packed = prepack ? MakePrepackedBuffer(weight->name + ".packed", shape, weight)
                            : MakeBuffer(weight->name + ".packed", shape, BufferScope::kHeap);
    sched.scratch.push_back(packed);
    if (in_block) {
      IterVar po = MakeIterVar("po", packed_blocks), pi = MakeIterVar("pi", ic_blocks);
      IterVar ph = MakeIterVar("pkh", wl.kernel_h), pw = MakeIterVar("pkw", wl.kernel_w);
      IterVar pj = MakeIterVar("pj", icb), pb = MakeIterVar("pb", wb);
      Expr channel = po.var * Expr(wb) + pb.var, in_channel = pi.var * Expr(icb) + pj.var;
      Expr inside;
      if (packed_blocks * wb != wl.out_c) {
        inside = channel < Expr(wl.out_c);
        channel = Min(channel, Expr(wl.out_c - 1));
      }
      if (ic_blocks * icb != icg) {
        inside = inside.defined() ? (inside && in_channel < Expr(icg)) : in_channel < Expr(icg);
        in_channel = Min(in_channel, Expr(icg - 1));
      }
      Expr load = Load(weight, {channel, in_channel, ph.var, pw.var});
      Stage ps(packed, {po, pi, ph, pw, pj, pb}, inside.defined() ? Select(inside, load, FloatImm(0.0)) : load);
      ps.Vectorize(ps.axis(5));
      if (parallel) ps.Parallel(fused ? ps.Fuse(ps.axis(0), ps.axis(1)) : ps.axis(0));
      sched.stages.push_back(std::move(ps));
    } else {
      IterVar po = MakeIterVar("po", packed_blocks), pi = MakeIterVar("pi", icg);
      IterVar ph = MakeIterVar("pkh", wl.kernel_h), pw = MakeIterVar("pkw", wl.kernel_w), pb = MakeIterVar("pb", wb);
      Expr channel = po.var * Expr(wb) + pb.var;
      Expr src = packed_blocks * wb == wl.out_c
                     ? Load(weight, {channel, pi.var, ph.var, pw.var})
                     : Select(channel < Expr(wl.out_c),
                              Load(weight, {Min(channel, Expr(wl.out_c - 1)), pi.var, ph.var, pw.var}), FloatImm(0.0));
      Stage ps(packed, {po, pi, ph, pw, pb}, src);
      if (blocked) ps.Vectorize(ps.axis(4));
      if (parallel) ps.Parallel(fused ? ps.Fuse(ps.axis(0), ps.axis(1)) : ps.axis(0));
      sched.stages.push_back(std::move(ps));
    }
    w_value = in_block  ? Load(packed, {voc.var, vic0.var, vkh.var, vkw.var, vic1.var, vob.var})
              : blocked ? Load(packed, {voc.var, vic.var, vkh.var, vkw.var, vob.var})
                        : Load(packed, {voc.var / Expr(ob), vic.var, vkh.var, vkw.var, voc.var % Expr(ob)});
  } else {
    w_value = Load(weight, {voc.var, vic.var, vkh.var, vkw.var});
  }
  Expr ih = voh.var * Expr(wl.stride_h) + vkh.var * Expr(wl.dilation_h);
  Expr iw = vow.var * Expr(wl.stride_w) + vkw.var * Expr(wl.dilation_w);
  Expr x_value;
  if (in_block) {
    // (The sampled copy of a 1x1 convolution holds only the rows and columns read; an NCHWc
    // input is the padded copy or, unpadded, the input itself.)
    x_value = sampled ? Load(src, {vn.var, vic0.var, voh.var, vow.var, vic1.var})
                      : Load(src, {vn.var, vic0.var, ih, iw, vic1.var});
  } else if (blocked_input) {
    x_value = Load(src, {vn.var, voc.var, ih, iw, vob.var});
  } else {
    Expr channel = vic.var;
    if (wl.groups > 1) channel = voc.var / Expr(ocg) * Expr(icg) + vic.var;
    x_value = Load(src, {vn.var, channel, ih, iw});
  }

  // The blocked layout accumulates into [N][ceil(OC/ob)][OH][OW][ob]; the epilogue is applied
  // where the NCHW output is written (by the last stage), so padded channels need no bias.
  Buffer blocked_out;
  if (blocked && !contract) {
    blocked_out = MakeBuffer(out->name + ".blocked", {wl.batch, blocks, wl.out_h(), wl.out_w(), ob}, BufferScope::kHeap);
    sched.scratch.push_back(blocked_out);
  }
  const std::vector<IterVar> reduce = in_block ? std::vector<IterVar>{vic0, vkh, vkw, vic1}
                                               : std::vector<IterVar>{vic, vkh, vkw};
  Stage st = contract  ? Stage(out, {vn, voc, voh, vow, vob}, reduce, x_value * w_value)
             : blocked ? Stage(blocked_out, {vn, voc, voh, vow, vob}, reduce, x_value * w_value)
                       : Stage(out, {vn, voc, voh, vow}, reduce, x_value * w_value);
  // Taps on the zero border of a padded input are skipped (oneDNN skips them too): the rows
  // (kh) outside the input in the loop that binds kh, which costs a test per row of taps;
  // the columns (kw) only where they fold away at compile time (the tile spans the output's
  // whole width and its columns and kw are unrolled), since a test per FMA would cost more
  // than it saves. On a 7x7 output with 3x3 taps and padding 1, 19 of 21 (kh, row) and of 21
  // (kw, column) pairs are inside: 18% of the FMAs are on the border.
  if (padded && !sampled) {
    std::vector<Expr> inside;
    if (wl.pad_h > 0) inside.push_back((Expr(wl.pad_h) <= ih) && (ih < Expr(wl.pad_h + wl.in_h)));
    if (wl.pad_w > 0 && unroll && vec != 2 && fow[0] == 1 && fow[1] == 1) {
      inside.push_back((Expr(wl.pad_w) <= iw) && (iw < Expr(wl.pad_w + wl.in_w)));
    }
    if (!inside.empty()) st.SkipWhereFalse(std::move(inside));
  }
  if ((contract || !blocked) && (wl.bias || wl.relu || wl.relu6)) {
    Expr acc = MakeVar("acc");
    st.SetEpilogue(acc, ApplyEpilogue(wl, acc, bias, contract ? voc.var * Expr(lb) + vob.var : voc.var));
  }
  constexpr auto kTails = search::SplitTails::kAllowed;
  std::vector<int> oc;
  if (contract) {
    // The layout's blocks split into the tile's k = ob / lb blocks, then oc1 tiles of them.
    oc = st.SplitFactors(st.axis(1), {(layout_blocks + tile_blocks - 1) / tile_blocks, foc[1], k_blocks}, kTails);
    oc.push_back(st.axis(4));
  } else if (blocked) {
    // The blocks split as the channels would: ceil(ceil(OC/ob)/oc1) == ceil(OC/(oc1*ob)).
    oc = st.SplitFactors(st.axis(1), {(blocks + foc[1] - 1) / foc[1], foc[1]}, kTails);
    oc.push_back(st.axis(4));
  } else {
    oc = st.SplitFactors(st.axis(1), foc, kTails);
  }
  auto oh = st.SplitFactors(st.axis(2), foh, kTails);
  auto ow = st.SplitFactors(st.axis(3), fow, kTails);
  auto ic = in_block ? std::vector<int>{st.reduce_axis(0), st.reduce_axis(3)}
                     : st.SplitFactors(st.reduce_axis(0), fic, kTails);
  int kh = st.reduce_axis(1), kw = st.reduce_axis(2);
  int n = st.axis(0);
  // The register tile: the vectorized axis innermost.
  // (NCHWc: columns x blocks x the channels of a block, the last vectorized.)
  std::vector<int> tile = contract ? std::vector<int>{ow[2], oc[2], oc[3]}
                          : vec == 2 ? std::vector<int>{oc[2], ow[2]}
                                     : std::vector<int>{ow[2], oc[2]};
  std::vector<int> leaves;
  int attach;
  switch (order) {
    case 1:
      leaves = {n, oc[0], oh[0], ow[0], oh[1], ow[1], oc[1], ic[0], ic[1], kh, kw};
      attach = oc[1];
      break;
    case 2:
      leaves = {n, oh[0], oc[0], ow[0], oc[1], oh[1], ow[1], ic[0], kh, kw, ic[1]};
      attach = ow[1];
      break;
    case 3:
      leaves = {n, oc[0], oh[0], ow[0], oc[1], ic[0], oh[1], ow[1], kh, kw, ic[1]};
      attach = ow[1];  // (the tile's partial sums kept in the output across ic0)
      break;
    default:
      leaves = {n, oc[0], oh[0], ow[0], oc[1], oh[1], ow[1], ic[0], kh, kw, ic[1]};
      attach = ow[1];
      break;
  }
  leaves.insert(leaves.end(), tile.begin(), tile.end());
  st.Reorder(leaves);
  if (vec == 1) st.Vectorize(contract ? oc[3] : oc[2]);
  if (vec == 2) st.Vectorize(ow[2]);
  if (unroll) {
    st.Unroll(tile[0]);
    if (contract) st.Unroll(tile[1]);
    st.Unroll(kw);
  }
  if (acc_tile) st.CacheWrite(attach);
  if (parallel) {
    int outer = st.Fuse(leaves[0], leaves[1]);
    if (fused) outer = st.Fuse(outer, leaves[2]);
    st.Parallel(outer);
  }
  sched.stages.push_back(std::move(st));

  if (blocked && !contract) {
    // The NCHW output from the blocked one, with the epilogue: vectors along OW (contiguous
    // stores, loads strided by ob), one channel of a block after the other; the channels past
    // OC of the last block are guarded off.
    IterVar tn = MakeIterVar("bn", wl.batch), toc = MakeIterVar("boc", wl.out_c);
    IterVar toh = MakeIterVar("boh", wl.out_h()), tow = MakeIterVar("bow", wl.out_w());
    Expr v = Load(blocked_out, {tn.var, toc.var / Expr(ob), toh.var, tow.var, toc.var % Expr(ob)});
    Stage tr(out, {tn, toc, toh, tow}, ApplyEpilogue(wl, v, bias, toc.var));
    // The vector width: a divisor of OW between half and twice the lanes where there is one
    // (no partial tile unless the config has a tail), else the lanes with a guarded tail.
    const int64_t lanes = cpu_.vector_lanes, ow_extent = wl.out_w();
    int64_t width = std::min(lanes, ow_extent);
    for (int64_t d = std::min(2 * lanes, ow_extent); d >= std::max<int64_t>(lanes / 2, 1); --d) {
      if (ow_extent % d == 0) {
        width = d;
        break;
      }
    }
    auto tc = tr.SplitFactors(tr.axis(1), {blocks, ob}, kTails);
    auto tw = tr.SplitFactors(tr.axis(3), {(ow_extent + width - 1) / width, width}, kTails);
    tr.Reorder({tr.axis(0), tc[0], tr.axis(2), tw[0], tc[1], tw[1]});
    if (width > 1) tr.Vectorize(tw[1]);
    if (parallel) {
      int outer = tr.Fuse(tr.axis(0), tc[0]);
      if (fused) outer = tr.Fuse(outer, tr.axis(2));
      tr.Parallel(outer);
    }
    sched.stages.push_back(std::move(tr));
  }
  return sched;
}

}  // namespace tune::codegen
