// The conv2d template: NCHW convolution with stride, padding, dilation, groups, bias + ReLU.
#pragma once

#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/template.h"

namespace tune::codegen {

/// out[n,oc,oh,ow] = epilogue(sum_{ic,kh,kw} pad(data)[n, g*ICg+ic, oh*sh+kh*dh, ow*sw+kw*dw] *
/// weight[oc,ic,kh,kw]). Knobs: three-level tiles of OC and OW, two-level tiles of OH and the
/// per-group input channels, the loop order, which register-tile axis (OW or OC) is
/// vectorized, unrolling, a packed [OC/ob][ICg][KH][KW][ob] weight copy, the accumulator tile
/// on/off, a parallel outer loop (or the batch and the outer OC and OH block loops fused into
/// one parallel loop), and the layout the convolution writes. Padding is materialized in a
/// scratch buffer first. Where the target's thread count is known (more than one), parallel
/// configs need an iteration count that divides among the threads or is at least 8 per thread.
///
/// `layout` 0 (nchw) writes the output in place. `layout` 1 (blocked, NCHWc) accumulates
/// register tiles of ow2 x ob (ob = the innermost OC factor, the vector axis) into a scratch
/// buffer [N][ceil(OC/ob)][OH][OW][ob] with contiguous vector stores, reading the packed
/// weight, and a last stage copies it to the NCHW output and applies the epilogue; channels
/// past OC in the last block are zero-weighted and never copied. Whatever the layout, the
/// kernel reads NCHW data and writes NCHW output. The blocked layout takes groups == 1 and
/// depthwise convolutions (groups == in_c == out_c: the channel block then also blocks the
/// input, copied into [N][ceil(C/ob)][H+2ph][W+2pw][ob]); other grouped ones stay nchw. For
/// groups == 1, `in_block` 1 blocks the input too, by icb = the inner IC tile factor: the padded
/// input is copied into [N][ceil(IC/icb)][H+2ph][W+2pw][icb] (a 1x1 convolution without padding
/// copies only the rows and columns it reads, [N][ceil(IC/icb)][OH][OW][icb]), the weight is
/// packed [OC/ob][ceil(IC/icb)][KH][KW][icb][ob], both zero past IC, and the reduction runs
/// over whole blocks, so the tile's broadcasts of consecutive input channels read consecutive
/// floats. `in_block` 0, the default (and what configs recorded without it mean), reads the
/// NCHW input.
///
/// Register tiles follow `cpu`: ow2 may be any of 1..16 and ob any multiple of the vector
/// lanes up to 64 (with tails); a blocked tile's ceil(ob/lanes) x ow2 accumulator vectors, its
/// ceil(ob/lanes) weight vectors and one broadcast input must fit the vector registers (8x14,
/// 16x6 or 24x4 with AVX2's 16; 32x14 or 64x6 with AVX-512's 32). The nchw layout keeps its
/// bound of 256 floats (or the registers' capacity where that is larger), so configs recorded
/// before stay valid.
///
/// On AVX-512, `fold_broadcast` 1 (the blocked layout of a dense convolution) reads each input
/// value of the tile as an embedded-broadcast memory operand of its FMAs ({1to16}) instead of
/// a register broadcast, so the tile may take every register but its weight vectors: 64x7
/// (28 accumulators + 4 weights, oneDNN's tile) or 32x15. 0, the default and what configs
/// recorded before the knob mean, broadcasts into a register. `order` 3 (the blocked layout)
/// puts the outer input-channel loop ic0 outside the OH and OW tiles: each tile accumulates in
/// the output, one block of input channels at a time, so the oc1 x ob channels' weights of
/// that block stay in cache while every row and column uses them (the other orders read all
/// of the tile's weights once per output row: from beyond L2 for 512 channels of 7x7). With
/// acc_tile 1 each visit of a tile loads its partial sums into a local tile (registers),
/// accumulates the block and stores them back; with acc_tile 0 the FMAs accumulate in the
/// output itself, which LLVM keeps in registers only where the tile is the row's one column
/// tile. The output is zeroed before and the epilogue applied after, in passes of their own.
class Conv2dTemplate : public Template {
 public:
  explicit Conv2dTemplate(Workload workload, CpuLimits cpu = HostCpuLimits());
  std::string name() const override { return "conv2d"; }
  int version() const override { return 1; }
  /// The default: whole-extent outer tiles, one register column, no unrolling (NCHWc: one
  /// layout block of channels, vectorized), and, where cpu.threads > 1, the batch and outer OC
  /// and OH block loops fused into one parallel loop (or the outer loop alone, where only that
  /// one shares out evenly; serial where neither does).
  search::Config DefaultConfig() const override;
  /// Where cpu.threads > 1, a config with "parallel" 0 gets the default's rule: 2 (batch, OC
  /// and OH blocks fused) where parallel_balance keeps it, else 1 (the outer loop), else none.
  search::Config ParallelFormOf(const search::Config& config) const override;
  /// Dense convolutions on a vector ISA: the blocked layout's register tiles of one and of two
  /// channel vectors, each as wide as the registers hold beside its weight vectors and one
  /// broadcast (the widest divisor of OW up to that, AVX-512: 14 columns of 32 channels or 28
  /// of 16), blocks of input channels of one vector (NCHWc: the layout's); each tile in order
  /// 0 (every channel block inside the row loops: the input rows stay in cache) and in order 3
  /// with the accumulator tile (one block of input channels at a time over all rows: its
  /// weights stay in cache), and, where the tile covers all of OW, order 3 accumulating in the
  /// output. Weights packed once, kernel loops unrolled; in parallel form where
  /// cpu.threads > 1 (order 3 splits the channel blocks among the threads where they divide).
  std::vector<search::Config> StartConfigs() const override;

 protected:
  Schedule Build(const search::Config& config) const override;

 private:
  /// DefaultConfig with every loop on the calling thread (parallel 0).
  search::Config SerialDefault() const;

  CpuLimits cpu_;
};

}  // namespace tune::codegen
