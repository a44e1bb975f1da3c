// Tests of ImportOnnx on the exported ResNet-18, MobileNet-V2 and encoder (64x64, 16 tokens):
// the task lists and untuned ops expected from the architectures.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/onnx_import.h"
#include "graph/tasks.h"
#include "gtest/gtest.h"

namespace tune::graph {
namespace {

using codegen::OpKind;
using codegen::Workload;

Workload ModelConv(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t pad, int64_t groups,
                   bool relu, bool relu6 = false) {
  Workload w;
  w.op = OpKind::kConv2d;
  w.batch = 1;
  w.in_c = c;
  w.in_h = w.in_w = hw;
  w.out_c = oc;
  w.kernel_h = w.kernel_w = k;
  w.stride_h = w.stride_w = stride;
  w.pad_h = w.pad_w = pad;
  w.groups = groups;
  w.bias = true;
  w.relu = relu;
  w.relu6 = relu6;
  return w;
}

Workload ModelGemm(OpKind op, int64_t batch, int64_t m, int64_t n, int64_t k, bool bias) {
  Workload w;
  w.op = op;
  w.batch = batch;
  w.m = m;
  w.n = n;
  w.k = k;
  w.bias = bias;
  return w;
}

/// Workload key -> count of a graph's tasks.
std::map<std::string, int> TaskCounts(const GraphTasks& tasks) {
  std::map<std::string, int> counts;
  for (const GraphTask& t : tasks.tasks) counts[t.workload.Key()] += t.count;
  return counts;
}

void Expect(std::map<std::string, int>& expected, const Workload& w, int count) { expected[w.Key()] += count; }

GraphTasks ImportTasks(const std::string& model, Graph* graph_out = nullptr) {
  auto graph = ImportOnnx(std::string(TUNE_ONNX_DIR) + "/" + model);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return {};
  if (graph_out) *graph_out = *graph;
  return ExtractGraphTasks(*graph);
}

TEST(OnnxModelsTest, ResNet18TasksFollowTheArchitecture) {
  Graph graph;
  GraphTasks tasks = ImportTasks("resnet18.onnx", &graph);
  std::map<std::string, int> expected;
  Expect(expected, ModelConv(3, 64, 64, 7, 2, 3, 1, true), 1);  // conv1 -> 32x32, maxpool -> 16x16
  // layer1: two basic blocks of 64 channels at 16x16; the first conv of a block has the ReLU,
  // the second feeds the residual Add.
  Expect(expected, ModelConv(64, 16, 64, 3, 1, 1, 1, true), 2);
  Expect(expected, ModelConv(64, 16, 64, 3, 1, 1, 1, false), 2);
  // layer2..4: a strided first conv, a 1x1 strided downsample, then three convs at the new size.
  int64_t c = 64, hw = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t oc = c * 2, ohw = hw / 2;
    Expect(expected, ModelConv(c, hw, oc, 3, 2, 1, 1, true), 1);
    Expect(expected, ModelConv(c, hw, oc, 1, 2, 0, 1, false), 1);
    Expect(expected, ModelConv(oc, ohw, oc, 3, 1, 1, 1, true), 1);
    Expect(expected, ModelConv(oc, ohw, oc, 3, 1, 1, 1, false), 2);
    c = oc;
    hw = ohw;
  }
  Expect(expected, ModelGemm(OpKind::kDense, 1, 1, 1000, 512, true), 1);  // fc: Gemm transB=1
  EXPECT_EQ(TaskCounts(tasks), expected);
  EXPECT_EQ(tasks.tasks.size(), 16u);
  EXPECT_EQ(tasks.tuned_nodes, 21);
  ASSERT_FALSE(tasks.tasks.empty());
  EXPECT_EQ(tasks.tasks[0].name, "/conv1/Conv");
  EXPECT_EQ(tasks.tasks[0].workload.Key(), ModelConv(3, 64, 64, 7, 2, 3, 1, true).Key());
  EXPECT_EQ(tasks.untuned_ops, (std::map<std::string, int>{
                                   {"Add", 8}, {"Relu", 8}, {"MaxPool", 1}, {"GlobalAveragePool", 1}, {"Flatten", 1}}));
  EXPECT_EQ(UntunedSummary(tasks),
            "not tuned (built-in kernels): Add x8, Relu x8, MaxPool x1, GlobalAveragePool x1, Flatten x1");
  // Every tuned node's kernel tensors exist with the workload's element counts.
  ASSERT_EQ(graph.inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(graph.Find("output")->shape, (std::vector<int64_t>{1, 1000}));
  for (const Node& node : graph.nodes) {
    if (!node.task) continue;
    std::vector<codegen::TensorSpec> specs = node.task->workload.Inputs();
    specs.push_back(node.task->workload.Output());
    ASSERT_EQ(node.task->args.size(), specs.size()) << node.name;
    for (size_t i = 0; i < specs.size(); ++i) {
      const Tensor* t = graph.Find(node.task->args[i]);
      ASSERT_NE(t, nullptr) << node.task->args[i];
      EXPECT_EQ(t->NumElements(), specs[i].NumElements()) << node.name << " arg " << i;
    }
  }
}

TEST(OnnxModelsTest, MobileNetV2TasksHaveDepthwiseConvsWithRelu6) {
  GraphTasks tasks = ImportTasks("mobilenet_v2.onnx");
  std::map<std::string, int> expected;
  Expect(expected, ModelConv(3, 64, 32, 3, 2, 1, 1, false, true), 1);  // features.0 -> 32x32
  // Inverted residual blocks (expansion t, channels c, repeats n, first stride s): a 1x1
  // expansion with ReLU6 (not for t = 1), a 3x3 depthwise conv with ReLU6, a linear 1x1 projection.
  struct Setting { int64_t t, c, n, s; };
  int64_t c = 32, hw = 32;
  for (const Setting& st : {Setting{1, 16, 1, 1}, Setting{6, 24, 2, 2}, Setting{6, 32, 3, 2}, Setting{6, 64, 4, 2},
                            Setting{6, 96, 3, 1}, Setting{6, 160, 3, 2}, Setting{6, 320, 1, 1}}) {
    for (int64_t i = 0; i < st.n; ++i) {
      const int64_t stride = i == 0 ? st.s : 1, hidden = c * st.t, ohw = (hw + stride - 1) / stride;
      if (st.t != 1) Expect(expected, ModelConv(c, hw, hidden, 1, 1, 0, 1, false, true), 1);
      Expect(expected, ModelConv(hidden, hw, hidden, 3, stride, 1, hidden, false, true), 1);
      Expect(expected, ModelConv(hidden, ohw, st.c, 1, 1, 0, 1, false), 1);
      c = st.c;
      hw = ohw;
    }
  }
  Expect(expected, ModelConv(320, 2, 1280, 1, 1, 0, 1, false, true), 1);
  Expect(expected, ModelGemm(OpKind::kDense, 1, 1, 1000, 1280, true), 1);
  EXPECT_EQ(TaskCounts(tasks), expected);
  EXPECT_EQ(tasks.tuned_nodes, 53);
  int depthwise = 0;
  for (const GraphTask& t : tasks.tasks) depthwise += t.workload.depthwise() ? t.count : 0;
  EXPECT_EQ(depthwise, 17);
  EXPECT_EQ(tasks.untuned_ops, (std::map<std::string, int>{{"Add", 10}, {"GlobalAveragePool", 1}, {"Flatten", 1}}));
}

TEST(OnnxModelsTest, EncoderProjectionsAreMatmulsAndAttentionIsBatchMatmul) {
  Graph graph;
  GraphTasks tasks = ImportTasks("encoder.onnx", &graph);
  std::map<std::string, int> expected;
  Expect(expected, ModelGemm(OpKind::kMatmul, 1, 16, 64, 64, true), 4);    // Q, K, V, output projection
  Expect(expected, ModelGemm(OpKind::kBatchMatmul, 4, 16, 16, 16, false), 2);  // Q K^T and softmax V, 4 heads
  Expect(expected, ModelGemm(OpKind::kMatmul, 1, 16, 256, 64, true), 1);   // FFN in
  Expect(expected, ModelGemm(OpKind::kMatmul, 1, 16, 64, 256, true), 1);   // FFN out
  EXPECT_EQ(TaskCounts(tasks), expected);
  ASSERT_FALSE(tasks.tasks.empty());
  EXPECT_EQ(tasks.tasks[0].name, "/q/MatMul");
  // GELU (Div, Erf, Add, Mul), the residual adds and the decomposed LayerNorms stay built-in.
  EXPECT_EQ(tasks.untuned_ops, (std::map<std::string, int>{{"Gather", 1}, {"Add", 8}, {"Reshape", 4}, {"Transpose", 4},
                                                            {"Div", 4}, {"Softmax", 1}, {"ReduceMean", 4}, {"Sub", 2},
                                                            {"Pow", 2}, {"Sqrt", 2}, {"Mul", 4}, {"Erf", 1}}));
  EXPECT_EQ(graph.Find("ids")->dtype, DType::kInt64);
  EXPECT_EQ(graph.Find("output")->shape, (std::vector<int64_t>{1, 16, 64}));
  // The scores' shape comes from the folded Reshape/Transpose chain.
  for (const Node& node : graph.nodes) {
    if (node.op == "Softmax") EXPECT_EQ(graph.Find(node.inputs[0])->shape, (std::vector<int64_t>{1, 4, 16, 16}));
  }
}

}  // namespace
}  // namespace tune::graph
