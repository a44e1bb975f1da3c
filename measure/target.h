// Target: the device a kernel runs on and the toolchain that built it.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tune::measure {

/// What records are keyed by besides the workload: kernels measured on another device model,
/// with other features, another toolchain or another thread count never mix.
struct Target {
  std::string kind = "llvm";  // "llvm" (host CPU) or "cuda"
  std::string device_model;   // e.g. "AMD EPYC 7B13" from /proc/cpuinfo
  std::string cpu;            // LLVM host CPU name, e.g. "znver3"
  std::string features;       // e.g. "+avx2,+fma"
  std::string toolkit;        // e.g. "llvm-15.0.6"
  int threads = 1;            // worker threads a kernel may use

  /// Stable key, e.g. "llvm|znver3|AMD EPYC 7B13|avx2,fma|llvm-15.0.6|t2".
  std::string Key() const;
  std::string ToJson() const;

  /// The host CPU as seen through LLVM; `threads` as given (>= 1).
  static Target HostCpu(int threads);
  /// Parses "llvm" (host CPU); InvalidArgument for anything else this build cannot measure.
  static absl::StatusOr<Target> Parse(const std::string& text, int threads);
};

}  // namespace tune::measure
