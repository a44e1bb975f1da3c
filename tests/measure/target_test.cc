// Tests of target parsing: the host CPU, CUDA device names, and errors.
#include "measure/target.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::measure {
namespace {

TEST(TargetParseTest, HostCpu) {
  absl::StatusOr<Target> llvm = Target::Parse("llvm", 4);
  ASSERT_TRUE(llvm.ok()) << llvm.status();
  EXPECT_EQ(llvm->Key(), Target::HostCpu(4).Key());
  EXPECT_FALSE(Target::Parse("llvm", 0).ok());
}

TEST(TargetParseTest, UnknownAndMalformedTargets) {
  absl::StatusOr<Target> other = Target::Parse("x", 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.status().message(),
            "unknown target 'x': known targets are 'llvm' (host CPU) and 'cuda[:N]' (NVIDIA GPU)");
  for (const char* bad : {"cuda:", "cuda:-1", "cuda:one"}) {
    EXPECT_EQ(Target::Parse(bad, 1).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// "cuda:all" is only a worker's shorthand for every GPU: Parse refuses it, and near misses
// are malformed targets, not "all".
TEST(TargetParseTest, CudaAllIsRecognisedExactlyAndRefusedWhereOneDeviceIsMeant) {
  EXPECT_TRUE(Target::IsAllGpus("cuda:all"));
  EXPECT_TRUE(Target::IsAllGpus(" cuda:all "));
  for (const char* other : {"cuda:alll", "cuda:al", "cuda:", "cuda:ALL", "cuda:all0", "cuda", "cuda:0", "llvm", "all",
                            "cuda::all", ""}) {
    EXPECT_FALSE(Target::IsAllGpus(other)) << other;
  }
  absl::StatusOr<Target> all = Target::Parse("cuda:all", 1);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(all.status().message()), ::testing::HasSubstr("only `tune worker` takes it"));
  for (const char* bad : {"cuda:alll", "cuda:al", "cuda:all0", "cuda::all", "cuda:ALL"}) {
    absl::StatusOr<Target> t = Target::Parse(bad, 1);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("expected cuda:N")) << bad;
  }
}

// The per-GPU split of "cuda:all" for N devices, without touching a GPU: one target per
// ordinal, in order, each one a target Parse takes; other targets stand for themselves.
TEST(TargetParseTest, CudaAllSplitsIntoOneTargetPerDevice) {
  for (int n : {1, 2, 4}) {
    absl::StatusOr<std::vector<std::string>> split = Target::PerDeviceTargets("cuda:all", n);
    ASSERT_TRUE(split.ok()) << split.status();
    ASSERT_EQ(split->size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ((*split)[i], "cuda:" + std::to_string(i));
      EXPECT_FALSE(Target::IsAllGpus((*split)[i]));
    }
  }
  absl::StatusOr<std::vector<std::string>> none = Target::PerDeviceTargets("cuda:all", 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(none.status().message()), ::testing::HasSubstr("no CUDA device"));
  for (const char* one : {"llvm", "cuda", "cuda:1", "cuda:alll"}) {
    absl::StatusOr<std::vector<std::string>> same = Target::PerDeviceTargets(one, 4);
    ASSERT_TRUE(same.ok()) << one;
    EXPECT_EQ(*same, std::vector<std::string>{one});
  }
}

// Counting devices never fails hard: a number where a driver is, Unavailable with the reason
// otherwise; "cuda:all" on a host without a GPU therefore fails with a clear message.
TEST(TargetParseTest, CudaDeviceCountIsANumberOrSaysWhyNot) {
  absl::StatusOr<int> count = Target::CudaDeviceCount();
  if (!count.ok()) {
    EXPECT_EQ(count.status().code(), absl::StatusCode::kUnavailable) << count.status();
    EXPECT_FALSE(count.status().message().empty());
    GTEST_SKIP() << "no CUDA driver: " << count.status();
  }
  EXPECT_GE(*count, 0);
  if (*count > 0) {
    absl::StatusOr<Target> last = Target::Parse("cuda:" + std::to_string(*count - 1), 1);
    EXPECT_TRUE(last.ok()) << last.status();
    EXPECT_FALSE(Target::Parse("cuda:" + std::to_string(*count), 1).ok());
  }
}

// "cuda" describes the GPU when there is one; without a driver or device it is Unavailable
// with the reason (and this process never loads the driver either way).
TEST(TargetParseTest, CudaDescribesTheGpuOrSaysWhyNot) {
  absl::StatusOr<Target> gpu = Target::Parse("cuda", 1);
  if (!gpu.ok()) {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable) << gpu.status();
    EXPECT_FALSE(gpu.status().message().empty());
    GTEST_SKIP() << "no CUDA device: " << gpu.status();
  }
  EXPECT_EQ(gpu->kind, "cuda");
  EXPECT_EQ(gpu->cpu.rfind("sm_", 0), 0u) << gpu->cpu;
  EXPECT_GT(gpu->max_threads_per_block, 0);
  EXPECT_GT(gpu->max_shared_per_block, 0);
  EXPECT_EQ(gpu->Key().rfind("cuda|sm_", 0), 0u) << gpu->Key();
  EXPECT_NE(gpu->Key().find("sm|nvrtc-"), std::string::npos) << gpu->Key();
}

TEST(TargetJsonTest, FromJsonRoundTripsAndChecksTheKey) {
  Target cpu = Target::HostCpu(3);
  auto back = Target::FromJson(cpu.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Key(), cpu.Key());
  EXPECT_EQ(back->threads, 3);

  const Target gpu{.kind = "cuda",
                   .device_model = "NVIDIA H200",
                   .cpu = "sm_90",
                   .features = "132sm",
                   .toolkit = "nvrtc-13.0,driver-13.0",
                   .device = 1,
                   .max_threads_per_block = 1024,
                   .max_shared_per_block = 232448,
                   .registers_per_block = 65536,
                   .multiprocessors = 132,
                   .l2_bytes = 50 << 20};
  auto g = Target::FromJson(gpu.ToJson());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ToJson(), gpu.ToJson());

  std::string tampered = cpu.ToJson();
  tampered.replace(tampered.find(cpu.device_model), cpu.device_model.size(), "Another CPU");
  auto bad = Target::FromJson(tampered);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key does not match"), std::string::npos) << bad.status();
  EXPECT_TRUE(absl::IsInvalidArgument(Target::FromJson("{\"kind\":\"llvm\"}").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Target::FromJson("[1,2]").status()));
}

codegen::Workload ParseWorkload(codegen::OpKind op, const std::string& shape) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : codegen::Workload();
}

// Shapes whose buffers cannot fit this machine are refused with the bytes and the limit,
// whatever the extents (no overflow to a small or negative byte count).
TEST(BufferLimitTest, RefusesShapesBeyondHalfOfTheMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const Target cpu = Target::HostCpu(1);
  const int64_t memory = 24 * kGiB;
  absl::Status big = CheckBuffersFit({ParseWorkload(codegen::OpKind::kMatmul, "99999999999,4,4")}, cpu, memory);
  EXPECT_TRUE(absl::IsInvalidArgument(big)) << big;
  EXPECT_EQ(big.message(), "matmul 99999999999x4x4 needs 5.8 TiB of buffers; this machine allows 12.0 GiB "
                           "(half of its 24.0 GiB memory)");
  absl::Status conv = CheckBuffersFit({ParseWorkload(codegen::OpKind::kConv2d, "1,100000,56,56,100000,3,3,1,1")},
                                      cpu, memory);
  EXPECT_TRUE(absl::IsInvalidArgument(conv)) << conv;
  EXPECT_THAT(std::string(conv.message()), ::testing::StartsWith("conv2d 1x100000x56x56 k3 s1 oc100000 needs "));
  // Extents near the validation limits are refused; beyond them (an unvalidated workload) the
  // byte count saturates, it never wraps.
  std::mt19937_64 rng(test::kTestSeed);
  for (int i = 0; i < 20; ++i) {
    const int64_t m = int64_t{1} << (36 + rng() % 6), n = 1 + static_cast<int64_t>(rng() % 64);
    codegen::Workload w = ParseWorkload(codegen::OpKind::kBatchMatmul, "1," + std::to_string(m) + "," +
                                                                         std::to_string(n) + ",1");
    BufferBytes b = WorkloadBufferBytes(w, "llvm");
    EXPECT_GE(b.peak_host, 4 * m) << w.Key();
    EXPECT_GE(b.peak_host, b.kept_host) << w.Key();
    EXPECT_FALSE(CheckBuffersFit({w}, cpu, memory).ok()) << w.Key();
  }
  codegen::Workload huge;
  huge.m = huge.n = huge.k = std::numeric_limits<int64_t>::max() / 2 - static_cast<int64_t>(rng() % 1000);
  EXPECT_EQ(WorkloadBufferBytes(huge, "llvm").peak_host, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(WorkloadBufferBytes(huge, "cuda").device, std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(CheckBuffersFit({huge}, cpu, memory).ok());
  // A few small shapes fit; many of them together do not once their kept data exceeds the share.
  codegen::Workload small = ParseWorkload(codegen::OpKind::kMatmul, "1024,1024,1024");
  EXPECT_TRUE(CheckBuffersFit({small, small}, cpu, memory).ok());
  std::vector<codegen::Workload> many(2000, small);
  absl::Status together = CheckBuffersFit(many, cpu, memory);
  EXPECT_THAT(std::string(together.message()), ::testing::StartsWith("the 2000 tasks need ")) << together;
  EXPECT_TRUE(CheckBuffersFit({small}, cpu, /*host_memory=*/0).ok()) << "unknown memory: no host limit";
  EXPECT_GT(HostMemoryBytes(), 0);
}

TEST(BufferLimitTest, CudaBuffersWithinTheDeviceMemoryWhenKnown) {
  Target gpu{.kind = "cuda", .device_model = "NVIDIA H100", .cpu = "sm_90"};
  codegen::Workload w = ParseWorkload(codegen::OpKind::kMatmul, "65536,65536,65536");  // 48 GiB of floats
  EXPECT_TRUE(CheckBuffersFit({w}, gpu, /*host_memory=*/1024 * (int64_t{1} << 30)).ok()) << "device memory unknown";
  gpu.memory_bytes = int64_t{80} << 30;
  absl::Status st = CheckBuffersFit({w}, gpu, /*host_memory=*/1024 * (int64_t{1} << 30));
  EXPECT_EQ(st.message(), "matmul 65536x65536x65536 needs 64.1 GiB of device buffers; NVIDIA H100 allows 60.0 GiB "
                          "(three quarters of its 80.0 GiB memory)");
  auto back = Target::FromJson(gpu.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->memory_bytes, gpu.memory_bytes);
  EXPECT_EQ(back->Key(), gpu.Key());
}

TEST(BufferLimitTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 40), "3.0 TiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "8.0 EiB");
}

}  // namespace
}  // namespace tune::measure
