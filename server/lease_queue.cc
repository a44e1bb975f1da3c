// LeaseQueue: per-target FIFO queues, leases with deadlines, requeue on expiry or worker loss.
#include "server/lease_queue.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/monotonic_clock.h"

namespace tune::server {

class LeaseQueue::Locked {
 public:
  explicit Locked(LeaseQueue* q) : q_(q), lock_(q->mu_) {}
  ~Locked() {
    std::vector<std::function<void()>> run;
    run.swap(q_->after_unlock_);
    lock_.unlock();
    for (std::function<void()>& f : run) f();
  }
  std::unique_lock<std::mutex>& lock() { return lock_; }

 private:
  LeaseQueue* q_;
  std::unique_lock<std::mutex> lock_;
};

uint64_t LeaseQueue::Enqueue(BatchSpec spec) {
  Locked locked(this);
  uint64_t id = next_id_++;
  const std::string target_key = spec.target_key;
  queues_[target_key].push_back(id);
  spec.queued_at = MonotonicSeconds();
  batches_[id].spec = std::move(spec);
  HandOutLocked(target_key);
  ready_[target_key].notify_one();  // one waiting worker of that target per batch
  return id;
}

void LeaseQueue::HandOutLocked(const std::string& target_key) {
  auto w = waiters_.find(target_key);
  if (w == waiters_.end()) return;
  const double now = MonotonicSeconds();
  while (!w->second.empty()) {
    Waiter& first = w->second.front();
    std::optional<std::pair<uint64_t, BatchSpec>> got = LeaseLocked(first.worker_id, target_key, now);
    if (!got) break;
    waiting_.erase(first.worker_id);
    after_unlock_.push_back([deliver = std::move(first.deliver), got = std::move(*got)]() mutable {
      deliver(got.first, std::move(got.second));
    });
    w->second.pop_front();
  }
  if (w->second.empty()) waiters_.erase(w);
}

std::optional<std::pair<uint64_t, BatchSpec>> LeaseQueue::LeaseOrWait(uint64_t worker_id,
                                                                      const std::string& target_key, double now,
                                                                      Deliver deliver) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto got = LeaseLocked(worker_id, target_key, now)) return got;
  if (waiting_.count(worker_id) == 0) {
    waiting_[worker_id] = target_key;
    waiters_[target_key].push_back({worker_id, std::move(deliver)});
  }
  return std::nullopt;
}

bool LeaseQueue::CancelWait(uint64_t worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiting_.find(worker_id);
  if (it == waiting_.end()) return false;
  auto w = waiters_.find(it->second);
  if (w != waiters_.end()) {
    std::erase_if(w->second, [worker_id](const Waiter& x) { return x.worker_id == worker_id; });
    if (w->second.empty()) waiters_.erase(w);
  }
  waiting_.erase(it);
  return true;
}

size_t LeaseQueue::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

void LeaseQueue::WakeResultLocked(uint64_t batch_id) {
  auto [begin, end] = result_waiters_.equal_range(batch_id);
  for (auto it = begin; it != end; ++it) it->second->notify_one();
}

std::optional<std::pair<uint64_t, BatchSpec>> LeaseQueue::LeaseLocked(uint64_t worker_id,
                                                                      const std::string& target_key, double now) {
  auto q = queues_.find(target_key);
  if (q == queues_.end()) return std::nullopt;
  // Drops stale ids (cancelled, done, leased again) and picks the first batch of the job
  // holding the fewest leases.
  std::deque<uint64_t>& queue = q->second;
  std::erase_if(queue, [this](uint64_t id) {
    auto it = batches_.find(id);
    return it == batches_.end() || it->second.cancelled || it->second.done || it->second.worker_id != 0;
  });
  size_t pick = queue.size();
  int pick_load = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    auto held = leased_per_job_.find(batches_[queue[i]].spec.job_id);
    const int load = held == leased_per_job_.end() ? 0 : held->second;
    if (pick == queue.size() || load < pick_load) {
      pick = i;
      pick_load = load;
      if (load == 0) break;
    }
  }
  if (pick == queue.size()) return std::nullopt;
  const uint64_t id = queue[pick];
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(pick));
  Entry& e = batches_[id];
  e.worker_id = worker_id;
  e.deadline = now + lease_s_;
  ++leased_per_job_[e.spec.job_id];
  ++stats_.batches_leased;
  return std::make_pair(id, e.spec);
}

void LeaseQueue::UnleaseLocked(const Entry& e) {
  auto held = leased_per_job_.find(e.spec.job_id);
  if (held != leased_per_job_.end() && --held->second <= 0) leased_per_job_.erase(held);
}

std::optional<std::pair<uint64_t, BatchSpec>> LeaseQueue::Lease(uint64_t worker_id, const std::string& target_key,
                                                                double now) {
  std::lock_guard<std::mutex> lock(mu_);
  return LeaseLocked(worker_id, target_key, now);
}

std::optional<std::pair<uint64_t, BatchSpec>> LeaseQueue::LeaseWait(uint64_t worker_id, const std::string& target_key,
                                                                    double wait_s, double (*clock)()) {
  std::unique_lock<std::mutex> lock(mu_);
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  while (true) {
    if (auto got = LeaseLocked(worker_id, target_key, clock())) return got;
    if (ready_[target_key].wait_until(lock, end) == std::cv_status::timeout)
      return LeaseLocked(worker_id, target_key, clock());
  }
}

absl::Status LeaseQueue::Complete(uint64_t worker_id, uint64_t batch_id, std::vector<BatchResult> results) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto stale = stale_.find({worker_id, batch_id}); stale != stale_.end()) {
    // The worker lost its lease without dying and measured on: its results count unless the
    // batch was returned meanwhile (the daemon's failed results are replaced while not taken).
    auto it = batches_.find(batch_id);
    Entry* e = it == batches_.end() ? nullptr : &it->second;
    if (e != nullptr && e->cancelled) {
      stale_.erase(stale);
      return absl::AbortedError(absl::StrCat("batch ", batch_id, " was cancelled (its job ended)"));
    }
    if (e == nullptr || (e->done && !(e->failed && !e->taken))) {
      stale_.erase(stale);
      return absl::AbortedError(absl::StrCat("batch ", batch_id, " was returned by another worker first"));
    }
    if (results.size() != e->spec.configs_json.size())
      return absl::InvalidArgumentError(absl::StrCat("batch ", batch_id, " has ", e->spec.configs_json.size(),
                                                     " configs, got ", results.size(), " results"));
    stale_.erase(stale);
    if (e->worker_id != 0) {  // leased again: that worker's lease is revoked
      UnleaseLocked(*e);
      stale_.insert({e->worker_id, batch_id});
      e->worker_id = 0;
      e->deadline = 0;
    }
    e->done = true;  // a queued id is dropped at the next lease
    e->failed = false;
    stats_.results_ingested += results.size();
    e->results = std::move(results);
    WakeResultLocked(batch_id);
    return absl::OkStatus();
  }
  absl::StatusOr<Entry*> held = HeldLocked(worker_id, batch_id);
  if (!held.ok()) return held.status();
  if (*held == nullptr) return absl::AbortedError(absl::StrCat("batch ", batch_id, " was cancelled (its job ended)"));
  Entry& e = **held;
  if (results.size() != e.spec.configs_json.size())
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch_id, " has ", e.spec.configs_json.size(),
                                                   " configs, got ", results.size(), " results"));
  UnleaseLocked(e);
  e.done = true;
  stats_.results_ingested += results.size();
  e.results = std::move(results);
  WakeResultLocked(batch_id);
  return absl::OkStatus();
}

absl::StatusOr<LeaseQueue::Entry*> LeaseQueue::HeldLocked(uint64_t worker_id, uint64_t batch_id) {
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || it->second.done || it->second.worker_id != worker_id || worker_id == 0)
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_id, " does not hold batch ", batch_id));
  if (!it->second.cancelled) return &it->second;
  batches_.erase(it);
  return nullptr;
}

void LeaseQueue::RequeueLocked(uint64_t batch_id) {
  Entry& e = batches_[batch_id];
  UnleaseLocked(e);
  e.spec.queued_at = MonotonicSeconds();
  ready_[e.spec.target_key].notify_one();
  e.worker_id = 0;
  e.deadline = 0;
  queues_[e.spec.target_key].push_front(batch_id);
  HandOutLocked(e.spec.target_key);
}

void LeaseQueue::LostLocked(uint64_t batch_id) {
  Entry& e = batches_[batch_id];
  if (++e.losses < max_losses_) return RequeueLocked(batch_id);
  UnleaseLocked(e);
  e.worker_id = 0;
  e.deadline = 0;
  e.done = true;
  e.failed = true;
  const std::string why = absl::StrCat("worker lost ", e.losses, " times while measuring this batch");
  e.results.assign(e.spec.configs_json.size(), BatchResult{"runtime_error", why, {}, 0, 0, 0});
  WakeResultLocked(batch_id);
}

absl::Status LeaseQueue::Release(uint64_t worker_id, uint64_t batch_id) {
  Locked locked(this);
  if (stale_.erase({worker_id, batch_id}) > 0) return absl::OkStatus();  // nothing to put back
  absl::StatusOr<Entry*> held = HeldLocked(worker_id, batch_id);
  if (!held.ok()) return held.status();
  if (*held != nullptr) RequeueLocked(batch_id);
  return absl::OkStatus();
}

int LeaseQueue::ReleaseWorker(uint64_t worker_id, bool lost) {
  Locked locked(this);
  std::erase_if(stale_, [worker_id](const std::pair<uint64_t, uint64_t>& s) { return s.first == worker_id; });
  int n = 0;
  for (auto it = batches_.begin(); it != batches_.end();) {
    Entry& e = it->second;
    if (e.done || e.worker_id != worker_id || worker_id == 0) {
      ++it;
    } else if (e.cancelled) {
      it = batches_.erase(it);
    } else {
      if (lost) LostLocked(it->first);
      else RequeueLocked(it->first);
      ++n;
      ++it;
    }
  }
  return n;
}

std::vector<uint64_t> LeaseQueue::ExpireLeases(double now) {
  Locked locked(this);
  std::vector<uint64_t> workers;
  for (auto it = batches_.begin(); it != batches_.end();) {
    Entry& e = it->second;
    if (e.done || e.worker_id == 0 || now <= e.deadline) {
      ++it;
      continue;
    }
    workers.push_back(e.worker_id);
    if (e.cancelled) {
      it = batches_.erase(it);
      continue;
    }
    stale_.insert({e.worker_id, it->first});  // it may still be measuring: see Complete
    LostLocked(it->first);
    ++it;
  }
  return workers;
}

std::optional<std::vector<BatchResult>> LeaseQueue::AwaitResults(uint64_t batch_id, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  // Woken only when this batch is done (or a job is cancelled), not by every other batch.
  std::condition_variable cv;
  auto self = result_waiters_.emplace(batch_id, &cv);
  std::optional<std::vector<BatchResult>> out;
  while (true) {
    auto it = batches_.find(batch_id);
    if (it == batches_.end() || it->second.cancelled) break;
    if (it->second.done) {
      if (!it->second.taken) {
        it->second.taken = true;
        out = std::move(it->second.results);
      }
      break;
    }
    if (cv.wait_until(lock, end) == std::cv_status::timeout) break;
  }
  result_waiters_.erase(self);
  return out;
}

void LeaseQueue::MarkCommitted(uint64_t batch_id) {
  Locked locked(this);
  auto it = batches_.find(batch_id);
  if (it == batches_.end()) return;
  const bool failed = it->second.failed;
  if (!failed) stats_.results_committed += it->second.spec.configs_json.size();
  batches_.erase(it);
  if (!failed) SettleLocked(batch_id, true);  // a failed batch has no worker awaiting its Ack
}

void LeaseQueue::MarkDiscarded(uint64_t batch_id) {
  Locked locked(this);
  auto it = batches_.find(batch_id);
  if (it == batches_.end()) return;
  const bool failed = it->second.failed;
  batches_.erase(it);
  if (!failed) SettleLocked(batch_id, false);
}

void LeaseQueue::SettleLocked(uint64_t batch_id, bool committed) {
  if (auto cb = settled_callbacks_.find(batch_id); cb != settled_callbacks_.end()) {
    after_unlock_.push_back([settled = std::move(cb->second), committed] {
      settled(committed ? Outcome::kCommitted : Outcome::kDiscarded);
    });
    settled_callbacks_.erase(cb);
    return;
  }
  committed_[batch_id] = committed;
  if (auto w = commit_waiters_.find(batch_id); w != commit_waiters_.end()) w->second->notify_one();
}

void LeaseQueue::OnSettled(uint64_t batch_id, std::function<void(Outcome)> settled) {
  Outcome outcome;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = committed_.find(batch_id);
    if (it == committed_.end()) {
      settled_callbacks_[batch_id] = std::move(settled);
      return;
    }
    outcome = it->second ? Outcome::kCommitted : Outcome::kDiscarded;
    committed_.erase(it);
  }
  settled(outcome);
}

void LeaseQueue::ForgetSettled(uint64_t batch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  // Not yet settled: the settlement is then taken by a callback that does nothing.
  if (auto cb = settled_callbacks_.find(batch_id); cb != settled_callbacks_.end()) cb->second = [](Outcome) {};
  committed_.erase(batch_id);
}

LeaseQueue::Outcome LeaseQueue::AwaitCommitted(uint64_t batch_id, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  auto it = committed_.find(batch_id);
  if (it == committed_.end()) {
    // Woken only by this batch's settlement (one waiter per batch: its worker's stream).
    std::condition_variable cv;
    commit_waiters_[batch_id] = &cv;
    cv.wait_until(lock, end, [&] { return (it = committed_.find(batch_id)) != committed_.end(); });
    commit_waiters_.erase(batch_id);
    if (it == committed_.end()) return Outcome::kTimedOut;
  }
  const bool committed = it->second;
  committed_.erase(it);
  return committed ? Outcome::kCommitted : Outcome::kDiscarded;
}

void LeaseQueue::Cancel(uint64_t job_id) {
  Locked locked(this);
  for (auto it = batches_.begin(); it != batches_.end();) {
    Entry& e = it->second;
    if (e.spec.job_id != job_id || e.cancelled || (e.done && e.taken)) {
      ++it;  // a taken batch is settled by its measurer (MarkCommitted or MarkDiscarded)
    } else if (e.done) {
      // Returned but not yet taken: never committed now; its worker's Ack says discarded.
      const uint64_t id = it->first;
      const bool failed = e.failed;
      it = batches_.erase(it);
      if (!failed) SettleLocked(id, false);
    } else if (e.worker_id == 0) {
      it = batches_.erase(it);  // queued: its id in the queue is dropped at the next lease
    } else {
      UnleaseLocked(e);  // leased: kept until its worker returns or loses it
      e.cancelled = true;
      ++it;
    }
  }
  for (auto& [id, cv] : result_waiters_) cv->notify_one();
}

size_t LeaseQueue::Queued(const std::string& target_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  auto q = queues_.find(target_key);
  if (q == queues_.end()) return 0;
  for (uint64_t id : q->second) {
    auto it = batches_.find(id);
    if (it != batches_.end() && !it->second.cancelled && !it->second.done && it->second.worker_id == 0) ++n;
  }
  return n;
}

LeaseStats LeaseQueue::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tune::server
