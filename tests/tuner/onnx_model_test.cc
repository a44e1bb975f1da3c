// Tests of ONNX models as `tune MODEL` inputs: LoadModel's tasks and summary, the model JSON a
// submit sends, and the real `tune` binary on ONNX files it must refuse.
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string OnnxTestModel(const std::string& name) { return std::string(TUNE_ONNX_DIR) + "/" + name; }

std::map<std::string, int> LayerCounts(const ZooModel& model) {
  std::map<std::string, int> counts;
  for (const ZooLayer& l : model.layers) counts[l.workload.Key()] += l.count;
  return counts;
}

TEST(OnnxModelTest, LoadModelImportsOnnxWithASummaryLine) {
  const std::string path = OnnxTestModel("resnet18.onnx");
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, "resnet18");
  EXPECT_EQ(model->layers.size(), 16u);
  int nodes = 0;
  for (const ZooLayer& l : model->layers) nodes += l.count;
  EXPECT_EQ(nodes, 21);
  EXPECT_EQ(model->layers[0].name, "/conv1/Conv");
  EXPECT_EQ(model->summary, path + ": 21 tuned nodes in 16 tasks; not tuned (built-in kernels): Add x8, Relu x8, "
                                   "MaxPool x1, GlobalAveragePool x1, Flatten x1");
  // --input is for ONNX models only.
  EXPECT_TRUE(absl::IsInvalidArgument(LoadModel("resnet-18", {"input=1x3x64x64"}).status()));
  EXPECT_TRUE(IsOnnxModel(path));
  EXPECT_FALSE(IsOnnxModel("resnet-18"));
}

// The model JSON a submit sends reads back to the same workloads and counts, relu6 included.
TEST(OnnxModelTest, ModelJsonOfAnImportedModelRoundTrips) {
  for (const char* name : {"mobilenet_v2.onnx", "encoder.onnx", "conv_asym_pad.onnx"}) {
    auto model = LoadModel(OnnxTestModel(name));
    ASSERT_TRUE(model.ok()) << model.status();
    auto back = ParseModelJson(ModelToJson(*model), "submitted");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(LayerCounts(*back), LayerCounts(*model)) << name;
    EXPECT_EQ(back->name, model->name);
  }
  // A conv with unequal strides travels as its workload key.
  std::mt19937_64 rng = test::TestRng(21);
  ZooModel m;
  m.name = "odd";
  codegen::Workload w;
  w.op = codegen::OpKind::kConv2d;
  w.batch = 1;
  w.in_c = 3 + rng() % 5;
  w.in_h = w.in_w = 16 + rng() % 16;
  w.out_c = 4 + rng() % 8;
  w.kernel_h = 3;
  w.kernel_w = 1;
  w.stride_h = 2;
  w.pad_w = 1;
  w.relu6 = true;
  m.layers.push_back({"c", w, 3});
  auto back = ParseModelJson(ModelToJson(m), "submitted");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->layers.size(), 1u);
  EXPECT_EQ(back->layers[0].workload.Key(), w.Key());
  EXPECT_EQ(back->layers[0].count, 3);
}

// Files `tune` refuses: exit 2, one line on stderr, no database file.
TEST(OnnxModelTest, TuneRefusesBadOnnxFilesWithoutWritingADatabase) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(22);
  std::string random_bytes(2048, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng());
  test::WriteFileBytes(dir.Join("random.onnx"), random_bytes);
  const std::string resnet = test::ReadFileBytes(OnnxTestModel("resnet18.onnx"));
  test::WriteFileBytes(dir.Join("truncated.onnx"), resnet.substr(0, resnet.size() / 2));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{dir.Join("random.onnx")}, "not a readable ONNX model"},
      {{dir.Join("truncated.onnx")}, "malformed or truncated"},
      {{OnnxTestModel("conv_bn_external.onnx")}, "external file"},
      {{OnnxTestModel("opset5.onnx")}, "opset 5"},
      {{OnnxTestModel("conv3d.onnx")}, "only 2-D convolutions with constant weights are tuned"},
      {{OnnxTestModel("resnet18_dynbatch.onnx")}, "symbolic dimension 'batch'; fix it with --input input=1x3x64x64"},
      {{OnnxTestModel("resnet18.onnx"), "--input", "image=1x3x64x64"}, "no input named 'image'"},
      {{OnnxTestModel("resnet18.onnx"), "--input", "input=1x3"}, "the input has rank 4"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {std::string(TUNE_BIN_DIR) + "/tune"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    for (const char* a : {"--target", "llvm", "--trials", "1", "--db", "tune.db"}) argv.push_back(a);
    test::ProcessResult r = test::RunProcess(argv, dir.path());
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r;
    EXPECT_THAT(r.err, StartsWith("tune: "));
    EXPECT_THAT(r.err, HasSubstr(c.message)) << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.Join("tune.db"))) << c.message;
  }
  // tune submit imports the file itself, before it talks to a daemon.
  test::ProcessResult r = test::RunProcess(
      {std::string(TUNE_BIN_DIR) + "/tune", "submit", OnnxTestModel("resnet18_dynbatch.onnx"), "--server", "127.0.0.1:1"},
      dir.path());
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r;
  EXPECT_THAT(r.err, HasSubstr("symbolic dimension 'batch'"));
}

// A small ONNX model tuned end to end: the summary line comes once, then the table.
TEST(OnnxModelTest, TuneRunsAnOnnxModel) {
  test::TempDir dir;
  test::ProcessResult r = test::RunProcess(
      {std::string(TUNE_BIN_DIR) + "/tune", OnnxTestModel("conv_asym_pad.onnx"), "--target", "llvm", "--trials", "2",
       "--batch", "2", "--cost-model", "none", "--repeats", "1", "--threads", "1", "--db", "tune.db"},
      dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  const std::string summary = OnnxTestModel("conv_asym_pad.onnx") +
                              ": 1 tuned nodes in 1 tasks; not tuned (built-in kernels): Pad x1";
  EXPECT_THAT(r.err, HasSubstr(summary));
  EXPECT_EQ(r.err.find(summary), r.err.rfind(summary));
  EXPECT_THAT(r.out, HasSubstr("conv2d 1x3x18x16"));
  EXPECT_TRUE(std::filesystem::exists(dir.Join("tune.db")));
}

}  // namespace
}  // namespace tune::tuner
