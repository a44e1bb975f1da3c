// NodeContext: one graph node with its tensors, and readers of its attributes, shared by the
// built-in CPU kernels (builtin_ops.cc) and the GPU kernels generated from the same nodes
// (cuda_ops.cc), so both read every attribute with the same defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "graph/graph.h"

namespace tune::executor {

struct NodeContext {
  const graph::Node& node;
  const std::vector<const graph::Tensor*>& in;
  const std::vector<const graph::Tensor*>& out;
  int64_t opset;

  /// InvalidArgument "node 'NAME' (OP): what".
  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", node.op, "): ", what));
  }
  /// The i-th input / output tensor; nullptr when absent.
  const graph::Tensor* Input(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  const graph::Tensor* Output(size_t i) const { return i < out.size() ? out[i] : nullptr; }
  /// An int attribute (a float one truncated); `def` when absent or of another type.
  int64_t Int(const std::string& name, int64_t def) const {
    auto it = node.attributes.find(name);
    if (it == node.attributes.end()) return def;
    if (auto* v = std::get_if<int64_t>(&it->second)) return *v;
    if (auto* f = std::get_if<float>(&it->second)) return static_cast<int64_t>(*f);
    return def;
  }
  /// A float attribute (an int one converted); `def` when absent or of another type.
  float Float(const std::string& name, float def) const {
    auto it = node.attributes.find(name);
    if (it == node.attributes.end()) return def;
    if (auto* v = std::get_if<float>(&it->second)) return *v;
    if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
    return def;
  }
  /// An ints attribute (a single int as a list of one); nullopt when absent or of another type.
  std::optional<std::vector<int64_t>> Ints(const std::string& name) const {
    auto it = node.attributes.find(name);
    if (it == node.attributes.end()) return std::nullopt;
    if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
    if (auto* i = std::get_if<int64_t>(&it->second)) return std::vector<int64_t>{*i};
    return std::nullopt;
  }
  /// A string attribute; `def` when absent or of another type.
  std::string String(const std::string& name, const std::string& def) const {
    auto it = node.attributes.find(name);
    if (it == node.attributes.end()) return def;
    if (auto* v = std::get_if<std::string>(&it->second)) return *v;
    return def;
  }
};

}  // namespace tune::executor
