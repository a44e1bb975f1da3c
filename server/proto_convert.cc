// Proto <-> domain translations of the daemon: workers, batches, results and job requests.
#include "server/proto_convert.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "measure/measure_result.h"
#include "tuner/model_file.h"

namespace tune::server {

v1::WorkerState ToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kIdle: return v1::WORKER_IDLE;
    case WorkerState::kBusy: return v1::WORKER_BUSY;
    case WorkerState::kQuarantined: return v1::WORKER_QUARANTINED;
    case WorkerState::kExpired: return v1::WORKER_EXPIRED;
    case WorkerState::kGone: return v1::WORKER_GONE;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

v1::WorkerInfo ToProto(const WorkerEntry& e, double now) {
  v1::WorkerInfo w;
  w.set_worker_id(e.id);
  w.set_name(e.desc.name);
  w.set_host(e.desc.host);
  w.set_target(e.desc.target);
  w.set_target_key(e.desc.target_key);
  w.set_state(ToProto(e.state));
  w.set_last_seen_s(now - e.last_seen);
  w.set_results(e.results);
  w.set_batches(e.batches);
  w.set_crashes(e.crashes);
  return w;
}

WorkerDesc WorkerDescOf(const v1::RegisterRequest& r) {
  return WorkerDesc{r.name(), r.host(), r.target(), r.target_key(), r.device(), r.target_json()};
}

v1::Batch ToProto(uint64_t batch_id, const BatchSpec& spec, double deadline_s) {
  v1::Batch b;
  b.set_batch_id(batch_id);
  b.set_job_id(spec.job_id);
  b.set_workload_key(spec.workload_key);
  for (const std::string& c : spec.configs_json) b.add_configs_json(c);
  b.set_protocol_json(spec.protocol_json);
  b.set_deadline_s(deadline_s);
  b.set_data_seed(spec.data_seed);
  return b;
}

absl::StatusOr<std::vector<BatchResult>> BatchResultsOf(const v1::Results& results) {
  std::vector<BatchResult> out;
  out.reserve(results.results_size());
  for (int i = 0; i < results.results_size(); ++i) {
    const v1::MeasureResult& r = results.results(i);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid result ", i, " of batch ", results.batch_id(), ": ", why));
    };
    if (r.index() != static_cast<uint32_t>(i)) return bad(absl::StrCat("index ", r.index(), ", expected ", i));
    absl::StatusOr<measure::MeasureStatus> status = measure::ParseStatusName(r.status());
    if (!status.ok()) return bad(absl::StrCat("unknown status '", r.status(), "'"));
    if (r.costs_s_size() > kMaxResultSamples)
      return bad(absl::StrCat(r.costs_s_size(), " samples, at most ", kMaxResultSamples));
    for (double c : r.costs_s())
      if (!std::isfinite(c) || c < 0) return bad(absl::StrCat("impossible time ", c, " s"));
    if (!std::isfinite(r.build_s()) || r.build_s() < 0 || !std::isfinite(r.wall_s()) || r.wall_s() < 0)
      return bad(absl::StrCat("impossible build or wall time ", r.build_s(), " s / ", r.wall_s(), " s"));
    if (r.number() > static_cast<uint32_t>(std::numeric_limits<int>::max()))
      return bad(absl::StrCat("impossible number of calls per sample ", r.number()));
    if (*status == measure::MeasureStatus::kOk && r.costs_s_size() == 0) return bad("ok without a sample");
    if (*status == measure::MeasureStatus::kOk && r.number() == 0) return bad("ok with 0 calls per sample");
    out.push_back({r.status(), r.message(), {r.costs_s().begin(), r.costs_s().end()}, static_cast<int>(r.number()),
                   r.build_s(), r.wall_s()});
  }
  return out;
}

absl::StatusOr<tuner::ZooModel> ModelOf(const v1::SubmitJobRequest& req) {
  if (req.has_zoo_name()) return tuner::GetZooModel(req.zoo_name());
  if (req.has_model_json()) return tuner::ParseModelJson(req.model_json(), req.name().empty() ? "submitted" : req.name());
  return absl::InvalidArgumentError("no model given");
}

namespace {

/// InvalidArgument "NAME must be in LO..HI, got VALUE" unless lo <= value <= hi.
template <typename T>
absl::Status InRange(const char* name, T value, T lo, T hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " must be in ", lo, "..", hi, ", got ", value));
}

/// As InRange, for a real number: NaN and infinities are out of any range.
absl::Status InRealRange(const char* name, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " must be in ", lo, "..", hi, ", got ", value));
}

}  // namespace

absl::Status CheckJobRanges(const v1::SubmitJobRequest& r) {
  using Flags = tuner::TuningFlags;
  for (absl::Status s : {InRange<uint32_t>("trials", r.trials(), 1, Flags::kMaxTrials),
                         InRange<uint32_t>("total_trials", r.total_trials(), 0, Flags::kMaxTotalTrials),
                         InRange<uint32_t>("batch", r.batch(), 0, Flags::kMaxBatch),
                         InRange<size_t>("the number of strategy options", r.strategy_options_size(), 0,
                                         kMaxStrategyOptions),
                         InRange<size_t>("the number of cost model options", r.cost_model_options_size(), 0,
                                         kMaxStrategyOptions)}) {
    if (!s.ok()) return s;
  }
  if (r.protocol_json().empty()) return absl::OkStatus();
  absl::StatusOr<measure::MeasureProtocol> p = measure::MeasureProtocol::FromJson(r.protocol_json());
  if (!p.ok()) return absl::InvalidArgumentError(p.status().message());
  return CheckProtocolRanges(*p);
}

absl::Status CheckProtocolRanges(const measure::MeasureProtocol& protocol) {
  const measure::MeasureProtocol* p = &protocol;
  for (absl::Status s : {InRange("protocol warmup", p->warmup, 0, kMaxProtocolCalls),
                         InRange("protocol repeats", p->repeats, 1, kMaxProtocolCalls),
                         InRealRange("protocol min_repeat_ms", p->min_repeat_ms, 0, kMaxProtocolSeconds * 1e3),
                         InRealRange("protocol timeout_s", p->timeout_s, 1e-3, kMaxProtocolSeconds),
                         InRealRange("protocol cutoff_s", p->cutoff_s, 0, kMaxProtocolSeconds),
                         InRealRange("protocol rtol", p->rtol, 0, 1e6), InRealRange("protocol atol", p->atol, 0, 1e6)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<tuner::TuneOptions> TuneOptionsOf(const v1::SubmitJobRequest& r) {
  if (absl::Status s = CheckJobRanges(r); !s.ok()) return s;
  tuner::TuningFlags f;
  tuner::TuneOptions& o = f.options;
  o.trials_per_task = static_cast<int>(r.trials());
  o.total_trials = static_cast<int>(r.total_trials());
  if (r.batch() > 0) o.batch = static_cast<int>(r.batch());
  o.seed = r.seed();
  if (!r.strategy().empty()) o.strategy = r.strategy();
  f.strategy_options.assign(r.strategy_options().begin(), r.strategy_options().end());
  f.cost_model_options.assign(r.cost_model_options().begin(), r.cost_model_options().end());
  if (!r.task_scheduler().empty()) o.task_scheduler = r.task_scheduler();
  if (!r.cost_model().empty()) o.cost_model = r.cost_model();
  if (!r.protocol_json().empty()) {
    absl::StatusOr<measure::MeasureProtocol> protocol = measure::MeasureProtocol::FromJson(r.protocol_json());
    if (!protocol.ok()) return absl::InvalidArgumentError(protocol.status().message());
    o.protocol = *protocol;
  }
  absl::StatusOr<tuner::TuneOptions> checked = tuner::ToTuneOptions(f);
  if (!checked.ok() || r.cost_model_artifact().empty()) return checked;
  const std::string family = r.target().substr(0, r.target().find(':'));
  const std::string source = r.cost_model_source().empty() ? "(sent with the job)" : r.cost_model_source();
  if (absl::Status st = tuner::UsePretrained(r.cost_model_artifact(), source, family, &*checked); !st.ok()) return st;
  return checked;
}

absl::Status SetTuningFlags(const tuner::TuningFlags& f, v1::SubmitJobRequest* r) {
  absl::StatusOr<tuner::TuneOptions> checked = tuner::ToTuneOptions(f);
  if (!checked.ok()) return checked.status();
  const tuner::TuneOptions& o = f.options;
  // A .tcm artifact (read and checked by ToTuneOptions) travels with the job as bytes.
  r->clear_cost_model_artifact();
  r->clear_cost_model_source();
  if (checked->pretrained != nullptr) {
    std::ifstream in(o.cost_model, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in) return absl::NotFoundError("--cost-model " + o.cost_model + ": cannot read the file");
    r->set_cost_model_artifact(bytes.str());
    r->set_cost_model_source(std::filesystem::path(o.cost_model).filename().string());
  }
  r->set_trials(o.trials_per_task);
  r->set_total_trials(o.total_trials);
  r->set_batch(o.batch);
  r->set_seed(o.seed);
  r->set_strategy(o.strategy);
  r->set_task_scheduler(o.task_scheduler);
  r->set_cost_model(checked->cost_model);
  for (const std::string& kv : f.strategy_options) r->add_strategy_options(kv);
  r->clear_cost_model_options();
  for (const std::string& kv : f.cost_model_options) r->add_cost_model_options(kv);
  r->set_protocol_json(o.protocol.ToJson());
  return absl::OkStatus();
}

}  // namespace tune::server
