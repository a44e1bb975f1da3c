// Daemon: the gRPC tuning server behind `tune serve` (client and worker services, token auth).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tune::server {

/// OK for "HOST:PORT" with a port in 0..65535; InvalidArgument (saying the expected form) otherwise.
absl::Status ValidateListenAddress(const std::string& address);

struct DaemonOptions {
  std::string listen = "127.0.0.1:7117";  // host:port; port 0 picks a free one
  std::string db_path;                    // record database (created when absent)
  std::string token;                      // shared secret; "" = no authentication
  std::string tls_cert_path, tls_key_path;  // PEM files; both or neither
  int max_message_bytes = 16 << 20;       // larger requests are rejected (RESOURCE_EXHAUSTED)
  double heartbeat_interval_s = 2;        // what workers are told to keep
  double expire_after_s = 10;             // silent this long: a worker is expired
  uint32_t quarantine_after = 3;          // crashes in a row that quarantine a worker
  double lease_s = 600;                   // a leased batch not returned by then is requeued
  uint32_t max_batch_losses = 3;          // leases of one batch lost (worker died, overdue) before
                                          // its configs are recorded as failed instead
  /// > 0: keep an offline cost model per target (tuner::Retrainer), retrained in the background
  /// after this many new records of the target; jobs without their own artifact start from it.
  int64_t retrain_every = 0;
  std::string retrain_kind = "xgb";       // costmodel::CreateOfflineModel's name
  /// Ended jobs kept in memory (the most recently ended); older ones are read from the jobs
  /// table when listed or asked for.
  size_t ended_jobs_kept = 256;
};

/// Owns the gRPC server, the worker registry and the record database. Start once, then Wait
/// (blocks) or Shutdown from another thread. Thread-safe after Start.
class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  /// Opens the database and starts listening. Returns the bound port. InvalidArgument for a
  /// malformed address or TLS files that cannot be read; Unavailable when the address cannot
  /// be bound, naming the port when something already listens on it (checked before the
  /// database is opened; the port is never shared); the database's error when it cannot be opened.
  absl::StatusOr<int> Start();

  /// Blocks until Shutdown.
  void Wait();

  /// Stops accepting calls and ends the ones in flight within `grace_s`. Idempotent.
  void Shutdown(double grace_s = 2);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::server
