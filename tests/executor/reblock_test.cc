// NCHWc plans of mixed channel blocks run: the Reblock kernel moves every channel from its
// block of one size to its block of another, and a graph whose convolutions take blocks of 16
// and of 8 gives the unplanned graph's outputs (default schedules).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

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

graph::Node ReblockNode(int64_t from, int64_t to) {
  graph::Node node;
  node.name = "reblock";
  node.op = graph::kReblockOp;
  node.attributes["from"] = from;
  node.attributes["to"] = to;
  return node;
}

TEST(ReblockKernelTest, MovesEveryChannelToItsNewBlock) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> extent(1, 5), pick(0, 5), multiple(1, 3);
  const std::vector<int64_t> blocks = {1, 2, 3, 4, 8, 16};
  for (int round = 0; round < 40; ++round) {
    const int64_t from = blocks[pick(rng)], to = blocks[pick(rng)];
    const int64_t c = std::lcm(from, to) * multiple(rng);
    const int64_t n = extent(rng), h = extent(rng), w = extent(rng), hw = h * w;
    SCOPED_TRACE(testing::Message() << n << "x" << c << "x" << h << "x" << w << " blocks " << from << " -> " << to);
    graph::Tensor x = test::FloatTensor("x", {n, c / from, h, w, from}), y = test::FloatTensor("y", {n, c / to, h, w, to});
    auto kernel = CreateBuiltinKernel(ReblockNode(from, to), {&x}, {&y}, 13);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const std::vector<float> xs = test::RandomValues(n * c * hw, rng);
    std::vector<float> ys(xs.size(), NAN);
    const void* in[] = {xs.data()};
    void* out[] = {ys.data()};
    (*kernel)->Run(in, out);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < hw; ++p) {
          ASSERT_EQ(ys[((i * (c / to) + ch / to) * hw + p) * to + ch % to],
                    xs[((i * (c / from) + ch / from) * hw + p) * from + ch % from])
              << "image " << i << " channel " << ch << " pixel " << p;
        }
      }
    }
  }
  // Shapes that do not fit the blocks are refused, and the kernel is CPU-only.
  graph::Tensor x = test::FloatTensor("x", {1, 3, 2, 2, 8}), y = test::FloatTensor("y", {1, 2, 2, 2, 16});
  EXPECT_FALSE(CreateBuiltinKernel(ReblockNode(8, 16), {&x}, {&y}, 13).ok()) << "16 does not divide 24";
  graph::Tensor x2 = test::FloatTensor("x", {1, 4, 2, 2, 8}), y2 = test::FloatTensor("y", {1, 2, 2, 3, 16});
  EXPECT_FALSE(CreateBuiltinKernel(ReblockNode(8, 16), {&x2}, {&y2}, 13).ok()) << "another image size";
  graph::Tensor y3 = test::FloatTensor("y", {1, 2, 2, 2, 16});
  EXPECT_FALSE(CreateBuiltinKernel(ReblockNode(4, 16), {&x2}, {&y3}, 13).ok()) << "the input is not in blocks of 4";
  EXPECT_FALSE(CreateBuiltinKernel(ReblockNode(8, 0), {&x2}, {&y3}, 13).ok());
  const std::vector<std::string> ops = BuiltinOps();
  EXPECT_EQ(std::count(ops.begin(), ops.end(), graph::kReblockOp), 0);
}

/// x[2,16,7,5] -> conv a (16 -> 32, 3x3, bias): blocks of 16 -> conv b (32 -> 24): blocks of 8 ->
/// Sigmoid -> conv c (24 -> 32, bias): blocks of 8; conv d (x -> 32): blocks of 16; Add(c, d)
/// -> Relu -> y; conv a's output is a graph output too.
std::string ReblockMixedModel(std::mt19937_64& rng) {
  const std::vector<std::string> pad1 = {px::AttrInts("pads", {1, 1, 1, 1})};
  return px::Model({px::Node("Conv", {"x", "wa", "ba"}, {"a"}, pad1, "conva"),
                    px::Node("Conv", {"a", "wb"}, {"b"}, {}, "convb"),
                    px::Node("Sigmoid", {"b"}, {"sb"}, {}, "sigmoidb"),
                    px::Node("Conv", {"sb", "wc", "bc"}, {"c"}, {}, "convc"),
                    px::Node("Conv", {"x", "wd"}, {"d"}, {}, "convd"),
                    px::Node("Add", {"c", "d"}, {"s"}, {}, "add"),
                    px::Node("Relu", {"s"}, {"y"}, {}, "relu")},
                   {px::Value("x", px::kFloat, {2, 16, 7, 5})},
                   {px::Value("y", px::kFloat, {2, 32, 7, 5}), px::Value("a", px::kFloat, {2, 32, 7, 5})},
                   {px::TensorF32("wa", {32, 16, 3, 3}, test::RandomValues(32 * 16 * 9, rng)),
                    px::TensorF32("ba", {32}, test::RandomValues(32, rng)),
                    px::TensorF32("wb", {24, 32, 1, 1}, test::RandomValues(24 * 32, rng)),
                    px::TensorF32("wc", {32, 24, 1, 1}, test::RandomValues(32 * 24, rng)),
                    px::TensorF32("bc", {32}, test::RandomValues(32, rng)),
                    px::TensorF32("wd", {32, 16, 1, 1}, test::RandomValues(32 * 16, rng))});
}

TEST(ReblockRunTest, MixedBlocksGiveTheUnplannedGraphsOutputs) {
  std::mt19937_64 rng(std::random_device{}());
  auto g = graph::ImportOnnxBytes(ReblockMixedModel(rng), "mixed.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  graph::Graph planned = *g;
  ASSERT_TRUE(graph::PlanBlockedLayout(planned, 16).ok());
  int by16 = 0, by8 = 0, reblocks = 0, to_blocked = 0, to_nchw = 0;
  for (const graph::Node& node : planned.nodes) {
    if (node.task) {
      by16 += node.task->workload.layout_block == 16;
      by8 += node.task->workload.layout_block == 8;
    }
    reblocks += node.op == graph::kReblockOp;
    to_blocked += node.op == graph::kToBlockedOp;
    to_nchw += node.op == graph::kToNchwOp;
  }
  EXPECT_EQ(by16, 2);
  EXPECT_EQ(by8, 2);
  EXPECT_EQ(reblocks, 2) << "16 -> 8 for conv b, 8 -> 16 for the Add";
  EXPECT_EQ(to_blocked, 1) << "x, once";
  EXPECT_EQ(to_nchw, 2) << "the two graph outputs";
  const std::vector<std::vector<float>> inputs = {test::RandomValues(2 * 16 * 35, rng)};
  const auto want = test::RunDefaultPlan(*g, inputs, 1);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    const auto got = test::RunDefaultPlan(planned, inputs, threads);
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
