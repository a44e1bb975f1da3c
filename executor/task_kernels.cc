// ChooseTaskKernels: best records by workload key and target key, default schedules otherwise.
#include "executor/task_kernels.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace tune::executor {

absl::StatusOr<std::vector<TaskKernelChoice>> ChooseTaskKernels(const graph::Graph& graph, const Backend& backend,
                                                                const dataset::RecordDatabase* db) {
  std::vector<TaskKernelChoice> choices;
  std::map<std::string, size_t> by_key;
  for (const graph::Node& node : graph.nodes) {
    if (!node.task.has_value()) continue;
    const std::string key = node.task->workload.Key();
    if (auto it = by_key.find(key); it != by_key.end()) {
      ++choices[it->second].count;
      continue;
    }
    by_key[key] = choices.size();
    TaskKernelChoice c;
    c.node = node.name;
    c.workload = node.task->workload;
    c.count = 1;
    choices.push_back(std::move(c));
  }
  std::optional<dataset::TargetInfo> target;
  if (db != nullptr) {
    auto found = db->FindTarget(backend.target().Key());
    if (!found.ok()) return found.status();
    target = *found;
  }
  for (TaskKernelChoice& c : choices) {
    auto tmpl = backend.MakeTemplate(c.workload);
    if (!tmpl.ok()) return absl::InvalidArgumentError(absl::StrCat("node '", c.node, "': ", tmpl.status().message()));
    c.template_version = (*tmpl)->version();
    auto def = (*tmpl)->ValidDefaultConfig();
    if (!def.ok()) return absl::InvalidArgumentError(absl::StrCat("node '", c.node, "': ", def.status().message()));
    c.config_json = (*tmpl)->space().ToJson(*def);
    if (!target.has_value()) continue;
    auto task = db->FindTask(c.workload.Key(), c.template_version);
    if (!task.ok()) return task.status();
    if (!task->has_value()) continue;
    auto best = db->Best((*task)->id, target->id, 1);
    if (!best.ok()) return best.status();
    if (best->empty()) continue;
    const dataset::Record& rec = best->front();
    auto config = (*tmpl)->space().FromJson(rec.config_json);
    if (!config.ok()) {
      c.note = absl::StrCat("record ", rec.id, " passed over: ", config.status().message());
      continue;
    }
    c.config_json = (*tmpl)->space().ToJson(*config);
    c.tuned = true;
    c.record_id = rec.id;
    c.measured_s = rec.result.Median();
  }
  return choices;
}

}  // namespace tune::executor
