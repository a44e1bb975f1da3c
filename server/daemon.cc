// Daemon: serves the tune.v1 client and worker services over one gRPC server.
#include "server/daemon.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <cmath>
#include <sstream>
#include <atomic>
#include <deque>
#include <list>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dataset/record_database.h"
#include "spdlog/spdlog.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "measure/target.h"
#include "search/strategy.h"
#include "server/grpc_status.h"
#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/remote_measurer.h"
#include "server/wire_names.h"
#include "server/worker_registry.h"
#include "tuner/model_file.h"
#include "tuner/tuner.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

constexpr char kVersion[] = "0.1";
constexpr uint32_t kProtocol = 1;

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

v1::WorkerState ToProto(WorkerState s) {
  switch (s) {
    case WorkerState::kIdle: return v1::WORKER_IDLE;
    case WorkerState::kBusy: return v1::WORKER_BUSY;
    case WorkerState::kQuarantined: return v1::WORKER_QUARANTINED;
    case WorkerState::kExpired: return v1::WORKER_EXPIRED;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

}  // namespace

/// "host:port" with a port in 0..65535 and a non-empty host ("[::1]:N" for IPv6).
absl::Status ValidateListenAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat("bad listen address '", address, "': expected HOST:PORT, e.g. 127.0.0.1:7117"));
  return absl::OkStatus();
}

/// The model a job request names: a zoo model, or the model file it carries.
absl::StatusOr<tuner::ZooModel> ModelOf(const v1::SubmitJobRequest& req) {
  if (req.has_zoo_name()) return tuner::GetZooModel(req.zoo_name());
  if (req.has_model_json()) return tuner::ParseModelJson(req.model_json(), req.name().empty() ? "submitted" : req.name());
  return absl::InvalidArgumentError("no model given");
}

/// A tuning job run by the daemon: its request, and the progress the tuner reports.
struct Job {
  uint64_t id = 0;
  v1::SubmitJobRequest request;
  std::string model_name;
  std::vector<tuner::TuneTask> tasks;
  double submitted_at = 0;  // Unix time
  double started = 0;       // monotonic
  std::atomic<bool> cancel{false};
  bool resumed = false;     // restarted from the database after a daemon restart
  std::thread thread;

  mutable std::mutex mu;    // guards what follows
  v1::JobState state = v1::JOB_QUEUED;
  std::string message;
  std::map<int, v1::TaskProgress> tasks_progress;  // by task index
  uint32_t trials_total = 0;
  uint32_t stored_trials_done = 0;  // a job that ended under an earlier daemon: its trials then
  double eta_s = 0;
  uint64_t version = 0;     // bumped on every change, for watchers

  v1::JobEvent Event() const {
    std::lock_guard<std::mutex> lock(mu);
    v1::JobEvent e;
    e.set_job_id(id);
    e.set_state(state);
    uint32_t done = tasks_progress.empty() ? stored_trials_done : 0;
    for (const auto& [i, t] : tasks_progress) {
      *e.add_tasks() = t;
      done += t.trials();
    }
    e.set_trials_done(done);
    e.set_trials_total(trials_total);
    e.set_elapsed_s(started > 0 ? MonotonicSeconds() - started : 0);
    e.set_eta_s(eta_s);
    e.set_message(message);
    return e;
  }

  v1::JobState State() const {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }

  void SetState(v1::JobState s, const std::string& why = "") {
    std::lock_guard<std::mutex> lock(mu);
    state = s;
    message = why;
    ++version;
  }
};

struct Daemon::Impl {
  DaemonOptions options;
  double started = MonotonicSeconds();
  WorkerRegistry registry;
  LeaseQueue queue{options.lease_s};
  LatencyHistogram dispatch;  // Ready (or the batch queued, if later) -> Batch written
  std::mutex jobs_mu;
  std::list<std::unique_ptr<Job>> jobs;
  std::mutex db_mu;
  std::unique_ptr<dataset::RecordDatabase> db;
  std::unique_ptr<grpc::Server> server;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread janitor;  // expires silent workers

  explicit Impl(DaemonOptions o)
      : options(std::move(o)), registry(options.expire_after_s, options.quarantine_after) {}

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }

  /// Sets a job's state and stores it (with its trial counts once it has ended), unless the
  /// daemon is stopping: then the stored state stays "running" (or "queued") and a restarted
  /// daemon resumes the job.
  void SetJob(Job* job, v1::JobState state, const std::string& why = "") {
    job->SetState(state, why);
    if (Stopping()) return;
    int64_t done = -1, total = -1;
    if (IsFinished(state)) {
      const v1::JobEvent e = job->Event();
      done = e.trials_done();
      total = e.trials_total();
    }
    std::lock_guard<std::mutex> lock(db_mu);
    if (auto st = db->SetJobState(static_cast<int64_t>(job->id), JobStateName(state), why, done, total); !st.ok())
      spdlog::warn("job {}: cannot store its state: {}", job->id, std::string(st.message()));
  }

  /// A job that ended under an earlier daemon, as the database has it: listed and watchable
  /// (its final state), never run.
  void AddEnded(const dataset::JobRow& row, const v1::SubmitJobRequest& req, v1::JobState state) {
    auto job = std::make_unique<Job>();
    job->id = static_cast<uint64_t>(row.id);
    job->request = req;
    absl::StatusOr<tuner::ZooModel> model = ModelOf(req);
    job->model_name = model.ok() ? model->name : "?";
    job->submitted_at = row.submitted;
    job->state = state;
    job->message = row.message;
    job->trials_total = static_cast<uint32_t>(row.trials_total);
    job->stored_trials_done = static_cast<uint32_t>(row.trials_done);
    std::lock_guard<std::mutex> lock(jobs_mu);
    jobs.push_back(std::move(job));
  }

  /// Creates the job's in-memory entry and starts its thread. Caller validated the request.
  absl::StatusOr<Job*> Launch(uint64_t id, const v1::SubmitJobRequest& req, bool resumed) {
    absl::StatusOr<tuner::ZooModel> model = ModelOf(req);
    if (!model.ok()) return model.status();
    auto job = std::make_unique<Job>();
    job->id = id;
    job->request = req;
    job->resumed = resumed;
    job->model_name = model->name;
    job->tasks = tuner::ExtractTasks(*model);
    job->submitted_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Job* raw = job.get();
    {
      std::lock_guard<std::mutex> lock(jobs_mu);
      jobs.push_back(std::move(job));
    }
    raw->thread = std::thread([this, raw] { RunJob(raw); });
    return raw;
  }

  Job* FindJob(uint64_t id) {
    std::lock_guard<std::mutex> lock(jobs_mu);
    for (auto& j : jobs)
      if (j->id == id) return j.get();
    return nullptr;
  }

  /// The job's thread: waits for a worker of its target kind, then runs the tuner with a
  /// RemoteMeasurer on its own connection to the database.
  void RunJob(Job* job) {
    const std::string kind = job->request.target().substr(0, job->request.target().find(':'));
    std::optional<WorkerDesc> worker;
    while (!job->cancel && !Stopping()) {
      if ((worker = registry.AnyLive(kind))) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!worker) {
      if (job->cancel) SetJob(job, v1::JOB_CANCELLED, "cancelled before it started");
      return;  // the daemon is stopping: the job stays queued in the database
    }
    auto target = measure::Target::FromJson(worker->target_json);
    if (!target.ok()) return SetJob(job, v1::JOB_FAILED, std::string(target.status().message()));
    auto db = dataset::RecordDatabase::Open(options.db_path);
    if (!db.ok()) return SetJob(job, v1::JOB_FAILED, std::string(db.status().message()));

    const v1::SubmitJobRequest& r = job->request;
    tuner::TuneOptions o;
    o.trials_per_task = static_cast<int>(r.trials());
    o.total_trials = static_cast<int>(r.total_trials());
    if (r.batch() > 0) o.batch = static_cast<int>(r.batch());
    o.seed = r.seed();
    if (!r.strategy().empty()) o.strategy = r.strategy();
    if (!r.task_scheduler().empty()) o.task_scheduler = r.task_scheduler();
    if (!r.cost_model().empty()) o.cost_model = r.cost_model();
    for (const std::string& kv : r.strategy_options()) {
      if (auto st = search::SetStrategyOption(o.strategy_options, kv); !st.ok())
        return SetJob(job, v1::JOB_FAILED, std::string(st.message()));
    }
    if (!r.protocol_json().empty()) {
      auto protocol = measure::MeasureProtocol::FromJson(r.protocol_json());
      if (!protocol.ok()) return SetJob(job, v1::JOB_FAILED, std::string(protocol.status().message()));
      o.protocol = *protocol;
    }
    o.command = absl::StrCat("submit ", job->model_name, " --target ", r.target(), " (job ", job->id, ")");
    o.should_stop = [job, this] { return job->cancel.load() || Stopping(); };
    o.resume = job->resumed;
    SetJob(job, v1::JOB_RUNNING);
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->trials_total = o.total_trials > 0 ? o.total_trials
                                             : o.trials_per_task * static_cast<uint32_t>(job->tasks.size());
      ++job->version;
    }
    job->started = MonotonicSeconds();
    const std::string key = target->Key();
    auto measurer = std::make_unique<RemoteMeasurer>(
        &queue, job->id, key, tuner::TaskDataSeed(o.seed),
        [this, key] { return static_cast<int>(registry.LiveCount(key)); }, [this] { return Stopping(); });
    tuner::Tuner tuner(db->get(), *target, std::move(measurer), o, [job](const tuner::ProgressEvent& e) {
      std::lock_guard<std::mutex> lock(job->mu);
      v1::TaskProgress& t = job->tasks_progress[e.task_index];
      if (e.task) {
        t.set_workload_key(e.task->workload.Key());
        t.set_count(e.task->count);
      }
      t.set_trials(e.trials);
      t.set_best_s(std::isfinite(e.best_s) ? e.best_s : 0);
      job->eta_s = e.eta_s;
      ++job->version;
    });
    auto outcomes = tuner.Run(job->tasks);
    if (!outcomes.ok()) return SetJob(job, v1::JOB_FAILED, std::string(outcomes.status().message()));
    {
      std::lock_guard<std::mutex> lock(job->mu);
      for (size_t i = 0; i < outcomes->size(); ++i) {
        const tuner::TaskOutcome& out = (*outcomes)[i];
        v1::TaskProgress& t = job->tasks_progress[static_cast<int>(i)];
        t.set_task_id(out.task_id);
        t.set_workload_key(out.task.workload.Key());
        t.set_count(out.task.count);
        t.set_trials(out.trials);
        t.set_ok(out.trials - out.failed);
        t.set_best_s(std::isfinite(out.best_s) ? out.best_s : 0);
        t.set_default_s(std::isfinite(out.default_s) ? out.default_s : 0);
      }
    }
    if (job->cancel) SetJob(job, v1::JOB_CANCELLED, "cancelled");
    else if (Stopping()) job->SetState(v1::JOB_FAILED, "the daemon stopped; it resumes when the daemon restarts");
    else SetJob(job, v1::JOB_DONE);
  }

  class TuneService final : public v1::Tune::Service {
   public:
    explicit TuneService(Impl* d) : d_(d) {}

    grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest*, v1::HealthReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      reply->set_version(kVersion);
      reply->set_protocol(kProtocol);
      reply->set_uptime_s(MonotonicSeconds() - d_->started);
      reply->set_workers(d_->registry.LiveCount());
      uint32_t active = 0;
      {
        std::lock_guard<std::mutex> lock(d_->jobs_mu);
        for (const auto& job : d_->jobs) active += !IsFinished(job->State());
      }
      reply->set_jobs_active(active);
      reply->set_db_path(d_->options.db_path);
      const LeaseStats stats = d_->queue.Stats();
      reply->set_batches_leased(stats.batches_leased);
      reply->set_results_ingested(stats.results_ingested);
      reply->set_results_committed(stats.results_committed);
      for (uint64_t c : d_->dispatch.Counts()) reply->add_dispatch_us_histogram(c);
      return grpc::Status::OK;
    }

    grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                           v1::SubmitJobReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      auto invalid = [](const std::string& why) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why); };
      const std::string& target = req->target();
      if (target != "llvm" && target != "cuda" && target.rfind("cuda:", 0) != 0)
        return invalid("target must be llvm or cuda[:N], got '" + target + "'");
      if (req->trials() < 1 || req->trials() > 1000000) return invalid("trials must be in 1..1000000");
      absl::StatusOr<tuner::ZooModel> model = ModelOf(*req);
      if (!model.ok()) return invalid(std::string(model.status().message()));
      if (!req->strategy().empty()) {
        search::ConfigSpace probe;
        probe.AddChoice("x", {0, 1});
        if (auto s = search::SearchStrategy::Create(req->strategy(), &probe, {}); !s.ok())
          return invalid(std::string(s.status().message()));
      }
      std::string json;
      if (!google::protobuf::util::MessageToJsonString(*req, &json).ok())
        return grpc::Status(grpc::StatusCode::INTERNAL, "cannot serialise the request");
      absl::StatusOr<int64_t> id;
      {
        std::lock_guard<std::mutex> lock(d_->db_mu);
        id = d_->db->AddJob(json, "queued");
      }
      if (!id.ok()) return ToGrpcStatus(id.status());
      auto raw_or = d_->Launch(static_cast<uint64_t>(*id), *req, /*resumed=*/false);
      if (!raw_or.ok()) return ToGrpcStatus(raw_or.status());
      Job* raw = *raw_or;
      reply->set_job_id(raw->id);
      return grpc::Status::OK;
    }

    grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                          grpc::ServerWriter<v1::JobEvent>* writer) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      Job* job = d_->FindJob(req->job_id());
      if (!job) return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job ", req->job_id()));
      uint64_t seen = ~0ull;
      while (!ctx->IsCancelled()) {
        uint64_t version;
        {
          std::lock_guard<std::mutex> lock(job->mu);
          version = job->version;
        }
        if (version != seen) {
          seen = version;
          v1::JobEvent e = job->Event();
          if (!writer->Write(e)) break;
          if (IsFinished(e.state())) break;
        }
        if (d_->Stopping()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the daemon is shutting down");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      return grpc::Status::OK;
    }

    grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                           v1::CancelJobReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      Job* job = d_->FindJob(req->job_id());
      if (!job) return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job ", req->job_id()));
      job->cancel = true;
      std::lock_guard<std::mutex> lock(job->mu);
      reply->set_state(job->state);
      return grpc::Status::OK;
    }

    grpc::Status QueryBest(grpc::ServerContext* ctx, const v1::QueryBestRequest* req,
                           v1::QueryBestReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      std::lock_guard<std::mutex> lock(d_->db_mu);
      auto targets = d_->db->Targets();
      if (!targets.ok()) return ToGrpcStatus(targets.status());
      auto tasks = d_->db->Tasks();
      if (!tasks.ok()) return ToGrpcStatus(tasks.status());
      for (const auto& target : *targets) {
        if (!req->target_key().empty() && target.key != req->target_key()) continue;
        for (const auto& task : *tasks) {
          if (!req->workload_key().empty() && task.workload_key != req->workload_key()) continue;
          auto best = d_->db->Best(task.id, target.id, 1);
          if (!best.ok()) return ToGrpcStatus(best.status());
          for (const auto& r : *best) {
            v1::BestRecord* b = reply->add_records();
            b->set_workload_key(task.workload_key);
            b->set_target_key(target.key);
            b->set_config_json(r.config_json);
            b->set_median_s(r.result.Median());
            b->set_record_id(r.id);
          }
        }
      }
      return grpc::Status::OK;
    }

    grpc::Status ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest*,
                             v1::ListWorkersReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      const double now = MonotonicSeconds();
      for (const WorkerEntry& e : d_->registry.List()) {
        v1::WorkerInfo* w = reply->add_workers();
        w->set_worker_id(e.id);
        w->set_name(e.desc.name);
        w->set_host(e.desc.host);
        w->set_target(e.desc.target);
        w->set_target_key(e.desc.target_key);
        w->set_state(ToProto(e.state));
        w->set_last_seen_s(now - e.last_seen);
        w->set_results(e.results);
        w->set_batches(e.batches);
        w->set_crashes(e.crashes);
      }
      return grpc::Status::OK;
    }

    grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*, v1::ListJobsReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      std::lock_guard<std::mutex> lock(d_->jobs_mu);
      for (const auto& job : d_->jobs) {
        v1::JobEvent e = job->Event();
        v1::JobInfo* j = reply->add_jobs();
        j->set_job_id(job->id);
        j->set_name(job->request.name());
        j->set_model(job->model_name);
        j->set_target(job->request.target());
        j->set_state(e.state());
        j->set_trials_done(e.trials_done());
        j->set_trials_total(e.trials_total());
        j->set_submitted_at(job->submitted_at);
      }
      return grpc::Status::OK;
    }

   private:
    Impl* d_;
  };

  class WorkerService final : public v1::Worker::Service {
   public:
    explicit WorkerService(Impl* d) : d_(d) {}

    grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                          v1::RegisterReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      if (req->protocol() != kProtocol)
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            absl::StrCat("worker speaks protocol ", req->protocol(), ", this daemon ", kProtocol));
      WorkerDesc desc{req->name(), req->host(), req->target(), req->target_key(), req->device(), req->target_json()};
      if (!desc.target_json.empty()) {
        auto t = measure::Target::FromJson(desc.target_json);
        if (!t.ok()) return ToGrpcStatus(t.status());
        if (t->Key() != desc.target_key)
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "target key does not match the target description");
      }
      auto id = d_->registry.Register(desc, MonotonicSeconds());
      if (!id.ok()) return ToGrpcStatus(id.status());
      reply->set_worker_id(*id);
      reply->set_heartbeat_interval_s(d_->options.heartbeat_interval_s);
      reply->set_expire_after_s(d_->options.expire_after_s);
      return grpc::Status::OK;
    }

    grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                           v1::HeartbeatReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      auto state = d_->registry.Touch(req->worker_id(), MonotonicSeconds());
      if (!state.ok()) return ToGrpcStatus(state.status());
      reply->set_state(ToProto(*state));
      return grpc::Status::OK;
    }

    grpc::Status Work(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      v1::WorkerMessage msg;
      if (!stream->Read(&msg)) return grpc::Status::CANCELLED;
      if (!msg.has_ready())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the Work stream must start with Ready");
      const uint64_t id = msg.ready().worker_id();
      auto entry = d_->registry.Get(id);
      if (!entry.ok() || entry->state == WorkerState::kExpired)
        return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id, " (register again)"));
      if (entry->state == WorkerState::kQuarantined)
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("worker ", id, " is quarantined"));
      const std::string key = entry->desc.target_key;
      uint64_t held = 0;
      // Acks are written by their own thread once each returned batch is committed, so the
      // worker can take its next batch meanwhile (a job's round may need it twice).
      std::mutex write_mu;
      Acker acker(d_, ctx, stream, &write_mu);
      auto write = [&](const v1::DaemonMessage& m) {
        std::lock_guard<std::mutex> lock(write_mu);
        return stream->Write(m);
      };
      while (true) {
        if (msg.has_ready()) {
          if (held != 0)
            return Broken(id, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                           absl::StrCat("Ready while holding batch ", held)));
          const double ready_at = MonotonicSeconds();
          std::optional<std::pair<uint64_t, BatchSpec>> lease;
          while (!lease) {
            if (ctx->IsCancelled() || d_->Stopping()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
            lease = d_->queue.LeaseWait(id, key, 0.25, &MonotonicSeconds);
          }
          held = lease->first;
          d_->registry.SetBusy(id, true);
          v1::DaemonMessage out;
          v1::Batch* b = out.mutable_batch();
          b->set_batch_id(lease->first);
          b->set_job_id(lease->second.job_id);
          b->set_workload_key(lease->second.workload_key);
          for (const auto& c : lease->second.configs_json) b->add_configs_json(c);
          b->set_protocol_json(lease->second.protocol_json);
          b->set_deadline_s(d_->options.lease_s);
          b->set_data_seed(lease->second.data_seed);
          if (!write(out)) return Lost(id, held);
          d_->dispatch.Record(MonotonicSeconds() - std::max(ready_at, lease->second.queued_at));
        } else if (msg.has_results()) {
          std::vector<BatchResult> results;
          for (const auto& r : msg.results().results()) {
            results.push_back({r.status(), r.message(), {r.costs_s().begin(), r.costs_s().end()},
                               static_cast<int>(r.number()), r.build_s(), r.wall_s()});
          }
          const uint64_t batch = msg.results().batch_id();
          const size_t n = results.size();
          const absl::Status st = d_->queue.Complete(id, batch, std::move(results));
          if (!st.ok() && !absl::IsAborted(st)) return Broken(id, ToGrpcStatus(st));
          held = 0;
          (void)d_->registry.BatchEnded(id, n, /*crashed=*/false);  // back to idle
          // Aborted: the job ended meanwhile, nothing is committed and the Ack says so.
          acker.Add(batch, absl::IsAborted(st));
        } else if (msg.has_release()) {
          if (auto st = d_->queue.Release(id, msg.release().batch_id()); !st.ok()) return ToGrpcStatus(st);
          held = 0;
          d_->registry.SetBusy(id, false);
        } else {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty worker message");
        }
        (void)d_->registry.Touch(id, MonotonicSeconds());
        if (!stream->Read(&msg)) {
          // The worker closed its side: the Acks still owed are written before the call ends.
          const bool clean = !ctx->IsCancelled();
          if (clean) acker.Drain();
          return Lost(id, held, clean);
        }
      }
    }

    /// Writes a Work stream's Acks in the order of the returned batches, each once its batch
    /// is committed (or discarded). Joined when the stream's handler returns.
    class Acker {
     public:
      Acker(Impl* d, grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream,
            std::mutex* write_mu)
          : d_(d), ctx_(ctx), stream_(stream), write_mu_(write_mu), thread_([this] { Loop(); }) {}
      ~Acker() {
        {
          std::lock_guard<std::mutex> lock(mu_);
          closing_ = true;
        }
        cv_.notify_all();
        thread_.join();
      }
      void Add(uint64_t batch, bool discarded) {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back({batch, discarded});
        cv_.notify_all();
      }
      /// Waits (up to the lease time) until every pending Ack is written or cannot be.
      void Drain() {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::duration<double>(d_->options.lease_s), [this] { return pending_.empty() || dead_; });
      }

     private:
      void Loop() {
        while (true) {
          std::pair<uint64_t, bool> next;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [this] { return closing_ || !pending_.empty(); });
            if (pending_.empty()) return;
            next = pending_.front();
          }
          LeaseQueue::Outcome outcome = LeaseQueue::Outcome::kDiscarded;
          if (!next.second) {
            const double give_up = MonotonicSeconds() + d_->options.lease_s;
            while ((outcome = d_->queue.AwaitCommitted(next.first, 0.1)) == LeaseQueue::Outcome::kTimedOut) {
              if (ctx_->IsCancelled() || d_->Stopping() || MonotonicSeconds() > give_up || Closing()) break;
            }
          }
          bool failed = false;
          if (outcome != LeaseQueue::Outcome::kTimedOut) {  // a batch never committed gets no Ack
            v1::DaemonMessage ack;
            ack.mutable_ack()->set_batch_id(next.first);
            ack.mutable_ack()->set_discarded(outcome == LeaseQueue::Outcome::kDiscarded);
            std::lock_guard<std::mutex> lock(*write_mu_);
            failed = !stream_->Write(ack);
          }
          std::lock_guard<std::mutex> lock(mu_);
          pending_.pop_front();
          if (failed) dead_ = true;
          cv_.notify_all();
          if (dead_) return;
        }
      }
      bool Closing() {
        std::lock_guard<std::mutex> lock(mu_);
        return closing_;
      }

      Impl* d_;
      grpc::ServerContext* ctx_;
      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream_;
      std::mutex* write_mu_;
      std::mutex mu_;
      std::condition_variable cv_;
      std::deque<std::pair<uint64_t, bool>> pending_;  // batch id, discarded
      bool closing_ = false, dead_ = false;
      std::thread thread_;
    };

    /// A protocol violation: the batch the worker holds goes back to the queue.
    grpc::Status Broken(uint64_t id, grpc::Status why) {
      d_->queue.ReleaseWorker(id);
      d_->registry.SetBusy(id, false);
      return why;
    }

    /// The worker's stream ended: whatever it held goes back to the queue. Holding a batch
    /// counts as a crash unless the worker closed its side cleanly (it was leaving while a
    /// batch was on its way to it).
    grpc::Status Lost(uint64_t id, uint64_t held, bool clean = false) {
      d_->queue.ReleaseWorker(id);
      if (held != 0 && !clean) (void)d_->registry.BatchEnded(id, 0, /*crashed=*/true);
      d_->registry.SetBusy(id, false);
      return grpc::Status::CANCELLED;
    }

   private:
    Impl* d_;
  };

  TuneService tune_service{this};
  WorkerService worker_service{this};
};

Daemon::Daemon(DaemonOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Daemon::~Daemon() { Shutdown(0); }

absl::StatusOr<int> Daemon::Start() {
  Impl& d = *impl_;
  if (auto s = ValidateListenAddress(d.options.listen); !s.ok()) return s;
  if (d.options.db_path.empty()) return absl::InvalidArgumentError("the daemon needs a database (--db FILE)");
  if (d.options.tls_cert_path.empty() != d.options.tls_key_path.empty())
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!d.options.tls_cert_path.empty()) {
    auto cert = ReadWholeFile(d.options.tls_cert_path, "TLS certificate");
    if (!cert.ok()) return cert.status();
    auto key = ReadWholeFile(d.options.tls_key_path, "TLS key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  auto db = dataset::RecordDatabase::Open(d.options.db_path);
  if (!db.ok()) return db.status();
  d.db = std::move(*db);

  grpc::ServerBuilder builder;
  int port = -1;
  builder.AddListeningPort(d.options.listen, creds, &port);
  builder.SetMaxReceiveMessageSize(d.options.max_message_bytes);
  builder.SetMaxSendMessageSize(d.options.max_message_bytes);
  builder.RegisterService(&d.tune_service);
  builder.RegisterService(&d.worker_service);
  d.server = builder.BuildAndStart();
  if (!d.server || port <= 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", d.options.listen));
  // Jobs a previous daemon left unfinished resume, skipping the configs already recorded; the
  // ones that ended are listed as they ended.
  auto stored = d.db->Jobs();
  if (!stored.ok()) return stored.status();
  for (const dataset::JobRow& row : *stored) {
    const v1::JobState state = JobStateFromName(row.state);
    if (!IsFinished(state) && state != v1::JOB_QUEUED && state != v1::JOB_RUNNING) continue;
    v1::SubmitJobRequest req;
    if (!google::protobuf::util::JsonStringToMessage(row.request_json, &req).ok()) {
      if (!IsFinished(state)) (void)d.db->SetJobState(row.id, "failed", "stored request cannot be read");
      continue;
    }
    if (IsFinished(state)) {
      d.AddEnded(row, req, state);
      continue;
    }
    if (auto job = d.Launch(static_cast<uint64_t>(row.id), req, /*resumed=*/true); !job.ok())
      (void)d.db->SetJobState(row.id, "failed", std::string(job.status().message()));
  }
  d.janitor = std::thread([&d] {
    std::unique_lock<std::mutex> lock(d.mu);
    while (!d.stopping) {
      d.cv.wait_for(lock, std::chrono::milliseconds(500));
      const double now = MonotonicSeconds();
      for (uint64_t w : d.registry.Expire(now)) d.queue.ReleaseWorker(w);
      for (uint64_t w : d.queue.ExpireLeases(now)) (void)d.registry.BatchEnded(w, 0, /*crashed=*/true);
    }
  });
  return port;
}

void Daemon::Wait() {
  if (impl_->server) impl_->server->Wait();
}

void Daemon::Shutdown(double grace_s) {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.stopping) return;
    d.stopping = true;
  }
  d.cv.notify_all();
  if (d.server)
    d.server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000)));
  if (d.janitor.joinable()) d.janitor.join();
  std::lock_guard<std::mutex> lock(d.jobs_mu);
  for (auto& job : d.jobs)
    if (job->thread.joinable()) job->thread.join();
}

}  // namespace tune::server
