// The conv2d template's channel-blocked input (in_block) for dense convolutions in the blocked
// layout: random configs with tails against the reference, the copies' layouts, and configs
// recorded before the knob.
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
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/golden.h"

namespace tune::test {
namespace {

using codegen::Conv2dTemplate;
using codegen::OpKind;
using codegen::Workload;
using ::testing::HasSubstr;
using ::testing::Not;

/// The config of `tmpl` that `json` writes; empty (and a test failure) when it does not parse.
search::Config InBlockConfigFromJson(const Conv2dTemplate& tmpl, const std::string& json) {
  absl::StatusOr<search::Config> c = tmpl.space().FromJson(json);
  EXPECT_TRUE(c.ok()) << c.status() << "\n" << json;
  return c.ok() ? *c : search::Config();
}

/// The pseudo-C of `tmpl`'s kernel for `json` ("" and a test failure when it does not lower).
std::string InBlockKernelText(const Conv2dTemplate& tmpl, const std::string& json) {
  const search::Config c = InBlockConfigFromJson(tmpl, json);
  if (c.empty()) return "";
  EXPECT_TRUE(tmpl.space().IsValid(c)) << tmpl.space().WhyInvalid(c) << "\n" << json;
  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(c, "conv");
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? codegen::Print(*f) : "";
}

// ---------------------------------------------------------------------------------------------
// Random configs against the reference
// ---------------------------------------------------------------------------------------------

// Random blocked configs with the blocked input, on two threads with every parallel option:
// input channels that the block does not divide (the copies' zeros past IC), output channels
// that ob does not divide, odd sizes, stride 2, padding, dilation, a batch of 2, 1x1
// convolutions with and without padding (without: the copy holds only the strided rows and
// columns). Fresh random inputs for each config, in fenced arrays.
TEST(CpuConvInBlockTest, RandomConfigsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    std::string shape;  // N,C,H,W,OC,KH,KW[,stride[,pad[,dilation]]]
    bool bias, relu;
    std::string features;  // the CPU the space is sized for ("" = this one); code runs here
  } cases[] = {{"1,13,17,19,20,3,3,1,1", true, true, ""},
               {"1,13,17,19,7,3,3,2,1", false, true, "+avx2,+fma"},
               {"2,5,9,11,9,3,3,1,2,2", true, false, ""},
               {"1,24,14,14,40,1,1,2,0", true, false, ""},
               {"1,7,9,11,6,1,1,1,0", false, false, "+avx2,+fma"},
               {"1,10,9,11,12,1,1,1,1", false, true, ""}};
  constexpr int kConfigs = 6;
  codegen::runtime::SetNumThreads(2);
  int failures = 0, ic_tails = 0, oc_tails = 0;
  std::set<int64_t> parallel_seen;
  for (const auto& tc : cases) {
    const Workload w = ConvWorkloadForTest(tc.shape, tc.bias, tc.relu);
    const Conv2dTemplate tmpl(w, tc.features.empty() ? codegen::HostCpuLimits() : codegen::CpuLimitsOf(tc.features));
    const search::ConfigSpace& space = tmpl.space();
    // Distinct valid configs with the blocked input, a third of them (at least) with a last
    // input-channel block only partly in IC.
    std::vector<search::Config> configs;
    int case_ic_tails = 0;
    for (int draw = 0; draw < 200000 && static_cast<int>(configs.size()) < kConfigs; ++draw) {
      search::Config c = space.Draw(rng);
      c[space.KnobIndex("layout")] = OptionWithValue(space, "layout", 1);
      c[space.KnobIndex("in_block")] = OptionWithValue(space, "in_block", 1);
      c = space.Canonical(c);
      if (!space.IsValid(c) || space.GetInt(c, "in_block") != 1) continue;
      const bool ic_tail = w.in_c % space.Get(c, "tile_ic").back() != 0;
      const int others = static_cast<int>(configs.size()) - case_ic_tails;
      if (!ic_tail && others >= kConfigs - kConfigs / 3) continue;
      if (std::find(configs.begin(), configs.end(), c) != configs.end()) continue;
      configs.push_back(c);
      case_ic_tails += ic_tail;
    }
    ASSERT_EQ(static_cast<int>(configs.size()), kConfigs) << w.Key();
    ic_tails += case_ic_tails;
    const CompiledConfigs compiled = CompileConfigs(tmpl, configs, "in_block_conv_");
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string context = absl::StrCat(w.Key(), " ", space.ToJson(configs[i]));
      oc_tails += w.out_c % space.Get(configs[i], "tile_oc").back() != 0;
      parallel_seen.insert(space.GetInt(configs[i], "parallel"));
      EXPECT_THAT(compiled.texts[i], HasSubstr("data.blocked[")) << context;
      ASSERT_TRUE(compiled.kernels[i].ok()) << compiled.kernels[i].status() << "\n" << context;
      absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded =
          codegen::LoadedKernel::Load(*compiled.kernels[i]);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
      if (!why.empty() && ++failures <= 2) ADD_FAILURE() << why << "\n" << context << "\n" << compiled.texts[i];
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0);
  EXPECT_GE(ic_tails, 6 * (kConfigs / 3));
  EXPECT_GE(oc_tails, 3) << "too few configs with a partial output-channel block";
  EXPECT_EQ(parallel_seen, (std::set<int64_t>{0, 1, 2}));
}

// ---------------------------------------------------------------------------------------------
// The copies' layouts
// ---------------------------------------------------------------------------------------------

// IC 7 in blocks of 4 and OC 6 in a block of 8, padding 1: the input copy is
// [N][ceil(IC/4)][H+2][W+2][4] (zeros in the border and past IC), the weight
// [1][2][KH][KW][4][8] (zeros past IC and OC), and the tile reads both with the block's channel
// (ic1) last, right outside the tile: consecutive broadcasts read consecutive floats.
TEST(CpuConvInBlockGoldenTest, BlockedInputAndWeightLayouts) {
  const Workload w = ConvWorkloadForTest("1,7,4,6,6,3,3,1,1", /*bias=*/true, /*relu=*/false);
  const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx2"));
  const std::string got = InBlockKernelText(
      tmpl, R"({"tile_oc": [1, 1, 8], "tile_oh": [4, 1], "tile_ow": [2, 1, 3], "tile_ic": [2, 4], "order": [0],
                "vector_axis": [1], "unroll": [0], "pack_weight": [1], "acc_tile": [1], "parallel": [0],
                "layout": [1], "prepack": [0], "in_block": [1]})");
  const std::string expected = Golden(R"IR(
void conv(float data[1][7][4][6], float weight[6][7][3][3], float bias[6], float out[1][6][4][6]) {
  heap float data.blocked[1][2][6][8][4];
  heap float weight.packed[1][2][3][3][4][8];
  heap float out.blocked[1][1][4][6][8];
  for (pn = 0; pn < 1; ++pn) {
    for (pc = 0; pc < 2; ++pc) {
      for (ph = 0; ph < 6; ++ph) {
        for (pw = 0; pw < 8; ++pw) {
          // vectorized
          for (pb = 0; pb < 4; ++pb) {
            data.blocked[pn, pc, ph, pw, pb] = (1 <= ph && ph < 5 && 1 <= pw && pw < 7 && pc*4 + pb < 7 ? data[pn, min(pc*4 + pb, 6), min(max(ph - 1, 0), 3), min(max(pw - 1, 0), 5)] : 0f);
          }
        }
      }
    }
  }
  for (po = 0; po < 1; ++po) {
    for (pi = 0; pi < 2; ++pi) {
      for (pkh = 0; pkh < 3; ++pkh) {
        for (pkw = 0; pkw < 3; ++pkw) {
          for (pj = 0; pj < 4; ++pj) {
            // vectorized
            for (pb = 0; pb < 8; ++pb) {
              weight.packed[po, pi, pkh, pkw, pj, pb] = (po*8 + pb < 6 && pi*4 + pj < 7 ? weight[min(po*8 + pb, 5), min(pi*4 + pj, 6), pkh, pkw] : 0f);
            }
          }
        }
      }
    }
  }
  for (n = 0; n < 1; ++n) {
    for (oc0 = 0; oc0 < 1; ++oc0) {
      for (oh0 = 0; oh0 < 4; ++oh0) {
        for (ow0 = 0; ow0 < 2; ++ow0) {
          for (oc1 = 0; oc1 < 1; ++oc1) {
            for (oh1 = 0; oh1 < 1; ++oh1) {
              for (ow1 = 0; ow1 < 1; ++ow1) {
                local float out.blocked.local[3][8];
                for (ow2 = 0; ow2 < 3; ++ow2) {
                  // vectorized
                  for (ob = 0; ob < 8; ++ob) {
                    out.blocked.local[ow2, ob] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 2; ++ic0) {
                  for (kh = 0; kh < 3; ++kh) {
                    if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 5) {
                      for (kw = 0; kw < 3; ++kw) {
                        for (ic1 = 0; ic1 < 4; ++ic1) {
                          for (ow2 = 0; ow2 < 3; ++ow2) {
                            // vectorized
                            for (ob = 0; ob < 8; ++ob) {
                              out.blocked.local[ow2, ob] = out.blocked.local[ow2, ob] + data.blocked[n, ic0, oh0 + oh1 + kh, ow0*3 + (ow1*3 + ow2) + kw, ic1]*weight.packed[oc0 + oc1, ic0, kh, kw, ic1, ob];
                            }
                          }
                        }
                      }
                    }
                  }
                }
                for (ow2 = 0; ow2 < 3; ++ow2) {
                  // vectorized
                  for (ob = 0; ob < 8; ++ob) {
                    out.blocked[n, oc0 + oc1, oh0 + oh1, ow0*3 + (ow1*3 + ow2), ob] = out.blocked.local[ow2, ob];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  for (bn = 0; bn < 1; ++bn) {
    for (boh = 0; boh < 4; ++boh) {
      for (bow0 = 0; bow0 < 1; ++bow0) {
        for (boc1 = 0; boc1 < 8; ++boc1) {
          if (boc1 < 6) {
            // vectorized
            for (bow1 = 0; bow1 < 6; ++bow1) {
              out[bn, boc1, boh, bow0*6 + bow1] = out.blocked[bn, 0, boh, bow0*6 + bow1, boc1] + bias[boc1];
            }
          }
        }
      }
    }
  }
}
)IR");
  EXPECT_EQ(got, expected) << "actual:\n" << got;
}

// A 1x1 convolution with stride 2 and no padding copies only the rows and columns it reads
// ([N][IC/icb][OH][OW][icb], from data[.., 2 oh, 2 ow]) and reads the copy at (oh, ow); with
// padding it copies the whole padded input and reads it at the stride.
TEST(CpuConvInBlockGoldenTest, StridedPointwiseCopiesTheRowsItReads) {
  auto json = [](int64_t oh, int64_t ow) {
    return absl::StrCat(R"({"tile_oc": [5, 1, 8], "tile_oh": [)", oh, R"(, 1], "tile_ow": [1, 1, )", ow,
                        R"(], "tile_ic": [3, 8], "order": [0], "vector_axis": [1], "unroll": [0],
                           "pack_weight": [1], "acc_tile": [1], "parallel": [0], "layout": [1], "prepack": [0],
                           "in_block": [1]})");
  };
  const Conv2dTemplate unpadded(ConvWorkloadForTest("1,24,14,13,40,1,1,2,0", false, false),
                                codegen::CpuLimitsOf("+avx2"));
  const std::string a = InBlockKernelText(unpadded, json(7, 7));
  EXPECT_THAT(a, HasSubstr("heap float data.blocked[1][3][7][7][8];")) << a;
  EXPECT_THAT(a, HasSubstr("data.blocked[pn, pc, ph, pw, pb] = data[pn, pc*8 + pb, ph*2, pw*2];")) << a;
  EXPECT_THAT(a, HasSubstr("data.blocked[n, ic0, oh0 + oh1, ow0*7 + (ow1*7 + ow2), ic1]*"
                           "weight.packed[oc0 + oc1, ic0, kh, kw, ic1, ob]"))
      << a;
  const Conv2dTemplate padded(ConvWorkloadForTest("1,24,14,13,40,1,1,2,1", false, false),
                              codegen::CpuLimitsOf("+avx2"));
  const std::string b = InBlockKernelText(padded, json(8, 8));
  EXPECT_THAT(b, HasSubstr("heap float data.blocked[1][3][16][15][8];")) << b;
  EXPECT_THAT(b, HasSubstr("data.blocked[n, ic0, (oh0 + oh1)*2 + kh, (ow0*8 + (ow1*8 + ow2))*2 + kw, ic1]*")) << b;
}

// ---------------------------------------------------------------------------------------------
// The knob in the space
// ---------------------------------------------------------------------------------------------

// A config recorded before the knob reads as in_block 0 and gives the kernel it gave (the NCHW
// input); the knob matters only in the blocked layout, and grouped or depthwise convolutions
// have only 0.
TEST(CpuConvInBlockSpaceTest, OldConfigsKeepTheirKernel) {
  const Workload w = ConvWorkloadForTest("1,7,4,6,6,3,3,1,1", true, true);
  const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx2"));
  const std::string knobs =
      R"("tile_oc": [1, 1, 8], "tile_oh": [4, 1], "tile_ow": [2, 1, 3], "tile_ic": [2, 4], "order": [0],
         "vector_axis": [1], "unroll": [1], "pack_weight": [1], "acc_tile": [1], "parallel": [1], "layout": [1])";
  const search::Config old = InBlockConfigFromJson(tmpl, "{" + knobs + "}");
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(tmpl.space().GetInt(old, "in_block"), 0);
  const std::string old_text = InBlockKernelText(tmpl, "{" + knobs + "}");
  EXPECT_EQ(old_text, InBlockKernelText(tmpl, "{" + knobs + R"(, "in_block": [0]})"));
  EXPECT_THAT(old_text, HasSubstr("data.pad[")) << old_text;
  EXPECT_THAT(old_text, Not(HasSubstr("data.blocked"))) << old_text;
  EXPECT_THAT(InBlockKernelText(tmpl, "{" + knobs + R"(, "in_block": [1]})"), HasSubstr("data.blocked["));

  // The nchw layout pins it to 0.
  search::Config nchw = old;
  nchw[tmpl.space().KnobIndex("layout")] = OptionWithValue(tmpl.space(), "layout", 0);
  nchw[tmpl.space().KnobIndex("in_block")] = OptionWithValue(tmpl.space(), "in_block", 1);
  EXPECT_EQ(tmpl.space().WhyInvalid(nchw), "in_block_pinned");
  // A block of one channel would be the NCHW input again.
  const search::Config one_channel = InBlockConfigFromJson(
      tmpl, "{" + std::string(knobs).replace(knobs.find(R"("tile_ic": [2, 4])"), 17, R"("tile_ic": [7, 1])") +
                R"(, "in_block": [1]})");
  ASSERT_FALSE(one_channel.empty());
  EXPECT_EQ(tmpl.space().WhyInvalid(one_channel), "in_block_needs_block");

  const Conv2dTemplate grouped(ConvWorkloadForTest("1,16,9,9,32,3,3,1,1,1,4", false, false),
                               codegen::CpuLimitsOf("+avx2"));
  const Conv2dTemplate depthwise(ConvWorkloadForTest("1,16,9,9,16,3,3,1,1,1,16", false, false),
                                 codegen::CpuLimitsOf("+avx2"));
  for (const Conv2dTemplate* t : {&grouped, &depthwise}) {
    const search::Knob& knob = t->space().knobs()[t->space().KnobIndex("in_block")];
    EXPECT_EQ(knob.options, (std::vector<std::vector<int64_t>>{{0}})) << t->workload().Key();
  }
  EXPECT_EQ(tmpl.space().knobs()[tmpl.space().KnobIndex("in_block")].options.size(), 2u);
}

}  // namespace
}  // namespace tune::test
