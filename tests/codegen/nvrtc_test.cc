// Tests of NVRTC compilation to cubin (no GPU needed) and of the ptxas report parser.
#include "codegen/cuda/nvrtc.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/codegen_cuda_kernels.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

bool IsElf(const std::string& bytes) {
  return bytes.size() > 4 && bytes.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

class NvrtcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC (TUNE_WITH_CUDA=OFF)";
  }
};

TEST_F(NvrtcTest, SaxpyCompilesToCubinForSm90) {
  absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, "sm_90");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(IsElf(c->cubin)) << "not an ELF cubin (" << c->cubin.size() << " bytes)";
  EXPECT_THAT(c->log, HasSubstr("Compiling entry function 'saxpy' for 'sm_90'"));
  ASSERT_EQ(c->kernels.count("saxpy"), 1u) << c->log;
  const CudaResources& r = c->kernels.at("saxpy");
  EXPECT_GT(r.registers, 0);
  EXPECT_LE(r.registers, 64);
  EXPECT_EQ(r.shared_bytes, 0);
  EXPECT_EQ(r.spill_store_bytes, 0);
  EXPECT_EQ(r.spill_load_bytes, 0);
  EXPECT_EQ(r.stack_bytes, 0);
  EXPECT_EQ(c->resources.registers, r.registers);
}

TEST_F(NvrtcTest, SharedMemoryFloat4KernelReportsItsSharedMemory) {
  for (const char* arch : {"sm_90", "sm_90a"}) {
    absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSharedFloat4, arch);
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status();
    EXPECT_TRUE(IsElf(c->cubin)) << arch;
    ASSERT_EQ(c->kernels.count("reverse_tiles"), 1u) << c->log;
    EXPECT_GT(c->resources.registers, 0) << arch;
    EXPECT_EQ(c->resources.shared_bytes, 256 * 16) << arch << "\n" << c->log;
    EXPECT_EQ(c->resources.spill_store_bytes, 0) << arch;
  }
}

TEST_F(NvrtcTest, TwoKernelsGetOneEntryEachAndTheMaximum) {
  absl::StatusOr<CompiledCuda> c = CompileCuda(absl::StrCat(test::kSaxpy, test::kSharedFloat4), "sm_90");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->kernels.size(), 2u) << c->log;
  const CudaResources& saxpy = c->kernels.at("saxpy");
  const CudaResources& tiles = c->kernels.at("reverse_tiles");
  EXPECT_EQ(c->resources.registers, std::max(saxpy.registers, tiles.registers));
  EXPECT_EQ(c->resources.shared_bytes, 4096);
}

// A register cap far below what the kernel needs makes ptxas spill; the report says so.
TEST_F(NvrtcTest, ExtraOptionsReachTheCompilerAndSpillsAreReported) {
  const std::string source = R"(
extern "C" __global__ void heavy(float* out, int n) {
  float acc[48];
  #pragma unroll
  for (int k = 0; k < 48; ++k) acc[k] = out[k * n + threadIdx.x];
  #pragma unroll
  for (int r = 0; r < 8; ++r) {
    #pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = acc[k] * acc[(k + r) % 48] + 1.0f;
  }
  float s = 0;
  #pragma unroll
  for (int k = 0; k < 48; ++k) s += acc[k];
  out[threadIdx.x] = s;
}
)";
  absl::StatusOr<CompiledCuda> free_regs = CompileCuda(source, "sm_90");
  absl::StatusOr<CompiledCuda> capped = CompileCuda(source, "sm_90", {"--maxrregcount=24"});
  ASSERT_TRUE(free_regs.ok()) << free_regs.status();
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_GT(free_regs->resources.registers, 24);
  EXPECT_EQ(free_regs->resources.spill_store_bytes, 0);
  EXPECT_LE(capped->resources.registers, 24);
  EXPECT_GT(capped->resources.spill_store_bytes, 0) << capped->log;
  EXPECT_GT(capped->resources.spill_load_bytes, 0) << capped->log;
  EXPECT_GT(capped->resources.stack_bytes, 0) << capped->log;
}

// Where a driver is installed, NVRTC can serve a repeated compile from the driver's cache
// without running ptxas; CompileCuda turns that off so every result has its report.
TEST_F(NvrtcTest, RepeatedCompileStillReportsResources) {
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, "sm_90");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_GT(c->resources.registers, 0) << "compile " << i << " log: " << c->log;
  }
}

TEST_F(NvrtcTest, SyntaxErrorIsInvalidArgumentWithTheOffendingLine) {
  const std::string source =
      "extern \"C\" __global__ void broken(float* x) {\n"
      "  int i = threadIdx.x\n"  // line 2: the missing ';' is reported on line 3
      "  x[i] = 1.0f;\n"
      "}\n";
  absl::StatusOr<CompiledCuda> c = CompileCuda(source, "sm_90");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("tune_kernel.cu(3): error: expected a \";\""));
  EXPECT_THAT(c.status().message(), HasSubstr("x[i] = 1.0f;"));  // the source line, quoted
  EXPECT_THAT(c.status().message(), HasSubstr("sm_90"));
}

TEST_F(NvrtcTest, UndefinedIdentifierNamesIt) {
  absl::StatusOr<CompiledCuda> c =
      CompileCuda("extern \"C\" __global__ void k(float* x) { x[0] = not_declared; }\n", "sm_90");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("identifier \"not_declared\" is undefined"));
}

TEST_F(NvrtcTest, UnknownOrVirtualArchIsRejected) {
  // sm_91 and sm_12 are well-formed but unknown to NVRTC; compute_90 is virtual (PTX only);
  // the rest are not CUDA architectures at all.
  for (const char* arch : {"sm_91", "sm_12", "compute_90", "sm_", "sm_90x", "gfx90a", "90", ""}) {
    absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, arch);
    ASSERT_FALSE(c.ok()) << "'" << arch << "' was accepted";
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << arch << ": " << c.status();
  }
  absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, "sm_91");
  EXPECT_THAT(c.status().message(), HasSubstr("--gpu-architecture"));
}

TEST_F(NvrtcTest, UnknownOptionIsInvalidArgument) {
  absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, "sm_90", {"--no-such-option"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--no-such-option"));
}

// Each thread compiles its own variants (a different constant each) at the same time as the
// other; every result must be a complete cubin with its own kernel.
TEST_F(NvrtcTest, CompilesFromTwoThreadsAtOnce) {
  constexpr int kThreads = 2, kPerThread = 3;
  std::vector<std::vector<absl::StatusOr<CompiledCuda>>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &results] {
      for (int j = 0; j < kPerThread; ++j) {
        std::string name = absl::StrCat("scale_", t, "_", j);
        std::string source =
            absl::StrCat("extern \"C\" __global__ void ", name,
                         "(float* x) { x[threadIdx.x] *= ", t * 10 + j + 2, ".0f; }\n", test::kSharedFloat4);
        results[t].push_back(CompileCuda(source, j % 2 == 0 ? "sm_90" : "sm_90a"));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(results[t].size(), static_cast<size_t>(kPerThread));
    for (int j = 0; j < kPerThread; ++j) {
      const absl::StatusOr<CompiledCuda>& c = results[t][j];
      ASSERT_TRUE(c.ok()) << t << "/" << j << ": " << c.status();
      EXPECT_TRUE(IsElf(c->cubin));
      EXPECT_EQ(c->kernels.count(absl::StrCat("scale_", t, "_", j)), 1u) << c->log;
      EXPECT_EQ(c->kernels.count("reverse_tiles"), 1u) << c->log;
      EXPECT_EQ(c->kernels.size(), 2u) << c->log;
    }
  }
}

// A kernel NVRTC takes over a second to compile on a 2-core VM (CUDA 13.0: about 1.7 s): 64
// accumulators updated by `kSlowCompileSteps` x 64 dependent FMAs, fully unrolled, which ptxas
// schedules one by one. `scale` varies the source.
constexpr int kSlowCompileSteps = 300;
std::string SlowToCompile(const std::string& name, float scale) {
  return absl::StrCat("extern \"C\" __global__ void ", name, "(float* x) {\n",
                      "  float acc[64];\n"
                      "#pragma unroll\n"
                      "  for (int i = 0; i < 64; ++i) acc[i] = x[threadIdx.x + i];\n"
                      "#pragma unroll\n"
                      "  for (int k = 0; k < ", kSlowCompileSteps, "; ++k) {\n",
                      "#pragma unroll\n"
                      "    for (int i = 0; i < 64; ++i) acc[i] = fmaf(acc[i], acc[(i * 7 + k) % 64], ", scale, "f);\n",
                      "  }\n"
                      "  float s = 0;\n"
                      "#pragma unroll\n"
                      "  for (int i = 0; i < 64; ++i) s += acc[i];\n"
                      "  x[threadIdx.x] = s;\n"
                      "}\n");
}

// A deadline a few milliseconds after the start cancels a compile that takes over a second:
// DeadlineExceeded (only a cancelled compile gives it), not the cubin; the same source with a
// deadline far away compiles.
TEST_F(NvrtcTest, DeadlineCancelsASlowCompile) {
  if (!NvrtcCanCancel()) GTEST_SKIP() << "NVRTC " << NvrtcVersion() << " has no nvrtcSetFlowCallback";
  std::mt19937 rng(std::random_device{}());
  const std::string source =
      SlowToCompile("slow_compile", std::uniform_real_distribution<float>(0.5f, 2.0f)(rng));
  const auto now = std::chrono::steady_clock::now;
  const auto few_ms = std::chrono::milliseconds(1 + static_cast<int>(rng() % 5));
  absl::StatusOr<CompiledCuda> cancelled = CompileCuda(source, "sm_90", {}, now() + few_ms);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kDeadlineExceeded) << cancelled.status();
  EXPECT_THAT(cancelled.status().message(), HasSubstr("cancelled at its deadline"));

  // Without a deadline CompileCuda registers no callback; a far one is the path that does.
  absl::StatusOr<CompiledCuda> far = CompileCuda(source, "sm_90", {}, now() + std::chrono::minutes(10));
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_TRUE(IsElf(far->cubin));
  EXPECT_EQ(far->kernels.count("slow_compile"), 1u) << far->log;
}

// Two compiles with deadlines on two threads at once: each callback keeps its own deadline
// (a payload per program), so the near one is cancelled and the far one is not.
TEST_F(NvrtcTest, DeadlinesOfConcurrentCompilesAreTheirOwn) {
  if (!NvrtcCanCancel()) GTEST_SKIP() << "NVRTC " << NvrtcVersion() << " has no nvrtcSetFlowCallback";
  std::mt19937 rng(std::random_device{}());
  const float scale = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<CompiledCuda> near = absl::UnknownError("not run");
  std::thread other([&] { near = CompileCuda(SlowToCompile("near", scale), "sm_90", {}, start + std::chrono::milliseconds(2)); });
  absl::StatusOr<CompiledCuda> far = CompileCuda(test::kSaxpy, "sm_90", {}, start + std::chrono::minutes(10));
  other.join();
  EXPECT_EQ(near.status().code(), absl::StatusCode::kDeadlineExceeded) << near.status();
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_EQ(far->kernels.count("saxpy"), 1u) << far->log;
}

// From CUDA 12.8 on NVRTC has nvrtcSetFlowCallback: the run-time lookup must find it there, or
// every build deadline would be dropped (and the tests above skipped) without a word.
TEST_F(NvrtcTest, CanCancelFromCuda12_8On) {
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(NvrtcVersion().c_str(), "%d.%d", &major, &minor), 2) << NvrtcVersion();
  if (major > 12 || (major == 12 && minor >= 8)) {
    EXPECT_TRUE(NvrtcCanCancel()) << NvrtcVersion();
  } else {
    EXPECT_FALSE(NvrtcCanCancel()) << NvrtcVersion();
  }
}

TEST_F(NvrtcTest, VersionIsReported) { EXPECT_THAT(NvrtcVersion(), StartsWith("1")); }

TEST(NvrtcUnavailableTest, CompileIsUnimplementedWithoutNvrtc) {
  if (NvrtcAvailable()) GTEST_SKIP() << "this build has NVRTC";
  absl::StatusOr<CompiledCuda> c = CompileCuda(test::kSaxpy, "sm_90");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
}

// The report NVRTC 13 prints with --ptxas-options=-v for a module holding an extern "C"
// kernel, a C++ kernel (mangled name) with static shared memory and a non-inlined callee
// whose stack counts towards the kernel's cumulative stack, and the device function's own
// block, which is not a kernel.
TEST(NvrtcPtxasReportTest, ParsesEveryEntryFunction) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90'\n"
      "ptxas info    : Function properties for k2\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers\n"
      "ptxas info    : Compile time = 2.489 ms\n"
      "ptxas info    : Compiling entry function '_Z2k1Pfi' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z2k1Pfi\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 128 bytes cumulative stack size, 400 bytes smem\n"
      "ptxas info    : Compile time = 8.105 ms\n"
      "ptxas info    : Function properties for _Z1gPfi\n"
      "ptxas         .     112 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
  std::map<std::string, CudaResources> kernels = ParsePtxasReport(log);
  ASSERT_EQ(kernels.size(), 2u);
  const CudaResources& k2 = kernels.at("k2");
  EXPECT_EQ(k2.registers, 8);
  EXPECT_EQ(k2.shared_bytes, 0);
  EXPECT_EQ(k2.spill_store_bytes, 0);
  EXPECT_EQ(k2.spill_load_bytes, 0);
  EXPECT_EQ(k2.stack_bytes, 0);
  const CudaResources& k1 = kernels.at("_Z2k1Pfi");
  EXPECT_EQ(k1.registers, 40);
  EXPECT_EQ(k1.shared_bytes, 400);
  EXPECT_EQ(k1.spill_store_bytes, 8);
  EXPECT_EQ(k1.spill_load_bytes, 12);
  EXPECT_EQ(k1.stack_bytes, 128);  // cumulative (callees included), not the 16-byte own frame
}

TEST(NvrtcPtxasReportTest, NoReportMeansUnknown) {
  EXPECT_TRUE(ParsePtxasReport("").empty());
  EXPECT_TRUE(ParsePtxasReport("tune_kernel.cu(3): warning: something\n").empty());
  // A kernel whose block is cut short keeps -1 for what was not said.
  std::map<std::string, CudaResources> kernels =
      ParsePtxasReport("ptxas info    : Compiling entry function 'k' for 'sm_90'\n");
  ASSERT_EQ(kernels.count("k"), 1u);
  EXPECT_EQ(kernels.at("k").registers, -1);
  EXPECT_EQ(kernels.at("k").shared_bytes, -1);
  EXPECT_EQ(kernels.at("k").stack_bytes, -1);
}

}  // namespace
}  // namespace tune::codegen
