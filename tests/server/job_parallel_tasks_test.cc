// A daemon job with two live workers keeps batches of two different tasks leased at once, and
// records exactly what the same job records with one worker (each config once).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dataset/record_database.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/batch_results.h"
#include "measure/target.h"
#include "server/daemon.h"
#include "server/grpc_status.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::test {
namespace {

constexpr char kParallelToken[] = "parallel-token";

/// What the simulated workers of one daemon saw.
struct LeaseLog {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::string> holding;  // worker id -> workload key of the batch it holds now
  bool two_tasks_at_once = false;           // two workers held batches of different tasks at once
  int batches = 0;
};

/// A worker that registers as this host's CPU and answers each leased batch with ok results of
/// random costs. Until two tasks were seen leased at once it holds each batch a moment (at most
/// `hold`) while no other worker holds one, so the daemon has the chance to lease another.
class SimulatedWorker {
 public:
  SimulatedWorker(v1::Worker::Stub& stub, uint64_t id, LeaseLog* log, uint64_t seed, std::chrono::milliseconds hold)
      : stub_(stub), id_(id), log_(log), rng_(seed), hold_(hold) {
    server::AttachToken(ctx_, kParallelToken);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    thread_ = std::thread([this] { Loop(); });
  }
  ~SimulatedWorker() {
    ctx_.TryCancel();
    thread_.join();
  }

 private:
  void Loop() {
    auto stream = stub_.Work(&ctx_);
    v1::WorkerMessage ready;
    ready.mutable_ready()->set_worker_id(id_);
    if (!stream->Write(ready)) return;
    std::uniform_real_distribution<double> cost(1e-6, 1e-3);
    v1::DaemonMessage in;
    while (stream->Read(&in)) {
      if (!in.has_batch()) continue;  // an Ack
      const v1::Batch& batch = in.batch();
      {
        std::unique_lock<std::mutex> lock(log_->mu);
        ++log_->batches;
        for (const auto& [other, key] : log_->holding) {
          if (key != batch.workload_key()) log_->two_tasks_at_once = true;
        }
        log_->holding[id_] = batch.workload_key();
        log_->cv.notify_all();
        log_->cv.wait_for(lock, hold_, [&] { return log_->two_tasks_at_once || log_->holding.size() > 1; });
        log_->holding.erase(id_);
      }
      const v1::WorkerMessage m = OkBatchResults(batch, [&](int) { return cost(rng_); });
      if (!stream->Write(m) || !stream->Write(ready)) return;
    }
  }

  v1::Worker::Stub& stub_;
  uint64_t id_;
  LeaseLog* log_;
  std::mt19937_64 rng_;
  std::chrono::milliseconds hold_;
  grpc::ClientContext ctx_;
  std::thread thread_;
};

struct ParallelJobResult {
  bool done = false;
  bool two_tasks_at_once = false;
  int records = 0;
  std::map<std::string, int> defaults, finalists;                  // by workload key
  std::map<std::string, std::multiset<std::string>> searched;      // configs of the search, by workload key
  uint64_t ingested = 0, committed = 0;
};

/// Runs `job` on a fresh daemon in `dir` with `workers` simulated workers registered first.
ParallelJobResult RunJobWithWorkers(const TempDir& dir, const v1::SubmitJobRequest& job, int workers, uint64_t seed) {
  // One worker never sees another hold a batch: it does not wait for one.
  const std::chrono::milliseconds hold(workers > 1 ? 300 : 0);
  ParallelJobResult out;
  server::DaemonOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.Join("records.db");
  o.token = kParallelToken;
  o.expire_after_s = 600;
  server::Daemon daemon(o);
  auto port = daemon.Start();
  EXPECT_TRUE(port.ok()) << port.status();
  if (!port.ok()) return out;
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials());
  auto tune = v1::Tune::NewStub(channel);
  auto worker = v1::Worker::NewStub(channel);
  LeaseLog log;
  std::vector<std::unique_ptr<SimulatedWorker>> sims;
  for (int w = 0; w < workers; ++w) {
    measure::Target cpu = measure::Target::HostCpu(1);
    v1::RegisterRequest req;
    req.set_name("sim" + std::to_string(w));
    req.set_host("localhost");
    req.set_target("llvm");
    req.set_target_key(cpu.Key());
    req.set_target_json(cpu.ToJson());
    req.set_protocol(1);
    v1::RegisterReply reply;
    grpc::ClientContext ctx;
    server::AttachToken(ctx, kParallelToken, 10);
    grpc::Status st = worker->Register(&ctx, req, &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    sims.push_back(std::make_unique<SimulatedWorker>(*worker, reply.worker_id(), &log, seed + w, hold));
  }
  uint64_t job_id = 0;
  {
    v1::SubmitJobReply reply;
    grpc::ClientContext ctx;
    server::AttachToken(ctx, kParallelToken, 10);
    grpc::Status st = tune->SubmitJob(&ctx, job, &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) return out;
    job_id = reply.job_id();
  }
  // A safety limit of 60 s, not a timing assertion.
  for (int i = 0; i < 3000 && !out.done; ++i) {
    v1::ListJobsReply jobs;
    grpc::ClientContext ctx;
    server::AttachToken(ctx, kParallelToken, 10);
    EXPECT_TRUE(tune->ListJobs(&ctx, v1::ListJobsRequest(), &jobs).ok());
    for (const auto& j : jobs.jobs()) {
      if (j.job_id() != job_id) continue;
      EXPECT_NE(j.state(), v1::JOB_FAILED) << j.note();
      out.done = j.state() == v1::JOB_DONE;
    }
    if (!out.done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    v1::HealthReply health;
    grpc::ClientContext ctx;
    server::AttachToken(ctx, kParallelToken, 10);
    EXPECT_TRUE(tune->Health(&ctx, v1::HealthRequest(), &health).ok());
    out.ingested = health.results_ingested();
    out.committed = health.results_committed();
  }
  sims.clear();
  daemon.Shutdown();
  {
    std::lock_guard<std::mutex> lock(log.mu);
    out.two_tasks_at_once = log.two_tasks_at_once;
  }
  auto db = dataset::RecordDatabase::Open(dir.Join("records.db"), /*create=*/false);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return out;
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  EXPECT_TRUE(tasks.ok() && targets.ok() && targets->size() == 1u);
  if (!tasks.ok() || !targets.ok() || targets->size() != 1u) return out;
  for (const auto& task : *tasks) {
    auto records = (*db)->Records(task.id, (*targets)[0].id);
    EXPECT_TRUE(records.ok()) << records.status();
    if (!records.ok()) continue;
    for (const auto& r : *records) {
      ++out.records;
      if (r.strategy == "default") ++out.defaults[task.workload_key];
      else if (r.strategy == "finalist") ++out.finalists[task.workload_key];
      else out.searched[task.workload_key].insert(r.config_json);
    }
  }
  return out;
}

// Two live workers: batches of two different tasks are leased at the same time, and the job
// records as many configs (each once), defaults and finalists as it records with one worker.
TEST(JobParallelTasksTest, TwoWorkersMeasureTwoTasksAtOnceAndRecordWhatOneWorkerRecords) {
  std::mt19937_64 rng = TestRng(77);
  const int trials = std::uniform_int_distribution<int>(4, 6)(rng);
  v1::SubmitJobRequest job;
  job.set_model_json(R"({"layers": [{"op": "matmul", "shape": "8,8,8"}, {"op": "matmul", "shape": "16,8,8"},)"
                     R"( {"op": "matmul", "shape": "8,16,8"}]})");
  job.set_target("llvm");
  job.set_trials(static_cast<uint32_t>(trials));
  job.set_batch(std::uniform_int_distribution<uint32_t>(2, 4)(rng));
  job.set_strategy("random");
  job.set_cost_model("none");
  job.set_seed(rng());
  const uint64_t seed = rng();

  TempDir two_dir, one_dir;
  const ParallelJobResult two = RunJobWithWorkers(two_dir, job, 2, seed);
  const ParallelJobResult one = RunJobWithWorkers(one_dir, job, 1, seed);
  ASSERT_TRUE(two.done);
  ASSERT_TRUE(one.done);
  EXPECT_TRUE(two.two_tasks_at_once) << "no two tasks' batches were leased at the same time";
  EXPECT_FALSE(one.two_tasks_at_once);
  EXPECT_EQ(two.searched.size(), 3u);
  for (const auto& [key, configs] : two.searched) {
    EXPECT_EQ(configs.size(), static_cast<size_t>(trials)) << key;
    EXPECT_EQ(std::set<std::string>(configs.begin(), configs.end()).size(), configs.size())
        << key << ": a config recorded twice";
    EXPECT_EQ(two.defaults.at(key), 1) << key;
  }
  // The configs themselves may differ: config transfer seeds a task from what the other tasks
  // have recorded when its first batch starts, which depends on the order batches come back.
  for (const auto& [key, configs] : one.searched) {
    ASSERT_EQ(two.searched.count(key), 1u) << key;
    EXPECT_EQ(two.searched.at(key).size(), configs.size()) << key;
  }
  EXPECT_EQ(two.defaults, one.defaults);
  EXPECT_EQ(two.finalists, one.finalists);
  EXPECT_EQ(two.records, one.records);
  EXPECT_EQ(two.ingested, two.committed);
  EXPECT_EQ(two.committed, static_cast<uint64_t>(two.records));
}

}  // namespace
}  // namespace tune::test
