// The daemon over real gRPC on loopback: token checks, worker registration, message limits,
// and `tune serve` as a real process (bound port, queries, SIGTERM shutdown, bad flags).
#include "server/daemon.h"

#include <signal.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dataset/record_database.h"
#include "measure/target.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/batch_results.h"
#include "server/grpc_status.h"
#include "server/job_manager.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tests/server/serve_helper.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

constexpr char kToken[] = "s3cret-token";

std::chrono::system_clock::time_point Deadline(double s = 10) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon(); }

  /// (Re)starts the daemon on a free port over the same database.
  void StartDaemon(uint32_t max_batch_losses = 3, double lease_s = 600) {
    daemon_.reset();
    DaemonOptions o;
    o.lease_s = lease_s;
    o.listen = "127.0.0.1:0";
    o.db_path = dir_.Join("records.db");
    o.token = kToken;
    o.max_message_bytes = 64 << 10;
    o.max_batch_losses = max_batch_losses;
    daemon_ = std::make_unique<Daemon>(o);
    auto port = daemon_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials());
    tune_ = v1::Tune::NewStub(channel);
    worker_ = v1::Worker::NewStub(channel);
  }

  /// One unary call on `stub` (the Tune or the Worker service) with `token` and a deadline.
  template <typename Stub, typename Request, typename Reply>
  static grpc::Status Call(Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
                           const Request& request, Reply* reply, const std::string& token = kToken) {
    grpc::ClientContext ctx;
    AttachToken(ctx, token, 10);
    return (stub.*method)(&ctx, request, reply);
  }

  grpc::Status Health(const std::string& token, v1::HealthReply* reply) {
    return Call(*tune_, &v1::Tune::Stub::Health, v1::HealthRequest(), reply, token);
  }

  /// Submits a job tuning one 8x8x8 matmul on llvm for two trials; its id, 0 when refused.
  /// Submits a one-layer llvm job of two trials; how the daemon answered.
  grpc::Status TrySubmitSmallJob(v1::SubmitJobReply* reply) {
    v1::SubmitJobRequest job;
    job.set_model_json(R"({"layers": [{"op": "matmul", "shape": "8,8,8"}]})");
    job.set_target("llvm");
    job.set_trials(2);
    return Call(*tune_, &v1::Tune::Stub::SubmitJob, job, reply);
  }

  uint64_t SubmitSmallJob() {
    v1::SubmitJobReply reply;
    grpc::Status st = TrySubmitSmallJob(&reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return st.ok() ? reply.job_id() : 0;
  }

  /// Opens a Work stream, writes only `message` and returns how the daemon ends the call.
  grpc::Status WorkWithOnly(const v1::WorkerMessage& message) {
    grpc::ClientContext ctx;
    AttachToken(ctx, kToken, 10);
    auto work = worker_->Work(&ctx);
    EXPECT_TRUE(work->Write(message));
    work->WritesDone();
    return work->Finish();
  }

  grpc::Status Register(const v1::RegisterRequest& req, v1::RegisterReply* reply) {
    return Call(*worker_, &v1::Worker::Stub::Register, req, reply);
  }

  /// Registers a worker that describes this host's CPU (so jobs for llvm run); its id.
  uint64_t RegisterRealCpu(const std::string& name) {
    measure::Target cpu = measure::Target::HostCpu(1);
    v1::RegisterRequest req = CpuWorker(name);
    req.set_target_key(cpu.Key());
    req.set_target_json(cpu.ToJson());
    v1::RegisterReply reply;
    grpc::Status st = Register(req, &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return reply.worker_id();
  }

  /// The state `tune jobs` lists for job `id` (UNSPECIFIED when not listed); its note too.
  v1::JobState JobState(uint64_t id, std::string* note = nullptr) {
    v1::ListJobsReply jobs;
    EXPECT_TRUE(Call(*tune_, &v1::Tune::Stub::ListJobs, v1::ListJobsRequest(), &jobs).ok());
    for (const auto& j : jobs.jobs()) {
      if (j.job_id() != id) continue;
      if (note) *note = j.note();
      return j.state();
    }
    return v1::JOB_STATE_UNSPECIFIED;
  }

  /// Polls until job `id` is in `state` (a safety limit of 60 s, not a timing assertion).
  bool AwaitJobState(uint64_t id, v1::JobState state) {
    for (int i = 0; i < 3000; ++i) {
      if (JobState(id) == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  /// `n` results for a leased batch, ok unless changed.
  static v1::WorkerMessage OkResults(const v1::Batch& batch) {
    return tune::test::OkBatchResults(batch, [](int) { return 1e-3; });
  }

  static v1::RegisterRequest CpuWorker(const std::string& name) {
    v1::RegisterRequest req;
    req.set_name(name);
    req.set_host("localhost");
    req.set_target("llvm");
    req.set_target_key("llvm|x86_64|test");
    req.set_protocol(1);
    return req;
  }

  test::TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::Tune::Stub> tune_;
  std::unique_ptr<v1::Worker::Stub> worker_;
};

TEST_F(DaemonTest, HealthAnswersWithTheRightTokenOnly) {
  v1::HealthReply reply;
  ASSERT_TRUE(Health(kToken, &reply).ok());
  EXPECT_EQ(reply.protocol(), 1u);
  EXPECT_EQ(reply.workers(), 0u);
  EXPECT_EQ(reply.db_path(), dir_.Join("records.db"));
  grpc::Status wrong = Health("s3cret-tokeX", &reply);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_message(), "wrong token");
  EXPECT_EQ(Health("", &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Health("s3cret-token-longer", &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(Health(kToken, &reply).ok());  // still serving
}

TEST_F(DaemonTest, RegisteredWorkersAreListedAndHeartbeatsCheckTheirId) {
  v1::RegisterReply reg;
  ASSERT_TRUE(Register(CpuWorker("w1"), &reg).ok());
  EXPECT_EQ(reg.worker_id(), 1u);
  EXPECT_GT(reg.expire_after_s(), reg.heartbeat_interval_s());
  ASSERT_TRUE(Register(CpuWorker("w2"), &reg).ok());

  v1::ListWorkersReply list;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::ListWorkers, v1::ListWorkersRequest(), &list).ok());
  ASSERT_EQ(list.workers_size(), 2);
  EXPECT_EQ(list.workers(0).name(), "w1");
  EXPECT_EQ(list.workers(1).target(), "llvm");
  EXPECT_EQ(list.workers(1).state(), v1::WORKER_IDLE);

  v1::HeartbeatRequest hb;
  v1::HeartbeatReply hb_reply;
  hb.set_worker_id(2);
  EXPECT_TRUE(Call(*worker_, &v1::Worker::Stub::Heartbeat, hb, &hb_reply).ok());
  hb.set_worker_id(42);
  EXPECT_EQ(Call(*worker_, &v1::Worker::Stub::Heartbeat, hb, &hb_reply).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, BadRegistrationsAreRejectedWithAReason) {
  v1::RegisterReply reg;
  v1::RegisterRequest no_key = CpuWorker("w");
  no_key.clear_target_key();
  grpc::Status s = Register(no_key, &reg);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("target key"), std::string::npos);
  v1::RegisterRequest old = CpuWorker("w");
  old.set_protocol(7);
  EXPECT_EQ(Register(old, &reg).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  v1::HealthReply h;
  ASSERT_TRUE(Health(kToken, &h).ok());
  EXPECT_EQ(h.workers(), 0u);
}

TEST_F(DaemonTest, OversizedMessagesAreRejectedAndTheDaemonKeepsServing) {
  v1::RegisterRequest big = CpuWorker(std::string(100 << 10, 'x'));  // over the 64 KiB limit
  v1::RegisterReply reg;
  EXPECT_EQ(Register(big, &reg).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  v1::HealthReply h;
  EXPECT_TRUE(Health(kToken, &h).ok());
}

TEST_F(DaemonTest, QueryBestReadsTheDatabase) {
  {
    auto db = dataset::RecordDatabase::Open(dir_.Join("records.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    auto task = (*db)->UpsertTask({0, "matmul:64,64,64:float32", "matmul", "{}", 1, 1});
    auto target = (*db)->UpsertTarget({0, "llvm|x86_64|test", "{}"});
    ASSERT_TRUE(task.ok() && target.ok());
    std::vector<dataset::Record> recs(3);
    double medians[] = {3e-3, 1e-3, 2e-3};
    for (int i = 0; i < 3; ++i) {
      recs[i].task_id = *task;
      recs[i].target_id = *target;
      recs[i].config_json = "{\"i\":" + std::to_string(i) + "}";
      recs[i].config_index = i;
      recs[i].strategy = "random";
      recs[i].protocol_json = "{}";
      recs[i].result.status = measure::MeasureStatus::kOk;
      recs[i].result.costs_s = {medians[i]};
      recs[i].result.number = 1;
    }
    ASSERT_TRUE((*db)->AddRecords(recs).ok());
  }
  v1::QueryBestReply reply;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::QueryBest, v1::QueryBestRequest(), &reply).ok());
  ASSERT_EQ(reply.records_size(), 1);
  EXPECT_EQ(reply.records(0).config_json(), "{\"i\":1}");
  EXPECT_DOUBLE_EQ(reply.records(0).median_s(), 1e-3);
  v1::QueryBestRequest other;
  other.set_target_key("cuda|sm_90");
  v1::QueryBestReply none;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::QueryBest, other, &none).ok());
  EXPECT_EQ(none.records_size(), 0);
}

TEST_F(DaemonTest, BadWorkStreamsAreRejectedAndTheDaemonKeepsServing) {
  v1::RegisterReply reg;
  ASSERT_TRUE(Register(CpuWorker("w"), &reg).ok());
  {  // a stream must open with Ready
    v1::WorkerMessage m;
    m.mutable_release()->set_batch_id(1);
    grpc::Status st = WorkWithOnly(m);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("Ready"), std::string::npos);
  }
  {  // an unknown worker id
    v1::WorkerMessage m;
    m.mutable_ready()->set_worker_id(99);
    EXPECT_EQ(WorkWithOnly(m).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {  // results for a batch the worker does not hold
    measure::Target cpu = measure::Target::HostCpu(1);
    v1::RegisterRequest real = CpuWorker("real");
    real.set_target_key(cpu.Key());
    real.set_target_json(cpu.ToJson());
    v1::RegisterReply real_reg;
    ASSERT_TRUE(Register(real, &real_reg).ok());
    ASSERT_NE(SubmitSmallJob(), 0u);

    grpc::ClientContext ctx;
    AttachToken(ctx, kToken);
    ctx.set_deadline(Deadline(20));
    auto work = worker_->Work(&ctx);
    v1::WorkerMessage ready;
    ready.mutable_ready()->set_worker_id(real_reg.worker_id());
    ASSERT_TRUE(work->Write(ready));
    v1::DaemonMessage in;
    ASSERT_TRUE(work->Read(&in));
    ASSERT_TRUE(in.has_batch());
    v1::WorkerMessage wrong;
    wrong.mutable_results()->set_batch_id(in.batch().batch_id() + 1000);
    ASSERT_TRUE(work->Write(wrong));
    work->WritesDone();
    grpc::Status st = work->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("does not hold batch"), std::string::npos) << st.error_message();
  }
  {  // a worker whose target description does not match its key
    measure::Target cpu = measure::Target::HostCpu(1);
    v1::RegisterRequest bad = CpuWorker("liar");
    bad.set_target_json(cpu.ToJson());  // describes this CPU, but claims another key
    grpc::Status st = Register(bad, &reg);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("does not match"), std::string::npos) << st.error_message();
    bad.set_target_json("{not json");
    EXPECT_EQ(Register(bad, &reg).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  v1::HealthReply h;
  ASSERT_TRUE(Health(kToken, &h).ok());
  EXPECT_EQ(h.workers(), 2u);
}

TEST_F(DaemonTest, ACancelledJobEndsCancelledAndUnknownJobsAreNotFound) {
  const uint64_t job_id = SubmitSmallJob();
  ASSERT_NE(job_id, 0u);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  v1::CancelJobReply cancelled;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::CancelJob, cancel, &cancelled).ok());
  // No worker ever registers: the job thread sees the cancel while it waits for one.
  v1::JobState state = v1::JOB_QUEUED;
  for (int i = 0; i < 200 && state != v1::JOB_CANCELLED; ++i) {
    v1::ListJobsReply jobs;
    ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::ListJobs, v1::ListJobsRequest(), &jobs).ok());
    ASSERT_EQ(jobs.jobs_size(), 1);
    state = jobs.jobs(0).state();
    if (state != v1::JOB_CANCELLED) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(state, v1::JOB_CANCELLED);
  cancel.set_job_id(job_id + 7);
  EXPECT_EQ(Call(*tune_, &v1::Tune::Stub::CancelJob, cancel, &cancelled).error_code(), grpc::StatusCode::NOT_FOUND);
}

/// A Work stream of a fake worker: Ready, then the batch the daemon leases (none when none
/// comes within `wait_s`).
struct FakeWork {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>> stream;
  v1::Batch batch;

  FakeWork(v1::Worker::Stub& stub, uint64_t worker_id, double wait_s = 30) {
    AttachToken(ctx, kToken);
    ctx.set_deadline(Deadline(wait_s));
    stream = stub.Work(&ctx);
    v1::WorkerMessage ready;
    ready.mutable_ready()->set_worker_id(worker_id);
    v1::DaemonMessage in;
    if (stream->Write(ready) && stream->Read(&in) && in.has_batch()) batch = in.batch();
  }
};

TEST_F(DaemonTest, ImpossibleResultsAreRefusedAndTheBatchIsLeasedAgain) {
  StartDaemon(/*max_batch_losses=*/100);  // each refusal is a lost lease
  ASSERT_NE(SubmitSmallJob(), 0u);
  std::mt19937_64 rng = test::TestRng();
  const std::vector<std::string> kinds = {"negative", "nan", "infinite", "empty", "index", "status", "number"};
  std::vector<std::string> order = kinds;
  std::shuffle(order.begin(), order.end(), rng);
  uint64_t batch_id = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& kind = order[k];
    FakeWork work(*worker_, RegisterRealCpu("w" + std::to_string(k)));
    ASSERT_NE(work.batch.batch_id(), 0u) << kind;
    // Refused results leave the batch queued: the next worker gets the same one.
    if (batch_id != 0) EXPECT_EQ(work.batch.batch_id(), batch_id) << kind;
    batch_id = work.batch.batch_id();
    v1::WorkerMessage m = OkResults(work.batch);
    v1::MeasureResult* r = m.mutable_results()->mutable_results(
        std::uniform_int_distribution<int>(0, work.batch.configs_json_size() - 1)(rng));
    const double magnitude = std::uniform_real_distribution<double>(1e-9, 1e3)(rng);
    if (kind == "negative") r->set_costs_s(0, -magnitude);
    if (kind == "nan") r->add_costs_s(std::nan(""));
    if (kind == "infinite") r->set_costs_s(0, std::numeric_limits<double>::infinity());
    if (kind == "empty") r->clear_costs_s();
    if (kind == "index") r->set_index(r->index() + 1 + static_cast<uint32_t>(magnitude));
    if (kind == "status") r->set_status("great");
    if (kind == "number") r->set_number(0x80000000u + static_cast<uint32_t>(magnitude));
    ASSERT_TRUE(work.stream->Write(m));
    work.stream->WritesDone();
    grpc::Status st = work.stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << kind << ": " << st.error_message();
    EXPECT_NE(st.error_message().find("invalid result"), std::string::npos) << st.error_message();
  }
  // Finally a possible result is taken and acknowledged.
  FakeWork work(*worker_, RegisterRealCpu("honest"));
  EXPECT_EQ(work.batch.batch_id(), batch_id);
  ASSERT_TRUE(work.stream->Write(OkResults(work.batch)));
  v1::DaemonMessage ack;
  ASSERT_TRUE(work.stream->Read(&ack));
  EXPECT_EQ(ack.ack().batch_id(), batch_id);
  EXPECT_FALSE(ack.ack().discarded());
  work.ctx.TryCancel();
}

TEST_F(DaemonTest, OutOfRangeJobFieldsAreRefused) {
  std::mt19937_64 rng = test::TestRng();
  auto above = [&](uint64_t limit) {
    return static_cast<uint32_t>(std::uniform_int_distribution<uint64_t>(limit + 1, 0xffffffffu)(rng));
  };
  auto submit = [&](const std::function<void(v1::SubmitJobRequest&)>& change) {
    v1::SubmitJobRequest job;
    job.set_model_json(R"({"layers": [{"op": "matmul", "shape": "8,8,8"}]})");
    job.set_target("llvm");
    job.set_trials(2);
    change(job);
    v1::SubmitJobReply reply;
    return Call(*tune_, &v1::Tune::Stub::SubmitJob, job, &reply);
  };
  struct Case {
    std::string field;
    std::function<void(v1::SubmitJobRequest&)> change;
  };
  const std::vector<Case> cases = {
      {"batch", [&](v1::SubmitJobRequest& j) { j.set_batch(above(1024)); }},
      {"batch", [&](v1::SubmitJobRequest& j) { j.set_batch(0x80000000u); }},
      {"total_trials", [&](v1::SubmitJobRequest& j) { j.set_total_trials(above(100000000)); }},
      {"trials", [&](v1::SubmitJobRequest& j) { j.set_trials(above(1000000)); }},
      {"trials", [&](v1::SubmitJobRequest& j) { j.set_trials(0); }},
      {"repeats", [&](v1::SubmitJobRequest& j) {
         j.set_protocol_json(absl::StrCat(R"({"repeats": )", above(1000), "}"));
       }},
      {"warmup", [&](v1::SubmitJobRequest& j) { j.set_protocol_json(R"({"warmup": 2000000000})"); }},
      {"timeout_s", [&](v1::SubmitJobRequest& j) { j.set_protocol_json(R"({"timeout_s": 1e300})"); }},
      {"strategy options", [&](v1::SubmitJobRequest& j) {
         for (int i = 0; i < 300; ++i) j.add_strategy_options("eps_greedy=0.1");
       }},
  };
  for (const Case& c : cases) {
    grpc::Status st = submit(c.change);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.field), std::string::npos) << st.error_message();
  }
  v1::ListJobsReply jobs;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::ListJobs, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);  // nothing stored
  EXPECT_TRUE(submit([](v1::SubmitJobRequest& j) { j.set_batch(1024); }).ok());
}

TEST_F(DaemonTest, JobsWhoseBuffersCannotFitAreRefusedAtSubmit) {
  std::mt19937_64 rng = test::TestRng();
  for (const std::string& shape : {absl::StrCat(std::uniform_int_distribution<int64_t>(
                                                   int64_t{1} << 36, int64_t{1} << 40)(rng), ",4,4"),
                                   std::string("1,100000,56,56,100000,3,3,1,1")}) {
    v1::SubmitJobRequest job;
    const char* op = shape.size() > 20 ? "conv2d" : "matmul";
    job.set_model_json(absl::StrCat(R"({"layers": [{"op": ")", op, R"(", "shape": ")", shape, R"("}]})"));
    job.set_target("llvm");
    job.set_trials(1);
    v1::SubmitJobReply reply;
    grpc::Status st = Call(*tune_, &v1::Tune::Stub::SubmitJob, job, &reply);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << shape << ": " << st.error_message();
    EXPECT_NE(st.error_message().find("needs"), std::string::npos) << st.error_message();
  }
  v1::ListJobsReply jobs;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::ListJobs, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

// Each job not yet ended holds a thread: beyond kMaxActiveJobs a submit is refused (the
// daemon never runs out of threads), and a slot frees once a job ends.
TEST_F(DaemonTest, JobsBeyondTheActiveLimitAreRefusedUntilOneEnds) {
  std::mt19937_64 rng = test::TestRng();
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < JobManager::kMaxActiveJobs; ++i) {
    ids.push_back(SubmitSmallJob());
    ASSERT_NE(ids.back(), 0u) << i;
  }
  v1::SubmitJobReply reply;
  grpc::Status st = TrySubmitSmallJob(&reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("the most this daemon runs at once"), std::string::npos) << st.error_message();
  v1::CancelJobRequest cancel;
  cancel.set_job_id(ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)]);
  v1::CancelJobReply cancelled;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::CancelJob, cancel, &cancelled).ok());
  EXPECT_NE(SubmitSmallJob(), 0u);
}

TEST_F(DaemonTest, CancelEndsAJobStuckOnALeasedBatchForGood) {
  const uint64_t job_id = SubmitSmallJob();
  ASSERT_NE(job_id, 0u);
  std::string note;
  EXPECT_EQ(JobState(job_id, &note), v1::JOB_QUEUED);
  EXPECT_EQ(note, "waiting for a live llvm worker");
  // A worker takes the job's batch and never returns it.
  FakeWork work(*worker_, RegisterRealCpu("stuck"));
  ASSERT_NE(work.batch.batch_id(), 0u);
  EXPECT_EQ(JobState(job_id), v1::JOB_RUNNING);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  v1::CancelJobReply reply;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::CancelJob, cancel, &reply).ok());
  EXPECT_EQ(reply.state(), v1::JOB_CANCELLED);
  EXPECT_EQ(JobState(job_id), v1::JOB_CANCELLED);
  // The revoked batch's late results are refused cleanly: an Ack that says discarded.
  ASSERT_TRUE(work.stream->Write(OkResults(work.batch)));
  v1::DaemonMessage ack;
  ASSERT_TRUE(work.stream->Read(&ack));
  EXPECT_EQ(ack.ack().batch_id(), work.batch.batch_id());
  EXPECT_TRUE(ack.ack().discarded());
  work.ctx.TryCancel();
  // Cancelling again says it ended cancelled; a restarted daemon lists it cancelled.
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::CancelJob, cancel, &reply).ok());
  EXPECT_EQ(reply.state(), v1::JOB_CANCELLED);
  StartDaemon();
  EXPECT_EQ(JobState(job_id), v1::JOB_CANCELLED);
  v1::HealthReply h;
  ASSERT_TRUE(Health(kToken, &h).ok());
  EXPECT_EQ(h.jobs_active(), 0u);
}

TEST_F(DaemonTest, ABatchWhoseWorkersKeepDyingIsRecordedAsFailedAndTheJobEnds) {
  StartDaemon(/*max_batch_losses=*/2);
  const uint64_t job_id = SubmitSmallJob();
  ASSERT_NE(job_id, 0u);
  std::map<uint64_t, int> leases;  // batch id -> times leased
  for (int i = 0; i < 40 && JobState(job_id) != v1::JOB_DONE; ++i) {
    // Each worker takes a batch and dies with it (its stream breaks).
    FakeWork work(*worker_, RegisterRealCpu("doomed" + std::to_string(i)), /*wait_s=*/1);
    if (work.batch.batch_id() == 0) continue;
    ++leases[work.batch.batch_id()];
    work.ctx.TryCancel();
  }
  ASSERT_TRUE(AwaitJobState(job_id, v1::JOB_DONE));
  ASSERT_FALSE(leases.empty());
  for (const auto& [batch, n] : leases) EXPECT_EQ(n, 2) << "batch " << batch;
  auto db = dataset::RecordDatabase::Open(dir_.Join("records.db"), /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  ASSERT_TRUE(tasks.ok() && targets.ok());
  ASSERT_EQ(tasks->size(), 1u);
  auto records = (*db)->Records((*tasks)[0].id, (*targets)[0].id);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 3u);  // the default schedule and two trials
  for (const auto& r : *records) {
    EXPECT_EQ(r.result.status, measure::MeasureStatus::kRuntimeError);
    EXPECT_EQ(r.result.message, "worker lost 2 times while measuring this batch");
  }
  StartDaemon();  // and it stays done
  EXPECT_EQ(JobState(job_id), v1::JOB_DONE);
}

// A batch that outlasts its lease while its worker keeps measuring (a long GPU batch) goes to
// the next worker; the first of the two to return it is recorded, the other gets an Ack that
// says discarded (its stream goes on, no protocol error), and no config is recorded twice.
TEST_F(DaemonTest, ABatchPastItsLeaseIsRecordedOnceFromWhoeverReturnsItFirst) {
  StartDaemon(/*max_batch_losses=*/3, /*lease_s=*/1);
  const uint64_t job_id = SubmitSmallJob();
  ASSERT_NE(job_id, 0u);
  std::mt19937_64 rng = test::TestRng();
  std::uniform_real_distribution<double> cost(1e-6, 1e-3);
  FakeWork slow(*worker_, RegisterRealCpu("slow"));
  ASSERT_NE(slow.batch.batch_id(), 0u);
  // Its lease runs out (the janitor looks twice a second): the next worker gets the batch.
  FakeWork fast(*worker_, RegisterRealCpu("fast"));
  ASSERT_EQ(fast.batch.batch_id(), slow.batch.batch_id());
  v1::WorkerMessage slow_results = OkResults(slow.batch), fast_results = OkResults(fast.batch);
  for (auto* m : {&slow_results, &fast_results})
    for (auto& r : *m->mutable_results()->mutable_results()) r.set_costs_s(0, cost(rng));
  ASSERT_TRUE(slow.stream->Write(slow_results));  // the slow one returns first
  v1::HealthReply health;
  for (int i = 0; i < 3000 && health.results_ingested() < static_cast<uint64_t>(slow.batch.configs_json_size()); ++i) {
    ASSERT_TRUE(Health(kToken, &health).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fast.stream->Write(fast_results));
  v1::DaemonMessage ack;
  ASSERT_TRUE(fast.stream->Read(&ack));
  EXPECT_EQ(ack.ack().batch_id(), fast.batch.batch_id());
  EXPECT_TRUE(ack.ack().discarded());
  slow.ctx.TryCancel();
  fast.ctx.TryCancel();
  // Honest workers finish the job (a round may be split across them: their Acks come once
  // the whole round is in, which they do not wait for).
  for (int i = 0; i < 40 && JobState(job_id) != v1::JOB_DONE; ++i) {
    FakeWork work(*worker_, RegisterRealCpu("honest" + std::to_string(i)), /*wait_s=*/2);
    if (work.batch.batch_id() == 0) continue;
    ASSERT_TRUE(work.stream->Write(OkResults(work.batch)));
    work.stream->WritesDone();
    (void)work.stream->Finish();
  }
  ASSERT_TRUE(AwaitJobState(job_id, v1::JOB_DONE));
  auto db = dataset::RecordDatabase::Open(dir_.Join("records.db"), /*create=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  ASSERT_TRUE(tasks.ok() && targets.ok() && tasks->size() == 1u);
  auto records = (*db)->Records((*tasks)[0].id, (*targets)[0].id);
  ASSERT_TRUE(records.ok());
  int defaults = 0;
  std::set<uint64_t> searched;
  for (const auto& r : *records) {
    if (r.strategy == "default") {
      ++defaults;  // the first batch: the slow worker's results, not the fast one's
      ASSERT_EQ(r.result.costs_s.size(), 1u);
      EXPECT_EQ(r.result.costs_s[0], slow_results.results().results(0).costs_s(0));
    } else if (r.strategy != "finalist") {
      EXPECT_TRUE(searched.insert(r.config_index).second) << "config " << r.config_index << " recorded twice";
    }
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_EQ(searched.size(), 2u);
  ASSERT_TRUE(Health(kToken, &health).ok());
  EXPECT_EQ(health.results_ingested(), health.results_committed());  // the fast one's never counted
}

TEST_F(DaemonTest, AWorkerThatLeavesIsGoneAtOnceAndItsBatchGoesBack) {
  const uint64_t job_id = SubmitSmallJob();
  ASSERT_NE(job_id, 0u);
  const uint64_t id = RegisterRealCpu("leaving");
  FakeWork work(*worker_, id);
  ASSERT_NE(work.batch.batch_id(), 0u);
  v1::LeaveRequest leave;
  leave.set_worker_id(id);
  v1::LeaveReply left;
  ASSERT_TRUE(Call(*worker_, &v1::Worker::Stub::Leave, leave, &left).ok());
  v1::ListWorkersReply list;
  ASSERT_TRUE(Call(*tune_, &v1::Tune::Stub::ListWorkers, v1::ListWorkersRequest(), &list).ok());
  ASSERT_EQ(list.workers_size(), 1);
  EXPECT_EQ(list.workers(0).state(), v1::WORKER_GONE);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(id);
  v1::HeartbeatReply hb_reply;
  EXPECT_EQ(Call(*worker_, &v1::Worker::Stub::Heartbeat, hb, &hb_reply).error_code(), grpc::StatusCode::NOT_FOUND);
  std::string note;
  EXPECT_EQ(JobState(job_id, &note), v1::JOB_RUNNING);
  EXPECT_EQ(note, "stalled: no live worker measures its target");
  // The batch it held is the next worker's, and a late result from the leaver is refused.
  FakeWork next(*worker_, RegisterRealCpu("next"));
  EXPECT_EQ(next.batch.batch_id(), work.batch.batch_id());
  ASSERT_TRUE(work.stream->Write(OkResults(work.batch)));
  work.stream->WritesDone();
  EXPECT_EQ(work.stream->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  next.ctx.TryCancel();
  leave.set_worker_id(99);
  EXPECT_EQ(Call(*worker_, &v1::Worker::Stub::Leave, leave, &left).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(Daemon, StartRejectsBadAddressesAndTlsHalves) {
  test::TempDir dir;
  DaemonOptions o;
  o.db_path = dir.Join("r.db");
  o.listen = "localhost";
  EXPECT_TRUE(absl::IsInvalidArgument(Daemon(o).Start().status()));
  o.listen = "127.0.0.1:99999";
  EXPECT_TRUE(absl::IsInvalidArgument(Daemon(o).Start().status()));
  o.listen = "127.0.0.1:0";
  o.tls_cert_path = dir.Join("cert.pem");
  EXPECT_TRUE(absl::IsInvalidArgument(Daemon(o).Start().status()));
  EXPECT_TRUE(dir.List().empty());  // nothing written for a rejected start
}

TEST(Daemon, APortInUseIsRefusedWhoeverHoldsIt) {
  test::TempDir dir;
  DaemonOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.Join("first.db");
  Daemon first(o);
  auto port = first.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  o.listen = "127.0.0.1:" + std::to_string(*port);
  o.db_path = dir.Join("second.db");
  absl::StatusOr<int> second = Daemon(o).Start();
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("port " + std::to_string(*port) + " is already in use"), std::string::npos)
      << second.status();
  EXPECT_FALSE(std::filesystem::exists(dir.Join("second.db")));  // nothing opened

  // A port held by something other than a daemon: a plain listening socket.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  o.listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  EXPECT_TRUE(absl::IsUnavailable(Daemon(o).Start().status()));
  ::close(fd);
}

TEST(Daemon, ServesTlsToClientsThatTrustItsCertificateOnly) {
  test::TempDir dir;
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                          "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + dir.Join("key.pem") +
                          " -out " + dir.Join("cert.pem") + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a test certificate here";
  DaemonOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = dir.Join("r.db");
  o.tls_cert_path = dir.Join("cert.pem");
  o.tls_key_path = dir.Join("key.pem");
  Daemon daemon(o);
  auto port = daemon.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = test::ReadFileBytes(dir.Join("cert.pem"));
  auto tls = v1::Tune::NewStub(grpc::CreateChannel(address, grpc::SslCredentials(ssl)));
  v1::HealthReply reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  grpc::Status st = tls->Health(&ctx, v1::HealthRequest(), &reply);
  EXPECT_TRUE(st.ok()) << st.error_message();
  auto plain = v1::Tune::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext pctx;
  pctx.set_deadline(Deadline(2));
  EXPECT_FALSE(plain->Health(&pctx, v1::HealthRequest(), &reply).ok());
}

// `tune serve` as a real process: prints its port, answers `tune workers`, stops on SIGTERM.
TEST(ServeProcess, ServesUntilSigtermAndRejectsAWrongToken) {
  test::TempDir dir;
  test::WriteFileBytes(dir.Join("token"), std::string(kToken) + "\n");
  test::WriteFileBytes(dir.Join("wrong"), "nope\n");
  const std::string tune = test::TuneBinary();
  test::Subprocess serve;
  std::string port = test::StartServe(serve, dir, "serve", "127.0.0.1:0",
                                      {"--db", dir.Join("r.db"), "--token-file", dir.Join("token")});
  ASSERT_FALSE(port.empty()) << test::ReadFileBytes(dir.Join("serve.err"));

  auto ok = test::RunProcess({tune, "workers", "--server", "127.0.0.1:" + port, "--token-file", dir.Join("token")},
                             dir.path(), 60);
  EXPECT_EQ(ok.exit_code, 0) << ok;
  EXPECT_NE(ok.out.find("(no workers)"), std::string::npos) << ok;
  auto bad = test::RunProcess({tune, "workers", "--server", "127.0.0.1:" + port, "--token-file", dir.Join("wrong")},
                              dir.path(), 60);
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("wrong token"), std::string::npos) << bad;

  serve.Kill(SIGTERM);
  const test::ProcessResult& r = serve.Wait();
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(test::ReadFileBytes(dir.Join("serve.out")).find("SIGTERM, shutting down"), std::string::npos);
}

TEST(ServeProcess, ASecondServeOnTheSamePortExitsWithOneLine) {
  test::TempDir dir;
  test::Subprocess first;
  const std::string port = test::StartServe(first, dir, "first", "127.0.0.1:0", {"--db", dir.Join("r.db")});
  ASSERT_FALSE(port.empty()) << test::ReadFileBytes(dir.Join("first.err"));
  // Also with the other daemon requiring a token: the port is never shared.
  test::WriteFileBytes(dir.Join("token"), "another-token\n");
  auto second = test::RunProcess({test::TuneBinary(), "serve", "--listen", "127.0.0.1:" + port, "--db",
                                  dir.Join("r2.db"), "--token-file", dir.Join("token")},
                                 dir.path(), 60);
  EXPECT_EQ(second.exit_code, 2) << second;
  EXPECT_EQ(second.err, "tune: cannot listen on 127.0.0.1:" + port + ": port " + port +
                            " is already in use (is another tune serve running?)\n")
      << second;
  EXPECT_EQ(second.out.find("listening"), std::string::npos) << second;
  EXPECT_FALSE(first.Finished());  // the first one keeps serving
}

TEST(ServeProcess, BadFlagsFailWithOneLineAndWriteNothing) {
  test::TempDir dir;
  const std::string tune = std::string(TUNE_BIN_DIR) + "/tune";
  auto r = test::RunProcess({tune, "serve", "--listen", "nonsense", "--db", dir.Join("r.db")}, dir.path(), 60);
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("bad listen address 'nonsense'"), std::string::npos) << r;
  auto open = test::RunProcess({tune, "serve", "--listen", "0.0.0.0:0", "--db", dir.Join("r.db")}, dir.path(), 60);
  EXPECT_EQ(open.exit_code, 2) << open;
  EXPECT_NE(open.err.find("without a token"), std::string::npos) << open;
  auto no_db = test::RunProcess({tune, "serve"}, dir.path(), 60);
  EXPECT_EQ(no_db.exit_code, 2) << no_db;
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace tune::server
