// Daemon: start-up and shutdown of the gRPC server hosting the Tune and Worker services.
#include "server/daemon.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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
#include "grpcpp/health_check_service_interface.h"
#include "server/job_manager.h"
#include "server/job_store.h"
#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/monotonic_clock.h"
#include "server/tune_service.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"
#include "spdlog/spdlog.h"
#include "tuner/retrainer.h"

namespace tune::server {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// OK unless something already listens on `address`'s port (its port 0 picks a free one):
/// then Unavailable naming the port. A probe socket with SO_REUSEADDR only (as gRPC binds, but
/// without SO_REUSEPORT) is bound to each of the host's addresses and closed again. Other
/// bind errors are left to the server's own bind, which reports them.
absl::Status CheckPortFree(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) return absl::OkStatus();
  bool in_use = false;
  for (addrinfo* a = found; a != nullptr && !in_use; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) in_use = true;
    ::close(fd);
  }
  freeaddrinfo(found);
  if (in_use)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": port ", port,
                                               " is already in use (is another tune serve running?)"));
  return absl::OkStatus();
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
  LeaseQueue queue{options.lease_s, static_cast<int>(options.max_batch_losses)};
  LatencyHistogram dispatch;  // Ready (or the batch queued, if later) -> Batch written
  std::unique_ptr<dataset::RecordDatabase> db;
  std::unique_ptr<JobStore> job_store;
  std::unique_ptr<tuner::Retrainer> retrainer;  // null without --retrain-every; outlives `jobs`
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<TuneService> tune_service;
  std::unique_ptr<WorkerService> worker_service;
  std::unique_ptr<grpc::Server> server;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;  // guarded by mu; stopping_now mirrors it for lock-free polling
  std::atomic<bool> stopping_now{false};
  std::thread janitor;  // expires silent workers and overdue leases

  explicit Impl(DaemonOptions o)
      : options(std::move(o)), registry(options.expire_after_s, options.quarantine_after) {}

  /// Polled by every job round and stream, so it takes no lock.
  bool Stopping() const { return stopping_now.load(std::memory_order_acquire); }
};

Daemon::Daemon(DaemonOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Daemon::~Daemon() { Shutdown(0); }

absl::StatusOr<int> Daemon::Start() {
  Impl& d = *impl_;
  if (auto s = ValidateListenAddress(d.options.listen); !s.ok()) return s;
  if (d.options.db_path.empty()) return absl::InvalidArgumentError("the daemon needs a database (--db FILE)");
  if (d.options.tls_cert_path.empty() != d.options.tls_key_path.empty())
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  // Checked before anything is opened: a second daemon on a port in use writes nothing.
  if (absl::Status s = CheckPortFree(d.options.listen); !s.ok()) return s;
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
  if (d.options.retrain_every > 0) {
    tuner::RetrainerOptions ro;
    ro.db_path = d.options.db_path;
    ro.every = d.options.retrain_every;
    ro.kind = d.options.retrain_kind;
    ro.on_retrain = [kind = d.options.retrain_kind](const tuner::RetrainEvent& e) {
      if (e.error.empty()) {
        spdlog::info("retrained the {} cost model of {}: {} records, {} tasks, {} configs, {:.1f} s", kind,
                     e.target_key, e.records, e.groups, e.configs, e.seconds);
      } else {
        spdlog::warn("retraining the cost model of {} on {} records failed after {:.1f} s: {}", e.target_key,
                     e.records, e.seconds, e.error);
      }
    };
    auto retrainer = tuner::Retrainer::Start(std::move(ro));
    if (!retrainer.ok()) return retrainer.status();
    d.retrainer = std::move(*retrainer);
  }
  d.jobs = std::make_unique<JobManager>(d.options.db_path, d.job_store.get(), &d.registry, &d.queue, stopping,
                                        d.retrainer.get(), d.options.ended_jobs_kept);
  d.tune_service = std::make_unique<TuneService>(d.options.token, d.options.db_path, d.db.get(), d.jobs.get(),
                                                 &d.registry, &d.queue, &d.dispatch);
  d.worker_service = std::make_unique<WorkerService>(
      WorkerServiceOptions{d.options.token, d.options.heartbeat_interval_s, d.options.expire_after_s,
                           d.options.lease_s},
      &d.registry, &d.queue, &d.dispatch, stopping);

  // The standard grpc.health.v1.Health service beside the daemon's own Health RPC, for probes
  // that speak it (grpc_health_probe, Kubernetes' grpc probes on a plaintext port): SERVING
  // while the daemon runs, NOT_SERVING from the start of its shutdown. It needs no token.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = -1;
  // gRPC turns SO_REUSEPORT on by default: a second daemon on the same port would then start
  // and share its connections with the first. Off, the bind fails instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(d.options.listen, creds, &port);
  builder.SetMaxReceiveMessageSize(d.options.max_message_bytes);
  builder.SetMaxSendMessageSize(d.options.max_message_bytes);
  builder.RegisterService(d.tune_service.get());
  builder.RegisterService(d.worker_service.get());
  d.server = builder.BuildAndStart();
  if (!d.server || port <= 0)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", d.options.listen, " (the address is not local, or the port is in use)"));
  if (grpc::HealthCheckServiceInterface* health = d.server->GetHealthCheckService()) health->SetServingStatus(true);
  // Jobs a previous daemon left unfinished resume, skipping the configs already recorded; the
  // ones that ended are listed as they ended.
  if (absl::Status s = d.jobs->Restore(); !s.ok()) return s;
  d.janitor = std::thread([&d] {
    std::unique_lock<std::mutex> lock(d.mu);
    while (!d.stopping) {
      d.cv.wait_for(lock, std::chrono::milliseconds(500));
      if (d.stopping) break;
      lock.unlock();  // the work below may hand batches to streams and end them
      const double now = MonotonicSeconds();
      for (uint64_t w : d.registry.Expire(now)) d.queue.ReleaseWorker(w);
      for (uint64_t w : d.queue.ExpireLeases(now)) (void)d.registry.BatchEnded(w, 0, /*crashed=*/true);
      d.worker_service->Sweep(now);
      lock.lock();
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
    d.stopping_now.store(true, std::memory_order_release);
  }
  d.cv.notify_all();
  if (d.server) {
    if (grpc::HealthCheckServiceInterface* health = d.server->GetHealthCheckService())
      health->SetServingStatus(false);
  }
  // Workers waiting for a batch are told at once; the streams of workers holding one end
  // with the server's shutdown.
  if (d.worker_service) d.worker_service->StopWaiting();
  if (d.server)
    d.server->Shutdown(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000)));
  if (d.janitor.joinable()) d.janitor.join();
  if (d.jobs) d.jobs->JoinAll();
  d.retrainer.reset();  // stops its thread (after a training in progress)
}

}  // namespace tune::server
