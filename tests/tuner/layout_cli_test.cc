// `tune MODEL --layout nchwc`: the NCHWc tasks of zoo models and ONNX models, the records
// `tune run --layout nchwc` then finds, and the flag's refusals.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/graph/onnx_writer.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;

const std::string kLayoutTune = std::string(TUNE_BIN_DIR) + "/tune";

/// The block a conv gets with `lanes` vector lanes, spelled out: the lanes, else half of them
/// (at least 4), whichever divides C and OC first; 0 for none.
int64_t LayoutExpectedBlock(const codegen::Workload& w, int64_t lanes) {
  if (w.op != codegen::OpKind::kConv2d || (w.groups != 1 && !w.depthwise())) return 0;
  for (int64_t block : {lanes, lanes / 2 >= 4 ? lanes / 2 : lanes}) {
    if (w.in_c % block == 0 && w.out_c % block == 0) return block;
  }
  return 0;
}

TEST(LayoutCliTest, ZooModelsTurnEveryEligibleConvIntoItsNchwcWorkload) {
  for (const char* name : {"resnet-18", "mobilenet-v2", "bert-base"}) {
    for (int64_t lanes : {8, 16}) {
      SCOPED_TRACE(std::string(name) + " lanes " + std::to_string(lanes));
      auto nchw = LoadModel(name);
      ASSERT_TRUE(nchw.ok()) << nchw.status();
      auto nchwc = LoadModel(name, {}, lanes);
      ASSERT_TRUE(nchwc.ok()) << nchwc.status();
      ASSERT_EQ(nchwc->layers.size(), nchw->layers.size());
      int blocked = 0;
      for (size_t i = 0; i < nchw->layers.size(); ++i) {
        const codegen::Workload& before = nchw->layers[i].workload;
        const codegen::Workload& after = nchwc->layers[i].workload;
        EXPECT_EQ(nchwc->layers[i].count, nchw->layers[i].count);
        if (const int64_t block = LayoutExpectedBlock(before, lanes); block > 0) {
          ++blocked;
          EXPECT_EQ(after.layout_block, block) << before.Key();
          codegen::Workload same = after;
          same.layout_block = 0;
          EXPECT_EQ(same.Key(), before.Key());
        } else {
          EXPECT_EQ(after.Key(), before.Key());
        }
      }
      if (std::string(name) == "resnet-18") EXPECT_EQ(blocked + 2, static_cast<int>(nchw->layers.size()));
      if (std::string(name) == "bert-base") EXPECT_EQ(blocked, 0);
      // Its depthwise convolutions have an NCHWc form too (their channels are multiples of 16),
      // and so do the 24-channel layers (in blocks of 8 where the lanes are 16): every conv but
      // the 3-channel stem.
      if (std::string(name) == "mobilenet-v2") {
        int depthwise = 0, convs = 0, blocked_convs = 0, by8 = 0;
        for (const auto& layer : nchwc->layers) {
          depthwise += layer.workload.depthwise() && layer.workload.layout_block == lanes ? layer.count : 0;
          if (layer.workload.op != codegen::OpKind::kConv2d) continue;
          convs += layer.count;
          blocked_convs += layer.workload.layout_block > 0 ? layer.count : 0;
          by8 += layer.workload.layout_block == 8 ? layer.count : 0;
        }
        EXPECT_EQ(depthwise, 17);
        EXPECT_EQ(convs, 52);
        EXPECT_EQ(blocked_convs, 51);
        EXPECT_EQ(by8, lanes == 16 ? 4 : 51) << "the 24-channel layers, with 16 lanes";
      }
      // The model file a submit sends keeps the layout.
      auto back = ParseModelJson(ModelToJson(*nchwc), "submitted");
      ASSERT_TRUE(back.ok()) << back.status();
      ASSERT_EQ(back->layers.size(), nchwc->layers.size());
      for (size_t i = 0; i < back->layers.size(); ++i) {
        EXPECT_EQ(back->layers[i].workload.Key(), nchwc->layers[i].workload.Key());
      }
    }
  }
}

TEST(LayoutCliTest, OnnxModelTasksAreThoseOfThePlannedGraph) {
  const std::string path = std::string(TUNE_ONNX_DIR) + "/resnet18.onnx";
  auto model = LoadModel(path, {}, 16);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers.size(), 16u);
  EXPECT_EQ(model->layers[0].name, "/conv1/Conv");
  EXPECT_EQ(model->layers[0].workload.layout_block, 0) << "3 input channels";
  EXPECT_EQ(model->layers.back().workload.op, codegen::OpKind::kDense);
  for (size_t i = 1; i + 1 < model->layers.size(); ++i) {
    EXPECT_EQ(model->layers[i].workload.layout_block, 16) << model->layers[i].name;
  }
  // After the stem (conv, MaxPool) the activations turn blocked once, and back once before the
  // pool.
  EXPECT_THAT(model->summary, HasSubstr("tune.ToBlocked x1"));
  EXPECT_THAT(model->summary, HasSubstr("tune.ToNchw x1"));
}

// MobileNet-V2's graph plan with 16 lanes: every conv but the stem blocked, the 24-channel ones
// in blocks of 8; the layout changes once each way and the block four times (to 8 into the first
// 24-channel project conv, and back and forth around the 144-channel depthwise convs that read and
// feed 24-channel layers); the tasks are the planned convs'.
TEST(LayoutCliTest, MobileNetV2PlanBlocksEveryConvButTheStem) {
  const std::string path = std::string(TUNE_ONNX_DIR) + "/mobilenet_v2.onnx";
  auto model = LoadModel(path, {}, 16);
  ASSERT_TRUE(model.ok()) << model.status();
  int convs = 0, blocked = 0, by8 = 0;
  for (const ZooLayer& layer : model->layers) {
    if (layer.workload.op != codegen::OpKind::kConv2d) continue;
    convs += layer.count;
    blocked += layer.workload.layout_block > 0 ? layer.count : 0;
    by8 += layer.workload.layout_block == 8 ? layer.count : 0;
    EXPECT_EQ(layer.workload.layout_block, LayoutExpectedBlock(layer.workload, 16)) << layer.name;
  }
  EXPECT_EQ(convs, 52);
  EXPECT_EQ(blocked, 51);
  EXPECT_EQ(by8, 4);
  EXPECT_THAT(model->summary, HasSubstr("tune.ToBlocked x1"));
  EXPECT_THAT(model->summary, HasSubstr("tune.ToNchw x1"));
  EXPECT_THAT(model->summary, HasSubstr("tune.Reblock x4"));
}

/// A model of two convolutions, 16 channels: both have an NCHWc form with blocks of 8 or 16.
std::string LayoutTwoConvModel(const std::string& dir) {
  namespace px = tune::test_onnx;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  std::vector<float> w1(16 * 16 * 9), w2(16 * 16);
  for (float& v : w1) v = value(rng);
  for (float& v : w2) v = value(rng);
  const std::string bytes =
      px::Model({px::Node("Conv", {"x", "w1"}, {"c1"}, {px::AttrInts("pads", {1, 1, 1, 1})}, "conv1"),
                 px::Node("Relu", {"c1"}, {"r1"}, {}, "relu1"), px::Node("Conv", {"r1", "w2"}, {"c2"}, {}, "conv2"),
                 px::Node("GlobalAveragePool", {"c2"}, {"y"}, {}, "pool")},
                {px::Value("x", px::kFloat, {1, 16, 8, 8})}, {px::Value("y", px::kFloat, {1, 16, 1, 1})},
                {px::TensorF32("w1", {16, 16, 3, 3}, w1), px::TensorF32("w2", {16, 16, 1, 1}, w2)});
  const std::string path = dir + "/two_conv.onnx";
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(LayoutCliTest, TuneRecordsWhatTuneRunLooksUp) {
  test::TempDir tmp;
  const std::string model = LayoutTwoConvModel(tmp.path()), db = tmp.path() + "/tune.db";
  test::ProcessResult tuned = test::RunProcess({kLayoutTune, model, "--target", "llvm", "--layout", "nchwc", "--trials",
                                                "2", "--threads", "1", "--db", db}, "", 600);
  ASSERT_TRUE(tuned.exited && tuned.exit_code == 0) << tuned;
  test::ProcessResult blocked =
      test::RunProcess({kLayoutTune, "run", model, "--layout", "nchwc", "--threads", "1", "--db", db}, "", 300);
  ASSERT_TRUE(blocked.exited && blocked.exit_code == 0) << blocked;
  EXPECT_THAT(blocked.out, HasSubstr("2 of 2 tasks tuned")) << blocked;
  // The NCHW run looks up other workloads: none of them was tuned.
  test::ProcessResult plain = test::RunProcess({kLayoutTune, "run", model, "--threads", "1", "--db", db}, "", 300);
  ASSERT_TRUE(plain.exited && plain.exit_code == 0) << plain;
  EXPECT_THAT(plain.out, HasSubstr("0 of 2 tasks tuned")) << plain;
}

TEST(LayoutCliTest, RefusesNchwcOnCudaAndUnknownLayouts) {
  test::TempDir tmp;
  const std::string db = tmp.path() + "/tune.db";
  test::ProcessResult cuda =
      test::RunProcess({kLayoutTune, "resnet-18", "--target", "cuda", "--layout", "nchwc", "--db", db}, "", 120);
  ASSERT_TRUE(cuda.exited) << cuda;
  EXPECT_EQ(cuda.exit_code, 2) << cuda;
  EXPECT_THAT(cuda.err, HasSubstr("--layout nchwc is for CPU targets (--target llvm)")) << cuda;
  test::ProcessResult bad = test::RunProcess({kLayoutTune, "resnet-18", "--layout", "nhwc", "--db", db}, "", 120);
  ASSERT_TRUE(bad.exited) << bad;
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_THAT(bad.err, HasSubstr("--layout")) << bad;
  EXPECT_FALSE(std::filesystem::exists(db)) << "nothing is written";
}

}  // namespace
}  // namespace tune::tuner
