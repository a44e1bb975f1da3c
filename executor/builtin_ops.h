// The built-in CPU kernels: every ONNX operator `tune run` executes without a tuned kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/op_kernel.h"
#include "graph/graph.h"

namespace tune::executor {

/// Operators whose output is the input's data under another shape (Reshape, Flatten, Squeeze,
/// Unsqueeze, Identity, Dropout): the plan makes the output a view of the input's buffer
/// rather than running a kernel.
bool IsViewOp(const std::string& op);

/// The ONNX op types CreateBuiltinKernel handles (views included), sorted. It also handles the
/// CPU-only layout transforms "tune.ToBlocked", "tune.ToNchw" and "tune.Reblock"
/// (graph/layout.h), which are not listed: the GPU backend has no kernels for them.
std::vector<std::string> BuiltinOps();

/// The built-in kernel of `node`. `inputs` / `outputs` are its tensors in the node's order
/// (nullptr for an absent optional input); their dtypes and shapes are final (the importer's),
/// and constant inputs carry their data (Slice's starts, Clip's bounds, a Gemm weight...).
/// `opset` is the model's ONNX opset (Softmax, ReduceSum and Split changed meaning with it).
/// Unimplemented "node 'X' (Op) has no built-in kernel" for an op outside BuiltinOps();
/// InvalidArgument naming the node for a form the kernel does not handle (a non-constant
/// Slice start, 3-D pooling, a dtype it does not take) or shapes that do not agree with the
/// operator. Views (IsViewOp) get a kernel that copies, used only where a view cannot be.
absl::StatusOr<std::unique_ptr<OpKernel>> CreateBuiltinKernel(const graph::Node& node,
                                                              const std::vector<const graph::Tensor*>& inputs,
                                                              const std::vector<const graph::Tensor*>& outputs,
                                                              int64_t opset);

}  // namespace tune::executor
