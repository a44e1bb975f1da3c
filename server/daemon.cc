// Daemon: start-up and shutdown of the gRPC server hosting the Tune and Worker services.
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
#include "server/job_manager.h"
#include "server/job_store.h"
#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/monotonic_clock.h"
#include "server/tune_service.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"

namespace tune::server {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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
  WorkerRegistry registry;
  LeaseQueue queue{options.lease_s};
  LatencyHistogram dispatch;  // Ready (or the batch queued, if later) -> Batch written
  std::unique_ptr<dataset::RecordDatabase> db;
  std::unique_ptr<JobStore> job_store;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<TuneService> tune_service;
  std::unique_ptr<WorkerService> worker_service;
  std::unique_ptr<grpc::Server> server;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread janitor;  // expires silent workers and overdue leases

  explicit Impl(DaemonOptions o)
      : options(std::move(o)), registry(options.expire_after_s, options.quarantine_after) {}

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }
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
  auto job_store = JobStore::Open(d.options.db_path);
  if (!job_store.ok()) return job_store.status();
  d.job_store = std::move(*job_store);

  auto stopping = [&d] { return d.Stopping(); };
  d.jobs = std::make_unique<JobManager>(d.options.db_path, d.job_store.get(), &d.registry, &d.queue, stopping);
  d.tune_service = std::make_unique<TuneService>(d.options.token, d.options.db_path, d.db.get(), d.jobs.get(),
                                                 &d.registry, &d.queue, &d.dispatch);
  d.worker_service = std::make_unique<WorkerService>(
      WorkerServiceOptions{d.options.token, d.options.heartbeat_interval_s, d.options.expire_after_s,
                           d.options.lease_s},
      &d.registry, &d.queue, &d.dispatch, stopping);

  grpc::ServerBuilder builder;
  int port = -1;
  builder.AddListeningPort(d.options.listen, creds, &port);
  builder.SetMaxReceiveMessageSize(d.options.max_message_bytes);
  builder.SetMaxSendMessageSize(d.options.max_message_bytes);
  builder.RegisterService(d.tune_service.get());
  builder.RegisterService(d.worker_service.get());
  d.server = builder.BuildAndStart();
  if (!d.server || port <= 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", d.options.listen));
  // Jobs a previous daemon left unfinished resume, skipping the configs already recorded; the
  // ones that ended are listed as they ended.
  if (absl::Status s = d.jobs->Restore(); !s.ok()) return s;
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
  if (d.jobs) d.jobs->JoinAll();
}

}  // namespace tune::server
