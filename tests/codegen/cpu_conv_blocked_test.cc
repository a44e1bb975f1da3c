// The conv2d template's blocked (NCHWc) layout on the CPU: random blocked configs with tails
// against a double-precision reference in fenced buffers, the nchw layout's code unchanged,
// and register tiles bounded by the CPU's vector registers.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/kernel.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/golden.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using test::ConvWorkloadForTest;

constexpr uint64_t kBlockedSeed = 20261128;

/// The config of `tmpl` written as JSON; an empty config (a test failure) when it does not parse.
search::Config BlockedConfigFromJson(const Template& tmpl, const std::string& json) {
  absl::StatusOr<search::Config> c = tmpl.space().FromJson(json);
  EXPECT_TRUE(c.ok()) << c.status() << "\n" << json;
  return c.ok() ? *c : search::Config();
}

// ---------------------------------------------------------------------------------------------
// Random blocked configs against the reference
// ---------------------------------------------------------------------------------------------

struct BlockedConvCase {
  std::string label;
  std::string shape;  // N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]]
  bool bias, relu, relu6;
  std::string features;  // the CPU the space is sized for ("" = this one); code runs here
  int configs;           // distinct random valid blocked configs
};
void PrintTo(const BlockedConvCase& c, std::ostream* os) { *os << c.label; }

std::vector<BlockedConvCase> BlockedConvCases() {
  return {
      {"conv_13x17x19_oc7_k3_p1_bias_relu", "1,13,17,19,7,3,3,1,1", true, true, false, "", 20},
      {"conv_13x17x19_oc20_k3_s2_p1_bias", "1,13,17,19,20,3,3,2,1", true, false, false, "", 20},
      {"conv_13x17x19_oc20_k1_relu", "1,13,17,19,20,1,1", false, true, false, "", 20},
      {"depthwise_12x17x19_k3_p1_bias_relu", "1,12,17,19,12,3,3,1,1,1,12", true, true, false, "", 20},
      {"depthwise_20x13x11_k3_s2_p1_relu6", "1,20,13,11,20,3,3,2,1,1,20", false, false, true, "", 20},
      {"conv_2x5x9x11_oc9_k3_p2_d2_avx512_space", "2,5,9,11,9,3,3,1,2,2", true, true, false, "+avx512f", 20},
  };
}

class CpuConvBlockedTest : public ::testing::TestWithParam<BlockedConvCase> {
 protected:
  static void SetUpTestSuite() { runtime::SetNumThreads(2); }
  static void TearDownTestSuite() { runtime::SetNumThreads(1); }
};

TEST_P(CpuConvBlockedTest, RandomBlockedConfigsMatchReference) {
  const BlockedConvCase& c = GetParam();
  const Workload w = ConvWorkloadForTest(c.shape, c.bias, c.relu, c.relu6);
  const Conv2dTemplate tmpl(w, c.features.empty() ? HostCpuLimits() : CpuLimitsOf(c.features));
  const search::ConfigSpace& space = tmpl.space();
  const int layout = space.KnobIndex("layout");

  // Distinct valid blocked configs from a fixed seed, at least a quarter of them with a last
  // channel block only partly in OC (ob not dividing OC).
  std::mt19937_64 rng(kBlockedSeed);
  std::vector<search::Config> configs;
  std::set<uint64_t> seen;
  const int want_channel_tails = c.configs / 4;
  int channel_tails = 0, split_tails = 0;
  for (int draw = 0; draw < 1000 * c.configs && static_cast<int>(configs.size()) < c.configs; ++draw) {
    absl::StatusOr<search::Config> config = space.Sample(rng);
    ASSERT_TRUE(config.ok()) << config.status();
    if (space.GetInt(*config, "layout") != 1) continue;
    const bool channel_tail = w.out_c % space.Get(*config, "tile_oc").back() != 0;
    const int others = static_cast<int>(configs.size()) - channel_tails;
    if (!channel_tail && others >= c.configs - want_channel_tails) continue;
    if (!seen.insert(space.ToIndex(*config)).second) continue;
    configs.push_back(*config);
    channel_tails += channel_tail;
  }
  ASSERT_EQ(static_cast<int>(configs.size()), c.configs);
  // Tails among them: a last channel block only partly in OC, and splits with a partial tile.
  for (const search::Config& config : configs) {
    EXPECT_TRUE(space.IsValid(config));
    EXPECT_EQ(config[layout], 1);
    for (size_t i = 0; i < config.size(); ++i) {
      const search::Knob& knob = space.knobs()[i];
      if (knob.kind == search::Knob::Kind::kSplit && search::PaddedExtent(knob.options[config[i]]) != knob.extent) {
        ++split_tails;
        break;
      }
    }
  }
  EXPECT_GE(channel_tails, want_channel_tails);
  EXPECT_GE(split_tails, c.configs / 3) << "too few configs with a tail";

  const test::CompiledConfigs compiled_configs = test::CompileConfigs(tmpl, configs, "blocked_kernel_");
  const auto& compiled = compiled_configs.kernels;
  const auto& texts = compiled_configs.texts;

  int failures = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string context = absl::StrCat(w.Key(), " config #", i, " ", space.ToJson(configs[i]));
    EXPECT_THAT(texts[i], HasSubstr("out.blocked[")) << context;
    if (!compiled[i].ok()) {
      ++failures;
      ADD_FAILURE() << "compile failed: " << compiled[i].status() << "\n" << context;
      continue;
    }
    absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(*compiled[i]);
    if (!loaded.ok()) {
      ++failures;
      ADD_FAILURE() << "load failed: " << loaded.status() << "\n" << context;
      continue;
    }
    // Fresh random inputs per config, in fenced arrays; the output starts as NaN.
    std::mt19937_64 data_rng(kBlockedSeed + 1000 + i);
    const std::string why = test::RunFencedAgainstReference((*loaded)->fn(), w, data_rng);
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << why << "\n" << context << (failures <= 1 ? "\n" + texts[i] : std::string());
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << configs.size() << " configs failed";
}

INSTANTIATE_TEST_SUITE_P(Workloads, CpuConvBlockedTest, ::testing::ValuesIn(BlockedConvCases()),
                         [](const ::testing::TestParamInfo<BlockedConvCase>& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------------
// The nchw layout as before
// ---------------------------------------------------------------------------------------------

// The kernels of two nchw configs (tails, epilogue, packed or plain weight, both vector
// axes), as the template generated them before it had a layout knob: a config recorded
// without the knob and one naming layout 0 give exactly that code.
TEST(CpuConvBlockedGoldenTest, NchwLayoutCodeUnchanged) {
  const Workload w = ConvWorkloadForTest("1,3,5,8,6,3,3,1,1", /*bias=*/true, /*relu=*/true);
  const Conv2dTemplate tmpl(w, CpuLimitsOf("+avx2"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("tile_oc": [2, 1, 4], "tile_oh": [5, 1], "tile_ow": [2, 1, 4], "tile_ic": [1, 3], "order": [0], "vector_axis": [1], "unroll": [1], "pack_weight": [1], "acc_tile": [1], "parallel": [1])",
       test::Golden(R"IR(
void conv(float data[1][3][5][8], float weight[6][3][3][3], float bias[6], float out[1][6][5][8]) {
  heap float data.pad[1][3][7][10];
  heap float weight.packed[2][3][3][3][4];
  // parallel
  for (pn.pc = 0; pn.pc < 3; ++pn.pc) {
    for (ph = 0; ph < 7; ++ph) {
      for (pw = 0; pw < 10; ++pw) {
        data.pad[0, pn.pc, ph, pw] = (1 <= ph && ph < 6 && 1 <= pw && pw < 9 ? data[0, pn.pc, min(max(ph - 1, 0), 4), min(max(pw - 1, 0), 7)] : 0f);
      }
    }
  }
  // parallel
  for (po = 0; po < 2; ++po) {
    for (pi = 0; pi < 3; ++pi) {
      for (pkh = 0; pkh < 3; ++pkh) {
        for (pkw = 0; pkw < 3; ++pkw) {
          for (pb = 0; pb < 4; ++pb) {
            weight.packed[po, pi, pkh, pkw, pb] = (po*4 + pb < 6 ? weight[min(po*4 + pb, 5), pi, pkh, pkw] : 0f);
          }
        }
      }
    }
  }
  // parallel
  for (n.oc0 = 0; n.oc0 < 2; ++n.oc0) {
    if (n.oc0 < 1) {
      for (oh0 = 0; oh0 < 5; ++oh0) {
        for (ow0 = 0; ow0 < 2; ++ow0) {
          for (oc1 = 0; oc1 < 1; ++oc1) {
            for (oh1 = 0; oh1 < 1; ++oh1) {
              for (ow1 = 0; ow1 < 1; ++ow1) {
                local float out.local[4][4];
                // unrolled
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 4; ++oc2) {
                    out.local[ow2, oc2] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 1; ++ic0) {
                  for (kh = 0; kh < 3; ++kh) {
                    if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 6) {
                      // unrolled
                      for (kw = 0; kw < 3; ++kw) {
                        for (ic1 = 0; ic1 < 3; ++ic1) {
                          // unrolled
                          for (ow2 = 0; ow2 < 4; ++ow2) {
                            // vectorized
                            for (oc2 = 0; oc2 < 4; ++oc2) {
                              out.local[ow2, oc2] = out.local[ow2, oc2] + data.pad[0, ic0*3 + ic1, oh0 + oh1 + kh, ow0*4 + (ow1*4 + ow2) + kw]*weight.packed[n.oc0 + oc1, ic0*3 + ic1, kh, kw, oc2];
                            }
                          }
                        }
                      }
                    }
                  }
                }
                // unrolled
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 4; ++oc2) {
                    out[0, n.oc0*4 + (oc1*4 + oc2), oh0 + oh1, ow0*4 + (ow1*4 + ow2)] = max(out.local[ow2, oc2] + bias[n.oc0*4 + (oc1*4 + oc2)], 0f);
                  }
                }
              }
            }
          }
        }
      }
    }
    if (1 <= n.oc0) {
      for (oh0 = 0; oh0 < 5; ++oh0) {
        for (ow0 = 0; ow0 < 2; ++ow0) {
          for (oc1 = 0; oc1 < 1; ++oc1) {
            for (oh1 = 0; oh1 < 1; ++oh1) {
              for (ow1 = 0; ow1 < 1; ++ow1) {
                local float out.local[4][4];
                // unrolled
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 4; ++oc2) {
                    out.local[ow2, oc2] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 1; ++ic0) {
                  for (kh = 0; kh < 3; ++kh) {
                    if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 6) {
                      for (kw = 0; kw < 3; ++kw) {
                        for (ic1 = 0; ic1 < 3; ++ic1) {
                          for (ow2 = 0; ow2 < 4; ++ow2) {
                            // vectorized
                            for (oc2 = 0; oc2 < 4; ++oc2) {
                              if (n.oc0*4 + (oc1*4 + oc2) < 6) {
                                out.local[ow2, oc2] = out.local[ow2, oc2] + data.pad[0, ic0*3 + ic1, oh0 + oh1 + kh, ow0*4 + (ow1*4 + ow2) + kw]*weight.packed[n.oc0 + oc1, ic0*3 + ic1, kh, kw, oc2];
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                }
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 4; ++oc2) {
                    if (n.oc0*4 + (oc1*4 + oc2) < 6) {
                      out[0, n.oc0*4 + (oc1*4 + oc2), oh0 + oh1, ow0*4 + (ow1*4 + ow2)] = max(out.local[ow2, oc2] + bias[n.oc0*4 + (oc1*4 + oc2)], 0f);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}
)IR")},
      {R"("tile_oc": [3, 2, 1], "tile_oh": [5, 1], "tile_ow": [1, 2, 4], "tile_ic": [3, 1], "order": [1], "vector_axis": [2], "unroll": [0], "pack_weight": [0], "acc_tile": [1], "parallel": [0])",
       test::Golden(R"IR(
void conv(float data[1][3][5][8], float weight[6][3][3][3], float bias[6], float out[1][6][5][8]) {
  heap float data.pad[1][3][7][10];
  for (pn = 0; pn < 1; ++pn) {
    for (pc = 0; pc < 3; ++pc) {
      for (ph = 0; ph < 7; ++ph) {
        for (pw = 0; pw < 10; ++pw) {
          data.pad[pn, pc, ph, pw] = (1 <= ph && ph < 6 && 1 <= pw && pw < 9 ? data[pn, pc, min(max(ph - 1, 0), 4), min(max(pw - 1, 0), 7)] : 0f);
        }
      }
    }
  }
  for (n = 0; n < 1; ++n) {
    for (oc0 = 0; oc0 < 3; ++oc0) {
      for (oh0 = 0; oh0 < 5; ++oh0) {
        for (ow0 = 0; ow0 < 1; ++ow0) {
          for (oh1 = 0; oh1 < 1; ++oh1) {
            for (ow1 = 0; ow1 < 2; ++ow1) {
              for (oc1 = 0; oc1 < 2; ++oc1) {
                local float out.local[1][4];
                for (oc2 = 0; oc2 < 1; ++oc2) {
                  // vectorized
                  for (ow2 = 0; ow2 < 4; ++ow2) {
                    out.local[oc2, ow2] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 3; ++ic0) {
                  for (ic1 = 0; ic1 < 1; ++ic1) {
                    for (kh = 0; kh < 3; ++kh) {
                      if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 6) {
                        for (kw = 0; kw < 3; ++kw) {
                          for (oc2 = 0; oc2 < 1; ++oc2) {
                            // vectorized
                            for (ow2 = 0; ow2 < 4; ++ow2) {
                              out.local[oc2, ow2] = out.local[oc2, ow2] + data.pad[n, ic0 + ic1, oh0 + oh1 + kh, ow0*8 + (ow1*4 + ow2) + kw]*weight[oc0*2 + (oc1 + oc2), ic0 + ic1, kh, kw];
                            }
                          }
                        }
                      }
                    }
                  }
                }
                for (oc2 = 0; oc2 < 1; ++oc2) {
                  // vectorized
                  for (ow2 = 0; ow2 < 4; ++ow2) {
                    out[n, oc0*2 + (oc1 + oc2), oh0 + oh1, ow0*8 + (ow1*4 + ow2)] = max(out.local[oc2, ow2] + bias[oc0*2 + (oc1 + oc2)], 0f);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}
)IR")},
  };
  for (const auto& [knobs, expected] : cases) {
    for (const std::string& json : {"{" + knobs + "}", "{" + knobs + R"(, "layout": [0]})"}) {
      const search::Config config = BlockedConfigFromJson(tmpl, json);
      ASSERT_FALSE(config.empty());
      EXPECT_EQ(tmpl.space().GetInt(config, "layout"), 0);
      ASSERT_TRUE(tmpl.space().IsValid(config)) << tmpl.space().WhyInvalid(config);
      absl::StatusOr<LoweredFunc> f = tmpl.Lower(config, "conv");
      ASSERT_TRUE(f.ok()) << f.status();
      const std::string got = Print(*f);
      EXPECT_EQ(got, expected) << json << "\nactual:\n" << got;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Register tiles sized to the CPU
// ---------------------------------------------------------------------------------------------

/// A ResNet-like 3x3 convolution's config with an ob x ow2 register tile.
std::string BlockedTileJson(int64_t ob, int64_t ow2, int layout, int vector_axis = 1, int pack = 1) {
  const int64_t oc0 = (64 + ob - 1) / ob, ow0 = (56 + ow2 - 1) / ow2;
  return absl::StrCat(R"({"tile_oc": [)", oc0, ", 1, ", ob, R"(], "tile_oh": [56, 1], "tile_ow": [)", ow0, ", 1, ",
                      ow2, R"(], "tile_ic": [16, 1], "order": [0], "vector_axis": [)", vector_axis,
                      R"(], "unroll": [0], "pack_weight": [)", pack, R"(], "acc_tile": [1], "parallel": [0], "layout": [)",
                      layout, "]}");
}

/// WhyInvalid of the config BlockedTileJson describes ("" when valid).
std::string BlockedTileWhyInvalid(const Template& tmpl, const std::string& json) {
  const search::Config config = BlockedConfigFromJson(tmpl, json);
  return config.empty() ? "unparsed" : tmpl.space().WhyInvalid(config);
}

TEST(CpuConvBlockedLimitsTest, RegisterTilesFollowTheCpu) {
  const Workload w = ConvWorkloadForTest("1,16,56,56,64,3,3,1,1", /*bias=*/true, /*relu=*/true);
  const Conv2dTemplate avx2(w, CpuLimitsOf("+avx2,+fma"));
  const Conv2dTemplate avx512(w, CpuLimitsOf("+avx2,+avx512f,+fma"));
  // Blocked: ceil(ob / lanes) * (ow2 + 1) accumulator and weight vectors, and a broadcast.
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(32, 14, 1)), "");  // 28 + 2 + 1 zmm of 32
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(32, 14, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(64, 6, 1)), "");  // 24 + 4 + 1
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(64, 7, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(48, 9, 1)), "");  // 27 + 3 + 1
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(48, 10, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(8, 14, 1)), "");  // 14 + 1 + 1 ymm of 16
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(8, 15, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(16, 6, 1)), "");  // 12 + 2 + 1
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(16, 7, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(24, 4, 1)), "");  // 12 + 3 + 1
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(24, 5, 1)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(32, 3, 1)), "register_tile");  // 12 + 4 + 1
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(32, 2, 1)), "");
  // nchw keeps its 256 floats (16 x 16 valid on both), or the registers' 480 on AVX-512.
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(16, 16, 0)), "");
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(16, 16, 0)), "");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(32, 14, 0)), "register_tile");
  EXPECT_EQ(BlockedTileWhyInvalid(avx512, BlockedTileJson(32, 14, 0)), "");
  // The blocked layout vectorizes its channel block and packs the weight.
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(8, 8, 1, /*vector_axis=*/2)), "vector_axis_pinned");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(8, 8, 1, 1, /*pack=*/0)), "pack_weight_pinned");
  EXPECT_EQ(BlockedTileWhyInvalid(avx2, BlockedTileJson(8, 8, 0, 2, 0)), "");

  // Innermost tile sizes: every ow2 of 1..16, ob the multiples of the lanes up to 64.
  auto innermost = [](const Template& tmpl, const std::string& knob) {
    std::set<int64_t> values;
    for (const auto& option : tmpl.space().knobs()[tmpl.space().KnobIndex(knob)].options) values.insert(option.back());
    return values;
  };
  const std::set<int64_t> ow2 = innermost(avx2, "tile_ow");
  for (int64_t r = 1; r <= 16; ++r) EXPECT_TRUE(ow2.count(r)) << "ow2 " << r;
  // (Those whose tail pads OC = 64 by at most half: 56 would pad it to 112.)
  for (int64_t ob : {8, 16, 24, 32, 40, 48, 64}) EXPECT_TRUE(innermost(avx2, "tile_oc").count(ob)) << "avx2 ob " << ob;
  for (int64_t ob : {16, 32, 48, 64}) EXPECT_TRUE(innermost(avx512, "tile_oc").count(ob)) << "avx512 ob " << ob;
  EXPECT_FALSE(innermost(avx512, "tile_oc").count(24));
  EXPECT_FALSE(innermost(avx2, "tile_oc").count(56));
}

// Grouped convolutions that are not depthwise stay in the nchw layout; depthwise ones may block.
TEST(CpuConvBlockedLimitsTest, BlockedLayoutTakesDenseAndDepthwiseConvolutions) {
  const CpuLimits limits = CpuLimitsOf("+avx2");
  const Conv2dTemplate grouped(ConvWorkloadForTest("1,16,9,9,32,3,3,1,1,1,4", false, false), limits);
  const Conv2dTemplate depthwise(ConvWorkloadForTest("1,16,9,9,16,3,3,1,1,1,16", false, false), limits);
  for (const Conv2dTemplate* tmpl : {&grouped, &depthwise}) {
    const search::ConfigSpace& space = tmpl->space();
    std::mt19937_64 rng(kBlockedSeed + 3);
    int blocked = 0;
    for (int i = 0; i < 300; ++i) {
      absl::StatusOr<search::Config> c = space.Sample(rng);
      ASSERT_TRUE(c.ok()) << c.status();
      blocked += space.GetInt(*c, "layout") == 1;
    }
    const search::Knob& layout = space.knobs()[space.KnobIndex("layout")];
    if (tmpl == &grouped) {
      EXPECT_EQ(blocked, 0);
      EXPECT_EQ(layout.options.size(), 1u);
    } else {
      EXPECT_GT(blocked, 30);
      EXPECT_EQ(layout.options.size(), 2u);
    }
  }
}

// The blocked kernel's stages: the packed weight, the convolution into out.blocked with its
// channel block innermost and vectorized (contiguous stores), the NCHW copy with the epilogue
// vectorized along OW.
TEST(CpuConvBlockedGoldenTest, BlockedKernelStages) {
  const Workload w = ConvWorkloadForTest("1,3,5,8,6,3,3,1,1", /*bias=*/true, /*relu=*/true);
  const Conv2dTemplate tmpl(w, CpuLimitsOf("+avx2"));
  const search::Config config = BlockedConfigFromJson(
      tmpl, R"({"tile_oc": [1, 1, 8], "tile_oh": [5, 1], "tile_ow": [2, 1, 4], "tile_ic": [1, 3], "order": [0],
                "vector_axis": [1], "unroll": [0], "pack_weight": [1], "acc_tile": [1], "parallel": [0], "layout": [1]})");
  ASSERT_FALSE(config.empty());
  ASSERT_TRUE(tmpl.space().IsValid(config)) << tmpl.space().WhyInvalid(config);
  absl::StatusOr<LoweredFunc> f = tmpl.Lower(config, "conv");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string got = Print(*f);
  const std::string expected = test::Golden(R"IR(
void conv(float data[1][3][5][8], float weight[6][3][3][3], float bias[6], float out[1][6][5][8]) {
  heap float data.pad[1][3][7][10];
  heap float weight.packed[1][3][3][3][8];
  heap float out.blocked[1][1][5][8][8];
  for (pn = 0; pn < 1; ++pn) {
    for (pc = 0; pc < 3; ++pc) {
      for (ph = 0; ph < 7; ++ph) {
        for (pw = 0; pw < 10; ++pw) {
          data.pad[pn, pc, ph, pw] = (1 <= ph && ph < 6 && 1 <= pw && pw < 9 ? data[pn, pc, min(max(ph - 1, 0), 4), min(max(pw - 1, 0), 7)] : 0f);
        }
      }
    }
  }
  for (po = 0; po < 1; ++po) {
    for (pi = 0; pi < 3; ++pi) {
      for (pkh = 0; pkh < 3; ++pkh) {
        for (pkw = 0; pkw < 3; ++pkw) {
          // vectorized
          for (pb = 0; pb < 8; ++pb) {
            weight.packed[po, pi, pkh, pkw, pb] = (po*8 + pb < 6 ? weight[min(po*8 + pb, 5), pi, pkh, pkw] : 0f);
          }
        }
      }
    }
  }
  for (n = 0; n < 1; ++n) {
    for (oc0 = 0; oc0 < 1; ++oc0) {
      for (oh0 = 0; oh0 < 5; ++oh0) {
        for (ow0 = 0; ow0 < 2; ++ow0) {
          for (oc1 = 0; oc1 < 1; ++oc1) {
            for (oh1 = 0; oh1 < 1; ++oh1) {
              for (ow1 = 0; ow1 < 1; ++ow1) {
                local float out.blocked.local[4][8];
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (ob = 0; ob < 8; ++ob) {
                    out.blocked.local[ow2, ob] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 1; ++ic0) {
                  for (kh = 0; kh < 3; ++kh) {
                    if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 6) {
                      for (kw = 0; kw < 3; ++kw) {
                        for (ic1 = 0; ic1 < 3; ++ic1) {
                          for (ow2 = 0; ow2 < 4; ++ow2) {
                            // vectorized
                            for (ob = 0; ob < 8; ++ob) {
                              out.blocked.local[ow2, ob] = out.blocked.local[ow2, ob] + data.pad[n, ic0*3 + ic1, oh0 + oh1 + kh, ow0*4 + (ow1*4 + ow2) + kw]*weight.packed[oc0 + oc1, ic0*3 + ic1, kh, kw, ob];
                            }
                          }
                        }
                      }
                    }
                  }
                }
                for (ow2 = 0; ow2 < 4; ++ow2) {
                  // vectorized
                  for (ob = 0; ob < 8; ++ob) {
                    out.blocked[n, oc0 + oc1, oh0 + oh1, ow0*4 + (ow1*4 + ow2), ob] = out.blocked.local[ow2, ob];
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
    for (boh = 0; boh < 5; ++boh) {
      for (bow0 = 0; bow0 < 1; ++bow0) {
        for (boc1 = 0; boc1 < 8; ++boc1) {
          if (boc1 < 6) {
            // vectorized
            for (bow1 = 0; bow1 < 8; ++bow1) {
              out[bn, boc1, boh, bow0*8 + bow1] = max(out.blocked[bn, 0, boh, bow0*8 + bow1, boc1] + bias[boc1], 0f);
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

}  // namespace
}  // namespace tune::codegen
