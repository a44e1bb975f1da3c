// Graph: element types and look-ups.
#include "graph/graph.h"

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
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

const Tensor* Graph::Find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

}  // namespace tune::graph
