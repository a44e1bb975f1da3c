// WorkerService: worker registration, heartbeats and the Work stream of leases and Acks.
#include "server/worker_service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "measure/target.h"
#include "server/grpc_status.h"
#include "server/monotonic_clock.h"
#include "server/proto_convert.h"
#include "server/wire_names.h"

namespace tune::server {

/// Writes a Work stream's Acks in the order of the returned batches, each once its batch
/// is committed (or discarded). Joined when the stream's handler returns.
class WorkerService::Acker {
 public:
  Acker(const WorkerService* service, grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream,
        std::mutex* write_mu)
      : service_(service), ctx_(ctx), stream_(stream), write_mu_(write_mu), thread_([this] { Loop(); }) {}
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
    cv_.wait_for(lock, std::chrono::duration<double>(service_->options_.lease_s), [this] { return pending_.empty() || dead_; });
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
        const double give_up = MonotonicSeconds() + service_->options_.lease_s;
        while ((outcome = service_->queue_->AwaitCommitted(next.first, 0.1)) == LeaseQueue::Outcome::kTimedOut) {
          if (ctx_->IsCancelled() || service_->stopping_() || MonotonicSeconds() > give_up || Closing()) break;
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

  const WorkerService* service_;
  grpc::ServerContext* ctx_;
  grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream_;
  std::mutex* write_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, bool>> pending_;  // batch id, discarded
  bool closing_ = false, dead_ = false;
  std::thread thread_;
};

WorkerService::WorkerService(WorkerServiceOptions options, WorkerRegistry* registry, LeaseQueue* queue,
                             LatencyHistogram* dispatch, std::function<bool()> stopping)
    : options_(std::move(options)), registry_(registry), queue_(queue), dispatch_(dispatch),
      stopping_(std::move(stopping)) {}

grpc::Status WorkerService::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                     v1::RegisterReply* reply) {
  if (auto s = CheckToken(*ctx, options_.token); !s.ok()) return ToGrpcStatus(s);
  if (req->protocol() != kWireProtocol)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("worker speaks protocol ", req->protocol(), ", this daemon ", kWireProtocol));
  const WorkerDesc desc = WorkerDescOf(*req);
  if (!desc.target_json.empty()) {
    auto t = measure::Target::FromJson(desc.target_json);
    if (!t.ok()) return ToGrpcStatus(t.status());
    if (t->Key() != desc.target_key)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "target key does not match the target description");
  }
  auto id = registry_->Register(desc, MonotonicSeconds());
  if (!id.ok()) return ToGrpcStatus(id.status());
  reply->set_worker_id(*id);
  reply->set_heartbeat_interval_s(options_.heartbeat_interval_s);
  reply->set_expire_after_s(options_.expire_after_s);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                      v1::HeartbeatReply* reply) {
  if (auto s = CheckToken(*ctx, options_.token); !s.ok()) return ToGrpcStatus(s);
  auto state = registry_->Touch(req->worker_id(), MonotonicSeconds());
  if (!state.ok()) return ToGrpcStatus(state.status());
  reply->set_state(ToProto(*state));
  return grpc::Status::OK;
}

grpc::Status WorkerService::Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req, v1::LeaveReply*) {
  if (auto s = CheckToken(*ctx, options_.token); !s.ok()) return ToGrpcStatus(s);
  if (auto s = registry_->Leave(req->worker_id(), MonotonicSeconds()); !s.ok()) return ToGrpcStatus(s);
  queue_->ReleaseWorker(req->worker_id(), /*lost=*/false);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Work(grpc::ServerContext* ctx,
                                 grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream) {
  if (auto s = CheckToken(*ctx, options_.token); !s.ok()) return ToGrpcStatus(s);
  v1::WorkerMessage msg;
  if (!stream->Read(&msg)) return grpc::Status::CANCELLED;
  if (!msg.has_ready())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the Work stream must start with Ready");
  const uint64_t id = msg.ready().worker_id();
  auto entry = registry_->Get(id);
  if (!entry.ok() || entry->state == WorkerState::kExpired)
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id, " (register again)"));
  if (entry->state == WorkerState::kQuarantined)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("worker ", id, " is quarantined"));
  const std::string key = entry->desc.target_key;
  uint64_t held = 0;
  // Acks are written by their own thread once each returned batch is committed, so the
  // worker can take its next batch meanwhile (a job's round may need it twice).
  std::mutex write_mu;
  Acker acker(this, ctx, stream, &write_mu);
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
      // A worker that left, expired or was quarantined meanwhile gets no batch (one leased to
      // it at that moment goes straight back).
      auto live = [&] {
        absl::StatusOr<WorkerEntry> e = registry_->Get(id);
        return e.ok() && (e->state == WorkerState::kIdle || e->state == WorkerState::kBusy);
      };
      while (!lease) {
        if (ctx->IsCancelled() || stopping_()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
        if (!live()) return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id));
        lease = queue_->LeaseWait(id, key, 0.25, &MonotonicSeconds);
      }
      if (!live()) {
        (void)queue_->Release(id, lease->first);
        return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id));
      }
      held = lease->first;
      registry_->SetBusy(id, true);
      v1::DaemonMessage out;
      *out.mutable_batch() = ToProto(lease->first, lease->second, options_.lease_s);
      if (!write(out)) return Lost(id, held);
      dispatch_->Record(MonotonicSeconds() - std::max(ready_at, lease->second.queued_at));
    } else if (msg.has_results()) {
      // Impossible results (negative, NaN or infinite times, ok without samples) are refused:
      // the stream ends, the batch goes back to the queue as a lost lease.
      absl::StatusOr<std::vector<BatchResult>> results = BatchResultsOf(msg.results());
      if (!results.ok()) return Broken(id, ToGrpcStatus(results.status()));
      const uint64_t batch = msg.results().batch_id();
      const size_t n = results->size();
      const absl::Status st = queue_->Complete(id, batch, *std::move(results));
      if (!st.ok() && !absl::IsAborted(st)) return Broken(id, ToGrpcStatus(st));
      held = 0;
      (void)registry_->BatchEnded(id, n, /*crashed=*/false);  // back to idle
      // Aborted: the job ended meanwhile, nothing is committed and the Ack says so.
      acker.Add(batch, absl::IsAborted(st));
    } else if (msg.has_release()) {
      if (auto st = queue_->Release(id, msg.release().batch_id()); !st.ok()) return ToGrpcStatus(st);
      held = 0;
      registry_->SetBusy(id, false);
    } else {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty worker message");
    }
    (void)registry_->Touch(id, MonotonicSeconds());
    if (!stream->Read(&msg)) {
      // The worker closed its side: the Acks still owed are written before the call ends.
      const bool clean = !ctx->IsCancelled();
      if (clean) acker.Drain();
      return Lost(id, held, clean);
    }
  }
}

/// A protocol violation: the batch the worker holds goes back to the queue, lost (it counts
/// towards failing the batch, and as a crash of the worker).
grpc::Status WorkerService::Broken(uint64_t id, grpc::Status why) {
  if (queue_->ReleaseWorker(id, /*lost=*/true) > 0) (void)registry_->BatchEnded(id, 0, /*crashed=*/true);
  registry_->SetBusy(id, false);
  return why;
}

/// The worker's stream ended: whatever it held goes back to the queue. Holding a batch
/// counts as a crash unless the worker closed its side cleanly (it was leaving while a
/// batch was on its way to it).
grpc::Status WorkerService::Lost(uint64_t id, uint64_t held, bool clean) {
  queue_->ReleaseWorker(id, /*lost=*/!clean);
  if (held != 0 && !clean) (void)registry_->BatchEnded(id, 0, /*crashed=*/true);
  registry_->SetBusy(id, false);
  return grpc::Status::CANCELLED;
}

}  // namespace tune::server
