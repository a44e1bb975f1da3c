// NearestMeasuredTasks: the recorded tasks most like a workload, kept while the tasks table is read row by row.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"

namespace tune::tuner {

/// A recorded task and how far its workload is from the one asked about.
struct NearTask {
  dataset::TaskInfo info;
  codegen::Workload workload;  // parsed from info.workload_key
  double distance = 0;         // WorkloadDistance (tuner/config_transfer.h); +inf: another operator family
};

/// The tasks other than `task_id` that have an ok record on `target_id`, a workload key that
/// parses and that `accept(info, distance)` takes, at most `max_tasks` of them (at least 1): the
/// nearest to `workload` by WorkloadDistance, nearest first, ties to the older task. The tasks
/// table is read a row at a time and only the kept tasks are held (a bounded max-heap).
/// Errors: SQL.
absl::StatusOr<std::vector<NearTask>> NearestTasksByDistance(
    const dataset::RecordDatabase& db, int64_t target_id, int64_t task_id, const codegen::Workload& workload,
    int max_tasks, const std::function<bool(const dataset::TaskInfo&, double distance)>& accept);

/// The tasks other than `task_id` that have an ok record on `target_id` and a workload key that
/// parses, at most `max_tasks` of them (at least 1): the nearest to `workload` by
/// WorkloadDistance, tasks of another operator family (conv2d against matmul/dense, at an
/// infinite distance) after every other, ties to the older task; listed oldest first (by id),
/// the order RecordDatabase::Tasks lists them in. The tasks table is read a row at a time and
/// only the kept tasks are held, so the memory and the work after the scan do not grow with the
/// database. Errors: SQL.
absl::StatusOr<std::vector<NearTask>> NearestMeasuredTasks(const dataset::RecordDatabase& db, int64_t target_id,
                                                           int64_t task_id, const codegen::Workload& workload,
                                                           int max_tasks);

}  // namespace tune::tuner
