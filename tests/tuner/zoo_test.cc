// Tests of the built-in model zoo: shapes validate, layer counts and FLOPs match the networks.
#include "tuner/zoo.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tune::tuner {
namespace {

using codegen::OpKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ZooModel Get(const std::string& name) {
  absl::StatusOr<ZooModel> model = GetZooModel(name);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : ZooModel();
}

int CountOps(const ZooModel& model, OpKind op) {
  int count = 0;
  for (const ZooLayer& layer : model.layers) count += layer.workload.op == op ? layer.count : 0;
  return count;
}

double TotalFlops(const ZooModel& model) {
  double flops = 0;
  for (const ZooLayer& layer : model.layers) flops += layer.count * layer.workload.Flops();
  return flops;
}

const ZooLayer* FindLayer(const ZooModel& model, const std::string& name) {
  for (const ZooLayer& layer : model.layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

// Layers pinned by workload key and by how many layers of the network share it.
struct PinnedLayer {
  const char* model;
  const char* name;
  const char* key;
  int count;
};
constexpr PinnedLayer kPinned[] = {
    {"resnet-18", "conv1", "conv2d/n1_c3_h224_w224_oc64_k7x7_s2x2_p3x3_d1x1_g1/bias_relu/float32", 1},
    {"resnet-18", "fc", "dense/m1_n1000_k512/bias/float32", 1},
    // layer1: two blocks of two 64->64 3x3 convs at 56x56, the first with relu, the second
    // (before the residual add) without.
    {"resnet-18", "layer1.0.conv1", "conv2d/n1_c64_h56_w56_oc64_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32", 2},
    {"resnet-18", "layer1.0.conv2", "conv2d/n1_c64_h56_w56_oc64_k3x3_s1x1_p1x1_d1x1_g1/bias/float32", 2},
    // Stage 2 entry: stride 2 on the first 3x3 and a 1x1/2 downsample, 56 -> 28.
    {"resnet-18", "layer2.0.downsample", "conv2d/n1_c64_h56_w56_oc128_k1x1_s2x2_p0x0_d1x1_g1/bias/float32", 1},
    {"resnet-50", "fc", "dense/m1_n1000_k2048/bias/float32", 1},
    // v1.5: the stride sits on the 3x3 conv; the 1x1 before it runs at the input extent.
    {"resnet-50", "layer2.0.conv1", "conv2d/n1_c256_h56_w56_oc128_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32", 1},
    {"resnet-50", "layer2.0.conv2", "conv2d/n1_c128_h56_w56_oc128_k3x3_s2x2_p1x1_d1x1_g1/bias_relu/float32", 1},
    // layer1's first conv3 and its downsample are the same 1x1 64->256 conv: merged, with the
    // other two conv3s, into one layer of count 4.
    {"resnet-50", "layer1.0.conv3", "conv2d/n1_c64_h56_w56_oc256_k1x1_s1x1_p0x0_d1x1_g1/bias/float32", 4},
    // layer3 has 6 blocks: 5 of them share the same 3x3 at 14x14.
    {"resnet-50", "layer3.1.conv2", "conv2d/n1_c256_h14_w14_oc256_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32", 5},
    {"mobilenet-v2", "features.18", "conv2d/n1_c320_h7_w7_oc1280_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32", 1},
    {"mobilenet-v2", "classifier", "dense/m1_n1000_k1280/bias/float32", 1},
    // Q, K, V and output projections in 12 layers share one workload.
    {"bert-base", "encoder.attention.query", "dense/m128_n768_k768/bias/float32", 48},
    {"bert-base", "encoder.attention.scores", "batch_matmul/b12_m128_n128_k64/none/float32", 12},
    {"bert-base", "encoder.attention.context", "batch_matmul/b12_m128_n64_k128/none/float32", 12},
    {"bert-base", "encoder.intermediate", "dense/m128_n3072_k768/bias_relu/float32", 12},
    {"bert-base", "encoder.output", "dense/m128_n768_k3072/bias/float32", 12},
};

TEST(ZooTest, Names) {
  EXPECT_THAT(ZooModelNames(), ElementsAre("resnet-18", "resnet-50", "mobilenet-v2", "bert-base"));
}

TEST(ZooTest, UnknownModel) {
  absl::StatusOr<ZooModel> model = GetZooModel("vgg-16");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(model.status().message(),
            "unknown model 'vgg-16'; built-in models: resnet-18, resnet-50, mobilenet-v2, "
            "bert-base");
}

TEST(ZooTest, EveryLayerValidatesAndIsDistinct) {
  for (const std::string& name : ZooModelNames()) {
    SCOPED_TRACE(name);
    ZooModel model = Get(name);
    EXPECT_EQ(model.name, name);
    EXPECT_FALSE(model.description.empty());
    ASSERT_FALSE(model.layers.empty());
    std::set<std::string> keys, names;
    for (const ZooLayer& layer : model.layers) {
      EXPECT_TRUE(layer.workload.Validate().ok())
          << layer.name << ": " << layer.workload.Validate();
      EXPECT_GE(layer.count, 1) << layer.name;
      EXPECT_EQ(layer.workload.batch == 1 || layer.workload.op == OpKind::kBatchMatmul, true);
      EXPECT_TRUE(keys.insert(layer.workload.Key()).second) << "duplicate " << layer.name;
      EXPECT_TRUE(names.insert(layer.name).second) << "duplicate name " << layer.name;
      absl::StatusOr<codegen::Workload> back = codegen::Workload::FromKey(layer.workload.Key());
      EXPECT_TRUE(back.ok()) << back.status();
    }
  }
}

TEST(ZooTest, PinnedLayers) {
  for (const PinnedLayer& pinned : kPinned) {
    SCOPED_TRACE(std::string(pinned.model) + " " + pinned.name);
    const ZooModel model = Get(pinned.model);
    const ZooLayer* layer = FindLayer(model, pinned.name);
    ASSERT_NE(layer, nullptr);
    EXPECT_EQ(layer->workload.Key(), pinned.key);
    EXPECT_EQ(layer->count, pinned.count);
  }
}

TEST(ZooTest, ResNet18) {
  ZooModel model = Get("resnet-18");
  // 1 stem + 16 3x3 convs in 8 basic blocks + 3 downsample 1x1 convs.
  EXPECT_EQ(CountOps(model, OpKind::kConv2d), 20);
  EXPECT_EQ(CountOps(model, OpKind::kDense), 1);
  // 1.82 G multiply-adds, i.e. 3.64 GFLOPs at 2 flops per multiply-add.
  EXPECT_NEAR(TotalFlops(model) / 2, 1.82e9, 0.05 * 1.82e9);
  const ZooLayer* l4 = FindLayer(model, "layer4.0.conv1");
  ASSERT_NE(l4, nullptr);
  EXPECT_EQ(l4->workload.out_h(), 7);
}

TEST(ZooTest, ResNet50) {
  ZooModel model = Get("resnet-50");
  // 1 stem + 16 bottlenecks x 3 + 4 downsamples.
  EXPECT_EQ(CountOps(model, OpKind::kConv2d), 53);
  // 4.1 G multiply-adds, 8.2 GFLOPs.
  EXPECT_NEAR(TotalFlops(model) / 2, 4.1e9, 0.05 * 4.1e9);
  // layer1's first conv3 and its downsample are the same 1x1 64->256 conv (kPinned).
  EXPECT_EQ(FindLayer(model, "layer1.0.downsample"), nullptr);
}

TEST(ZooTest, MobileNetV2) {
  ZooModel model = Get("mobilenet-v2");
  // Stem + 17 inverted residual blocks (the first without expansion) + the 1280 conv.
  EXPECT_EQ(CountOps(model, OpKind::kConv2d), 1 + 2 + 16 * 3 + 1);
  EXPECT_EQ(CountOps(model, OpKind::kDense), 1);
  // About 300 M multiply-adds, 0.6 GFLOPs.
  EXPECT_NEAR(TotalFlops(model), 0.6e9, 0.1 * 0.6e9);
  int depthwise = 0;
  for (const ZooLayer& layer : model.layers) {
    if (layer.workload.depthwise()) {
      depthwise += layer.count;
      EXPECT_TRUE(layer.workload.relu) << layer.name;
      EXPECT_EQ(layer.workload.kernel_h, 3);
    }
    if (layer.name.find("project") != std::string::npos) {
      EXPECT_FALSE(layer.workload.relu) << layer.name;
    }
    if (layer.name.find("expand") != std::string::npos) {
      EXPECT_TRUE(layer.workload.relu) << layer.name;
    }
  }
  EXPECT_EQ(depthwise, 17);
  EXPECT_THAT(model.description, HasSubstr("relu6 approximated as relu"));
}

TEST(ZooTest, BertBase) {
  ZooModel model = Get("bert-base");
  ASSERT_EQ(model.layers.size(), 5u);
  // Per layer: 4 * 2*128*768*768 + 2 * 2*12*128*128*64 + 2 * 2*128*768*3072 = 2.9 GFLOPs; x12.
  EXPECT_NEAR(
      TotalFlops(model),
      12 * (4 * 2.0 * 128 * 768 * 768 + 2 * 2.0 * 12 * 128 * 128 * 64 + 2 * 2.0 * 128 * 768 * 3072),
      1e3);
  EXPECT_THAT(model.description, HasSubstr("GELU approximated as relu"));
}

}  // namespace
}  // namespace tune::tuner
