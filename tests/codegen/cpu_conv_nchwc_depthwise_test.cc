// The conv2d template on NCHWc depthwise convolutions (groups == C == OC, activations in the
// channel blocks that neighbouring layers share): random configs with tails against the
// reference, the space's shape and default, and the kernel's buffers.
#include <algorithm>
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

// The depthwise NCHWc convolution by its definition on the blocked tensors (channel ch at
// [ch / c][..][..][ch % c], weight [C][1][KH][KW]), in double precision: an independent check
// of ReferenceOutput, which unblocks, runs the NCHW convolution and blocks again.
std::vector<float> DepthwiseNchwcByDefinition(const Workload& w, const std::vector<std::vector<float>>& in) {
  const int64_t c = w.layout_block, blocks = w.in_c / c, oh = w.out_h(), ow = w.out_w();
  std::vector<float> out(w.Output().NumElements());
  for (int64_t n = 0; n < w.batch; ++n) {
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          for (int64_t j = 0; j < c; ++j) {
            const int64_t ch = b * c + j;
            double acc = 0;
            for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
              for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
                const int64_t ih = y * w.stride_h + kh * w.dilation_h - w.pad_h;
                const int64_t iw = x * w.stride_w + kw * w.dilation_w - w.pad_w;
                if (ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w) continue;
                acc += static_cast<double>(in[0][(((n * blocks + b) * w.in_h + ih) * w.in_w + iw) * c + j]) *
                       in[1][(ch * w.kernel_h + kh) * w.kernel_w + kw];
              }
            }
            out[(((n * blocks + b) * oh + y) * ow + x) * c + j] =
                ReferenceEpilogue(w, acc, w.bias ? &in[2] : nullptr, ch);
          }
        }
      }
    }
  }
  return out;
}

TEST(CpuConvNchwcDepthwiseTest, TestReferenceIsTheBlockedDepthwiseConv) {
  std::mt19937_64 rng(std::random_device{}());
  for (const std::string shape : {"2,24,9,7,24,3,3,2,1,1,24,nchw8c", "1,32,6,5,32,5,5,1,2,2,32,nchw16c"}) {
    const Workload w = ConvWorkloadForTest(shape, true, false, true);
    ASSERT_TRUE(w.depthwise()) << shape;
    std::vector<std::vector<float>> in;
    for (const codegen::TensorSpec& t : w.Inputs()) in.push_back(RandomValues(t.NumElements(), rng));
    const std::vector<float> want = DepthwiseNchwcByDefinition(w, in), got = ReferenceOutput(w, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << shape << " at " << i;
  }
}

// Random valid configs on two threads: odd spatial sizes (partial column and row tiles),
// channel-block counts that the tile's blocks do not divide (a partial block tile), stride 2,
// padding, dilation, a batch of 2, unpadded inputs read in place, bias with relu or relu6,
// blocks of 8 and 16 (blocks of 8 on a 16-lane CPU: half vectors), and a space sized for AVX2.
// Fresh random inputs for each config, in fenced arrays.
TEST(CpuConvNchwcDepthwiseTest, RandomConfigsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    std::string shape;  // N,C,H,W,OC,KH,KW,stride,pad,dilation,groups,nchwXc
    bool bias, relu, relu6;
    std::string features;  // the CPU the space is sized for ("" = this one); code runs here
  } cases[] = {{"1,48,13,17,48,3,3,1,1,1,48,nchw16c", true, true, false, ""},
               {"1,40,15,15,40,3,3,2,1,1,40,nchw8c", true, false, true, ""},
               {"2,24,9,11,24,3,3,1,2,2,24,nchw8c", false, true, false, ""},
               {"1,80,7,9,80,5,5,2,2,1,80,nchw16c", true, false, true, "+avx2,+fma"},
               {"1,56,11,10,56,3,3,1,0,1,56,nchw8c", false, false, false, ""}};
  constexpr int kConfigs = 6;
  codegen::runtime::SetNumThreads(2);
  NchwcRunStats stats;
  for (const auto& tc : cases) {
    const Workload w = ConvWorkloadForTest(tc.shape, tc.bias, tc.relu, tc.relu6);
    ASSERT_TRUE(w.depthwise()) << tc.shape;
    ASSERT_GT(w.layout_block, 0) << tc.shape;
    const Conv2dTemplate tmpl(w, tc.features.empty() ? codegen::HostCpuLimits() : codegen::CpuLimitsOf(tc.features));
    CheckRandomNchwcConfigs(tmpl, w, kConfigs, {"out.blocked", "data.blocked"}, "nchwc_dw_conv_", rng, &stats);
  }
  codegen::runtime::SetNumThreads(1);
  ExpectNchwcCoverage(stats);
}

// Every valid config is the blocked layout with whole blocks of the layout in the register tile
// and no input-channel tiling (one input channel per output channel); the default is valid.
TEST(CpuConvNchwcDepthwiseTest, SpaceHoldsOnlyTheLayoutsBlocksAndTheDefaultIsValid) {
  std::mt19937_64 rng(std::random_device{}());
  for (const std::string shape : {"1,96,14,14,96,3,3,1,1,1,96,nchw16c", "1,144,56,56,144,3,3,2,1,1,144,nchw8c"}) {
    const Workload w = ConvWorkloadForTest(shape, true, false, true);
    const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx512f,+avx2,+fma"));
    const search::ConfigSpace& space = tmpl.space();
    EXPECT_TRUE(space.IsValid(tmpl.DefaultConfig())) << shape << ": " << space.WhyInvalid(tmpl.DefaultConfig());
    EXPECT_TRUE(tmpl.Lower(tmpl.DefaultConfig(), "conv").ok()) << shape;
    int valid = 0;
    for (int draw = 0; draw < 2000; ++draw) {
      const search::Config c = space.Canonical(space.Draw(rng));
      if (!space.IsValid(c)) continue;
      ++valid;
      EXPECT_EQ(space.GetInt(c, "layout"), 1);
      EXPECT_EQ(space.Get(c, "tile_ic"), (std::vector<int64_t>{1, 1}));
      EXPECT_EQ(space.Get(c, "tile_oc").back() % w.layout_block, 0);
    }
    EXPECT_GT(valid, 20) << shape;
  }
}

// The kernel reads the NCHWc input in place when unpadded (a padded one through a zero-bordered
// copy in the same blocks), packs the weight by blocks of the layout, and writes the NCHWc
// output directly, with the epilogue in the tile.
TEST(CpuConvNchwcDepthwiseTest, KernelReadsAndWritesTheBlockedTensors) {
  const auto text = [](const std::string& shape) {
    const Workload w = ConvWorkloadForTest(shape, true, false, true);
    const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx512f,+avx2,+fma"));
    absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(tmpl.DefaultConfig(), "conv");
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? codegen::Print(*f) : "";
  };
  const std::string unpadded = text("1,32,14,14,32,3,3,1,0,1,32,nchw16c");
  EXPECT_THAT(unpadded, HasSubstr("float data[1][2][14][14][16]"));
  EXPECT_THAT(unpadded, HasSubstr("float out[1][2][12][12][16]"));
  EXPECT_THAT(unpadded, HasSubstr("weight.packed[2][1][3][3][16]"));
  EXPECT_THAT(unpadded, Not(HasSubstr("data.pad")));
  EXPECT_THAT(unpadded, Not(HasSubstr("data.blocked")));
  EXPECT_THAT(unpadded, Not(HasSubstr("out.blocked")));
  const std::string padded = text("1,32,14,14,32,3,3,2,1,1,32,nchw16c");
  EXPECT_THAT(padded, HasSubstr("heap float data.pad[1][2][16][16][16]"));
  EXPECT_THAT(padded, HasSubstr("float out[1][2][7][7][16]"));
  EXPECT_THAT(padded, Not(HasSubstr("out.blocked")));
}

}  // namespace
}  // namespace tune::test
