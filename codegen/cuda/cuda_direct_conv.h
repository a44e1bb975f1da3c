// The direct conv2d kernel of the CUDA conv2d template (its `variant` knob set to direct).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/schedule.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"

namespace tune::codegen {

/// The tile sizes of one direct-convolution config. Every factor divides its extent exactly
/// (they come from split knobs), so blocks never run past the output.
struct DirectConvTiles {
  int64_t grid_m = 1, tz = 1, tm = 1;  // output channels (of a group): blocks, threads (threadIdx.z), per thread
  int64_t grid_h = 1, th = 1, rh = 1;  // output rows: blocks, threads (threadIdx.y), per thread
  int64_t grid_w = 1, tw = 1, rw = 1;  // output columns: blocks, threads (threadIdx.x), per thread
  int64_t c_steps = 1, bc = 1;         // input channels (of a group): main-loop steps, channels per step
  int64_t vector = 1;                  // weight copy: floats per global load (1, 2 or 4)
  int64_t pad = 0;                     // floats added to each shared weight row
  bool double_buffer = false;          // two register-staged shared stages (PipelinedLoop)
  bool unroll = false;                 // the channel loop of a step fully unrolled
  int64_t bm() const { return tz * tm; }
  int64_t bh() const { return th * rh; }
  int64_t bw() const { return tw * rw; }
  int64_t threads() const { return tw * th * tz; }
};

/// What a config needs of a block, for the space's constraints and for the kernel: the input
/// halo a block reads per channel, its cooperative copies and its shared memory.
struct DirectConvPlan {
  DirectConvTiles tiles;
  int64_t halo_h = 1, halo_w = 1;  // (BH - 1) * stride + (KH - 1) * dilation + 1, and along w
  int64_t window = 1;              // KH * KW
  TileCopy halo;                   // bc * halo_h rows x halo_w columns of the input, scalar
  TileCopy weights;                // BM rows x bc * KH * KW columns of the weight, `vector` wide
  int64_t stages = 1;

  /// Shared rows of each stage; a copy that does not split evenly gets a spare row for idle lanes.
  int64_t HaloRows() const { return halo.rows + (halo.Exact() ? 0 : 1); }
  int64_t WeightRows() const { return weights.cols + (weights.Exact() ? 0 : 1); }
  /// Shared memory per block, floats (the CUDA printer's 16-byte alignment included).
  int64_t SharedFloats() const;
  /// Registers per thread, estimated: the accumulators, one step's fragments, the staging
  /// registers when double-buffered, plus `overhead` for addresses and counters.
  int64_t Registers(int64_t overhead) const;
  /// Multiply-adds in the straight-line code of one unrolled channel step (or one channel when
  /// the channel loop stays a loop): a code-size bound.
  int64_t UnrolledFma() const;
};

/// The plan of `tiles` for the conv2d `workload` (NCHW).
DirectConvPlan PlanDirectConv(const Workload& workload, const DirectConvTiles& tiles);

/// Direct convolution: block (bx, by, bz) computes an OC tile of BM channels x a BH x BW tile of
/// output pixels of one image (bz = image * groups * grid_m + channel block; a grouped conv's
/// blocks each lie in one group and read its C / groups input channels). Per step of bc input
/// channels the block copies the input halo tile (zero outside the image) and the matching
/// BM x bc x KH x KW weights (transposed, so a thread's TM channels are contiguous) into shared
/// memory; each thread then accumulates TM channels x RH x RW pixels in registers (its pixels
/// th and tw apart, so a warp reads neighbouring shared words and writes contiguous output),
/// and the fused bias + ReLU epilogue writes them. Stride, padding and dilation come from
/// `workload`. The arguments are data [N][C][H][W], weight [OC][C/G][KH][KW], bias [OC] (or
/// none) and out [N][OC][OH][OW].
Schedule BuildDirectConv(const Workload& workload, const DirectConvPlan& plan, const ArgBuffers& args);

}  // namespace tune::codegen
