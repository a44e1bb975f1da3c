// AllocateBuffer, the kernel runtime's allocator for operands, packed weights and scratch: large
// blocks on 2 MiB boundaries advised as transparent huge pages, small ones 64-byte aligned.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/runtime/runtime.h"
#include "gtest/gtest.h"

namespace tune::test {
namespace {

namespace rt = codegen::runtime;

/// The VmFlags line of the mapping of /proc/self/smaps holding `p`; empty when not found.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool HugePagesOn() {
  const char* v = std::getenv("TUNE_HUGE_PAGES");
  return v == nullptr || std::string(v) != "0";
}

TEST(RuntimeBuffer, LargeBlocksAre2MiBAlignedAndAdvisedAsHugePages) {
  if (!HugePagesOn()) GTEST_SKIP() << "TUNE_HUGE_PAGES=0";
  for (size_t bytes : {rt::kHugeBlockBytes, size_t{3} << 20, size_t{9437184}}) {
    void* p = rt::AllocateBuffer(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % rt::kHugePageBytes, 0u) << bytes << " bytes";
    std::memset(p, 1, bytes);  // writable to the end
    const std::string flags = VmFlagsOf(p);
    ASSERT_FALSE(flags.empty()) << "no mapping for the block in /proc/self/smaps";
    EXPECT_NE(flags.find(" hg"), std::string::npos) << bytes << " bytes: " << flags;
    std::free(p);
  }
}

TEST(RuntimeBuffer, SmallBlocksAre64ByteAlignedAndNotRoundedToHugePages) {
  void* p = rt::AllocateBuffer(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 1000);
  std::free(p);
}

TEST(RuntimeBuffer, KernelScratchAndPackedWeightsUseIt) {
  if (!HugePagesOn()) GTEST_SKIP() << "TUNE_HUGE_PAGES=0";
  const int64_t big = int64_t{4} << 20;
  void* scratch = tune_rt_alloc(big);
  // A scratch block's size header sits in the 64 bytes before the pointer.
  EXPECT_EQ((reinterpret_cast<uintptr_t>(scratch) - 64) % rt::kHugePageBytes, 0u);
  EXPECT_NE(VmFlagsOf(scratch).find(" hg"), std::string::npos);
  tune_rt_free(scratch);
  static const float weight[4] = {1, 2, 3, 4};
  int fresh = 0;
  void* packed = tune_rt_prepacked("runtime_buffer_test", weight, big, &fresh);
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(packed) % rt::kHugePageBytes, 0u);
  EXPECT_NE(VmFlagsOf(packed).find(" hg"), std::string::npos);
  tune_rt_prepacked_release(packed);
  tune_rt_prepacked_reset();
}

}  // namespace
}  // namespace tune::test
