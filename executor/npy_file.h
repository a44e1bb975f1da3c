// NumPy .npy files: graph inputs and outputs written for numpy and onnxruntime to read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"

namespace tune::executor {

/// The .npy bytes (format 1.0, little-endian, C order) of `shape` elements of `dtype` at
/// `data` (dtypes '<f4', '<i8', '|b1'; a scalar has an empty shape).
std::string NpyBytes(graph::DType dtype, const std::vector<int64_t>& shape, const void* data);

/// A tensor name as a file name: every character other than a letter, digit, '_', '.' or '-'
/// becomes '_' ("" becomes "_"); scripts/onnx/ort_check.py applies the same rule.
std::string SanitizeFileName(const std::string& name);

/// Writes `files` (name -> bytes) into the directory `dir`, creating it when missing: each
/// file is written under a temporary name and renamed into place once every one is written,
/// so an error leaves no new file behind (FailedPrecondition / Internal naming the path).
absl::Status WriteFilesAtomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace tune::executor
