// TuneService: the client calls, translated between proto and the daemon's parts.
#include "server/tune_service.h"

#include "absl/strings/str_cat.h"
#include "dataset/record_database.h"
#include "server/grpc_status.h"
#include "server/monotonic_clock.h"
#include "server/proto_convert.h"
#include "server/wire_names.h"

namespace tune::server {

TuneService::TuneService(std::string token, std::string db_path, dataset::RecordDatabase* db, JobManager* jobs,
                         const WorkerRegistry* registry, const LeaseQueue* queue, const LatencyHistogram* dispatch)
    : token_(std::move(token)),
      db_path_(std::move(db_path)),
      started_(MonotonicSeconds()),
      jobs_(jobs),
      registry_(registry),
      queue_(queue),
      dispatch_(dispatch),
      db_(db) {}

grpc::Status TuneService::Health(grpc::ServerContext* ctx, const v1::HealthRequest*, v1::HealthReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  reply->set_version(kDaemonVersion);
  reply->set_protocol(kWireProtocol);
  reply->set_uptime_s(MonotonicSeconds() - started_);
  reply->set_workers(registry_->LiveCount());
  reply->set_jobs_active(jobs_->ActiveCount());
  reply->set_db_path(db_path_);
  const LeaseStats stats = queue_->Stats();
  reply->set_batches_leased(stats.batches_leased);
  reply->set_results_ingested(stats.results_ingested);
  reply->set_results_committed(stats.results_committed);
  for (uint64_t c : dispatch_->Counts()) reply->add_dispatch_us_histogram(c);
  return grpc::Status::OK;
}

grpc::Status TuneService::SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                                    v1::SubmitJobReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<uint64_t> id = jobs_->Submit(*req);
  if (!id.ok()) return ToGrpcStatus(id.status());
  reply->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status TuneService::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  return ToGrpcStatus(jobs_->Watch(
      req->job_id(), [writer](const v1::JobEvent& e) { return writer->Write(e); },
      [ctx] { return ctx->IsCancelled(); }));
}

grpc::Status TuneService::CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                                    v1::CancelJobReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<v1::JobState> state = jobs_->Cancel(req->job_id());
  if (!state.ok()) return ToGrpcStatus(state.status());
  reply->set_state(*state);
  return grpc::Status::OK;
}

grpc::Status TuneService::QueryBest(grpc::ServerContext* ctx, const v1::QueryBestRequest* req,
                                    v1::QueryBestReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  std::lock_guard<std::mutex> lock(db_mu_);
  auto targets = db_->Targets();
  if (!targets.ok()) return ToGrpcStatus(targets.status());
  auto tasks = db_->Tasks();
  if (!tasks.ok()) return ToGrpcStatus(tasks.status());
  for (const auto& target : *targets) {
    if (!req->target_key().empty() && target.key != req->target_key()) continue;
    for (const auto& task : *tasks) {
      if (!req->workload_key().empty() && task.workload_key != req->workload_key()) continue;
      auto best = db_->Best(task.id, target.id, 1);
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

grpc::Status TuneService::ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest*,
                                      v1::ListWorkersReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  const double now = MonotonicSeconds();
  for (const WorkerEntry& e : registry_->List()) *reply->add_workers() = ToProto(e, now);
  return grpc::Status::OK;
}

grpc::Status TuneService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*, v1::ListJobsReply* reply) {
  if (auto s = CheckToken(*ctx, token_); !s.ok()) return ToGrpcStatus(s);
  for (v1::JobInfo& j : jobs_->List()) *reply->add_jobs() = std::move(j);
  return grpc::Status::OK;
}

}  // namespace tune::server
