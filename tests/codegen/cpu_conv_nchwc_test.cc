// The conv2d template on NCHWc workloads (activations in channel blocks that neighbouring
// layers share): random configs with tails against the reference, the space's shape, the
// kernel's buffers, and the CUDA back end's refusal.
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/codegen/nchwc_check.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::test {
namespace {

using codegen::Conv2dTemplate;
using codegen::Workload;
using ::testing::HasSubstr;
using ::testing::Not;

// Random valid configs on two threads: odd spatial sizes (partial column and row tiles),
// channel-block counts that the tile's blocks do not divide (a partial block tile), stride 2,
// padding, dilation, a batch of 2, 1x1 convolutions read in place, blocks of 8 on a 16-lane
// CPU (half vectors) and on AVX2. Fresh random inputs for each config, in fenced arrays.
TEST(CpuConvNchwcTest, RandomConfigsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    std::string shape;  // N,C,H,W,OC,KH,KW[,stride[,pad[,dilation]]],nchwXc
    bool bias, relu;
    std::string features;  // the CPU the space is sized for ("" = this one); code runs here
  } cases[] = {{"1,32,13,17,48,3,3,1,1,nchw16c", true, true, ""},
               {"1,16,9,11,48,1,1,2,0,nchw16c", true, false, ""},
               {"2,16,7,9,16,3,3,1,2,2,nchw16c", false, true, ""},
               {"1,24,10,12,40,3,3,1,1,nchw8c", true, true, "+avx2,+fma"},
               {"1,16,8,9,24,3,3,2,1,nchw8c", false, false, ""}};
  constexpr int kConfigs = 6;
  codegen::runtime::SetNumThreads(2);
  NchwcRunStats stats;
  for (const auto& tc : cases) {
    const Workload w = ConvWorkloadForTest(tc.shape, tc.bias, tc.relu);
    ASSERT_GT(w.layout_block, 0) << tc.shape;
    const Conv2dTemplate tmpl(w, tc.features.empty() ? codegen::HostCpuLimits() : codegen::CpuLimitsOf(tc.features));
    CheckRandomNchwcConfigs(tmpl, w, kConfigs, {"out.blocked"}, "nchwc_conv_", rng, &stats);
  }
  codegen::runtime::SetNumThreads(1);
  ExpectNchwcCoverage(stats);
}

// Every valid config is the blocked layout reading the input in the layout's blocks, with
// whole blocks in the register tile; the default is valid; configs of the NCHW convolution
// that read the input in other blocks are refused, not built.
TEST(CpuConvNchwcTest, SpaceHoldsOnlyTheLayoutsBlocks) {
  std::mt19937_64 rng(7);
  const Workload w = ConvWorkloadForTest("1,32,14,14,64,3,3,1,1,nchw16c", true, true);
  const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx512f,+avx2,+fma"));
  const search::ConfigSpace& space = tmpl.space();
  EXPECT_TRUE(space.IsValid(tmpl.DefaultConfig())) << space.WhyInvalid(tmpl.DefaultConfig());
  int valid = 0;
  for (int draw = 0; draw < 2000; ++draw) {
    const search::Config c = space.Canonical(space.Draw(rng));
    if (!space.IsValid(c)) continue;
    ++valid;
    EXPECT_EQ(space.GetInt(c, "layout"), 1);
    EXPECT_EQ(space.GetInt(c, "in_block"), 1);
    EXPECT_EQ(space.Get(c, "tile_ic").back(), 16);
    EXPECT_EQ(space.Get(c, "tile_oc").back() % 16, 0);
  }
  EXPECT_GT(valid, 20);
  absl::StatusOr<search::Config> other_block = space.FromJson(
      R"({"tile_oc": [4, 1, 16], "tile_oh": [14, 1], "tile_ow": [2, 1, 7], "tile_ic": [4, 8], "order": [0], "vector_axis": [1], "pack_weight": [1],
          "unroll": [1], "acc_tile": [1], "parallel": [0], "layout": [1], "prepack": [1], "in_block": [1]})");
  ASSERT_TRUE(other_block.ok()) << other_block.status();
  EXPECT_THAT(space.WhyInvalid(*other_block), HasSubstr("ic_block_is_layout_block"));
  absl::StatusOr<search::Config> part_block = space.FromJson(
      R"({"tile_oc": [8, 1, 8], "tile_oh": [14, 1], "tile_ow": [2, 1, 7], "tile_ic": [2, 16], "order": [0], "vector_axis": [1], "pack_weight": [1],
          "unroll": [1], "acc_tile": [1], "parallel": [0], "layout": [1], "prepack": [1], "in_block": [1]})");
  ASSERT_TRUE(part_block.ok()) << part_block.status();
  EXPECT_THAT(space.WhyInvalid(*part_block), HasSubstr("oc_tile_whole_blocks"));
}

// The kernel reads the NCHWc input in place when unpadded (a padded one through a zero-bordered
// copy in the same blocks) and writes the NCHWc output directly, with the epilogue in the tile.
TEST(CpuConvNchwcTest, KernelReadsAndWritesTheBlockedTensors) {
  const auto text = [](const std::string& shape) {
    const Workload w = ConvWorkloadForTest(shape, true, true);
    const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx512f,+avx2,+fma"));
    absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(tmpl.DefaultConfig(), "conv");
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? codegen::Print(*f) : "";
  };
  const std::string one_by_one = text("1,32,14,14,64,1,1,2,0,nchw16c");
  EXPECT_THAT(one_by_one, HasSubstr("float data[1][2][14][14][16]"));
  EXPECT_THAT(one_by_one, HasSubstr("float out[1][4][7][7][16]"));
  EXPECT_THAT(one_by_one, Not(HasSubstr("data.pad")));
  EXPECT_THAT(one_by_one, Not(HasSubstr("data.blocked")));
  EXPECT_THAT(one_by_one, Not(HasSubstr("out.blocked")));
  const std::string padded = text("1,32,14,14,64,3,3,1,1,nchw16c");
  EXPECT_THAT(padded, HasSubstr("heap float data.pad[1][2][16][16][16]"));
  EXPECT_THAT(padded, Not(HasSubstr("out.blocked")));
}

TEST(CpuConvNchwcTest, CudaBackEndRefusesTheLayout) {
  const Workload w = ConvWorkloadForTest("1,32,14,14,64,3,3,1,1,nchw16c", false, false);
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_FALSE(tmpl.ok());
  EXPECT_THAT(tmpl.status().message(), HasSubstr("NCHWc"));
  EXPECT_TRUE(codegen::CreateTemplate(w, codegen::Backend::kLlvm).ok());
}

}  // namespace
}  // namespace tune::test
