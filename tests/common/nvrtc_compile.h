// Test helper: compiles generated CUDA sources with NVRTC for sm_90 on two threads and checks
// each one yields a cubin that uses registers.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "gtest/gtest.h"

namespace tune::test {

/// One kernel to compile: `what` names it in failures.
struct CudaSource {
  std::string what, source;
};

inline void ExpectAllCompileForSm90(const std::vector<CudaSource>& jobs) {
  std::vector<std::string> failures(jobs.size());
  std::vector<int> registers(jobs.size(), -1);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      absl::StatusOr<codegen::CompiledCuda> c = codegen::CompileCuda(jobs[i].source, "sm_90");
      if (!c.ok()) {
        failures[i] = jobs[i].what + ": " + c.status().ToString();
        continue;
      }
      if (c->cubin.compare(0, 4, "\x7f" "ELF") != 0) failures[i] = jobs[i].what + ": not a cubin";
      registers[i] = c->resources.registers;
    }
  };
  std::thread helper(work);
  work();
  helper.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(failures[i], "") << jobs[i].source;
    EXPECT_GT(registers[i], 0) << jobs[i].what;
  }
}

}  // namespace tune::test
