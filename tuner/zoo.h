// Built-in model zoo: the distinct operator workloads of well-known networks, with counts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/workload.h"

namespace tune::tuner {

/// One distinct workload of a model. `name` is the first layer (in network order) that has
/// it, e.g. "layer1.0.conv1"; `count` is how many layers of the model share it (>= 1).
struct ZooLayer {
  std::string name;
  codegen::Workload workload;
  int count = 1;
};

/// A model as a list of distinct workloads in order of first appearance. Batch 1, fp32;
/// batch norm is folded into a conv bias, and elementwise ops that are not a bias or relu
/// epilogue (pooling, residual adds, softmax, layer norm) are left out.
struct ZooModel {
  std::string name;
  std::string description;
  std::vector<ZooLayer> layers;
  /// For an imported ONNX model, one line printed once before tuning: what was tuned and
  /// what is left to built-in kernels, e.g. "net.onnx: 21 tuned nodes in 16 tasks; not tuned
  /// (built-in kernels): Add x8, ..."; empty for zoo models and model files.
  std::string summary;
};

/// The built-in model `name` (one of ZooModelNames()); NotFound naming the built-in models
/// otherwise. Every returned workload passes Validate().
absl::StatusOr<ZooModel> GetZooModel(const std::string& name);

/// "resnet-18", "resnet-50", "mobilenet-v2", "bert-base".
std::vector<std::string> ZooModelNames();

}  // namespace tune::tuner
