// Tests of the CUDA runner. Without a GPU: every build gets a clear runtime_error and failed
// builds pass through. On a GPU (suites named Gpu*): random template configs match the
// on-device reference, and planted bad kernels (out-of-bounds, wrong, hanging) become records
// while the next kernel still measures.
#include "measure/cuda_runner.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/cuda_builder.h"
#include "measure/device_lock.h"
#include "measure/target.h"
#include "tests/common/measure_cuda_configs.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;

codegen::Workload Matmul(const std::string& shape, codegen::OpKind op = codegen::OpKind::kMatmul, bool bias = false,
                         bool relu = false) {
  return test::ParseWorkload(op, shape, bias, relu);
}

MeasureProtocol Quick() {
  MeasureProtocol p;
  p.warmup = 1;
  p.repeats = 3;
  p.min_repeat_ms = 0.2;
  p.timeout_s = 20;
  return p;
}

// A hand-written CUDA build for `workload` (inputs then output, as the templates' kernels);
// `prelude` goes before the kernel (module-scope variables).
BuildResult HandBuild(const std::string& body, const codegen::Workload& w, std::array<int64_t, 3> grid,
                      std::array<int64_t, 3> block, const std::string& prelude = "") {
  std::string params;
  for (const auto& in : w.Inputs()) params += "const float* __restrict__ " + in.name + ", ";
  std::string source =
      prelude + "extern \"C\" __global__ void planted(" + params + "float* __restrict__ out) {\n" + body + "\n}\n";
  BuildResult b;
  absl::StatusOr<codegen::CompiledCuda> c = codegen::CompileCuda(source, "sm_90");
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return b;
  b.kernel.symbol = "planted";
  b.kernel.object_code = c->cubin;
  b.kernel.cuda = true;
  b.kernel.launch.grid = grid;
  b.kernel.launch.block = block;
  return b;
}

TEST(CudaRunnerTest, WithoutADeviceEveryBuildSaysWhy) {
  if (Target::Parse("cuda", 1).ok()) GTEST_SKIP() << "a CUDA device is present";
  if (!codegen::NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  codegen::Workload w = Matmul("64,64,64");
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_TRUE(tmpl.ok());
  CudaBuilder builder("sm_90", 1);
  std::vector<BuildResult> builds = {builder.Build(**tmpl, (*tmpl)->DefaultConfig()), BuildResult{}};
  ASSERT_EQ(builds[0].status, MeasureStatus::kOk) << builds[0].message;
  EXPECT_TRUE(builds[0].kernel.cuda);
  EXPECT_THAT(builds[0].kernel.ir, HasSubstr("__global__"));
  EXPECT_GT(builds[0].kernel.launch.registers, 0);
  builds[1].status = MeasureStatus::kCompileError;
  builds[1].message = "planted compile error";
  CudaRunner runner({Quick(), 0});
  std::vector<MeasureResult> r = runner.Run(TaskData::Create(w, 1, false), builds);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, MeasureStatus::kRuntimeError);
  EXPECT_THAT(r[0].message, HasSubstr("cannot open CUDA device 0"));
  EXPECT_EQ(r[1].status, MeasureStatus::kCompileError);
  EXPECT_EQ(r[1].message, "planted compile error");
}

class GpuRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Target> t = Target::Parse("cuda", 1);
    if (!t.ok()) GTEST_SKIP() << "no CUDA device: " << t.status();
    target_ = *t;
  }

  // What MeasureConfigs measured: the template (whose space the configs belong to), the
  // configs, their builds and their records.
  struct Measured {
    std::unique_ptr<codegen::Template> tmpl;
    std::vector<search::Config> configs;
    std::vector<BuildResult> builds;
    std::vector<MeasureResult> results;
  };
  using Filter = std::function<bool(const search::ConfigSpace&, const search::Config&)>;

  // Builds w's CUDA template's `fixed` configs (JSON, or kDefault for its default config) and
  // then random valid configs for which `keep` holds, drawn with `rng`, `size` in all; measures
  // them on random inputs drawn with `seed`. Each must match the on-device reference and time
  // positive.
  Measured MeasureConfigs(const codegen::Workload& w, const std::vector<std::string>& fixed, size_t size,
                          std::mt19937_64& rng, uint64_t seed, const Filter& keep = nullptr) {
    Measured m;
    auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
    EXPECT_TRUE(tmpl.ok()) << w.Key() << ": " << tmpl.status();
    if (!tmpl.ok()) return m;
    m.tmpl = std::move(*tmpl);
    const search::ConfigSpace& space = m.tmpl->space();
    for (const std::string& text : fixed) {
      absl::StatusOr<search::Config> c = text == kDefault ? m.tmpl->DefaultConfig() : space.FromJson(text);
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok()) return m;
      EXPECT_TRUE(space.IsValid(*c)) << text << ": " << space.WhyInvalid(*c);
      m.configs.push_back(*c);
    }
    m.configs = test::DrawWhere(
        space, rng, size, [&](const search::Config& c) { return !keep || keep(space, c); }, std::move(m.configs));
    EXPECT_EQ(m.configs.size(), size) << w.Key();
    CudaBuilder builder(target_.cpu, 8);
    m.builds = builder.BuildAll(*m.tmpl, m.configs);
    CudaRunner runner({Quick(), target_.device});
    m.results = runner.Run(TaskData::Create(w, seed, false), m.builds);
    EXPECT_EQ(m.results.size(), m.configs.size()) << w.Key();
    for (size_t i = 0; i < m.results.size() && i < m.configs.size(); ++i) {
      EXPECT_EQ(m.results[i].status, MeasureStatus::kOk)
          << w.Key() << " " << space.ToJson(m.configs[i]) << ": " << m.results[i].message;
      EXPECT_GT(m.results[i].Median(), 0);
    }
    return m;
  }

  static constexpr const char* kDefault = "default";

  Target target_;
};

// >= 30 random valid configs of each CUDA template -- GEMM (dense with bias + relu, matmul,
// batch_matmul, a one-row classifier), implicit-GEMM conv2d (padding, stride 2, batch 2) and
// depthwise conv2d (3x3 and 5x5, stride 2, batch 2) -- all match the on-device reference on
// random inputs, and time positive.
TEST_F(GpuRunnerTest, RandomGemmConfigsMatchTheReference) {
  std::vector<codegen::Workload> workloads = {Matmul("128,768,768", codegen::OpKind::kDense, true, true),
                                              Matmul("256,512,384"),
                                              Matmul("6,128,128,64", codegen::OpKind::kBatchMatmul),
                                              Matmul("1,64,28,28,64,3,3,1,1", codegen::OpKind::kConv2d, true, true),
                                              Matmul("1,128,14,14,256,3,3,2,1", codegen::OpKind::kConv2d),
                                              Matmul("2,64,14,14,32,1,1,1,0", codegen::OpKind::kConv2d),
                                              Matmul("1,1000,512", codegen::OpKind::kDense, true),
                                              Matmul("1,32,56,56,32,3,3,1,1,1,32", codegen::OpKind::kConv2d, true, true),
                                              Matmul("2,96,28,28,96,3,3,2,1,1,96", codegen::OpKind::kConv2d),
                                              Matmul("1,240,14,14,240,5,5,1,2,1,240", codegen::OpKind::kConv2d, true)};
  std::mt19937_64 rng(7);
  int measured = 0;
  for (const codegen::Workload& w : workloads) {
    for (const MeasureResult& r : MeasureConfigs(w, {kDefault}, 11, rng, 3).results) measured += r.ok();
  }
  EXPECT_GE(measured, 100);
}

// The on-device reference is kept with the task's data: a later batch, measured by a runner
// of its own, checks against it instead of computing it again -- a kept reference made wrong
// fails that batch's check, and a right one passes it.
TEST_F(GpuRunnerTest, TheDeviceReferenceIsKeptWithTheTask) {
  const codegen::Workload w = Matmul("96,80,72");
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  CudaBuilder builder(target_.cpu, 2);
  const std::vector<BuildResult> builds = builder.BuildAll(**tmpl, {(*tmpl)->DefaultConfig()});
  TaskData data = TaskData::Create(w, 5, false);
  ASSERT_TRUE(data.device_reference.empty());
  std::vector<MeasureResult> first = CudaRunner({Quick(), target_.device}).Run(data, builds);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].status, MeasureStatus::kOk) << first[0].message;
  ASSERT_EQ(data.device_reference.size(), static_cast<size_t>(w.Output().NumElements()));
  std::vector<MeasureResult> again = CudaRunner({Quick(), target_.device}).Run(data, builds);
  EXPECT_EQ(again[0].status, MeasureStatus::kOk) << again[0].message;
  for (float& v : data.device_reference) v = -v + 1.0f;
  std::vector<MeasureResult> wrong = CudaRunner({Quick(), target_.device}).Run(data, builds);
  EXPECT_EQ(wrong[0].status, MeasureStatus::kWrongResult) << "the kept reference was not used";
}

// >= 30 random valid configs of the conv2d template's direct variant -- a strided resnet-18
// layer with bias + relu, batch 2, a 1x1 downsampling layer (no padding), the 7x7 stem, the
// last 7x7 stage and a dilated conv, 6 each -- all match the on-device reference and time
// positive; and the implicit-GEMM default of each shape for comparison.
TEST_F(GpuRunnerTest, RandomDirectConvConfigsMatchTheReference) {
  std::vector<codegen::Workload> workloads = {Matmul("1,64,56,56,128,3,3,2,1", codegen::OpKind::kConv2d, true, true),
                                              Matmul("2,64,28,28,64,3,3,1,1", codegen::OpKind::kConv2d, true),
                                              Matmul("2,64,56,56,128,1,1,2,0", codegen::OpKind::kConv2d),
                                              Matmul("1,3,224,224,64,7,7,2,3", codegen::OpKind::kConv2d, true, true),
                                              Matmul("1,512,7,7,512,3,3,1,1", codegen::OpKind::kConv2d, true, true),
                                              Matmul("2,32,28,28,32,3,3,1,2,2", codegen::OpKind::kConv2d, false, true)};
  std::mt19937_64 rng(8);
  int measured = 0;
  for (const codegen::Workload& w : workloads) {
    const Measured m = MeasureConfigs(w, {kDefault}, 7, rng, 4, [](const search::ConfigSpace& space, const search::Config& c) {
      return space.GetInt(c, "variant") == 1;
    });
    ASSERT_EQ(m.configs.size(), 7u) << w.Key();
    for (size_t i = 0; i < m.results.size(); ++i) {
      if (i > 0) measured += m.results[i].ok();
      std::printf("%-60s %-14s %9.1f us %s\n", w.Label().c_str(), i == 0 ? "implicit_gemm" : "direct",
                  m.results[i].Median() * 1e6, m.tmpl->space().ToJson(m.configs[i]).c_str());
    }
  }
  EXPECT_GE(measured, 30);
}

// Split-K: >= 30 random valid configs with k_split > 1 -- BERT's dense 128 x 768 x 3072 with
// bias (the shape split-K is for) and with bias + relu, a batched attention product, a matmul
// with a long K and the last resnet stage as implicit GEMM (512 x 7 x 7, K = 4608) -- match the
// on-device reference. The runner launches each many times on the same workspace and
// counters and checks the first launch and, on a NaN-filled output, the last one: so the
// counters must reset themselves. Each shape's default config is timed alongside; the
// per-config times are printed.
TEST_F(GpuRunnerTest, RandomSplitKConfigsMatchTheReference) {
  std::vector<codegen::Workload> workloads = {Matmul("128,768,3072", codegen::OpKind::kDense, true),
                                              Matmul("128,768,3072", codegen::OpKind::kDense, true, true),
                                              Matmul("4,128,64,1024", codegen::OpKind::kBatchMatmul),
                                              Matmul("64,256,8192"),
                                              Matmul("1,512,7,7,512,3,3,1,1", codegen::OpKind::kConv2d, true, true)};
  std::mt19937_64 rng(9);
  int measured = 0;
  for (const codegen::Workload& w : workloads) {
    const Measured m = MeasureConfigs(w, {kDefault}, 8, rng, 10, [](const search::ConfigSpace& space, const search::Config& c) {
      return space.GetInt(c, "k_split") > 1;
    });
    ASSERT_EQ(m.configs.size(), 8u) << w.Key();
    const search::ConfigSpace& space = m.tmpl->space();
    for (size_t i = 1; i < m.builds.size(); ++i) {
      EXPECT_EQ(m.builds[i].kernel.launch.scratch.size(), 2u) << space.ToJson(m.configs[i]);
    }
    for (size_t i = 0; i < m.results.size(); ++i) {
      if (i > 0) measured += m.results[i].ok();
      std::printf("%-44s k_split %lld %9.1f us %s\n", w.Label().c_str(),
                  static_cast<long long>(space.GetInt(m.configs[i], "k_split")), m.results[i].Median() * 1e6,
                  space.ToJson(m.configs[i]).c_str());
    }
  }
  EXPECT_GE(measured, 30);
}

// The cp.async pipeline on the device: random configs with cp_async 2, 3 or 4 of SGEMM 4096
// and 1024, BERT's dense 128 x 768 x 3072 (bias + relu) and a batched attention product (>= 30
// in all), and for SGEMM 4096 the best register-staged kernel measured so far beside its
// 128 x 128 and cp.async variants -- A by 4-byte cp.async (cp_async_a 0) and the hybrid, A
// register-staged (cp_async_a 1) -- all match the on-device reference; every time is printed
// (cp_async / cp_async_a, so the fixed candidates rank against cp_async 0 in one run).
TEST_F(GpuRunnerTest, RandomCpAsyncConfigsMatchTheReference) {
  const std::string sgemm =
      R"({"tile_m": [64, 8, 8], "tile_n": [32, 16, 8], "tile_k": [512, 8], "vector": [4], "double_buffer": [1], )"
      R"("pad": [4], "unroll_k": [1], "interleave": [1], "k_slices": [1], "k_split": [1])";
  const std::string sgemm128 =
      R"({"tile_m": [32, 16, 8], "tile_n": [32, 16, 8], "tile_k": [512, 8], "vector": [4], "double_buffer": [1], )"
      R"("pad": [4], "unroll_k": [1], "interleave": [1], "k_slices": [1], "k_split": [1])";
  const std::vector<std::string> fixed = {sgemm + "}",
                                          sgemm + R"(, "cp_async": [2]})",
                                          sgemm + R"(, "cp_async": [3]})",
                                          sgemm + R"(, "cp_async": [2], "cp_async_a": [1]})",
                                          sgemm + R"(, "cp_async": [3], "cp_async_a": [1]})",
                                          sgemm + R"(, "cp_async": [4], "cp_async_a": [1]})",
                                          sgemm128 + "}",
                                          sgemm128 + R"(, "cp_async": [2]})",
                                          sgemm128 + R"(, "cp_async": [3]})",
                                          sgemm128 + R"(, "cp_async": [4]})",
                                          sgemm128 + R"(, "cp_async": [2], "cp_async_a": [1]})",
                                          sgemm128 + R"(, "cp_async": [3], "cp_async_a": [1]})",
                                          sgemm128 + R"(, "cp_async": [4], "cp_async_a": [1]})"};
  const std::vector<codegen::Workload> workloads = {Matmul("4096,4096,4096"), Matmul("1024,1024,1024"),
                                                    Matmul("128,768,3072", codegen::OpKind::kDense, true, true),
                                                    Matmul("12,128,128,64", codegen::OpKind::kBatchMatmul)};
  std::mt19937_64 rng(11);
  int random = 0;
  for (const codegen::Workload& w : workloads) {
    const size_t fixed_count = w.m == 4096 ? fixed.size() : 0;
    const Measured m = MeasureConfigs(w, std::vector<std::string>(fixed.begin(), fixed.begin() + fixed_count),
                                      fixed_count + 8, rng, 12,
                                      [](const search::ConfigSpace& space, const search::Config& c) {
                                        return space.GetInt(c, "cp_async") > 0;
                                      });
    ASSERT_EQ(m.configs.size(), fixed_count + 8) << w.Key();
    const search::ConfigSpace& space = m.tmpl->space();
    const std::vector<search::Config>& configs = m.configs;
    const std::vector<MeasureResult>& results = m.results;
    const double flop =
        2.0 * static_cast<double>(w.m) * w.n * w.k * (w.op == codegen::OpKind::kBatchMatmul ? w.batch : 1);
    for (size_t i = 0; i < results.size(); ++i) {
      if (i >= fixed_count) random += results[i].ok();
      std::printf("%-36s cp_async %lld/%lld %10.1f us %7.2f TFLOP/s %s\n", w.Label().c_str(),
                  static_cast<long long>(space.GetInt(configs[i], "cp_async")),
                  static_cast<long long>(space.GetInt(configs[i], "cp_async_a")), results[i].Median() * 1e6,
                  results[i].ok() ? flop / results[i].Median() * 1e-12 : 0.0, space.ToJson(configs[i]).c_str());
    }
  }
  EXPECT_GE(random, 30);
}

// Failures are data: an out-of-bounds kernel is runtime_error, a kernel that writes nothing
// is wrong_result, a kernel that never ends is timeout; after each, the next kernel measures.
TEST_F(GpuRunnerTest, PlantedBadKernelsBecomeRecords) {
  codegen::Workload w = Matmul("64,64,64");
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_TRUE(tmpl.ok());
  CudaBuilder builder(target_.cpu, 2);
  BuildResult good = builder.Build(**tmpl, (*tmpl)->DefaultConfig());
  ASSERT_EQ(good.status, MeasureStatus::kOk);
  BuildResult oob = HandBuild("out[(1LL << 34) + threadIdx.x] = 1.0f;", w, {64, 1, 1}, {256, 1, 1});
  BuildResult idle = HandBuild("if (threadIdx.x == 1000) out[0] = a[0];", w, {1, 1, 1}, {32, 1, 1});
  BuildResult hang = HandBuild("const long long start = clock64(); while (clock64() - start >= 0) {}", w, {1, 1, 1}, {32, 1, 1});
  MeasureProtocol p = Quick();
  p.timeout_s = 5;
  CudaRunner runner({p, target_.device});
  std::vector<MeasureResult> r = runner.Run(TaskData::Create(w, 5, false), {oob, good, idle, good, hang, good});
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0].status, MeasureStatus::kRuntimeError) << r[0].message;
  EXPECT_EQ(r[1].status, MeasureStatus::kOk) << r[1].message;
  EXPECT_EQ(r[2].status, MeasureStatus::kWrongResult) << r[2].message;
  EXPECT_THAT(r[2].message, HasSubstr("differs from reference"));
  EXPECT_EQ(r[3].status, MeasureStatus::kOk) << r[3].message;
  EXPECT_EQ(r[4].status, MeasureStatus::kTimeout) << r[4].message;
  EXPECT_EQ(r[5].status, MeasureStatus::kOk) << r[5].message;
}

// The cutoff judges the first warm launch: a kernel slow only on its first launch (it stands
// in for one whose first launch loads its code or touches fresh memory) is timed in full, one
// slow on every launch keeps that launch as its only sample.
TEST_F(GpuRunnerTest, CutoffJudgesAWarmLaunchNotTheColdFirstOne) {
  codegen::Workload w = Matmul("64,64,64");
  const std::string matmul =
      "float acc = 0.0f;\n"
      "for (int k = 0; k < 64; ++k) acc += a[blockIdx.x * 64 + k] * b[k * 64 + threadIdx.x];\n"
      "out[blockIdx.x * 64 + threadIdx.x] = acc;\n";
  // About 4 ms of spinning (8M cycles at up to 2 GHz) in the first launch of the module only,
  // 1 ms in every launch.
  BuildResult cold = HandBuild(
      "if (blockIdx.x == 0 && threadIdx.x == 0 && atomicAdd(&launches, 1u) == 0u) {\n"
      "  const long long start = clock64(); while (clock64() - start < 8000000) {}\n}\n" + matmul,
      w, {64, 1, 1}, {64, 1, 1}, "__device__ unsigned int launches = 0;\n");
  BuildResult slow = HandBuild(
      "if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
      "  const long long start = clock64(); while (clock64() - start < 2000000) {}\n}\n" + matmul,
      w, {64, 1, 1}, {64, 1, 1});
  MeasureProtocol p = Quick();
  p.cutoff_s = 3e-4;
  CudaRunner runner({p, target_.device});
  std::vector<MeasureResult> r = runner.Run(TaskData::Create(w, 5, false), {cold, slow});
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].status, MeasureStatus::kOk) << r[0].message;
  EXPECT_EQ(r[0].costs_s.size(), 3u) << r[0].message;
  EXPECT_THAT(r[0].message, ::testing::Not(HasSubstr("cut off")));
  EXPECT_LT(r[0].Median(), 3e-4);
  ASSERT_EQ(r[1].status, MeasureStatus::kOk) << r[1].message;
  ASSERT_EQ(r[1].costs_s.size(), 1u) << r[1].message;
  EXPECT_GT(r[1].costs_s[0], 3e-4);
  EXPECT_THAT(r[1].message, HasSubstr("timing cut off after a warm call ("));
}

// While another holder has the GPU's lock (a second tune process measuring on it), a runner's
// worker runs nothing on the GPU: its batch is still out a second later, and once the lock is
// given up it measures normally. The other holder's time does not count against the build's
// timeout (2 s here).
TEST_F(GpuRunnerTest, WaitsForTheGpuLockOfAnotherProcess) {
  char pattern[] = "/tmp/tune-gpu-lock-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  ::setenv("TUNE_LOCK_DIR", pattern, 1);
  auto info = CudaRunner::Probe(target_.device);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_FALSE(info->pci_bus_id.empty());
  auto other = DeviceLock::Open(DeviceLock::PathFor(info->pci_bus_id));
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(other->Acquire(5).ok());
  codegen::Workload w = Matmul("256,256,256");
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_TRUE(tmpl.ok());
  CudaBuilder builder(target_.cpu, 2);
  std::vector<BuildResult> builds = {builder.Build(**tmpl, (*tmpl)->DefaultConfig())};
  MeasureProtocol p = Quick();
  p.timeout_s = 2;
  CudaRunner runner({p, target_.device});
  const TaskData data = TaskData::Create(w, 5, false);
  auto run = std::async(std::launch::async, [&] { return runner.Run(data, builds); });
  EXPECT_EQ(run.wait_for(std::chrono::milliseconds(3000)), std::future_status::timeout);
  other->Release();
  std::vector<MeasureResult> r = run.get();
  ::unsetenv("TUNE_LOCK_DIR");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, MeasureStatus::kOk) << r[0].message;
  EXPECT_GT(r[0].Median(), 0);
}

}  // namespace
}  // namespace tune::measure
