// PlanBlockedLayout: NCHWc convolutions, blocked elementwise ops and the layout transforms
// between them, decided in one pass over a bound graph.
#include "graph/layout.h"

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
  LayoutPlanner(Graph& g, int64_t block) : g_(g), block_(block), suffix_(absl::StrCat("nchw", block, "c")) {}

  void Run() {
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& node : nodes) {
      if (node.task.has_value() && BlockableConv(node.task->workload, block_)) {
        BlockConv(node);
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
  /// True when `name` is a float activation [N,C,H,W] with C divisible by the block.
  bool CanHaveTwin(const std::string& name) const {
    const Tensor* t = g_.Find(name);
    return t != nullptr && !t->constant() && t->dtype == DType::kFloat32 && t->shape.size() == 4 &&
           t->shape[1] % block_ == 0;
  }

  /// A new blocked tensor, the twin of the NCHW tensor `name` (not yet produced).
  std::string NewTwin(const std::string& name) {
    const Tensor& nchw = g_.tensors.at(name);
    Tensor t;
    t.name = UniqueName(g_, absl::StrCat(name, "/", suffix_));
    t.dtype = nchw.dtype;
    t.shape = {nchw.shape[0], nchw.shape[1] / block_, nchw.shape[2], nchw.shape[3], block_};
    const std::string twin = t.name;
    g_.tensors[twin] = std::move(t);
    twin_[name] = twin;
    return twin;
  }

  /// The twin of `name`, made by a ToBlocked node when it has none yet.
  std::string TwinOf(const std::string& name) {
    if (auto it = twin_.find(name); it != twin_.end()) return it->second;
    const std::string twin = NewTwin(name);
    Node to;
    to.name = absl::StrCat(name, "/to_", suffix_);
    to.op = kToBlockedOp;
    to.inputs = {name};
    to.outputs = {twin};
    to.attributes["block"] = block_;
    to.fused = {kToBlockedOp};
    g_.nodes.push_back(std::move(to));
    return twin;
  }

  /// Makes the NCHW tensor `name` available (a ToNchw node from its twin) when only its twin is
  /// produced so far.
  void NeedNchw(const std::string& name) {
    if (name.empty() || !twin_only_.count(name)) return;
    Node to;
    to.name = absl::StrCat(name, "/to_nchw");
    to.op = kToNchwOp;
    to.inputs = {twin_.at(name)};
    to.outputs = {name};
    to.attributes["block"] = block_;
    to.fused = {kToNchwOp};
    g_.nodes.push_back(std::move(to));
    twin_only_.erase(name);
  }

  /// Its output now the twin of `name`: a new tensor, and `name` no longer produced.
  std::string OutputTwin(const std::string& name) {
    const std::string twin = NewTwin(name);
    twin_only_.insert(name);
    return twin;
  }

  void BlockConv(Node& node) {
    TaskBinding& task = *node.task;
    const std::string in = task.args.front(), out = task.args.back();
    task.workload = BlockedConv(task.workload, block_);
    task.args.front() = TwinOf(in);
    task.args.back() = OutputTwin(out);
    node.inputs.assign(task.args.begin(), task.args.end() - 1);
    node.outputs = {task.args.back()};
  }

  /// A layout-agnostic float op whose every activation input has a twin of the same shape.
  bool BlockableElementwise(const Node& node) const {
    if (node.task.has_value() || node.outputs.size() != 1 || !CanHaveTwin(node.outputs[0])) return false;
    const std::vector<int64_t>& shape = g_.tensors.at(node.outputs[0]).shape;
    auto blocked_input = [&](const std::string& name) {
      return twin_.count(name) && g_.tensors.at(name).shape == shape;
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

  void BlockElementwise(Node& node) {
    const size_t activations = UnaryElementwise(node.op) ? 1 : 2;
    for (size_t i = 0; i < activations; ++i) node.inputs[i] = twin_.at(node.inputs[i]);
    node.outputs[0] = OutputTwin(node.outputs[0]);
  }

  Graph& g_;
  const int64_t block_;
  const std::string suffix_;
  std::map<std::string, std::string> twin_;  // NCHW tensor -> its blocked twin
  std::set<std::string> twin_only_;          // NCHW tensors whose producer now writes the twin only
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

absl::Status PlanBlockedLayout(Graph& graph, int64_t block) {
  if (block < 1 || block > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("the NCHWc channel block must be 1..1024, got ", block));
  }
  LayoutPlanner(graph, block).Run();
  return absl::OkStatus();
}

}  // namespace tune::graph
