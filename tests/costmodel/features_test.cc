// Tests of loop-AST feature extraction: shape, names, determinism, sensitivity, golden values.
#include "costmodel/features.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/templates.h"
#include "gtest/gtest.h"
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/toy_template.h"

namespace tune::costmodel {
namespace {

using codegen::OpKind;
using codegen::Template;
using ::tune::test::MakeTemplate;

search::Config FromJson(const Template& t, const std::string& json) {
  auto c = t.space().FromJson(json);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<float> Features(const Template& t, const search::Config& c) {
  auto func = t.Lower(c, "k");
  EXPECT_TRUE(func.ok()) << func.status();
  return ExtractFeatures(*func);
}

float Get(const std::vector<float>& f, const std::string& name) { return f[FeatureIndex(name)]; }
float Log2p(double x) { return static_cast<float>(std::log2(1.0 + x)); }

// GEMM 64x64x64: m = 1x32x2, n = 1x4x16 vectorized, k = 16x4, register tile, parallel m0.
constexpr char kVectorGemm[] =
    R"({"tile_m":[1,32,2],"tile_n":[1,4,16],"tile_k":[16,4],"order":[0],"vectorize":[1],)"
    R"("unroll_m":[0],"unroll_k":[0],"pack_b":[0],"acc_tile":[1],"parallel":[1]})";

TEST(FeaturesTest, NamesMatchTheVector) {
  const auto& names = FeatureNames();
  ASSERT_EQ(names.size(), kNumFeatures);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "duplicate names";
  EXPECT_EQ(names.front(), "log_total_flops");
  EXPECT_EQ(names.back(), "log_sm_roofline_ns");
  EXPECT_EQ(FeatureIndex("log_sm_roofline_ns"), offsetof(AstFeatures, log_sm_roofline_ns) / sizeof(float));
  EXPECT_EQ(FeatureIndex("log_intensity.l" + std::to_string(kLevels - 1)) + 1, FeatureIndex("shared_copy_lanes"));
  EXPECT_EQ(FeatureIndex("shared_copy_lanes"), offsetof(AstFeatures, shared_copy_lanes) / sizeof(float));
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(FeatureIndex(names[i]), i);
  // The flattened vector follows the struct's field order.
  EXPECT_EQ(FeatureIndex("loop0.log_extent"), offsetof(AstFeatures, loops) / sizeof(float));
  EXPECT_EQ(FeatureIndex("access0.present"), offsetof(AstFeatures, accesses) / sizeof(float));
  EXPECT_EQ(FeatureIndex("log_intensity.l0"), offsetof(AstFeatures, log_intensity) / sizeof(float));
  EXPECT_EQ(FeatureIndex("access1.log_bytes.l0"),
            (offsetof(AstFeatures, accesses) + sizeof(AccessFeatures) + offsetof(AccessFeatures, log_bytes)) /
                sizeof(float));

  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  EXPECT_EQ(Features(*t, t->DefaultConfig()).size(), kNumFeatures);
}

TEST(FeaturesTest, FiniteAndDeterministicOverRandomConfigs) {
  std::vector<std::unique_ptr<Template>> templates;
  templates.push_back(MakeTemplate(OpKind::kMatmul, "128,96,64"));
  templates.push_back(MakeTemplate(OpKind::kDense, "32,128,256"));
  templates.push_back(MakeTemplate(OpKind::kBatchMatmul, "4,32,64,48"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "1,32,28,28,64,3,3,1,1"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "2,16,15,15,32,3,3,2,0"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "1,32,14,14,32,3,3,1,1,1,32"));  // depthwise
  std::mt19937_64 rng(7);
  for (auto& t : templates) {
    SCOPED_TRACE(t->workload().Label());
    std::set<std::vector<float>> distinct;
    for (int i = 0; i < 60; ++i) {
      auto c = t->space().Sample(rng);
      ASSERT_TRUE(c.ok());
      std::vector<float> f = Features(*t, *c);
      ASSERT_EQ(f.size(), kNumFeatures);
      for (size_t j = 0; j < f.size(); ++j) {
        ASSERT_TRUE(std::isfinite(f[j])) << FeatureNames()[j];
        ASSERT_GE(f[j], 0.0f) << FeatureNames()[j];
      }
      EXPECT_EQ(Features(*t, *c), f) << "same config, different features";
      distinct.insert(f);
    }
    EXPECT_GT(distinct.size(), 40u) << "random configs should rarely collide";
  }
}

TEST(FeaturesTest, VectorizationAndTilingChangeTheFeatures) {
  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  search::Config base = FromJson(*t, kVectorGemm);
  std::vector<float> f = Features(*t, base);

  search::Config scalar = base;
  scalar[t->space().KnobIndex("vectorize")] = 1;  // option values {1, 0}
  ASSERT_EQ(t->space().GetInt(scalar, "vectorize"), 0);
  std::vector<float> fs = Features(*t, scalar);
  EXPECT_NE(fs, f);
  EXPECT_EQ(Get(fs, "vector_lanes"), 1.0f);
  EXPECT_EQ(Get(fs, "loop0.vectorized"), 0.0f);
  EXPECT_EQ(Get(fs, "num_vectorized"), 0.0f);

  search::Config retiled = FromJson(*t, R"({"tile_m":[1,16,4],"tile_n":[1,8,8],"tile_k":[16,4],"order":[0],)"
                                        R"("vectorize":[1],"unroll_m":[0],"unroll_k":[0],"pack_b":[0],)"
                                        R"("acc_tile":[1],"parallel":[1]})");
  std::vector<float> ft = Features(*t, retiled);
  EXPECT_NE(ft, f);
  EXPECT_EQ(Get(ft, "vector_lanes"), 8.0f);
  EXPECT_EQ(Get(ft, "log_local_tile"), Log2p(32));
  EXPECT_NE(Get(ft, "access2.log_bytes.l2"), Get(f, "access2.log_bytes.l2"));

  search::Config packed = base;
  packed[t->space().KnobIndex("pack_b")] = 0;  // {1, 0}
  std::vector<float> fp = Features(*t, packed);
  EXPECT_EQ(Get(fp, "num_heap_buffers"), 1.0f);
  EXPECT_EQ(Get(fp, "log_heap_bytes"), Log2p(64 * 64 * 4));
  EXPECT_EQ(Get(fp, "num_stages"), 2.0f);
  // b.packed is read by the main statement: one of the two loaded slots is heap.
  EXPECT_EQ(Get(fp, "access1.scope_heap") + Get(fp, "access2.scope_heap"), 1.0f);
}

// Hand-derived values of the vectorized GEMM above. Its main statement is
//   out.local[m2, n2] += a[m1*2 + m2, k0*4 + k1] * b[k0*4 + k1, n1*16 + n2]
// under m0(1, parallel) n0(1) m1(32) n1(4) k0(16) k1(4) m2(2) n2(16, vectorized).
TEST(FeaturesTest, GoldenVectorizedGemm) {
  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  std::vector<float> f = Features(*t, FromJson(*t, kVectorGemm));
  EXPECT_EQ(Get(f, "vector_lanes"), 16.0f);
  EXPECT_EQ(Get(f, "vector_innermost"), 1.0f);
  EXPECT_EQ(Get(f, "main_depth"), 8.0f);
  EXPECT_EQ(Get(f, "main_flops"), 2.0f);
  EXPECT_EQ(Get(f, "log_main_execs"), Log2p(64.0 * 64 * 64));
  EXPECT_EQ(Get(f, "log_total_flops"), Log2p(2.0 * 64 * 64 * 64));
  EXPECT_EQ(Get(f, "log_parallel_extent"), Log2p(1));
  EXPECT_EQ(Get(f, "parallel_fraction"), 1.0f);
  EXPECT_EQ(Get(f, "log_unroll_product"), Log2p(1));
  EXPECT_EQ(Get(f, "log_reduce_extent"), Log2p(64));
  EXPECT_EQ(Get(f, "log_local_floats"), Log2p(32));
  EXPECT_EQ(Get(f, "log_local_tile"), Log2p(32));
  EXPECT_EQ(Get(f, "num_loops"), 12.0f);  // 4 outer + init 2 + main 4 + write-back 2
  EXPECT_EQ(Get(f, "num_parallel"), 1.0f);
  EXPECT_EQ(Get(f, "max_depth"), 8.0f);

  // Loops, innermost first: n2, m2, k1, k0, n1, m1, n0, m0.
  EXPECT_EQ(Get(f, "loop0.log_extent"), Log2p(16));
  EXPECT_EQ(Get(f, "loop0.vectorized"), 1.0f);
  EXPECT_EQ(Get(f, "loop0.reduction"), 0.0f);
  EXPECT_EQ(Get(f, "loop2.log_extent"), Log2p(4));
  EXPECT_EQ(Get(f, "loop2.reduction"), 1.0f);
  EXPECT_EQ(Get(f, "loop3.reduction"), 1.0f);
  EXPECT_EQ(Get(f, "loop4.reduction"), 0.0f);  // n1: outside the tile, a fresh accumulator
  EXPECT_EQ(Get(f, "loop7.parallel"), 1.0f);
  EXPECT_EQ(Get(f, "loop7.log_extent"), Log2p(1));

  // access0: the register tile (read and written); access1: a, access2: b (equal whole-nest
  // footprints keep program order).
  EXPECT_EQ(Get(f, "access0.scope_local"), 1.0f);
  EXPECT_EQ(Get(f, "access0.reads"), 1.0f);
  EXPECT_EQ(Get(f, "access0.writes"), 1.0f);
  EXPECT_EQ(Get(f, "access0.log_bytes.l0"), Log2p(16 * 4));
  EXPECT_EQ(Get(f, "access0.log_bytes.l1"), Log2p(32 * 4));
  EXPECT_EQ(Get(f, "access0.log_stride_innermost"), Log2p(1));
  EXPECT_EQ(Get(f, "access1.scope_local"), 0.0f);
  EXPECT_EQ(Get(f, "access1.log_stride_innermost"), 0.0f);  // a is invariant in n2
  EXPECT_EQ(Get(f, "access1.reuse_depth"), 1.0f);
  EXPECT_EQ(Get(f, "access1.log_reuse_run"), Log2p(16));
  EXPECT_EQ(Get(f, "access1.log_stride_used"), Log2p(64));  // m2 steps a row of a
  EXPECT_EQ(Get(f, "access1.log_bytes.l2"), Log2p(2 * 4 * 4));        // k1 x m2
  EXPECT_EQ(Get(f, "access2.log_stride_innermost"), Log2p(1));
  EXPECT_EQ(Get(f, "access2.log_bytes.l2"), Log2p(4 * 16 * 4));       // k1 x n2
  EXPECT_EQ(Get(f, "access2.log_bytes.l8"), Log2p(64 * 64 * 4));
  EXPECT_EQ(Get(f, "access2.log_reuse"), Log2p(64));                  // 64^3 uses of 64^2 elements
  EXPECT_EQ(Get(f, "access2.log_lines"), Log2p(64 * 64 / 16));
  EXPECT_EQ(Get(f, "access3.present"), 0.0f);
  // Level 2 (k1, m2, n2): 256 flops over (8 + 64) floats of a and b.
  EXPECT_EQ(Get(f, "log_intensity.l2"), Log2p(256.0 / (72 * 4)));
}

TEST(FeaturesTest, StridedConvolutionVectorAccess) {
  // Stride 2: vectorizing ow makes the input access step 2 elements per lane.
  auto t = MakeTemplate(OpKind::kConv2d, "1,8,16,16,16,3,3,2,1");
  auto c = FromJson(*t, R"({"tile_oc":[2,2,4],"tile_oh":[8,1],"tile_ow":[1,1,8],"tile_ic":[2,4],"order":[0],)"
                        R"("vector_axis":[2],"unroll":[0],"pack_weight":[0],"acc_tile":[1],"parallel":[0]})");
  std::vector<float> f = Features(*t, c);
  EXPECT_EQ(Get(f, "vector_lanes"), 8.0f);
  EXPECT_EQ(Get(f, "num_heap_buffers"), 1.0f);  // padded input
  // Loaded slots: data.pad and weight; find the heap one (the padded input).
  int pad_slot = Get(f, "access1.scope_heap") == 1.0f ? 1 : 2;
  EXPECT_EQ(Get(f, "access" + std::to_string(pad_slot) + ".log_stride_innermost"), Log2p(2));
  EXPECT_EQ(Get(f, "access" + std::to_string(3 - pad_slot) + ".log_stride_innermost"), 0.0f);
}

// GPU kernels: thread-bound loops are flagged, shared memory, barriers and the launch shape
// are counted (CUDA GEMM, 8x16 threads of 8x4 tiles, K steps of 16, one shared stage).
TEST(FeaturesTest, GpuKernelBindingsAndSharedMemory) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "256,256,256"), codegen::Backend::kCuda);
  ASSERT_NE(t, nullptr);
  search::Config c = FromJson(*t,
      R"({"tile_m":[4,8,8],"tile_n":[4,16,4],"tile_k":[16,16],"vector":[4],"double_buffer":[0],)"
      R"("pad":[4],"unroll_k":[0],"interleave":[0],"k_slices":[1]})");
  std::vector<float> f = Features(*t, c);
  EXPECT_FLOAT_EQ(Get(f, "log_gpu_threads"), Log2p(128));
  EXPECT_FLOAT_EQ(Get(f, "log_gpu_blocks"), Log2p(16));
  EXPECT_FLOAT_EQ(Get(f, "log_shared_bytes"), Log2p((16 * 68 + 16 * 68) * 4));
  EXPECT_FLOAT_EQ(Get(f, "num_syncs"), 2);
  // The main statement (the FMA into the register tile) sits under j, i, kk, kt, then the four
  // bound loops tx, ty, bx, by.
  for (int slot = 0; slot < 4; ++slot) EXPECT_EQ(Get(f, "loop" + std::to_string(slot) + ".thread_bound"), 0) << slot;
  for (int slot = 4; slot < 8; ++slot) EXPECT_EQ(Get(f, "loop" + std::to_string(slot) + ".thread_bound"), 1) << slot;
  // A CPU kernel has none of it.
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  std::vector<float> g = Features(*cpu, FromJson(*cpu, kVectorGemm));
  EXPECT_EQ(Get(g, "log_shared_bytes"), 0);
  EXPECT_EQ(Get(g, "log_gpu_threads"), 0);
  EXPECT_EQ(Get(g, "loop0.thread_bound"), 0);
}

// The width of the tile copies (the CUDA GEMM's `vector` knob) shows in the features: before
// version 3 two configs differing only in it had the same vector (the copies are no part of
// the main statement), though their times differed by up to 4x in the H100 dataset.
TEST(FeaturesTest, GpuCopyWidthsAreFeatures) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "256,256,256"), codegen::Backend::kCuda);
  ASSERT_NE(t, nullptr);
  std::vector<std::vector<float>> by_width;
  for (int vector : {4, 2}) {
    search::Config c = FromJson(*t,
        R"({"tile_m":[4,8,8],"tile_n":[4,16,4],"tile_k":[16,16],"vector":[)" + std::to_string(vector) +
        R"(],"double_buffer":[0],"pad":[4],"unroll_k":[0],"interleave":[0],"k_slices":[1]})");
    std::vector<float> f = Features(*t, c);
    EXPECT_EQ(Get(f, "shared_copy_lanes"), vector);
    EXPECT_EQ(Get(f, "arg_load_lanes"), vector);
    by_width.push_back(f);
  }
  EXPECT_NE(by_width[0], by_width[1]);
  // A CPU kernel has no shared memory; its vectorized loads of arguments count.
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  std::vector<float> g = Features(*cpu, FromJson(*cpu, kVectorGemm));
  EXPECT_EQ(Get(g, "shared_copy_lanes"), 0);
  EXPECT_EQ(Get(g, "arg_load_lanes"), 16);
}

// A CUDA GEMM config: 64 x 64 block tiles (8 x 16 threads of 8 x 4 outputs), K steps of
// `bk`, `async` cp.async stages (0: one plain shared stage): 128 threads, 32 + 8 + 4 floats of
// registers each (acc, a_frag, b_frag).
search::Config CudaGemmConfig(const Template& t, int grid_m, int grid_n, int k_tiles, int bk, int async) {
  return FromJson(t, R"({"tile_m":[)" + std::to_string(grid_m) + R"(,8,8],"tile_n":[)" + std::to_string(grid_n) +
                         R"(,16,4],"tile_k":[)" + std::to_string(k_tiles) + "," + std::to_string(bk) +
                         R"(],"vector":[4],"double_buffer":[)" + (async > 0 ? "1" : "0") +  // pinned to option 0 under cp.async
                         R"(],"pad":[4],"unroll_k":[0],"interleave":[0],"k_slices":[1],"cp_async":[)" + std::to_string(async) + R"(],"cp_async_a":[0]})");
}

// The features and the launch estimate of one CUDA GEMM kernel.
struct OccupancyGemm {
  std::vector<float> f;
  GpuLaunch launch;
};

OccupancyGemm LowerOccupancyGemm(int m, int n, int k, int bk, int async = 0) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, std::to_string(m) + "," + std::to_string(n) + "," +
                                                                       std::to_string(k)),
                        codegen::Backend::kCuda);
  EXPECT_NE(t, nullptr);
  if (t == nullptr) return {std::vector<float>(kNumFeatures, 0.0f), GpuLaunch{}};
  auto func = t->Lower(CudaGemmConfig(*t, m / 64, n / 64, k / bk, bk, async), "k");
  EXPECT_TRUE(func.ok()) << func.status();
  if (!func.ok()) return {std::vector<float>(kNumFeatures, 0.0f), GpuLaunch{}};
  return {ExtractFeatures(*func), EstimateGpuLaunch(*func)};
}

// Occupancy and waves of the CUDA GEMM, derived by hand. 128 threads (4 warps) of 44 local
// floats: 44 + 28 = 72 registers, 65536 / (72 x 32) = 28 warps, so 7 blocks per SM (threads
// allow 16, shared memory 24); 7 x 4 warps = 28 of 64.
TEST(FeaturesTest, GpuOccupancyAndWaves) {
  const double per_wave = kGpuSms * 7.0;
  const OccupancyGemm small = LowerOccupancyGemm(256, 256, 256, 16);  // 4 x 4 = 16 blocks
  EXPECT_FLOAT_EQ(Get(small.f, "log_thread_local_floats"), Log2p(44));
  EXPECT_FLOAT_EQ(Get(small.f, "log_register_excess"), 0.0f);
  EXPECT_FLOAT_EQ(Get(small.f, "lane_fill"), 1.0f);
  EXPECT_FLOAT_EQ(Get(small.f, "resident_blocks"), 7.0f);
  EXPECT_FLOAT_EQ(Get(small.f, "occupancy"), 28.0f / 64);
  EXPECT_FLOAT_EQ(Get(small.f, "wave_fill"), static_cast<float>(16 / per_wave));
  EXPECT_EQ(small.launch.threads, 128);
  EXPECT_EQ(small.launch.blocks, 16);
  EXPECT_EQ(small.launch.resident_blocks, 7);
  EXPECT_DOUBLE_EQ(small.launch.waves, 16 / per_wave);

  // More blocks than one wave: 56 x 66 = 3696 blocks are exactly four full waves of 924 ...
  const OccupancyGemm full = LowerOccupancyGemm(56 * 64, 66 * 64, 256, 16);
  EXPECT_FLOAT_EQ(Get(full.f, "resident_blocks"), 7.0f);
  EXPECT_DOUBLE_EQ(full.launch.waves, 4.0);
  EXPECT_FLOAT_EQ(Get(full.f, "wave_fill"), 1.0f);
  // ... and one row of blocks more (3762) spills into a fifth wave that is barely started.
  const OccupancyGemm spill = LowerOccupancyGemm(57 * 64, 66 * 64, 256, 16);
  EXPECT_GT(spill.launch.waves, full.launch.waves);
  EXPECT_DOUBLE_EQ(spill.launch.waves, 3762 / per_wave);
  EXPECT_FLOAT_EQ(Get(spill.f, "wave_fill"), static_cast<float>(3762 / (5 * per_wave)));
  EXPECT_LT(Get(spill.f, "wave_fill"), 0.82f);

  // More shared memory per block: K steps of 32 in one stage take 2 x 32 x 68 x 4 bytes, and
  // registers still bound the block count at 7; four cp.async stages take four times as much,
  // 69632 bytes (+ 1 KiB reserved per block), so three blocks fit in 228 KiB: 12 warps of 64,
  // and the 16 blocks take 16 / (132 x 3) of a wave.
  const OccupancyGemm one_stage = LowerOccupancyGemm(256, 256, 256, 32);
  EXPECT_FLOAT_EQ(Get(one_stage.f, "log_shared_bytes"), Log2p(2 * 32 * 68 * 4));
  EXPECT_FLOAT_EQ(Get(one_stage.f, "resident_blocks"), 7.0f);
  const OccupancyGemm four_stages = LowerOccupancyGemm(256, 256, 256, 32, 4);
  EXPECT_FLOAT_EQ(Get(four_stages.f, "log_shared_bytes"), Log2p(4 * 2 * 32 * 68 * 4));
  EXPECT_FLOAT_EQ(Get(four_stages.f, "log_thread_local_floats"), Log2p(44));
  EXPECT_FLOAT_EQ(Get(four_stages.f, "resident_blocks"), 3.0f);
  EXPECT_FLOAT_EQ(Get(four_stages.f, "occupancy"), 12.0f / 64);
  EXPECT_FLOAT_EQ(Get(four_stages.f, "wave_fill"), static_cast<float>(16.0 / (kGpuSms * 3)));
  EXPECT_DOUBLE_EQ(four_stages.launch.waves, 16.0 / (kGpuSms * 3));
  EXPECT_GT(four_stages.launch.waves, one_stage.launch.waves);
}

// The busiest SM's share, derived by hand for the 64 x 64 tiles of 128 threads above: a block
// computes 2 x 64 x 64 x K flops and moves its A and B panels (64 x K each) and its C tile (64 x
// 64) through global memory; blocks are dealt to the 132 SMs in turn, so 16 blocks give each
// busy SM one and 3696 blocks give the busiest 28; barriers and stores per thread repeat once
// per round of residency (1 round for 16 blocks, 4 for 3696).
TEST(FeaturesTest, GpuBusiestSmShare) {
  const double block_flops = 2.0 * 64 * 64 * 256, block_bytes = (2.0 * 64 * 256 + 64 * 64) * 4;
  const OccupancyGemm small = LowerOccupancyGemm(256, 256, 256, 16);  // 16 blocks
  const OccupancyGemm full = LowerOccupancyGemm(56 * 64, 66 * 64, 256, 16);  // 3696 blocks, 4 waves
  EXPECT_FLOAT_EQ(Get(small.f, "log_sm_flops"), Log2p(block_flops));
  EXPECT_FLOAT_EQ(Get(full.f, "log_sm_flops"), Log2p(28 * block_flops));
  EXPECT_FLOAT_EQ(Get(small.f, "log_sm_global_bytes"), Log2p(block_bytes));
  EXPECT_FLOAT_EQ(Get(full.f, "log_sm_global_bytes"), Log2p(28 * block_bytes));
  // 16 K tiles of 16, two barriers each (tile loaded, tile used), so 32 barriers a round.
  EXPECT_FLOAT_EQ(Get(small.f, "log_serial_barriers"), Log2p(32));
  EXPECT_FLOAT_EQ(Get(full.f, "log_serial_barriers"), Log2p(4 * 32));
  // Per thread: 8 x 4 accumulators x 256 FMAs dominate the stores, and the panels' 32768
  // elements and the tile's 4096 spread over 128 threads are its global accesses.
  const double small_stores = std::exp2(Get(small.f, "log_thread_serial_stores")) - 1;
  EXPECT_GT(small_stores, 8.0 * 4 * 256);
  EXPECT_NEAR(std::exp2(Get(full.f, "log_thread_serial_stores")) - 1, 4 * small_stores, 1e-3 * small_stores);
  EXPECT_FLOAT_EQ(Get(small.f, "log_thread_serial_global"), Log2p((2.0 * 64 * 256 + 64 * 64) / 128));
  EXPECT_FLOAT_EQ(Get(full.f, "log_thread_serial_global"), Log2p(4 * (2.0 * 64 * 256 + 64 * 64) / 128));
  // The roofline of the busiest SM: this tile's 2 x 64 x 64 x K / ((2 x 64 + 64 x 64 / K) x 4 x
  // K) = 14.2 flops per byte is above the SM's balance point, so the flops set it.
  EXPECT_GT(block_flops / block_bytes, kGpuSmFlops / kGpuSmBytes);
  EXPECT_FLOAT_EQ(Get(full.f, "log_sm_roofline_ns"), Log2p(1e9 * 28 * block_flops / kGpuSmFlops));
  // A CPU kernel has none of them.
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  const std::vector<float> f = Features(*cpu, FromJson(*cpu, kVectorGemm));
  for (const char* name : {"log_sm_flops", "log_sm_global_bytes", "log_thread_serial_stores", "log_serial_barriers",
                           "log_thread_serial_global", "log_sm_roofline_ns"}) {
    EXPECT_EQ(Get(f, name), 0.0f) << name;
  }
}

// Split-K: the blocks of a tile leave partial tiles and only the last to arrive sums them, so
// the fix-up's adds count once per output, not once per block: 2 M N K + (k_split - 1) M N flops,
// and the arrival's flag select once per thread (128 threads, counted as if each took the
// first thread's branch, as every If is but the last arrival's).
TEST(FeaturesTest, GpuSplitKFixUpCountsOnceATile) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "256,256,256"), codegen::Backend::kCuda);
  ASSERT_NE(t, nullptr);
  for (int split : {1, 4}) {
    SCOPED_TRACE(split);
    std::string json = t->space().ToJson(CudaGemmConfig(*t, 4, 4, 16, 16, 0));
    json.replace(json.find("\"k_split\":[1]"), 13, "\"k_split\":[" + std::to_string(split) + "]");
    const std::vector<float> f = Features(*t, FromJson(*t, json));
    const double flag_selects = split > 1 ? 128.0 * 16 * split : 0.0;
    EXPECT_FLOAT_EQ(Get(f, "log_total_flops"), Log2p(2.0 * 256 * 256 * 256 + (split - 1) * 256.0 * 256 + flag_selects));
    EXPECT_FLOAT_EQ(Get(f, "log_gpu_blocks"), Log2p(16 * split));
  }
}

// Over random configs of the CUDA templates the occupancy fields stay in their ranges and
// agree with the launch shape; CPU kernels have none of them.
TEST(FeaturesTest, GpuOccupancyFieldsOverRandomConfigs) {
  std::vector<std::unique_ptr<Template>> gpu;
  gpu.push_back(MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "512,384,256"), codegen::Backend::kCuda));
  gpu.push_back(MakeTemplate(::tune::test::ToyWorkload(OpKind::kConv2d, "1,64,28,28,64,3,3,1,1"), codegen::Backend::kCuda));
  gpu.push_back(MakeTemplate(::tune::test::ToyWorkload(OpKind::kConv2d, "1,32,28,28,32,3,3,1,1,1,32"),
                             codegen::Backend::kCuda));  // depthwise
  std::mt19937_64 rng(std::random_device{}());
  for (auto& t : gpu) {
    ASSERT_NE(t, nullptr);
    SCOPED_TRACE(t->workload().Label());
    std::set<float> occupancies;
    for (int i = 0; i < 40; ++i) {
      auto c = t->space().Sample(rng);
      ASSERT_TRUE(c.ok());
      std::vector<float> f = Features(*t, *c);
      SCOPED_TRACE(t->space().ToJson(*c));
      const float resident = Get(f, "resident_blocks");
      EXPECT_GE(resident, 1.0f);
      EXPECT_LE(resident, 32.0f);
      EXPECT_EQ(resident, std::floor(resident));
      const double threads = std::round(std::exp2(Get(f, "log_gpu_threads")) - 1);
      const double blocks = std::round(std::exp2(Get(f, "log_gpu_blocks")) - 1);
      EXPECT_LE(resident * std::ceil(threads / 32), 64.0);
      EXPECT_NEAR(Get(f, "occupancy"), resident * std::ceil(threads / 32) / 64, 1e-4);
      const double waves = blocks / (kGpuSms * resident);
      EXPECT_NEAR(Get(f, "wave_fill"), waves / std::ceil(waves), 1e-5);
      EXPECT_GT(Get(f, "wave_fill"), 0.0f);
      EXPECT_LE(Get(f, "wave_fill"), 1.0f);
      EXPECT_GT(Get(f, "lane_fill"), 0.0f);
      EXPECT_LE(Get(f, "lane_fill"), 1.0f);
      EXPECT_GT(Get(f, "log_thread_local_floats"), 0.0f);
      occupancies.insert(Get(f, "occupancy"));
    }
    EXPECT_GT(occupancies.size(), 1u) << "random configs should differ in occupancy";
  }
  auto cpu = MakeTemplate(OpKind::kConv2d, "1,32,28,28,64,3,3,1,1");
  for (int i = 0; i < 10; ++i) {
    auto c = cpu->space().Sample(rng);
    ASSERT_TRUE(c.ok());
    std::vector<float> f = Features(*cpu, *c);
    for (const char* name : {"log_thread_local_floats", "log_register_excess", "lane_fill", "resident_blocks", "occupancy",
                             "wave_fill"}) {
      EXPECT_EQ(Get(f, name), 0.0f) << name;
    }
  }
}

// The warp transaction fields on a CUDA GEMM (warp_access.h): the tile copies move float4
// rows of the global operands (coalesced) and the padding knob decides the shared tiles'
// bank conflicts; CPU kernels have none of the fields.
TEST(FeaturesTest, GpuMemoryTransactions) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "256,256,256"), codegen::Backend::kCuda);
  ASSERT_NE(t, nullptr);
  for (int vector : {4, 1}) {
    std::vector<float> conflict;
    for (int pad : {0, 4}) {
      search::Config c = FromJson(*t, R"({"tile_m":[4,8,8],"tile_n":[4,16,4],"tile_k":[16,16],"vector":[)" +
                                          std::to_string(vector) + R"(],"double_buffer":[0],"pad":[)" +
                                          std::to_string(pad) + R"(],"unroll_k":[0],"interleave":[0],"k_slices":[1]})");
      std::vector<float> f = Features(*t, c);
      SCOPED_TRACE(t->space().ToJson(c));
      EXPECT_FLOAT_EQ(Get(f, "global_load_efficiency"), 1.0f);  // 16 consecutive floats a row at least
      EXPECT_GT(Get(f, "global_store_efficiency"), 0.0f);
      conflict.push_back(Get(f, "log_shared_conflict"));
    }
    EXPECT_GT(conflict[0], 0.0f) << "unpadded tiles: the transposed A tile's column stores conflict";
    EXPECT_LT(conflict[1], conflict[0]) << "padding the rows spreads them over the banks";
  }
  // Two output columns a thread (tile_n [4,32,2]), stored one float at a time: a warp's store
  // spans 64 floats, 8 sectors for 4 sectors' worth of elements; its tile copies stay coalesced.
  {
    search::Config c = FromJson(*t, R"({"tile_m":[8,4,8],"tile_n":[4,32,2],"tile_k":[16,16],"vector":[1],)"
                                    R"("double_buffer":[1],"pad":[4],"unroll_k":[1],"interleave":[1],"k_slices":[1],)"
                                    R"("k_split":[1],"cp_async":[3],"cp_async_a":[0],"unroll_stages":[0],)"
                                    R"("fma_order":[2],"raster":[1]})");
    std::vector<float> f = Features(*t, c);
    EXPECT_FLOAT_EQ(Get(f, "global_load_efficiency"), 1.0f);
    EXPECT_FLOAT_EQ(Get(f, "global_store_efficiency"), 0.5f);
  }
  std::mt19937_64 rng(std::random_device{}());
  std::set<float> efficiencies;
  for (int i = 0; i < 30; ++i) {
    auto c = t->space().Sample(rng);
    ASSERT_TRUE(c.ok());
    std::vector<float> f = Features(*t, *c);
    SCOPED_TRACE(t->space().ToJson(*c));
    for (const char* name : {"global_load_efficiency", "global_store_efficiency"}) {
      EXPECT_GT(Get(f, name), 0.0f) << name;
      EXPECT_LE(Get(f, name), 1.0f) << name;
    }
    EXPECT_GE(Get(f, "log_shared_conflict"), 0.0f);
    EXPECT_LE(Get(f, "log_shared_conflict"), 5.0f);
    efficiencies.insert(Get(f, "global_load_efficiency"));
  }
  EXPECT_GT(efficiencies.size(), 1u) << "random configs should differ in coalescing";
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  std::vector<float> g = Features(*cpu, FromJson(*cpu, kVectorGemm));
  for (const char* name : {"global_load_efficiency", "global_store_efficiency", "log_shared_conflict"}) {
    EXPECT_EQ(Get(g, name), 0.0f) << name;
  }
}

TEST(FeaturesTest, EmptyKernel) {
  codegen::LoweredFunc func;
  std::vector<float> f = ExtractFeatures(func);
  ASSERT_EQ(f.size(), kNumFeatures);
  for (float v : f) EXPECT_EQ(v, 0.0f);
}

// Not a wall-time assertion: prints the cost of Template::Lower + ExtractFeatures per config
// (the number DESIGN.md's "microseconds, not milliseconds" refers to).
TEST(FeaturesTest, ReportsFeaturizationCost) {
  std::vector<std::unique_ptr<Template>> templates;
  templates.push_back(MakeTemplate(OpKind::kMatmul, "512,512,512"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "1,64,56,56,64,3,3,1,1"));
  templates.push_back(MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "1024,1024,1024"), codegen::Backend::kCuda));
  templates.push_back(
      MakeTemplate(::tune::test::ToyWorkload(OpKind::kConv2d, "1,64,56,56,64,3,3,1,1"), codegen::Backend::kCuda));
  std::mt19937_64 rng(3);
  for (auto& t : templates) {
    std::vector<search::Config> configs;
    for (int i = 0; i < 1000; ++i) configs.push_back(*t->space().Sample(rng));
    double sink = 0;
    auto start = std::chrono::steady_clock::now();
    for (const auto& c : configs) {
      auto func = t->Lower(c, "k");
      sink += ExtractFeatures(*func)[0];
    }
    double lower_extract = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<codegen::LoweredFunc> funcs;
    for (const auto& c : configs) funcs.push_back(*t->Lower(c, "k"));
    start = std::chrono::steady_clock::now();
    for (const auto& func : funcs) sink += ExtractFeatures(func)[1];
    double extract = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ timing ] %-28s lower+extract %.1f us/config, extract alone %.1f us/config (%g)\n",
                t->workload().Label().c_str(), lower_extract / configs.size() * 1e6,
                extract / configs.size() * 1e6, sink > 0 ? 1.0 : 0.0);
    RecordProperty(t->name() + "_lower_extract_us", static_cast<int>(lower_extract / configs.size() * 1e6));
  }
}

// A dense kernel that packs its weight once (prepack 1) does per call only the GEMM; the same
// config packing in every call (prepack 0) also stores the whole packed weight each time. The
// features tell them apart: fewer store executions for prepack 1, whose main statement is the
// multiply-add (with prepack 0 the pack's stores, as many as the GEMM's, may take that place).
TEST(FeaturesTest, AWeightPackedOnceIsNotPerCallWork) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(codegen::OpKind::kDense, "1,1000,512");
  ASSERT_TRUE(w.ok()) << w.status();
  auto tmpl = codegen::CreateTemplate(*w);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const search::ConfigSpace& space = (*tmpl)->space();
  std::mt19937_64 rng(11);
  for (const search::Config& once : tune::test::RandomPrepackConfigs(**tmpl, 5, rng)) {
    search::Config every = once;
    every[space.KnobIndex("prepack")] = tune::test::OptionWithValue(space, "prepack", 0);
    ASSERT_TRUE(space.IsValid(every));
    auto f_once = (*tmpl)->Lower(once, "once");
    auto f_every = (*tmpl)->Lower(every, "every");
    ASSERT_TRUE(f_once.ok() && f_every.ok());
    const AstFeatures a = ExtractAstFeatures(*f_once), b = ExtractAstFeatures(*f_every);
    EXPECT_LT(a.log_store_execs, b.log_store_execs) << space.ToJson(once);
    EXPECT_EQ(a.main_flops, 2) << "the main statement is the GEMM's multiply-add: " << space.ToJson(once);
  }
}

}  // namespace
}  // namespace tune::costmodel
