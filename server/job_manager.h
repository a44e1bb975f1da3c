// JobManager: the daemon's tuning jobs: validation, storage, one tuner thread each, resume.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/job_store.h"
#include "server/lease_queue.h"
#include "server/worker_registry.h"
#include "tune/v1/tune.pb.h"

namespace tune::tuner {
class Retrainer;
}  // namespace tune::tuner

namespace tune::server {

/// Runs each job's tuner::Tuner on its own thread once a worker of its target kind is live,
/// measuring through a RemoteMeasurer on `queue`, recording into the database at `db_path`.
/// The jobs table (`store`) keeps each job's request and state, so a daemon that restarts
/// resumes the jobs left queued or running (Restore). Thread-safe.
class JobManager {
 public:
  /// `store`, `registry` and `queue` outlive the manager. `stopping` turns true once the
  /// daemon shuts down: jobs then stop after their batch in flight and keep their stored
  /// state, so that a restarted daemon resumes them. `retrainer`, when not null (outlives the
  /// manager), gives each job without its own cost-model artifact the latest model of its target.
  /// `ended_kept`: ended jobs kept in memory, the most recently ended; older ones are read back
  /// from the store when asked for (a daemon that runs job after job would otherwise hold
  /// every job it ever ran).
  JobManager(std::string db_path, JobStore* store, WorkerRegistry* registry, LeaseQueue* queue,
             std::function<bool()> stopping, const tuner::Retrainer* retrainer = nullptr,
             size_t ended_kept = kEndedJobsKept);
  /// Joins every job's thread (see JoinAll).
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  /// Relaunches the stored jobs still queued or running (resuming: configs already recorded
  /// are counted, never measured again) and lists the ended ones as they ended. A stored job
  /// that cannot be relaunched is marked failed. Errors: the store's.
  absl::Status Restore();

  /// Jobs not yet ended that one daemon runs at once (each holds a thread); a submit beyond
  /// them is refused with ResourceExhausted until some end.
  static constexpr uint32_t kMaxActiveJobs = 256;
  /// Ended jobs kept in memory by default.
  static constexpr size_t kEndedJobsKept = 256;

  /// Checks `request` (target, trials, model, tuning names), stores it and starts the job;
  /// returns its id. InvalidArgument saying what is wrong; ResourceExhausted beyond
  /// kMaxActiveJobs or when no thread can be started; the store's errors.
  absl::StatusOr<uint64_t> Submit(const v1::SubmitJobRequest& request);

  /// Ends job `id` at once, whatever it is doing: it is stored as cancelled, its queued
  /// batches are dropped and its leased ones revoked (LeaseQueue::Cancel), and its thread ends
  /// soon after. Returns JOB_CANCELLED, or the final state of a job that had already ended.
  /// NotFound for an unknown id.
  absl::StatusOr<v1::JobState> Cancel(uint64_t id);

  /// Calls `write` with job `id`'s progress now and after each change, until the job ends or
  /// `write` returns false or `cancelled` returns true (all OK). NotFound for an unknown id;
  /// Unavailable when the daemon stops first.
  absl::Status Watch(uint64_t id, const std::function<bool(const v1::JobEvent&)>& write,
                     const std::function<bool()>& cancelled);

  /// Every job known, oldest first; each with a note saying why it failed or was cancelled,
  /// or why it cannot progress now (no live worker for it).
  std::vector<v1::JobInfo> List() const;
  /// Jobs not yet ended.
  uint32_t ActiveCount() const;
  /// Jobs held in memory: those not yet ended and at most `ended_kept` ended ones.
  size_t InMemoryCount() const;

  /// Waits for every job's thread to end (they end soon once `stopping` is true).
  void JoinAll();

 private:
  struct Job;

  absl::StatusOr<Job*> Launch(uint64_t id, const v1::SubmitJobRequest& request, bool resumed);
  /// The job of `row`, ended as the store has it; null when the row is not an ended job.
  std::shared_ptr<Job> EndedFromRow(const JobRow& row) const;
  /// Joins the threads of ended jobs and lets go of the oldest ended ones beyond ended_kept_.
  /// Caller holds mu_.
  void ForgetOldEndedLocked();
  /// Job `id` in memory, or else as the store has it (an ended job let go of); null: unknown.
  std::shared_ptr<Job> Find(uint64_t id) const;
  std::string Note(const Job& job, const v1::JobEvent& event) const;
  void Run(Job* job);
  bool SetState(Job* job, v1::JobState state, const std::string& why = "");

  const std::string db_path_;
  JobStore* store_;
  WorkerRegistry* registry_;
  LeaseQueue* queue_;
  std::function<bool()> stopping_;
  const tuner::Retrainer* retrainer_;
  mutable std::mutex mu_;
  const size_t ended_kept_;
  std::list<std::shared_ptr<Job>> jobs_;  // guarded by mu_; a Watch holds its job while it runs
};

}  // namespace tune::server
