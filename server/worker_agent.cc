// WorkerAgent: registration, heartbeats and reconnection with backoff.
#include "server/worker_agent.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "measure/target.h"
#include "server/grpc_status.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

absl::Status RunWorkerAgent(const WorkerAgentOptions& o, const std::function<bool()>& should_stop,
                            const std::function<void(const std::string&)>& on_event) {
  auto target = measure::Target::Parse(o.target, o.threads);
  if (!target.ok()) return target.status();
  v1::RegisterRequest reg;
  reg.set_host(HostName());
  reg.set_name(o.name.empty() ? absl::StrCat(reg.host(), "/", o.target) : o.name);
  reg.set_target(o.target);
  reg.set_target_key(target->Key());
  reg.set_device(target->device_model);
  reg.set_protocol(1);

  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!o.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = o.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateChannel(o.server, creds);
  auto stub = v1::Worker::NewStub(channel);

  double backoff = 0.2;
  bool reported_down = false;
  while (!should_stop()) {
    // Register (again).
    v1::RegisterReply reply;
    grpc::ClientContext ctx;
    AttachToken(ctx, o.token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
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
    on_event(absl::StrCat("registered as worker ", id, " (", reg.name(), ", ", reg.target_key(), ")"));

    // Heartbeats until the daemon forgets us or goes away.
    const double interval = std::max(0.05, reply.heartbeat_interval_s());
    while (SleepUnlessStopped(interval, should_stop)) {
      v1::HeartbeatRequest hb;
      hb.set_worker_id(id);
      v1::HeartbeatReply hb_reply;
      grpc::ClientContext hctx;
      AttachToken(hctx, o.token);
      hctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::Status hs = stub->Heartbeat(&hctx, hb, &hb_reply);
      if (hs.ok()) continue;
      if (IsPermanent(hs.error_code())) return FromGrpcStatus(hs, "daemon at " + o.server);
      on_event(hs.error_code() == grpc::StatusCode::NOT_FOUND
                   ? absl::StrCat("the daemon no longer knows worker ", id, "; registering again")
                   : absl::StrCat("lost the daemon (", hs.error_message(), "); reconnecting"));
      break;
    }
  }
  on_event("stopping");
  return absl::OkStatus();
}

}  // namespace tune::server
