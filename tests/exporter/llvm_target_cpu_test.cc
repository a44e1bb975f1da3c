// codegen::CompileForCpu: kernels compiled for a named CPU and features rather than this one.
#include <random>
#include <string>

#include "codegen/cpu/llvm_codegen.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;

/// A random small matmul's default kernel, lowered.
LoweredFunc RandomMatmulKernel() {
  std::mt19937_64 rng = test::TestRng(11);
  std::uniform_int_distribution<int> extent(3, 40);
  const std::string shape = std::to_string(extent(rng)) + "," + std::to_string(extent(rng)) + "," +
                            std::to_string(extent(rng));
  auto w = Workload::Parse(OpKind::kMatmul, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  auto tmpl = CreateTemplate(*w);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  auto func = (*tmpl)->Lower((*tmpl)->DefaultConfig(), "cpu_kernel");
  EXPECT_TRUE(func.ok()) << func.status();
  return *func;
}

TEST(LlvmTargetCpuTest, CompilesForTheNamedCpuAndFeatures) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the CPU names of this test are x86-64 ones";
#endif
  const LoweredFunc func = RandomMatmulKernel();
  CodegenOptions options;
  options.keep_ir = true;
  auto generic = CompileForCpu(func, "x86-64", "", options);
  ASSERT_TRUE(generic.ok()) << generic.status();
  auto haswell = CompileForCpu(func, "haswell", "+avx2,+fma,-avx512f", options);
  ASSERT_TRUE(haswell.ok()) << haswell.status();
  EXPECT_THAT(generic->ir, HasSubstr("\"target-cpu\"=\"x86-64\""));
  EXPECT_THAT(haswell->ir, HasSubstr("\"target-cpu\"=\"haswell\""));
  EXPECT_THAT(haswell->ir, HasSubstr("+avx2,+fma,-avx512f"));
  EXPECT_EQ(generic->symbol, "cpu_kernel");
  EXPECT_FALSE(generic->object_code.empty());
  EXPECT_NE(generic->object_code, haswell->object_code);
  // The host's compile is unchanged by the addition: its own CPU name.
  auto host = CompileForHost(func, options);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_THAT(host->ir, HasSubstr("\"target-cpu\"=\"" + HostCpuName() + "\""));
}

TEST(LlvmTargetCpuTest, RejectsCpusAndFeaturesLlvmDoesNotKnow) {
  const LoweredFunc func = RandomMatmulKernel();
  auto cpu = CompileForCpu(func, "no-such-cpu", "");
  EXPECT_TRUE(absl::IsInvalidArgument(cpu.status())) << cpu.status();
  EXPECT_THAT(cpu.status().message(), HasSubstr("no-such-cpu"));
  auto feature = CompileForCpu(func, HostCpuName(), "+no-such-feature");
  EXPECT_TRUE(absl::IsInvalidArgument(feature.status())) << feature.status();
  EXPECT_THAT(feature.status().message(), HasSubstr("no-such-feature"));
  auto unsigned_feature = CompileForCpu(func, HostCpuName(), "avx2");
  EXPECT_TRUE(absl::IsInvalidArgument(unsigned_feature.status())) << unsigned_feature.status();
}

}  // namespace
}  // namespace tune::codegen
