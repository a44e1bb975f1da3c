// TaskFactory: the registry that makes tuning-loop tasks per target kind (llvm, cuda, replay).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "measure/kernel_measurer.h"
#include "measure/replay_space.h"
#include "measure/target.h"
#include "measure/task.h"

namespace tune::measure {

/// What a task is made from: a workload and the seed of its random inputs (kernel kinds).
/// Replay factories hold their recorded space and ignore it.
struct TaskSpec {
  codegen::Workload workload;
  uint64_t data_seed = 0;
};

struct TaskFactoryOptions {
  /// Kernel kinds: how batches are built and measured, shared by every task of the factory;
  /// null = in this process, with the kind's builder and `runners`.
  std::shared_ptr<KernelMeasurer> measurer;
  /// With `measurer` null: the runners; empty = the kind's own (LocalRunner with
  /// Target::threads kernel threads for "llvm", CudaRunner on Target::device for "cuda").
  RunnerFactory runners;
  /// With `measurer` null: concurrent compilations; 0 = the kind's default (2 LLVM
  /// compilations so timing runs stay quiet; NVRTC on every host core).
  int build_threads = 0;
  /// "replay": the recorded space every task of the factory replays (shared, immutable).
  std::shared_ptr<const ReplaySpace> replay;
  /// Kernel kinds: asked by every task before it measures and while it draws its data and
  /// computes its reference (see KernelTask); true stops them. Null: never.
  std::function<bool()> should_stop;
};

/// Makes the tasks of one target. Registered kinds (Target::kind):
///  "llvm"    kernels for this CPU: the workload's CPU template, HostBuilder (LLVM), LocalRunner,
///            inputs checked against the naive host reference;
///  "cuda"    kernels for an NVIDIA GPU: the CUDA template within the target's limits,
///            CudaBuilder (NVRTC for Target::cpu, the arch), CudaRunner (reference on the GPU);
///  "replay"  a recorded Kernel Tuner space (TaskFactoryOptions::replay): measuring is a look-up.
/// Thread-compatible; Make may be called for many tasks.
class TaskFactory {
 public:
  /// InvalidArgument listing the registered kinds for an unknown Target::kind, or when the
  /// options the kind needs are missing (a replay factory without its space).
  static absl::StatusOr<std::unique_ptr<TaskFactory>> Create(const Target& target, TaskFactoryOptions options = {});
  /// The registered kinds, in registration order.
  static std::vector<std::string> Kinds();
  /// The template of `workload` as the tasks of `target` make it (a CPU's register tiles for
  /// the target's CPU features and threads, a GPU's configs within its limits), without making a
  /// factory and its measurer: what an export for a recorded target needs. InvalidArgument for
  /// an unknown kind; Unimplemented for kinds without templates (replay).
  static absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplateFor(const Target& target,
                                                                            const codegen::Workload& workload);

  virtual ~TaskFactory() = default;
  /// The target the tasks' records are keyed by.
  const Target& target() const { return target_; }
  /// The task of `spec`: a template error (the workload cannot be instantiated on this target,
  /// or its template has no valid default config for the shape: Template::ValidDefaultConfig)
  /// is returned as is, InvalidArgument.
  virtual absl::StatusOr<std::unique_ptr<Task>> Make(const TaskSpec& spec) const = 0;
  /// The template of `workload` on this target, to featurize records of other tasks;
  /// Unimplemented for kinds whose tasks have no template.
  virtual absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const = 0;
  /// The kernel of `config` (ConfigSpace::ToJson text) for `workload` as a person reads it: the
  /// loop nest as pseudo-C on a CPU, the CUDA C on a GPU. InvalidArgument for a config that does
  /// not parse or lower; Unimplemented for kinds without kernels.
  virtual absl::StatusOr<std::string> KernelSource(const codegen::Workload& workload,
                                                   const std::string& config) const = 0;

 protected:
  explicit TaskFactory(Target target) : target_(std::move(target)) {}

 private:
  Target target_;
};

}  // namespace tune::measure
