// Static shape inference and constant folding of ONNX operators on graph tensors (the
// importer's per-node step; internal to the graph module).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"

namespace tune::graph {

/// Largest constant (in elements) that folding produces; larger results stay run-time nodes.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 22;
/// Largest tensor (in elements) a graph may have, as the importer's initializers: 2^40. Every
/// inferred shape is checked against it (and for negative extents) before it is used, so
/// later element counts and byte sizes never overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

/// OK when every extent of `shape` is >= 0 and their product is at most kMaxTensorElements;
/// otherwise InvalidArgument "shape AxB has a negative extent" / "shape AxB has more than
/// 2^40 elements".
absl::Status CheckShape(const std::vector<int64_t>& shape);

/// Infers the outputs of `node` (ONNX semantics at `opset`) from its inputs `in` (nullptr for
/// an absent optional input). On success `*out` has one tensor per node output, named after
/// it, with its dtype and static shape; when every input is constant and the op can be
/// evaluated here (shape arithmetic on int64/bool data, small float math, data movement), the
/// outputs carry their data (they are constants). Shape always yields a constant. Errors are
/// InvalidArgument without a file prefix, e.g. "node 'r' (Resize): tune cannot infer the
/// output shape of op Resize".
absl::Status InferNode(const Node& node, int64_t opset, const std::vector<const Tensor*>& in,
                       std::vector<Tensor>* out);

/// ONNX's multidirectional (numpy) broadcast of two shapes; InvalidArgument when they do not
/// broadcast.
absl::Status BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                             std::vector<int64_t>* out);

/// The attribute `name` of `node` as an int / float / ints / string, or `fallback` when absent
/// (or of another type).
int64_t AttrInt(const Node& node, const std::string& name, int64_t fallback);
float AttrFloat(const Node& node, const std::string& name, float fallback);
std::vector<int64_t> AttrInts(const Node& node, const std::string& name,
                              const std::vector<int64_t>& fallback = {});
std::string AttrString(const Node& node, const std::string& name, const std::string& fallback = "");
bool HasAttr(const Node& node, const std::string& name);

/// The values of a constant tensor of any dtype as int64 (floats truncated) or as float.
std::vector<int64_t> ConstI64(const Tensor& t);
std::vector<float> ConstF32(const Tensor& t);

/// A constant tensor from values.
Tensor MakeI64(const std::string& name, std::vector<int64_t> shape, const std::vector<int64_t>& values);
Tensor MakeF32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);

/// "1x3x224x224" ("scalar" for an empty shape).
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace tune::graph
