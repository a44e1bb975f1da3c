// The CPU GEMM's register tiles sized to the vector ISA: which micro-kernels each ISA's space
// holds, and the host's canonical micro-kernels (with packed A and tails) against a reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/gemm_template.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gtest/gtest.h"
#include "search/space.h"

namespace tune::codegen {
namespace {

constexpr uint64_t kMicroSeed = 20261128;

Workload MicroMatmul(int64_t m, int64_t n, int64_t k, bool bias_relu) {
  Workload w;
  w.op = OpKind::kMatmul;
  w.m = m;
  w.n = n;
  w.k = k;
  w.bias = bias_relu;
  w.relu = bias_relu;
  return w;
}

/// A GEMM config as JSON: an mr x nr register tile (outer factors rounded up, middle 1), K in
/// blocks of `kc`, every other knob as given.
std::string MicroConfig(const Workload& w, int64_t mr, int64_t nr, int64_t kc, int order, bool pack_a,
                        bool unroll_k, bool parallel) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  return absl::StrCat(R"({"tile_m":[)", ceil_div(w.m, mr), ",1,", mr, R"(],"tile_n":[)", ceil_div(w.n, nr), ",1,", nr,
                      R"(],"tile_k":[)", ceil_div(w.k, kc), ",", kc, R"(],"order":[)", order,
                      R"(],"vectorize":[1],"unroll_m":[1],"unroll_k":[)", unroll_k ? 1 : 0,
                      R"(],"pack_b":[1],"acc_tile":[1],"parallel":[)", parallel ? 1 : 0, R"(],"pack_a":[)",
                      pack_a ? 1 : 0, "]}");
}

TEST(CpuLimitsTest, ReadsTheVectorIsaFromTargetFeatures) {
  EXPECT_EQ(CpuLimitsOf("+avx2,+fma"), (CpuLimits{8, 16, "avx2"}));
  EXPECT_EQ(CpuLimitsOf("avx2,avx512f,fma"), (CpuLimits{16, 32, "avx512"}));
  EXPECT_EQ(CpuLimitsOf("+avx512bw,+avx512f,+avx2"), (CpuLimits{16, 32, "avx512"}));
  EXPECT_EQ(CpuLimitsOf("-avx512f,+avx2"), (CpuLimits{8, 16, "avx2"}));  // disabled is not there
  EXPECT_EQ(CpuLimitsOf("+avx512fp16"), (CpuLimits{4, 16, "sse"}));       // a name, not a prefix
  EXPECT_EQ(CpuLimitsOf(""), (CpuLimits{4, 16, "sse"}));
  const CpuLimits host = HostCpuLimits();
  EXPECT_TRUE(host.vector_lanes == 4 || host.vector_lanes == 8 || host.vector_lanes == 16) << host.vector_lanes;
}

TEST(GemmMicroKernelSpaceTest, EachIsaHoldsItsOwnMicroKernels) {
  const Workload w = MicroMatmul(1024, 1024, 1024, false);
  const GemmTemplate avx2(w, CpuLimitsOf("+avx2,+fma"));
  const GemmTemplate avx512(w, CpuLimitsOf("+avx2,+avx512f,+fma"));
  auto valid = [&](const GemmTemplate& t, int64_t mr, int64_t nr) {
    absl::StatusOr<search::Config> c = t.space().FromJson(MicroConfig(w, mr, nr, 64, 1, true, false, true));
    return c.ok() && t.space().IsValid(*c);
  };
  // Every row count 1..16 is an innermost option of M, though 1024 has few such divisors.
  std::set<int64_t> rows;
  for (const auto& option : avx2.space().knobs()[0].options) rows.insert(option.back());
  for (int64_t r = 1; r <= 16; ++r) EXPECT_TRUE(rows.count(r)) << "mr " << r;
  // AVX2 (16 ymm): 6x16 and 4x24 fit; AVX-512's 14x32 and 6x64 (28 and 24 zmm accumulators)
  // do not, and 24 columns are no multiple of 16 lanes.
  EXPECT_TRUE(valid(avx2, 6, 16));
  EXPECT_TRUE(valid(avx2, 4, 24));
  EXPECT_FALSE(valid(avx2, 14, 32));
  EXPECT_FALSE(valid(avx2, 6, 64));
  EXPECT_TRUE(valid(avx512, 14, 32));
  EXPECT_TRUE(valid(avx512, 6, 64));
  EXPECT_TRUE(valid(avx512, 6, 16));
  EXPECT_FALSE(valid(avx512, 4, 24));
  EXPECT_FALSE(valid(avx512, 16, 32));  // 32 accumulators leave no register for B
}

TEST(GemmMicroKernelSpaceTest, ConfigsRecordedBeforePackedAReadAsUnpacked) {
  const Workload w = MicroMatmul(64, 64, 64, false);
  const GemmTemplate t(w, CpuLimitsOf("+avx2"));
  std::string text = MicroConfig(w, 4, 16, 16, 0, false, false, true);
  const std::string with_knob = text;
  text.erase(text.find(R"(,"pack_a":[0])"), std::string(R"(,"pack_a":[0])").size());
  absl::StatusOr<search::Config> old = t.space().FromJson(text);
  absl::StatusOr<search::Config> now = t.space().FromJson(with_knob);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(*old, *now);
  absl::StatusOr<LoweredFunc> f = t.Lower(*old, "unpacked");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Print(*f).find("a.packed"), std::string::npos);
}

/// The canonical micro-kernels (rows x columns) of an ISA.
std::vector<std::pair<int64_t, int64_t>> CanonicalTiles(const CpuLimits& cpu) {
  if (cpu.vector_lanes == 16) return {{14, 32}, {6, 64}, {8, 48}, {6, 16}};
  if (cpu.vector_lanes == 8) return {{6, 16}, {4, 24}, {3, 32}, {8, 8}};
  return {{6, 8}, {4, 12}};
}

TEST(GemmMicroKernelRunTest, HostMicroKernelsWithPackedAAndTailsMatchReference) {
  runtime::SetNumThreads(2);
  const CpuLimits host = HostCpuLimits();
  // Odd extents: every canonical tile has a tail in M, N and K.
  const Workload w = MicroMatmul(61, 100, 37, true);
  const GemmTemplate t(w, host);
  std::mt19937_64 rng(kMicroSeed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(w.m * w.k), b(w.k * w.n), bias(w.n);
  for (auto* v : {&a, &b, &bias}) {
    for (float& x : *v) x = dist(rng);
  }
  std::vector<float> want(w.m * w.n);
  for (int64_t i = 0; i < w.m; ++i) {
    for (int64_t j = 0; j < w.n; ++j) {
      double acc = bias[j];
      for (int64_t p = 0; p < w.k; ++p) acc += static_cast<double>(a[i * w.k + p]) * b[p * w.n + j];
      want[i * w.n + j] = static_cast<float>(std::max(acc, 0.0));
    }
  }
  int checked = 0;
  for (auto [mr, nr] : CanonicalTiles(host)) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool pack_a = variant & 1, unroll_k = variant & 2;
      const std::string text = MicroConfig(w, mr, nr, 16, variant % 2, pack_a, unroll_k, variant != 2);
      const std::string context = absl::StrCat(host.isa, " ", mr, "x", nr, " ", text);
      absl::StatusOr<search::Config> c = t.space().FromJson(text);
      ASSERT_TRUE(c.ok()) << c.status() << "\n" << context;
      ASSERT_TRUE(t.space().IsValid(*c)) << t.space().WhyInvalid(*c) << "\n" << context;
      absl::StatusOr<LoweredFunc> f = t.Lower(*c, absl::StrCat("micro_", mr, "x", nr, "_", variant));
      ASSERT_TRUE(f.ok()) << f.status();
      absl::StatusOr<CompiledKernel> compiled = CompileForHost(*f, CodegenOptions{});
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(*compiled);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      std::vector<float> out(w.m * w.n, std::nanf(""));
      std::vector<float> a_copy = a, b_copy = b, bias_copy = bias;
      float* args[] = {a_copy.data(), b_copy.data(), bias_copy.data(), out.data()};
      (*loaded)->fn()(args);
      int64_t bad = -1;
      for (int64_t i = 0; i < w.m * w.n && bad < 0; ++i) {
        if (!(std::fabs(out[i] - want[i]) <= 1e-4 + 1e-4 * std::fabs(want[i]))) bad = i;
      }
      EXPECT_EQ(bad, -1) << "wrong at " << bad << ": " << (bad >= 0 ? out[bad] : 0) << " vs "
                         << (bad >= 0 ? want[bad] : 0) << "\n" << context;
      EXPECT_EQ(a_copy, a) << "the kernel wrote to its input A\n" << context;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * static_cast<int>(CanonicalTiles(host).size()));
  runtime::SetNumThreads(1);
}

}  // namespace
}  // namespace tune::codegen
