// RemoteMeasurer: a measure::KernelMeasurer whose batches are leased to worker agents.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/lease_queue.h"
#include "measure/kernel_measurer.h"

namespace tune::server {

/// Each Measure call splits its configs into SplitParts(live workers of `target_key`, calls in
/// flight, configs) batches, queues them and blocks until workers return every batch's results
/// (each requeued as often as workers are lost): one task's round alone is measured by all
/// matching workers at once, while several tasks' rounds in flight each go whole to a worker
/// (fewer, larger leases: each lease costs a worker a measuring process and a device context,
/// and a round split four ways waits for the slowest of four builds). Committed() tells the worker's stream the
/// results are in the database, so the worker is acknowledged only then. `aborted` is polled
/// while waiting: when it returns true (daemon shutting down, job cancelled) the job's batches
/// are dropped (leased ones revoked) and Measure returns no results. A batch whose workers kept
/// dying comes back with the queue's failed results (LeaseQueue's max_losses).
///
/// Thread-safe: a job's tuner may have batches of several tasks in flight at once
/// (tuner::TuneOptions::parallel_tasks), each measured and committed on a thread of its own;
/// Committed() acknowledges the batches of the last Measure call of the calling thread.
class RemoteMeasurer final : public measure::KernelMeasurer {
 public:
  RemoteMeasurer(LeaseQueue* queue, uint64_t job_id, std::string target_key, uint64_t data_seed,
                 std::function<int()> workers, std::function<bool()> aborted);

  std::vector<measure::MeasureResult> Measure(const codegen::Template& tmpl, const measure::TaskData* data,
                                              const std::vector<search::Config>& configs,
                                              const measure::MeasureProtocol& protocol) override;
  bool NeedsTaskData() const override { return false; }
  void Committed() override;

  /// How many batches a round of `configs` configs is split into when `workers` workers serve
  /// the target and `in_flight` Measure calls (this one included) are under way: the workers
  /// shared out among the calls, ceil(workers / in_flight), at least 1, at most `configs`.
  static size_t SplitParts(int workers, int in_flight, size_t configs);

 private:
  LeaseQueue* queue_;
  uint64_t job_id_;
  std::string target_key_;
  uint64_t data_seed_;
  std::function<int()> workers_;
  std::function<bool()> aborted_;
  /// The calling thread's batches of last_batches_, removed from it.
  std::vector<uint64_t> TakeLast();

  std::atomic<int> in_flight_{0};  // Measure calls under way
  std::mutex mu_;
  /// Batches whose results a thread has taken, not yet committed, by the thread that measures
  /// them (guarded by mu_).
  std::map<std::thread::id, std::vector<uint64_t>> last_batches_;
};

/// A worker's result as the record database's MeasureResult (an unknown status becomes
/// runtime_error with a message saying so).
measure::MeasureResult ToMeasureResult(const BatchResult& r);

}  // namespace tune::server
