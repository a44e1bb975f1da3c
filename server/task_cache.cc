// TaskCache: least recently used tasks go first, by count and by the bytes of their data.
#include "server/task_cache.h"

#include <utility>

#include "codegen/ir/workload.h"
#include "measure/target.h"

namespace tune::server {

int64_t DataBytes(const codegen::Workload& workload) {
  int64_t elements = 2 * workload.Output().NumElements();
  for (const codegen::TensorSpec& in : workload.Inputs()) elements += in.NumElements();
  return elements * static_cast<int64_t>(sizeof(float));
}

TaskCache::TaskCache(std::unique_ptr<measure::TaskFactory> factory, TaskCacheLimits limits)
    : factory_(std::move(factory)), limits_(limits) {}

absl::StatusOr<measure::Task*> TaskCache::Get(const std::string& workload_key, uint64_t data_seed) {
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->workload_key != workload_key || it->data_seed != data_seed) continue;
    if (it != kept_.begin()) {
      Kept hit = std::move(*it);
      kept_.erase(it);
      kept_.push_front(std::move(hit));
    }
    return kept_.front().task.get();
  }
  auto workload = codegen::Workload::FromKey(workload_key);
  if (!workload.ok()) return workload.status();
  // A daemon may send a workload too big for this host (its check used its own memory, or
  // none): refused here, before its buffers are drawn.
  if (absl::Status fits = measure::CheckBuffersFit({*workload}, factory_->target()); !fits.ok()) return fits;
  auto made = factory_->Make({*workload, data_seed});
  if (!made.ok()) return made.status();
  ++made_;
  // Room before the new task draws its data (on its first measurement), so the kept tasks'
  // data and its own stay within the limits.
  const int64_t bytes = DataBytes(*workload);
  while (!kept_.empty() && (kept_.size() + 1 > limits_.tasks || bytes_ + bytes > limits_.bytes)) {
    bytes_ -= kept_.back().bytes;
    kept_.pop_back();
  }
  bytes_ += bytes;
  kept_.push_front({workload_key, data_seed, bytes, std::move(*made)});
  return kept_.front().task.get();
}

}  // namespace tune::server
