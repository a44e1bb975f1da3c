// TaskCache: the tasks a worker measured last, kept between batches with their drawn data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "measure/task.h"
#include "measure/task_factory.h"

namespace tune::server {

/// How much a worker keeps. A daemon job keeps batches of several tasks in flight and walks
/// its tasks round by round, so a worker's batches cycle through every task of the job (16
/// for resnet-18); a task that is not kept has its random inputs drawn, and its reference
/// computed (on the GPU: a naive kernel compiled with NVRTC), again for each batch.
struct TaskCacheLimits {
  size_t tasks = 64;                     // tasks kept at most
  int64_t bytes = int64_t{1} << 30;      // their data at most (DataBytes), bytes
};

/// Bytes a task of `workload` holds once its data are drawn: its float32 inputs, its output
/// and its reference output.
int64_t DataBytes(const codegen::Workload& workload);

/// The tasks of a worker, most recently used first; the least recently used go while the
/// kept ones are over a limit (the task in use is always kept, whatever its size). Not
/// thread-safe: a worker measures one batch at a time.
class TaskCache {
 public:
  explicit TaskCache(std::unique_ptr<measure::TaskFactory> factory, TaskCacheLimits limits = {});

  /// The task of `workload_key` with `data_seed`, kept or made now: a key that does not parse,
  /// a workload too big for this host, or one its template cannot instantiate is an error
  /// (and nothing is evicted for it).
  absl::StatusOr<measure::Task*> Get(const std::string& workload_key, uint64_t data_seed);

  const measure::TaskFactory& factory() const { return *factory_; }
  size_t size() const { return kept_.size(); }
  int64_t bytes() const { return bytes_; }
  int64_t made() const { return made_; }  // tasks made so far (a miss each)

 private:
  struct Kept {
    std::string workload_key;
    uint64_t data_seed = 0;
    int64_t bytes = 0;
    std::unique_ptr<measure::Task> task;
  };
  std::unique_ptr<measure::TaskFactory> factory_;
  TaskCacheLimits limits_;
  std::deque<Kept> kept_;  // most recently used first
  int64_t bytes_ = 0;
  int64_t made_ = 0;
};

}  // namespace tune::server
