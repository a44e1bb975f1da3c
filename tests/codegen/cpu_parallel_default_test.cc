// The CPU templates' default configs on a target of several threads: the conv2d and GEMM
// defaults share their outer loops out among the threads (the fused parallel loop where it
// balances), stay serial at one thread or an unknown count, and the parallel conv2d defaults,
// NCHW and NCHWc, dense and depthwise, compute the reference's output on 2 and 3 threads.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/gemm_template.h"
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
using codegen::GemmTemplate;
using codegen::Workload;

/// Whether a parallel loop of `iterations` shares out among `threads` as the templates' rule
/// asks: at least one each, and an even split or at least 8 each.
bool DefaultTestBalanced(int64_t iterations, int64_t threads) {
  return iterations >= threads && (iterations % threads == 0 || iterations >= 8 * threads);
}

/// A random convolution like a small CNN's layers: batch 1 or 2, 1..20 rows and columns, a
/// 1x1 or 3x3 kernel of stride 1 or 2; a third of them depthwise; with `block` > 0 an NCHWc
/// workload in blocks of `block` (channels multiples of it), else NCHW with any channel count.
Workload RandomDefaultTestConv(std::mt19937_64& rng, int64_t block) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t n = pick(1, 2), h = pick(1, 20), w = pick(1, 20), k = pick(0, 1) ? 3 : 1, s = pick(1, 2);
  const bool depthwise = pick(0, 2) == 0;
  const int64_t c = block > 0 ? block * pick(1, 6) : pick(2, 40);
  const int64_t oc = depthwise ? c : block > 0 ? block * pick(1, 6) : pick(1, 40);
  std::string shape = absl::StrCat(n, ",", c, ",", h, ",", w, ",", oc, ",", k, ",", k, ",", s, ",", k / 2);
  if (depthwise) absl::StrAppend(&shape, ",1,", c);
  Workload wl = ConvWorkloadForTest(shape, pick(0, 1) == 1, pick(0, 1) == 1);
  wl.layout_block = block;
  return wl;
}

// For random NCHW and NCHWc convolutions: at 2, 3 and 4 threads the default is valid and
// parallel, fused (batch x OC blocks x OH blocks, one row of one block an iteration) wherever
// that loop balances, the outer loop alone where only it does, serial where neither does; at
// one thread or an unknown count it is serial (the default configs recorded so far).
TEST(CpuParallelDefaultTest, ConvDefaultSharesOutItsLoops) {
  std::mt19937_64 rng(std::random_device{}());
  const codegen::CpuLimits avx512 = codegen::CpuLimitsOf("+avx2,+avx512f,+fma");
  int fused = 0, outer = 0;
  for (int i = 0; i < 60; ++i) {
    const Workload w = RandomDefaultTestConv(rng, i % 2 ? 16 : 0);
    for (int threads : {0, 1, 2, 3, 4}) {
      codegen::CpuLimits cpu = avx512;
      cpu.threads = threads;
      const Conv2dTemplate tmpl(w, cpu);
      const search::ConfigSpace& space = tmpl.space();
      const search::Config def = tmpl.DefaultConfig();
      const std::string context = absl::StrCat(w.Key(), " at ", threads, " threads: ", space.ToJson(def));
      ASSERT_TRUE(space.IsValid(def)) << context << " " << space.WhyInvalid(def);
      const int64_t parallel = space.GetInt(def, "parallel");
      if (threads <= 1) {
        EXPECT_EQ(parallel, 0) << context;
        continue;
      }
      // The default's outer OC and OH block counts (its order is 0: the OC blocks outermost).
      const int64_t oc0 = space.Get(def, "tile_oc")[0], oh0 = space.Get(def, "tile_oh")[0];
      ASSERT_EQ(space.GetInt(def, "order"), 0) << context;
      const int64_t want = DefaultTestBalanced(w.batch * oc0 * oh0, threads) ? 2
                           : DefaultTestBalanced(w.batch * oc0, threads)     ? 1
                                                                             : 0;
      EXPECT_EQ(parallel, want) << context;
      fused += parallel == 2;
      outer += parallel == 1;
    }
  }
  EXPECT_GT(fused, 0);
  (void)outer;  // a fused loop balances wherever the outer one does but for rare shapes
}

// MobileNet-V2's small layers at 224x224 (NCHWc blocks of 16): every default on 2 threads is
// the fused parallel loop, with at least 2 iterations per thread.
TEST(CpuParallelDefaultTest, MobileNetSmallLayersDefaultToTheFusedLoop) {
  codegen::CpuLimits cpu = codegen::CpuLimitsOf("+avx2,+avx512f,+fma");
  cpu.threads = 2;
  for (const char* shape : {"1,960,7,7,960,3,3,1,1,1,960", "1,576,14,14,576,3,3,2,1,1,576", "1,960,7,7,160,1,1",
                            "1,320,7,7,1280,1,1", "1,96,14,14,576,1,1", "1,32,112,112,32,3,3,1,1,1,32"}) {
    Workload w = ConvWorkloadForTest(shape, true, false, true);
    w.layout_block = 16;
    const Conv2dTemplate tmpl(w, cpu);
    const search::ConfigSpace& space = tmpl.space();
    const search::Config def = tmpl.DefaultConfig();
    ASSERT_TRUE(space.IsValid(def)) << shape;
    EXPECT_EQ(space.GetInt(def, "parallel"), 2) << shape << " " << space.ToJson(def);
    EXPECT_GE(w.batch * space.Get(def, "tile_oc")[0] * space.Get(def, "tile_oh")[0], 4) << shape;
  }
}

// The parallel defaults of random NCHW and NCHWc convolutions (dense and depthwise, tails of
// the fused loop's chunks on 3 threads) compute the reference's output, each element once.
TEST(CpuParallelDefaultTest, ParallelConvDefaultsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  codegen::CpuLimits cpu = codegen::HostCpuLimits();
  cpu.threads = 2;
  int failures = 0, runs = 0;
  for (int i = 0; i < 6; ++i) {
    const int64_t block = i % 2 ? cpu.vector_lanes : 0;
    const Workload w = RandomDefaultTestConv(rng, block);
    const Conv2dTemplate tmpl(w, cpu);
    const search::Config def = tmpl.DefaultConfig();
    const std::string context = absl::StrCat(w.Key(), " ", tmpl.space().ToJson(def));
    const CompiledConfigs compiled = CompileConfigs(tmpl, {def}, absl::StrCat("conv_default_", i, "_"));
    ASSERT_TRUE(compiled.kernels[0].ok()) << compiled.kernels[0].status() << "\n" << context;
    if (tmpl.space().GetInt(def, "parallel") == 2) {
      EXPECT_THAT(compiled.texts[0], ::testing::ContainsRegex("for \\(n\\.oc0\\.oh0 = ")) << context;
    }
    absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded = codegen::LoadedKernel::Load(*compiled.kernels[0]);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (int threads : {2, 3}) {
      codegen::runtime::SetNumThreads(threads);
      // The default packs the weight once; the fresh weight of this run may lie at the last one's
      // address.
      tune_rt_prepacked_reset();
      const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
      ++runs;
      if (!why.empty() && ++failures <= 3) ADD_FAILURE() << why << " on " << threads << " threads\n" << context;
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0) << "of " << runs << " runs";
}

// The GEMM default on 2 threads: dense and matmul fuse their M and N block loops (one output
// element an iteration), batch_matmul runs its batch and M blocks in parallel; serial at one.
TEST(CpuParallelDefaultTest, GemmDefaultSharesOutItsLoops) {
  std::mt19937_64 rng(std::random_device{}());
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 20; ++i) {
    Workload w;
    w.op = i % 3 == 0 ? codegen::OpKind::kDense : i % 3 == 1 ? codegen::OpKind::kMatmul : codegen::OpKind::kBatchMatmul;
    w.batch = w.op == codegen::OpKind::kBatchMatmul ? pick(1, 4) : 1;
    w.m = pick(1, 40);
    w.n = pick(2, 1000);
    w.k = pick(1, 300);
    for (int threads : {1, 2}) {
      codegen::CpuLimits cpu = codegen::CpuLimitsOf("+avx2,+avx512f,+fma");
      cpu.threads = threads;
      const GemmTemplate tmpl(w, cpu);
      const search::ConfigSpace& space = tmpl.space();
      const search::Config def = tmpl.DefaultConfig();
      const std::string context = absl::StrCat(w.Key(), " at ", threads, " threads: ", space.ToJson(def));
      ASSERT_TRUE(space.IsValid(def)) << context;
      const int64_t parallel = space.GetInt(def, "parallel");
      if (threads == 1) {
        EXPECT_EQ(parallel, 0) << context;
      } else if (w.op == codegen::OpKind::kBatchMatmul) {
        EXPECT_EQ(parallel, DefaultTestBalanced(w.batch * w.m, 2) ? 1 : 0) << context;
      } else {
        EXPECT_EQ(parallel, DefaultTestBalanced(w.m * w.n, 2) ? 2 : DefaultTestBalanced(w.m, 2) ? 1 : 0) << context;
      }
    }
  }
}

}  // namespace
}  // namespace tune::test
