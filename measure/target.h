// Target: the device a kernel runs on and the toolchain that built it.
#pragma once

#include <cstdint>
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

  // CUDA targets: `cpu` holds the architecture ("sm_90"), `features` the SM count ("132sm"),
  // `toolkit` NVRTC and driver versions ("nvrtc-13.0,driver-13.0").
  int device = -1;                     // CUDA device ordinal
  int64_t max_threads_per_block = 0;   // the device's limits, for the GPU templates' spaces
  int64_t max_shared_per_block = 0;    // bytes, with the opt-in above 48 KiB
  int64_t registers_per_block = 0;
  int64_t multiprocessors = 0;
  int64_t l2_bytes = 0;

  /// Stable key, e.g. "llvm|znver3|AMD EPYC 7B13|avx2,fma|llvm-15.0.6|t2" or
  /// "cuda|sm_90|NVIDIA H100 80GB HBM3|132sm|nvrtc-13.0,driver-13.0|t1".
  std::string Key() const;
  std::string ToJson() const;
  /// Parses ToJson's output; InvalidArgument when a field is missing or the stored key does
  /// not match the fields.
  static absl::StatusOr<Target> FromJson(const std::string& text);

  /// The host CPU as seen through LLVM; `threads` as given (>= 1).
  static Target HostCpu(int threads);
  // CudaGpu and Parse live in tune_measure (target_parse.cc): they probe the GPU.
  /// CUDA device `ordinal` as its driver describes it (read in a short-lived child process,
  /// so this process never loads the driver); Unavailable without a driver or device.
  static absl::StatusOr<Target> CudaGpu(int ordinal);
  /// Parses "llvm" (host CPU), "cuda" or "cuda:N" (GPU N, default 0); InvalidArgument for
  /// anything else, Unavailable when the GPU cannot be opened.
  static absl::StatusOr<Target> Parse(const std::string& text, int threads);
};

}  // namespace tune::measure
