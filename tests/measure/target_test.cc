// Tests of target parsing: the host CPU, CUDA device names, and errors.
#include "measure/target.h"

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace tune::measure
