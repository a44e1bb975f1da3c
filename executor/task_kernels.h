// ChooseTaskKernels: for each tuned workload of a graph, the config its kernel is built from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"
#include "executor/backend.h"
#include "graph/graph.h"

namespace tune::executor {

/// Where one distinct workload's kernel comes from.
struct TaskKernelChoice {
  std::string node;             // the first "tune.Task" node (graph order) with this workload
  codegen::Workload workload;
  int count = 0;                // "tune.Task" nodes with this workload
  int template_version = 0;     // of the backend's template, part of the record key
  std::string config_json;      // the config the kernel is built from (ConfigSpace::ToJson)
  bool tuned = false;           // true: the best ok record; false: the default schedule
  int64_t record_id = 0;        // tuned: the record's id
  double measured_s = 0;        // tuned: the record's median time, seconds
  std::string note;             // why a record was passed over ("" when none was)
};

/// One choice per distinct Workload::Key() of `graph`'s tuned nodes, in order of first
/// appearance: the best ok record of the workload (with the backend template's version) on
/// the backend's target in `db`, else the template's default schedule. `db` null means no
/// records. A record whose config no longer parses is passed over (said in `note`). Errors:
/// a workload the backend has no template or default config for (InvalidArgument), a
/// database error.
absl::StatusOr<std::vector<TaskKernelChoice>> ChooseTaskKernels(const graph::Graph& graph, const Backend& backend,
                                                                const dataset::RecordDatabase* db);

}  // namespace tune::executor
