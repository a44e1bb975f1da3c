// Backend: where a plan's kernels run: tuned kernels, built-in kernels and memory of one device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "executor/op_kernel.h"
#include "executor/task_kernel.h"
#include "graph/graph.h"
#include "measure/target.h"
#include "search/space.h"

namespace tune::executor {

/// What an ExecutionPlan needs of a device: the templates and loaded kernels of its tuned
/// nodes, the built-in kernels of the others, and memory its kernels can address. The CPU
/// backend ("llvm") is the host: LLVM kernels linked by ORC, the built-in CPU kernels, host
/// memory. A GPU backend implements the same interface with device memory and copies.
/// Const methods are thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  /// The target records are looked up with (its Key() is what `tune MODEL --target ...
  /// --threads T` records under).
  virtual const measure::Target& target() const = 0;

  /// The template of `workload` on this device (its config space and version).
  virtual absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const = 0;
  /// Builds `config`'s kernel of `tmpl` and loads it; InvalidArgument for a config the template
  /// refuses, Internal when compiling or linking fails (with the compiler's message).
  virtual absl::StatusOr<std::unique_ptr<TaskKernel>> LoadTaskKernel(const codegen::Template& tmpl,
                                                                     const search::Config& config) const = 0;
  /// The built-in kernel of a node (see builtin_ops.h for the arguments and errors).
  virtual absl::StatusOr<std::unique_ptr<OpKernel>> CreateOpKernel(const graph::Node& node,
                                                                   const std::vector<const graph::Tensor*>& inputs,
                                                                   const std::vector<const graph::Tensor*>& outputs,
                                                                   int64_t opset) const = 0;

  /// `bytes` of device memory, 64-byte aligned, freed when the last copy of the pointer goes;
  /// ResourceExhausted when it cannot be had.
  virtual absl::StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes) const = 0;
  /// Copies between host memory and memory from Allocate (plain memcpy on the host).
  virtual void CopyToDevice(void* device_dst, const void* host_src, int64_t bytes) const = 0;
  virtual void CopyToHost(void* host_dst, const void* device_src, int64_t bytes) const = 0;

  /// True when kernels address host memory (the CPU backend): the graph's constants are used
  /// where they are; otherwise the plan uploads each constant a kernel reads once.
  virtual bool HostMemory() const { return true; }
  /// Called once after a plan has created all its kernels: compiles what the backend batches
  /// (the GPU backend's built-in kernels, in one program). OK on the host.
  virtual absl::Status Prepare() const { return absl::OkStatus(); }
  /// Waits for the kernels launched so far and returns the first error since the last call (a
  /// failed launch or copy); OK on the host, whose kernels finish before they return.
  virtual absl::Status Synchronize() const { return absl::OkStatus(); }
};

/// The backend of `target` ("llvm": this CPU, its kernels using `threads` threads of the
/// runtime pool, set here for the whole process). InvalidArgument for anything else; "cuda" and
/// "cuda:N": GPU N (executor/cuda_backend.h), Unavailable without a GPU or driver.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& target, int threads);

}  // namespace tune::executor
