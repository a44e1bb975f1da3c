// SplitDataset: a record database's tasks split by network into training and held-out sets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataset/record_database.h"
#include "tuner/zoo.h"

namespace tune::tuner {

/// The format version SplitToJson writes.
inline constexpr char kSplitFormat[] = "tune-split/1";

/// A network of the dataset: `spec` is how --models named it (a zoo name or a file path);
/// `model` is what LoadModel made of it.
struct SplitInput {
  std::string spec;
  ZooModel model;
};

/// One distinct task of a network, as the split sees it.
struct SplitNetworkTask {
  std::string layer;            // the model's first layer with this workload
  std::string workload_key;     // codegen::Workload::Key()
  int weight = 1;               // how many layers of the network have the workload (its count)
  int64_t task_id = 0;          // the database's task; 0: the database has no such task
  int template_version = 0;     // of the database's task (0 when missing)
  int64_t records = 0;          // the task's records in the database, every target and status
  /// Where the task's records went: "train", "test", or "missing" (not in the database). A
  /// task of a training network that a held-out network also has is "test".
  std::string set;
};

/// One network with its tasks.
struct SplitNetwork {
  std::string name;             // the model's name (ZooModel::name)
  std::string spec;             // as given in --models
  bool held_out = false;
  std::vector<SplitNetworkTask> tasks;
};

/// A task of the training or the test set.
struct SplitSetTask {
  int64_t task_id = 0;
  std::string workload_key;
  int template_version = 0;
  int64_t records = 0;          // every record of the task (all targets, all statuses)
  int64_t ok_records = 0;       // of which ok
  std::vector<std::string> networks;  // names of the networks that have the task
};

/// The split. Tasks are split, never records: every record of a task goes where its task
/// goes. Held-out networks' tasks form the test set; the tasks of the other networks form
/// the training set, except those a held-out network also has (`shared_tasks`): they go to
/// the test set only, so no record of a held-out network's task is ever trained on.
struct DatasetSplit {
  std::vector<SplitNetwork> networks;   // in --models order
  std::vector<SplitSetTask> train;      // by task id
  std::vector<SplitSetTask> test;       // by task id
  int64_t train_records = 0;
  int64_t test_records = 0;
  int shared_tasks = 0;     // tasks of a training network kept out of training (a held-out network has them)
  int missing_tasks = 0;    // (network, task) pairs whose workload the database has no task for
};

/// Splits `db`'s tasks by the networks of `models`, holding out the networks named in
/// `holdout` (by the model's name or its spec as given). A network's workload maps to the
/// database's task with the same workload key and the template version of the current CPU or
/// GPU template of that workload (records of older template versions are of another space and
/// are left out). InvalidArgument, one line, when a holdout name matches no model of
/// `models` ("... is not one of --models" when it names a zoo model or an existing file),
/// when two models have the same name, when `holdout` is empty or names every network.
absl::StatusOr<DatasetSplit> SplitDataset(const dataset::RecordDatabase& db, const std::vector<SplitInput>& models,
                                          const std::vector<std::string>& holdout);

/// The split as JSON (kSplitFormat): {"format", "db", "shared_task_policy": "test-only",
/// "networks": [{"name", "spec", "held_out", "tasks": [{"layer", "workload_key", "weight",
/// "task_id" (null when missing), "template_version", "records", "set"}]}],
/// "train": [SplitSetTask as {"task_id", "workload_key", "template_version", "records",
/// "ok_records", "networks"}], "test": [...], "counts": {"train_tasks", "test_tasks",
/// "train_records", "test_records", "shared_tasks", "missing_tasks"}}.
std::string SplitToJson(const DatasetSplit& split, const std::string& db_path);

/// The table `tune dataset split` prints: per network its set, distinct tasks found in the
/// database, and their records (for a training network, only those of tasks kept in training),
/// then the train and test totals.
std::string SplitTable(const DatasetSplit& split);

}  // namespace tune::tuner
