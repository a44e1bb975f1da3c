// Tests of the CUDA conv2d template's direct variant: the `variant` knob and its pinned knobs,
// the device limits, old config text, the printed kernel (golden text and structure), and
// (with NVRTC, no GPU needed) random direct configs compiling for sm_90.
#include "codegen/cuda/cuda_direct_conv.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "codegen/ir/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/nvrtc_compile.h"
#include "tests/common/golden.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Workload Conv(const std::string& shape, bool bias = false, bool relu = false) {
  absl::StatusOr<Workload> w = Workload::Parse(OpKind::kConv2d, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  w->bias = bias;
  w->relu = relu;
  return *w;
}

bool IsDirect(const Template& t, const search::Config& c) { return t.space().GetInt(c, "variant") == 1; }

// The direct config with these knob values (tile_m, tile_oh, tile_ow, tile_c, then vector,
// double_buffer, pad, unroll_k), the implicit GEMM's knobs at option 0. Not checked for validity.
search::Config Direct(const Template& t, std::vector<int64_t> m, std::vector<int64_t> oh, std::vector<int64_t> ow,
                      std::vector<int64_t> ch, int64_t vector, int64_t double_buffer, int64_t pad, int64_t unroll) {
  const search::ConfigSpace& space = t.space();
  search::Config c(space.knobs().size(), 0);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> values = {
      {"tile_m", m},        {"tile_oh", oh},  {"tile_ow", ow},        {"tile_c", ch},   {"vector", {vector}},
      {"double_buffer", {double_buffer}}, {"pad", {pad}}, {"unroll_k", {unroll}}, {"variant", {1}}};
  for (const auto& [name, v] : values) {
    const int k = space.KnobIndex(name);
    const auto& opts = space.knobs()[k].options;
    const auto it = std::find(opts.begin(), opts.end(), v);
    EXPECT_NE(it, opts.end()) << name;
    c[k] = static_cast<int32_t>(it - opts.begin());
  }
  return c;
}

// A random valid config of the direct variant (about half of all samples are).
search::Config SampleDirect(const Template& t, std::mt19937_64& rng) {
  for (;;) {
    absl::StatusOr<search::Config> c = t.space().Sample(rng);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok() || IsDirect(t, *c)) return c.ok() ? *c : t.DefaultConfig();
  }
}

// Random draws see both variants (the direct one more often here: this layer has enough
// output tiles that Sample rejects the implicit GEMM's k_slices and k_split > 1), never a knob
// of the other variant away from option 0; the default stays the implicit GEMM, and config
// text written before the knob existed still reads (as the implicit GEMM).
TEST(CudaDirectConvTest, VariantKnobPinsTheOtherVariantsKnobs) {
  auto t = CreateTemplate(Conv("1,64,56,56,128,3,3,2,1", true, true), Backend::kCuda);
  ASSERT_TRUE(t.ok()) << t.status();
  const search::ConfigSpace& space = (*t)->space();
  const search::Knob& variant = space.knobs()[space.KnobIndex("variant")];
  EXPECT_THAT(variant.labels, ::testing::ElementsAre("implicit_gemm", "direct"));
  std::mt19937_64 rng(11);
  int direct = 0;
  for (int i = 0; i < 400; ++i) {
    absl::StatusOr<search::Config> c = space.Sample(rng);
    ASSERT_TRUE(c.ok()) << c.status();
    const bool d = IsDirect(**t, *c);
    direct += d;
    for (const char* knob : {"tile_n", "tile_k", "interleave", "k_slices", "k_split"}) {
      if (d) EXPECT_EQ((*c)[space.KnobIndex(knob)], 0) << knob;
    }
    for (const char* knob : {"tile_oh", "tile_ow", "tile_c"}) {
      if (!d) EXPECT_EQ((*c)[space.KnobIndex(knob)], 0) << knob;
    }
  }
  EXPECT_GT(direct, 100);
  EXPECT_LT(direct, 340);

  const search::Config def = (*t)->DefaultConfig();
  EXPECT_FALSE(IsDirect(**t, def));
  std::string text = space.ToJson(def);
  ASSERT_THAT(text, HasSubstr(R"(,"variant":[0],)"));
  text = text.substr(0, text.find(R"(,"variant")")) + "}";  // what a record of last year holds
  absl::StatusOr<search::Config> old = space.FromJson(text);
  ASSERT_TRUE(old.ok()) << old.status() << " " << text;
  EXPECT_EQ(*old, def);
}

// The thread, register and shared-memory limits hold for the direct variant: random configs
// under small limits print kernels within them whose grid covers the output exactly, and a
// config beyond a limit is refused by name before any code exists.
TEST(CudaDirectConvTest, SpaceHonoursTheLimits) {
  GpuLimits limits;
  limits.max_threads_per_block = 256;
  limits.max_shared_bytes_per_block = 16 * 1024;
  limits.max_registers_per_block = 16 * 1024;
  const Workload w = Conv("2,64,28,28,128,3,3,2,1");
  auto t = CreateTemplate(w, Backend::kCuda, limits);
  ASSERT_TRUE(t.ok()) << t.status();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100; ++i) {
    const search::Config c = SampleDirect(**t, rng);
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "k"));
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_LE(k->threads_per_block(), 256);
    EXPECT_EQ(k->threads_per_block() % 32, 0) << k->threads_per_block();
    EXPECT_LE(k->shared_bytes, 16 * 1024);
    const auto& fm = (*t)->space().Get(c, "tile_m");
    const auto& fh = (*t)->space().Get(c, "tile_oh");
    const auto& fw = (*t)->space().Get(c, "tile_ow");
    EXPECT_LE(fm[2] * fh[2] * fw[2] + fm[2] + fh[2] * fw[2], 16 * 1024 / k->threads_per_block());
    EXPECT_EQ(k->grid[0] * k->block[0] * fw[2], 14);
    EXPECT_EQ(k->grid[1] * k->block[1] * fh[2], 14);
    EXPECT_EQ(k->grid[2] * k->block[2] * fm[2], 2 * 128);
  }
  // 2 x 14 outputs of 8 channels a block (224 threads), 32 channels a step: a 5 x 29 halo per
  // channel and 8 x 288 weights, neither a whole number of rounds of 224 threads (a spare row
  // each), two stages: 2 x 161 x 29 (+ 2 to 16 bytes) + 2 x 289 x 8 floats, 55 KiB. Fine on an
  // H100, not under a 16 KiB limit.
  auto full = CreateTemplate(w, Backend::kCuda);
  ASSERT_TRUE(full.ok());
  const search::Config big = Direct(**full, {16, 8, 1}, {7, 2, 1}, {1, 14, 1}, {2, 32}, 1, 1, 0, 0);
  EXPECT_EQ((*full)->space().WhyInvalid(big), "");
  EXPECT_EQ((*t)->space().WhyInvalid(big), "shared_memory");
  absl::StatusOr<CudaKernel> k = GenerateCuda(*(*full)->Lower(big, "k"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->shared_bytes, (2 * 161 * 29 + 2 + 2 * 289 * 8) * 4);
  EXPECT_EQ(k->shared_bytes,
            PlanDirectConv(w, {16, 8, 1, 7, 2, 1, 1, 14, 1, 2, 32, 1, 0, true, false}).SharedFloats() * 4);
  // 32 channels: 896 threads, still fine; 14 x 7 pixels x 32 channels, 3136 threads, are not.
  EXPECT_EQ((*full)->space().WhyInvalid(Direct(**full, {4, 32, 1}, {7, 2, 1}, {1, 14, 1}, {2, 32}, 1, 1, 0, 0)), "");
  EXPECT_EQ((*full)->space().WhyInvalid(Direct(**full, {4, 32, 1}, {1, 14, 1}, {1, 7, 2}, {2, 32}, 1, 1, 0, 0)),
            "threads");
  // A pinned knob away from option 0 is its own constraint.
  search::Config pinned = big;
  pinned[(*full)->space().KnobIndex("k_slices")] = 1;
  EXPECT_EQ((*full)->space().WhyInvalid(pinned), "k_slices_pinned");
}

// The whole kernel for a small padded conv with bias + relu: one block of 2 x 4 x 2 threads,
// each 2 channels x 2 x 1 pixels; 2 channels a step (2 steps), a 6 x 6 halo per channel.
TEST(CudaDirectConvTest, GoldenSmallKernel) {
  const Workload w = Conv("1,4,4,4,4,3,3,1,1", true, true);
  auto t = CreateTemplate(w, Backend::kCuda);
  ASSERT_TRUE(t.ok());
  const search::Config c = Direct(**t, {1, 2, 2}, {1, 2, 2}, {1, 4, 1}, {2, 2}, 2, 0, 0, 0);
  ASSERT_EQ((*t)->space().WhyInvalid(c), "");
  absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "conv"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->source, test::Golden(R"(
// Generated by tune: conv, grid (1, 1, 1), block (4, 2, 2), 624 bytes of shared memory
extern "C" __global__ void __launch_bounds__(16) conv(const float* __restrict__ data, const float* __restrict__ weight, const float* __restrict__ bias, float* __restrict__ out) {
  extern __shared__ __align__(16) float tune_smem[];
  {
    const int bz = blockIdx.z;
    {
      const int by = blockIdx.y;
      {
        const int bx = blockIdx.x;
        {
          const int tz = threadIdx.z;
          {
            const int ty = threadIdx.y;
            {
              const int tx = threadIdx.x;
              float* __restrict__ Hs = tune_smem + 0;
              float* __restrict__ Ws = tune_smem + 80;
              float acc[4];
              float w_frag[2];
              float x_frag[2];
              #pragma unroll
              for (int i = 0; i < 2; ++i) {
                #pragma unroll
                for (int a = 0; a < 2; ++a) {
                  #pragma unroll
                  for (int b = 0; b < 1; ++b) {
                    acc[(((i * 2) + a) + b)] = 0.0f;
                  }
                }
              }
              for (int ct = 0; ct < 2; ++ct) {
                #pragma unroll
                for (int lh_e = 0; lh_e < 5; ++lh_e) {
                  for (int lh_v = 0; lh_v < 1; ++lh_v) {
                    Hs[((((((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)) < 72) ? (min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) / 6) : 12) * 6) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) % 6) + lh_v))] = (((((0 <= (((by * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) / 6) % 6))) && ((((by * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) / 6) % 6)) < 4)) && (0 <= (((bx * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) % 6) + lh_v)))) && ((((bx * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) % 6) + lh_v)) < 4)) ? data[((((((ct * 2) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) / 6) / 6)) * 4) + (((by * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) / 6) % 6))) * 4) + (((bx * 4) - 1) + ((min(((lh_e * 16) + ((((tz * 2) + ty) * 4) + tx)), 71) % 6) + lh_v)))] : 0.0f);
                  }
                }
                #pragma unroll
                for (int lw_e = 0; lw_e < 3; ++lw_e) {
                  {  // 2 lanes of lw_v
                    const float2 wide = *reinterpret_cast<const float2*>(weight + ((((bz * 4) + (min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) / 18)) * 36) + ((ct * 18) + (min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) % 18))));
                    const float lane = wide.x;
                    const float lane_1 = wide.y;
                    Ws[(((((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2) < 72) ? (min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) % 18) : 18) * 4) + (min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) / 18))] = lane;
                    Ws[(((((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2) < 72) ? ((min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) % 18) + 1) : 18) * 4) + (min((((lw_e * 16) + ((((tz * 2) + ty) * 4) + tx)) * 2), 70) / 18))] = lane_1;
                  }
                }
                __syncthreads();
                for (int c = 0; c < 2; ++c) {
                  #pragma unroll
                  for (int kh = 0; kh < 3; ++kh) {
                    #pragma unroll
                    for (int kw = 0; kw < 3; ++kw) {
                      #pragma unroll
                      for (int i_1 = 0; i_1 < 2; ++i_1) {
                        w_frag[i_1] = Ws[((((((c * 3) + kh) * 3) + kw) * 4) + ((tz * 2) + i_1))];
                      }
                      #pragma unroll
                      for (int a_1 = 0; a_1 < 2; ++a_1) {
                        #pragma unroll
                        for (int b_1 = 0; b_1 < 1; ++b_1) {
                          x_frag[(a_1 + b_1)] = Hs[(((((c * 6) + ((a_1 * 2) + ty)) + kh) * 6) + (((b_1 * 4) + tx) + kw))];
                        }
                      }
                      #pragma unroll
                      for (int i_2 = 0; i_2 < 2; ++i_2) {
                        #pragma unroll
                        for (int a_2 = 0; a_2 < 2; ++a_2) {
                          #pragma unroll
                          for (int b_2 = 0; b_2 < 1; ++b_2) {
                            acc[(((i_2 * 2) + a_2) + b_2)] = (acc[(((i_2 * 2) + a_2) + b_2)] + (w_frag[i_2] * x_frag[(a_2 + b_2)]));
                          }
                        }
                      }
                    }
                  }
                }
                __syncthreads();
              }
              #pragma unroll
              for (int i_3 = 0; i_3 < 2; ++i_3) {
                #pragma unroll
                for (int a_3 = 0; a_3 < 2; ++a_3) {
                  #pragma unroll
                  for (int b_3 = 0; b_3 < 1; ++b_3) {
                    out[(((((((bz * 4) + (tz * 2)) + i_3) * 4) + ((by * 4) + ((a_3 * 2) + ty))) * 4) + ((bx * 4) + ((b_3 * 4) + tx)))] = fmaxf((acc[(((i_3 * 2) + a_3) + b_3)] + bias[(((bz * 4) + (tz * 2)) + i_3)]), 0.0f);
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
)"));
}

// The direct kernel of a strided resnet-18 layer: launch shape from the tiles, the halo
// gathered under the padding guard, 128-bit weight loads, 128-bit fragment reads of the
// transposed weights, the fused bias + relu; a layer without padding needs no guard.
TEST(CudaDirectConvTest, StridedResnetLayerKernel) {
  const Workload w = Conv("2,64,56,56,128,3,3,2,1", true, true);
  auto t = CreateTemplate(w, Backend::kCuda);
  ASSERT_TRUE(t.ok());
  const search::Config c = Direct(**t, {4, 8, 4}, {7, 2, 2}, {2, 14, 1}, {16, 4}, 4, 1, 4, 1);
  ASSERT_EQ((*t)->space().WhyInvalid(c), "");
  absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "conv"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->block, (std::array<int64_t, 3>{14, 2, 8}));
  EXPECT_EQ(k->grid, (std::array<int64_t, 3>{2, 7, 4 * 2}));
  // Halo (4 - 1) * 2 + 3 = 9 rows, (14 - 1) * 2 + 3 = 29 columns: 4 channels x 9 rows x 29
  // over 224 threads, and 32 x 36 weights over 224 x 4 lanes, leave idle lanes (a spare row
  // each). Two stages of each: 2 x 37 x 29 (+ 2 to 16 bytes) and 2 x 37 x (32 + 4) floats.
  EXPECT_EQ(k->shared_bytes, (2 * 37 * 29 + 2 + 2 * 37 * 36) * 4);
  EXPECT_THAT(k->source, HasSubstr("float* __restrict__ Hs = tune_smem + 0;"));
  EXPECT_THAT(k->source, HasSubstr("float acc[8];"));
  EXPECT_THAT(k->source, HasSubstr("? data["));
  EXPECT_THAT(k->source, HasSubstr("*reinterpret_cast<const float4*>(weight + "));
  EXPECT_THAT(k->source, HasSubstr("*reinterpret_cast<const float4*>(Ws + "));
  EXPECT_THAT(k->source, HasSubstr("fmaxf("));
  EXPECT_THAT(k->source, HasSubstr("bias["));
  EXPECT_THAT(k->source, HasSubstr("__syncthreads();"));

  auto one = CreateTemplate(Conv("2,64,56,56,128,1,1,2,0"), Backend::kCuda);
  ASSERT_TRUE(one.ok());
  std::mt19937_64 rng(4);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<CudaKernel> plain = GenerateCuda(*(*one)->Lower(SampleDirect(**one, rng), "conv"));
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_THAT(plain->source, Not(HasSubstr("? data[")));
    EXPECT_THAT(plain->source, Not(HasSubstr("fmaxf(")));
  }
}

// Random valid direct configs of resnet-18 layers (the strided 3x3 and 1x1 downsampling ones,
// the 7x7 stem, the last 7x7 stage), batch 2 and 4, and a dilated conv, 6 each, compile with
// NVRTC for sm_90 (no GPU needed), on two threads.
TEST(CudaDirectConvTest, RandomDirectConfigsCompileForSm90) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  const std::vector<Workload> workloads = {
      Conv("1,64,56,56,128,3,3,2,1", true, true), Conv("2,128,28,28,128,3,3,1,1", true, true),
      Conv("1,3,224,224,64,7,7,2,3", true, true), Conv("4,64,56,56,128,1,1,2,0"),
      Conv("1,512,7,7,512,3,3,1,1", true, true),  Conv("2,32,28,28,32,3,3,1,2,2", true, false)};
  std::vector<test::CudaSource> jobs;
  std::mt19937_64 rng(2027);
  for (const Workload& w : workloads) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    for (int i = 0; i < 6; ++i) {
      const search::Config c = SampleDirect(**t, rng);
      absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "direct_conv");
      ASSERT_TRUE(f.ok()) << f.status();
      absl::StatusOr<CudaKernel> k = GenerateCuda(*f);
      ASSERT_TRUE(k.ok()) << k.status();
      jobs.push_back({w.Key() + " " + (*t)->space().ToJson(c), k->source});
    }
  }
  ASSERT_GE(jobs.size(), 30u);
  test::ExpectAllCompileForSm90(jobs);
}

}  // namespace
}  // namespace tune::codegen
