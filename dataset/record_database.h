// RecordDatabase: every measurement tune has made, in SQLite (WAL), queried for best schedules.
#pragma once

#include <cstdint>
#include <functional>
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

/// The strategy of a run's finalists: a task's best configs measured again at the end of a
/// run, side by side (MeasureProtocol::interleave); Best() takes their verdict.
inline constexpr char kFinalistStrategy[] = "finalist";

/// A run's owner counts as gone once its heartbeat is this old (seconds): its run is listed
/// as "stale" and its leases may be taken over. Owners on this host are also gone as soon as
/// their process is.
inline constexpr double kStaleAfterS = 30;
/// How often RunHeartbeat renews a run's heartbeat and leases (seconds).
inline constexpr double kHeartbeatIntervalS = 2;

/// A tuning run: one invocation of the tuner over some tasks.
struct RunInfo {
  int64_t id = 0;
  std::string command;       // the command line that started it
  std::string target_key;
  double started = 0;
  double finished = 0;       // 0 while running, and for stale runs
  /// "running"; "finished"; "interrupted" (stopped early by a signal); "failed" (ended by an
  /// error, `message` says which); "stale": left "running" by an owner that is gone (its
  /// process ended on this host, or no heartbeat for kStaleAfterS), as listed, never stored.
  std::string status;
  std::string host;          // the owner process: host name and pid ("" and 0: unknown)
  int64_t pid = 0;
  double heartbeat = 0;      // when the owner last said it was alive (seconds since the epoch)
  std::string message;       // why a failed run failed; notes of a finished one (the pretrained cost model used, tasks where its guard fired)
};

/// The run that holds the lease of a task on a target.
struct LeaseHolder {
  int64_t run_id = 0;
  std::string host;
  int64_t pid = 0;
  double expires = 0;        // seconds since the epoch; renewed by the holder's heartbeat
};

/// A record with its task, target and run by value rather than by id: what moves from one
/// database to another (export, import, merge).
struct PortableRecord {
  TaskInfo task;                // `id` is ignored on import
  TargetInfo target;            // `id` is ignored on import
  std::optional<RunInfo> run;   // the run that measured it; nullopt: none. `id` is ignored on import
  Record record;                // `id`, `task_id`, `target_id` and `run_id` are ignored on import
  std::string origin;           // where it was read ("records.jsonl:17"), prefixed to import errors
};

/// What RecordDatabase::ImportRecords did.
struct ImportCounts {
  int64_t imported = 0;         // records added
  int64_t already_present = 0;  // records skipped: the same measurement was there (or earlier in the batch)
  int64_t tasks = 0;            // distinct tasks of the records added
  int64_t targets = 0;          // distinct targets of the records added
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
  /// Opens an existing record database of the current schema version for reading only
  /// (PRAGMA query_only: nothing is written, no schema is created or upgraded). NotFound for an
  /// absent file; FailedPrecondition for a file that is not a tune database or has another
  /// schema version.
  static absl::StatusOr<std::unique_ptr<RecordDatabase>> OpenReadOnly(const std::string& path);
  /// The path it was opened with.
  const std::string& path() const;
  /// Bounds this connection's page cache to `kib` KiB (SQLite's default is 2000 KiB per
  /// connection). A process that opens a connection per short-lived job churns each one's cache
  /// through the allocator, which keeps what it churned; small caches keep such a process's
  /// memory flat. Errors: SQL.
  absl::Status SetCacheKiB(int64_t kib);
  /// This connection's page cache bound, KiB.
  absl::StatusOr<int64_t> CacheKiB() const;

  /// Inserts the task or target if absent (keyed by workload_key + template_version, or
  /// key) and returns its id.
  absl::StatusOr<int64_t> UpsertTask(const TaskInfo& task);
  absl::StatusOr<int64_t> UpsertTarget(const TargetInfo& target);

  /// Starts a run owned by this process (host name, pid), its heartbeat now.
  absl::StatusOr<int64_t> StartRun(const std::string& command, const std::string& target_key);
  /// Ends a run with `status` ("finished", "interrupted", or "failed" with `message`) and
  /// releases its leases, in one transaction.
  absl::Status FinishRun(int64_t run_id, const std::string& status = "finished",
                         const std::string& message = "");
  /// Every run, oldest first; runs whose owner is gone are listed as "stale".
  absl::StatusOr<std::vector<RunInfo>> Runs() const;
  /// Renews the heartbeat of `run_id` and the expiry of its leases, in one transaction.
  absl::Status Heartbeat(int64_t run_id);

  /// Takes the lease of a task on a target for `run_id` (owned by this process), in one write
  /// transaction: nullopt when the run holds it now (taken, taken over from an owner that is
  /// gone, or held already), else the live run that holds it. A run keeps its leases until it
  /// ends (FinishRun); RunHeartbeat keeps them from expiring meanwhile.
  absl::StatusOr<std::optional<LeaseHolder>> AcquireLease(int64_t task_id, int64_t target_id, int64_t run_id);
  /// Who holds the lease of a task on a target now, live or not; nullopt when nobody does.
  absl::StatusOr<std::optional<LeaseHolder>> Lease(int64_t task_id, int64_t target_id) const;

  /// Commits all records in one transaction (all or nothing) and fills their ids.
  absl::Status AddRecords(std::vector<Record>& records);

  /// All records of a task on a target, oldest first; with `after_id`, only those with a
  /// larger id (the ones committed since a record with that id was).
  absl::StatusOr<std::vector<Record>> Records(int64_t task_id, int64_t target_id, int64_t after_id = 0) const;
  /// At most `limit` of the most recent records of a task on a target (the last ones Records
  /// lists: latest timestamp, then largest id), newest first, leaving out those whose strategy
  /// is `skip_strategy` ("" leaves out none) and the `offset` newest of the rest: a bounded
  /// read, pageable, for callers that use only the latest few of a task with thousands. None
  /// for `limit` <= 0. Errors: SQL.
  absl::StatusOr<std::vector<Record>> RecentRecords(int64_t task_id, int64_t target_id, int limit,
                                                    const std::string& skip_strategy = "", int64_t offset = 0) const;
  /// The largest record id so far (0 when there is none).
  absl::StatusOr<int64_t> LastRecordId() const;
  /// The `k` best configs (ok records, by median cost), best first: each config once, as its
  /// fastest record (a config measured again, e.g. as a finalist, takes one place). Where a
  /// run's finalists of the task were timed side by side (strategy kFinalistStrategy, protocol
  /// interleaved), their verdict stands over single records taken at other moments of the host:
  /// a config ranks after every config with a lower median than its own in the last such group
  /// it was in, however fast its own fastest record.
  absl::StatusOr<std::vector<Record>> Best(int64_t task_id, int64_t target_id, int k = 1) const;

  /// Every record of a task on a target (0: every task, every target) with its task, target and
  /// run, in the order they were committed (by id).
  absl::StatusOr<std::vector<PortableRecord>> ExportRecords(int64_t task_id = 0, int64_t target_id = 0) const;
  /// Adds `records` in one transaction (all or nothing), creating their tasks, targets and runs
  /// where absent (a run is the same run when its command, start time, host and pid are). A
  /// record already present is skipped and counted: the same measurement is the same task
  /// (workload key + template version), target key, config and protocol (compared as JSON values,
  /// so key order does not matter) and timestamp; the timestamp tells apart a config measured
  /// again (finalists, another run). Records keep every field (config and protocol text,
  /// status, message, samples, number, build and wall seconds, strategy, timestamp; a timestamp
  /// of 0 becomes now). InvalidArgument, prefixed with the record's `origin`, when its task or
  /// target is in the database (or earlier in the batch) with other fields (op, shape, flops;
  /// description), or its config, protocol, shape or description is not a JSON object.
  absl::StatusOr<ImportCounts> ImportRecords(const std::vector<PortableRecord>& records);

  absl::StatusOr<std::vector<TaskInfo>> Tasks() const;
  /// Calls `visit` with each task that has an ok record on target `target_id`, oldest first, one
  /// row at a time: nothing is held in proportion to the tasks table (Tasks() holds it all).
  /// `visit` must not use this database. Errors: SQL.
  absl::Status ForEachTaskMeasuredOn(int64_t target_id, const std::function<void(const TaskInfo&)>& visit) const;
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

/// Keeps a run's heartbeat and leases fresh (RecordDatabase::Heartbeat every `interval_s`,
/// kHeartbeatIntervalS unless a test says otherwise) from a thread of its own, on a connection of its own to the file, for
/// as long as it lives: a run that waits long for one batch still shows it is alive. Does
/// nothing for an in-memory database (no other connection can see it). A failed renewal is
/// logged and tried again at the next interval.
class RunHeartbeat {
 public:
  static absl::StatusOr<std::unique_ptr<RunHeartbeat>> Start(const std::string& path, int64_t run_id,
                                                             double interval_s = kHeartbeatIntervalS);
  ~RunHeartbeat();  // stops the thread
  RunHeartbeat(const RunHeartbeat&) = delete;
  RunHeartbeat& operator=(const RunHeartbeat&) = delete;

 private:
  struct State;
  explicit RunHeartbeat(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// This machine's host name, as runs and leases record their owner.
std::string LocalHostName();
/// Whether the owner (host, pid) of a run or lease may still be alive: false for a pid that is
/// unknown, or for a process of this host that no longer exists (or is a zombie); true for
/// owners on other hosts (only their heartbeat tells).
bool OwnerMayBeAlive(const std::string& host, int64_t pid);

}  // namespace tune::dataset
