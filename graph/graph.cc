// Graph: element types and look-ups.
#include "graph/graph.h"

#include <limits>

namespace tune::graph {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

int64_t Tensor::NumElements() const {
  // Saturating: a shape from a file may multiply past int64 (the importer refuses such shapes,
  // but a count must never wrap on the way there).
  int64_t n = 1;
  for (int64_t extent : shape) {
    if (extent <= 0) return 0;
    if (__builtin_mul_overflow(n, extent, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

const Tensor* Graph::Find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

}  // namespace tune::graph
