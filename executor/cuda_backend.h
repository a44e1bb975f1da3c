// The CUDA backend of `tune run --target cuda[:N]`: tuned kernels and built-in kernels on one GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/backend.h"

namespace tune::executor {

struct CudaBackendState;  // the device, its lock, the first error, the built-in kernels (cuda_backend.cc)

/// A Backend on CUDA device `ordinal`: target() is the device's CUDA Target (the key `tune MODEL
/// --target cuda:N` records under); templates are the CUDA templates within the device's
/// limits; tuned kernels are the config's CUDA C compiled by NVRTC for the device's arch and
/// loaded as a module, each with its scratch buffers allocated once (zero_init ones zeroed);
/// built-in kernels come from cuda_ops.h, all of a plan's compiled in one NVRTC program (on
/// CompileOpKernels, or on the first Run of one of them), cached by the program's text; memory
/// is device memory (cuMemAlloc, 256-byte aligned); copies are synchronous. Every pointer a
/// kernel of this backend is given must be device memory (from Allocate).
///
/// Kernels launch on the device's default stream and return without waiting. OpKernel::Run
/// and TaskKernel::Run cannot return an error: a failed launch (or compile) is kept as the
/// backend's error, which Synchronize returns. Const methods are thread-safe (one lock guards
/// the device); the kernels it makes share its device and may outlive it.
class CudaBackend final : public Backend {
 public:
  /// Opens device `ordinal` (0 for "cuda"). Unavailable without a driver, a device or NVRTC;
  /// NotFound when `ordinal` is not a device.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(int ordinal);
  ~CudaBackend() override;

  const measure::Target& target() const override;
  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const override;
  /// Internal with NVRTC's log for a compile error; Internal when the driver rejects the module
  /// or the scratch memory cannot be had.
  absl::StatusOr<std::unique_ptr<TaskKernel>> LoadTaskKernel(const codegen::Template& tmpl,
                                                             const search::Config& config) const override;
  /// The node's kernel source is made (and checked) now; it is compiled with every other
  /// built-in kernel made since the last compile by CompileOpKernels or the first Run.
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateOpKernel(const graph::Node& node,
                                                           const std::vector<const graph::Tensor*>& inputs,
                                                           const std::vector<const graph::Tensor*>& outputs,
                                                           int64_t opset) const override;
  /// Device memory (at least 256 bytes, 256-byte aligned), freed by the pointer's deleter.
  absl::StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes) const override;
  /// Synchronous: they wait for the kernels launched before them. A failure is kept as the
  /// backend's error (see Synchronize).
  void CopyToDevice(void* device_dst, const void* host_src, int64_t bytes) const override;
  void CopyToHost(void* host_dst, const void* device_src, int64_t bytes) const override;

  /// Compiles every built-in kernel made since the last compile in one NVRTC program and loads
  /// it (a program compiled before is loaded from the cache). Errors of NVRTC or the driver;
  /// OK when there is nothing to compile.
  absl::Status CompileOpKernels() const;
  bool HostMemory() const override { return false; }
  absl::Status Prepare() const override { return CompileOpKernels(); }
  /// Waits for every kernel launched so far; returns the first error since the last call (a
  /// failed launch, copy or compile, or a fault the device reports now) and forgets it.
  absl::Status Synchronize() const override;

 private:
  CudaBackend(measure::Target target, std::shared_ptr<CudaBackendState> state);
  measure::Target target_;
  std::shared_ptr<CudaBackendState> state_;
};

/// The ordinal of "cuda" (0) or "cuda:N"; InvalidArgument for anything else.
absl::StatusOr<int> CudaOrdinal(const std::string& target);

}  // namespace tune::executor
