// Graph: a model as a static-shape dataflow graph of operator nodes over named tensors, the
// form ONNX models are imported into (graph/onnx_import.h) and `tune run` executes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "codegen/ir/workload.h"

namespace tune::graph {

/// Element types a graph's tensors may have. Float tensors carry the model's data; int64 and
/// bool tensors carry indices, shapes and masks.
enum class DType { kFloat32, kInt64, kBool };

/// "float32", "int64", "bool".
const char* DTypeName(DType dtype);
/// Bytes per element: 4, 8, 1.
int64_t DTypeSize(DType dtype);

/// A named tensor: its element type, its static row-major shape (every extent known and >= 0;
/// a scalar has an empty shape) and, for weights and folded constants, its data.
struct Tensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  /// Row-major element data (NumElements() * DTypeSize(dtype) bytes) when the tensor is a
  /// constant (an initializer, a Constant node's value, or a value folded at import);
  /// nullopt for tensors computed at run time and for graph inputs.
  std::optional<std::vector<uint8_t>> data;

  bool constant() const { return data.has_value(); }
  /// Product of the extents (1 for a scalar; 0 when an extent is not positive; INT64_MAX when
  /// the product does not fit, never a wrapped value).
  int64_t NumElements() const;
  /// The constant data as a typed pointer; only for constants of that dtype.
  const float* f32() const { return reinterpret_cast<const float*>(data->data()); }
  const int64_t* i64() const { return reinterpret_cast<const int64_t*>(data->data()); }
};

/// An attribute value of a node, as ONNX spells it: int, float, string, ints, floats, strings,
/// or a constant tensor (Constant's `value`).
using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

/// A node that `tune` tunes: one Workload (codegen/ir/workload.h), with the tensors its kernel
/// takes. `args` names the kernel's tensors in Workload::Inputs() order, then the output; each
/// is contiguous row-major with exactly the element count of the workload's tensor of that
/// position, so a reshape between the model's shape and the kernel's (a [B,S,H] activation as
/// dense data [B*S,H]) is only a different view of the same buffer. Weights that the import
/// had to rearrange (Gemm's transA/transB, BatchNormalization folded into Conv's weight and
/// bias) are new constant tensors of the graph, named after the node.
struct TaskBinding {
  codegen::Workload workload;
  std::vector<std::string> args;
};

/// One operator application. `op` is the ONNX op type ("Conv", "Relu", ...) for nodes run by
/// built-in kernels, or "tune.Task" for a tuned node (then `task` is set and the node's
/// inputs/outputs are the task's args). Optional inputs that are absent are "".
struct Node {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;
  std::optional<TaskBinding> task;
  /// The ONNX nodes this node stands for, in order, e.g. {"Conv", "BatchNormalization",
  /// "Relu"} for a fused conv; for messages and the task summary.
  std::vector<std::string> fused;
};

/// A whole model: nodes in a topological order (every input of a node is a graph input, a
/// constant, or an output of an earlier node), every tensor by name, the graph's inputs and
/// outputs (all with static shapes).
struct Graph {
  std::string name;
  int64_t opset = 0;
  std::vector<Node> nodes;
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;

  /// The tensor `name`; nullptr when the graph has none.
  const Tensor* Find(const std::string& name) const;
};

}  // namespace tune::graph
