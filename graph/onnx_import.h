// ImportOnnx: an ONNX model file read into a Graph with static shapes, constants folded,
// BatchNormalization folded into convolutions and the tuned operators bound to workloads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace tune::graph {

/// What the user fixes at import.
struct ImportOptions {
  /// Shapes of graph inputs by name (`--input ids=1x128`), replacing symbolic or fixed dims.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// Parses "NAME=1x3x224x224" (extents positive integers) into `*options`; InvalidArgument
/// naming the flag's text otherwise.
absl::Status ParseInputShape(const std::string& text, ImportOptions* options);

/// Reads the ONNX file at `path` into a Graph: every tensor's static shape inferred, constant
/// subgraphs (shape arithmetic) folded, Identity/Dropout removed, BatchNormalization folded into
/// the preceding Conv, and Conv/Gemm/MatMul (with their bias Add and Relu/Clip epilogue) bound
/// to tuned "tune.Task" nodes (graph.h). InvalidArgument with one line naming the file for a
/// malformed or truncated file, external data, an unsupported opset, a symbolic dimension not
/// fixed by `options`, or a tuned op whose form tune cannot tune; NotFound when unreadable.
absl::StatusOr<Graph> ImportOnnx(const std::string& path, const ImportOptions& options = {});

/// The same from the file's bytes; `path` only names it in messages.
absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& path,
                                      const ImportOptions& options = {});

/// True when `bytes` (a file's first bytes, or all of them) look like an ONNX model rather than
/// a JSON model file (used to pick the importer for a path that does not end in .onnx).
bool LooksLikeOnnx(const std::string& bytes);

}  // namespace tune::graph
