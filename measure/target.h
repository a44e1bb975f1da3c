// Target: the device a kernel runs on and the toolchain that built it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/workload.h"

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
  int64_t memory_bytes = 0;            // the device's global memory; 0 = unknown (not in Key)

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
  /// anything else ("cuda:all" included: it names several devices, see PerDeviceTargets),
  /// Unavailable when the GPU cannot be opened.
  static absl::StatusOr<Target> Parse(const std::string& text, int threads);

  /// True for "cuda:all": every GPU of the host, one target per device.
  static bool IsAllGpus(const std::string& text);
  /// The target names `text` stands for on a host with `device_count` CUDA devices, each one a
  /// Parse input: "cuda:all" -> "cuda:0" ... "cuda:<N-1>" (Unavailable when N is 0: no
  /// device); any other text -> itself, unchecked (Parse checks it). Pure: touches no device.
  static absl::StatusOr<std::vector<std::string>> PerDeviceTargets(const std::string& text, int device_count);
  /// The number of CUDA devices on this host, counted in a short-lived child process (this
  /// process never loads the driver); Unavailable without NVRTC, a driver or a device.
  static absl::StatusOr<int> CudaDeviceCount();
};

/// The bytes of buffers a task of one workload holds, at their peak, while it is tuned: its
/// inputs, output and reference, the copies a measurement makes (the child's inputs and
/// output) and the largest scratch copy a template may add (a packed weight, a padded input);
/// computed without overflow (saturating at INT64_MAX).
struct BufferBytes {
  int64_t kept_host = 0;    // held in the tuning process from the first measurement on
  int64_t peak_host = 0;    // kept_host plus what one measurement adds on the host
  int64_t device = 0;       // on the GPU while the task is measured ("cuda" only; else 0)
};
BufferBytes WorkloadBufferBytes(const codegen::Workload& workload, const std::string& kind);

/// This machine's physical memory (sysconf), bytes; 0 when unknown.
int64_t HostMemoryBytes();

/// OK when the tasks of `workloads` fit `target`: every one's peak plus what the others keep
/// within half of `host_memory` (this machine's physical memory; 0 = unknown: no host limit),
/// and, for "cuda" with Target::memory_bytes known, each one's device buffers within three
/// quarters of the device's memory. Otherwise InvalidArgument as one line naming the workload,
/// the bytes it needs and the limit, e.g. "matmul 99999999999x4x4 needs 3.5 TiB of buffers;
/// this machine allows 11.7 GiB (half of its 23.4 GiB memory)". Checked before anything is
/// written (`tune MODEL`, `tune op` and the daemon's submit).
absl::Status CheckBuffersFit(const std::vector<codegen::Workload>& workloads, const Target& target,
                             int64_t host_memory = HostMemoryBytes());

/// Bytes as people read them: "512 B", "3.0 KiB", "11.7 GiB", "3.5 TiB".
std::string FormatBytes(int64_t bytes);

}  // namespace tune::measure
