// The built-in GPU kernels: CUDA C generated per graph node from its tensors' static shapes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/cuda/nvrtc.h"
#include "graph/graph.h"

namespace tune::executor {

/// One node's CUDA kernel: its definition and how to launch it. The kernel takes one pointer
/// parameter per entry of the node's inputs, then one per entry of its outputs, in the node's
/// order (a null pointer for an absent optional input or output); every shape, stride and
/// constant attribute is baked into the text, so two nodes with equal tensors and attributes
/// get the same text and name.
struct CudaOpSource {
  std::string name;  // the extern "C" __global__ entry point: "tune_op_" and a hash of the text
  std::string text;  // the kernel's definition; compiled after CudaOpPrelude() (CudaOpProgram)
  std::array<int64_t, 3> grid = {1, 1, 1};   // blocks per grid (x, y, z); x = 0: nothing to do
  std::array<int64_t, 3> block = {1, 1, 1};  // threads per block (x, y, z)
  int params = 0;  // pointer parameters: node inputs + node outputs
};

/// The device helpers every built-in kernel may use (block reductions, types), printed once at
/// the top of a program.
const std::string& CudaOpPrelude();

/// The CUDA kernel of `node`, whose tensors are `inputs` / `outputs` (the node's order, nullptr
/// for an absent optional one) as CreateBuiltinKernel (builtin_ops.h) takes them, with the same
/// errors: the node is first checked by the CPU kernel's factory, so a node the CPU backend
/// refuses is refused here with the same message. fp32 math as the CPU kernels (expf, erff,
/// tanhf, IEEE division and square root).
absl::StatusOr<CudaOpSource> MakeCudaOpSource(const graph::Node& node, const std::vector<const graph::Tensor*>& inputs,
                                              const std::vector<const graph::Tensor*>& outputs, int64_t opset);

/// One translation unit holding the prelude and each distinct kernel of `sources` once (by
/// name, sorted, so the same set of kernels always gives the same text).
std::string CudaOpProgram(const std::vector<CudaOpSource>& sources);

/// CudaOpProgram(sources) compiled by NVRTC for `arch` ("sm_90"): one compile for all of them.
/// The errors of codegen::CompileCuda (InvalidArgument with the log for a compile error,
/// Unimplemented without NVRTC).
absl::StatusOr<codegen::CompiledCuda> CompileCudaOps(const std::vector<CudaOpSource>& sources, const std::string& arch);

}  // namespace tune::executor
