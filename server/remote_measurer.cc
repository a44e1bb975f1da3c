// RemoteMeasurer: queue a batch, wait for a worker's results, acknowledge after the commit.
#include "server/remote_measurer.h"

#include <algorithm>
#include <atomic>

namespace tune::server {

RemoteMeasurer::RemoteMeasurer(LeaseQueue* queue, uint64_t job_id, std::string target_key, uint64_t data_seed,
                               std::function<int()> workers, std::function<bool()> aborted)
    : queue_(queue), job_id_(job_id), target_key_(std::move(target_key)), data_seed_(data_seed),
      workers_(std::move(workers)), aborted_(std::move(aborted)) {}

std::vector<measure::MeasureResult> RemoteMeasurer::Measure(const codegen::Template& tmpl, const measure::TaskData*,
                                                            const std::vector<search::Config>& configs,
                                                            const measure::MeasureProtocol& protocol) {
  // This call counts among the calls in flight until it returns.
  struct InFlight {
    std::atomic<int>& n;
    explicit InFlight(std::atomic<int>& count) : n(count) { ++n; }
    ~InFlight() { --n; }
  } in_flight(in_flight_);
  const size_t parts =
      SplitParts(workers_ ? std::max(0, workers_()) : 1, in_flight_.load(), configs.size());
  const size_t per = (configs.size() + parts - 1) / parts;
  std::vector<uint64_t> ids;
  for (size_t begin = 0; begin < configs.size(); begin += per) {
    BatchSpec spec;
    spec.job_id = job_id_;
    spec.target_key = target_key_;
    spec.workload_key = tmpl.workload().Key();
    spec.data_seed = data_seed_;
    spec.protocol_json = protocol.ToJson();
    for (size_t i = begin; i < std::min(configs.size(), begin + per); ++i)
      spec.configs_json.push_back(tmpl.space().ToJson(configs[i]));
    ids.push_back(queue_->Enqueue(std::move(spec)));
  }
  std::vector<measure::MeasureResult> out;
  out.reserve(configs.size());
  std::vector<uint64_t> taken;
  for (uint64_t id : ids) {
    while (true) {
      if (auto results = queue_->AwaitResults(id, 0.2)) {
        taken.push_back(id);
        for (const BatchResult& r : *results) out.push_back(ToMeasureResult(r));
        break;
      }
      if (aborted_()) {
        queue_->Cancel(job_id_);
        // Batches already taken are never committed: their workers are told so.
        for (uint64_t batch : TakeLast()) queue_->MarkDiscarded(batch);
        for (uint64_t batch : taken) queue_->MarkDiscarded(batch);
        return {};
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t>& last = last_batches_[std::this_thread::get_id()];
  last.insert(last.end(), taken.begin(), taken.end());
  return out;
}

size_t RemoteMeasurer::SplitParts(int workers, int in_flight, size_t configs) {
  if (configs == 0) return 1;
  const int w = std::max(1, workers), k = std::max(1, in_flight);
  const size_t parts = static_cast<size_t>((w + k - 1) / k);
  return std::clamp<size_t>(parts, 1, configs);
}

std::vector<uint64_t> RemoteMeasurer::TakeLast() {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_batches_.find(std::this_thread::get_id());
  if (it == last_batches_.end()) return {};
  std::vector<uint64_t> ids = std::move(it->second);
  last_batches_.erase(it);
  return ids;
}

void RemoteMeasurer::Committed() {
  for (uint64_t batch : TakeLast()) queue_->MarkCommitted(batch);
}

measure::MeasureResult ToMeasureResult(const BatchResult& r) {
  measure::MeasureResult m;
  auto status = measure::ParseStatusName(r.status);
  m.status = status.ok() ? *status : measure::MeasureStatus::kRuntimeError;
  m.message = status.ok() ? r.message : "worker reported an unknown status '" + r.status + "': " + r.message;
  m.costs_s = r.costs_s;
  m.number = r.number;
  m.build_s = r.build_s;
  m.wall_s = r.wall_s;
  return m;
}

}  // namespace tune::server
