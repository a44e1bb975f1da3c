// Task schedulers: which task of a multi-task model gets the next batch of measurements.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::search {

/// What a scheduler knows about one task. `best_history[i]` is the best latency (seconds,
/// +inf while none) after the task's i-th batch; `weight` is how often the model runs it.
struct TaskProgress {
  int trials = 0;
  int budget = 0;
  bool done = false;  // budget spent, space exhausted or early-stopped
  double weight = 1;
  double default_s = 0;  // the untuned schedule (+inf if it failed)
  std::vector<double> best_history;
  double best() const;
};

/// Picks the task of the next batch. Deterministic for a seed and the same progress.
class TaskScheduler {
 public:
  virtual ~TaskScheduler() = default;
  /// "round-robin", "gradient" (Ansor's gradient-based allocation) or "ucb" (largest
  /// expected weighted latency reduction plus an uncertainty bonus). InvalidArgument otherwise.
  static absl::StatusOr<std::unique_ptr<TaskScheduler>> Create(const std::string& name, uint64_t seed);
  static std::vector<std::string> Names();
  /// Index of a task that is not done, or -1 when all are done.
  virtual int Next(const std::vector<TaskProgress>& tasks) = 0;
};

}  // namespace tune::search
