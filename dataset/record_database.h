// RecordDatabase: every measurement tune has made, in SQLite (WAL), queried for best schedules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/measure_result.h"

namespace tune::dataset {

/// A tuning task as stored: a workload under one template version.
struct TaskInfo {
  int64_t id = 0;
  std::string workload_key;   // codegen::Workload::Key()
  std::string op;             // "conv2d", ...
  std::string shape_json;     // the workload's fields as JSON
  double flops = 0;
  int template_version = 0;
};

/// A device + toolchain as stored; `key` is measure::Target::Key().
struct TargetInfo {
  int64_t id = 0;
  std::string key;
  std::string json;  // measure::Target::ToJson()
};

/// One measurement of one config of one task on one target.
struct Record {
  int64_t id = 0;            // assigned by the database
  int64_t task_id = 0;
  int64_t target_id = 0;
  int64_t run_id = 0;        // 0 = not part of a run
  std::string config_json;   // search::ConfigSpace::ToJson()
  uint64_t config_index = 0; // search::ConfigSpace::ToIndex()
  std::string strategy;      // who proposed it ("random", "grid", "default", ...)
  std::string protocol_json; // measure::MeasureProtocol::ToJson()
  measure::MeasureResult result;
  double timestamp = 0;      // seconds since the epoch, set by the database when 0
};

/// A tuning run: one invocation of the tuner over some tasks.
struct RunInfo {
  int64_t id = 0;
  std::string command;       // the command line that started it
  std::string target_key;
  double started = 0;
  double finished = 0;       // 0 while running or interrupted
  std::string status;        // "running", "finished", "interrupted" (stopped early by a signal)
};

/// SQLite-backed store. Opening creates or migrates the schema (versioned with
/// PRAGMA user_version) and turns on WAL. All methods are thread-compatible (one instance per
/// thread, or external locking); several processes may open one file.
class RecordDatabase {
 public:
  ~RecordDatabase();
  RecordDatabase(const RecordDatabase&) = delete;
  RecordDatabase& operator=(const RecordDatabase&) = delete;

  /// Opens (creating when `create`) the database at `path` (":memory:" for a private
  /// in-memory one). FailedPrecondition for a file that is not a tune database or has a newer
  /// schema; Unavailable/Internal for I/O errors. Never leaves a half-created file behind.
  static absl::StatusOr<std::unique_ptr<RecordDatabase>> Open(const std::string& path,
                                                              bool create = true);

  /// Inserts the task or target if absent (keyed by workload_key + template_version, or
  /// key) and returns its id.
  absl::StatusOr<int64_t> UpsertTask(const TaskInfo& task);
  absl::StatusOr<int64_t> UpsertTarget(const TargetInfo& target);

  absl::StatusOr<int64_t> StartRun(const std::string& command, const std::string& target_key);
  /// Ends a run with `status` ("finished" or "interrupted").
  absl::Status FinishRun(int64_t run_id, const std::string& status = "finished");
  /// Every run, oldest first.
  absl::StatusOr<std::vector<RunInfo>> Runs() const;

  /// Commits all records in one transaction (all or nothing) and fills their ids.
  absl::Status AddRecords(std::vector<Record>& records);

  /// All records of a task on a target, oldest first.
  absl::StatusOr<std::vector<Record>> Records(int64_t task_id, int64_t target_id) const;
  /// The `k` ok records with the lowest median cost, fastest first.
  absl::StatusOr<std::vector<Record>> Best(int64_t task_id, int64_t target_id, int k = 1) const;

  absl::StatusOr<std::vector<TaskInfo>> Tasks() const;
  absl::StatusOr<std::vector<TargetInfo>> Targets() const;
  absl::StatusOr<std::optional<TaskInfo>> FindTask(const std::string& workload_key,
                                                   int template_version) const;
  absl::StatusOr<std::optional<TargetInfo>> FindTarget(const std::string& key) const;
  /// Number of records per status name for a task/target (0 = all tasks/targets).
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> StatusCounts(
      int64_t task_id = 0, int64_t target_id = 0) const;

 private:
  struct Impl;
  explicit RecordDatabase(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::dataset
