// Training data for offline cost models: a dataset's records as ranking groups, split by network.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/offline_model.h"
#include "costmodel/ranking_metrics.h"
#include "dataset/record_database.h"

namespace tune::tuner {

/// Where the records come from and how they are split.
struct TrainingDataOptions {
  /// The records: a record database, or a file of `tune db export` lines (tune-records/1;
  /// plain, or gzip-compressed when it ends in .gz). Exactly one of the two.
  std::string db_path;
  std::string data_path;
  /// The target whose records are used: a target key, a target id, a family ("llvm", "cuda";
  /// the family's target with the most records), or "" for the target with the most records.
  std::string target;
  /// The networks of the dataset (zoo names, model files, ONNX files): they say which task
  /// belongs to which network and weigh tasks by their counts. Empty with no holdout: every
  /// task trains (and a share validates).
  std::vector<std::string> networks;
  /// Networks held out (tuner::SplitDataset's rule: their tasks, shared ones included, are the
  /// test set and never trained on).
  std::vector<std::string> holdout;
  /// Share of the training tasks (whole tasks, never single records) kept for validation /
  /// early stopping, drawn with `seed`.
  double valid_share = 0.1;
  uint64_t seed = 0;
  /// What the model reads of each config (costmodel::InputNeeds).
  costmodel::InputNeeds needs;
  /// At most this many records per task, the first ones by record id (0: all).
  int max_per_task = 0;
  int threads = 1;  // featurization threads
};

/// One held-out network over the test groups (indices into TrainingData::test).
struct TestNetwork {
  std::string name;
  costmodel::Network network;  // task = index into TrainingData::test, weight = the task's count
};

struct TrainingData {
  std::vector<costmodel::TrainGroup> train, valid, test;
  std::vector<TestNetwork> test_networks;
  std::string target_key;      // the target whose records were used
  std::string target_family;   // "llvm" or "cuda"
  std::map<std::string, int> template_versions;  // of the tasks used
  int64_t records = 0;         // records featurized (all sets)
  int64_t skipped = 0;         // records left out: configs that no longer lower, unknown workloads
  /// Why records were left out, one line per task that lost any: "WORKLOAD_KEY: N records: REASON"
  /// (the first reason met in that task), in task order.
  std::vector<std::string> skip_reasons;
  /// JSON object: source, target, records/tasks per set, networks and holdout.
  std::string summary_json;
};

/// Loads, featurizes (lowering each record's config with its task's template) and splits the
/// records. Only ok and failed-kernel records of the chosen target; failures get latency
/// +inf. InvalidArgument with one line for a missing/ambiguous source, an unknown target,
/// bad network or holdout names, or a dataset with nothing to train on. `progress`, when
/// given, is called with (records featurized, records in all) now and then.
absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& options,
                                              std::function<void(int64_t, int64_t)> progress = nullptr);

/// The groups of every task of target `target_id` in an open database (no split), for the
/// daemon's background retraining; at most `max_per_task` records each (0: all).
absl::StatusOr<std::vector<costmodel::TrainGroup>> LoadGroups(const dataset::RecordDatabase& db, int64_t target_id,
                                                              costmodel::InputNeeds needs, int max_per_task = 0);

}  // namespace tune::tuner
