// Daemon: serves the tune.v1 client and worker services over one gRPC server.
#include "server/daemon.h"

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dataset/record_database.h"
#include "grpcpp/grpcpp.h"
#include "server/grpc_status.h"
#include "server/worker_registry.h"
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

struct Daemon::Impl {
  DaemonOptions options;
  double started = MonotonicSeconds();
  WorkerRegistry registry;
  std::mutex db_mu;
  std::unique_ptr<dataset::RecordDatabase> db;
  std::unique_ptr<grpc::Server> server;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread janitor;  // expires silent workers

  explicit Impl(DaemonOptions o)
      : options(std::move(o)), registry(options.expire_after_s, options.quarantine_after) {}

  class TuneService final : public v1::Tune::Service {
   public:
    explicit TuneService(Impl* d) : d_(d) {}

    grpc::Status Health(grpc::ServerContext* ctx, const v1::HealthRequest*, v1::HealthReply* reply) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      reply->set_version(kVersion);
      reply->set_protocol(kProtocol);
      reply->set_uptime_s(MonotonicSeconds() - d_->started);
      reply->set_workers(d_->registry.LiveCount());
      reply->set_jobs_active(0);
      reply->set_db_path(d_->options.db_path);
      return grpc::Status::OK;
    }

    grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest*, v1::SubmitJobReply*) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this daemon does not run jobs yet");
    }

    grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest*,
                          grpc::ServerWriter<v1::JobEvent>*) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this daemon does not run jobs yet");
    }

    grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest*, v1::CancelJobReply*) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this daemon does not run jobs yet");
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

    grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*, v1::ListJobsReply*) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      return grpc::Status::OK;  // no job has been submitted to this daemon
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
      WorkerDesc desc{req->name(), req->host(), req->target(), req->target_key(), req->device()};
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
                      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>*) override {
      if (auto s = CheckToken(*ctx, d_->options.token); !s.ok()) return ToGrpcStatus(s);
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this daemon does not lease batches yet");
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
  d.janitor = std::thread([&d] {
    std::unique_lock<std::mutex> lock(d.mu);
    while (!d.stopping) {
      d.cv.wait_for(lock, std::chrono::milliseconds(500));
      d.registry.Expire(MonotonicSeconds());
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
}

}  // namespace tune::server
