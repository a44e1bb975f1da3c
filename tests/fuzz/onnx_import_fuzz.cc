// Fuzz target: the ONNX importer (graph::ImportOnnxBytes) and, for a graph it accepts, the
// execution plan `tune run` makes of it (every built-in kernel, the memory plan) and one run.
//
// Half of the harness's inputs are byte-level mutations (they reach the protobuf parser and
// every field's checks); the other half come from MutateOnnxModel, structure-aware edits of
// the parsed ModelProto (attribute values and types, dims, element types, op types, tensor
// names, node order, initializer data, opset, graph outputs, an --input override kept in the
// model's metadata_props under "tune_fuzz_input"), which stay well-formed protobuf.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/templates.h"
#include "executor/backend.h"
#include "executor/builtin_ops.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/onnx_import.h"
#include "measure/target.h"
#include "onnx/onnx_pb.h"
#include "tests/fuzz/fuzz_targets.h"

namespace tune::fuzz {
namespace {

// Graphs whose tensors (constants included) take less than this run once.
constexpr int64_t kRunBytes = int64_t{1} << 20;
// ... and whose estimated multiply-adds stay below this (a small conv with a huge padded
// kernel is slow, not wrong).
constexpr double kRunWork = 3e7;

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "onnx_import: %s\n", why.c_str());
  std::abort();
}

// A tuned node's kernel without a compile: writes zeros over its output.
class ZeroTaskKernel final : public executor::TaskKernel {
 public:
  ZeroTaskKernel(size_t args, int64_t out_elements) : args_(args), out_elements_(out_elements) {}
  void Run(float* const* args) const override {
    std::memset(args[args_ - 1], 0, static_cast<size_t>(out_elements_) * sizeof(float));
  }

 private:
  size_t args_;
  int64_t out_elements_;
};

// The CPU backend without LLVM: templates and default configs as the CPU backend has them,
// tuned kernels that write zeros, the real built-in kernels, host memory. An allocation over
// half of this machine's memory is a defect (the plan must refuse such a graph first).
class FuzzBackend final : public executor::Backend {
 public:
  FuzzBackend() : target_(measure::Target::HostCpu(1)) {}
  const measure::Target& target() const override { return target_; }
  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& w) const override {
    return codegen::CreateTemplate(w, codegen::Backend::kLlvm);
  }
  absl::StatusOr<std::unique_ptr<executor::TaskKernel>> LoadTaskKernel(const codegen::Template& tmpl,
                                                                       const search::Config&) const override {
    const codegen::Workload& w = tmpl.workload();
    return std::unique_ptr<executor::TaskKernel>(
        std::make_unique<ZeroTaskKernel>(w.Inputs().size() + 1, w.Output().NumElements()));
  }
  absl::StatusOr<std::unique_ptr<executor::OpKernel>> CreateOpKernel(const graph::Node& node,
                                                                     const std::vector<const graph::Tensor*>& inputs,
                                                                     const std::vector<const graph::Tensor*>& outputs,
                                                                     int64_t opset) const override {
    return executor::CreateBuiltinKernel(node, inputs, outputs, opset);
  }
  absl::StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes) const override {
    const int64_t memory = measure::HostMemoryBytes();
    if (bytes < 0 || (memory > 0 && bytes > memory / 2)) {
      Fail("the plan asked for " + std::to_string(bytes) + " bytes, more than half of this machine's memory");
    }
    if (bytes > (int64_t{1} << 28)) return absl::ResourceExhaustedError("fuzz backend: over 256 MiB");
    const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 64) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) return absl::ResourceExhaustedError("cannot allocate");
    std::memset(p, 0, size);
    return std::shared_ptr<void>(p, std::free);
  }
  void CopyToDevice(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }

 private:
  measure::Target target_;
};

// Saturating product of a shape's extents as a double (only for the size estimates below).
double Elements(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t e : shape) n *= static_cast<double>(e);
  return n;
}

// Rough multiply-adds of one run of the graph.
double Work(const graph::Graph& g) {
  double work = 0;
  for (const graph::Node& node : g.nodes) {
    double out = 0, in = 0;
    for (const std::string& o : node.outputs) {
      if (const graph::Tensor* t = g.Find(o)) out += Elements(t->shape);
    }
    for (const std::string& i : node.inputs) {
      if (const graph::Tensor* t = g.Find(i)) in += Elements(t->shape);
    }
    double per = 1;
    if (node.task) {
      work += node.task->workload.Flops() / 2;
      continue;
    }
    if ((node.op == "Conv") && node.inputs.size() > 1) {
      if (const graph::Tensor* w = g.Find(node.inputs[1]); w && !w->shape.empty() && w->shape[0] > 0) {
        per = Elements(w->shape) / static_cast<double>(w->shape[0]);
      }
    } else if ((node.op == "MatMul" || node.op == "Gemm") && !node.inputs.empty()) {
      if (const graph::Tensor* a = g.Find(node.inputs[0]); a && !a->shape.empty()) {
        per = static_cast<double>(std::max(a->shape.front(), a->shape.back()));
      }
    } else if (node.op == "MaxPool" || node.op == "AveragePool") {
      const auto it = node.attributes.find("kernel_shape");
      if (it != node.attributes.end()) {
        if (const auto* k = std::get_if<std::vector<int64_t>>(&it->second)) per = Elements(*k);
      }
    }
    work += out * per + in;
  }
  return work;
}

// The checks on a graph the importer accepted, then the plan and one run.
void CheckGraph(const graph::Graph& graph) {
  // Every tensor a node or the graph names exists, with non-negative extents and, for a
  // constant, exactly its elements' bytes.
  double bytes = 0;
  for (const auto& [name, t] : graph.tensors) {
    for (int64_t e : t.shape) {
      if (e < 0) Fail("tensor '" + name + "' has a negative extent");
    }
    const double b = Elements(t.shape) * static_cast<double>(graph::DTypeSize(t.dtype));
    if (t.constant() && static_cast<double>(t.data->size()) != b) Fail("constant '" + name + "' has the wrong size");
    bytes += b;
  }
  for (const graph::Node& node : graph.nodes) {
    for (const std::string& n : node.inputs) {
      if (!n.empty() && graph.Find(n) == nullptr) Fail("node '" + node.name + "' reads a missing tensor '" + n + "'");
    }
    for (const std::string& n : node.outputs) {
      if (!n.empty() && graph.Find(n) == nullptr) Fail("node '" + node.name + "' writes a missing tensor '" + n + "'");
    }
  }
  for (const std::string& n : graph.inputs) {
    if (graph.Find(n) == nullptr) Fail("graph input '" + n + "' has no tensor");
  }
  for (const std::string& n : graph.outputs) {
    if (graph.Find(n) == nullptr) Fail("graph output '" + n + "' has no tensor");
  }

  static const std::shared_ptr<const executor::Backend> backend = std::make_shared<FuzzBackend>();
  auto choices = executor::ChooseTaskKernels(graph, *backend, nullptr);
  if (!choices.ok()) return;
  const bool small = bytes < static_cast<double>(kRunBytes) && Work(graph) < kRunWork;
  auto plan = executor::ExecutionPlan::Create(graph, backend, *choices);
  if (!plan.ok()) return;
  // Buffers live at the same time never share bytes, and all lie inside the arena.
  const auto& buffers = (*plan)->buffers();
  const int64_t arena = (*plan)->memory().arena_bytes;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto& a = buffers[i];
    if (a.offset < 0 || a.bytes < 0 || a.offset + a.bytes > arena) Fail("buffer '" + a.name + "' outside the arena");
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const auto& b = buffers[j];
      const bool live_together = a.first <= b.last && b.first <= a.last;
      const bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      if (live_together && overlap) Fail("buffers '" + a.name + "' and '" + b.name + "' overlap while live");
    }
  }
  if (!small) return;
  std::mt19937_64 rng(12345);
  std::vector<std::vector<uint8_t>> in_data, out_data;
  std::vector<const void*> ins;
  std::vector<void*> outs;
  for (const executor::TensorDesc& d : (*plan)->inputs()) {
    std::vector<uint8_t> data(static_cast<size_t>(std::max<int64_t>(d.Bytes(), 1)));
    if (d.dtype == graph::DType::kFloat32) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (size_t i = 0; i + 4 <= data.size(); i += 4) {
        const float v = normal(rng);
        std::memcpy(&data[i], &v, 4);
      }
    } else if (d.dtype == graph::DType::kInt64) {
      // Indices: mostly small, some negative, some out of range.
      for (size_t i = 0; i + 8 <= data.size(); i += 8) {
        const int64_t v = static_cast<int64_t>(rng() % 7) - 2 + (rng() % 16 == 0 ? int64_t{1} << 40 : 0);
        std::memcpy(&data[i], &v, 8);
      }
    } else {
      for (uint8_t& b : data) b = rng() % 2;
    }
    in_data.push_back(std::move(data));
  }
  for (const executor::TensorDesc& d : (*plan)->outputs()) {
    out_data.emplace_back(static_cast<size_t>(std::max<int64_t>(d.Bytes(), 1)));
  }
  for (auto& d : in_data) ins.push_back(d.data());
  for (auto& d : out_data) outs.push_back(d.data());
  (void)(*plan)->Run(ins, outs);
}

void ImportAndCheck(const std::string& bytes, const graph::ImportOptions& options) {
  auto graph = graph::ImportOnnxBytes(bytes, "fuzz.onnx", options);
  if (!graph.ok()) {
    const std::string message(graph.status().message());
    if (message.find('\n') != std::string::npos) Fail("a refusal of more than one line: " + message);
    return;
  }
  CheckGraph(*graph);
}

// ---- structure-aware edits ---------------------------------------------------------------

// The metadata key of an --input override (NAME=D1xD2...) the target passes to the importer.
constexpr char kInputOverride[] = "tune_fuzz_input";

const int64_t kInts[] = {0, 1, 2, 3, -1, -2, 7, 64, 255, 1 << 16, int64_t{1} << 31, int64_t{1} << 32,
                         1000000000, int64_t{1000000000000}, std::numeric_limits<int64_t>::max(),
                         std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max() / 2,
                         -1000000000};
const char* const kOps[] = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Relu", "Clip", "Sigmoid",
                            "Tanh", "Erf", "Gelu", "Sqrt", "Exp", "Neg", "Cast", "MaxPool", "AveragePool",
                            "GlobalAveragePool", "ReduceMean", "ReduceSum", "Softmax", "LayerNormalization",
                            "BatchNormalization", "Transpose", "Concat", "Split", "Slice", "Gather", "Pad", "Shape",
                            "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Where", "Expand",
                            "Equal", "Constant", "ConstantOfShape", "Tile", "Range", "Size", "ArgMax", "Less",
                            "HardSigmoid", "HardSwish", "Sum", "Max", "Mean", "Not", "LpPool", "ReduceMax",
                            "InstanceNormalization", "Hardmax", "Mod", "And", "Resize", "Loop", ""};
const int kElemTypes[] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 1000};

int64_t PickInt(std::mt19937_64& rng) {
  if (rng() % 3 == 0) return static_cast<int64_t>(rng() % 9) - 2;
  return kInts[rng() % std::size(kInts)];
}

// Every tensor name the graph mentions.
std::vector<std::string> Names(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) names.push_back(o);
  }
  names.push_back("");
  names.push_back("nowhere");
  return names;
}

void EditTensor(onnx::TensorProto* t, std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
      if (t->dims_size() > 0) t->set_dims(static_cast<int>(rng() % t->dims_size()), PickInt(rng));
      break;
    case 1:
      if (rng() % 2 && t->dims_size() > 0) t->mutable_dims()->RemoveLast();
      else t->add_dims(PickInt(rng));
      break;
    case 2: t->set_data_type(kElemTypes[rng() % std::size(kElemTypes)]); break;
    case 3:
      if (t->has_raw_data()) {
        std::string raw = t->raw_data();
        if (rng() % 2 && !raw.empty()) raw.resize(rng() % raw.size());
        else raw.append(1 + rng() % 9, static_cast<char>(rng()));
        t->set_raw_data(raw);
      } else if (t->float_data_size() > 0) {
        t->mutable_float_data()->RemoveLast();
      } else if (t->int64_data_size() > 0) {
        t->set_int64_data(static_cast<int>(rng() % t->int64_data_size()), PickInt(rng));
      } else {
        t->add_int64_data(PickInt(rng));
      }
      break;
    case 4:
      // int64 values in place (shapes, axes, indices, pads...).
      if (t->data_type() == onnx::TensorProto::INT64 && t->has_raw_data() && t->raw_data().size() >= 8) {
        std::string raw = t->raw_data();
        const int64_t v = PickInt(rng);
        std::memcpy(&raw[(rng() % (raw.size() / 8)) * 8], &v, 8);
        t->set_raw_data(raw);
      } else if (t->int64_data_size() > 0) {
        t->set_int64_data(static_cast<int>(rng() % t->int64_data_size()), PickInt(rng));
      }
      break;
    default:
      t->clear_dims();
      break;
  }
}

void EditAttribute(onnx::AttributeProto* a, std::mt19937_64& rng) {
  switch (rng() % 7) {
    case 0: a->set_i(PickInt(rng)); break;
    case 1:
      if (a->ints_size() > 0) a->set_ints(static_cast<int>(rng() % a->ints_size()), PickInt(rng));
      else a->add_ints(PickInt(rng));
      break;
    case 2:
      if (rng() % 2 && a->ints_size() > 0) a->mutable_ints()->RemoveLast();
      else a->add_ints(PickInt(rng));
      break;
    case 3: {  // another attribute type than its value's
      static const onnx::AttributeProto::AttributeType kTypes[] = {
          onnx::AttributeProto::INT, onnx::AttributeProto::FLOAT, onnx::AttributeProto::STRING,
          onnx::AttributeProto::INTS, onnx::AttributeProto::FLOATS, onnx::AttributeProto::TENSOR,
          onnx::AttributeProto::GRAPH, onnx::AttributeProto::UNDEFINED};
      a->set_type(kTypes[rng() % std::size(kTypes)]);
      break;
    }
    case 4: {
      static const float kFloats[] = {0.0f, -1.0f, 1e-30f, 6.0f, 1e30f, std::numeric_limits<float>::infinity(),
                                      std::numeric_limits<float>::quiet_NaN()};
      a->set_f(kFloats[rng() % std::size(kFloats)]);
      break;
    }
    case 5: {
      static const char* const kStrings[] = {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "constant", "reflect",
                                             "edge", "", "tanh"};
      a->set_s(kStrings[rng() % std::size(kStrings)]);
      break;
    }
    default:
      if (a->has_t()) EditTensor(a->mutable_t(), rng);
      else a->set_name(rng() % 2 ? "axis" : "axes");
      break;
  }
}

void EditDim(onnx::ValueInfoProto* v, std::mt19937_64& rng) {
  auto* tt = v->mutable_type()->mutable_tensor_type();
  switch (rng() % 4) {
    case 0: {
      auto* shape = tt->mutable_shape();
      if (shape->dim_size() == 0) {
        shape->add_dim()->set_dim_value(PickInt(rng));
      } else {
        auto* d = shape->mutable_dim(static_cast<int>(rng() % shape->dim_size()));
        if (rng() % 5 == 0) d->set_dim_param("N");
        else d->set_dim_value(PickInt(rng));
      }
      break;
    }
    case 1:
      if (rng() % 2 && tt->shape().dim_size() > 0) tt->mutable_shape()->mutable_dim()->RemoveLast();
      else tt->mutable_shape()->add_dim()->set_dim_value(1 + rng() % 4);
      break;
    case 2: tt->set_elem_type(kElemTypes[rng() % std::size(kElemTypes)]); break;
    default: tt->clear_shape(); break;
  }
}

void EditModel(onnx::ModelProto& m, std::mt19937_64& rng) {
  onnx::GraphProto* g = m.mutable_graph();
  const int nodes = g->node_size();
  auto node = [&]() { return g->mutable_node(static_cast<int>(rng() % nodes)); };
  switch (rng() % 16) {
    case 0:
    case 1:
    case 2:  // an attribute's value
      if (nodes > 0) {
        onnx::NodeProto* n = node();
        if (n->attribute_size() > 0) EditAttribute(n->mutable_attribute(static_cast<int>(rng() % n->attribute_size())), rng);
      }
      break;
    case 3: {  // a new attribute that the op takes in some form
      if (nodes == 0) break;
      static const char* const kAttrs[] = {"axis", "axes", "perm", "pads", "strides", "dilations", "kernel_shape",
                                           "group", "split", "starts", "ends", "transA", "transB", "keepdims",
                                           "ceil_mode", "to", "allowzero", "auto_pad", "epsilon", "alpha"};
      onnx::AttributeProto* a = node()->add_attribute();
      a->set_name(kAttrs[rng() % std::size(kAttrs)]);
      if (rng() % 2) {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(PickInt(rng));
      } else {
        a->set_type(onnx::AttributeProto::INTS);
        for (int k = static_cast<int>(rng() % 5); k-- > 0;) a->add_ints(PickInt(rng));
      }
      break;
    }
    case 4:
    case 5:  // an initializer's dims, type or data
      if (g->initializer_size() > 0) EditTensor(g->mutable_initializer(static_cast<int>(rng() % g->initializer_size())), rng);
      break;
    case 6:  // a graph input's dims or element type
      if (g->input_size() > 0) EditDim(g->mutable_input(static_cast<int>(rng() % g->input_size())), rng);
      break;
    case 7:  // an op type
      if (nodes > 0) node()->set_op_type(kOps[rng() % std::size(kOps)]);
      break;
    case 8: {  // an input name: another tensor, "", a missing one, a later node's output
      if (nodes == 0) break;
      onnx::NodeProto* n = node();
      const std::vector<std::string> names = Names(*g);
      const std::string& name = names[rng() % names.size()];
      if (n->input_size() > 0 && rng() % 3) n->set_input(static_cast<int>(rng() % n->input_size()), name);
      else n->add_input(name);
      break;
    }
    case 9: {  // an output name: another node's (duplicate) or a graph output's
      if (nodes == 0) break;
      onnx::NodeProto* n = node();
      const std::vector<std::string> names = Names(*g);
      if (n->output_size() > 0) n->set_output(static_cast<int>(rng() % n->output_size()), names[rng() % names.size()]);
      else n->add_output(names[rng() % names.size()]);
      break;
    }
    case 10:  // two nodes swapped (not topologically ordered, or a cycle with an edit above)
      if (nodes > 1) g->mutable_node()->SwapElements(static_cast<int>(rng() % nodes), static_cast<int>(rng() % nodes));
      break;
    case 11:  // a node removed or duplicated
      if (nodes == 0) break;
      if (rng() % 2) {
        g->mutable_node()->DeleteSubrange(static_cast<int>(rng() % nodes), 1);
      } else {
        *g->add_node() = g->node(static_cast<int>(rng() % nodes));
      }
      break;
    case 12: {  // the opset
      static const int64_t kOpsets[] = {1, 6, 7, 9, 10, 11, 12, 13, 17, 18, 19};
      if (m.opset_import_size() > 0) m.mutable_opset_import(0)->set_version(kOpsets[rng() % std::size(kOpsets)]);
      break;
    }
    case 13: {  // a graph output: another tensor, or one more
      const std::vector<std::string> names = Names(*g);
      if (g->output_size() > 0 && rng() % 2) {
        g->mutable_output(static_cast<int>(rng() % g->output_size()))->set_name(names[rng() % names.size()]);
      } else {
        g->add_output()->set_name(names[rng() % names.size()]);
      }
      break;
    }
    case 14: {  // --input NAME=SHAPE, as ParseInputShape takes it (extents 1..2^31)
      if (g->input_size() == 0) break;
      const auto& in = g->input(static_cast<int>(rng() % g->input_size()));
      std::vector<int64_t> shape;
      int rank = in.type().tensor_type().shape().dim_size();
      if (rng() % 4 == 0) rank = static_cast<int>(rng() % 6);
      for (int d = 0; d < rank; ++d) {
        const int64_t pick = rng() % 4;
        shape.push_back(pick == 0 ? int64_t{1} << 31 : pick == 1 ? 1 + static_cast<int64_t>(rng() % 4)
                                    : in.type().tensor_type().shape().dim_size() > d &&
                                              in.type().tensor_type().shape().dim(d).dim_value() > 0
                                        ? in.type().tensor_type().shape().dim(d).dim_value()
                                        : 1000000);
      }
      std::string text = in.name() + "=";
      for (size_t d = 0; d < shape.size(); ++d) text += (d ? "x" : "") + std::to_string(shape[d]);
      m.clear_metadata_props();
      auto* prop = m.add_metadata_props();
      prop->set_key(kInputOverride);
      prop->set_value(text);
      break;
    }
    default:  // a Constant node's value tensor
      for (int i = 0; i < nodes; ++i) {
        onnx::NodeProto* n = g->mutable_node(static_cast<int>((i + rng()) % nodes));
        if (n->op_type() != "Constant") continue;
        for (auto& a : *n->mutable_attribute()) {
          if (a.has_t()) EditTensor(a.mutable_t(), rng);
        }
        break;
      }
      break;
  }
}

// Keeps a runaway input from taking the machine: past this address space an allocation fails
// (std::bad_alloc, a crash the harness saves) instead of swapping. Not under AddressSanitizer,
// which reserves far more address space than it uses.
void LimitMemory() {
#if !defined(__SANITIZE_ADDRESS__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  return;
#endif
#endif
  static const bool once = [] {
    const int64_t memory = measure::HostMemoryBytes();
    const int64_t cap = std::min<int64_t>(int64_t{4} << 30, memory > 0 ? memory / 2 : int64_t{4} << 30);
    rlimit limit{static_cast<rlim_t>(cap), static_cast<rlim_t>(cap)};
    rlimit now{};
    if (getrlimit(RLIMIT_AS, &now) == 0 && (now.rlim_cur == RLIM_INFINITY || now.rlim_cur > limit.rlim_cur)) {
      setrlimit(RLIMIT_AS, &limit);
    }
    return true;
  }();
  (void)once;
#endif
}

}  // namespace

int FuzzOnnxImport(const uint8_t* data, size_t size) {
  LimitMemory();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // An --input override the structured mutation left in the model's metadata, given as the
  // command line would give it (ParseInputShape refuses what `tune run --input` refuses).
  graph::ImportOptions options;
  onnx::ModelProto model;
  if (model.ParseFromString(bytes)) {
    for (const auto& prop : model.metadata_props()) {
      if (prop.key() == kInputOverride) (void)graph::ParseInputShape(prop.value(), &options);
    }
  }
  ImportAndCheck(bytes, options);
  return 0;
}

std::string MutateOnnxModel(const std::string& input, uint64_t seed) {
  onnx::ModelProto model;
  if (!model.ParseFromString(input) || !model.has_graph()) return input;
  std::mt19937_64 rng(seed);
  EditModel(model, rng);
  return model.SerializeAsString();
}
}  // namespace tune::fuzz
