// Tests of CudaBuilder's build deadline (NVRTC only, no GPU needed): a build still compiling at
// its deadline becomes a timeout record, and the protocol's build_timeout_s reaches the builder.
#include "measure/cuda_builder.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "gtest/gtest.h"
#include "measure/kernel_measurer.h"
#include "tests/common/measure_cuda_configs.h"

namespace tune::test {
namespace {

using measure::BuildResult;
using measure::MeasureStatus;

// A random matmul shape's CUDA template and one random valid config of it.
struct CbtKernel {
  std::unique_ptr<codegen::Template> tmpl;
  search::Config config;
};

// A random valid config of `tmpl` that lowers (so its build reaches NVRTC); a test failure
// and the default config when 100 draws find none.
search::Config CbtDrawLowerable(const codegen::Template& tmpl, std::mt19937_64& rng) {
  for (int draw = 0; draw < 100; ++draw) {
    absl::StatusOr<search::Config> c = tmpl.space().Sample(rng);
    if (c.ok() && tmpl.Lower(*c, "probe").ok()) return *c;
  }
  ADD_FAILURE() << "no config of " << tmpl.name() << " lowers in 100 draws";
  return tmpl.DefaultConfig();
}

CbtKernel CbtRandomKernel(std::mt19937_64& rng) {
  const int sizes[] = {32, 64, 96, 128};
  const std::string shape = std::to_string(sizes[rng() % 4]) + "," + std::to_string(sizes[rng() % 4]) + "," +
                            std::to_string(sizes[rng() % 4]);
  CbtKernel k;
  auto tmpl = codegen::CreateTemplate(ParseWorkload(codegen::OpKind::kMatmul, shape), codegen::Backend::kCuda);
  EXPECT_TRUE(tmpl.ok()) << shape << ": " << tmpl.status();
  if (!tmpl.ok()) return k;
  k.tmpl = *std::move(tmpl);
  k.config = CbtDrawLowerable(*k.tmpl, rng);
  return k;
}

// A runner that measures nothing: each build's status and message become its result.
class CbtEchoRunner final : public measure::Runner {
 public:
  std::vector<measure::MeasureResult> Run(const measure::TaskData&, const std::vector<BuildResult>& builds) override {
    std::vector<measure::MeasureResult> out(builds.size());
    for (size_t i = 0; i < builds.size(); ++i) {
      out[i].status = builds[i].status;
      out[i].message = builds[i].message;
      out[i].build_s = builds[i].build_s;
    }
    return out;
  }
};

class CudaBuilderDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
    if (!codegen::NvrtcCanCancel()) GTEST_SKIP() << "NVRTC " << codegen::NvrtcVersion() << " cannot cancel";
  }
  std::mt19937_64 rng_{std::random_device{}()};
};

// A millisecond is far less than NVRTC needs for any template kernel: the build is cancelled
// and says so; the same config without a timeout, or with a generous one, builds.
TEST_F(CudaBuilderDeadlineTest, ABuildPastItsDeadlineIsATimeout) {
  CbtKernel k = CbtRandomKernel(rng_);
  ASSERT_NE(k.tmpl, nullptr);
  measure::CudaBuilder builder("sm_90", 1);
  const double timeout_s = 0.001;
  BuildResult cut = builder.Build(*k.tmpl, k.config, timeout_s);
  EXPECT_EQ(cut.status, MeasureStatus::kTimeout) << measure::StatusName(cut.status) << ": " << cut.message;
  EXPECT_EQ(cut.message, "build timed out after 0.001 s");
  EXPECT_TRUE(cut.kernel.object_code.empty());
  EXPECT_GT(cut.build_s, 0);

  BuildResult whole = builder.Build(*k.tmpl, k.config);
  ASSERT_EQ(whole.status, MeasureStatus::kOk) << whole.message;
  EXPECT_FALSE(whole.kernel.object_code.empty());
  BuildResult generous = builder.Build(*k.tmpl, k.config, 600);
  ASSERT_EQ(generous.status, MeasureStatus::kOk) << generous.message;
  EXPECT_FALSE(generous.kernel.object_code.empty());
}

// LocalMeasurer (in a tuning process, and on a worker with the job's protocol) builds each
// kernel within the protocol's build_timeout_s; 0 is none.
TEST_F(CudaBuilderDeadlineTest, TheProtocolsBuildTimeoutReachesTheBuilder) {
  CbtKernel k = CbtRandomKernel(rng_);
  ASSERT_NE(k.tmpl, nullptr);
  std::vector<search::Config> configs = {k.config};
  for (int i = 0; i < 2; ++i) configs.push_back(CbtDrawLowerable(*k.tmpl, rng_));
  measure::LocalMeasurer measurer(std::make_unique<measure::CudaBuilder>("sm_90", 2),
                                  [](const measure::MeasureProtocol&) { return std::make_unique<CbtEchoRunner>(); });
  const measure::TaskData data = measure::TaskData::Create(k.tmpl->workload(), 1, false);
  measure::MeasureProtocol protocol;
  protocol.build_timeout_s = 0.002;
  std::vector<measure::MeasureResult> cut = measurer.Measure(*k.tmpl, &data, configs, protocol);
  ASSERT_EQ(cut.size(), configs.size());
  for (const measure::MeasureResult& r : cut) {
    EXPECT_EQ(r.status, MeasureStatus::kTimeout) << measure::StatusName(r.status) << ": " << r.message;
    EXPECT_EQ(r.message, "build timed out after 0.002 s");
  }
  protocol.build_timeout_s = 0;
  std::vector<measure::MeasureResult> whole = measurer.Measure(*k.tmpl, &data, configs, protocol);
  ASSERT_EQ(whole.size(), configs.size());
  for (const measure::MeasureResult& r : whole) {
    EXPECT_EQ(r.status, MeasureStatus::kOk) << measure::StatusName(r.status) << ": " << r.message;
  }
}

}  // namespace
}  // namespace tune::test
