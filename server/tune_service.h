// TuneService: the daemon's gRPC service for clients (health, jobs, best records, workers).
#pragma once

#include <mutex>
#include <string>

#include "server/job_manager.h"
#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/worker_registry.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::dataset {
class RecordDatabase;
}  // namespace tune::dataset

namespace tune::server {

/// Translates the Tune service's calls into JobManager, WorkerRegistry, LeaseQueue and
/// RecordDatabase calls and their answers back; each call first checks the shared token.
/// Everything passed in outlives the service. Thread-safe (gRPC calls it from many threads).
class TuneService final : public v1::Tune::Service {
 public:
  /// `token`: "" = no authentication. `db_path` is reported by Health; `db` answers
  /// QueryBest (used under the service's own lock); `dispatch` holds the worker dispatch
  /// latencies Health reports.
  TuneService(std::string token, std::string db_path, dataset::RecordDatabase* db, JobManager* jobs,
              const WorkerRegistry* registry, const LeaseQueue* queue, const LatencyHistogram* dispatch);

  grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest* req, v1::HealthReply* reply) override;
  grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                         v1::SubmitJobReply* reply) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::CancelJobReply* reply) override;
  grpc::Status QueryBest(grpc::ServerContext* ctx, const v1::QueryBestRequest* req,
                         v1::QueryBestReply* reply) override;
  grpc::Status ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest* req,
                           v1::ListWorkersReply* reply) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsReply* reply) override;

 private:
  const std::string token_;
  const std::string db_path_;
  const double started_;  // monotonic
  JobManager* jobs_;
  const WorkerRegistry* registry_;
  const LeaseQueue* queue_;
  const LatencyHistogram* dispatch_;
  std::mutex db_mu_;
  dataset::RecordDatabase* db_;  // guarded by db_mu_
};

}  // namespace tune::server
