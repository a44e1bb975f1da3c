// Built-in GPU kernels: sources for every built-in op and every node of the test models compile
// with NVRTC for sm_90 (here, without a GPU); on a GPU each kernel matches the CPU kernel.
#include "executor/cuda_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "executor/builtin_ops.h"
#include "executor/cuda_backend.h"
#include "tests/executor/cuda_test_helper.h"
#include "graph/onnx_import.h"

namespace tune::executor {
namespace {

using graph::DType;
using graph::Node;
using graph::Tensor;
using Shape = std::vector<int64_t>;

/// One node with its tensors (constant inputs carry their data) and how to draw its inputs.
struct CudaOpCase {
  Node node;
  std::vector<Tensor> inputs;  // name "" for an absent optional input
  std::vector<Tensor> outputs;
  int64_t opset = 17;
  float lo = 0.1f, hi = 2.0f;  // |float inputs| drawn in [lo, hi], sign random unless positive
  bool positive = false;
  int64_t int_lo = 1, int_hi = 5;  // int64 inputs drawn in [int_lo, int_hi]
};

Tensor CudaTensorOf(const std::string& name, DType dtype, Shape shape) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

Tensor CudaConstInts(const std::string& name, const Shape& values) {
  Tensor t = CudaTensorOf(name, DType::kInt64, {static_cast<int64_t>(values.size())});
  t.data = std::vector<uint8_t>(values.size() * 8);
  std::memcpy(t.data->data(), values.data(), values.size() * 8);
  return t;
}

Tensor CudaConstFloat(const std::string& name, const std::vector<float>& values, Shape shape) {
  Tensor t = CudaTensorOf(name, DType::kFloat32, std::move(shape));
  t.data = std::vector<uint8_t>(values.size() * 4);
  std::memcpy(t.data->data(), values.data(), values.size() * 4);
  return t;
}

/// A case of `op` on float inputs of `in_shapes` giving one float output of `out_shape`.
CudaOpCase CudaFloatCase(const std::string& op, const std::vector<Shape>& in_shapes, const Shape& out_shape) {
  CudaOpCase c;
  c.node.name = op + "_node";
  c.node.op = op;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    c.inputs.push_back(CudaTensorOf("x" + std::to_string(i), DType::kFloat32, in_shapes[i]));
  }
  c.outputs.push_back(CudaTensorOf("y", DType::kFloat32, out_shape));
  return c;
}

/// Every built-in op at least once, in forms the test models use and a few they do not.
std::vector<CudaOpCase> CudaOpCases() {
  std::vector<CudaOpCase> cases;
  auto add = [&](CudaOpCase c) {
    c.node.name = c.node.op + "_" + std::to_string(cases.size());
    c.node.inputs.clear();
    c.node.outputs.clear();
    for (const Tensor& t : c.inputs) c.node.inputs.push_back(t.name);
    for (const Tensor& t : c.outputs) c.node.outputs.push_back(t.name);
    cases.push_back(std::move(c));
  };
  add(CudaFloatCase("Add", {{2, 3, 4}, {4}}, {2, 3, 4}));
  add(CudaFloatCase("Sub", {{2, 1, 4}, {3, 1}}, {2, 3, 4}));
  add(CudaFloatCase("Mul", {{5, 7}, {5, 7}}, {5, 7}));
  add(CudaFloatCase("Div", {{3, 4}, {1, 4}}, {3, 4}));
  {
    CudaOpCase c = CudaFloatCase("Pow", {{3, 4}, {1}}, {3, 4});
    c.positive = true;
    add(c);
    CudaOpCase sq = CudaFloatCase("Pow", {{3, 4}}, {3, 4});
    sq.inputs.push_back(CudaConstFloat("two", {2.0f}, {}));
    add(sq);
  }
  for (const std::string op : {"Add", "Div", "Equal"}) {
    CudaOpCase c = CudaFloatCase(op, {{3, 4}, {4}}, {3, 4});
    for (Tensor& t : c.inputs) t.dtype = DType::kInt64;
    if (op == "Equal") c.outputs[0].dtype = DType::kBool;
    else c.outputs[0].dtype = DType::kInt64;
    c.int_lo = -3;
    c.int_hi = 3;
    add(c);
  }
  {
    CudaOpCase c = CudaFloatCase("Equal", {{3, 4}, {3, 4}}, {3, 4});
    c.outputs[0].dtype = DType::kBool;
    add(c);
    CudaOpCase w = CudaFloatCase("Where", {{3, 1}, {3, 4}, {4}}, {3, 4});
    w.inputs[0].dtype = DType::kBool;
    add(w);
    CudaOpCase e = CudaFloatCase("Expand", {{3, 1}}, {2, 3, 4});
    e.inputs.push_back(CudaConstInts("shape", {2, 1, 4}));
    add(e);
  }
  for (const std::string op : {"Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "HardSigmoid", "HardSwish", "Sqrt", "Exp", "Neg"}) {
    CudaOpCase c = CudaFloatCase(op, {{4, 33}}, {4, 33});
    c.hi = 6.0f;
    c.positive = op == "Sqrt";
    if (op == "HardSigmoid") c.node.attributes["alpha"] = 0.3f;
    add(c);
  }
  {
    CudaOpCase g = CudaFloatCase("Gelu", {{4, 33}}, {4, 33});
    g.node.attributes["approximate"] = std::string("tanh");
    add(g);
    CudaOpCase clip = CudaFloatCase("Clip", {{4, 33}}, {4, 33});
    clip.inputs.push_back(CudaConstFloat("lo", {-0.5f}, {}));
    clip.inputs.push_back(CudaConstFloat("hi", {1.25f}, {}));
    add(clip);
    CudaOpCase clip6 = CudaFloatCase("Clip", {{70}}, {70});
    clip6.opset = 6;
    clip6.node.attributes["min"] = 0.0f;
    clip6.node.attributes["max"] = 6.0f;
    clip6.hi = 8.0f;
    add(clip6);
    CudaOpCase neg = CudaFloatCase("Neg", {{9}}, {9});
    neg.inputs[0].dtype = neg.outputs[0].dtype = DType::kInt64;
    add(neg);
  }
  for (auto [from, to] : {std::pair{DType::kFloat32, DType::kInt64}, std::pair{DType::kInt64, DType::kFloat32},
                          std::pair{DType::kFloat32, DType::kBool}, std::pair{DType::kBool, DType::kFloat32}}) {
    CudaOpCase c = CudaFloatCase("Cast", {{5, 6}}, {5, 6});
    c.inputs[0].dtype = from;
    c.outputs[0].dtype = to;
    c.hi = 9.0f;
    c.int_lo = -50;
    c.int_hi = 50;
    add(c);
  }
  add(CudaFloatCase("MatMul", {{2, 3, 5, 21}, {21, 19}}, {2, 3, 5, 19}));
  add(CudaFloatCase("MatMul", {{2, 1, 17, 8}, {3, 8, 5}}, {2, 3, 17, 5}));
  add(CudaFloatCase("MatMul", {{5}, {5, 4}}, {4}));
  {
    CudaOpCase g = CudaFloatCase("Gemm", {{6, 20}, {18, 20}, {18}}, {6, 18});
    g.node.attributes["transB"] = int64_t{1};
    g.node.attributes["alpha"] = 0.5f;
    g.node.attributes["beta"] = 2.0f;
    add(g);
    CudaOpCase ta = CudaFloatCase("Gemm", {{20, 6}, {20, 17}}, {6, 17});
    ta.node.attributes["transA"] = int64_t{1};
    add(ta);
    CudaOpCase c2 = CudaFloatCase("Gemm", {{6, 20}, {20, 17}, {6, 1}}, {6, 17});
    add(c2);
  }
  {
    CudaOpCase conv = CudaFloatCase("Conv", {{2, 4, 9, 9}, {6, 2, 3, 3}, {6}}, {2, 6, 5, 5});
    conv.node.attributes["group"] = int64_t{2};
    conv.node.attributes["strides"] = Shape{2, 2};
    conv.node.attributes["pads"] = Shape{1, 1, 1, 1};
    add(conv);
    CudaOpCase dw = CudaFloatCase("Conv", {{1, 3, 8, 7}, {3, 1, 3, 3}}, {1, 3, 8, 7});
    dw.node.attributes["group"] = int64_t{3};
    dw.node.attributes["auto_pad"] = std::string("SAME_UPPER");
    add(dw);
    CudaOpCase dil = CudaFloatCase("Conv", {{1, 2, 10, 10}, {3, 2, 3, 2}}, {1, 3, 6, 8});
    dil.node.attributes["dilations"] = Shape{2, 2};
    add(dil);
  }
  {
    CudaOpCase mp = CudaFloatCase("MaxPool", {{2, 3, 9, 9}}, {2, 3, 5, 5});
    mp.node.attributes["kernel_shape"] = Shape{3, 3};
    mp.node.attributes["strides"] = Shape{2, 2};
    mp.node.attributes["pads"] = Shape{1, 1, 1, 1};
    add(mp);
    CudaOpCase ap = CudaFloatCase("AveragePool", {{2, 3, 8, 8}}, {2, 3, 5, 5});
    ap.node.attributes["kernel_shape"] = Shape{3, 3};
    ap.node.attributes["strides"] = Shape{2, 2};
    ap.node.attributes["pads"] = Shape{1, 1, 1, 1};
    ap.node.attributes["ceil_mode"] = int64_t{1};
    add(ap);
    CudaOpCase api = ap;
    api.node.attributes["count_include_pad"] = int64_t{1};
    add(api);
    add(CudaFloatCase("GlobalAveragePool", {{2, 3, 7, 7}}, {2, 3, 1, 1}));
  }
  {
    CudaOpCase rm = CudaFloatCase("ReduceMean", {{2, 5, 40}}, {2, 5, 1});
    rm.node.attributes["axes"] = Shape{-1};
    rm.opset = 13;
    add(rm);
    CudaOpCase rs = CudaFloatCase("ReduceSum", {{3, 4, 5}}, {4});
    rs.inputs.push_back(CudaConstInts("axes", {0, 2}));
    rs.node.attributes["keepdims"] = int64_t{0};
    add(rs);
    CudaOpCase all = CudaFloatCase("ReduceSum", {{3, 300}}, {1, 1});
    add(all);
  }
  {
    CudaOpCase s = CudaFloatCase("Softmax", {{2, 4, 70}}, {2, 4, 70});
    s.opset = 13;
    s.hi = 8.0f;
    add(s);
    CudaOpCase inner = CudaFloatCase("Softmax", {{2, 3, 4}}, {2, 3, 4});
    inner.node.attributes["axis"] = int64_t{1};
    inner.opset = 13;
    add(inner);
    CudaOpCase flat = CudaFloatCase("Softmax", {{2, 3, 4}}, {2, 3, 4});
    flat.opset = 11;
    add(flat);
  }
  {
    CudaOpCase ln = CudaFloatCase("LayerNormalization", {{2, 5, 40}, {40}, {40}}, {2, 5, 40});
    add(ln);
    CudaOpCase bn = CudaFloatCase("BatchNormalization", {{2, 3, 4, 4}, {3}, {3}, {3}, {3}}, {2, 3, 4, 4});
    bn.positive = true;
    add(bn);
  }
  {
    CudaOpCase t = CudaFloatCase("Transpose", {{2, 3, 4}}, {4, 2, 3});
    t.node.attributes["perm"] = Shape{2, 0, 1};
    add(t);
    CudaOpCase cat = CudaFloatCase("Concat", {{2, 3, 4}, {2, 2, 4}}, {2, 5, 4});
    cat.node.attributes["axis"] = int64_t{1};
    add(cat);
    CudaOpCase cati = cat;
    for (Tensor& x : cati.inputs) x.dtype = DType::kInt64;
    cati.outputs[0].dtype = DType::kInt64;
    add(cati);
    CudaOpCase split = CudaFloatCase("Split", {{2, 5, 3}}, {2, 2, 3});
    split.outputs.push_back(CudaTensorOf("y2", DType::kFloat32, {2, 3, 3}));
    split.inputs.push_back(CudaConstInts("split", {2, 3}));
    split.node.attributes["axis"] = int64_t{1};
    add(split);
    CudaOpCase slice = CudaFloatCase("Slice", {{5, 6}}, {3, 3});
    slice.inputs.push_back(CudaConstInts("starts", {1, -5}));
    slice.inputs.push_back(CudaConstInts("ends", {4, 100}));
    slice.inputs.push_back(CudaConstInts("axes", {0, 1}));
    slice.inputs.push_back(CudaConstInts("steps", {1, 2}));
    add(slice);
    CudaOpCase back = CudaFloatCase("Slice", {{5, 6}}, {5, 2});
    back.inputs.push_back(CudaConstInts("starts", {-1}));
    back.inputs.push_back(CudaConstInts("ends", {-5}));
    back.inputs.push_back(CudaConstInts("axes", {1}));
    back.inputs.push_back(CudaConstInts("steps", {-2}));
    add(back);
    CudaOpCase gather = CudaFloatCase("Gather", {{5, 4}}, {2, 3, 4});
    gather.inputs.push_back(CudaTensorOf("idx", DType::kInt64, {2, 3}));
    gather.int_lo = -5;
    gather.int_hi = 4;
    add(gather);
    CudaOpCase gather1 = CudaFloatCase("Gather", {{3, 5, 4}}, {3, 2, 4});
    gather1.inputs.push_back(CudaTensorOf("idx", DType::kInt64, {2}));
    gather1.node.attributes["axis"] = int64_t{1};
    gather1.int_lo = -5;
    gather1.int_hi = 4;
    add(gather1);
    CudaOpCase pad = CudaFloatCase("Pad", {{2, 3}}, {5, 4});
    pad.inputs.push_back(CudaConstInts("pads", {1, 0, 2, 1}));
    pad.inputs.push_back(CudaConstFloat("value", {1.5f}, {}));
    add(pad);
    CudaOpCase shape = CudaFloatCase("Shape", {{2, 3, 4}}, {2});
    shape.outputs[0].dtype = DType::kInt64;
    shape.node.attributes["start"] = int64_t{1};
    add(shape);
  }
  for (const std::string op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}) {
    CudaOpCase c = CudaFloatCase(op, {{2, 3, 4}}, {6, 4});
    if (op == "Reshape") c.inputs.push_back(CudaConstInts("shape", {6, 4}));
    add(c);
  }
  return cases;
}

std::vector<const Tensor*> CudaPointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : tensors) out.push_back(t.name.empty() ? nullptr : &t);
  return out;
}

TEST(CudaOpsTest, CasesCoverEveryBuiltinOp) {
  std::set<std::string> covered;
  for (const CudaOpCase& c : CudaOpCases()) covered.insert(c.node.op);
  for (const std::string& op : BuiltinOps()) EXPECT_TRUE(covered.count(op)) << op << " has no GPU test case";
}

TEST(CudaOpsTest, EqualNodesShareOneKernelAndShapesAreBakedIn) {
  CudaOpCase a = CudaFloatCase("Relu", {{3, 7}}, {3, 7});
  a.node.inputs = {"x0"};
  a.node.outputs = {"y"};
  CudaOpCase b = a;
  b.node.name = "another";
  CudaOpCase wider = CudaFloatCase("Relu", {{3, 9}}, {3, 9});
  wider.node.inputs = {"x0"};
  wider.node.outputs = {"y"};
  auto sa = MakeCudaOpSource(a.node, CudaPointers(a.inputs), CudaPointers(a.outputs), 17);
  auto sb = MakeCudaOpSource(b.node, CudaPointers(b.inputs), CudaPointers(b.outputs), 17);
  auto sw = MakeCudaOpSource(wider.node, CudaPointers(wider.inputs), CudaPointers(wider.outputs), 17);
  ASSERT_TRUE(sa.ok() && sb.ok() && sw.ok()) << sa.status() << sb.status() << sw.status();
  EXPECT_EQ(sa->name, sb->name);
  EXPECT_NE(sa->name, sw->name);
  EXPECT_NE(sa->text.find("(IDX)21"), std::string::npos) << sa->text;
  EXPECT_EQ(sa->params, 2);
  // One kernel in the program for the two equal nodes.
  const std::string program = CudaOpProgram({*sa, *sb, *sw});
  size_t count = 0;
  for (size_t at = program.find(sa->name); at != std::string::npos; at = program.find(sa->name, at + 1)) ++count;
  EXPECT_EQ(count, 1u);
}

TEST(CudaOpsTest, RefusesWhatTheCpuKernelRefuses) {
  CudaOpCase bad = CudaFloatCase("Add", {{3, 4}, {5}}, {3, 4});
  bad.node.inputs = {"x0", "x1"};
  bad.node.outputs = {"y"};
  auto cpu = CreateBuiltinKernel(bad.node, CudaPointers(bad.inputs), CudaPointers(bad.outputs), 17);
  auto gpu = MakeCudaOpSource(bad.node, CudaPointers(bad.inputs), CudaPointers(bad.outputs), 17);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status(), cpu.status());
  Node unknown;
  unknown.name = "n";
  unknown.op = "Unknown";
  EXPECT_TRUE(absl::IsUnimplemented(MakeCudaOpSource(unknown, {}, {}, 17).status()));
}

TEST(CudaOpsTest, EveryCaseCompilesInOneProgram) {
  if (!codegen::NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  std::vector<CudaOpSource> sources;
  for (const CudaOpCase& c : CudaOpCases()) {
    auto src = MakeCudaOpSource(c.node, CudaPointers(c.inputs), CudaPointers(c.outputs), c.opset);
    ASSERT_TRUE(src.ok()) << c.node.name << ": " << src.status();
    sources.push_back(*src);
  }
  auto compiled = CompileCudaOps(sources, "sm_90");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_FALSE(compiled->cubin.empty());
  for (const CudaOpSource& s : sources) EXPECT_TRUE(compiled->kernels.count(s.name)) << s.name;
}

/// The built-in kernel sources of every node of a test model (tuned nodes and nodes whose
/// outputs were folded to constants run no built-in kernel).
void CompileModelOps(const std::string& file) {
  auto graph = graph::ImportOnnx(std::string(TUNE_ONNX_DIR) + "/" + file);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<CudaOpSource> sources;
  int nodes = 0;
  for (const Node& node : graph->nodes) {
    if (node.task.has_value()) continue;
    bool folded = !node.outputs.empty();
    std::vector<const Tensor*> ins, outs;
    for (const std::string& o : node.outputs) {
      const Tensor* t = o.empty() ? nullptr : graph->Find(o);
      folded &= o.empty() || (t != nullptr && t->constant());
      outs.push_back(t);
    }
    if (folded) continue;
    for (const std::string& i : node.inputs) ins.push_back(i.empty() ? nullptr : graph->Find(i));
    auto src = MakeCudaOpSource(node, ins, outs, graph->opset);
    ASSERT_TRUE(src.ok()) << file << ": " << src.status();
    sources.push_back(*src);
    ++nodes;
  }
  ASSERT_GT(nodes, 0) << file;
  auto compiled = CompileCudaOps(sources, "sm_90");
  ASSERT_TRUE(compiled.ok()) << file << ": " << compiled.status();
  for (const CudaOpSource& s : sources) EXPECT_TRUE(compiled->kernels.count(s.name)) << file << ": " << s.name;
}

TEST(CudaOpsTest, TestModelsBuiltinKernelsCompileForSm90) {
  if (!codegen::NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  for (const std::string file : {"resnet18.onnx", "mobilenet_v2.onnx", "encoder.onnx"}) {
    SCOPED_TRACE(file);
    CompileModelOps(file);
  }
}

// ---- On a GPU -------------------------------------------------------------------------------

/// Random data for `t` as `c` draws it: floats of magnitude in [lo, hi] (never zero), ints in
/// [int_lo, int_hi], bools either way.
std::vector<uint8_t> CudaRandomData(const Tensor& t, const CudaOpCase& c, std::mt19937& rng) {
  const int64_t n = t.NumElements();
  std::vector<uint8_t> bytes(n * graph::DTypeSize(t.dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kFloat32) {
      float v = std::uniform_real_distribution<float>(c.lo, c.hi)(rng);
      if (!c.positive && rng() % 2) v = -v;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else if (t.dtype == DType::kInt64) {
      const int64_t v = std::uniform_int_distribution<int64_t>(c.int_lo, c.int_hi)(rng);
      std::memcpy(bytes.data() + 8 * i, &v, 8);
    } else {
      bytes[i] = rng() % 2;
    }
  }
  return bytes;
}

TEST(CudaOpsGpuTest, EveryBuiltinKernelMatchesTheCpuKernel) {
  std::string why;
  std::shared_ptr<CudaBackend> backend = SharedCudaBackend(&why);
  if (backend == nullptr) GTEST_SKIP() << "no CUDA device: " << why;
  std::mt19937 rng(20240611);
  for (const CudaOpCase& c : CudaOpCases()) {
    SCOPED_TRACE(c.node.name + " (" + c.node.op + ")");
    // Host data: constants as given, the rest drawn.
    std::vector<std::vector<uint8_t>> in_data;
    std::vector<const void*> cpu_in;
    for (const Tensor& t : c.inputs) {
      in_data.push_back(t.name.empty() ? std::vector<uint8_t>{} : t.constant() ? *t.data : CudaRandomData(t, c, rng));
      cpu_in.push_back(t.name.empty() ? nullptr : in_data.back().data());
    }
    std::vector<std::vector<uint8_t>> cpu_out, gpu_out;
    std::vector<void*> cpu_out_ptrs;
    for (const Tensor& t : c.outputs) {
      cpu_out.emplace_back(std::max<int64_t>(1, t.NumElements() * graph::DTypeSize(t.dtype)), 0xAB);
      gpu_out.emplace_back(cpu_out.back().size(), 0xCD);
      cpu_out_ptrs.push_back(cpu_out.back().data());
    }
    auto cpu = CreateBuiltinKernel(c.node, CudaPointers(c.inputs), CudaPointers(c.outputs), c.opset);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    (*cpu)->Run(cpu_in.data(), cpu_out_ptrs.data());

    auto gpu = backend->CreateOpKernel(c.node, CudaPointers(c.inputs), CudaPointers(c.outputs), c.opset);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(backend->CompileOpKernels().ok());
    std::vector<std::shared_ptr<void>> held;
    std::vector<const void*> dev_in;
    std::vector<void*> dev_out;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.inputs[i].name.empty()) {
        dev_in.push_back(nullptr);
        continue;
      }
      auto mem = backend->Allocate(static_cast<int64_t>(in_data[i].size()));
      ASSERT_TRUE(mem.ok()) << mem.status();
      backend->CopyToDevice(mem->get(), in_data[i].data(), static_cast<int64_t>(in_data[i].size()));
      held.push_back(*mem);
      dev_in.push_back(mem->get());
    }
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      auto mem = backend->Allocate(static_cast<int64_t>(gpu_out[i].size()));
      ASSERT_TRUE(mem.ok()) << mem.status();
      backend->CopyToDevice(mem->get(), gpu_out[i].data(), static_cast<int64_t>(gpu_out[i].size()));
      held.push_back(*mem);
      dev_out.push_back(mem->get());
    }
    (*gpu)->Run(dev_in.data(), dev_out.data());
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      backend->CopyToHost(gpu_out[i].data(), dev_out[i], static_cast<int64_t>(gpu_out[i].size()));
    }
    ASSERT_TRUE(backend->Synchronize().ok());
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      const Tensor& t = c.outputs[o];
      const int64_t n = t.NumElements();
      if (t.dtype != DType::kFloat32) {
        EXPECT_EQ(0, std::memcmp(cpu_out[o].data(), gpu_out[o].data(), n * graph::DTypeSize(t.dtype))) << "output " << o;
        continue;
      }
      const float* want = reinterpret_cast<const float*>(cpu_out[o].data());
      const float* got = reinterpret_cast<const float*>(gpu_out[o].data());
      int bad = 0;
      for (int64_t i = 0; i < n && bad < 5; ++i) {
        const float tol = 1e-5f * std::max(1.0f, std::fabs(want[i]));
        if (!(std::fabs(got[i] - want[i]) <= tol)) {
          ADD_FAILURE() << "output " << o << "[" << i << "]: gpu " << got[i] << ", cpu " << want[i];
          ++bad;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tune::executor
