// The GPU tests' one CUDA backend on device 0, shared by every test of the process.
#pragma once

#include <memory>
#include <string>

#include "executor/cuda_backend.h"

namespace tune::executor {

/// The process's CUDA backend on device 0, made on first use; null without a GPU (or driver),
/// with the reason in `*why`.
std::shared_ptr<CudaBackend> SharedCudaBackend(std::string* why);

}  // namespace tune::executor
