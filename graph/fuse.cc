// BatchNormalization folding, tuned-node binding and dead-node removal on an imported Graph.
#include "graph/fuse.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "graph/ops.h"

namespace tune::graph {
namespace {

/// Which nodes read each tensor (by index into graph.nodes), and the graph's outputs.
struct Uses {
  std::map<std::string, std::vector<size_t>> readers;
  std::set<std::string> outputs;

  explicit Uses(const Graph& graph) : outputs(graph.outputs.begin(), graph.outputs.end()) {
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      for (const std::string& in : graph.nodes[i].inputs) {
        if (!in.empty()) readers[in].push_back(i);
      }
    }
  }
  /// The one node reading `name` when nothing else (no other node, no graph output) does.
  std::optional<size_t> OnlyReader(const std::string& name) const {
    if (outputs.count(name)) return std::nullopt;
    auto it = readers.find(name);
    if (it == readers.end() || it->second.size() != 1) return std::nullopt;
    return it->second[0];
  }
};

bool IsConstant(const Graph& g, const std::string& name) {
  const Tensor* t = g.Find(name);
  return t && t->constant();
}

std::string UniqueName(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 2; g.tensors.count(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

/// The epilogue a node is: 1 = relu (Relu, Clip(0, +inf)), 2 = relu6 (Clip(0, 6)), 0 = none.
int EpilogueKind(const Graph& g, const Node& node) {
  if (node.op == "Relu") return 1;
  if (node.op != "Clip") return 0;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (g.opset < 11) {
    lo = AttrFloat(node, "min", lo);
    hi = AttrFloat(node, "max", hi);
  } else {
    for (size_t i : {1, 2}) {
      if (i >= node.inputs.size() || node.inputs[i].empty()) continue;
      const Tensor* t = g.Find(node.inputs[i]);
      if (!t || !t->constant() || t->NumElements() != 1) return 0;
      (i == 1 ? lo : hi) = ConstF32(*t)[0];
    }
  }
  if (lo != 0) return 0;
  if (hi == 6) return 2;
  if (std::isinf(hi) && hi > 0) return 1;
  return 0;
}

/// Binds a tuned node's epilogue: a following Relu / Clip(0, 6) that is the only reader of
/// `*out`; updates `*out`, the workload and `fused`, and marks the epilogue node removed.
void BindEpilogue(const Graph& g, const Uses& uses, std::vector<bool>& removed, std::string* out,
                  codegen::Workload* w, std::vector<std::string>* fused) {
  auto reader = uses.OnlyReader(*out);
  if (!reader) return;
  const Node& next = g.nodes[*reader];
  const int kind = EpilogueKind(g, next);
  if (kind == 0 || next.outputs.size() != 1) return;
  w->relu = kind == 1;
  w->relu6 = kind == 2;
  fused->push_back(next.op);
  *out = next.outputs[0];
  removed[*reader] = true;
}

absl::Status Untunable(const Node& node) {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", node.op,
                                                 "): only 2-D convolutions with constant weights are tuned"));
}

/// Makes `node` the tuned node of `w` with kernel tensors `args` (inputs, then the output).
void MakeTask(Node& node, const codegen::Workload& w, std::vector<std::string> args, std::vector<std::string> fused) {
  node.op = "tune.Task";
  node.outputs = {args.back()};
  node.inputs.assign(args.begin(), args.end() - 1);
  node.attributes.clear();
  node.fused = std::move(fused);
  node.task = TaskBinding{w, std::move(args)};
}

}  // namespace

absl::Status FoldBatchNorms(Graph& g) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.outputs.size() != 1 || bn.inputs.size() != 5 ||
        AttrInt(bn, "training_mode", 0) != 0) {
      continue;
    }
    bool params_constant = true;
    for (size_t k = 1; k < 5; ++k) params_constant = params_constant && IsConstant(g, bn.inputs[k]);
    if (!params_constant) continue;
    auto reader = uses.OnlyReader(bn.inputs[0]);
    if (!reader || *reader != i) continue;
    size_t j = i;  // the conv producing the BN input
    for (size_t k = 0; k < i; ++k) {
      if (!removed[k] && g.nodes[k].outputs.size() == 1 && g.nodes[k].outputs[0] == bn.inputs[0]) j = k;
    }
    if (j == i) continue;
    Node& conv = g.nodes[j];
    if (conv.op != "Conv" || conv.inputs.size() < 2 || !IsConstant(g, conv.inputs[1])) continue;
    const bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
    if (has_bias && !IsConstant(g, conv.inputs[2])) continue;
    const Tensor& w = g.tensors.at(conv.inputs[1]);
    if (w.dtype != DType::kFloat32 || w.shape.empty()) continue;
    const int64_t oc = w.shape[0], per = w.NumElements() / std::max<int64_t>(oc, 1);
    std::vector<float> scale = ConstF32(g.tensors.at(bn.inputs[1])), beta = ConstF32(g.tensors.at(bn.inputs[2])),
                       mean = ConstF32(g.tensors.at(bn.inputs[3])), var = ConstF32(g.tensors.at(bn.inputs[4]));
    if (static_cast<int64_t>(scale.size()) != oc || static_cast<int64_t>(beta.size()) != oc ||
        static_cast<int64_t>(mean.size()) != oc || static_cast<int64_t>(var.size()) != oc) {
      continue;
    }
    std::vector<float> bias(oc, 0.0f);
    if (has_bias) bias = ConstF32(g.tensors.at(conv.inputs[2]));
    const double eps = AttrFloat(bn, "epsilon", 1e-5f);
    std::vector<float> weight = ConstF32(w), new_bias(oc);
    for (int64_t c = 0; c < oc; ++c) {
      const double s = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      for (int64_t e = 0; e < per; ++e) weight[c * per + e] = static_cast<float>(weight[c * per + e] * s);
      new_bias[c] = static_cast<float>((bias[c] - static_cast<double>(mean[c])) * s + beta[c]);
    }
    const std::string wname = UniqueName(g, conv.name + "/bn_folded_weight");
    g.tensors[wname] = MakeF32(wname, w.shape, weight);
    const std::string bname = UniqueName(g, conv.name + "/bn_folded_bias");
    g.tensors[bname] = MakeF32(bname, {oc}, new_bias);
    conv.inputs.resize(3);
    conv.inputs[1] = wname;
    conv.inputs[2] = bname;
    g.tensors.erase(conv.outputs[0]);
    conv.outputs[0] = bn.outputs[0];
    conv.fused = {"Conv", "BatchNormalization"};
    removed[i] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  return absl::OkStatus();
}

absl::Status BindTunedNodes(Graph& g) {
  Uses uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, Node> pads_before;  // node index -> the Pad node to insert before it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (removed[i]) continue;
    Node& node = g.nodes[i];
    std::vector<std::string> fused = node.fused.empty() ? std::vector<std::string>{node.op} : node.fused;
    if (node.op == "Conv") {
      const Tensor* x = g.Find(node.inputs[0]);
      const Tensor* w = node.inputs.size() > 1 ? g.Find(node.inputs[1]) : nullptr;
      if (!x || !w || !w->constant() || x->shape.size() != 4 || w->shape.size() != 4) return Untunable(node);
      codegen::Workload wl;
      wl.op = codegen::OpKind::kConv2d;
      wl.batch = x->shape[0];
      wl.in_c = x->shape[1];
      wl.in_h = x->shape[2];
      wl.in_w = x->shape[3];
      wl.out_c = w->shape[0];
      wl.kernel_h = w->shape[2];
      wl.kernel_w = w->shape[3];
      std::vector<int64_t> strides = AttrInts(node, "strides", {1, 1}), dil = AttrInts(node, "dilations", {1, 1});
      wl.stride_h = strides[0];
      wl.stride_w = strides[1];
      wl.dilation_h = dil[0];
      wl.dilation_w = dil[1];
      wl.groups = AttrInt(node, "group", 1);
      // Pads per axis (begin, end), from pads or auto_pad.
      std::vector<int64_t> pads = AttrInts(node, "pads", {0, 0, 0, 0});
      const std::string auto_pad = AttrString(node, "auto_pad", "NOTSET");
      int64_t begin[2] = {pads[0], pads[1]}, end[2] = {pads[2], pads[3]};
      if (auto_pad == "VALID") {
        begin[0] = begin[1] = end[0] = end[1] = 0;
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const int64_t in[2] = {wl.in_h, wl.in_w}, k[2] = {wl.kernel_h, wl.kernel_w};
        for (int a = 0; a < 2; ++a) {
          const int64_t out = (in[a] + strides[a] - 1) / strides[a];
          const int64_t total = std::max<int64_t>((out - 1) * strides[a] + (k[a] - 1) * dil[a] + 1 - in[a], 0);
          const int64_t small = total / 2;
          begin[a] = auto_pad == "SAME_UPPER" ? small : total - small;
          end[a] = total - begin[a];
        }
      }
      const int64_t sym_h = std::min(begin[0], end[0]), sym_w = std::min(begin[1], end[1]);
      wl.pad_h = sym_h;
      wl.pad_w = sym_w;
      std::string data = node.inputs[0];
      if (begin[0] != end[0] || begin[1] != end[1]) {
        // The asymmetric remainder as an explicit zero Pad (ONNX Pad, pads as an input).
        Node pad;
        pad.name = node.name + "/pad";
        pad.op = "Pad";
        const std::string pads_name = UniqueName(g, node.name + "/pads");
        g.tensors[pads_name] =
            MakeI64(pads_name, {8}, {0, 0, begin[0] - sym_h, begin[1] - sym_w, 0, 0, end[0] - sym_h, end[1] - sym_w});
        const std::string padded = UniqueName(g, node.name + "/padded");
        Tensor t = *x;
        t.name = padded;
        t.data.reset();  // computed by the Pad node at run time, even from a constant input
        t.shape[2] += begin[0] + end[0] - 2 * sym_h;
        t.shape[3] += begin[1] + end[1] - 2 * sym_w;
        wl.in_h = t.shape[2];
        wl.in_w = t.shape[3];
        g.tensors[padded] = t;
        pad.inputs = {data, pads_name};
        pad.outputs = {padded};
        pad.attributes["mode"] = std::string("constant");
        pad.fused = {"Pad"};
        data = padded;
        pads_before[i] = std::move(pad);
      }
      std::vector<std::string> args = {data, node.inputs[1]};
      if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
        wl.bias = true;
        args.push_back(node.inputs[2]);
      }
      std::string out = node.outputs[0];
      BindEpilogue(g, uses, removed, &out, &wl, &fused);
      if (absl::Status st = wl.Validate(); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (Conv): ", st.message()));
      }
      args.push_back(out);
      MakeTask(node, wl, std::move(args), std::move(fused));
      continue;
    }
    if (node.op == "Gemm") {
      const Tensor* a = g.Find(node.inputs[0]);
      const Tensor* b = g.Find(node.inputs[1]);
      if (AttrFloat(node, "alpha", 1) != 1 || AttrFloat(node, "beta", 1) != 1 || AttrInt(node, "transA", 0) != 0) continue;
      const bool tb = AttrInt(node, "transB", 0);
      codegen::Workload wl;
      wl.op = tb ? codegen::OpKind::kDense : codegen::OpKind::kMatmul;
      wl.m = a->shape[0];
      wl.k = a->shape[1];
      wl.n = tb ? b->shape[0] : b->shape[1];
      std::vector<std::string> args = {node.inputs[0], node.inputs[1]};
      if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
        const Tensor* c = g.Find(node.inputs[2]);
        const bool bias_shape = (c->shape.size() == 1 && c->shape[0] == wl.n) ||
                                (c->shape.size() == 2 && c->shape[0] == 1 && c->shape[1] == wl.n);
        if (!bias_shape) continue;  // a full C matrix: a built-in Gemm
        wl.bias = true;
        args.push_back(node.inputs[2]);
      }
      std::string out = node.outputs[0];
      BindEpilogue(g, uses, removed, &out, &wl, &fused);
      if (!wl.Validate().ok()) continue;
      args.push_back(out);
      MakeTask(node, wl, std::move(args), std::move(fused));
      continue;
    }
    if (node.op == "MatMul") {
      const Tensor* a = g.Find(node.inputs[0]);
      const Tensor* b = g.Find(node.inputs[1]);
      const size_t ra = a->shape.size(), rb = b->shape.size();
      codegen::Workload wl;
      if (ra >= 2 && rb == 2) {
        wl.op = codegen::OpKind::kMatmul;
        wl.m = 1;
        for (size_t d = 0; d + 1 < ra; ++d) wl.m *= a->shape[d];
        wl.k = a->shape[ra - 1];
        wl.n = b->shape[1];
      } else if (ra >= 3 && ra == rb &&
                 std::equal(a->shape.begin(), a->shape.end() - 2, b->shape.begin())) {
        wl.op = codegen::OpKind::kBatchMatmul;
        wl.batch = 1;
        for (size_t d = 0; d + 2 < ra; ++d) wl.batch *= a->shape[d];
        wl.m = a->shape[ra - 2];
        wl.k = a->shape[ra - 1];
        wl.n = b->shape[rb - 1];
      } else {
        continue;  // a broadcast MatMul: built-in
      }
      std::vector<std::string> args = {node.inputs[0], node.inputs[1]};
      std::string out = node.outputs[0];
      if (auto reader = uses.OnlyReader(out); reader && g.nodes[*reader].op == "Add" && !removed[*reader]) {
        const Node& add = g.nodes[*reader];
        const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
        const Tensor* c = g.Find(other);
        const Tensor* sum = g.Find(add.outputs[0]);
        bool bias_shape = c && c->constant() && !c->shape.empty() && c->shape.back() == wl.n &&
                          c->NumElements() == wl.n && c->shape.size() <= g.Find(out)->shape.size() &&
                          sum && sum->shape == g.Find(out)->shape && add.inputs[0] != add.inputs[1];
        if (bias_shape) {
          wl.bias = true;
          args.push_back(other);
          fused.push_back("Add");
          out = add.outputs[0];
          removed[*reader] = true;
        }
      }
      BindEpilogue(g, uses, removed, &out, &wl, &fused);
      if (!wl.Validate().ok()) continue;
      args.push_back(out);
      MakeTask(node, wl, std::move(args), std::move(fused));
      continue;
    }
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (removed[i]) continue;
    if (auto it = pads_before.find(i); it != pads_before.end()) kept.push_back(std::move(it->second));
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  return absl::OkStatus();
}

void RemoveDeadNodes(Graph& g) {
  std::set<std::string> needed(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    for (const std::string& out : g.nodes[i].outputs) keep[i] = keep[i] || needed.count(out);
    if (!keep[i]) continue;
    for (const std::string& in : g.nodes[i].inputs) needed.insert(in);
  }
  std::vector<Node> kept;
  std::set<std::string> names(g.inputs.begin(), g.inputs.end());
  names.insert(g.outputs.begin(), g.outputs.end());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep[i]) continue;
    names.insert(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end());
    names.insert(g.nodes[i].outputs.begin(), g.nodes[i].outputs.end());
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (auto it = g.tensors.begin(); it != g.tensors.end();) {
    it = names.count(it->first) ? std::next(it) : g.tensors.erase(it);
  }
}

}  // namespace tune::graph
