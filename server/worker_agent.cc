// WorkerAgent: registration, heartbeats and reconnection with backoff.
#include "server/worker_agent.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/table.h"
#include "grpcpp/grpcpp.h"
#include "codegen/ir/workload.h"
#include "measure/measure_result.h"
#include "measure/target.h"
#include "measure/task.h"
#include "measure/task_factory.h"
#include "server/grpc_status.h"
#include "server/proto_convert.h"
#include "server/task_cache.h"
#include "server/wire_names.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

using Clock = std::chrono::steady_clock;

/// Deadline of the unary calls to the daemon (Register, Heartbeat), seconds.
constexpr double kCallDeadlineS = 5;

/// Deadline of the goodbye (Leave) on the way out, seconds.
constexpr double kLeaveDeadlineS = 2;

/// When a stop was first seen, and whether the grace after it is over. Thread-safe.
class StopClock {
 public:
  StopClock(const std::function<bool()>& should_stop, double grace_s) : should_stop_(should_stop), grace_s_(grace_s) {}
  bool Requested() {
    if (!should_stop_()) return false;
    int64_t expected = 0;
    since_ns_.compare_exchange_strong(expected, Now());
    return true;
  }
  /// A stop was requested more than grace_s + `extra_s` ago.
  bool GraceOver(double extra_s = 0) {
    if (!Requested()) return false;
    return static_cast<double>(Now() - since_ns_.load()) * 1e-9 > grace_s_ + extra_s;
  }

 private:
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count() | 1;
  }
  const std::function<bool()>& should_stop_;
  const double grace_s_;
  std::atomic<int64_t> since_ns_{0};
};

/// The results of a batch measured on its own thread.
struct MeasuredBatch {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  v1::Results results;
};

/// Failures a retry cannot fix: the agent gives up on them.
bool IsPermanent(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::FAILED_PRECONDITION || code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::UNIMPLEMENTED;
}

/// Sleeps `s` seconds in 50 ms steps; false when a stop was requested meanwhile.
bool SleepUnlessStopped(double s, const std::function<bool()>& should_stop) {
  auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  while (Clock::now() < end) {
    if (should_stop()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !should_stop();
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}


/// What a worker keeps between batches: its tasks (TaskCache: each task's random inputs, and
/// its reference, drawn once while it is kept) and the current batch's task.
struct BatchCache {
  std::unique_ptr<TaskCache> tasks;
  measure::Task* task = nullptr;  // the current batch's (one of tasks), null after an error

  /// Makes the task of `batch` current; the template's error otherwise.
  absl::Status Prepare(const v1::Batch& batch) {
    task = nullptr;
    absl::StatusOr<measure::Task*> got = tasks->Get(batch.workload_key(), batch.data_seed());
    if (!got.ok()) return got.status();
    task = *got;
    return absl::OkStatus();
  }
};

/// Builds and measures one leased batch on this host. Never fails as a whole: a config that
/// cannot be parsed, or a workload this build cannot instantiate, becomes that config's
/// invalid_config result.
v1::Results MeasureBatch(const v1::Batch& batch, BatchCache& cache) {
  v1::Results out;
  out.set_batch_id(batch.batch_id());
  const int n = batch.configs_json_size();
  std::vector<measure::MeasureResult> results(n);
  auto fail_all = [&](const absl::Status& why) {
    for (auto& r : results) {
      r.status = measure::MeasureStatus::kInvalidConfig;
      r.message = std::string(why.message());
    }
  };
  auto protocol = measure::MeasureProtocol::FromJson(batch.protocol_json());
  if (!protocol.ok()) {
    fail_all(protocol.status());
  } else if (absl::Status st = CheckProtocolRanges(*protocol); !st.ok()) {
    fail_all(st);
  } else if (absl::Status st = cache.Prepare(batch); !st.ok()) {
    fail_all(st);
  } else {
    const search::ConfigSpace& space = cache.task->space();
    std::vector<search::Config> configs;
    std::vector<int> where;
    for (int i = 0; i < n; ++i) {
      auto c = space.FromJson(batch.configs_json(i));
      if (!c.ok() || !space.IsValid(*c)) {
        results[i].status = measure::MeasureStatus::kInvalidConfig;
        results[i].message = c.ok() ? "config violates " + space.WhyInvalid(*c) : std::string(c.status().message());
        continue;
      }
      configs.push_back(*c);
      where.push_back(i);
    }
    if (!configs.empty()) {
      auto measured = cache.task->Measure(configs, *protocol);
      for (size_t k = 0; k < measured.size() && k < where.size(); ++k) results[where[k]] = measured[k];
    }
  }
  for (int i = 0; i < n; ++i) {
    const measure::MeasureResult& r = results[i];
    v1::MeasureResult* m = out.add_results();
    m->set_index(static_cast<uint32_t>(i));
    m->set_status(measure::StatusName(r.status));
    m->set_message(r.message);
    for (double c : r.costs_s) m->add_costs_s(c);
    m->set_number(r.number);
    m->set_build_s(r.build_s);
    m->set_wall_s(r.wall_s);
  }
  return out;
}

}  // namespace

absl::Status RunWorkerAgent(const WorkerAgentOptions& o, const std::function<bool()>& should_stop,
                            const std::function<void(const std::string&)>& on_event) {
  auto target = measure::Target::Parse(o.target, o.threads == 0 ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) : o.threads);
  if (!target.ok()) return target.status();
  v1::RegisterRequest reg;
  reg.set_host(HostName());
  reg.set_name(o.name.empty() ? absl::StrCat(reg.host(), "/", o.target) : o.name);
  reg.set_target(o.target);
  reg.set_target_key(target->Key());
  reg.set_target_json(target->ToJson());
  reg.set_device(target->device_model);
  reg.set_protocol(kWireProtocol);

  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!o.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = o.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(o.server, creds, args);
  auto stub = v1::Worker::NewStub(channel);
  // Shared with the measuring thread, which may outlive an abandoned batch.
  auto cache = std::make_shared<BatchCache>();
  measure::TaskFactoryOptions factory_options;
  factory_options.build_threads =
      o.build_threads > 0 ? o.build_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto factory = measure::TaskFactory::Create(*target, std::move(factory_options));
  if (!factory.ok()) return factory.status();
  cache->tasks = std::make_unique<TaskCache>(std::move(*factory));
  StopClock stop(should_stop, o.stop_grace_s);
  uint64_t left_id = 0;  // the worker id to say goodbye with

  double backoff = 0.2;
  bool reported_down = false;
  while (!should_stop()) {
    // Register (again).
    v1::RegisterReply reply;
    grpc::ClientContext ctx;
    AttachToken(ctx, o.token, kCallDeadlineS);
    grpc::Status st = stub->Register(&ctx, reg, &reply);
    if (!st.ok()) {
      if (IsPermanent(st.error_code())) return FromGrpcStatus(st, "daemon at " + o.server);
      if (!reported_down) on_event(absl::StrCat("daemon at ", o.server, " unreachable (", st.error_message(),
                                                "); retrying with backoff"));
      reported_down = true;
      if (!SleepUnlessStopped(backoff, should_stop)) break;
      backoff = std::min(backoff * 2, o.max_backoff_s);
      continue;
    }
    reported_down = false;
    backoff = 0.2;
    const uint64_t id = reply.worker_id();
    left_id = id;
    on_event(absl::StrCat("registered as worker ", id, " (", reg.name(), ", ", reg.target_key(), ")"));

    // Heartbeats on their own thread (a batch may take longer than the expiry); they also
    // cancel the Work stream when a stop is requested while waiting for a batch.
    grpc::ClientContext work_ctx;
    AttachToken(work_ctx, o.token);
    std::atomic<bool> session_over{false}, lost{false}, measuring{false};
    std::atomic<int> unacked{0};  // batches returned, Ack not yet received
    std::string lost_why;
    std::mutex lost_mu;
    const double interval = std::max(0.05, reply.heartbeat_interval_s());
    std::thread heart([&] {
      while (!session_over) {
        auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(interval * 1000));
        while (Clock::now() < end && !session_over) {
          // Stopping: leave once the batch in hand is returned and acknowledged, or the grace
          // is over (the main thread gives a batch still measuring back first).
          if (stop.Requested() && ((!measuring && (unacked == 0 || stop.GraceOver())) || stop.GraceOver(2)))
            work_ctx.TryCancel();
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (session_over) break;
        v1::HeartbeatRequest hb;
        hb.set_worker_id(id);
        v1::HeartbeatReply hb_reply;
        grpc::ClientContext hctx;
        AttachToken(hctx, o.token, kCallDeadlineS);
        grpc::Status hs = stub->Heartbeat(&hctx, hb, &hb_reply);
        if (!hs.ok()) {
          std::lock_guard<std::mutex> lock(lost_mu);
          lost_why = hs.error_code() == grpc::StatusCode::NOT_FOUND
                         ? absl::StrCat("the daemon no longer knows worker ", id, "; registering again")
                         : absl::StrCat("lost the daemon (", hs.error_message(), "); reconnecting");
          lost = true;
          work_ctx.TryCancel();
          break;
        }
      }
    });

    // The lease channel: Ready -> Batch -> Results, then Ready again at once; each Ack comes
    // when its batch is committed.
    auto work = stub->Work(&work_ctx);
    v1::WorkerMessage ready;
    ready.mutable_ready()->set_worker_id(id);
    bool ok = work->Write(ready);
    v1::DaemonMessage in;
    while (ok && work->Read(&in)) {
      if (in.has_batch()) {
        const uint64_t batch_id = in.batch().batch_id();
        v1::WorkerMessage release;
        release.mutable_release()->set_batch_id(batch_id);
        if (stop.Requested()) {  // leased while the stop came: back unmeasured
          on_event(absl::StrCat("stopping: batch ", batch_id, " given back unmeasured"));
          (void)work->Write(release);
          break;
        }
        measuring = true;
        on_event(absl::StrCat("batch ", batch_id, ": ", in.batch().configs_json_size(), " configs of ",
                              base::EscapeControl(in.batch().workload_key())));
        // Measured on a thread of its own, so that a stop can abandon it.
        auto measured = std::make_shared<MeasuredBatch>();
        std::thread([measured, batch = in.batch(), cache] {
          v1::Results r = MeasureBatch(batch, *cache);
          std::lock_guard<std::mutex> lock(measured->mu);
          measured->results = std::move(r);
          measured->done = true;
          measured->cv.notify_all();
        }).detach();
        bool abandoned = false, told = false;
        {
          std::unique_lock<std::mutex> lock(measured->mu);
          while (!measured->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return measured->done; })) {
            if (!stop.Requested()) continue;
            if (!told) {
              told = true;
              on_event(absl::StrCat("stopping: finishing batch ", batch_id, " (up to ", o.stop_grace_s, " s)"));
            }
            if (stop.GraceOver()) {
              abandoned = true;
              break;
            }
          }
        }
        if (abandoned) {
          on_event(absl::StrCat("stopping: batch ", batch_id, " abandoned unfinished, given back unmeasured"));
          (void)work->Write(release);
          measuring = false;
          break;
        }
        v1::WorkerMessage res;
        *res.mutable_results() = std::move(measured->results);
        ok = work->Write(res);
        ++unacked;
        measuring = false;
        if (told) on_event(absl::StrCat("stopping: batch ", batch_id, " finished and returned"));
        if (ok && !stop.Requested()) ok = work->Write(ready);
      } else if (in.has_ack()) {
        --unacked;
        on_event(absl::StrCat("batch ", in.ack().batch_id(),
                              in.ack().discarded() ? " discarded (not recorded: its job ended, or another worker returned it first)" : " committed"));
        if (stop.Requested() && unacked == 0) break;  // the last batch is committed: leave now
      }
    }
    if (stop.Requested()) {
      if (unacked > 0)
        on_event(absl::StrCat("stopping: leaving without the Ack of ", unacked.load(),
                              " returned batch(es); their results were delivered"));
      work_ctx.TryCancel();  // nothing more to wait for on this stream
    }
    work->WritesDone();
    grpc::Status ws = work->Finish();
    session_over = true;
    heart.join();
    if (stop.Requested()) break;
    if (IsPermanent(ws.error_code()) && ws.error_code() != grpc::StatusCode::FAILED_PRECONDITION)
      return FromGrpcStatus(ws, "daemon at " + o.server);
    {
      std::lock_guard<std::mutex> lock(lost_mu);
      on_event(lost ? lost_why : absl::StrCat("work stream ended (", ws.error_message(), "); registering again"));
    }
    if (!SleepUnlessStopped(backoff, should_stop)) break;
    backoff = std::min(backoff * 2, o.max_backoff_s);
  }
  if (left_id != 0) {  // goodbye: listed as gone at once, not when the heartbeats stop
    v1::LeaveRequest leave;
    leave.set_worker_id(left_id);
    v1::LeaveReply left;
    grpc::ClientContext ctx;
    AttachToken(ctx, o.token, kLeaveDeadlineS);
    (void)stub->Leave(&ctx, leave, &left);
  }
  on_event("stopping");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerAgentOptions>> PerDeviceAgents(const WorkerAgentOptions& o, int device_count,
                                                                int cores) {
  absl::StatusOr<std::vector<std::string>> targets = measure::Target::PerDeviceTargets(o.target, device_count);
  if (!targets.ok()) return targets.status();
  const bool cpu = !absl::StartsWith(absl::StripAsciiWhitespace(o.target), "cuda");
  if (o.slots < 0) return absl::InvalidArgumentError(absl::StrCat("--slots ", o.slots, ": expected 0 (the default) or more"));
  if (cpu && o.slots > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slots ", o.slots, " needs a cuda target: on the CPU the slots' measurements would share the cores"));
  }
  const int slots = o.slots > 0 ? o.slots : (cpu ? 1 : kDefaultGpuSlots);
  const int n = static_cast<int>(targets->size());
  if (!measure::Target::IsAllGpus(o.target) && slots == 1) {
    WorkerAgentOptions one = o;
    one.target = (*targets)[0];
    one.slots = 1;
    return std::vector<WorkerAgentOptions>{one};
  }
  const std::string base = o.name.empty() ? HostName() : o.name;
  std::vector<WorkerAgentOptions> out;
  for (const std::string& t : *targets) {
    for (int s = 1; s <= slots; ++s) {
      WorkerAgentOptions one = o;
      one.target = t;
      one.slots = 1;
      one.name = slots > 1 ? absl::StrCat(base, "/", t, "/", s) : absl::StrCat(base, "/", t);
      if (one.build_threads <= 0) one.build_threads = std::max(1, cores / n);
      out.push_back(std::move(one));
    }
  }
  return out;
}

}  // namespace tune::server
