// The conv2d template's start points (Template::StartConfigs): register tiles that fill the
// ISA's vector registers in the blocked layout, in order 0 and order 3, valid and correct.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::test {
namespace {

using codegen::Conv2dTemplate;
using codegen::Workload;

// Every start config is valid, none twice, none the default; for 128 channels of 28x28 in
// nChw16c on AVX-512 they hold the 14-column tile of two vectors (31 of the 32 registers) in
// order 0 and in order 3 with the accumulator tile, and the 28-column tile of one vector; on
// AVX2 the tiles fit its 16 registers (6 columns of two vectors, 14 of one).
TEST(CpuConvStartConfigsTest, RegisterFillingTilesInBothOrders) {
  const Workload w = ConvWorkloadForTest("1,128,28,28,128,3,3,1,1,nchw16c", true, true);
  const Conv2dTemplate avx512(w, CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 1));
  const std::vector<search::Config> configs = avx512.StartConfigs();
  ASSERT_GE(configs.size(), 4u);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_TRUE(avx512.space().IsValid(configs[i])) << avx512.space().WhyInvalid(configs[i]);
    EXPECT_NE(configs[i], avx512.DefaultConfig());
    for (size_t j = 0; j < i; ++j) EXPECT_NE(configs[i], configs[j]);
  }
  const std::vector<std::string> texts = ConfigTexts(avx512, configs);
  auto has = [](const std::vector<std::string>& list, const std::vector<std::string>& parts) {
    return AnyContainsAll(list, parts);
  };
  EXPECT_TRUE(has(texts, {R"("tile_oc":[1,4,32])", R"("tile_ow":[1,2,14])", R"("order":[0])"}))
      << ::testing::PrintToString(texts);
  EXPECT_TRUE(has(texts, {R"("tile_oc":[1,4,32])", R"("tile_ow":[1,2,14])", R"("order":[3])", R"("acc_tile":[1])"}))
      << ::testing::PrintToString(texts);
  EXPECT_TRUE(has(texts, {R"("tile_oc":[1,8,16])", R"("tile_ow":[1,1,28])"})) << ::testing::PrintToString(texts);

  const Conv2dTemplate avx2(ConvWorkloadForTest("1,128,28,28,128,3,3,1,1", false, false), CpuLimitsAt("+avx2,+fma", 1));
  const std::vector<std::string> avx2_texts = ConfigTexts(avx2, avx2.StartConfigs());
  ASSERT_FALSE(avx2_texts.empty());
  for (const search::Config& c : avx2.StartConfigs()) EXPECT_TRUE(avx2.space().IsValid(c)) << avx2.space().ToJson(c);
  EXPECT_TRUE(has(avx2_texts, {R"("tile_oc":[1,8,16])", R"("tile_ow":[1,7,4])"})) << ::testing::PrintToString(avx2_texts);
  EXPECT_TRUE(has(avx2_texts, {R"("tile_oc":[1,16,8])", R"("tile_ow":[1,2,14])"})) << ::testing::PrintToString(avx2_texts);
}

// At 2 threads the start configs run in parallel where their loops share out: order 3 splits
// 512 channels' 16 blocks of 32 between the threads; depthwise and grouped convolutions have
// no start configs (the blocked layout's dense tiles do not apply).
TEST(CpuConvStartConfigsTest, ParallelFormAndDenseOnly) {
  const Conv2dTemplate two(ConvWorkloadForTest("1,512,7,7,512,3,3,1,1,nchw16c", false, false),
                           CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 2));
  const std::vector<search::Config> configs = two.StartConfigs();
  ASSERT_FALSE(configs.empty());
  bool order3_split = false;
  for (const search::Config& c : configs) {
    EXPECT_TRUE(two.space().IsValid(c)) << two.space().WhyInvalid(c);
    EXPECT_NE(two.space().GetInt(c, "parallel"), 0) << two.space().ToJson(c);
    if (two.space().GetInt(c, "order") == 3) {
      order3_split = order3_split || two.space().Get(c, "tile_oc")[0] == 2;
    }
  }
  EXPECT_TRUE(order3_split);

  const auto limits = CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 1);
  EXPECT_TRUE(Conv2dTemplate(ConvWorkloadForTest("1,64,28,28,64,3,3,1,1,1,64", false, false), limits)
                  .StartConfigs()
                  .empty());
  EXPECT_TRUE(Conv2dTemplate(ConvWorkloadForTest("1,64,28,28,64,3,3,1,1,1,4", false, false), limits)
                  .StartConfigs()
                  .empty());
}

// Fewer input channels than a vector (ResNet's stem: 3 -> 64, 7x7, stride 2): unblocked input,
// one vector of channels by 6 and by 8 columns, rows outermost and split between the 2
// threads, input values folded into the FMAs on AVX-512 (not on AVX2, which cannot).
TEST(CpuConvStartConfigsTest, ThinInputStartsFromOneVectorByAFewColumns) {
  const Workload stem = ConvWorkloadForTest("1,3,224,224,64,7,7,2,3", false, false);
  const Conv2dTemplate avx512(stem, CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 2));
  for (const search::Config& c : avx512.StartConfigs()) EXPECT_TRUE(avx512.space().IsValid(c));
  const std::vector<std::string> texts = ConfigTexts(avx512, avx512.StartConfigs());
  for (const char* cols : {R"("tile_ow":[19,1,6])", R"("tile_ow":[14,1,8])"}) {
    EXPECT_TRUE(AnyContainsAll(texts, {R"("tile_oc":[1,4,16])", R"("tile_oh":[2,56])", cols, R"("tile_ic":[3,1])",
                                       R"("order":[2])", R"("parallel":[1])", R"("in_block":[0])",
                                       R"("fold_broadcast":[1])"}))
        << cols << " " << ::testing::PrintToString(texts);
  }
  const Conv2dTemplate avx2(stem, CpuLimitsAt("+avx2,+fma", 1));
  const std::vector<std::string> avx2_texts = ConfigTexts(avx2, avx2.StartConfigs());
  EXPECT_TRUE(AnyContainsAll(avx2_texts, {R"("tile_oc":[1,8,8])", R"("tile_oh":[1,112])", R"("tile_ow":[19,1,6])",
                                          R"("in_block":[0])", R"("fold_broadcast":[0])"}))
      << ::testing::PrintToString(avx2_texts);
}

// The start configs of the host compile and compute the convolution: NCHWc and NCHW shapes,
// a width with no divisor near the tile (a partial column tile), stride 2, a 1x1 convolution,
// fewer input channels than a vector, bias and ReLU; fresh random inputs, fenced arrays.
TEST(CpuConvStartConfigsTest, HostStartConfigsMatchReference) {
  const codegen::CpuLimits host = codegen::HostCpuLimits();
  std::mt19937_64 rng(std::random_device{}());
  int failures = 0;
  for (int threads : {1, 2}) {
    codegen::CpuLimits cpu = host;
    cpu.threads = threads;
    codegen::runtime::SetNumThreads(threads);
    for (const std::string& shape : {"1,32,9,17,48,3,3,1,1,nchw16c", "1,24,19,19,40,3,3,2,1", "2,32,14,14,64,1,1,2,0",
                                     "1,3,23,23,16,3,3,1,1", "1,3,29,29,32,7,7,2,3"}) {
      const Conv2dTemplate tmpl(ConvWorkloadForTest(shape, true, true), cpu);
      const std::vector<search::Config> configs = tmpl.StartConfigs();
      if (host.vector_lanes >= 4) EXPECT_FALSE(configs.empty()) << shape;
      failures += ConfigsFailingReference(tmpl, configs, "start_conv_", absl::StrCat("threads ", threads), rng);
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace tune::test
