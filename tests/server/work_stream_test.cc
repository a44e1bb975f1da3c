// Work streams without a thread each: a waiting worker waits in the LeaseQueue, a queued batch
// is leased and handed over on the thread that queues it, settlements call back.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/server/batch_results.h"
#include "measure/target.h"
#include "server/daemon.h"
#include "server/grpc_status.h"
#include "server/lease_queue.h"
#include "server/wire_names.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tune/v1/tune.grpc.pb.h"

namespace tune::server {
namespace {

BatchSpec WsSpec(uint64_t job, int configs) {
  BatchSpec s;
  s.job_id = job;
  s.target_key = "cpu";
  s.workload_key = "matmul:8,8,8";
  for (int i = 0; i < configs; ++i) s.configs_json.push_back("{\"i\":" + std::to_string(i) + "}");
  return s;
}

std::vector<BatchResult> WsOk(size_t n) { return std::vector<BatchResult>(n, BatchResult{"ok", "", {2e-3}, 1, 0, 0}); }

/// Threads of this process now (/proc/self/status).
int WsThreads() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int n = 0;
  while (status >> key) {
    if (key == "Threads:") {
      status >> n;
      return n;
    }
    status.ignore(1 << 20, '\n');
  }
  return n;
}

struct WsDelivery {
  uint64_t batch = 0;
  BatchSpec spec;
  std::thread::id thread;
  int calls = 0;
};

TEST(WorkStreamQueue, AQueuedBatchIsLeasedToTheFirstWaiterOnTheQueuingThread) {
  std::mt19937_64 rng = test::TestRng(11);
  LeaseQueue q(30);
  const int waiters = std::uniform_int_distribution<int>(3, 9)(rng);
  const uint64_t first_worker = std::uniform_int_distribution<uint64_t>(1, 1000)(rng);
  std::vector<WsDelivery> got(waiters);
  for (int w = 0; w < waiters; ++w) {
    auto lease = q.LeaseOrWait(first_worker + w, "cpu", 0, [&got, w](uint64_t batch, BatchSpec spec) {
      got[w].batch = batch;
      got[w].spec = std::move(spec);
      got[w].thread = std::this_thread::get_id();
      ++got[w].calls;
    });
    EXPECT_FALSE(lease);  // nothing queued: it waits
  }
  EXPECT_EQ(q.Waiting(), static_cast<size_t>(waiters));
  // Each batch goes to the waiter that came first, before Enqueue returns, on this thread.
  std::vector<uint64_t> batches;
  for (int w = 0; w < waiters; ++w) {
    const int configs = std::uniform_int_distribution<int>(1, 16)(rng);
    batches.push_back(q.Enqueue(WsSpec(1 + w % 2, configs)));
    EXPECT_EQ(got[w].calls, 1);
    EXPECT_EQ(got[w].batch, batches.back());
    EXPECT_EQ(got[w].spec.configs_json.size(), static_cast<size_t>(configs));
    EXPECT_EQ(got[w].thread, std::this_thread::get_id());
    EXPECT_EQ(q.Waiting(), static_cast<size_t>(waiters - w - 1));
    for (int later = w + 1; later < waiters; ++later) EXPECT_EQ(got[later].calls, 0);
  }
  EXPECT_EQ(q.Queued("cpu"), 0u);
  // The batch is leased to its waiter: only that worker may return it.
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(first_worker + 1, batches[0], WsOk(got[0].spec.configs_json.size()))));
  EXPECT_TRUE(q.Complete(first_worker, batches[0], WsOk(got[0].spec.configs_json.size())).ok());
  EXPECT_FALSE(q.CancelWait(first_worker));  // it was not waiting any more
}

TEST(WorkStreamQueue, ARequeuedBatchGoesToAWaiterAndAWithdrawnWaitGetsNothing) {
  std::mt19937_64 rng = test::TestRng(12);
  LeaseQueue q(30);
  const uint64_t holder = std::uniform_int_distribution<uint64_t>(1, 100)(rng);
  const uint64_t gone = holder + 1, waiting = holder + 2;
  const uint64_t batch = q.Enqueue(WsSpec(3, std::uniform_int_distribution<int>(2, 8)(rng)));
  ASSERT_EQ(q.Lease(holder, "cpu", 0)->first, batch);
  int gone_calls = 0;
  uint64_t delivered = 0;
  EXPECT_FALSE(q.LeaseOrWait(gone, "cpu", 0, [&](uint64_t, BatchSpec) { ++gone_calls; }));
  EXPECT_FALSE(q.LeaseOrWait(waiting, "cpu", 0, [&](uint64_t b, BatchSpec) { delivered = b; }));
  EXPECT_TRUE(q.CancelWait(gone));
  EXPECT_FALSE(q.CancelWait(gone));
  // The holder dies: its batch is requeued and handed to the one worker still waiting.
  EXPECT_EQ(q.ReleaseWorker(holder), 1);
  EXPECT_EQ(gone_calls, 0);
  EXPECT_EQ(delivered, batch);
  EXPECT_EQ(q.Waiting(), 0u);
  // A worker with a batch queued for it is not made to wait.
  const uint64_t next = q.Enqueue(WsSpec(3, 1));
  auto now = q.LeaseOrWait(gone, "cpu", 0, [&](uint64_t, BatchSpec) { ++gone_calls; });
  ASSERT_TRUE(now);
  EXPECT_EQ(now->first, next);
  EXPECT_EQ(gone_calls, 0);
}

TEST(WorkStreamQueue, SettlementsCallBackOnceWithTheirOutcome) {
  std::mt19937_64 rng = test::TestRng(13);
  LeaseQueue q(30);
  const int n = std::uniform_int_distribution<int>(3, 8)(rng);
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(q.Enqueue(WsSpec(5, 2)));
    ASSERT_EQ(q.Lease(40 + i, "cpu", 0)->first, ids.back());
    ASSERT_TRUE(q.Complete(40 + i, ids.back(), WsOk(2)).ok());
    ASSERT_TRUE(q.AwaitResults(ids.back(), 1));
  }
  std::vector<int> calls(n, 0);
  std::vector<LeaseQueue::Outcome> outcome(n, LeaseQueue::Outcome::kTimedOut);
  auto callback = [&](int i) {
    return [&, i](LeaseQueue::Outcome o) {
      ++calls[i];
      outcome[i] = o;
    };
  };
  // Batch 0 is settled before anyone asks: the callback runs at once.
  q.MarkCommitted(ids[0]);
  q.OnSettled(ids[0], callback(0));
  EXPECT_EQ(calls[0], 1);
  EXPECT_EQ(outcome[0], LeaseQueue::Outcome::kCommitted);
  for (int i = 1; i < n; ++i) q.OnSettled(ids[i], callback(i));
  for (int i = 1; i < n; ++i) EXPECT_EQ(calls[i], 0);
  const int forgotten = n - 1;
  q.ForgetSettled(ids[forgotten]);
  for (int i = 1; i < n; ++i) {
    if (i % 2) q.MarkCommitted(ids[i]);
    else q.MarkDiscarded(ids[i]);
  }
  for (int i = 1; i < n; ++i) {
    if (i == forgotten) {
      EXPECT_EQ(calls[i], 0);
      continue;
    }
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(outcome[i], i % 2 ? LeaseQueue::Outcome::kCommitted : LeaseQueue::Outcome::kDiscarded) << i;
  }
  // A forgotten settlement is not kept for a waiter that never comes.
  EXPECT_EQ(q.AwaitCommitted(ids[forgotten], 0.01), LeaseQueue::Outcome::kTimedOut);
}

/// A daemon in this process with workers that describe this host's CPU.
class WorkStreamDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonOptions o;
    o.listen = "127.0.0.1:0";
    o.db_path = dir_.Join("records.db");
    daemon_ = std::make_unique<Daemon>(o);
    auto port = daemon_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port), grpc::InsecureChannelCredentials());
    tune_ = v1::Tune::NewStub(channel);
    worker_ = v1::Worker::NewStub(channel);
  }

  uint64_t RegisterCpu(const std::string& name) {
    const measure::Target cpu = measure::Target::HostCpu(1);
    v1::RegisterRequest req;
    req.set_name(name);
    req.set_host("test");
    req.set_target("llvm");
    req.set_target_key(cpu.Key());
    req.set_target_json(cpu.ToJson());
    req.set_protocol(kWireProtocol);
    grpc::ClientContext ctx;
    AttachToken(ctx, "", 10);
    v1::RegisterReply reply;
    grpc::Status st = worker_->Register(&ctx, req, &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return reply.worker_id();
  }

  test::TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::Tune::Stub> tune_;
  std::unique_ptr<v1::Worker::Stub> worker_;
};

struct WsStream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>> stream;
};

TEST_F(WorkStreamDaemonTest, WaitingWorkersHoldNoDaemonThreadAndGetTheNextBatches) {
  std::mt19937_64 rng = test::TestRng(14);
  const int n = std::uniform_int_distribution<int>(24, 40)(rng);
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(RegisterCpu("w" + std::to_string(i)));
  auto open = [&](uint64_t id) {
    auto s = std::make_unique<WsStream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    s->stream = worker_->Work(&s->ctx);
    v1::WorkerMessage ready;
    ready.mutable_ready()->set_worker_id(id);
    EXPECT_TRUE(s->stream->Write(ready));
    return s;
  };
  // One stream first, so that gRPC's own threads of both sides are running.
  std::vector<std::unique_ptr<WsStream>> streams;
  streams.push_back(open(ids[0]));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int before = WsThreads();
  for (int i = 1; i < n; ++i) streams.push_back(open(ids[i]));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let their Ready arrive
  const int after = WsThreads();
  // A thread per stream would add n - 1 here (the sync server's handler threads).
  EXPECT_LT(after - before, n / 3) << before << " threads with one stream, " << after << " with " << n;

  // A job now: its round is split across the waiting workers, and each gets its part.
  v1::SubmitJobRequest job;
  job.set_model_json(R"({"layers": [{"op": "matmul", "shape": "8,8,8"}]})");
  job.set_target("llvm");
  job.set_trials(static_cast<uint32_t>(std::uniform_int_distribution<int>(n, 2 * n)(rng)));
  job.set_batch(static_cast<uint32_t>(n));
  job.set_strategy("random");
  job.set_cost_model("none");
  grpc::ClientContext submit_ctx;
  v1::SubmitJobReply submitted;
  ASSERT_TRUE(tune_->SubmitJob(&submit_ctx, job, &submitted).ok());
  const int pick = std::uniform_int_distribution<int>(0, n - 1)(rng);
  // The other streams answer every batch they get (and ask for the next), so that the round
  // of the picked batch can be committed.
  std::vector<std::thread> others;
  struct WsJoin {  // on every way out: the streams end, their threads are joined
    std::vector<std::unique_ptr<WsStream>>& streams;
    std::vector<std::thread>& threads;
    ~WsJoin() {
      for (auto& s : streams) s->ctx.TryCancel();
      for (std::thread& t : threads) t.join();
    }
  } join{streams, others};
  for (int i = 0; i < n; ++i) {
    if (i == pick) continue;
    others.emplace_back([s = streams[i].get(), id = ids[i]] {
      v1::DaemonMessage m;
      while (s->stream->Read(&m)) {
        if (!m.has_batch()) continue;  // an Ack
        const v1::WorkerMessage r = tune::test::OkBatchResults(m.batch(), [](int k) { return 1e-3 * (1 + k); });
        v1::WorkerMessage ready;
        ready.mutable_ready()->set_worker_id(id);
        if (!s->stream->Write(r) || !s->stream->Write(ready)) return;
      }
    });
  }
  // The picked stream gets a batch (in the first round, or once the others answered the first);
  // its results are taken, committed and acknowledged.
  v1::DaemonMessage in;
  ASSERT_TRUE(streams[pick]->stream->Read(&in));
  ASSERT_TRUE(in.has_batch());
  const v1::Batch batch = in.batch();
  ASSERT_GT(batch.configs_json_size(), 0);
  const v1::WorkerMessage results =
      tune::test::OkBatchResults(batch, [&](int) { return std::uniform_real_distribution<double>(1e-4, 1e-2)(rng); });
  ASSERT_TRUE(streams[pick]->stream->Write(results));
  if (!streams[pick]->stream->Read(&in)) {
    grpc::Status st = streams[pick]->stream->Finish();
    FAIL() << "no Ack: " << st.error_code() << " " << st.error_message();
  }
  ASSERT_TRUE(in.has_ack());
  EXPECT_EQ(in.ack().batch_id(), batch.batch_id());
  EXPECT_FALSE(in.ack().discarded());
  v1::CancelJobRequest cancel;
  cancel.set_job_id(submitted.job_id());
  grpc::ClientContext cancel_ctx;
  v1::CancelJobReply cancelled;
  (void)tune_->CancelJob(&cancel_ctx, cancel, &cancelled);
}

}  // namespace
}  // namespace tune::server
