// RemoteMeasurer: queue a batch, wait for a worker's results, acknowledge after the commit.
#include "server/remote_measurer.h"

#include <algorithm>

namespace tune::server {

RemoteMeasurer::RemoteMeasurer(LeaseQueue* queue, uint64_t job_id, std::string target_key, uint64_t data_seed,
                               std::function<int()> workers, std::function<bool()> aborted)
    : queue_(queue), job_id_(job_id), target_key_(std::move(target_key)), data_seed_(data_seed),
      workers_(std::move(workers)), aborted_(std::move(aborted)) {}

std::vector<measure::MeasureResult> RemoteMeasurer::Measure(const codegen::Template& tmpl, const measure::TaskData*,
                                                            const std::vector<search::Config>& configs,
                                                            const measure::MeasureProtocol& protocol) {
  const size_t parts = std::clamp<size_t>(workers_ ? static_cast<size_t>(std::max(0, workers_())) : 1, 1,
                                          std::max<size_t>(1, configs.size()));
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
  for (uint64_t id : ids) {
    while (true) {
      if (auto results = queue_->AwaitResults(id, 0.2)) {
        last_batches_.push_back(id);
        for (const BatchResult& r : *results) out.push_back(ToMeasureResult(r));
        break;
      }
      if (aborted_()) {
        queue_->Cancel(job_id_);
        // Batches already taken are never committed: their workers are told so.
        for (uint64_t taken : last_batches_) queue_->MarkDiscarded(taken);
        last_batches_.clear();
        return {};
      }
    }
  }
  return out;
}

void RemoteMeasurer::Committed() {
  for (uint64_t id : last_batches_) queue_->MarkCommitted(id);
  last_batches_.clear();
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
