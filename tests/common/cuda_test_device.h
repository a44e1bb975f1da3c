// The GPU a test runs on, or why it is skipped.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/runtime/cuda_driver.h"

namespace tune::test {

/// CUDA device 0 with NVRTC to compile for it; otherwise Unavailable with the reason a GPU
/// test skips ("no CUDA device: ..." or "this build has no NVRTC"), for GTEST_SKIP in SetUp.
inline absl::StatusOr<std::unique_ptr<codegen::CudaDevice>> OpenTestGpu() {
  absl::StatusOr<std::unique_ptr<codegen::CudaDevice>> device = codegen::CudaDevice::Open(0);
  if (!device.ok()) return absl::UnavailableError(absl::StrCat("no CUDA device: ", device.status().ToString()));
  if (!codegen::NvrtcAvailable()) return absl::UnavailableError("this build has no NVRTC");
  return device;
}

}  // namespace tune::test
