// Task: what the tuning loop needs of one tuning task: its space, record keys and a way to measure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "measure/measure_result.h"
#include "search/space.h"

namespace tune::codegen {
class Template;
}

namespace tune::measure {

/// The keys a task's records are stored under (dataset::TaskInfo without the id).
struct TaskKeys {
  std::string workload_key;  // stable key of what is tuned (codegen::Workload::Key(), or a recorded space's)
  std::string op;            // operator name ("conv2d", ...; "replay" for recorded spaces)
  std::string shape_json;    // the workload's fields as JSON
  double flops = 0;          // floating-point operations per call (0 when unknown)
  int template_version = 1;  // records of another version are not comparable
};

/// One tuning task as the tuning loop sees it. Implementations: KernelTask (a workload's
/// template, built and measured on a device, kernel_task.h) and ReplayTask (a recorded space
/// where measuring is a look-up, replay_task.h); TaskFactory makes them per target kind.
/// Not thread-safe: one loop drives one task.
class Task {
 public:
  virtual ~Task() = default;

  virtual const TaskKeys& keys() const = 0;
  /// The configuration space searched; valid for the task's lifetime.
  virtual const search::ConfigSpace& space() const = 0;
  /// The untuned default schedule, measured once as the baseline a speed-up is given
  /// against; nullopt when the task has none (a recorded space).
  virtual std::optional<search::Config> DefaultConfig() const = 0;
  /// The template whose loop ASTs featurize configs for cost models (costmodel/); null when
  /// configs have only their knob values (a recorded space). Valid for the task's lifetime.
  virtual const codegen::Template* tmpl() const = 0;
  /// Measures `configs` with `protocol`: one result per config, in order; a failing kernel is
  /// that config's status, never an error. Fewer results than configs (none) means the batch
  /// could not be measured at all (shutting down): the loop stops and records nothing of it.
  virtual std::vector<MeasureResult> Measure(const std::vector<search::Config>& configs,
                                             const MeasureProtocol& protocol) = 0;
  /// Called once the results of the last Measure call are committed to the record database.
  virtual void Committed() {}
};

}  // namespace tune::measure
