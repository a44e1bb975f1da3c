// LeaseQueue: measure batches waiting per target, leased to workers with deadlines; no gRPC types.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::server {

/// What a worker needs to build and measure a batch (the record database's JSON forms).
struct BatchSpec {
  uint64_t job_id = 0;
  std::string target_key;       // only workers with this target key get it
  std::string workload_key;     // codegen::Workload::Key()
  uint64_t data_seed = 0;       // seed of the task's random inputs (tuner::TaskDataSeed)
  std::vector<std::string> configs_json;
  std::string protocol_json;    // measure::MeasureProtocol::ToJson()
  double queued_at = 0;         // set by the queue: when it was last (re)queued, steady clock s
};

/// One measured config as a worker reports it (mirrors measure::MeasureResult).
struct BatchResult {
  std::string status;           // measure::StatusName
  std::string message;
  std::vector<double> costs_s;
  int number = 0;
  double build_s = 0, wall_s = 0;
};

/// Counters since the queue was created (for Health and the load benchmark).
struct LeaseStats {
  uint64_t batches_leased = 0;     // leases handed out (a requeued batch counts again)
  uint64_t results_ingested = 0;   // results accepted by Complete
  uint64_t results_committed = 0;  // results of batches marked committed
};

/// Thread-safe. Time (seconds, monotonic) is passed in so deadlines are testable.
///
/// Jobs share a target's workers fairly: a lease goes to the queued batch whose job holds the
/// fewest leases at that moment (ties: the oldest batch), so one job's many queued batches do
/// not starve another's.
class LeaseQueue {
 public:
  /// `max_losses`: a batch whose lease is lost this many times (its worker died, broke its
  /// stream or let the lease run out) is not queued again: each of its configs gets a
  /// runtime_error result saying so, which its job records like any other.
  explicit LeaseQueue(double lease_s, int max_losses = 3) : lease_s_(lease_s), max_losses_(max_losses) {}

  /// Queues a batch and returns its id (never reused).
  uint64_t Enqueue(BatchSpec spec);

  /// A queued batch for `target_key` (the fair choice above), leased to `worker_id` until now + lease_s;
  /// nullopt when none is queued.
  std::optional<std::pair<uint64_t, BatchSpec>> Lease(uint64_t worker_id, const std::string& target_key, double now);

  /// Like Lease, but waits up to `wait_s` (real time) for a batch.
  std::optional<std::pair<uint64_t, BatchSpec>> LeaseWait(uint64_t worker_id, const std::string& target_key,
                                                          double wait_s, double (*clock)());

  /// Called with a batch leased to a waiting worker: its id and spec.
  using Deliver = std::function<void(uint64_t batch_id, BatchSpec spec)>;
  /// Like Lease; when nothing is queued, `worker_id` waits instead without a thread: the next
  /// batch of `target_key` that no earlier waiter takes is leased to it (at the moment it is
  /// queued or requeued, deadline from then) and `deliver` is called with it once, on the thread
  /// that queued it, outside the queue's lock (it must not block). A worker waits at most once.
  std::optional<std::pair<uint64_t, BatchSpec>> LeaseOrWait(uint64_t worker_id, const std::string& target_key,
                                                            double now, Deliver deliver);
  /// Withdraws the wait of `worker_id`; false when it was not waiting (a batch may then have
  /// been leased to it, whose `deliver` call may still be under way).
  bool CancelWait(uint64_t worker_id);

  /// A worker's results for a batch it holds: one per config, in order. The batch is then
  /// done. A worker whose lease ran out (ExpireLeases) while it kept measuring still holds a
  /// claim on the batch: its results are taken as long as no other worker has returned the
  /// batch first, and the worker it was leased to again is then revoked. Aborted when the
  /// results are dropped and the worker should be told so (the batch was cancelled, or another
  /// worker returned it first after an expiry or a revocation); FailedPrecondition when the
  /// worker has no claim on the batch (never leased to it, or it gave it back, died or
  /// returned it already); InvalidArgument when the count is wrong.
  absl::Status Complete(uint64_t worker_id, uint64_t batch_id, std::vector<BatchResult> results);

  /// Puts a batch `worker_id` holds back in front of its queue (the worker gave it back). OK
  /// also for a batch the worker lost to an expiry or a revocation (nothing to put back).
  absl::Status Release(uint64_t worker_id, uint64_t batch_id);

  /// Requeues every batch `worker_id` holds; returns how many. `lost`: the worker crashed,
  /// disconnected or broke the protocol holding them, which counts towards max_losses (a batch
  /// lost that often is failed instead of requeued); false when it gave them back cleanly.
  int ReleaseWorker(uint64_t worker_id, bool lost = true);

  /// Requeues leases past their deadline (each a loss, as above); returns the ids of the
  /// workers that held them. Such a worker may still return the batch (see Complete).
  std::vector<uint64_t> ExpireLeases(double now);

  /// Waits up to `wait_s` for batch `batch_id` to be done and takes its results; nullopt on
  /// time-out or Cancel.
  std::optional<std::vector<BatchResult>> AwaitResults(uint64_t batch_id, double wait_s);

  /// The taken results of `batch_id` are in the database: forgets the batch and wakes
  /// AwaitCommitted.
  void MarkCommitted(uint64_t batch_id);

  /// The taken results of `batch_id` will never be committed (the job stopped first): forgets
  /// the batch and wakes AwaitCommitted, which says so.
  void MarkDiscarded(uint64_t batch_id);

  enum class Outcome { kCommitted, kDiscarded, kTimedOut };
  /// Waits up to `wait_s` for MarkCommitted or MarkDiscarded of `batch_id`.
  Outcome AwaitCommitted(uint64_t batch_id, double wait_s);

  /// Calls `settled` once with kCommitted or kDiscarded when `batch_id` is settled (as
  /// AwaitCommitted would return): at once, on this thread, when it is already; otherwise on
  /// the thread that settles it, outside the queue's lock (it must not block). One callback
  /// per batch, instead of AwaitCommitted.
  void OnSettled(uint64_t batch_id, std::function<void(Outcome)> settled);
  /// Drops the OnSettled callback of `batch_id` not yet called (its stream ended) and the
  /// settlement it would have taken.
  void ForgetSettled(uint64_t batch_id);

  /// Drops the queued and leased batches of `job_id`; their waiters get nullopt. A leased one
  /// is revoked: forgotten when its worker returns it (Complete says Aborted) or loses it.
  void Cancel(uint64_t job_id);

  size_t Queued(const std::string& target_key) const;
  /// Workers waiting through LeaseOrWait now.
  size_t Waiting() const;

  LeaseStats Stats() const;

 private:
  struct Entry {
    BatchSpec spec;
    uint64_t worker_id = 0;     // 0 = queued
    double deadline = 0;
    bool done = false, cancelled = false, taken = false;
    int losses = 0;             // leases lost (worker died, broke its stream, overdue)
    bool failed = false;        // done with the daemon's failed results, not a worker's
    std::vector<BatchResult> results;
  };
  std::optional<std::pair<uint64_t, BatchSpec>> LeaseLocked(uint64_t worker_id, const std::string& target_key,
                                                             double now);
  void RequeueLocked(uint64_t batch_id);
  /// A lease of `batch_id` was lost: requeues it, or fails it after max_losses_.
  void LostLocked(uint64_t batch_id);
  /// The entry of `batch_id` if `worker_id` holds it unfinished; FailedPrecondition otherwise.
  /// A cancelled batch (its job ended) is erased and reported as nullptr.
  absl::StatusOr<Entry*> HeldLocked(uint64_t worker_id, uint64_t batch_id);
  void UnleaseLocked(const Entry& e);
  void SettleLocked(uint64_t batch_id, bool committed);  // records it and wakes its waiter
  /// Leases queued batches of `target_key` to workers waiting in LeaseOrWait, in the order
  /// they came; their deliver calls run once the lock is let go (after_unlock_).
  void HandOutLocked(const std::string& target_key);
  void WakeResultLocked(uint64_t batch_id);  // AwaitResults of `batch_id`
  /// Holds mu_; when let go, runs the callbacks queued in after_unlock_ meanwhile.
  class Locked;

  const double lease_s_;
  const int max_losses_;
  mutable std::mutex mu_;
  std::map<std::string, std::condition_variable> ready_;  // per target: a batch was (re)queued
  /// AwaitResults callers by batch: woken when that batch is done, or by a Cancel.
  std::multimap<uint64_t, std::condition_variable*> result_waiters_;
  struct Waiter {
    uint64_t worker_id;
    Deliver deliver;
  };
  std::map<std::string, std::deque<Waiter>> waiters_;     // target key -> LeaseOrWait waiters
  std::map<uint64_t, std::string> waiting_;                // worker id -> target key it waits for
  std::map<uint64_t, std::function<void(Outcome)>> settled_callbacks_;  // OnSettled
  std::vector<std::function<void()>> after_unlock_;        // run by Locked once mu_ is let go
  uint64_t next_id_ = 1;
  std::map<uint64_t, Entry> batches_;                     // not yet taken by AwaitResults
  std::map<std::string, std::deque<uint64_t>> queues_;    // target key -> queued batch ids
  std::map<uint64_t, std::condition_variable*> commit_waiters_;  // AwaitCommitted callers
  std::map<uint64_t, bool> committed_;                    // true = committed, false = discarded; not yet awaited
  std::map<uint64_t, int> leased_per_job_;                // job id -> batches leased now
  /// (worker, batch): the worker lost its lease of the batch without dying (expired while it
  /// kept measuring, or revoked because another worker returned the batch first); it may
  /// still return results. Forgotten when it does, gives the batch back, or is released.
  std::set<std::pair<uint64_t, uint64_t>> stale_;
  LeaseStats stats_;
};

}  // namespace tune::server
