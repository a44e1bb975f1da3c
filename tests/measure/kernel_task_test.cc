// Tests of kernel tasks as the factory makes them: shapes without a valid default, and stopping.
#include "measure/kernel_task.h"

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/task_factory.h"
#include "tests/common/test_seed.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;

codegen::Workload BatchMatmul(int64_t b, int64_t m, int64_t n, int64_t k) {
  auto w = codegen::Workload::Parse(codegen::OpKind::kBatchMatmul, std::to_string(b) + "," + std::to_string(m) + "," +
                                                                       std::to_string(n) + "," + std::to_string(k));
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : codegen::Workload();
}

// A GPU described by hand (no device needed): the template and its space are built without one.
Target Gpu() {
  return Target{.kind = "cuda",
                .device_model = "NVIDIA H100",
                .cpu = "sm_90",
                .features = "132sm",
                .toolkit = "nvrtc-13.0,driver-13.0",
                .device = 0,
                .max_threads_per_block = 1024,
                .max_shared_per_block = 232448,
                .registers_per_block = 65536,
                .multiprocessors = 132,
                .l2_bytes = 50 << 20};
}

// ViT attention's 197 x 197 scores and other prime extents: the CUDA template tiles them with a
// partial last tile (tails), so the default is valid and the task is made.
TEST(KernelTaskDefaultTest, PrimeExtentsOnTheGpuHaveAValidDefault) {
  const codegen::Workload vit = BatchMatmul(12, 197, 197, 64);
  auto tmpl = codegen::CreateTemplate(vit, codegen::Backend::kCuda, codegen::GpuLimits{});
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<search::Config> def = (*tmpl)->ValidDefaultConfig();
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_TRUE((*tmpl)->space().IsValid(*def));

  auto factory = TaskFactory::Create(Gpu());
  ASSERT_TRUE(factory.ok()) << factory.status();
  const std::vector<int64_t> primes = {37, 41, 67, 101, 131, 197, 251, 509, 1009, 1999};
  std::mt19937_64 rng(test::kTestSeed);
  for (int i = 0; i < 4; ++i) {
    const codegen::Workload w = BatchMatmul(1 + static_cast<int64_t>(rng() % 4), primes[rng() % primes.size()],
                                            primes[rng() % primes.size()], 1 + static_cast<int64_t>(rng() % 64));
    auto t = (*factory)->Make({w, test::kTestSeed});
    ASSERT_TRUE(t.ok()) << w.Key() << ": " << t.status();
    ASSERT_TRUE((*t)->DefaultConfig().has_value()) << w.Key();
    EXPECT_TRUE((*t)->space().IsValid(*(*t)->DefaultConfig())) << w.Key();
  }
}

// A device whose limits rule out every configuration: the default is an error that says which
// constraints did it, never an abort.
TEST(KernelTaskDefaultTest, NoValidGpuConfigIsAnErrorNotAnAbort) {
  codegen::GpuLimits tiny;
  tiny.max_shared_bytes_per_block = 64;
  const codegen::Workload vit = BatchMatmul(12, 197, 197, 64);
  auto tmpl = codegen::CreateTemplate(vit, codegen::Backend::kCuda, tiny);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  absl::StatusOr<search::Config> def = (*tmpl)->ValidDefaultConfig();
  EXPECT_TRUE(absl::IsInvalidArgument(def.status())) << def.status();
  EXPECT_THAT(std::string(def.status().message()),
              HasSubstr("batch_matmul b12_m197_n197_k64: no valid configuration of the cuda_gemm template"));
  EXPECT_THAT(std::string(def.status().message()), HasSubstr("shared_memory"));
}

// The CPU templates have a default for every shape; the task offers it.
TEST(KernelTaskDefaultTest, CpuTasksOfferTheirValidDefault) {
  auto factory = TaskFactory::Create(Target::HostCpu(1));
  ASSERT_TRUE(factory.ok()) << factory.status();
  std::mt19937_64 rng(test::kTestSeed + 1);
  for (int i = 0; i < 6; ++i) {
    const codegen::Workload w = BatchMatmul(1 + static_cast<int64_t>(rng() % 3), 1 + static_cast<int64_t>(rng() % 300),
                                            1 + static_cast<int64_t>(rng() % 300), 1 + static_cast<int64_t>(rng() % 300));
    auto task = (*factory)->Make({w, test::kTestSeed});
    ASSERT_TRUE(task.ok()) << w.Key() << ": " << task.status();
    ASSERT_TRUE((*task)->DefaultConfig().has_value());
    EXPECT_TRUE((*task)->space().IsValid(*(*task)->DefaultConfig())) << w.Key();
  }
}

// Counts the batches it is asked to measure; every config "ok" in 1 ms.
class CountingMeasurer final : public KernelMeasurer {
 public:
  std::vector<MeasureResult> Measure(const codegen::Template&, const TaskData* data,
                                     const std::vector<search::Config>& configs, const MeasureProtocol&) override {
    ++batches;
    EXPECT_NE(data, nullptr);
    std::vector<MeasureResult> out(configs.size());
    for (auto& r : out) r.costs_s = {1e-3};
    return out;
  }
  int batches = 0;
};

// Once stopping is asked for, a task measures nothing and says so with no results (the loop's
// "shutting down"), even when its data and reference were never drawn.
TEST(KernelTaskStopTest, MeasuresNothingOnceStopped) {
  std::atomic<bool> stop{false};
  auto measurer = std::make_shared<CountingMeasurer>();
  TaskFactoryOptions options;
  options.measurer = measurer;
  options.should_stop = [&stop] { return stop.load(); };
  auto factory = TaskFactory::Create(Target::HostCpu(1), std::move(options));
  ASSERT_TRUE(factory.ok()) << factory.status();
  auto small = (*factory)->Make({BatchMatmul(1, 8, 8, 8), test::kTestSeed});
  ASSERT_TRUE(small.ok()) << small.status();
  const search::Config def = *(*small)->DefaultConfig();
  EXPECT_EQ((*small)->Measure({def}, MeasureProtocol{}).size(), 1u);
  EXPECT_EQ(measurer->batches, 1);

  // A big task stopped while its reference is computed: no results, nothing measured.
  auto big = (*factory)->Make({BatchMatmul(1, 2048, 2048, 2048), test::kTestSeed});
  ASSERT_TRUE(big.ok()) << big.status();
  int asked = 0;
  TaskFactoryOptions late;
  late.measurer = measurer;
  late.should_stop = [&asked] { return ++asked > 3; };
  auto late_factory = TaskFactory::Create(Target::HostCpu(1), std::move(late));
  ASSERT_TRUE(late_factory.ok());
  auto stopped = (*late_factory)->Make({BatchMatmul(1, 2048, 2048, 2048), test::kTestSeed});
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE((*stopped)->Measure({*(*stopped)->DefaultConfig()}, MeasureProtocol{}).empty());
  EXPECT_GT(asked, 3);
  EXPECT_EQ(measurer->batches, 1);

  stop = true;
  EXPECT_TRUE((*small)->Measure({def}, MeasureProtocol{}).empty());
  EXPECT_TRUE((*big)->Measure({*(*big)->DefaultConfig()}, MeasureProtocol{}).empty());
  EXPECT_EQ(measurer->batches, 1);
}

}  // namespace
}  // namespace tune::measure
