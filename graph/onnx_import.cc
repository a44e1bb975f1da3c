// ImportOnnx: ONNX protobuf -> Graph (constants, aliases, static shapes, folding), then the
// rewrites of graph/fuse.h (BatchNormalization folding, tuned nodes) and dead-node removal.
#include "graph/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/table.h"
#include "graph/fuse.h"
#include "graph/ops.h"
#include "onnx/onnx_pb.h"

namespace tune::graph {
namespace {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 18;

/// The import of one file: its path for messages, its options, and the graph being built.
class Importer {
 public:
  Importer(const std::string& path, const ImportOptions& options) : path_(path), options_(options) {}

  absl::StatusOr<Graph> Run(const std::string& bytes);

 private:
  /// One line: names from the file may hold newlines or terminal control sequences.
  absl::Status Error(const std::string& why) const {
    return absl::InvalidArgumentError(base::EscapeControl(path_ + ": " + why));
  }
  absl::Status ReadTensor(const onnx::TensorProto& proto, const std::string& name, Tensor* out) const;
  absl::Status ReadAttribute(const onnx::AttributeProto& proto, const std::string& where, Attribute* out) const;
  absl::Status ReadInputs(const onnx::GraphProto& g);
  absl::Status ReadNodes(const onnx::GraphProto& g);
  /// The tensor a node input names after aliases ("" stays "").
  std::string Resolve(const std::string& name) const {
    auto it = alias_.find(name);
    return it == alias_.end() ? name : it->second;
  }

  std::string path_;
  ImportOptions options_;
  Graph graph_;
  std::map<std::string, std::string> alias_;  // Identity/Dropout outputs -> their input
};

absl::Status Importer::ReadTensor(const onnx::TensorProto& proto, const std::string& name, Tensor* out) const {
  out->name = name;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL || proto.external_data_size() > 0) {
    return Error(absl::StrCat("tensor '", name,
                              "' keeps its data in an external file, which tune does not read; save the model "
                              "with its data inside (onnx.save_model without save_as_external_data)"));
  }
  int64_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) return Error(absl::StrCat("tensor '", name, "' has a bad shape"));
    out->shape.push_back(d);
    n *= d;
  }
  const std::string& raw = proto.raw_data();
  const bool has_raw = proto.has_raw_data();
  auto bad_size = [&] {
    return Error(absl::StrCat("tensor '", name, "' has ", has_raw ? raw.size() : 0,
                              " data bytes or values for shape ", ShapeText(out->shape), " (malformed or truncated file)"));
  };
  std::vector<int64_t> ints;
  std::vector<float> floats;
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      out->dtype = DType::kFloat32;
      if (has_raw) {
        if (static_cast<int64_t>(raw.size()) != n * 4) return bad_size();
        out->data = std::vector<uint8_t>(raw.begin(), raw.end());
        return absl::OkStatus();
      }
      if (proto.float_data_size() != n) return bad_size();
      floats.assign(proto.float_data().begin(), proto.float_data().end());
      *out = MakeF32(name, out->shape, floats);
      return absl::OkStatus();
    case onnx::TensorProto::DOUBLE:
      if (has_raw) {
        if (static_cast<int64_t>(raw.size()) != n * 8) return bad_size();
        for (int64_t i = 0; i < n; ++i) {
          double d;
          std::memcpy(&d, raw.data() + i * 8, 8);
          floats.push_back(static_cast<float>(d));
        }
      } else {
        if (proto.double_data_size() != n) return bad_size();
        for (double d : proto.double_data()) floats.push_back(static_cast<float>(d));
      }
      *out = MakeF32(name, out->shape, floats);
      return absl::OkStatus();
    case onnx::TensorProto::INT64:
      if (has_raw) {
        if (static_cast<int64_t>(raw.size()) != n * 8) return bad_size();
        ints.resize(n);
        if (n) std::memcpy(ints.data(), raw.data(), n * 8);
      } else {
        if (proto.int64_data_size() != n) return bad_size();
        ints.assign(proto.int64_data().begin(), proto.int64_data().end());
      }
      *out = MakeI64(name, out->shape, ints);
      return absl::OkStatus();
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: {
      const int dt = proto.data_type();
      const int size = dt == onnx::TensorProto::INT32 ? 4 : (dt == onnx::TensorProto::INT16 || dt == onnx::TensorProto::UINT16) ? 2 : 1;
      if (has_raw) {
        if (static_cast<int64_t>(raw.size()) != n * size) return bad_size();
        for (int64_t i = 0; i < n; ++i) {
          const char* p = raw.data() + i * size;
          int64_t v = 0;
          if (dt == onnx::TensorProto::INT32) { int32_t x; std::memcpy(&x, p, 4); v = x; }
          else if (dt == onnx::TensorProto::INT16) { int16_t x; std::memcpy(&x, p, 2); v = x; }
          else if (dt == onnx::TensorProto::UINT16) { uint16_t x; std::memcpy(&x, p, 2); v = x; }
          else if (dt == onnx::TensorProto::INT8) v = static_cast<int8_t>(*p);
          else v = static_cast<uint8_t>(*p);
          ints.push_back(v);
        }
      } else {
        if (proto.int32_data_size() != n) return bad_size();
        ints.assign(proto.int32_data().begin(), proto.int32_data().end());
      }
      if (dt == onnx::TensorProto::BOOL) {
        out->dtype = DType::kBool;
        out->data = std::vector<uint8_t>(n);
        for (int64_t i = 0; i < n; ++i) (*out->data)[i] = ints[i] != 0;
      } else {
        *out = MakeI64(name, out->shape, ints);
      }
      return absl::OkStatus();
    }
    default:
      return Error(absl::StrCat("tensor '", name, "' has ONNX element type ", proto.data_type(),
                                ", which tune does not support (float, double, integers, bool)"));
  }
}

absl::Status Importer::ReadAttribute(const onnx::AttributeProto& a, const std::string& where, Attribute* out) const {
  switch (a.type()) {
    case onnx::AttributeProto::INT: *out = static_cast<int64_t>(a.i()); break;
    case onnx::AttributeProto::FLOAT: *out = a.f(); break;
    case onnx::AttributeProto::STRING: *out = a.s(); break;
    case onnx::AttributeProto::INTS: *out = std::vector<int64_t>(a.ints().begin(), a.ints().end()); break;
    case onnx::AttributeProto::FLOATS: *out = std::vector<float>(a.floats().begin(), a.floats().end()); break;
    case onnx::AttributeProto::STRINGS: *out = std::vector<std::string>(a.strings().begin(), a.strings().end()); break;
    case onnx::AttributeProto::TENSOR: {
      Tensor t;
      if (absl::Status st = ReadTensor(a.t(), where, &t); !st.ok()) return st;
      *out = std::move(t);
      break;
    }
    default:
      return Error(absl::StrCat(where, ": attribute '", a.name(), "' is a graph or of a type tune does not read"));
  }
  return absl::OkStatus();
}

absl::Status Importer::ReadInputs(const onnx::GraphProto& g) {
  std::set<std::string> real_inputs;
  for (const auto& in : g.input()) {
    if (graph_.tensors.count(in.name())) continue;  // an initializer (IR < 4 lists them as inputs)
    real_inputs.insert(in.name());
  }
  for (const auto& [name, shape] : options_.input_shapes) {
    if (!real_inputs.count(name)) {
      std::string names;
      for (const std::string& n : real_inputs) names += (names.empty() ? "" : ", ") + n;
      return Error(absl::StrCat("--input ", name, "=", ShapeText(shape), ": the model has no input named '", name,
                                "' (its inputs: ", names, ")"));
    }
  }
  for (const auto& in : g.input()) {
    if (!real_inputs.count(in.name())) continue;
    Tensor t;
    t.name = in.name();
    if (!in.type().has_tensor_type()) return Error(absl::StrCat("input '", in.name(), "' is not a tensor"));
    const auto& tt = in.type().tensor_type();
    bool ok;
    t.dtype = DType::kFloat32;
    switch (tt.elem_type()) {
      case onnx::TensorProto::FLOAT: t.dtype = DType::kFloat32; ok = true; break;
      case onnx::TensorProto::INT64: t.dtype = DType::kInt64; ok = true; break;
      case onnx::TensorProto::BOOL: t.dtype = DType::kBool; ok = true; break;
      default: ok = false;
    }
    if (!ok) {
      return Error(absl::StrCat("input '", in.name(), "' has ONNX element type ", tt.elem_type(),
                                "; tune reads float32, int64 and bool inputs"));
    }
    auto given = options_.input_shapes.find(in.name());
    if (given != options_.input_shapes.end()) {
      if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(given->second.size())) {
        return Error(absl::StrCat("--input ", in.name(), "=", ShapeText(given->second), ": the input has rank ",
                                  tt.shape().dim_size()));
      }
      t.shape = given->second;
    } else {
      if (!tt.has_shape()) {
        return Error(absl::StrCat("input '", in.name(), "' has no shape; fix it with --input ", in.name(), "=1x..."));
      }
      std::string example;
      std::string problem;
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        const bool known = d.has_dim_value() && d.dim_value() > 0;
        absl::StrAppend(&example, i ? "x" : "", known ? d.dim_value() : 1);
        if (known) {
          t.shape.push_back(d.dim_value());
        } else if (problem.empty()) {
          problem = d.has_dim_param() && !d.dim_param().empty()
                        ? absl::StrCat("a symbolic dimension '", d.dim_param(), "'")
                        : absl::StrCat("an unknown dimension ", i);
        }
      }
      if (!problem.empty()) {
        return Error(absl::StrCat("input '", in.name(), "' has ", problem, "; fix it with --input ", in.name(), "=",
                                  example));
      }
    }
    if (absl::Status st = CheckShape(t.shape); !st.ok()) {
      return Error(absl::StrCat("input '", in.name(), "': ", st.message()));
    }
    if (std::find(graph_.inputs.begin(), graph_.inputs.end(), t.name) != graph_.inputs.end()) {
      return Error(absl::StrCat("input '", in.name(), "' is listed twice"));
    }
    graph_.inputs.push_back(t.name);
    graph_.tensors[t.name] = std::move(t);
  }
  return absl::OkStatus();
}

absl::Status Importer::ReadNodes(const onnx::GraphProto& g) {
  int index = 0;
  std::set<std::string> graph_outputs;
  for (const auto& o : g.output()) graph_outputs.insert(o.name());
  for (const auto& proto : g.node()) {
    Node node;
    node.name = proto.name().empty() ? absl::StrCat(proto.op_type(), "_", index) : proto.name();
    ++index;
    node.op = proto.op_type();
    const std::string where = absl::StrCat("node '", node.name, "' (", node.op, ")");
    if (!proto.domain().empty() && proto.domain() != "ai.onnx") {
      return Error(absl::StrCat(where, " is an op of domain '", proto.domain(),
                                "'; tune imports only the default ONNX domain"));
    }
    for (const auto& a : proto.attribute()) {
      Attribute value;
      if (absl::Status st = ReadAttribute(a, where, &value); !st.ok()) return st;
      node.attributes[a.name()] = std::move(value);
    }
    for (const std::string& in : proto.input()) {
      const std::string name = Resolve(in);
      if (!name.empty() && !graph_.tensors.count(name)) {
        return Error(absl::StrCat(where, " reads tensor '", in,
                                  "' that no earlier node, input or initializer defines (malformed or truncated file)"));
      }
      node.inputs.push_back(name);
    }
    node.outputs.assign(proto.output().begin(), proto.output().end());
    while (!node.outputs.empty() && node.outputs.back().empty()) node.outputs.pop_back();
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const std::string& out = node.outputs[i];
      if (!out.empty() && (graph_.tensors.count(out) || alias_.count(out) ||
                           std::find(node.outputs.begin(), node.outputs.begin() + i, out) != node.outputs.begin() + i)) {
        return Error(absl::StrCat(where, " writes tensor '", out, "' that is already defined"));
      }
    }
    if (node.outputs.empty()) continue;
    if (node.outputs[0].empty() && (node.op == "Constant" || node.op == "Identity" || node.op == "Dropout")) {
      return Error(where + " has no name for its first output");
    }
    if (node.op == "Constant") {
      Tensor t;
      const std::string& out = node.outputs[0];
      if (const auto it = node.attributes.find("value"); it != node.attributes.end() && std::holds_alternative<Tensor>(it->second)) {
        t = std::get<Tensor>(it->second);
      } else if (HasAttr(node, "value_float")) {
        t = MakeF32(out, {}, {AttrFloat(node, "value_float", 0)});
      } else if (const auto* v = HasAttr(node, "value_floats")
                                     ? std::get_if<std::vector<float>>(&node.attributes.at("value_floats"))
                                     : nullptr) {
        t = MakeF32(out, {static_cast<int64_t>(v->size())}, *v);
      } else if (HasAttr(node, "value_int")) {
        t = MakeI64(out, {}, {AttrInt(node, "value_int", 0)});
      } else if (HasAttr(node, "value_ints")) {
        const auto v = AttrInts(node, "value_ints");
        t = MakeI64(out, {static_cast<int64_t>(v.size())}, v);
      } else {
        return Error(where + " has no value tune reads (value, value_float(s), value_int(s))");
      }
      t.name = out;
      graph_.tensors[out] = std::move(t);
      continue;
    }
    // Identity and Dropout (inference) are aliases of their input, unless they name a graph
    // output, which keeps its name through a built-in Identity node.
    if ((node.op == "Identity" || node.op == "Dropout") && !node.inputs.empty() && !node.inputs[0].empty() &&
        !graph_outputs.count(node.outputs[0])) {
      bool mask_used = false;
      if (node.outputs.size() > 1) {
        // Dropout's mask: all true in inference; folded as a constant below if read.
        mask_used = true;
      }
      alias_[node.outputs[0]] = node.inputs[0];
      if (!mask_used) continue;
      node.outputs[0] = "";
    }
    if (node.op == "Dropout" && graph_outputs.count(node.outputs[0])) node.op = "Identity";
    std::vector<const Tensor*> in;
    for (const std::string& name : node.inputs) in.push_back(name.empty() ? nullptr : &graph_.tensors.at(name));
    std::vector<Tensor> outs;
    if (node.op == "Dropout" && !in.empty() && in[0] != nullptr && node.outputs.size() > 1 && node.outputs[0].empty()) {
      // Only the mask is left (its data output is an alias): a constant of trues.
      const Tensor& x = *in[0];
      if (x.NumElements() > kMaxFoldElements) {
        return Error(absl::StrCat(where, ": its mask over ", ShapeText(x.shape), " is read; tune folds masks of at most 2^22 elements"));
      }
      Tensor mask{node.outputs[1], DType::kBool, x.shape, std::vector<uint8_t>(x.NumElements(), 1)};
      graph_.tensors[mask.name] = std::move(mask);
      continue;
    }
    if (absl::Status st = InferNode(node, graph_.opset, in, &outs); !st.ok()) return Error(std::string(st.message()));
    for (size_t i = 0; i < outs.size() && i < node.outputs.size(); ++i) {
      if (node.outputs[i].empty()) continue;
      if (absl::Status st = CheckShape(outs[i].shape); !st.ok()) {
        return Error(absl::StrCat(where, ": output '", node.outputs[i], "' of ", st.message()));
      }
    }
    bool all_constant = true;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (node.outputs[i].empty()) continue;
      if (!outs[i].constant()) all_constant = false;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!node.outputs[i].empty()) graph_.tensors[node.outputs[i]] = std::move(outs[i]);
    }
    if (all_constant) continue;  // folded: its outputs are constants
    graph_.nodes.push_back(std::move(node));
  }
  for (const auto& o : g.output()) {
    const std::string name = Resolve(o.name());
    if (!graph_.tensors.count(name)) {
      return Error(absl::StrCat("graph output '", o.name(), "' is not computed by any node (malformed or truncated file)"));
    }
    graph_.outputs.push_back(name);
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> Importer::Run(const std::string& bytes) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    return Error("not a readable ONNX model (malformed or truncated protobuf)");
  }
  if (!model.has_graph() || model.ir_version() <= 0 || model.opset_import_size() == 0) {
    return Error("not a readable ONNX model (no graph, IR version or opset; malformed or truncated file)");
  }
  const onnx::GraphProto& g = model.graph();
  graph_.name = g.name().empty() ? path_ : g.name();
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") graph_.opset = op.version();
  }
  if (graph_.opset < kMinOpset || graph_.opset > kMaxOpset) {
    return Error(absl::StrCat("opset ", graph_.opset, " of the default ONNX domain is not supported (tune imports opsets ",
                              kMinOpset, " to ", kMaxOpset, "); convert the model with onnx.version_converter"));
  }
  if (g.node_size() == 0 || g.output_size() == 0) return Error("the model's graph has no nodes or no outputs");
  for (const auto& init : g.initializer()) {
    Tensor t;
    if (absl::Status st = ReadTensor(init, init.name(), &t); !st.ok()) return st;
    graph_.tensors[init.name()] = std::move(t);
  }
  for (const auto& sparse : g.sparse_initializer()) {
    return Error(absl::StrCat("sparse initializer '", sparse.values().name(), "' is not supported"));
  }
  if (absl::Status st = ReadInputs(g); !st.ok()) return st;
  if (absl::Status st = ReadNodes(g); !st.ok()) return st;
  if (absl::Status st = FoldBatchNorms(graph_); !st.ok()) return Error(std::string(st.message()));
  if (absl::Status st = BindTunedNodes(graph_); !st.ok()) return Error(std::string(st.message()));
  RemoveDeadNodes(graph_);
  return std::move(graph_);
}

}  // namespace

absl::Status ParseInputShape(const std::string& text, ImportOptions* options) {
  auto bad = [&] {
    return absl::InvalidArgumentError("--input '" + text + "': expected NAME=D1xD2x... with positive extents, e.g. input=1x3x224x224");
  };
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return bad();
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(text.substr(eq + 1), 'x')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v < 1 || v > (int64_t{1} << 31)) return bad();
    shape.push_back(v);
  }
  options->input_shapes[text.substr(0, eq)] = shape;
  return absl::OkStatus();
}

absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& path, const ImportOptions& options) {
  Importer importer(path, options);
  return importer.Run(bytes);
}

absl::StatusOr<Graph> ImportOnnx(const std::string& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read ONNX model '" + path + "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return absl::NotFoundError("cannot read ONNX model '" + path + "'");
  return ImportOnnxBytes(bytes.str(), path, options);
}

bool LooksLikeOnnx(const std::string& bytes) {
  // A ModelProto starts with field 1 (ir_version, varint: 0x08) in every exporter's output;
  // a JSON model file starts with '{' or white space.
  size_t i = 0;
  while (i < bytes.size() && (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\t' || bytes[i] == '\r')) ++i;
  if (i < bytes.size() && (bytes[i] == '{' || bytes[i] == '[')) return false;
  return !bytes.empty() && bytes[0] == 0x08;
}

}  // namespace tune::graph
