// LeaseQueue: per-target FIFO queues, leases with deadlines, requeue on expiry or worker loss.
#include "server/lease_queue.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace tune::server {

uint64_t LeaseQueue::Enqueue(BatchSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  queues_[spec.target_key].push_back(id);
  batches_[id].spec = std::move(spec);
  changed_.notify_all();
  return id;
}

std::optional<std::pair<uint64_t, BatchSpec>> LeaseQueue::LeaseLocked(uint64_t worker_id,
                                                                      const std::string& target_key, double now) {
  auto q = queues_.find(target_key);
  if (q == queues_.end()) return std::nullopt;
  while (!q->second.empty()) {
    uint64_t id = q->second.front();
    q->second.pop_front();
    auto it = batches_.find(id);
    if (it == batches_.end() || it->second.cancelled || it->second.done || it->second.worker_id != 0) continue;
    it->second.worker_id = worker_id;
    it->second.deadline = now + lease_s_;
    return std::make_pair(id, it->second.spec);
  }
  return std::nullopt;
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
    if (changed_.wait_until(lock, end) == std::cv_status::timeout) return LeaseLocked(worker_id, target_key, clock());
  }
}

absl::Status LeaseQueue::Complete(uint64_t worker_id, uint64_t batch_id, std::vector<BatchResult> results) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || it->second.done || it->second.worker_id != worker_id || worker_id == 0)
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_id, " does not hold batch ", batch_id));
  if (results.size() != it->second.spec.configs_json.size())
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch_id, " has ", it->second.spec.configs_json.size(),
                                                   " configs, got ", results.size(), " results"));
  it->second.done = true;
  it->second.results = std::move(results);
  changed_.notify_all();
  return absl::OkStatus();
}

void LeaseQueue::RequeueLocked(uint64_t batch_id) {
  Entry& e = batches_[batch_id];
  e.worker_id = 0;
  e.deadline = 0;
  queues_[e.spec.target_key].push_front(batch_id);
}

absl::Status LeaseQueue::Release(uint64_t worker_id, uint64_t batch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || it->second.done || it->second.worker_id != worker_id || worker_id == 0)
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_id, " does not hold batch ", batch_id));
  RequeueLocked(batch_id);
  changed_.notify_all();
  return absl::OkStatus();
}

int LeaseQueue::ReleaseWorker(uint64_t worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (auto& [id, e] : batches_) {
    if (!e.done && !e.cancelled && e.worker_id == worker_id && worker_id != 0) {
      RequeueLocked(id);
      ++n;
    }
  }
  if (n > 0) changed_.notify_all();
  return n;
}

std::vector<uint64_t> LeaseQueue::ExpireLeases(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> workers;
  for (auto& [id, e] : batches_) {
    if (!e.done && !e.cancelled && e.worker_id != 0 && now > e.deadline) {
      workers.push_back(e.worker_id);
      RequeueLocked(id);
    }
  }
  if (!workers.empty()) changed_.notify_all();
  return workers;
}

std::optional<std::vector<BatchResult>> LeaseQueue::AwaitResults(uint64_t batch_id, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  while (true) {
    auto it = batches_.find(batch_id);
    if (it == batches_.end() || it->second.cancelled) {
      if (it != batches_.end()) batches_.erase(it);
      return std::nullopt;
    }
    if (it->second.done) {
      if (it->second.taken) return std::nullopt;
      it->second.taken = true;
      return std::move(it->second.results);
    }
    if (changed_.wait_until(lock, end) == std::cv_status::timeout) return std::nullopt;
  }
}

void LeaseQueue::MarkCommitted(uint64_t batch_id) {
  std::lock_guard<std::mutex> lock(mu_);
  batches_.erase(batch_id);
  committed_.insert(batch_id);
  changed_.notify_all();
}

bool LeaseQueue::AwaitCommitted(uint64_t batch_id, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  while (committed_.count(batch_id) == 0) {
    if (changed_.wait_until(lock, end) == std::cv_status::timeout) {
      if (committed_.count(batch_id) == 0) return false;
      break;
    }
  }
  committed_.erase(batch_id);
  return true;
}

void LeaseQueue::Cancel(uint64_t job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, e] : batches_)
    if (e.spec.job_id == job_id && !e.done) e.cancelled = true;
  changed_.notify_all();
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

}  // namespace tune::server
