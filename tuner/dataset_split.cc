// SplitDataset: tasks split by network (TenSet's held-out networks), with no held-out task in training.
#include "tuner/dataset_split.h"

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/table.h"
#include "codegen/templates.h"
#include "nlohmann/json.hpp"

namespace tune::tuner {
namespace {

// The template versions a workload's records may have been measured under now: those of its
// current CPU and GPU templates (where one exists).
std::set<int> CurrentTemplateVersions(const codegen::Workload& workload) {
  std::set<int> versions;
  for (codegen::Backend backend : {codegen::Backend::kLlvm, codegen::Backend::kCuda}) {
    auto tmpl = codegen::CreateTemplate(workload, backend);
    if (tmpl.ok()) versions.insert((*tmpl)->version());
  }
  return versions;
}

struct TaskCounts {
  int64_t records = 0;
  int64_t ok_records = 0;
};

}  // namespace

absl::StatusOr<DatasetSplit> SplitDataset(const dataset::RecordDatabase& db, const std::vector<SplitInput>& models,
                                          const std::vector<std::string>& holdout) {
  if (holdout.empty()) return absl::InvalidArgumentError("--holdout names no network");
  std::set<std::string> names;
  for (const SplitInput& m : models) {
    if (!names.insert(m.model.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("two models in --models are named '", m.model.name, "'"));
    }
  }
  std::set<size_t> held;
  for (const std::string& h : holdout) {
    bool found = false;
    for (size_t i = 0; i < models.size(); ++i) {
      if (models[i].model.name == h || models[i].spec == h) {
        held.insert(i);
        found = true;
      }
    }
    if (found) continue;
    std::error_code ec;
    auto zoo = GetZooModel(h);
    if (zoo.ok() || std::filesystem::is_regular_file(h, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--holdout '", h, "' is not one of --models"));
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown network '", h, "' in --holdout (networks: ",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  if (held.size() == models.size()) {
    return absl::InvalidArgumentError("--holdout names every network of --models: nothing is left to train on");
  }

  auto db_tasks = db.Tasks();
  if (!db_tasks.ok()) return db_tasks.status();
  std::map<std::string, std::vector<const dataset::TaskInfo*>> by_key;
  for (const dataset::TaskInfo& t : *db_tasks) by_key[t.workload_key].push_back(&t);

  DatasetSplit split;
  std::map<int64_t, const dataset::TaskInfo*> infos;
  std::map<int64_t, TaskCounts> counts;
  std::map<int64_t, std::vector<std::string>> networks_of;
  std::set<int64_t> test_ids, train_ids;
  for (size_t i = 0; i < models.size(); ++i) {
    SplitNetwork net;
    net.name = models[i].model.name;
    net.spec = models[i].spec;
    net.held_out = held.count(i) > 0;
    for (const ZooLayer& layer : models[i].model.layers) {
      SplitNetworkTask t;
      t.layer = layer.name;
      t.workload_key = layer.workload.Key();
      t.weight = layer.count;
      t.set = "missing";
      bool matched = false;
      auto candidates = by_key.find(t.workload_key);
      if (candidates != by_key.end()) {
        const std::set<int> versions = CurrentTemplateVersions(layer.workload);
        for (const dataset::TaskInfo* info : candidates->second) {
          if (versions.count(info->template_version) == 0) continue;
          // A workload can have both a CPU and a GPU template version in the database; they are
          // different tasks, each of them the network's.
          SplitNetworkTask found = t;
          found.task_id = info->id;
          found.template_version = info->template_version;
          if (!counts.contains(info->id)) {
            auto status_counts = db.StatusCounts(info->id, 0);
            if (!status_counts.ok()) return status_counts.status();
            TaskCounts c;
            for (const auto& [status, n] : *status_counts) {
              c.records += n;
              if (status == "ok") c.ok_records += n;
            }
            counts[info->id] = c;
            infos[info->id] = info;
          }
          found.records = counts[info->id].records;
          networks_of[info->id].push_back(net.name);
          (net.held_out ? test_ids : train_ids).insert(info->id);
          net.tasks.push_back(std::move(found));
          matched = true;
        }
      }
      if (!matched) {
        ++split.missing_tasks;
        net.tasks.push_back(std::move(t));
      }
    }
    split.networks.push_back(std::move(net));
  }

  // A task of a held-out network is test-only, even where a training network also has it.
  for (int64_t id : test_ids) split.shared_tasks += train_ids.erase(id) > 0 ? 1 : 0;
  for (SplitNetwork& net : split.networks) {
    for (SplitNetworkTask& t : net.tasks) {
      if (t.task_id != 0) t.set = test_ids.count(t.task_id) > 0 ? "test" : "train";
    }
  }
  auto make = [&](int64_t id) {
    SplitSetTask s;
    s.task_id = id;
    s.workload_key = infos[id]->workload_key;
    s.template_version = infos[id]->template_version;
    s.records = counts[id].records;
    s.ok_records = counts[id].ok_records;
    s.networks = networks_of[id];
    return s;
  };
  for (int64_t id : train_ids) {
    split.train.push_back(make(id));
    split.train_records += split.train.back().records;
  }
  for (int64_t id : test_ids) {
    split.test.push_back(make(id));
    split.test_records += split.test.back().records;
  }
  return split;
}

std::string SplitToJson(const DatasetSplit& split, const std::string& db_path) {
  nlohmann::ordered_json out;
  out["format"] = kSplitFormat;
  out["db"] = db_path;
  out["shared_task_policy"] = "test-only";
  out["networks"] = nlohmann::ordered_json::array();
  for (const SplitNetwork& net : split.networks) {
    nlohmann::ordered_json n;
    n["name"] = net.name;
    n["spec"] = net.spec;
    n["held_out"] = net.held_out;
    n["tasks"] = nlohmann::ordered_json::array();
    for (const SplitNetworkTask& t : net.tasks) {
      nlohmann::ordered_json j;
      j["layer"] = t.layer;
      j["workload_key"] = t.workload_key;
      j["weight"] = t.weight;
      j["task_id"] = t.task_id != 0 ? nlohmann::ordered_json(t.task_id) : nlohmann::ordered_json(nullptr);
      j["template_version"] = t.template_version;
      j["records"] = t.records;
      j["set"] = t.set;
      n["tasks"].push_back(std::move(j));
    }
    out["networks"].push_back(std::move(n));
  }
  auto set_json = [](const std::vector<SplitSetTask>& tasks) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const SplitSetTask& t : tasks) {
      nlohmann::ordered_json j;
      j["task_id"] = t.task_id;
      j["workload_key"] = t.workload_key;
      j["template_version"] = t.template_version;
      j["records"] = t.records;
      j["ok_records"] = t.ok_records;
      j["networks"] = t.networks;
      arr.push_back(std::move(j));
    }
    return arr;
  };
  out["train"] = set_json(split.train);
  out["test"] = set_json(split.test);
  out["counts"] = {{"train_tasks", split.train.size()}, {"test_tasks", split.test.size()},
                   {"train_records", split.train_records}, {"test_records", split.test_records},
                   {"shared_tasks", split.shared_tasks}, {"missing_tasks", split.missing_tasks}};
  return out.dump(2) + "\n";
}

std::string SplitTable(const DatasetSplit& split) {
  std::vector<std::vector<std::string>> rows;
  for (const SplitNetwork& net : split.networks) {
    const std::string own_set = net.held_out ? "test" : "train";
    std::set<int64_t> tasks;
    int64_t records = 0;
    int moved = 0, missing = 0;
    for (const SplitNetworkTask& t : net.tasks) {
      if (t.task_id == 0) {
        ++missing;
      } else if (t.set != own_set) {
        ++moved;
      } else if (tasks.insert(t.task_id).second) {
        records += t.records;
      }
    }
    std::string note;
    if (moved > 0) note = absl::StrCat(moved, " shared with a held-out network: test only");
    if (missing > 0) absl::StrAppend(&note, note.empty() ? "" : "; ", missing, " not in the database");
    rows.push_back({net.name, std::to_string(tasks.size()), std::to_string(records), own_set, note});
  }
  rows.push_back({"(train)", std::to_string(split.train.size()), std::to_string(split.train_records), "train", ""});
  rows.push_back({"(test)", std::to_string(split.test.size()), std::to_string(split.test_records), "test", ""});
  return base::FormatTable({"network", "tasks", "records", "set", "note"}, rows,
                           {{base::Align::kLeft, base::Align::kRight, base::Align::kRight, base::Align::kLeft,
                             base::Align::kLeft}});
}

}  // namespace tune::tuner
