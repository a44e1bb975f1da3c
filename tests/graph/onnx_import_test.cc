// Tests of ImportOnnx on small models: BatchNormalization folding checked against onnxruntime,
// asymmetric pads, symbolic inputs, folded shape arithmetic, and the files it refuses.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/onnx_import.h"
#include "graph/tasks.h"
#include "gtest/gtest.h"
#include "measure/reference.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune::graph {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string SmallModel(const std::string& name) { return std::string(TUNE_ONNX_DIR) + "/" + name; }

std::vector<float> TensorFloats(const Tensor& t) {
  std::vector<float> v(t.NumElements());
  std::memcpy(v.data(), t.data->data(), v.size() * sizeof(float));
  return v;
}

const Node* OnlyTunedNode(const Graph& graph) {
  const Node* found = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.task) {
      EXPECT_EQ(found, nullptr) << "more than one tuned node";
      found = &node;
    }
  }
  return found;
}

// The conv with BatchNormalization folded into its weight and bias computes what onnxruntime
// computes for the original Conv -> BatchNormalization -> Relu.
TEST(OnnxImportTest, BatchNormFoldedIntoConvMatchesOnnxruntime) {
  auto graph = ImportOnnx(SmallModel("conv_bn.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Node* conv = OnlyTunedNode(*graph);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->fused, (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  const codegen::Workload& w = conv->task->workload;
  EXPECT_TRUE(w.bias && w.relu);
  EXPECT_EQ(w.Key(), "conv2d/n1_c3_h16_w16_oc8_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32");
  ASSERT_EQ(conv->task->args.size(), 4u);
  EXPECT_THAT(conv->task->args[1], HasSubstr("bn_folded_weight"));
  EXPECT_EQ(graph->nodes.size(), 1u);  // the BatchNormalization and the Relu are gone

  std::mt19937_64 rng = test::TestRng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1 * 3 * 16 * 16);
  for (float& v : x) v = normal(rng);
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("x.raw"), std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  test::ProcessResult r = test::RunProcess({TUNE_TEST_PYTHON, std::string(TUNE_SOURCE_DIR) + "/scripts/onnx/run_ort.py",
                                            SmallModel("conv_bn.onnx"), dir.Join("x.raw"), "1x3x16x16",
                                            dir.Join("y.raw")},
                                           dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  const std::string bytes = test::ReadFileBytes(dir.Join("y.raw"));
  std::vector<float> want(bytes.size() / 4);
  std::memcpy(want.data(), bytes.data(), want.size() * 4);
  ASSERT_EQ(static_cast<int64_t>(want.size()), w.Output().NumElements());

  std::vector<float> got;
  measure::ComputeReference(w, {x, TensorFloats(*graph->Find(conv->task->args[1])),
                                TensorFloats(*graph->Find(conv->task->args[2]))}, &got);
  std::string why;
  EXPECT_TRUE(measure::AllClose(got.data(), want.data(), got.size(), 0, 1e-4, &why)) << why;
  // Some outputs are positive and some clipped, so the comparison covers both sides of the ReLU.
  EXPECT_GT(std::count_if(want.begin(), want.end(), [](float v) { return v > 0; }), 100);
  EXPECT_GT(std::count(want.begin(), want.end(), 0.0f), 100);
}

// Pads (top 0, left 1, bottom 2, right 1): a Pad node adds 2 rows at the bottom, and the conv
// keeps the symmetric remainder (0 rows, 1 column each side).
TEST(OnnxImportTest, AsymmetricPadsBecomeAPadNodeBeforeTheConv) {
  auto graph = ImportOnnx(SmallModel("conv_asym_pad.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->nodes.size(), 2u);
  const Node& pad = graph->nodes[0];
  const Node& conv = graph->nodes[1];
  EXPECT_EQ(pad.op, "Pad");
  ASSERT_EQ(pad.inputs.size(), 2u);
  const Tensor* pads = graph->Find(pad.inputs[1]);
  ASSERT_TRUE(pads && pads->constant() && pads->dtype == DType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(pads->i64(), pads->i64() + 8), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 2, 0}));
  EXPECT_EQ(graph->Find(pad.outputs[0])->shape, (std::vector<int64_t>{1, 3, 18, 16}));
  ASSERT_TRUE(conv.task);
  EXPECT_EQ(conv.task->args[0], pad.outputs[0]);
  const codegen::Workload& w = conv.task->workload;
  EXPECT_EQ(w.in_h, 18);
  EXPECT_EQ(w.pad_h, 0);
  EXPECT_EQ(w.pad_w, 1);
  EXPECT_EQ(w.out_h(), 16);  // 16 + 0 + 2 - 3 + 1 rows
  EXPECT_EQ(w.out_w(), 16);
  EXPECT_EQ(graph->Find("output")->shape, (std::vector<int64_t>{1, 4, 16, 16}));
  GraphTasks tasks = ExtractGraphTasks(*graph);
  EXPECT_EQ(UntunedSummary(tasks), "not tuned (built-in kernels): Pad x1");
}

TEST(OnnxImportTest, SymbolicBatchNeedsAnInputShape) {
  auto failed = ImportOnnx(SmallModel("resnet18_dynbatch.onnx"));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(failed.status()));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("input 'input' has a symbolic dimension 'batch'; fix it with --input input=1x3x64x64"));
  ImportOptions options;
  std::mt19937_64 rng = test::TestRng(12);
  const int64_t batch = std::uniform_int_distribution<int64_t>(2, 8)(rng);
  ASSERT_TRUE(ParseInputShape("input=" + std::to_string(batch) + "x3x64x64", &options).ok());
  auto graph = ImportOnnx(SmallModel("resnet18_dynbatch.onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->Find("output")->shape, (std::vector<int64_t>{batch, 1000}));
  GraphTasks tasks = ExtractGraphTasks(*graph);
  ASSERT_FALSE(tasks.tasks.empty());
  EXPECT_EQ(tasks.tasks[0].workload.batch, batch);
  EXPECT_EQ(tasks.tasks.back().workload.m, batch);  // the classifier's dense rows

  ImportOptions unknown;
  ASSERT_TRUE(ParseInputShape("image=1x3x64x64", &unknown).ok());
  auto bad = ImportOnnx(SmallModel("resnet18_dynbatch.onnx"), unknown);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no input named 'image'"));
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a fixed input folds to one constant
// shape; only the Reshape and the tuned MatMul remain.
TEST(OnnxImportTest, ShapeArithmeticIsFolded) {
  ImportOptions options;
  ASSERT_TRUE(ParseInputShape("input=3x8x4x4", &options).ok());
  auto graph = ImportOnnx(SmallModel("shape_arith.onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::string> ops;
  for (const Node& node : graph->nodes) ops.push_back(node.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "tune.Task"}));
  const Tensor* shape = graph->Find(graph->nodes[0].inputs[1]);
  ASSERT_TRUE(shape && shape->constant());
  EXPECT_EQ(std::vector<int64_t>(shape->i64(), shape->i64() + shape->NumElements()),
            (std::vector<int64_t>{3, 8, -1}));
  EXPECT_EQ(graph->nodes[1].task->workload.Key(), codegen::Workload::Parse(codegen::OpKind::kMatmul, "24,8,16")->Key());
  EXPECT_EQ(graph->Find("output")->shape, (std::vector<int64_t>{3, 8, 8}));
}

TEST(OnnxImportTest, ParseInputShapeChecksItsText) {
  ImportOptions options;
  EXPECT_TRUE(ParseInputShape("ids=1x128", &options).ok());
  EXPECT_EQ(options.input_shapes.at("ids"), (std::vector<int64_t>{1, 128}));
  for (const char* bad : {"ids", "=1x2", "ids=", "ids=1x0", "ids=1x-2", "ids=1xx2", "ids=axb", "ids=1x99999999999"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseInputShape(bad, &options))) << bad;
  }
}

// Files tune refuses: each an InvalidArgument of one line that names the file.
TEST(OnnxImportTest, RefusedFilesAreOneLineErrors) {
  std::mt19937_64 rng = test::TestRng(13);
  std::string random_bytes(4096, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng());
  random_bytes[0] = 0x08;  // looks like a ModelProto's first field, then garbage
  const std::string resnet = test::ReadFileBytes(SmallModel("resnet18.onnx"));
  ASSERT_GT(resnet.size(), 1000u);
  struct Case {
    std::string name, bytes, message;
  };
  std::vector<Case> cases = {
      {"random.onnx", random_bytes, "not a readable ONNX model"},
      {"truncated.onnx", resnet.substr(0, resnet.size() / 2), "malformed or truncated"},
      {"conv_bn_external.onnx", "", "external file"},
      {"opset5.onnx", "", "opset 5 of the default ONNX domain is not supported"},
      {"conv3d.onnx", "", "(Conv): only 2-D convolutions with constant weights are tuned"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Graph> graph = c.bytes.empty() ? ImportOnnx(SmallModel(c.name)) : ImportOnnxBytes(c.bytes, c.name);
    ASSERT_FALSE(graph.ok()) << c.name;
    EXPECT_TRUE(absl::IsInvalidArgument(graph.status())) << graph.status();
    const std::string message(graph.status().message());
    EXPECT_THAT(message, HasSubstr(c.message));
    EXPECT_THAT(message, HasSubstr(c.name));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_TRUE(absl::IsNotFound(ImportOnnx(SmallModel("no_such_model.onnx")).status()));
  EXPECT_TRUE(LooksLikeOnnx(resnet));
  EXPECT_FALSE(LooksLikeOnnx("{\"name\": \"tiny\", \"layers\": []}"));
}

}  // namespace
}  // namespace tune::graph
