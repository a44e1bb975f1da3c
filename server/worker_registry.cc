// WorkerRegistry: registration, heartbeats, expiry and quarantine of worker agents.
#include "server/worker_registry.h"

#include "absl/strings/str_cat.h"

namespace tune::server {

WorkerRegistry::WorkerRegistry(double expire_after_s, uint32_t quarantine_after)
    : expire_after_s_(expire_after_s), quarantine_after_(quarantine_after) {}

absl::StatusOr<uint64_t> WorkerRegistry::Register(const WorkerDesc& desc, double now) {
  if (desc.target.empty() || desc.target_key.empty())
    return absl::InvalidArgumentError("a worker must register with a target and its target key");
  std::lock_guard<std::mutex> lock(mu_);
  WorkerEntry e;
  e.id = workers_.size() + 1;
  e.desc = desc;
  e.registered_at = now;
  e.last_seen = now;
  // Registering again does not lift a quarantine: same name, host and target stay out.
  for (const WorkerEntry& old : workers_) {
    if (old.state == WorkerState::kQuarantined && old.desc.name == desc.name && old.desc.host == desc.host &&
        old.desc.target_key == desc.target_key) {
      e.state = WorkerState::kQuarantined;
      e.crashes = old.crashes;
    }
  }
  workers_.push_back(e);
  return e.id;
}

absl::StatusOr<WorkerState> WorkerRegistry::Touch(uint64_t id, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size() || workers_[id - 1].state == WorkerState::kExpired ||
      workers_[id - 1].state == WorkerState::kGone)
    return absl::NotFoundError(absl::StrCat("no live worker ", id, " (register again)"));
  WorkerEntry& e = workers_[id - 1];
  e.last_seen = now;
  return e.state;
}

std::vector<uint64_t> WorkerRegistry::Expire(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> expired;
  for (WorkerEntry& e : workers_) {
    if (e.state != WorkerState::kExpired && e.state != WorkerState::kGone && now - e.last_seen > expire_after_s_) {
      e.state = WorkerState::kExpired;
      expired.push_back(e.id);
    }
  }
  return expired;
}

absl::Status WorkerRegistry::Leave(uint64_t id, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size()) return absl::NotFoundError(absl::StrCat("no worker ", id));
  WorkerEntry& e = workers_[id - 1];
  e.last_seen = now;
  if (e.state != WorkerState::kQuarantined) e.state = WorkerState::kGone;
  return absl::OkStatus();
}

absl::Status WorkerRegistry::BatchEnded(uint64_t id, uint64_t results, bool crashed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size()) return absl::NotFoundError(absl::StrCat("no worker ", id));
  WorkerEntry& e = workers_[id - 1];
  e.results += results;
  if (crashed) {
    ++e.crashes;
    if (e.crashes >= quarantine_after_ && e.state != WorkerState::kExpired && e.state != WorkerState::kGone)
      e.state = WorkerState::kQuarantined;
  } else {
    ++e.batches;
    e.crashes = 0;
    if (e.state == WorkerState::kBusy) e.state = WorkerState::kIdle;
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerEntry> WorkerRegistry::Get(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size()) return absl::NotFoundError(absl::StrCat("no worker ", id));
  return workers_[id - 1];
}

bool WorkerRegistry::IsLive(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size()) return false;
  const WorkerState state = workers_[id - 1].state;
  return state == WorkerState::kIdle || state == WorkerState::kBusy;
}

void WorkerRegistry::SetBusy(uint64_t id, bool busy) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > workers_.size()) return;
  WorkerEntry& e = workers_[id - 1];
  if (e.state == WorkerState::kIdle || e.state == WorkerState::kBusy) e.state = busy ? WorkerState::kBusy : WorkerState::kIdle;
}

std::optional<WorkerDesc> WorkerRegistry::AnyLive(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const WorkerEntry& e : workers_) {
    bool live = e.state == WorkerState::kIdle || e.state == WorkerState::kBusy;
    std::string k = e.desc.target.substr(0, e.desc.target.find(':'));
    if (live && k == kind && !e.desc.target_json.empty()) return e.desc;
  }
  return std::nullopt;
}

std::vector<WorkerEntry> WorkerRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_;
}

uint32_t WorkerRegistry::LiveCount(const std::string& target_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = 0;
  for (const WorkerEntry& e : workers_)
    if ((e.state == WorkerState::kIdle || e.state == WorkerState::kBusy) &&
        (target_key.empty() || e.desc.target_key == target_key))
      ++n;
  return n;
}

}  // namespace tune::server
