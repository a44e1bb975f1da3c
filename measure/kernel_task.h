// KernelTask: a workload's template, built and measured on a device, as a tuning-loop task.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "measure/kernel_measurer.h"
#include "measure/reference.h"
#include "measure/runner.h"
#include "measure/task.h"

namespace tune::measure {

/// A Task whose configs are kernels of `tmpl`, `default_config` its untuned baseline (a valid
/// config of its space: Template::ValidDefaultConfig). Measuring goes through `measurer`
/// (shared with the other tasks of its factory); the task's random inputs (TaskData, seeded
/// with `data_seed`, with the naive host reference when `host_reference`) are drawn on the
/// first Measure that needs them, so making a task is cheap. Once `should_stop` (may be null)
/// returns true, Measure returns no results (the "shutting down" of KernelMeasurer::Measure),
/// and drawing the data or computing the reference gives up within milliseconds.
class KernelTask final : public Task {
 public:
  KernelTask(std::unique_ptr<codegen::Template> tmpl, search::Config default_config,
             std::shared_ptr<KernelMeasurer> measurer, uint64_t data_seed, bool host_reference,
             StopFn should_stop = nullptr);

  const TaskKeys& keys() const override { return keys_; }
  const search::ConfigSpace& space() const override { return tmpl_->space(); }
  std::optional<search::Config> DefaultConfig() const override { return default_config_; }
  const codegen::Template* tmpl() const override { return tmpl_.get(); }
  std::vector<MeasureResult> Measure(const std::vector<search::Config>& configs,
                                     const MeasureProtocol& protocol) override;
  void Committed() override { measurer_->Committed(); }

 private:
  std::unique_ptr<codegen::Template> tmpl_;
  search::Config default_config_;
  std::shared_ptr<KernelMeasurer> measurer_;
  uint64_t data_seed_;
  bool host_reference_;
  StopFn should_stop_;
  TaskKeys keys_;
  std::unique_ptr<TaskData> data_;
};

/// TaskData::Create that gives up once `should_stop` (may be null) returns true, asking it
/// about every million random values drawn or multiply-adds of the reference: nullopt then.
std::optional<TaskData> CreateTaskData(const codegen::Workload& workload, uint64_t seed, bool with_reference,
                                       const StopFn& should_stop);

/// The workload's fields as JSON (the tasks table's shape_json).
std::string WorkloadJson(const codegen::Workload& w);

}  // namespace tune::measure
