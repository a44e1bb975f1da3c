// Tests of the CUDA driver wrapper: without a driver (CI) and, where a device opens, on the GPU.
#include "codegen/runtime/cuda_driver.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/nvrtc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/codegen_cuda_kernels.h"
#include "tests/common/cuda_test_device.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Writes 2^30 floats (4 GiB) past the end of its buffer: an address nothing is mapped at.
constexpr const char* kOutOfBounds = R"(
extern "C" __global__ void out_of_bounds(float* x, int n) {
  size_t far = static_cast<size_t>(n) + (static_cast<size_t>(1) << 30);
  x[far + threadIdx.x] = 1.0f;
}
)";

/// Random non-zero floats in ±[0.5, 2): a kernel that ignores an input cannot pass by luck.
std::vector<float> RandomNonZero(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(0.5f, 2.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (float& f : v) f = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Everywhere (CI has no GPU and no driver).

TEST(CudaDriverTest, OpenWithoutDeviceIsUnavailableWithAClearMessage) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (count.ok() && *count > 0) GTEST_SKIP() << "a CUDA device is present";
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
  EXPECT_THAT(device.status().message(), HasSubstr("CUDA"));
  if (!count.ok()) {
    EXPECT_EQ(count.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(count.status(), device.status());  // the same reason, found once per process
  }
  // Asking again gives the same answer (the driver is looked up once) and does not crash.
  EXPECT_EQ(CudaDevice::Open(0).status(), device.status());
}

TEST(CudaDriverTest, NoDriverMessageNamesTheLibrary) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (count.ok()) GTEST_SKIP() << "a CUDA driver is present (" << *count << " devices)";
  EXPECT_THAT(count.status().message(), HasSubstr("libcuda.so.1"));
}

TEST(CudaDriverTest, PlainStatusesAreNotCudaErrors) {
  EXPECT_FALSE(IsStickyCudaError(absl::OkStatus()));
  EXPECT_FALSE(IsStickyCudaError(absl::InternalError("an illegal memory access was encountered")));
  EXPECT_EQ(CudaResultOf(absl::InternalError("CUDA_ERROR_ILLEGAL_ADDRESS")), 0);
}

TEST(CudaDriverTest, KernelArgsHoldCopiesInOrder) {
  KernelArgs args;
  int n = 7;
  args.Add(n).Add(2.5f).Add(uint64_t{0x1234567890});
  n = 0;  // the copy is unaffected
  ASSERT_EQ(args.pointers().size(), 3u);
  EXPECT_EQ(*static_cast<const int*>(args.pointers()[0]), 7);
  EXPECT_EQ(*static_cast<const float*>(args.pointers()[1]), 2.5f);
  EXPECT_EQ(*static_cast<const uint64_t*>(args.pointers()[2]), uint64_t{0x1234567890});
}

TEST(CudaDriverTest, ArchNamesTheComputeCapability) {
  CudaDeviceInfo info;
  info.cc_major = 9;
  info.cc_minor = 0;
  EXPECT_EQ(info.Arch(), "sm_90");
  info.cc_major = 12;
  info.cc_minor = 1;
  EXPECT_EQ(info.Arch(), "sm_121");
}

// ---------------------------------------------------------------------------------------------
// On a GPU: skipped where no device opens.

class GpuDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = test::OpenTestGpu();
    if (!device.ok()) GTEST_SKIP() << device.status().message();
    device_ = std::move(*device);
    std::random_device seed_source;
    seed_ = seed_source();
    rng_.seed(seed_);
  }

  /// Compiles `source` for this device and loads it; fails the test on error.
  std::unique_ptr<CudaModule> Load(const std::string& source) {
    absl::StatusOr<CompiledCuda> compiled = CompileCuda(source, device_->info().Arch());
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return nullptr;
    absl::StatusOr<CudaModule> module = device_->LoadModule(compiled->cubin);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    return std::make_unique<CudaModule>(std::move(*module));
  }

  std::unique_ptr<CudaDevice> device_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(GpuDriverTest, DeviceInfoIsPlausible) {
  const CudaDeviceInfo& info = device_->info();
  std::printf("device 0: %s, %s, %d SMs, %.1f GiB, driver %d, L2 %lld KiB, smem/block %lld (opt-in %lld)\n",
              info.name.c_str(), info.Arch().c_str(), info.sm_count, info.total_memory / 1073741824.0,
              info.driver_version, static_cast<long long>(info.l2_bytes / 1024),
              static_cast<long long>(info.max_shared_per_block),
              static_cast<long long>(info.max_shared_per_block_optin));
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.ordinal, 0);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.cc_major, 7);  // CUDA 13 supports sm_75 and newer
  EXPECT_THAT(info.Arch(), StartsWith("sm_"));
  EXPECT_GE(info.driver_version, 12000);
  EXPECT_GT(info.total_memory, int64_t{1} << 30);
  EXPECT_EQ(info.max_threads_per_block, 1024);
  EXPECT_EQ(info.max_block_dim[0], 1024);
  EXPECT_EQ(info.max_shared_per_block, 48 * 1024);
  EXPECT_GE(info.max_shared_per_block_optin, info.max_shared_per_block);
  EXPECT_GE(info.max_shared_per_sm, info.max_shared_per_block_optin);
  EXPECT_GT(info.regs_per_block, 0);
  EXPECT_GT(info.regs_per_sm, 0);
  EXPECT_EQ(info.warp_size, 32);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.clock_khz, 0);
  absl::StatusOr<int> count = CudaDeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_GE(*count, 1);
}

TEST_F(GpuDriverTest, SaxpyOnRandomDataMatchesTheHost) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  std::unique_ptr<CudaModule> module = Load(test::kSaxpy);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<CudaFunction> saxpy = module->GetFunction("saxpy");
  ASSERT_TRUE(saxpy.ok()) << saxpy.status();
  EXPECT_GT(saxpy->attributes().registers, 0);
  EXPECT_EQ(saxpy->attributes().static_shared_bytes, 0);
  if (saxpy->attributes().param_count >= 0) EXPECT_EQ(saxpy->attributes().param_count, 5);

  const int n = (1 << 20) + 37;  // not a multiple of the block: the guard matters
  const float a = RandomNonZero(1, rng_)[0];
  std::vector<float> x = RandomNonZero(n, rng_), y = RandomNonZero(n, rng_);
  const int64_t bytes = int64_t{n} * 4;
  absl::StatusOr<DeviceBuffer> dx = device_->Alloc(bytes), dy = device_->Alloc(bytes),
                               dout = device_->Alloc(bytes);
  ASSERT_TRUE(dx.ok() && dy.ok() && dout.ok()) << dx.status() << dy.status() << dout.status();
  ASSERT_TRUE(dx->CopyFromHost(x.data()).ok());
  ASSERT_TRUE(dy->CopyFromHost(y.data()).ok());
  ASSERT_TRUE(dout->Fill32(0x7fc00000u).ok());  // NaN: an element the kernel skips shows

  KernelArgs args;
  args.Add(n).Add(a).Add(*dx).Add(*dy).Add(*dout);
  const Dim3 block{256};
  const Dim3 grid{static_cast<uint32_t>((n + 255) / 256)};
  ASSERT_TRUE(device_->Launch(*saxpy, grid, block, 0, args.pointers()).ok());
  absl::Status synced = device_->Synchronize();
  ASSERT_TRUE(synced.ok()) << synced;

  std::vector<float> out(n);
  ASSERT_TRUE(dout->CopyToHost(out.data()).ok());
  int wrong = 0;
  for (int i = 0; i < n && wrong < 10; ++i) {
    const float want = a * x[i] + y[i];  // the device may fuse: allow a few ulps
    if (!(std::fabs(out[i] - want) <= 1e-6f * (std::fabs(a * x[i]) + std::fabs(y[i])) + 1e-7f)) {
      ADD_FAILURE() << "out[" << i << "] = " << out[i] << ", want " << want;
      ++wrong;
    }
  }
  // A copy of more than the buffer holds is refused before the driver sees it.
  EXPECT_EQ(dout->CopyToHost(out.data(), bytes + 4).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuDriverTest, SharedMemoryKernelWithDynamicSharedAbove48KB) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  std::unique_ptr<CudaModule> module = Load(test::kSharedFloat4);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<CudaFunction> f = module->GetFunction("reverse_tiles");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->attributes().static_shared_bytes, 4096);

  const int blocks = 64, n4 = blocks * 256;
  std::vector<float> in = RandomNonZero(size_t{4} * n4, rng_);
  absl::StatusOr<DeviceBuffer> din = device_->Alloc(int64_t{16} * n4),
                               dout = device_->Alloc(int64_t{16} * n4);
  ASSERT_TRUE(din.ok() && dout.ok());
  ASSERT_TRUE(din->CopyFromHost(in.data()).ok());
  ASSERT_TRUE(dout->Fill32(0x7fc00000u).ok());
  KernelArgs args;
  args.Add(*din).Add(*dout);
  // 64 KB of dynamic shared memory: more than the 48 KB a kernel gets without opting in.
  const int64_t dynamic = 64 * 1024;
  ASSERT_LE(4096 + dynamic, device_->info().max_shared_per_block_optin);
  absl::Status launched = device_->Launch(*f, Dim3{blocks}, Dim3{256}, dynamic, args.pointers());
  ASSERT_TRUE(launched.ok()) << launched;
  ASSERT_TRUE(device_->Synchronize().ok());

  std::vector<float> out(size_t{4} * n4);
  ASSERT_TRUE(dout->CopyToHost(out.data()).ok());
  int wrong = 0;
  for (int b = 0; b < blocks && wrong < 10; ++b) {
    for (int t = 0; t < 256 && wrong < 10; ++t) {
      const float* v = &in[4 * (b * 256 + 255 - t)];  // tile[255 - t]
      const float* m = &in[4 * (b * 256 + t)];        // dyn[255 - t] holds tile[t].x
      const float want[4] = {v[3], v[2], v[1], v[0] + m[0]};
      for (int c = 0; c < 4; ++c) {
        if (out[4 * (b * 256 + t) + c] != want[c]) {
          ADD_FAILURE() << "block " << b << " thread " << t << " lane " << c << ": "
                        << out[4 * (b * 256 + t) + c] << ", want " << want[c];
          ++wrong;
        }
      }
    }
  }
}

TEST_F(GpuDriverTest, LaunchLimitsAreCheckedBeforeLaunching) {
  std::unique_ptr<CudaModule> module = Load(test::kSaxpy);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<CudaFunction> saxpy = module->GetFunction("saxpy");
  ASSERT_TRUE(saxpy.ok()) << saxpy.status();
  absl::StatusOr<DeviceBuffer> buf = device_->Alloc(4096);
  ASSERT_TRUE(buf.ok());
  KernelArgs args;
  args.Add(1024).Add(1.0f).Add(*buf).Add(*buf).Add(*buf);

  absl::Status st = device_->Launch(*saxpy, Dim3{1}, Dim3{2048}, 0, args.pointers());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("block dimension x"));
  st = device_->Launch(*saxpy, Dim3{1}, Dim3{64, 32}, 0, args.pointers());  // 2048 threads
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("2048 threads per block"));
  EXPECT_EQ(CudaResultOf(st), 0);  // refused here, not by the driver
  st = device_->Launch(*saxpy, Dim3{0}, Dim3{256}, 0, args.pointers());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  st = device_->Launch(*saxpy, Dim3{1}, Dim3{256}, device_->info().max_shared_per_block_optin + 1,
                       args.pointers());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("shared memory"));
  if (saxpy->attributes().param_count >= 0) {
    std::vector<void*> too_few(args.pointers().begin(), args.pointers().begin() + 4);
    st = device_->Launch(*saxpy, Dim3{1}, Dim3{256}, 0, too_few);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("4 arguments for 5 parameters"));
  }
  absl::StatusOr<double> timed = device_->TimeLaunches(*saxpy, Dim3{1}, Dim3{2048}, 0, args.pointers(), 3);
  EXPECT_EQ(timed.status().code(), absl::StatusCode::kInvalidArgument);

  // Nothing was launched, so the context is healthy and a good launch still runs.
  EXPECT_TRUE(device_->Synchronize().ok());
  EXPECT_TRUE(device_->Launch(*saxpy, Dim3{4}, Dim3{256}, 0, args.pointers()).ok());
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(GpuDriverTest, TimeLaunchesGivesPositiveMilliseconds) {
  std::unique_ptr<CudaModule> module = Load(test::kSaxpy);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<CudaFunction> saxpy = module->GetFunction("saxpy");
  ASSERT_TRUE(saxpy.ok());
  const int n = 1 << 24;
  absl::StatusOr<DeviceBuffer> x = device_->Alloc(int64_t{4} * n), y = device_->Alloc(int64_t{4} * n),
                               out = device_->Alloc(int64_t{4} * n);
  ASSERT_TRUE(x.ok() && y.ok() && out.ok());
  ASSERT_TRUE(x->Fill32(0x3f800000u).ok());  // 1.0f
  ASSERT_TRUE(y->Fill32(0x40000000u).ok());  // 2.0f
  KernelArgs args;
  args.Add(n).Add(3.0f).Add(*x).Add(*y).Add(*out);
  absl::StatusOr<double> ms =
      device_->TimeLaunches(*saxpy, Dim3{static_cast<uint32_t>(n / 256)}, Dim3{256}, 0, args.pointers(), 10);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GT(*ms, 0.0);
  EXPECT_LT(*ms, 100.0);  // 192 MiB of traffic: well under a millisecond on a datacenter GPU
  std::printf("saxpy n=2^24: %.4f ms per launch (%.0f GB/s)\n", *ms, 12.0 * n / (*ms * 1e6));
  float probe = 0;
  ASSERT_TRUE(out->CopyToHost(&probe, 4).ok());
  EXPECT_EQ(probe, 5.0f);
}

TEST_F(GpuDriverTest, CubinForAnotherArchIsRejectedAtLoad) {
  const CudaDeviceInfo& info = device_->info();
  const std::string other = info.cc_major == 9 ? "sm_100" : "sm_90";
  absl::StatusOr<CompiledCuda> compiled = CompileCuda(test::kSaxpy, other);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<CudaModule> module = device_->LoadModule(compiled->cubin);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument) << module.status();
  EXPECT_THAT(module.status().message(), HasSubstr("cuModuleLoadData"));
  EXPECT_FALSE(IsStickyCudaError(module.status()));
  EXPECT_TRUE(device_->Synchronize().ok());
}

TEST_F(GpuDriverTest, MissingKernelIsNotFound) {
  std::unique_ptr<CudaModule> module = Load(test::kSaxpy);
  ASSERT_NE(module, nullptr);
  absl::StatusOr<CudaFunction> f = module->GetFunction("no_such_kernel");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound) << f.status();
  EXPECT_THAT(f.status().message(), HasSubstr("no_such_kernel"));
}

TEST_F(GpuDriverTest, BuffersKeepTheContextAliveAfterTheDevice) {
  absl::StatusOr<DeviceBuffer> buf = device_->Alloc(1024);
  ASSERT_TRUE(buf.ok());
  device_.reset();
  ASSERT_TRUE(buf->Fill32(0xdeadbeefu).ok());
  uint32_t word = 0;
  ASSERT_TRUE(buf->CopyToHost(&word, 4).ok());
  EXPECT_EQ(word, 0xdeadbeefu);
}

// A fault poisons the process's context for good, so it runs in a child process of its own
// (a death test in the "threadsafe" style: the child re-executes this binary, so the parent's
// CUDA state is never forked). The child exits 0 iff every expectation held.
void FaultAndExit() {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "FAILED: %s\n", why.c_str());
    std::_Exit(1);
  };
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
  if (!device.ok()) fail(absl::StrCat("open: ", device.status().ToString()));
  absl::StatusOr<CompiledCuda> compiled = CompileCuda(kOutOfBounds, (*device)->info().Arch());
  if (!compiled.ok()) fail(absl::StrCat("compile: ", compiled.status().ToString()));
  absl::StatusOr<CudaModule> module = (*device)->LoadModule(compiled->cubin);
  if (!module.ok()) fail(absl::StrCat("load: ", module.status().ToString()));
  absl::StatusOr<CudaFunction> f = module->GetFunction("out_of_bounds");
  if (!f.ok()) fail(absl::StrCat("function: ", f.status().ToString()));
  absl::StatusOr<DeviceBuffer> buf = (*device)->Alloc(4096);
  if (!buf.ok()) fail(absl::StrCat("alloc: ", buf.status().ToString()));
  KernelArgs args;
  args.Add(*buf).Add(1024);
  absl::Status launched = (*device)->Launch(*f, Dim3{1}, Dim3{32}, 0, args.pointers());
  absl::Status synced = launched.ok() ? (*device)->Synchronize() : launched;
  std::fprintf(stderr, "fault: %s\n", synced.ToString().c_str());
  if (synced.ok()) fail("the out-of-bounds write was not reported");
  if (!IsStickyCudaError(synced)) fail("the fault is not classified as sticky");
  // Sticky: every later call fails too, and says so.
  absl::Status again = (*device)->Synchronize();
  std::fprintf(stderr, "after: %s\n", again.ToString().c_str());
  if (!IsStickyCudaError(again)) fail("a later call does not report the sticky error");
  std::fprintf(stderr, "sticky error reported as expected\n");
  std::_Exit(0);
}

TEST(GpuDriverFaultTest, OutOfBoundsWriteIsAStickyError) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok() || *count == 0) {
    GTEST_SKIP() << "no CUDA device: " << (count.ok() ? absl::UnavailableError("0 devices") : count.status());
  }
  if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FaultAndExit(), ::testing::ExitedWithCode(0), "sticky error reported as expected");
}

}  // namespace
}  // namespace tune::codegen
