// NCHWc plans run: the layout transform kernels move each channel where NCHWc puts it, and a
// graph planned with PlanBlockedLayout gives the unplanned graph's outputs (default schedules).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/runtime/runtime.h"
#include "executor/backend.h"
#include "executor/builtin_ops.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/layout.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/common/random_values.h"
#include "tests/executor/default_plan_run.h"
#include "tests/graph/onnx_writer.h"

namespace tune::executor {
namespace {

namespace px = tune::test_onnx;

TEST(LayoutPlanKernelTest, ToBlockedAndToNchwMoveEveryChannelToItsBlock) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> extent(1, 5), pick(0, 2);
  for (int round = 0; round < 20; ++round) {
    const int64_t block = std::vector<int64_t>{1, 4, 8}[pick(rng)];
    const int64_t n = extent(rng), cb = extent(rng), h = extent(rng), w = extent(rng), c = cb * block;
    SCOPED_TRACE(testing::Message() << n << "x" << c << "x" << h << "x" << w << " block " << block);
    graph::Tensor nchw = test::FloatTensor("x", {n, c, h, w}), blocked = test::FloatTensor("y", {n, cb, h, w, block});
    const auto [to, back] = test::LayoutCopyNodes(block);
    auto to_kernel = CreateBuiltinKernel(to, {&nchw}, {&blocked}, 13);
    ASSERT_TRUE(to_kernel.ok()) << to_kernel.status();
    auto back_kernel = CreateBuiltinKernel(back, {&blocked}, {&nchw}, 13);
    ASSERT_TRUE(back_kernel.ok()) << back_kernel.status();
    const std::vector<float> x = test::RandomValues(n * c * h * w, rng);
    std::vector<float> y(x.size(), NAN), z(x.size(), NAN);
    const void* in[] = {x.data()};
    void* out[] = {y.data()};
    (*to_kernel)->Run(in, out);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < h * w; ++p) {
          ASSERT_EQ(y[((i * cb + ch / block) * h * w + p) * block + ch % block], x[(i * c + ch) * h * w + p])
              << "image " << i << " channel " << ch << " pixel " << p;
        }
      }
    }
    const void* in2[] = {y.data()};
    void* out2[] = {z.data()};
    (*back_kernel)->Run(in2, out2);
    EXPECT_EQ(z, x);
  }
  // Shapes that do not fit the block are refused.
  graph::Tensor nchw = test::FloatTensor("x", {1, 12, 2, 2}), blocked = test::FloatTensor("y", {1, 1, 2, 2, 8});
  graph::Node to;
  to.name = "to";
  to.op = graph::kToBlockedOp;
  to.attributes["block"] = int64_t{8};
  EXPECT_FALSE(CreateBuiltinKernel(to, {&nchw}, {&blocked}, 13).ok());
  const std::vector<std::string> ops = BuiltinOps();
  EXPECT_EQ(std::count(ops.begin(), ops.end(), graph::kToBlockedOp), 0)
      << "the layout transforms are CPU-only, not among the ops every backend covers";
}

/// A residual model: x -> conv (C -> 16, 3x3, bias) -> conv (16 -> 16) + Relu -> conv (16 -> 16,
/// stride 2 pad 1) ... with an Add, a Clip(0, 6), a Mul of two activations, a Sigmoid and a
/// GlobalAveragePool; outputs the pool and one blocked activation.
std::string LayoutPlanModel(int64_t in_c, std::mt19937_64& rng) {
  const std::vector<std::string> pad1 = {px::AttrInts("pads", {1, 1, 1, 1})};
  return px::Model(
      {px::Node("Conv", {"x", "w0", "b0"}, {"c0"}, pad1, "conv0"),
       px::Node("Conv", {"c0", "w1"}, {"c1"}, pad1, "conv1"),
       px::Node("Relu", {"c1"}, {"r1"}, {}, "relu1"),
       px::Node("Conv", {"r1", "w2", "b2"}, {"c2"}, pad1, "conv2"),
       px::Node("Add", {"c2", "r1"}, {"s"}, {}, "add"),
       px::Node("Clip", {"s", "lo", "hi"}, {"cl"}, {}, "clip"),
       px::Node("Sigmoid", {"c2"}, {"sg"}, {}, "sigmoid"),
       px::Node("Mul", {"cl", "sg"}, {"m"}, {}, "mul"),
       px::Node("Conv", {"m", "w3"}, {"c3"}, {px::AttrInts("pads", {1, 1, 1, 1}), px::AttrInts("strides", {2, 2})},
                "conv3"),
       px::Node("GlobalAveragePool", {"c3"}, {"y"}, {}, "pool")},
      {px::Value("x", px::kFloat, {2, in_c, 9, 9})},
      {px::Value("y", px::kFloat, {2, 16, 1, 1}), px::Value("m", px::kFloat, {2, 16, 9, 9})},
      {px::TensorF32("w0", {16, in_c, 3, 3}, test::RandomValues(16 * in_c * 9, rng)),
       px::TensorF32("b0", {16}, test::RandomValues(16, rng)),
       px::TensorF32("w1", {16, 16, 3, 3}, test::RandomValues(16 * 16 * 9, rng)),
       px::TensorF32("w2", {16, 16, 3, 3}, test::RandomValues(16 * 16 * 9, rng)),
       px::TensorF32("b2", {16}, test::RandomValues(16, rng)),
       px::TensorF32("w3", {16, 16, 3, 3}, test::RandomValues(16 * 16 * 9, rng)),
       px::TensorF32("lo", {}, {0.0f}), px::TensorF32("hi", {}, {0.5f})});
}

TEST(LayoutPlanRunTest, CreatingAPlanForgetsWeightsPackedBefore) {
  // Weights packed once are kept by kernel and weight address; a new plan's weights may sit
  // where an earlier plan's were (the NCHWc defaults pack once), so creating a plan forgets
  // every packing: the next request for an old key is fresh.
  static const float kWeight[4] = {1, 2, 3, 4};
  int fresh = 0;
  void* b = tune_rt_prepacked("layout-plan-test-kernel", kWeight, sizeof(kWeight), &fresh);
  ASSERT_EQ(fresh, 1);
  tune_rt_prepacked_release(b);
  b = tune_rt_prepacked("layout-plan-test-kernel", kWeight, sizeof(kWeight), &fresh);
  EXPECT_EQ(fresh, 0) << "kept between calls";
  tune_rt_prepacked_release(b);
  std::mt19937_64 rng(std::random_device{}());
  auto g = graph::ImportOnnxBytes(LayoutPlanModel(16, rng), "layout.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::PlanBlockedLayout(*g, 16).ok());
  auto backend = CreateBackend("llvm", 1);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::shared_ptr<const Backend> shared = *std::move(backend);
  auto choices = ChooseTaskKernels(*g, *shared, nullptr);
  ASSERT_TRUE(choices.ok()) << choices.status();
  auto plan = ExecutionPlan::Create(*g, shared, *choices);
  ASSERT_TRUE(plan.ok()) << plan.status();
  b = tune_rt_prepacked("layout-plan-test-kernel", kWeight, sizeof(kWeight), &fresh);
  EXPECT_EQ(fresh, 1) << "a packing made before the plan survived its creation";
  tune_rt_prepacked_release(b);
}

TEST(LayoutPlanRunTest, PlannedGraphGivesTheUnplannedGraphsOutputs) {
  std::mt19937_64 rng(std::random_device{}());
  for (int64_t in_c : {3, 16}) {  // conv0 NCHW (then a ToBlocked after it), or NCHWc from the input on
    SCOPED_TRACE(in_c);
    auto g = graph::ImportOnnxBytes(LayoutPlanModel(in_c, rng), "layout.onnx");
    ASSERT_TRUE(g.ok()) << g.status();
    graph::Graph planned = *g;
    ASSERT_TRUE(graph::PlanBlockedLayout(planned, 8).ok());
    int blocked = 0, transforms = 0;
    for (const graph::Node& node : planned.nodes) {
      blocked += node.task && node.task->workload.layout_block == 8;
      transforms += node.op == graph::kToBlockedOp || node.op == graph::kToNchwOp;
    }
    EXPECT_EQ(blocked, in_c == 3 ? 3 : 4);
    EXPECT_EQ(transforms, 3) << "one ToBlocked, a ToNchw for the pool and one for the output m";
    const std::vector<std::vector<float>> inputs = {test::RandomValues(2 * in_c * 81, rng)};
    const auto want = test::RunDefaultPlan(*g, inputs, 1);
    const auto got = test::RunDefaultPlan(planned, inputs, 1);
    ASSERT_EQ(want.size(), 2u);
    ASSERT_EQ(got.size(), 2u);
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].size(), want[o].size());
      for (size_t i = 0; i < want[o].size(); ++i) {
        ASSERT_NEAR(got[o][i], want[o][i], 1e-4 + 1e-4 * std::fabs(want[o][i])) << "output " << o << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tune::executor
