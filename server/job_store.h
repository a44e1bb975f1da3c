// JobStore: the daemon's tuning jobs in the record database file (`jobs` table), for resuming.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::server {

/// A tuning job of the daemon, as stored so that a restarted daemon resumes it.
struct JobRow {
  int64_t id = 0;
  std::string request_json;  // the submitted request, as the daemon serialises it
  std::string state;         // "queued", "running", "done", "cancelled", "failed"
  std::string message;
  double submitted = 0;      // seconds since the epoch
  int64_t trials_done = 0;   // stored when the job ends (0 before)
  int64_t trials_total = 0;
};

/// The `jobs` table of a record database file, on its own connection (the file's WAL lets it
/// sit beside the RecordDatabase connections). The table is created on first write; files
/// without it have no jobs, and a table from before the trial columns gains them at its next
/// write. Thread-safe.
class JobStore {
 public:
  /// Opens the record database at `path` (created when absent, as RecordDatabase::Open does);
  /// its errors are RecordDatabase::Open's.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  /// Stores a new job; returns its id (ids grow with every job).
  absl::StatusOr<int64_t> Add(const std::string& request_json, const std::string& state);
  /// Sets a job's state and message; with trials_done / trials_total >= 0 its trial counts too
  /// (stored when it ends, so a later daemon can list it).
  absl::Status SetState(int64_t id, const std::string& state, const std::string& message,
                        int64_t trials_done = -1, int64_t trials_total = -1);
  /// Every job, oldest first.
  absl::StatusOr<std::vector<JobRow>> List() const;
  /// A page of List: at most `limit` jobs with ids above `after_id`, oldest first (the next
  /// page starts after the last id of this one; empty: no more).
  absl::StatusOr<std::vector<JobRow>> List(int64_t after_id, int64_t limit) const;
  /// Job `id`, read by its key (one row, whatever the number of jobs); nullopt when there is
  /// no such job.
  absl::StatusOr<std::optional<JobRow>> Get(int64_t id) const;
  /// Rows read from the jobs table since Open (List, Get), for tests and diagnostics.
  int64_t RowsRead() const;

 private:
  struct Impl;
  explicit JobStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::server
