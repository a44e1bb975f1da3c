// RemoteMeasurer: queue a batch, wait for a worker's results, acknowledge after the commit.
#include "server/remote_measurer.h"

namespace tune::server {

RemoteMeasurer::RemoteMeasurer(LeaseQueue* queue, uint64_t job_id, std::string target_key, uint64_t data_seed,
                               std::function<bool()> aborted)
    : queue_(queue), job_id_(job_id), target_key_(std::move(target_key)), data_seed_(data_seed),
      aborted_(std::move(aborted)) {}

std::vector<measure::MeasureResult> RemoteMeasurer::Measure(const codegen::Template& tmpl, const measure::TaskData*,
                                                            const std::vector<search::Config>& configs,
                                                            const measure::MeasureProtocol& protocol) {
  BatchSpec spec;
  spec.job_id = job_id_;
  spec.target_key = target_key_;
  spec.workload_key = tmpl.workload().Key();
  spec.data_seed = data_seed_;
  spec.protocol_json = protocol.ToJson();
  for (const search::Config& c : configs) spec.configs_json.push_back(tmpl.space().ToJson(c));
  const uint64_t id = queue_->Enqueue(std::move(spec));
  while (true) {
    if (auto results = queue_->AwaitResults(id, 0.2)) {
      last_batch_ = id;
      std::vector<measure::MeasureResult> out;
      for (const BatchResult& r : *results) out.push_back(ToMeasureResult(r));
      return out;
    }
    if (aborted_()) {
      queue_->Cancel(job_id_);
      return {};
    }
  }
}

void RemoteMeasurer::Committed() {
  if (last_batch_ != 0) queue_->MarkCommitted(last_batch_);
  last_batch_ = 0;
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
