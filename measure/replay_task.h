// ReplayTask: a tuning-loop task over a recorded space, keeping the trace of what it replayed.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "measure/replay_space.h"
#include "measure/target.h"
#include "measure/task.h"
#include "search/strategy.h"

namespace tune::measure {

/// What one replayed search evaluated, in order.
struct ReplayTrace {
  std::vector<search::MeasuredConfig> evaluations;  // in evaluation order
  std::vector<double> best_ms;                      // best-so-far time after each evaluation (+inf: none ok)
  int failures = 0;                                 // evaluations of recorded failures
  bool exhausted = false;                           // the strategy stopped proposing before the budget

  /// Best time after min(b, evaluations) evaluations; +inf when none was ok (or b <= 0). A run
  /// that exhausted the space keeps its final best for larger b.
  double BestAt(int b) const;
};

/// A Task whose measurements are look-ups in a ReplaySpace (not owned; shared by every run
/// over it, it must outlive the task):
/// a recorded time becomes an ok result with one sample of time_ms / 1000 seconds, a recorded
/// failure a runtime_error (compile_error for compilation failures) with the cache's string.
/// It has no template (cost models featurize knob values) and no default schedule.
class ReplayTask final : public Task {
 public:
  explicit ReplayTask(const ReplaySpace* space);

  const TaskKeys& keys() const override { return keys_; }
  const search::ConfigSpace& space() const override { return space_->space(); }
  std::optional<search::Config> DefaultConfig() const override { return std::nullopt; }
  const codegen::Template* tmpl() const override { return nullptr; }
  /// Configs outside the recorded space become invalid_config results (never traced).
  std::vector<MeasureResult> Measure(const std::vector<search::Config>& configs,
                                     const MeasureProtocol& protocol) override;

  /// Everything measured so far (exhausted is the caller's to set).
  const ReplayTrace& trace() const { return trace_; }

 private:
  const ReplaySpace* space_;
  TaskKeys keys_;
  ReplayTrace trace_;
};

/// The target replayed records are keyed by: kind "replay", the cache's device name.
Target ReplayTarget(const KernelTunerCache& cache);

}  // namespace tune::measure
