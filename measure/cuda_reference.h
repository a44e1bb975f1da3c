// Reference kernels for checking GPU candidates: naive CUDA C, one thread per output element,
// accumulating in double precision.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "codegen/ir/workload.h"

namespace tune::measure {

/// A naive kernel for a workload and its launch shape. Arguments as the generated kernels
/// take them: inputs in Workload::Inputs() order, then the output.
struct CudaReferenceKernel {
  std::string name;
  std::string source;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
};

/// The reference for any valid workload (dense, matmul, batch_matmul, conv2d with stride,
/// padding, dilation, groups, bias and relu): out = epilogue(sum in double) per element, so
/// its own rounding is far below float32 tolerance.
CudaReferenceKernel MakeCudaReference(const codegen::Workload& workload);

}  // namespace tune::measure
