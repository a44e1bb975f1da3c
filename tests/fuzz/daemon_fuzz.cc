// Fuzz target: the daemon's request handlers (Tune and Worker services) fed mutated request protos.
//
// An input is a sequence of at most 16 frames, each [kind][length, 2 bytes little-endian]
// [payload]. kind % 10 picks the call: 0 Health, 1 SubmitJob, 2 WatchJob, 3 CancelJob,
// 4 QueryBest, 5 ListWorkers, 6 ListJobs, 7 Register, 8 Heartbeat, 9 Work; the payload is that
// call's request proto, or for Work a sequence of [length, 2 bytes][WorkerMessage] sent on
// one stream. A payload that is not a valid proto is skipped (gRPC would refuse it). Every
// input gets a fresh daemon state (jobs table, registry, queue, services) over a private
// database file, served in process through an in-process channel: no network.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "dataset/record_database.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"
#include "grpcpp/grpcpp.h"
#include "server/job_manager.h"
#include "server/job_store.h"
#include "server/latency_histogram.h"
#include "server/lease_queue.h"
#include "server/tune_service.h"
#include "server/worker_registry.h"
#include "server/worker_service.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::fuzz {
namespace {

constexpr char kToken[] = "fuzz-token";

const std::string& Folder() {
  static const std::string folder = ScratchFolder("daemon");
  return folder;
}

void RemoveFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
}

// One daemon's state, as server/daemon.cc wires it, without a listening port.
struct Daemon {
  std::mutex mu;
  bool stopping = false;
  server::WorkerRegistry registry{10, 3};
  server::LeaseQueue queue{5};
  server::LatencyHistogram dispatch;
  std::unique_ptr<dataset::RecordDatabase> db;
  std::unique_ptr<server::JobStore> store;
  std::unique_ptr<server::JobManager> jobs;
  std::unique_ptr<server::TuneService> tune;
  std::unique_ptr<server::WorkerService> worker;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }

  bool Start(const std::string& path) {
    auto d = dataset::RecordDatabase::Open(path);
    if (!d.ok()) return false;
    db = std::move(*d);
    auto s = server::JobStore::Open(path);
    if (!s.ok()) return false;
    store = std::move(*s);
    auto stop = [this] { return Stopping(); };
    jobs = std::make_unique<server::JobManager>(path, store.get(), &registry, &queue, stop);
    tune = std::make_unique<server::TuneService>(kToken, path, db.get(), jobs.get(), &registry, &queue, &dispatch);
    worker = std::make_unique<server::WorkerService>(server::WorkerServiceOptions{kToken, 1, 10, 5}, &registry,
                                                     &queue, &dispatch, stop);
    grpc::ServerBuilder builder;
    builder.RegisterService(tune.get());
    builder.RegisterService(worker.get());
    server = builder.BuildAndStart();
    if (!server) return false;
    channel = server->InProcessChannel(grpc::ChannelArguments());
    return true;
  }

  ~Daemon() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    if (jobs) jobs->JoinAll();
  }
};

void Prepare(grpc::ClientContext& ctx, bool token, int deadline_ms) {
  if (token) ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
}

template <typename Request>
bool ParseInto(Request& req, const std::string& payload) {
  return req.ParseFromString(payload);
}

void Work(v1::Worker::Stub& stub, const std::string& payload, bool token) {
  grpc::ClientContext ctx;
  Prepare(ctx, token, 100);
  auto stream = stub.Work(&ctx);
  size_t at = 0;
  while (at + 2 <= payload.size()) {
    size_t len = static_cast<unsigned char>(payload[at]) | (static_cast<size_t>(static_cast<unsigned char>(payload[at + 1])) << 8);
    at += 2;
    std::string bytes = payload.substr(at, len);
    at += bytes.size();
    v1::WorkerMessage m;
    if (!m.ParseFromString(bytes)) continue;
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  v1::DaemonMessage reply;
  while (stream->Read(&reply)) {
  }
  (void)stream->Finish();
}

void Call(Daemon& d, int kind, const std::string& payload, bool token) {
  v1::Tune::Stub tune(d.channel);
  v1::Worker::Stub worker(d.channel);
  grpc::ClientContext ctx;
  Prepare(ctx, token, kind == 2 ? 50 : 2000);
  switch (kind) {
    case 0: {
      v1::HealthRequest req;
      v1::HealthReply reply;
      if (ParseInto(req, payload)) (void)tune.Health(&ctx, req, &reply);
      break;
    }
    case 1: {
      v1::SubmitJobRequest req;
      v1::SubmitJobReply reply;
      if (ParseInto(req, payload)) (void)tune.SubmitJob(&ctx, req, &reply);
      break;
    }
    case 2: {
      v1::WatchJobRequest req;
      if (!ParseInto(req, payload)) break;
      auto reader = tune.WatchJob(&ctx, req);
      v1::JobEvent event;
      for (int i = 0; i < 64 && reader->Read(&event); ++i) {
      }
      ctx.TryCancel();
      (void)reader->Finish();
      break;
    }
    case 3: {
      v1::CancelJobRequest req;
      v1::CancelJobReply reply;
      if (ParseInto(req, payload)) (void)tune.CancelJob(&ctx, req, &reply);
      break;
    }
    case 4: {
      v1::QueryBestRequest req;
      v1::QueryBestReply reply;
      if (ParseInto(req, payload)) (void)tune.QueryBest(&ctx, req, &reply);
      break;
    }
    case 5: {
      v1::ListWorkersRequest req;
      v1::ListWorkersReply reply;
      if (ParseInto(req, payload)) (void)tune.ListWorkers(&ctx, req, &reply);
      break;
    }
    case 6: {
      v1::ListJobsRequest req;
      v1::ListJobsReply reply;
      if (ParseInto(req, payload)) (void)tune.ListJobs(&ctx, req, &reply);
      break;
    }
    case 7: {
      v1::RegisterRequest req;
      v1::RegisterReply reply;
      if (ParseInto(req, payload)) (void)worker.Register(&ctx, req, &reply);
      break;
    }
    case 8: {
      v1::HeartbeatRequest req;
      v1::HeartbeatReply reply;
      if (ParseInto(req, payload)) (void)worker.Heartbeat(&ctx, req, &reply);
      break;
    }
    default:
      Work(worker, payload, token);
      break;
  }
}

}  // namespace

int FuzzDaemonRequests(const uint8_t* data, size_t size) {
  // Protos with invalid UTF-8 are refused as gRPC would; their log lines are noise here.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  const std::string path = Folder() + "/daemon.db";
  RemoveFiles(path);
  {
    Daemon d;
    if (!d.Start(path)) {
      std::fprintf(stderr, "daemon: cannot start the in-process daemon over %s\n", path.c_str());
      std::abort();
    }
    size_t at = 0;
    for (int frame = 0; frame < 16 && at + 3 <= size; ++frame) {
      const int kind = data[at] % 10;
      const bool token = data[at] < 0xf0;  // a few calls without the token
      const size_t len = data[at + 1] | (static_cast<size_t>(data[at + 2]) << 8);
      at += 3;
      const size_t n = std::min(len, size - at);
      Call(d, kind, std::string(reinterpret_cast<const char*>(data) + at, n), token);
      at += n;
    }
  }
  RemoveFiles(path);
  return 0;
}

}  // namespace tune::fuzz
