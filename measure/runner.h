// Builder and Runner: turn (workload, config) into kernels and kernels into MeasureResults.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/ir/kernel.h"
#include "codegen/ir/workload.h"
#include "measure/measure_result.h"

namespace tune::measure {

/// Inputs drawn once per task (uniform in [-1, 1), seeded, never zeros) and the reference
/// output computed from them by the naive kernel in reference.h.
struct TaskData {
  codegen::Workload workload;
  std::vector<std::vector<float>> inputs;  // Workload::Inputs() order
  std::vector<float> reference;            // Workload::Output(); empty without_reference
  /// The reference a runner computed on its device (CudaRunner: the naive kernel, compiled
  /// with NVRTC), kept with the task so its later batches, each measured by a runner of its
  /// own, do not compute it again; empty until then. Written through the runner's const view
  /// (one loop measures a task at a time).
  mutable std::vector<float> device_reference;

  /// `with_reference` false leaves `reference` empty: for runners that compute their own
  /// (CudaRunner, on the GPU) where the naive CPU loop would take minutes.
  static TaskData Create(const codegen::Workload& workload, uint64_t seed, bool with_reference = true);
};

/// The result of building one candidate. When status is not kOk, `kernel` is empty and the
/// runner turns the build into a record with that status without running anything.
struct BuildResult {
  MeasureStatus status = MeasureStatus::kOk;
  std::string message;
  codegen::CompiledKernel kernel;
  double build_s = 0;
};

/// Measures built kernels. Implementations: LocalRunner (this CPU, a child process per candidate) and
/// CudaRunner (a GPU, a forked worker per batch).
class Runner {
 public:
  virtual ~Runner() = default;
  /// One result per build, in order. Never throws or crashes on a bad kernel: a crash,
  /// hang or wrong output becomes that candidate's status.
  virtual std::vector<MeasureResult> Run(const TaskData& task,
                                         const std::vector<BuildResult>& builds) = 0;
};

/// Makes a runner that measures with the given protocol (the default schedule and the search
/// use different protocols).
using RunnerFactory = std::function<std::unique_ptr<Runner>(const MeasureProtocol&)>;

}  // namespace tune::measure
