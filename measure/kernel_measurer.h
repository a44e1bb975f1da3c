// KernelMeasurer: builds and measures batches of one template's configs, here or elsewhere.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "codegen/ir/template.h"
#include "measure/builder.h"
#include "measure/measure_result.h"
#include "measure/runner.h"
#include "search/space.h"

namespace tune::measure {

/// How a KernelTask measures: in this process (LocalMeasurer) or on worker agents
/// (server::RemoteMeasurer).
class KernelMeasurer {
 public:
  virtual ~KernelMeasurer() = default;
  /// One result per config, in order; a failing kernel is that config's status, never an
  /// error. Fewer results than configs (none) means the batch could not be measured at all
  /// (shutting down). `data` (inputs and reference) is null when NeedsTaskData() is false.
  virtual std::vector<MeasureResult> Measure(const codegen::Template& tmpl, const TaskData* data,
                                             const std::vector<search::Config>& configs,
                                             const MeasureProtocol& protocol) = 0;
  /// False for measurers that create the task's data where they measure.
  virtual bool NeedsTaskData() const { return true; }
  /// Called after the results of the last Measure call are committed to the database.
  virtual void Committed() {}
};

/// Builds with `builder` (each kernel within the protocol's build_timeout_s) and measures with
/// a runner from `runners`, in this process.
class LocalMeasurer final : public KernelMeasurer {
 public:
  LocalMeasurer(std::unique_ptr<Builder> builder, RunnerFactory runners)
      : builder_(std::move(builder)), runners_(std::move(runners)) {}
  std::vector<MeasureResult> Measure(const codegen::Template& tmpl, const TaskData* data,
                                     const std::vector<search::Config>& configs,
                                     const MeasureProtocol& protocol) override {
    return runners_(protocol)->Run(*data, builder_->BuildAll(tmpl, configs, protocol.build_timeout_s));
  }

 private:
  std::unique_ptr<Builder> builder_;
  RunnerFactory runners_;
};

}  // namespace tune::measure
