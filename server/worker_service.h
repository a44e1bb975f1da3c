// WorkerService: the daemon's gRPC service for worker agents (register, heartbeat, Work stream).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/worker_registry.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {

/// What the daemon tells workers, and how long it waits for them.
struct WorkerServiceOptions {
  std::string token;                 // shared secret; "" = no authentication
  double heartbeat_interval_s = 2;   // what workers are told to keep
  double expire_after_s = 10;        // silent this long: a worker is expired (told to workers)
  double lease_s = 600;              // a leased batch's deadline, and the longest an Ack waits
};

/// Translates the Worker service's calls into WorkerRegistry and LeaseQueue calls. A Work
/// stream alternates Ready -> Batch -> Results -> Ack; the Ack is written once the batch's
/// results are committed (LeaseQueue::OnSettled), while the worker takes its next batch. A
/// broken stream gives the worker's batch back to the queue (a lost lease: see
/// LeaseQueue::ReleaseWorker); Results with impossible values are refused with
/// INVALID_ARGUMENT the same way. `registry`, `queue` and `dispatch` outlive the service;
/// `stopping` turns true when the daemon shuts down. Thread-safe.
///
/// Work streams hold no thread: they use gRPC's callback API. A worker waiting for a batch
/// waits in the queue (LeaseQueue::LeaseOrWait), and the thread that queues a batch starts its
/// write to the worker at once; an Ack's write is started by the thread that settles its batch
/// (the job's, after its commit). No call into the queue or the registry is made while a
/// stream's own lock is held.
class WorkerService final : public v1::Worker::WithCallbackMethod_Work<v1::Worker::Service> {
 public:
  WorkerService(WorkerServiceOptions options, WorkerRegistry* registry, LeaseQueue* queue,
                LatencyHistogram* dispatch, std::function<bool()> stopping);

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req, v1::RegisterReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatReply* reply) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* Work(grpc::CallbackServerContext* ctx) override;
  /// The worker is listed as gone; a batch it holds is requeued (not counted as lost).
  grpc::Status Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req, v1::LeaveReply* reply) override;

  /// Housekeeping, every half second or so (the daemon's janitor): streams waiting for a batch
  /// whose worker is no longer live end with NOT_FOUND, and Acks whose batch was not settled
  /// within the lease time are given up (none is written for them).
  void Sweep(double now);
  /// The daemon is stopping: streams waiting for a batch end with UNAVAILABLE now (the others
  /// end when the server shuts down).
  void StopWaiting();
  /// Work streams open now (tests).
  size_t OpenStreams() const;

 private:
  class Stream;

  grpc::Status Broken(uint64_t id, grpc::Status why);
  grpc::Status Lost(uint64_t id, uint64_t held, bool clean = false);

  const WorkerServiceOptions options_;
  WorkerRegistry* registry_;
  LeaseQueue* queue_;
  LatencyHistogram* dispatch_;
  std::function<bool()> stopping_;
  mutable std::mutex streams_mu_;
  std::map<const Stream*, std::weak_ptr<Stream>> streams_;  // open Work streams
};

}  // namespace tune::server
