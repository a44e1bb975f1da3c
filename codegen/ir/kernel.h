// CompiledKernel: a built kernel as plain bytes (host object code or a cubin) and how to launch it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::codegen {

/// Every generated CPU kernel has this signature: `args` holds one pointer per tensor, inputs
/// in Workload::Inputs() order, then the output. Buffers are fp32, row-major, 64-byte aligned.
using KernelFn = void (*)(float* const* args);

/// Device memory a CUDA kernel takes as arguments after the workload's tensors (split-K's
/// partial tiles and arrival counters): the runner allocates `bytes` once per kernel, zeroed
/// when `zero_init` (else filled with NaN), and passes the same memory to every launch; a
/// kernel leaves its zero_init buffers zero again when a launch ends.
struct CudaScratch {
  int64_t bytes = 0;
  bool zero_init = false;
  bool operator==(const CudaScratch&) const = default;
};

/// How a CUDA kernel is launched, and what ptxas reported about it.
struct CudaLaunch {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t shared_bytes = 0;  // dynamic shared memory per block
  int registers = -1;        // per thread (-1: not reported)
  int64_t spill_bytes = -1;  // register spill stores + loads per thread (-1: not reported)
  std::vector<CudaScratch> scratch;  // extra arguments after the output, in order
};

/// The product of a build. Host kernels: an ELF relocatable object defining `symbol`. CUDA
/// kernels (`cuda`): a cubin defining `symbol`, with its launch shape. Plain bytes, so it can
/// be sent to another process or host and loaded there.
struct CompiledKernel {
  std::string symbol;
  std::string object_code;
  std::string ir;  // optimized LLVM IR or CUDA C source, kept when asked for; may be empty
  bool cuda = false;
  CudaLaunch launch;
};

}  // namespace tune::codegen
