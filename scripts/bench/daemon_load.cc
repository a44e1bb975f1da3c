// daemon_load: N simulated workers against one `tune serve` on loopback. Each worker registers
// like `tune worker --target llvm`, takes batches on its own Work stream and answers every
// config at once with a cost derived from the config text (no kernel is built or run), so the
// daemon's own path is what is measured: leasing, result ingestion, the SQLite commit, the Ack,
// and the search that proposes the next batch. Prints one JSON object: results/s sent, acked
// (committed, seen by the workers), ingested and committed (the daemon's counters); dispatch
// p50/p99 (the daemon's histogram: a Ready, or the batch's queueing if later, to the Batch
// written; bucket upper edges, 19% apart) and wait p50/p99 (a worker's Ready to its next
// Batch, including time with no batch queued anywhere).
//
//   daemon_load --server 127.0.0.1:7117 --workers 64 [--jobs 4] [--batch N] [--seconds 5]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "measure/target.h"
#include "server/latency_histogram.h"
#include "server/wire_names.h"
#include "tune/v1/tune.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = tune::v1;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

/// Makes one unary call whose answer does not matter (heartbeats, cancellations).
template <typename Stub, typename Request, typename Reply>
void CallAndForget(Stub& stub, grpc::Status (Stub::*call)(grpc::ClientContext*, const Request&, Reply*),
                   const Request& request) {
  grpc::ClientContext ctx;
  Reply reply;
  (void)(stub.*call)(&ctx, request, &reply);
}

struct Shared {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> results_acked{0}, results_sent{0}, batches{0};
  std::mutex mu;
  std::vector<double> wait_s;  // Ready sent -> Batch received, while measuring
};

/// One simulated worker: Ready -> Batch -> Results (at once) -> Ready ..., Acks counted as
/// they come.
void RunWorker(const std::shared_ptr<grpc::Channel>& channel, uint64_t id, Shared* shared) {
  auto stub = v1::Worker::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->Work(&ctx);
  v1::WorkerMessage ready;
  ready.mutable_ready()->set_worker_id(id);
  double ready_at = Now();
  if (!stream->Write(ready)) return;
  std::deque<int> sizes;  // configs of the batches not yet acknowledged
  v1::DaemonMessage in;
  while (!shared->stop && stream->Read(&in)) {
    if (in.has_batch()) {
      if (shared->measuring) {
        const double waited = Now() - ready_at;
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->wait_s.push_back(waited);
      }
      const v1::Batch& b = in.batch();
      v1::WorkerMessage out;
      v1::Results* r = out.mutable_results();
      r->set_batch_id(b.batch_id());
      for (const std::string& c : b.configs_json()) {
        v1::MeasureResult* m = r->add_results();
        m->set_status("ok");
        const double cost = 1e-3 * (1 + static_cast<double>(std::hash<std::string>{}(c) % 1000) / 1000);
        for (int i = 0; i < 3; ++i) m->add_costs_s(cost);
        m->set_number(1);
      }
      sizes.push_back(b.configs_json_size());
      if (shared->measuring) {
        shared->results_sent += b.configs_json_size();
        ++shared->batches;
      }
      if (!stream->Write(out)) break;
      ready_at = Now();
      if (!stream->Write(ready)) break;
    } else if (in.has_ack() && !sizes.empty()) {
      if (shared->measuring && !in.ack().discarded()) shared->results_acked += sizes.front();
      sizes.pop_front();
    }
  }
  ctx.TryCancel();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

int Fail(const std::string& what) { return tune::base::Fail("daemon_load", tune::base::kExitFailure, what); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"N simulated workers against one tune daemon; prints throughput and dispatch latency"};
  std::string server = "127.0.0.1:7117";
  int workers = 1, jobs = 4, batch = 0, channels = 8;
  double seconds = 5, warmup = 2;
  std::string shape = "1024,1024,1024";
  app.add_option("--server", server, "daemon address")->capture_default_str();
  app.add_option("--workers", workers, "simulated workers")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--jobs", jobs, "tuning jobs submitted (they share the workers)")->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--batch", batch, "configs per job round; 0 = 16 per worker")->check(CLI::Range(0, 65536));
  app.add_option("--seconds", seconds, "measured interval")->check(CLI::Range(0.5, 3600.0))->capture_default_str();
  app.add_option("--warmup", warmup, "seconds before measuring")->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--channels", channels, "connections the workers' streams are spread over")
      ->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--shape", shape, "M,N,K of the matmul each job tunes")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (batch == 0) batch = 16 * workers;

  std::vector<std::shared_ptr<grpc::Channel>> conns;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("tune.load.channel", c);
    args.SetMaxReceiveMessageSize(64 << 20);
    conns.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
  }
  auto client = v1::Tune::NewStub(conns[0]);
  auto health = [&]() -> std::optional<v1::HealthReply> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::HealthReply h;
    if (!client->Health(&ctx, v1::HealthRequest{}, &h).ok()) return std::nullopt;
    return h;
  };
  if (!health()) return Fail("no daemon answers at " + server);

  // Register the workers as this host's CPU (the jobs' templates are the CPU ones).
  const tune::measure::Target target = tune::measure::Target::HostCpu(1);
  auto worker_stub = v1::Worker::NewStub(conns[0]);
  std::vector<uint64_t> ids;
  for (int i = 0; i < workers; ++i) {
    v1::RegisterRequest req;
    req.set_name(absl::StrCat("sim-", i));
    req.set_host("loopback");
    req.set_target("llvm");
    req.set_target_key(target.Key());
    req.set_target_json(target.ToJson());
    req.set_protocol(tune::server::kWireProtocol);
    grpc::ClientContext ctx;
    v1::RegisterReply reply;
    if (auto st = worker_stub->Register(&ctx, req, &reply); !st.ok()) return Fail("register: " + st.error_message());
    ids.push_back(reply.worker_id());
  }
  Shared shared;
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) threads.emplace_back(RunWorker, conns[i % channels], ids[i], &shared);
  std::thread heart([&] {  // as real workers do, so idle ones are not expired
    while (!shared.stop) {
      for (uint64_t id : ids) {
        v1::HeartbeatRequest hb;
        hb.set_worker_id(id);
        CallAndForget(*worker_stub, &v1::Worker::Stub::Heartbeat, hb);
      }
      for (int i = 0; i < 10 && !shared.stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  std::vector<uint64_t> job_ids;
  for (int j = 0; j < jobs; ++j) {
    v1::SubmitJobRequest req;
    req.set_model_json(absl::StrCat(R"({"name": "load", "layers": [{"name": "mm", "op": "matmul", "shape": ")", shape,
                                    R"("}]})"));
    req.set_name(absl::StrCat("load-", j));
    req.set_target("llvm");
    req.set_trials(1000000);
    req.set_strategy("random");
    req.set_cost_model("none");
    req.set_seed(static_cast<uint64_t>(j + 1));
    req.set_batch(static_cast<uint32_t>(batch));
    grpc::ClientContext ctx;
    v1::SubmitJobReply reply;
    if (auto st = client->SubmitJob(&ctx, req, &reply); !st.ok()) return Fail("submit: " + st.error_message());
    job_ids.push_back(reply.job_id());
  }

  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  auto h0 = health();
  const double t0 = Now();
  shared.measuring = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  shared.measuring = false;
  const double elapsed = Now() - t0;
  auto h1 = health();

  for (uint64_t id : job_ids) {
    v1::CancelJobRequest req;
    req.set_job_id(id);
    CallAndForget(*client, &v1::Tune::Stub::CancelJob, req);
  }
  shared.stop = true;
  heart.join();
  if (!h0 || !h1) return Fail("the daemon stopped answering Health");

  const double ingested = static_cast<double>(h1->results_ingested() - h0->results_ingested()) / elapsed;
  const double committed = static_cast<double>(h1->results_committed() - h0->results_committed()) / elapsed;
  std::vector<double> lat;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    lat = shared.wait_s;
  }
  std::vector<uint64_t> dispatch(tune::server::LatencyHistogram::kBuckets, 0);
  for (int i = 0; i < h1->dispatch_us_histogram_size() && i < tune::server::LatencyHistogram::kBuckets; ++i)
    dispatch[i] = h1->dispatch_us_histogram(i) - (i < h0->dispatch_us_histogram_size() ? h0->dispatch_us_histogram(i) : 0);
  using H = tune::server::LatencyHistogram;
  std::printf(
      "{\"workers\": %d, \"jobs\": %d, \"batch\": %d, \"seconds\": %.2f, \"batches\": %llu, "
      "\"results_sent_per_s\": %.0f, \"results_acked_per_s\": %.0f, \"ingested_per_s\": %.0f, "
      "\"committed_per_s\": %.0f, \"dispatch_p50_ms\": %.3f, \"dispatch_p99_ms\": %.3f, "
      "\"wait_p50_ms\": %.3f, \"wait_p99_ms\": %.3f}\n",
      workers, jobs, batch, elapsed, static_cast<unsigned long long>(shared.batches.load()),
      static_cast<double>(shared.results_sent.load()) / elapsed,
      static_cast<double>(shared.results_acked.load()) / elapsed, ingested, committed,
      1e3 * H::Quantile(dispatch, 0.5), 1e3 * H::Quantile(dispatch, 0.99), 1e3 * Percentile(lat, 0.5),
      1e3 * Percentile(lat, 0.99));
  std::fflush(stdout);
  // Streams still blocked in Read end when the daemon stops (the caller stops it next);
  // leave without joining them.
  std::_Exit(0);
}
