// PlanBlockedLayout: NCHWc convolutions (each in its ConvLayoutBlock), blocked elementwise ops
// and the layout transforms and re-blockings between them, decided in one pass over a bound graph.
#include "graph/layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/fuse.h"

namespace tune::graph {
namespace {

/// Unary float ops whose output element depends only on the same input element.
bool UnaryElementwise(const std::string& op) {
  static const std::set<std::string>* ops = new std::set<std::string>{
      "Relu", "Clip", "Sigmoid", "Tanh", "Erf", "Gelu", "HardSigmoid", "HardSwish", "Sqrt", "Exp", "Neg"};
  return ops->count(op) > 0;
}

bool BinaryElementwise(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

std::string UniqueName(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 2; g.tensors.count(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

class LayoutPlanner {
 public:
  LayoutPlanner(Graph& g, int64_t lanes) : g_(g), lanes_(lanes) {}

  void Run() {
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& node : nodes) {
      const int64_t conv_block = node.task.has_value() ? ConvLayoutBlock(node.task->workload, lanes_) : 0;
      if (conv_block > 0) {
        BlockConv(node, conv_block);
      } else if (BlockableElementwise(node)) {
        BlockElementwise(node);
      } else {
        for (const std::string& in : node.inputs) NeedNchw(in);
      }
      g_.nodes.push_back(std::move(node));
    }
    for (const std::string& out : g_.outputs) NeedNchw(out);
    RemoveDeadNodes(g_);
  }

 private:
  static std::string Suffix(int64_t block) { return absl::StrCat("nchw", block, "c"); }

  /// True when `name` is a float activation [N,C,H,W].
  bool Activation(const std::string& name) const {
    const Tensor* t = g_.Find(name);
    return t != nullptr && !t->constant() && t->dtype == DType::kFloat32 && t->shape.size() == 4;
  }

  /// A new twin of the NCHW tensor `name` in blocks of `block` (not yet produced).
  std::string NewTwin(const std::string& name, int64_t block) {
    const Tensor& nchw = g_.tensors.at(name);
    Tensor t;
    t.name = UniqueName(g_, absl::StrCat(name, "/", Suffix(block)));
    t.dtype = nchw.dtype;
    t.shape = {nchw.shape[0], nchw.shape[1] / block, nchw.shape[2], nchw.shape[3], block};
    const std::string twin = t.name;
    g_.tensors[twin] = std::move(t);
    twins_[name][block] = twin;
    return twin;
  }

  /// The block `name` is read in by default: its producer's, or its largest twin's.
  int64_t HomeBlock(const std::string& name) const {
    if (auto it = producer_block_.find(name); it != producer_block_.end()) return it->second;
    return twins_.at(name).rbegin()->first;
  }

  /// The twin of `name` in blocks of `block`; when it has none yet, a Reblock node makes it from
  /// the producer's twin, or a ToBlocked node from the NCHW tensor when the producer writes that.
  std::string TwinOf(const std::string& name, int64_t block) {
    if (auto it = twins_.find(name); it != twins_.end()) {
      if (auto b = it->second.find(block); b != it->second.end()) return b->second;
    }
    Node to;
    if (auto it = producer_block_.find(name); it != producer_block_.end()) {
      const int64_t from = it->second;
      to.name = absl::StrCat(name, "/", Suffix(from), "_to_", Suffix(block));
      to.op = kReblockOp;
      to.inputs = {twins_.at(name).at(from)};
      to.attributes["from"] = from;
      to.attributes["to"] = block;
    } else {
      to.name = absl::StrCat(name, "/to_", Suffix(block));
      to.op = kToBlockedOp;
      to.inputs = {name};
      to.attributes["block"] = block;
    }
    to.fused = {to.op};
    const std::string twin = NewTwin(name, block);
    to.outputs = {twin};
    g_.nodes.push_back(std::move(to));
    return twin;
  }

  /// Makes the NCHW tensor `name` available (a ToNchw node from its producer's twin) when only
  /// that twin is produced so far.
  void NeedNchw(const std::string& name) {
    if (name.empty() || !twin_only_.count(name)) return;
    const int64_t block = producer_block_.at(name);
    Node to;
    to.name = absl::StrCat(name, "/to_nchw");
    to.op = kToNchwOp;
    to.inputs = {twins_.at(name).at(block)};
    to.outputs = {name};
    to.attributes["block"] = block;
    to.fused = {kToNchwOp};
    g_.nodes.push_back(std::move(to));
    twin_only_.erase(name);
  }

  /// Its output now the twin of `name` in blocks of `block`: a new tensor, and `name` no longer
  /// produced.
  std::string OutputTwin(const std::string& name, int64_t block) {
    const std::string twin = NewTwin(name, block);
    producer_block_[name] = block;
    twin_only_.insert(name);
    return twin;
  }

  void BlockConv(Node& node, int64_t block) {
    TaskBinding& task = *node.task;
    const std::string in = task.args.front(), out = task.args.back();
    task.workload = BlockedConv(task.workload, block);
    task.args.front() = TwinOf(in, block);
    task.args.back() = OutputTwin(out, block);
    node.inputs.assign(task.args.begin(), task.args.end() - 1);
    node.outputs = {task.args.back()};
  }

  /// How many of `node`'s inputs are activations (the rest: Clip's bounds).
  size_t ActivationInputs(const Node& node) const { return UnaryElementwise(node.op) ? 1 : 2; }

  /// A layout-agnostic float op whose every activation input has a twin of the same shape.
  bool BlockableElementwise(const Node& node) const {
    if (node.task.has_value() || node.outputs.size() != 1 || !Activation(node.outputs[0])) return false;
    const std::vector<int64_t>& shape = g_.tensors.at(node.outputs[0]).shape;
    auto blocked_input = [&](const std::string& name) {
      return twins_.count(name) && g_.tensors.at(name).shape == shape;
    };
    if (UnaryElementwise(node.op)) {
      if (node.inputs.empty() || !blocked_input(node.inputs[0])) return false;
      // Clip's bounds: absent or constant scalars. Other unary ops take one input.
      for (size_t i = 1; i < node.inputs.size(); ++i) {
        if (node.op != "Clip") return false;
        if (node.inputs[i].empty()) continue;
        const Tensor* bound = g_.Find(node.inputs[i]);
        if (bound == nullptr || !bound->constant() || bound->NumElements() != 1) return false;
      }
      return true;
    }
    if (BinaryElementwise(node.op)) {
      return node.inputs.size() == 2 && blocked_input(node.inputs[0]) && blocked_input(node.inputs[1]);
    }
    return false;
  }

  /// The block an elementwise op runs in: the largest block every activation input has a twin
  /// of already, else the largest of the inputs' home blocks. (Inputs and output share one
  /// shape, so any input's block divides every input's channels.)
  int64_t ElementwiseBlock(const Node& node) const {
    const size_t activations = ActivationInputs(node);
    for (auto b = twins_.at(node.inputs[0]).rbegin(); b != twins_.at(node.inputs[0]).rend(); ++b) {
      bool everyone = true;
      for (size_t i = 1; i < activations; ++i) everyone = everyone && twins_.at(node.inputs[i]).count(b->first);
      if (everyone) return b->first;
    }
    int64_t block = 0;
    for (size_t i = 0; i < activations; ++i) block = std::max(block, HomeBlock(node.inputs[i]));
    return block;
  }

  void BlockElementwise(Node& node) {
    const int64_t block = ElementwiseBlock(node);
    for (size_t i = 0; i < ActivationInputs(node); ++i) node.inputs[i] = TwinOf(node.inputs[i], block);
    node.outputs[0] = OutputTwin(node.outputs[0], block);
  }

  Graph& g_;
  const int64_t lanes_;
  std::map<std::string, std::map<int64_t, std::string>> twins_;  // NCHW tensor -> block -> its twin
  std::map<std::string, int64_t> producer_block_;  // NCHW tensors whose producer writes a twin: its block
  std::set<std::string> twin_only_;                // NCHW tensors whose producer now writes the twin only
};

}  // namespace

bool BlockableConv(const codegen::Workload& w, int64_t block) {
  return w.op == codegen::OpKind::kConv2d && w.layout_block == 0 && block > 0 && (w.groups == 1 || w.depthwise()) &&
         w.in_c % block == 0 && w.out_c % block == 0 && BlockedConv(w, block).Validate().ok();
}

codegen::Workload BlockedConv(const codegen::Workload& workload, int64_t block) {
  codegen::Workload w = workload;
  w.layout_block = block;
  return w;
}

std::vector<int64_t> LayoutBlocks(int64_t lanes) {
  std::vector<int64_t> blocks;
  if (lanes <= 0) return blocks;
  blocks.push_back(lanes);
  if (lanes % 2 == 0 && lanes / 2 >= 4) blocks.push_back(lanes / 2);
  return blocks;
}

int64_t ConvLayoutBlock(const codegen::Workload& workload, int64_t lanes) {
  for (int64_t block : LayoutBlocks(lanes)) {
    if (BlockableConv(workload, block)) return block;
  }
  return 0;
}

absl::Status PlanBlockedLayout(Graph& graph, int64_t lanes) {
  if (lanes < 1 || lanes > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("the NCHWc vector lanes must be 1..1024, got ", lanes));
  }
  LayoutPlanner(graph, lanes).Run();
  return absl::OkStatus();
}

}  // namespace tune::graph
