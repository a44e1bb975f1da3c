// CudaBuilder: kernels for a GPU as CUDA C compiled by NVRTC to a cubin.
#pragma once

#include <string>

#include "measure/builder.h"

namespace tune::measure {

/// CUDA kernels (templates created for Backend::kCuda): CUDA C compiled by NVRTC to a cubin
/// for `arch` ("sm_90"); the CUDA source is kept in CompiledKernel::ir and the ptxas report's
/// registers and spills in the launch. A build past its deadline is cancelled by NVRTC
/// (kTimeout, "build timed out after N s"); with an NVRTC that cannot cancel (before CUDA 12.8)
/// builds run to their end, which is said once per process as a warning.
class CudaBuilder final : public Builder {
 public:
  CudaBuilder(std::string arch, int threads) : Builder(threads), arch_(std::move(arch)) {}

 protected:
  BuildResult Compile(const codegen::LoweredFunc& func, const BuildDeadline& deadline) const override;

 private:
  std::string arch_;
};

}  // namespace tune::measure
