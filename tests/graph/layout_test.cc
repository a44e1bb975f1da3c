// PlanBlockedLayout: which convolutions and elementwise ops go NCHWc, in which block, and where
// the layout transforms and re-blockings go (one per tensor and block, only where the layout or
// the block changes); BlockableConv's and ConvLayoutBlock's rules.
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "graph/layout.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/graph/onnx_writer.h"

namespace tune::test {
namespace {

namespace px = tune::test_onnx;

std::vector<float> LayoutRandomFloats(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

/// x[1,3,8,8] -> conv0 (3 -> 16, 3x3) -> conv1 (16 -> 16) + Relu -> conv2 (16 -> 16) ->
/// Add(conv2, the Relu) -> Relu -> GlobalAveragePool -> y[1,16,1,1].
graph::Graph LayoutResidualGraph(std::mt19937_64& rng) {
  const std::string bytes = px::Model(
      {px::Node("Conv", {"x", "w0", "b0"}, {"c0"}, {px::AttrInts("pads", {1, 1, 1, 1})}, "conv0"),
       px::Node("Conv", {"c0", "w1"}, {"c1"}, {px::AttrInts("pads", {1, 1, 1, 1})}, "conv1"),
       px::Node("Relu", {"c1"}, {"r1"}, {}, "relu1"),
       px::Node("Conv", {"r1", "w2", "b2"}, {"c2"}, {px::AttrInts("pads", {1, 1, 1, 1})}, "conv2"),
       px::Node("Add", {"c2", "r1"}, {"s"}, {}, "add"),
       px::Node("Relu", {"s"}, {"rs"}, {}, "relu2"),
       px::Node("GlobalAveragePool", {"rs"}, {"y"}, {}, "pool")},
      {px::Value("x", px::kFloat, {1, 3, 8, 8})}, {px::Value("y", px::kFloat, {1, 16, 1, 1})},
      {px::TensorF32("w0", {16, 3, 3, 3}, LayoutRandomFloats(16 * 3 * 9, rng)),
       px::TensorF32("b0", {16}, LayoutRandomFloats(16, rng)),
       px::TensorF32("w1", {16, 16, 3, 3}, LayoutRandomFloats(16 * 16 * 9, rng)),
       px::TensorF32("w2", {16, 16, 3, 3}, LayoutRandomFloats(16 * 16 * 9, rng)),
       px::TensorF32("b2", {16}, LayoutRandomFloats(16, rng))});
  auto g = graph::ImportOnnxBytes(bytes, "residual.onnx");
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : graph::Graph{};
}

std::vector<std::string> LayoutOps(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const graph::Node& node : g.nodes) ops.push_back(node.op);
  return ops;
}

int LayoutCount(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node& node : g.nodes) n += node.op == op;
  return n;
}

/// Every input of every node is a graph input, a constant or an output of an earlier node.
void ExpectTopological(const graph::Graph& g) {
  std::set<std::string> ready(g.inputs.begin(), g.inputs.end());
  for (const auto& [name, t] : g.tensors) {
    if (t.constant()) ready.insert(name);
  }
  for (const graph::Node& node : g.nodes) {
    for (const std::string& in : node.inputs) {
      EXPECT_TRUE(in.empty() || ready.count(in)) << node.name << " reads " << in << " before it is computed";
      EXPECT_TRUE(in.empty() || g.Find(in) != nullptr) << node.name << " reads " << in << ", which has no tensor";
    }
    for (const std::string& out : node.outputs) {
      EXPECT_FALSE(ready.count(out)) << out << " is computed twice";
      EXPECT_NE(g.Find(out), nullptr) << node.name << " writes " << out << ", which has no tensor";
      ready.insert(out);
    }
  }
  for (const std::string& out : g.outputs) EXPECT_TRUE(ready.count(out)) << "output " << out << " is not computed";
}

TEST(LayoutPlanTest, ResidualBlockStaysBlockedBetweenItsConvolutions) {
  std::mt19937_64 rng(std::random_device{}());
  for (int64_t block : {4, 8, 16}) {
    SCOPED_TRACE(block);
    graph::Graph g = LayoutResidualGraph(rng);
    ASSERT_EQ(LayoutOps(g), (std::vector<std::string>{"tune.Task", "tune.Task", "tune.Task", "Add", "Relu",
                                                       "GlobalAveragePool"}));
    const std::string c0 = g.nodes[0].outputs[0], pool_in = g.nodes[5].inputs[0];
    ASSERT_TRUE(graph::PlanBlockedLayout(g, block).ok());
    ExpectTopological(g);
    EXPECT_EQ(LayoutOps(g), (std::vector<std::string>{"tune.Task", "tune.ToBlocked", "tune.Task", "tune.Task", "Add",
                                                       "Relu", "tune.ToNchw", "GlobalAveragePool"}));
    // The 3-channel conv keeps NCHW; one ToBlocked after it, one ToNchw before the pool.
    EXPECT_EQ(g.nodes[0].task->workload.layout_block, 0);
    EXPECT_EQ(g.nodes[0].outputs[0], c0);
    EXPECT_EQ(g.nodes[1].inputs, (std::vector<std::string>{c0}));
    EXPECT_EQ(g.Find(g.nodes[1].outputs[0])->shape, (std::vector<int64_t>{1, 16 / block, 8, 8, block}));
    for (int i : {2, 3}) {
      const graph::TaskBinding& task = *g.nodes[i].task;
      EXPECT_EQ(task.workload.layout_block, block) << g.nodes[i].name;
      EXPECT_NE(task.workload.Key().find("_nchw" + std::to_string(block) + "c/"), std::string::npos);
      EXPECT_EQ(g.nodes[i].inputs, std::vector<std::string>(task.args.begin(), task.args.end() - 1));
      EXPECT_EQ(g.nodes[i].outputs, std::vector<std::string>{task.args.back()});
      EXPECT_EQ(g.Find(task.args.front())->shape, task.workload.Inputs()[0].shape);
      EXPECT_EQ(g.Find(task.args.back())->shape, task.workload.Output().shape);
    }
    EXPECT_EQ(g.nodes[2].inputs[0], g.nodes[1].outputs[0]);  // conv1 reads the ToBlocked output
    EXPECT_EQ(g.nodes[3].inputs[0], g.nodes[2].outputs[0]);  // conv2 reads conv1's blocked output
    // The Add reads both blocked tensors; the Relu after it too; the ToNchw gives the pool its
    // old input under its old name.
    EXPECT_EQ(g.nodes[4].inputs, (std::vector<std::string>{g.nodes[3].outputs[0], g.nodes[2].outputs[0]}));
    EXPECT_EQ(g.nodes[5].inputs[0], g.nodes[4].outputs[0]);
    EXPECT_EQ(g.Find(g.nodes[5].outputs[0])->shape.size(), 5u);
    EXPECT_EQ(g.nodes[6].inputs[0], g.nodes[5].outputs[0]);
    EXPECT_EQ(g.nodes[6].outputs[0], pool_in);
    EXPECT_EQ(g.Find(pool_in)->shape, (std::vector<int64_t>{1, 16, 8, 8}));
    EXPECT_EQ(g.outputs, std::vector<std::string>{"y"});
  }
}

// A blocked tensor read by several NCHW readers and by the graph's outputs gets one ToNchw;
// a per-channel Mul (a broadcast) and a grouped (not depthwise) conv stay NCHW; a Sigmoid runs
// blocked and its output, a graph output, comes back through a ToNchw at the end.
TEST(LayoutPlanTest, OneToNchwPerTensorOnlyWhereNeeded) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string bytes = px::Model(
      {px::Node("Conv", {"x", "wa"}, {"ta"}, {}, "conva"),
       px::Node("Mul", {"ta", "scale"}, {"m"}, {}, "mul"),
       px::Node("Sigmoid", {"ta"}, {"sg"}, {}, "sigmoid"),
       px::Node("Conv", {"ta", "wd"}, {"d"}, {px::AttrInt("group", 2), px::AttrInts("pads", {1, 1, 1, 1})}, "grouped")},
      {px::Value("x", px::kFloat, {1, 16, 6, 6})},
      {px::Value("m", px::kFloat, {1, 16, 6, 6}), px::Value("sg", px::kFloat, {1, 16, 6, 6}),
       px::Value("d", px::kFloat, {1, 16, 6, 6}), px::Value("ta", px::kFloat, {1, 16, 6, 6})},
      {px::TensorF32("wa", {16, 16, 1, 1}, LayoutRandomFloats(256, rng)),
       px::TensorF32("scale", {1, 16, 1, 1}, LayoutRandomFloats(16, rng)),
       px::TensorF32("wd", {16, 8, 3, 3}, LayoutRandomFloats(16 * 8 * 9, rng))});
  auto g = graph::ImportOnnxBytes(bytes, "fanout.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::PlanBlockedLayout(*g, 8).ok());
  ExpectTopological(*g);
  EXPECT_EQ(LayoutOps(*g), (std::vector<std::string>{"tune.ToBlocked", "tune.Task", "tune.ToNchw", "Mul", "Sigmoid",
                                                      "tune.Task", "tune.ToNchw"}));
  EXPECT_EQ(g->nodes[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g->nodes[1].task->workload.layout_block, 8);
  EXPECT_EQ(g->nodes[2].outputs, std::vector<std::string>{"ta"});
  EXPECT_EQ(g->nodes[3].inputs[0], "ta");
  EXPECT_EQ(g->nodes[4].inputs[0], g->nodes[1].outputs[0]);
  EXPECT_EQ(g->nodes[5].task->workload.groups, 2);
  EXPECT_EQ(g->nodes[5].task->workload.layout_block, 0) << "a grouped conv has no NCHWc form";
  EXPECT_EQ(g->nodes[5].inputs[0], "ta");
  EXPECT_EQ(g->nodes[6].outputs, std::vector<std::string>{"sg"});
  EXPECT_EQ(g->Find("sg")->shape, (std::vector<int64_t>{1, 16, 6, 6}));
  for (const std::string& out : {"m", "sg", "d", "ta"}) EXPECT_NE(g->Find(out), nullptr) << out;
}

// A block that divides no conv's channels leaves the graph as it was; a block outside 1..1024
// is refused.
TEST(LayoutPlanTest, NothingBlockableLeavesTheGraphAlone) {
  std::mt19937_64 rng(std::random_device{}());
  graph::Graph g = LayoutResidualGraph(rng);
  const std::vector<std::string> before = LayoutOps(g);
  const size_t tensors = g.tensors.size();
  ASSERT_TRUE(graph::PlanBlockedLayout(g, 7).ok());
  EXPECT_EQ(LayoutOps(g), before);
  EXPECT_EQ(g.tensors.size(), tensors);
  for (const graph::Node& node : g.nodes) {
    if (node.task) EXPECT_EQ(node.task->workload.layout_block, 0);
  }
  EXPECT_FALSE(graph::PlanBlockedLayout(g, 0).ok());
  EXPECT_FALSE(graph::PlanBlockedLayout(g, 2048).ok());
}

// An inverted-residual block (1x1 expand + Clip(0, 6), 3x3 depthwise + Clip(0, 6), 1x1 project,
// Add with the block's input) runs blocked from its first convolution to its Add: a depthwise
// conv between two dense ones needs no layout transform, only the model's ends do.
TEST(LayoutPlanTest, DepthwiseConvStaysBlockedBetweenDenseOnes) {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<int64_t> bounds{0, 6};
  for (int64_t block : {8, 16}) {
    SCOPED_TRACE(block);
    const std::string bytes = px::Model(
        {px::Node("Conv", {"x", "w0", "b0"}, {"e"}, {}, "expand"),
         px::Node("Clip", {"e", "lo", "hi"}, {"er"}, {}, "expand_relu6"),
         px::Node("Conv", {"er", "wd", "bd"}, {"d"},
                  {px::AttrInt("group", 96), px::AttrInts("pads", {1, 1, 1, 1}), px::AttrInts("strides", {2, 2})},
                  "dw"),
         px::Node("Clip", {"d", "lo", "hi"}, {"dr"}, {}, "dw_relu6"),
         px::Node("Conv", {"dr", "w2", "b2"}, {"p"}, {}, "project"),
         px::Node("Conv", {"x", "ws"}, {"xs"}, {px::AttrInts("strides", {2, 2})}, "shortcut"),
         px::Node("Add", {"p", "xs"}, {"y"}, {}, "add")},
        {px::Value("x", px::kFloat, {1, 32, 9, 9})}, {px::Value("y", px::kFloat, {1, 32, 5, 5})},
        {px::TensorF32("w0", {96, 32, 1, 1}, LayoutRandomFloats(96 * 32, rng)),
         px::TensorF32("b0", {96}, LayoutRandomFloats(96, rng)),
         px::TensorF32("wd", {96, 1, 3, 3}, LayoutRandomFloats(96 * 9, rng)),
         px::TensorF32("bd", {96}, LayoutRandomFloats(96, rng)),
         px::TensorF32("w2", {32, 96, 1, 1}, LayoutRandomFloats(32 * 96, rng)),
         px::TensorF32("b2", {32}, LayoutRandomFloats(32, rng)),
         px::TensorF32("ws", {32, 32, 1, 1}, LayoutRandomFloats(32 * 32, rng)),
         px::TensorF32("lo", {}, {0.0f}), px::TensorF32("hi", {}, {6.0f})});
    auto g = graph::ImportOnnxBytes(bytes, "inverted_residual.onnx");
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(graph::PlanBlockedLayout(*g, block).ok());
    ExpectTopological(*g);
    // One ToBlocked for x (read by expand and the shortcut), one ToNchw for y; nothing between.
    EXPECT_EQ(LayoutCount(*g, graph::kToBlockedOp), 1);
    EXPECT_EQ(LayoutCount(*g, graph::kToNchwOp), 1);
    EXPECT_EQ(g->nodes.front().op, graph::kToBlockedOp);
    EXPECT_EQ(g->nodes.back().op, graph::kToNchwOp);
    EXPECT_EQ(g->nodes.back().outputs, std::vector<std::string>{"y"});
    int convs = 0, depthwise = 0;
    for (const graph::Node& node : g->nodes) {
      if (!node.task) continue;
      ++convs;
      const codegen::Workload& w = node.task->workload;
      EXPECT_EQ(w.layout_block, block) << node.name;
      EXPECT_EQ(g->Find(node.task->args.front())->shape, w.Inputs()[0].shape) << node.name;
      EXPECT_EQ(g->Find(node.task->args.back())->shape, w.Output().shape) << node.name;
      if (w.depthwise()) {
        ++depthwise;
        EXPECT_EQ(w.groups, 96);
        EXPECT_EQ(w.stride_h, 2);
        // It reads the expand conv's blocked output (through the blocked Clip, or the Clip
        // fused into the task) and its output is read blocked.
        EXPECT_EQ(g->Find(node.task->args.front())->shape, (std::vector<int64_t>{1, 96 / block, 9, 9, block}));
      }
    }
    EXPECT_EQ(convs, 4);
    EXPECT_EQ(depthwise, 1);
    EXPECT_EQ(g->Find("y")->shape, (std::vector<int64_t>{1, 32, 5, 5}));
  }
}

TEST(LayoutPlanTest, BlockableConvTakesGroupsOneAndDividingBlocks) {
  auto conv = [](const std::string& shape) {
    auto w = codegen::Workload::Parse(codegen::OpKind::kConv2d, shape);
    EXPECT_TRUE(w.ok()) << shape;
    return *w;
  };
  EXPECT_TRUE(graph::BlockableConv(conv("1,64,56,56,128,3,3,1,1"), 16));
  EXPECT_TRUE(graph::BlockableConv(conv("1,32,14,14,8,1,1"), 8));
  EXPECT_FALSE(graph::BlockableConv(conv("1,3,224,224,64,7,7,2,3"), 16)) << "C 3";
  EXPECT_FALSE(graph::BlockableConv(conv("1,64,56,56,24,1,1"), 16)) << "OC 24";
  EXPECT_FALSE(graph::BlockableConv(conv("1,64,56,56,64,3,3,1,1,1,2"), 16)) << "groups 2";
  EXPECT_TRUE(graph::BlockableConv(conv("1,64,56,56,64,3,3,1,1,1,64"), 16)) << "depthwise";
  EXPECT_TRUE(graph::BlockableConv(conv("1,144,56,56,144,3,3,2,1,1,144"), 8)) << "depthwise, stride 2";
  EXPECT_FALSE(graph::BlockableConv(conv("1,24,56,56,24,3,3,1,1,1,24"), 16)) << "depthwise, C 24";
  EXPECT_FALSE(graph::BlockableConv(conv("1,64,56,56,128,3,3,1,1,1,64"), 16)) << "groups C, OC 2C";
  EXPECT_FALSE(graph::BlockableConv(conv("1,64,56,56,64,3,3,1,1,1,1,nchw16c"), 16)) << "already blocked";
  EXPECT_FALSE(graph::BlockableConv(conv("1,64,56,56,64,3,3"), 0));
  auto dense = codegen::Workload::Parse(codegen::OpKind::kDense, "16,64,64");
  ASSERT_TRUE(dense.ok());
  EXPECT_FALSE(graph::BlockableConv(*dense, 16));
  EXPECT_EQ(graph::BlockedConv(conv("1,64,56,56,128,3,3,1,1"), 16).Key(),
            conv("1,64,56,56,128,3,3,1,1,1,1,nchw16c").Key());
}

// The one rule for a conv's block: the largest of the lanes and half of them (at least 4)
// dividing C and OC; no block where neither does.
TEST(LayoutPlanTest, ConvLayoutBlockTakesTheLargestDividingBlock) {
  auto conv = [](const std::string& shape) {
    auto w = codegen::Workload::Parse(codegen::OpKind::kConv2d, shape);
    EXPECT_TRUE(w.ok()) << shape;
    return *w;
  };
  EXPECT_EQ(graph::LayoutBlocks(16), (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(graph::LayoutBlocks(8), (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(graph::LayoutBlocks(4), (std::vector<int64_t>{4}));
  EXPECT_EQ(graph::LayoutBlocks(7), (std::vector<int64_t>{7}));
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,24,56,56,24,1,1"), 16), 8) << "24 -> 24";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,24,56,56,144,1,1"), 16), 8) << "24 -> 144";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,64,56,56,64,3,3,1,1"), 16), 16) << "64 -> 64";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,64,56,56,24,1,1"), 16), 8) << "64 -> 24";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,3,224,224,64,7,7,2,3"), 16), 0) << "C 3";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,24,56,56,24,3,3,1,1,1,24"), 16), 8) << "depthwise 24";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,144,56,56,144,3,3,2,1,1,144"), 16), 16) << "depthwise 144";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,144,28,28,24,1,1"), 16), 8) << "144 -> 24";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,20,28,28,20,1,1"), 16), 0) << "20: neither 16 nor 8";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,20,28,28,20,1,1"), 8), 4) << "20 with 8 lanes: 4";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,12,28,28,12,1,1"), 4), 4);
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,6,28,28,6,1,1"), 4), 0) << "no block below 4";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,48,28,28,48,3,3,1,1,1,2"), 16), 0) << "groups 2";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,24,28,28,24,1,1,1,0,1,1,nchw8c"), 16), 0) << "already blocked";
  EXPECT_EQ(graph::ConvLayoutBlock(conv("1,24,28,28,24,1,1"), 0), 0);
}

int64_t LayoutIntAttr(const graph::Node& node, const std::string& key) {
  auto it = node.attributes.find(key);
  if (it == node.attributes.end() || !std::holds_alternative<int64_t>(it->second)) return -1;
  return std::get<int64_t>(it->second);
}

/// x[1,16,7,5] -> conv a (16 -> 32, 3x3): blocks of 16 -> conv b (32 -> 24, 1x1): blocks of 8
/// -> Sigmoid -> conv c (24 -> 32): blocks of 8; conv d (x -> 32, 1x1): blocks of 16; Add(c, d)
/// -> Relu -> y[1,32,7,5]; conv a's output is a graph output too.
std::string LayoutMixedBlocksModel(std::mt19937_64& rng) {
  const std::vector<std::string> pad1 = {px::AttrInts("pads", {1, 1, 1, 1})};
  return px::Model({px::Node("Conv", {"x", "wa", "ba"}, {"a"}, pad1, "conva"),
                    px::Node("Conv", {"a", "wb"}, {"b"}, {}, "convb"),
                    px::Node("Sigmoid", {"b"}, {"rb"}, {}, "sigmoidb"),
                    px::Node("Conv", {"rb", "wc", "bc"}, {"c"}, {}, "convc"),
                    px::Node("Conv", {"x", "wd"}, {"d"}, {}, "convd"),
                    px::Node("Add", {"c", "d"}, {"s"}, {}, "add"),
                    px::Node("Relu", {"s"}, {"y"}, {}, "relu")},
                   {px::Value("x", px::kFloat, {1, 16, 7, 5})},
                   {px::Value("y", px::kFloat, {1, 32, 7, 5}), px::Value("a", px::kFloat, {1, 32, 7, 5})},
                   {px::TensorF32("wa", {32, 16, 3, 3}, LayoutRandomFloats(32 * 16 * 9, rng)),
                    px::TensorF32("ba", {32}, LayoutRandomFloats(32, rng)),
                    px::TensorF32("wb", {24, 32, 1, 1}, LayoutRandomFloats(24 * 32, rng)),
                    px::TensorF32("wc", {32, 24, 1, 1}, LayoutRandomFloats(32 * 24, rng)),
                    px::TensorF32("bc", {32}, LayoutRandomFloats(32, rng)),
                    px::TensorF32("wd", {32, 16, 1, 1}, LayoutRandomFloats(32 * 16, rng))});
}

// Convolutions of different blocks: a 16-block conv feeding an 8-block one gets one Reblock
// between them (no NCHW round trip), and an Add of an 8-block and a 16-block tensor re-blocks
// the 8-block one to 16.
TEST(LayoutPlanTest, DifferentBlocksMeetThroughOneReblock) {
  std::mt19937_64 rng(std::random_device{}());
  auto g = graph::ImportOnnxBytes(LayoutMixedBlocksModel(rng), "mixed.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::PlanBlockedLayout(*g, 16).ok());
  ExpectTopological(*g);
  std::vector<std::string> ops = LayoutOps(*g);
  EXPECT_EQ(ops, (std::vector<std::string>{"tune.ToBlocked", "tune.Task", "tune.Reblock", "tune.Task", "Sigmoid",
                                           "tune.Task", "tune.Task", "tune.Reblock", "Add", "Relu", "tune.ToNchw",
                                           "tune.ToNchw"}));
  auto node = [&](const std::string& name) -> const graph::Node& {
    for (const graph::Node& n : g->nodes) {
      if (n.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return g->nodes.front();
  };
  auto block = [&](const std::string& tensor) {
    const std::vector<int64_t>& shape = g->Find(tensor)->shape;
    return shape.size() == 5 ? shape[4] : int64_t{0};
  };
  EXPECT_EQ(node("conva").task->workload.layout_block, 16);
  EXPECT_EQ(node("convb").task->workload.layout_block, 8);
  EXPECT_EQ(node("convc").task->workload.layout_block, 8);
  EXPECT_EQ(node("convd").task->workload.layout_block, 16);
  // x goes blocked once (16, for conv a and conv d).
  EXPECT_EQ(g->nodes[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(LayoutIntAttr(g->nodes[0], "block"), 16);
  // conv a's 16-block output, re-blocked to 8 for conv b.
  const graph::Node& to8 = g->nodes[2];
  EXPECT_EQ(to8.inputs, node("conva").outputs);
  EXPECT_EQ(LayoutIntAttr(to8, "from"), 16);
  EXPECT_EQ(LayoutIntAttr(to8, "to"), 8);
  EXPECT_EQ(g->Find(to8.outputs[0])->shape, (std::vector<int64_t>{1, 4, 7, 5, 8}));
  EXPECT_EQ(node("convb").inputs[0], to8.outputs[0]);
  EXPECT_EQ(block(node("sigmoidb").outputs[0]), 8);
  EXPECT_EQ(node("convc").inputs[0], node("sigmoidb").outputs[0]);
  // The Add runs in blocks of 16: conv c's output re-blocked 8 -> 16, conv d's as it is.
  const graph::Node& to16 = g->nodes[7];
  EXPECT_EQ(to16.inputs, node("convc").outputs);
  EXPECT_EQ(LayoutIntAttr(to16, "from"), 8);
  EXPECT_EQ(LayoutIntAttr(to16, "to"), 16);
  EXPECT_EQ(node("add").inputs, (std::vector<std::string>{to16.outputs[0], node("convd").outputs[0]}));
  EXPECT_EQ(block(node("add").outputs[0]), 16);
  // Both graph outputs come back to NCHW, each from its producer's twin.
  EXPECT_EQ(g->nodes[10].outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(g->nodes[10].inputs, node("relu").outputs);
  EXPECT_EQ(g->nodes[11].outputs, std::vector<std::string>{"a"});
  EXPECT_EQ(g->nodes[11].inputs, node("conva").outputs);
  EXPECT_EQ(LayoutIntAttr(g->nodes[11], "block"), 16);
  EXPECT_EQ(g->Find("y")->shape, (std::vector<int64_t>{1, 32, 7, 5}));
}

}  // namespace
}  // namespace tune::test
