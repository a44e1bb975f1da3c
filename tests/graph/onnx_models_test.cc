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

}  // namespace
}  // namespace tune::graph
