// The CUDA depthwise conv2d template: direct convolution, one channel per thread row.
#pragma once

#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/template.h"

namespace tune::codegen {

/// Depthwise conv2d (groups == in_c == out_c, NCHW) on a GPU, computed directly: each thread
/// accumulates an RH x RW tile of one channel's outputs in registers, reading the input
/// window through the read-only cache (zero outside the input), with the bias + relu
/// epilogue. Memory-bound: every weight is reused RH x RW times from a register, every input
/// element up to KH x KW times from cache.
///
/// Knobs: tile_c = [ceil(C / TC), TC] (threadIdx.z over TC channels; blockIdx.z over channel
/// blocks x images), tile_h = [ceil(OH / (TH RH)), TH, RH] (threadIdx.y), tile_w = [ceil(OW /
/// (TW RW)), TW, RW] (threadIdx.x: consecutive threads read consecutive columns), unroll_window
/// (the KH x KW loop unrolled). The splits may have tails (search::SplitTails::kAllowed): a
/// thread past the channels does nothing and outputs past the image are not stored; tiles
/// that divide the output get no guard. Constraints: threads per block within the limit and a multiple of
/// 32 (or the whole problem in one block), TC <= 64 (blockDim.z), at most 16 outputs per thread.
class CudaDepthwiseTemplate : public Template {
 public:
  CudaDepthwiseTemplate(Workload workload, const GpuLimits& limits);
  std::string name() const override { return "cuda_depthwise_conv2d"; }
  int version() const override { return 1; }
  search::Config DefaultConfig() const override;

 protected:
  Schedule Build(const search::Config& config) const override;

 private:
  GpuLimits limits_;
};

}  // namespace tune::codegen
