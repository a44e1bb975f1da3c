// WorkerService: worker registration, heartbeats and the Work stream of leases and Acks.
#include "server/worker_service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "measure/target.h"
#include "server/grpc_status.h"
#include "server/monotonic_clock.h"
#include "server/proto_convert.h"
#include "server/wire_names.h"

namespace tune::server {

/// One Work stream, a gRPC callback reactor: Ready -> (wait in the queue) -> Batch written ->
/// Results -> Ready ..., with each Ack written once its batch is settled. It keeps itself
/// alive (self_) until OnDone; the queue's callbacks hold weak references. mu_ guards the
/// state below it and is never held while calling into the queue, the registry or gRPC (a
/// reaction may run inline in a Start* call).
class WorkerService::Stream final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>,
                                    public std::enable_shared_from_this<Stream> {
 public:
  Stream(WorkerService* service, grpc::CallbackServerContext* ctx) : service_(service), ctx_(ctx) {}

  /// Starts reading (or ends the call at once on a wrong token). Called once, by Work.
  void Begin() {
    self_ = shared_from_this();
    if (auto s = CheckToken(*ctx_, service_->options_.token); !s.ok()) return End(ToGrpcStatus(s));
    Read();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return ReadEnded();
    Handle();
  }

  void OnWriteDone(bool ok) override {
    double dispatch_from = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      dispatch_from = current_dispatch_from_;
    }
    // A batch or an Ack that cannot be written: the worker is gone, its batch goes back.
    if (!ok) return End(grpc::Status::CANCELLED, Loss::kLost);
    if (dispatch_from >= 0) service_->dispatch_->Record(MonotonicSeconds() - dispatch_from);
    Pump();
  }

  void OnCancel() override { End(grpc::Status::CANCELLED, Loss::kLost); }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(service_->streams_mu_);
      service_->streams_.erase(this);
    }
    std::shared_ptr<Stream> last = std::move(self_);  // may destroy this on return
  }

  void Sweep(double now) {
    std::vector<uint64_t> given_up;
    bool waiting = false;
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || id_ == 0) return;
      id = id_;
      for (PendingAck& a : acks_) {
        if (!a.settled && now - a.added_at > service_->options_.lease_s) {
          a.settled = a.given_up = true;  // never committed: no Ack
          given_up.push_back(a.batch);
        }
      }
      waiting = waiting_;
    }
    for (uint64_t b : given_up) service_->queue_->ForgetSettled(b);
    if (waiting && !service_->registry_->IsLive(id) && service_->queue_->CancelWait(id))
      return End(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id)));
    if (!given_up.empty()) Pump();
  }

  void StopWaiting() {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || !waiting_) return;
      id = id_;
    }
    if (service_->queue_->CancelWait(id)) End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
  }

 private:
  /// What ending the call means for the worker's batch: nothing (none can be held), a lost
  /// lease (the stream broke), or a broken protocol (also counted as a crash).
  enum class Loss { kNone, kLost, kBroken };
  struct PendingAck {
    uint64_t batch = 0;
    double added_at = 0;
    bool settled = false, discarded = false, given_up = false;
  };
  struct Out {
    v1::DaemonMessage message;
    double dispatch_from = -1;  // a Batch: when its dispatch started (for the histogram)
  };

  /// Starts the next read unless the call is ending.
  void Read() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || finish_called_) return;
      ++starting_;
    }
    StartRead(&in_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --starting_;
    }
    Pump();
  }

  /// The message in in_.
  void Handle() {
    WorkerService& svc = *service_;
    if (id_ == 0) {
      if (!in_.has_ready())
        return End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the Work stream must start with Ready"));
      const uint64_t id = in_.ready().worker_id();
      auto entry = svc.registry_->Get(id);
      if (!entry.ok() || entry->state == WorkerState::kExpired)
        return End(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id, " (register again)")));
      if (entry->state == WorkerState::kQuarantined)
        return End(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("worker ", id, " is quarantined")));
      std::lock_guard<std::mutex> lock(mu_);
      id_ = id;
      key_ = entry->desc.target_key;
    }
    if (in_.has_ready()) {
      uint64_t held = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        held = held_;
      }
      if (held != 0)
        return End(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("Ready while holding batch ", held)),
                   Loss::kBroken);
      if (svc.stopping_()) return End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
      // A worker that left, expired or was quarantined meanwhile gets no batch.
      if (!svc.registry_->IsLive(id_)) return End(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id_)));
      (void)svc.registry_->Touch(id_, MonotonicSeconds());
      const double now = MonotonicSeconds();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_at_ = now;
        waiting_ = true;
      }
      // Waits without a thread: the batch comes now, or through Deliver from the thread that
      // queues it. The next read starts once the batch is written.
      std::weak_ptr<Stream> weak = weak_from_this();
      LeaseQueue* queue = svc.queue_;
      const uint64_t id = id_;
      auto lease = svc.queue_->LeaseOrWait(id_, key_, now, [weak, queue, id](uint64_t batch, BatchSpec spec) {
        if (std::shared_ptr<Stream> s = weak.lock()) return s->Deliver(batch, std::move(spec));
        (void)queue->Release(id, batch);  // the stream is gone: back to the queue
      });
      if (lease) Deliver(lease->first, std::move(lease->second));
      return;
    }
    if (in_.has_results()) {
      // Impossible results (negative, NaN or infinite times, ok without samples) are refused:
      // the stream ends, the batch goes back to the queue as a lost lease.
      absl::StatusOr<std::vector<BatchResult>> results = BatchResultsOf(in_.results());
      if (!results.ok()) return End(ToGrpcStatus(results.status()), Loss::kBroken);
      const uint64_t batch = in_.results().batch_id();
      const size_t n = results->size();
      const absl::Status st = svc.queue_->Complete(id_, batch, *std::move(results));
      if (!st.ok() && !absl::IsAborted(st)) return End(ToGrpcStatus(st), Loss::kBroken);
      {
        std::lock_guard<std::mutex> lock(mu_);
        held_ = 0;
        // Aborted: the job ended meanwhile, nothing is committed and the Ack says so.
        acks_.push_back({batch, MonotonicSeconds(), absl::IsAborted(st), absl::IsAborted(st), false});
      }
      (void)svc.registry_->BatchEnded(id_, n, /*crashed=*/false);  // back to idle
      if (!absl::IsAborted(st)) {
        std::weak_ptr<Stream> weak = weak_from_this();
        svc.queue_->OnSettled(batch, [weak, batch](LeaseQueue::Outcome outcome) {
          if (std::shared_ptr<Stream> s = weak.lock()) s->Settled(batch, outcome);
        });
      } else {
        Pump();
      }
    } else if (in_.has_release()) {
      uint64_t batch = in_.release().batch_id();
      if (auto st = svc.queue_->Release(id_, batch); !st.ok()) return End(ToGrpcStatus(st));
      {
        std::lock_guard<std::mutex> lock(mu_);
        held_ = 0;
      }
      svc.registry_->SetBusy(id_, false);
    } else {
      return End(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty worker message"));
    }
    (void)svc.registry_->Touch(id_, MonotonicSeconds());
    Read();
  }

  /// A batch leased to this worker (at its Ready, or later from the thread that queued it).
  void Deliver(uint64_t batch, BatchSpec spec) {
    WorkerService& svc = *service_;
    double ready_at = 0;
    bool closed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = false;
      closed = closed_;
      ready_at = ready_at_;
    }
    if (closed) {
      (void)svc.queue_->Release(id_, batch);  // ReleaseWorker may have requeued it already
      return;
    }
    // A worker that left, expired or was quarantined meanwhile: the batch goes straight back.
    if (!svc.registry_->IsLive(id_)) {
      (void)svc.queue_->Release(id_, batch);
      return End(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no live worker ", id_)));
    }
    svc.registry_->SetBusy(id_, true);
    Out out;
    *out.message.mutable_batch() = ToProto(batch, spec, svc.options_.lease_s);
    out.dispatch_from = std::max(ready_at, spec.queued_at);
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = batch;
      if (closed_) return;  // ending: the batch goes back with the lost lease
      outbox_.push_back(std::move(out));
    }
    Pump();
    Read();
  }

  void Settled(uint64_t batch, LeaseQueue::Outcome outcome) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (PendingAck& a : acks_) {
        if (a.batch == batch && !a.settled) {
          a.settled = true;
          a.discarded = outcome == LeaseQueue::Outcome::kDiscarded;
          break;
        }
      }
    }
    Pump();
  }

  /// The worker closed its side (or the call broke before its first message).
  void ReadEnded() {
    uint64_t id = 0, held = 0;
    bool clean = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || draining_) return;
      id = id_;
      if (id != 0 && !ctx_->IsCancelled()) {
        // Closed cleanly: the Acks still owed are written before the call ends.
        draining_ = clean = true;
        held = held_;
        held_ = 0;
      }
    }
    if (id == 0) return End(grpc::Status::CANCELLED);
    if (!clean) return End(grpc::Status::CANCELLED, Loss::kLost);
    service_->Lost(id, held, /*clean=*/true);
    Pump();
  }

  /// Ends the call with `status` (once): nothing more is read or written, Acks still owed
  /// are dropped, a wait is withdrawn and the worker's batch goes back as `loss` says.
  void End(grpc::Status status, Loss loss = Loss::kNone) {
    uint64_t id = 0, held = 0;
    std::vector<uint64_t> unsettled;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (closed_) {  // ended already; a write that was under way then may have just ended
        lock.unlock();
        return Pump();
      }
      id = id_;
      closed_ = true;
      finish_status_ = status;
      outbox_.clear();
      for (const PendingAck& a : acks_)
        if (!a.settled) unsettled.push_back(a.batch);
      acks_.clear();
      held = held_;
      held_ = 0;
    }
    if (id != 0) {
      (void)service_->queue_->CancelWait(id);
      for (uint64_t b : unsettled) service_->queue_->ForgetSettled(b);
      if (loss == Loss::kBroken) (void)service_->Broken(id, status);
      if (loss == Loss::kLost) (void)service_->Lost(id, held);
    }
    Pump();
  }

  /// Moves settled Acks (in order) to the outbox, starts the next write when none is under
  /// way, and finishes the call once it is ending and nothing is being written.
  void Pump() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!acks_.empty() && acks_.front().settled) {
      const PendingAck& a = acks_.front();
      if (!a.given_up) {
        Out ack;
        ack.message.mutable_ack()->set_batch_id(a.batch);
        ack.message.mutable_ack()->set_discarded(a.discarded);
        outbox_.push_back(std::move(ack));
      }
      acks_.pop_front();
    }
    if (writing_ || finish_called_) return;
    if (!outbox_.empty()) {
      current_ = std::move(outbox_.front().message);
      current_dispatch_from_ = outbox_.front().dispatch_from;
      outbox_.pop_front();
      writing_ = true;
      lock.unlock();
      StartWrite(&current_);
      return;
    }
    if (draining_ && !closed_ && acks_.empty()) {
      closed_ = true;
      finish_status_ = grpc::Status::CANCELLED;
    }
    if (!closed_ || !finish_status_ || starting_ > 0) return;  // a Read being started pumps again
    finish_called_ = true;
    const grpc::Status status = *finish_status_;
    lock.unlock();
    Finish(status);
  }

  WorkerService* const service_;
  grpc::CallbackServerContext* const ctx_;
  std::shared_ptr<Stream> self_;  // until OnDone
  v1::WorkerMessage in_;          // the message being read; only the reading side touches it
  std::string key_;               // the worker's target key (set with id_, before any wait)

  std::mutex mu_;
  uint64_t id_ = 0;               // the worker, once its first Ready is read
  uint64_t held_ = 0;             // the batch it holds
  double ready_at_ = 0;           // its last Ready
  bool waiting_ = false;          // in the queue's LeaseOrWait
  std::deque<PendingAck> acks_;   // in the order the batches were returned
  std::deque<Out> outbox_;
  v1::DaemonMessage current_;     // being written
  double current_dispatch_from_ = -1;
  bool writing_ = false;
  int starting_ = 0;              // Start* calls under way (Finish waits for them)
  bool draining_ = false;         // the worker closed its side: Acks owed, then Finish
  bool closed_ = false;           // ending: finish_status_ is set, nothing more is read or written
  bool finish_called_ = false;
  std::optional<grpc::Status> finish_status_;
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

grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* WorkerService::Work(grpc::CallbackServerContext* ctx) {
  auto stream = std::make_shared<Stream>(this, ctx);
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_[stream.get()] = stream;
  }
  stream->Begin();
  return stream.get();
}

void WorkerService::Sweep(double now) {
  std::vector<std::shared_ptr<Stream>> open;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (const auto& [raw, weak] : streams_)
      if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  for (const auto& s : open) s->Sweep(now);
}

void WorkerService::StopWaiting() {
  std::vector<std::shared_ptr<Stream>> open;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (const auto& [raw, weak] : streams_)
      if (auto s = weak.lock()) open.push_back(std::move(s));
  }
  for (const auto& s : open) s->StopWaiting();
}

size_t WorkerService::OpenStreams() const {
  std::lock_guard<std::mutex> lock(streams_mu_);
  return streams_.size();
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
