// CudaRunner: measures CUDA kernels on a GPU from a child process that a bad kernel can kill.
#pragma once

#include <string>
#include <vector>

#include "codegen/runtime/cuda_driver.h"
#include "measure/measure_result.h"
#include "measure/runner.h"

namespace tune::measure {

struct CudaRunnerOptions {
  MeasureProtocol protocol;
  int device = 0;  // CUDA device ordinal
};

/// Measures the CUDA builds of one task (BuildResult::kernel.cuda) on a GPU.
///
/// Isolation: the parent never touches the CUDA driver. Each Run starts a worker
/// ChildProcess (child_process.h: isolated like LocalRunner's children) that opens the
/// device, uploads the task's inputs and measures the builds one after another, streaming a
/// result per build back over the pipe. A sticky CUDA error (illegal address, launch
/// failure, ...) leaves the context unusable: the worker reports runtime_error for that build
/// and exits; a kernel that does not finish within protocol.timeout_s gets its worker
/// SIGKILLed and a timeout record "kernel did not finish within Xs"; a worker that dies
/// without a word or sends garbage gives runtime_error for the build it was on, worded as
/// LocalRunner's ("kernel crashed: SIGSEGV (signal 11: Segmentation fault)", ...). Either way
/// a fresh worker goes on with the next build. A device that cannot be set up gives every
/// remaining build runtime_error with the reason.
///
/// Correctness: the reference output comes from a naive double-accumulating kernel on the
/// same GPU (cuda_reference.h), computed once per task (the first worker sends it back; the
/// parent keeps it for later workers). Each build's output is filled with NaN before its
/// first call, compared with the reference (protocol.rtol / atol) after it, and again after
/// one more call on a NaN-filled output once timing is done. A kernel's scratch arguments
/// (CudaLaunch::scratch) are allocated per build and passed to all its launches.
///
/// Timing: after `warmup` calls, `number` launches per sample (grown from 1 until a sample
/// lasts min_repeat_ms), `repeats` samples timed with CUDA events; with flush_cache a buffer
/// of twice the L2 size is written before each sample, outside the timed region. costs_s
/// holds per-launch seconds per sample. cutoff_s judges the first warm-up launch (see
/// MeasureProtocol::cutoff_s).
class CudaRunner : public Runner {
 public:
  explicit CudaRunner(CudaRunnerOptions options) : options_(std::move(options)) {}

  std::vector<MeasureResult> Run(const TaskData& task, const std::vector<BuildResult>& builds) override;
  /// Runners on GPU `device`, one per protocol.
  static RunnerFactory Factory(int device);

  /// The device's description, read by a short-lived child (the parent stays driver-free);
  /// Unavailable without a driver or device.
  static absl::StatusOr<codegen::CudaDeviceInfo> Probe(int device);

 private:
  CudaRunnerOptions options_;
};

}  // namespace tune::measure
