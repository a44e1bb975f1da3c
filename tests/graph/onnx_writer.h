// A minimal ONNX ModelProto writer for tests: protobuf wire format by hand (the tests link no
// ONNX headers), enough to build small and deliberately malformed models.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tune::test_onnx {

enum ElemType { kFloat = 1, kInt64 = 7, kBool = 9 };

inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline std::string Int(int field, int64_t v) {
  std::string out;
  PutVarint(out, static_cast<uint64_t>(field) << 3);
  PutVarint(out, static_cast<uint64_t>(v));
  return out;
}
inline std::string Bytes(int field, const std::string& v) {
  std::string out;
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  PutVarint(out, v.size());
  return out + v;
}
inline std::string Float(int field, float v) {
  std::string out;
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | 5);
  char b[4];
  std::memcpy(b, &v, 4);
  return out + std::string(b, 4);
}

// AttributeProto: name 1, f 2, i 3, s 4, t 5, floats 7, ints 8, type 20.
inline std::string AttrInt(const std::string& name, int64_t v) { return Bytes(1, name) + Int(3, v) + Int(20, 2); }
inline std::string AttrFloat(const std::string& name, float v) { return Bytes(1, name) + Float(2, v) + Int(20, 1); }
inline std::string AttrString(const std::string& name, const std::string& v) {
  return Bytes(1, name) + Bytes(4, v) + Int(20, 3);
}
inline std::string AttrInts(const std::string& name, const std::vector<int64_t>& v) {
  std::string out = Bytes(1, name);
  for (int64_t x : v) out += Int(8, x);
  return out + Int(20, 7);
}
/// An attribute whose declared type (`type`, AttributeProto.AttributeType) may differ from
/// the value it carries (an int).
inline std::string AttrIntOfType(const std::string& name, int64_t v, int type) {
  return Bytes(1, name) + Int(3, v) + Int(20, type);
}

// TensorProto: dims 1, data_type 2, name 8, raw_data 9.
inline std::string TensorRaw(const std::string& name, int type, const std::vector<int64_t>& dims, const std::string& raw) {
  std::string out;
  for (int64_t d : dims) out += Int(1, d);
  return out + Int(2, type) + Bytes(8, name) + Bytes(9, raw);
}
inline std::string TensorI64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  return TensorRaw(name, kInt64, dims, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
}
inline std::string TensorF32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  return TensorRaw(name, kFloat, dims, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}
inline std::string AttrTensor(const std::string& name, const std::string& tensor) {
  return Bytes(1, name) + Bytes(5, tensor) + Int(20, 4);
}

// ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1: elem_type 1, shape 2 (dim 1:
// dim_value 1)).
inline std::string Value(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += Bytes(1, Int(1, d));
  return Bytes(1, name) + Bytes(2, Bytes(1, Int(1, elem_type) + Bytes(2, shape)));
}

// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
inline std::string Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::vector<std::string>& attrs = {},
                        const std::string& name = "") {
  std::string out;
  for (const auto& i : inputs) out += Bytes(1, i);
  for (const auto& o : outputs) out += Bytes(2, o);
  if (!name.empty()) out += Bytes(3, name);
  out += Bytes(4, op);
  for (const auto& a : attrs) out += Bytes(5, a);
  return out;
}

// ModelProto: ir_version 1, graph 7, opset_import 8 (version 2); GraphProto: node 1, name 2,
// initializer 5, input 11, output 12.
inline std::string Model(const std::vector<std::string>& nodes, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::vector<std::string>& initializers = {},
                         int64_t opset = 13) {
  std::string g;
  for (const auto& n : nodes) g += Bytes(1, n);
  g += Bytes(2, "g");
  for (const auto& t : initializers) g += Bytes(5, t);
  for (const auto& i : inputs) g += Bytes(11, i);
  for (const auto& o : outputs) g += Bytes(12, o);
  return Int(1, 8) + Bytes(7, g) + Bytes(8, Int(2, opset));
}

}  // namespace tune::test_onnx
