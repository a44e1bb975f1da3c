// NearestTasksByDistance / NearestMeasuredTasks: a bounded max-heap of the nearest tasks over one pass of the tasks table.
#include "tuner/nearest_tasks.h"

#include <algorithm>

#include "tuner/config_transfer.h"

namespace tune::tuner {

absl::StatusOr<std::vector<NearTask>> NearestTasksByDistance(
    const dataset::RecordDatabase& db, int64_t target_id, int64_t task_id, const codegen::Workload& workload,
    int max_tasks, const std::function<bool(const dataset::TaskInfo&, double distance)>& accept) {
  // +inf == +inf, so tasks of another operator family tie among themselves and go by id.
  const auto nearer = [](const NearTask& x, const NearTask& y) {
    return x.distance < y.distance || (x.distance == y.distance && x.info.id < y.info.id);
  };
  const size_t kept = static_cast<size_t>(std::max(max_tasks, 1));
  std::vector<NearTask> near;  // a max-heap under `nearer`: the farthest kept on top
  absl::Status scanned = db.ForEachTaskMeasuredOn(target_id, [&](const dataset::TaskInfo& info) {
    if (info.id == task_id) return;
    absl::StatusOr<codegen::Workload> w = codegen::Workload::FromKey(info.workload_key);
    if (!w.ok()) return;
    const double d = WorkloadDistance(workload, *w);
    if (!accept(info, d)) return;
    if (near.size() == kept) {
      const NearTask& farthest = near.front();
      if (!(d < farthest.distance || (d == farthest.distance && info.id < farthest.info.id))) return;
      std::pop_heap(near.begin(), near.end(), nearer);
      near.pop_back();
    }
    near.push_back({info, *std::move(w), d});
    std::push_heap(near.begin(), near.end(), nearer);
  });
  if (!scanned.ok()) return scanned;
  std::sort_heap(near.begin(), near.end(), nearer);
  return near;
}

absl::StatusOr<std::vector<NearTask>> NearestMeasuredTasks(const dataset::RecordDatabase& db, int64_t target_id,
                                                           int64_t task_id, const codegen::Workload& workload,
                                                           int max_tasks) {
  auto near = NearestTasksByDistance(db, target_id, task_id, workload, max_tasks,
                                     [](const dataset::TaskInfo&, double) { return true; });
  if (!near.ok()) return near.status();
  std::sort(near->begin(), near->end(), [](const NearTask& x, const NearTask& y) { return x.info.id < y.info.id; });
  return near;
}

}  // namespace tune::tuner
