// The GEMM template's start points (Template::StartConfigs): the ISA's canonical register
// tiles over packed B panels, valid and correct.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/gemm_template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/toy_template.h"

namespace tune::test {
namespace {

using codegen::GemmTemplate;

// SGEMM 1024 on AVX-512: 14x32 and 6x64 (28 and 24 accumulators; 9x48 has more than 6x64 but
// 48 does not divide 1024), each with A packed and in place, B packed, N outer; on AVX2 14x8
// and 6x16. All valid, distinct, none the default; at 2 threads all parallel; a dense layer
// of one row gets one-row tiles with its weight packed once.
TEST(CpuGemmStartConfigsTest, CanonicalTilesOfTheIsa) {
  const codegen::Workload sgemm = ToyWorkload(codegen::OpKind::kMatmul, "1024,1024,1024");
  const GemmTemplate avx512(sgemm, CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 1));
  const std::vector<search::Config> configs = avx512.StartConfigs();
  ASSERT_EQ(configs.size(), 4u);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_TRUE(avx512.space().IsValid(configs[i])) << avx512.space().WhyInvalid(configs[i]);
    EXPECT_NE(configs[i], avx512.DefaultConfig());
    for (size_t j = 0; j < i; ++j) EXPECT_NE(configs[i], configs[j]);
  }
  const std::vector<std::string> texts = ConfigTexts(avx512, configs);
  EXPECT_TRUE(AnyContainsAll(texts, {R"("tile_m":[74,1,14])", R"("tile_n":[32,1,32])", R"("order":[1])",
                                   R"("pack_b":[1])", R"("pack_a":[1])"}))
      << ::testing::PrintToString(texts);
  EXPECT_TRUE(AnyContainsAll(texts, {R"("tile_m":[171,1,6])", R"("tile_n":[16,1,64])", R"("pack_a":[0])"}))
      << ::testing::PrintToString(texts);

  const GemmTemplate avx2(sgemm, CpuLimitsAt("+avx2,+fma", 1));
  const std::vector<std::string> avx2_texts = ConfigTexts(avx2, avx2.StartConfigs());
  EXPECT_TRUE(AnyContainsAll(avx2_texts, {R"("tile_m":[74,1,14])", R"("tile_n":[128,1,8])"}))
      << ::testing::PrintToString(avx2_texts);
  EXPECT_TRUE(AnyContainsAll(avx2_texts, {R"("tile_m":[171,1,6])", R"("tile_n":[64,1,16])"}))
      << ::testing::PrintToString(avx2_texts);

  const GemmTemplate two(sgemm, CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 2));
  const std::vector<search::Config> parallel = two.StartConfigs();
  ASSERT_FALSE(parallel.empty());
  for (const search::Config& c : parallel) {
    EXPECT_TRUE(two.space().IsValid(c)) << two.space().WhyInvalid(c);
    EXPECT_NE(two.space().GetInt(c, "parallel"), 0) << two.space().ToJson(c);
  }

  const GemmTemplate dense(ToyWorkload(codegen::OpKind::kDense, "1,1000,2048"),
                           CpuLimitsAt("+avx512f,+avx512vl,+avx2,+fma", 1));
  const std::vector<std::string> dense_texts = ConfigTexts(dense, dense.StartConfigs());
  ASSERT_FALSE(dense_texts.empty());
  for (const std::string& t : dense_texts) {
    EXPECT_THAT(t, ::testing::HasSubstr(R"("tile_m":[1,1,1])"));
    EXPECT_THAT(t, ::testing::HasSubstr(R"("prepack":[1])"));
  }
}

// The host's start configs compile and compute the product: prime extents (tails on every
// axis), a dense layer with bias and ReLU, a batch_matmul, at 1 and 2 threads; fresh random
// inputs in fenced arrays.
TEST(CpuGemmStartConfigsTest, HostStartConfigsMatchReference) {
  const codegen::CpuLimits host = codegen::HostCpuLimits();
  std::mt19937_64 rng(std::random_device{}());
  int failures = 0;
  for (int threads : {1, 2}) {
    codegen::CpuLimits cpu = host;
    cpu.threads = threads;
    codegen::runtime::SetNumThreads(threads);
    for (const auto& [op, shape] : std::vector<std::pair<codegen::OpKind, std::string>>{
             {codegen::OpKind::kMatmul, "97,89,101"},
             {codegen::OpKind::kDense, "3,200,67"},
             {codegen::OpKind::kBatchMatmul, "3,17,40,33"}}) {
      codegen::Workload w = ToyWorkload(op, shape);
      w.bias = op == codegen::OpKind::kDense;
      w.relu = op == codegen::OpKind::kDense;
      const GemmTemplate tmpl(w, cpu);
      const std::vector<search::Config> configs = tmpl.StartConfigs();
      if (host.vector_lanes >= 4) EXPECT_FALSE(configs.empty()) << shape;
      failures += ConfigsFailingReference(tmpl, configs, "start_gemm_", absl::StrCat("threads ", threads), rng);
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace tune::test
