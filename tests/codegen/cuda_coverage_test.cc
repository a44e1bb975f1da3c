// Tests that the CUDA templates cover every layer of data/networks/ within an H100's limits, and
// that grouped convolutions (not depthwise: one implicit GEMM per group) compute the reference
// in the GPU interpreter and compile with NVRTC.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/templates.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/gpu_interpreter.h"
#include "tests/common/measure_cuda_configs.h"
#include "tests/common/nvrtc_compile.h"
#include "tests/common/test_seed.h"

namespace tune::codegen {
namespace {

// An H100 (sm_90): 132 multiprocessors, 227 KiB of shared memory, 64K registers and 1024
// threads per block.
GpuLimits CoverageH100() {
  GpuLimits limits;
  limits.max_threads_per_block = 1024;
  limits.max_shared_bytes_per_block = 227 * 1024;
  limits.max_registers_per_block = 64 * 1024;
  limits.multiprocessors = 132;
  return limits;
}

// One layer of a network file: its network, name and workload.
struct CoverageLayer {
  std::string network, name;
  Workload workload;
};

// Every layer of data/networks/*.json, read as tuner/model_file.cc reads a model file (a "key",
// or "op" and "shape"; the bias, relu and relu6 flags).
std::vector<CoverageLayer> CoverageNetworkLayers() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TUNE_SOURCE_DIR) + "/data/networks")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<CoverageLayer> layers;
  for (const auto& path : files) {
    std::ifstream in(path);
    const nlohmann::json model = nlohmann::json::parse(in);
    for (const nlohmann::json& l : model.at("layers")) {
      absl::StatusOr<Workload> w;
      if (l.contains("key")) {
        w = Workload::FromKey(l.at("key").get<std::string>());
      } else {
        absl::StatusOr<OpKind> op = ParseOpName(l.at("op").get<std::string>());
        EXPECT_TRUE(op.ok()) << path << ": " << op.status();
        if (!op.ok()) continue;
        w = Workload::Parse(*op, l.at("shape").get<std::string>());
      }
      EXPECT_TRUE(w.ok()) << path << ": " << w.status();
      if (!w.ok()) continue;
      w->bias = l.value("bias", w->bias);
      w->relu = l.value("relu", w->relu);
      w->relu6 = l.value("relu6", w->relu6);
      layers.push_back({model.at("name").get<std::string>(), l.at("name").get<std::string>(), *w});
    }
  }
  return layers;
}

// Every layer of the 24 networks has a CUDA template and a valid default config within an
// H100's limits: a GPU dataset can be collected over all of them (scripts/dataset/
// cuda-unsupported.tsv lists none). A failure names each layer without one, tab-separated as
// that file lists them.
TEST(CudaCoverageTest, EveryNetworkLayerHasAValidDefaultForAnH100) {
  const std::vector<CoverageLayer> layers = CoverageNetworkLayers();
  ASSERT_GE(layers.size(), 600u);
  std::map<std::string, std::string> checked;  // workload key -> "" or why not
  std::string unsupported;
  for (const CoverageLayer& l : layers) {
    const std::string key = l.workload.Key();
    auto it = checked.find(key);
    if (it == checked.end()) {
      std::string why;
      absl::StatusOr<std::unique_ptr<Template>> t = CreateTemplate(l.workload, Backend::kCuda, CoverageH100());
      if (!t.ok()) {
        why = std::string(t.status().message());
      } else if (absl::StatusOr<search::Config> def = (*t)->ValidDefaultConfig(); !def.ok()) {
        why = std::string(def.status().message());
      }
      it = checked.emplace(key, why).first;
    }
    if (!it->second.empty()) unsupported += l.network + "\t" + l.name + "\t" + key + "\t" + it->second + "\n";
  }
  EXPECT_EQ(unsupported, "") << checked.size() << " distinct workloads of " << layers.size() << " layers";
}

// Small grouped convolutions of the classes the networks have: regnet's (stride 2, pad 1, a
// few channels per group), resnext's (batch 2 here, 8 output channels per group), an odd
// output-channel count per group (tails along M), and a channel multiplier (one input channel
// per group, two outputs: grouped, not depthwise) with relu6.
std::vector<Workload> CoverageGroupedShapes() {
  std::vector<Workload> shapes = {test::ParseWorkload(OpKind::kConv2d, "1,12,9,11,12,3,3,2,1,1,3", true, true),
                                  test::ParseWorkload(OpKind::kConv2d, "2,16,7,7,32,3,3,1,1,1,4", true, false),
                                  test::ParseWorkload(OpKind::kConv2d, "1,9,6,5,15,3,3,1,1,1,3", false, true),
                                  test::ParseWorkload(OpKind::kConv2d, "1,4,5,6,8,3,3,1,1,1,4", true, false)};
  shapes.back().relu6 = true;
  return shapes;
}

// Random inputs in [-1, 1), none zero (a missing term shows), the same for a stream.
std::vector<std::vector<float>> CoverageInputs(const Workload& w, uint64_t stream) {
  std::mt19937_64 rng = test::TestRng(stream);
  std::vector<std::vector<float>> inputs;
  for (const TensorSpec& spec : w.Inputs()) {
    std::vector<float> v = test::RandomValues(spec.NumElements(), rng);
    for (float& x : v) x = x == 0.0f ? 0.5f : x;
    inputs.push_back(std::move(v));
  }
  return inputs;
}

// Whether a split knob of the GEMM tiles covers more than its extent.
bool CoverageHasTail(const search::ConfigSpace& space, const search::Config& c) {
  for (const char* name : {"tile_m", "tile_n", "tile_k"}) {
    if (search::PaddedExtent(space.Get(c, name)) != space.knobs()[space.KnobIndex(name)].extent) return true;
  }
  return false;
}

// Whether a config of the conv2d template is the direct variant.
bool CoverageIsDirect(const search::ConfigSpace& space, const search::Config& c) {
  return space.GetInt(c, "variant") == 1;
}

// `count` random valid configs of the conv2d template `t`: a quarter implicit GEMMs with
// split-K, a quarter with K slices, a quarter of the direct variant, the rest unrestricted; the
// same on every call.
std::vector<search::Config> CoverageConfigs(const Template& t, size_t count, uint64_t stream) {
  const search::ConfigSpace& space = t.space();
  std::mt19937_64 rng = test::TestRng(stream);
  auto gemm_with = [&](const char* knob) {
    return [&space, knob](const search::Config& c) { return !CoverageIsDirect(space, c) && space.GetInt(c, knob) > 1; };
  };
  std::vector<search::Config> configs = test::DrawWhere(space, rng, count / 4, gemm_with("k_split"), {}, 20000);
  configs = test::DrawWhere(space, rng, count / 2, gemm_with("k_slices"), std::move(configs), 20000);
  configs = test::DrawWhere(
      space, rng, 3 * count / 4, [&](const search::Config& c) { return CoverageIsDirect(space, c); },
      std::move(configs), 20000);
  return test::DrawWhere(space, rng, count, nullptr, std::move(configs), 20000);
}

// A grouped convolution that is not depthwise has the conv2d template: implicit GEMMs, one
// per group, or direct kernels whose blocks each compute channels of one group. 12 random valid
// configs of each of four shapes (split-K, K slices, tails, the direct variant, vector loads,
// double buffering among them) and their defaults compute the reference, with no access out of
// bounds, unwritten read or race, and leave split-K's counters zero for the next launch.
TEST(CudaCoverageTest, GroupedConvConfigsMatchTheReference) {
  uint64_t stream = 40;
  int splits = 0, slices = 0, tails = 0, direct = 0, wide = 0, double_buffered = 0;
  for (const Workload& w : CoverageGroupedShapes()) {
    ASSERT_FALSE(w.depthwise());
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ((*t)->name(), "cuda_conv2d");
    const search::ConfigSpace& space = (*t)->space();
    std::vector<search::Config> configs = CoverageConfigs(**t, 12, stream);
    EXPECT_EQ(configs.size(), 12u) << w.Key();
    absl::StatusOr<search::Config> def = (*t)->ValidDefaultConfig();
    ASSERT_TRUE(def.ok()) << def.status();
    configs.push_back(*def);
    const std::vector<std::vector<float>> inputs = CoverageInputs(w, stream++);
    const std::vector<float> reference = test::ReferenceOutput(w, inputs);
    for (const search::Config& c : configs) {
      ASSERT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      direct += CoverageIsDirect(space, c);
      splits += !CoverageIsDirect(space, c) && space.GetInt(c, "k_split") > 1;
      slices += !CoverageIsDirect(space, c) && space.GetInt(c, "k_slices") > 1;
      tails += !CoverageIsDirect(space, c) && CoverageHasTail(space, c);
      wide += space.GetInt(c, "vector") > 1;
      double_buffered += space.GetInt(c, "double_buffer") != 0;
      absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "grouped");
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(test::RunAgainstReference(*f, inputs, reference), "") << w.Key() << " " << space.ToJson(c);
    }
  }
  EXPECT_GE(splits, 9);  // the channel multiplier's K of 9 leaves split-K few configs
  EXPECT_GE(slices, 12);
  EXPECT_GE(tails, 12);
  EXPECT_GE(direct, 12);
  EXPECT_GT(wide, 0);
  EXPECT_GT(double_buffered, 0);
}

// The smallest grouped layer of the networks at its real size (regnet-y-400mf's last block,
// 440 channels in 55 groups at 7 x 7): its default and a random config of each variant compute
// the reference.
TEST(CudaCoverageTest, RegnetGroupedLayerMatchesTheReference) {
  const Workload w = test::ParseWorkload(OpKind::kConv2d, "1,440,7,7,440,3,3,1,1,1,55", true, true);
  auto t = CreateTemplate(w, Backend::kCuda);
  ASSERT_TRUE(t.ok()) << t.status();
  const search::ConfigSpace& space = (*t)->space();
  std::mt19937_64 rng = test::TestRng(50);
  std::vector<search::Config> configs =
      test::DrawWhere(space, rng, 1, [&](const search::Config& c) { return CoverageIsDirect(space, c); });
  configs = test::DrawWhere(
      space, rng, 2, [&](const search::Config& c) { return !CoverageIsDirect(space, c); }, std::move(configs));
  ASSERT_EQ(configs.size(), 2u);
  configs.push_back((*t)->DefaultConfig());
  const std::vector<std::vector<float>> inputs = CoverageInputs(w, 50);
  const std::vector<float> reference = test::ReferenceOutput(w, inputs);
  for (const search::Config& c : configs) {
    ASSERT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
    absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "regnet");
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(test::RunAgainstReference(*f, inputs, reference), "") << space.ToJson(c);
  }
}

// The defaults of every layer that had no valid CUDA config before grouped convolutions and
// tails (the 24 of scripts/dataset/cuda-unsupported.tsv's first version: regnet's and resnext's
// grouped convs, odd channel counts, 1x1 convs at 35 x 35 and 73 x 73, shufflenet's depthwise
// convs, ViT's attention product), and random configs of a regnet and a resnext grouped conv,
// compile with NVRTC for sm_90.
TEST(CudaCoverageTest, FormerlyUnsupportedLayersCompileForSm90) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  const std::vector<std::string> keys = {
      "conv2d/n1_c64_h73_w73_oc80_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32",
      "conv2d/n1_c192_h35_w35_oc48_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32",
      "conv2d/n1_c256_h35_w35_oc48_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32",
      "conv2d/n1_c288_h35_w35_oc48_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32",
      "conv2d/n1_c48_h112_w112_oc48_k3x3_s2x2_p1x1_d1x1_g6/bias_relu/float32",
      "conv2d/n1_c104_h56_w56_oc104_k3x3_s2x2_p1x1_d1x1_g13/bias_relu/float32",
      "conv2d/n1_c104_h28_w28_oc104_k3x3_s1x1_p1x1_d1x1_g13/bias_relu/float32",
      "conv2d/n1_c208_h28_w28_oc208_k3x3_s2x2_p1x1_d1x1_g26/bias_relu/float32",
      "conv2d/n1_c208_h14_w14_oc208_k3x3_s1x1_p1x1_d1x1_g26/bias_relu/float32",
      "conv2d/n1_c440_h14_w14_oc440_k3x3_s2x2_p1x1_d1x1_g55/bias_relu/float32",
      "conv2d/n1_c440_h7_w7_oc440_k3x3_s1x1_p1x1_d1x1_g55/bias_relu/float32",
      "conv2d/n1_c128_h56_w56_oc128_k3x3_s1x1_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c256_h56_w56_oc256_k3x3_s2x2_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c256_h28_w28_oc256_k3x3_s1x1_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c512_h28_w28_oc512_k3x3_s2x2_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c512_h14_w14_oc512_k3x3_s1x1_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c1024_h14_w14_oc1024_k3x3_s2x2_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c1024_h7_w7_oc1024_k3x3_s1x1_p1x1_d1x1_g32/bias_relu/float32",
      "conv2d/n1_c116_h28_w28_oc116_k3x3_s2x2_p1x1_d1x1_g116/bias/float32",
      "conv2d/n1_c116_h14_w14_oc116_k3x3_s1x1_p1x1_d1x1_g116/bias/float32",
      "conv2d/n1_c232_h14_w14_oc232_k3x3_s2x2_p1x1_d1x1_g232/bias/float32",
      "conv2d/n1_c232_h7_w7_oc232_k3x3_s1x1_p1x1_d1x1_g232/bias/float32",
      "conv2d/n1_c512_h13_w13_oc1000_k1x1_s1x1_p0x0_d1x1_g1/bias_relu/float32",
      "batch_matmul/b12_m197_n197_k64/none/float32",
  };
  std::vector<test::CudaSource> jobs;
  for (const std::string& key : keys) {
    absl::StatusOr<Workload> w = Workload::FromKey(key);
    ASSERT_TRUE(w.ok()) << key << ": " << w.status();
    auto t = CreateTemplate(*w, Backend::kCuda, CoverageH100());
    ASSERT_TRUE(t.ok()) << key << ": " << t.status();
    absl::StatusOr<search::Config> def = (*t)->ValidDefaultConfig();
    ASSERT_TRUE(def.ok()) << key << ": " << def.status();
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(*def, "layer"));
    ASSERT_TRUE(k.ok()) << key << ": " << k.status();
    jobs.push_back({key + " default", k->source});
  }
  uint64_t stream = 60;
  for (const std::string& key : {keys[6], keys[13]}) {
    auto t = CreateTemplate(*Workload::FromKey(key), Backend::kCuda, CoverageH100());
    ASSERT_TRUE(t.ok()) << t.status();
    for (const search::Config& c : CoverageConfigs(**t, 4, stream++)) {
      absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "grouped"));
      ASSERT_TRUE(k.ok()) << k.status();
      jobs.push_back({key + " " + (*t)->space().ToJson(c), k->source});
    }
  }
  test::ExpectAllCompileForSm90(jobs);
}

}  // namespace
}  // namespace tune::codegen
