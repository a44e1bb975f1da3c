// CreateTemplate: the registry of templates, by operator and back end.
#include "codegen/templates.h"

#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/gemm_template.h"
#include "codegen/cuda/cuda_depthwise_template.h"
#include "codegen/cuda/cuda_gemm_template.h"

namespace tune::codegen {

absl::StatusOr<std::unique_ptr<Template>> CreateTemplate(const Workload& workload, Backend backend,
                                                         const GpuLimits& limits, const std::optional<CpuLimits>& cpu) {
  if (auto st = workload.Validate(); !st.ok()) return st;
  if (workload.dtype != "float32") {
    return absl::InvalidArgumentError("unsupported dtype '" + workload.dtype + "' (only float32)");
  }
  if (backend == Backend::kCuda) {
    switch (workload.op) {
      case OpKind::kDense:
      case OpKind::kMatmul:
      case OpKind::kBatchMatmul:
        return std::unique_ptr<Template>(new CudaGemmTemplate(workload, limits));
      case OpKind::kConv2d:
        if (workload.layout_block > 0) {
          return absl::InvalidArgumentError("no CUDA template for the NCHWc conv2d " + workload.Key() +
                                            " (the channel-blocked layout is a CPU one)");
        }
        // Depthwise has its own template; every other conv2d (grouped too) is an implicit GEMM.
        if (workload.depthwise()) return std::unique_ptr<Template>(new CudaDepthwiseTemplate(workload, limits));
        return std::unique_ptr<Template>(new CudaGemmTemplate(workload, limits));
    }
    return absl::InvalidArgumentError("no CUDA template for operator " + OpName(workload.op));
  }
  switch (workload.op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
    case OpKind::kBatchMatmul:
      return std::unique_ptr<Template>(new GemmTemplate(workload, cpu ? *cpu : HostCpuLimits()));
    case OpKind::kConv2d:
      return std::unique_ptr<Template>(new Conv2dTemplate(workload, cpu ? *cpu : HostCpuLimits()));
  }
  return absl::InvalidArgumentError("no template for operator " + OpName(workload.op));
}

}  // namespace tune::codegen
