// LeaseQueue: per-target FIFO, leases held by one worker, requeue on expiry / release / loss,
// results only from the holder, cancellation wakes the waiter.
#include "server/lease_queue.h"

#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::server {
namespace {

BatchSpec Spec(const std::string& target, int n, uint64_t job = 1) {
  BatchSpec s;
  s.job_id = job;
  s.target_key = target;
  s.workload_key = "matmul:8,8,8";
  for (int i = 0; i < n; ++i) s.configs_json.push_back("{\"i\":" + std::to_string(i) + "}");
  return s;
}

std::vector<BatchResult> Ok(int n) { return std::vector<BatchResult>(n, BatchResult{"ok", "", {1e-3}, 1, 0, 0}); }

TEST(LeaseQueue, BatchesGoOnlyToTheirTargetOldestFirst) {
  LeaseQueue q(30);
  uint64_t a = q.Enqueue(Spec("cpu", 2));
  uint64_t g = q.Enqueue(Spec("gpu", 2));
  uint64_t b = q.Enqueue(Spec("cpu", 2));
  EXPECT_EQ(q.Queued("cpu"), 2u);
  auto l1 = q.Lease(7, "cpu", 0);
  ASSERT_TRUE(l1);
  EXPECT_EQ(l1->first, a);
  auto l2 = q.Lease(8, "cpu", 0);
  ASSERT_TRUE(l2);
  EXPECT_EQ(l2->first, b);
  EXPECT_FALSE(q.Lease(9, "cpu", 0));
  EXPECT_EQ(q.Lease(9, "gpu", 0)->first, g);
}

TEST(LeaseQueue, OnlyTheHolderMayCompleteAndOnlyOnce) {
  LeaseQueue q(30);
  uint64_t a = q.Enqueue(Spec("cpu", 3));
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a, Ok(3))));  // not leased yet
  ASSERT_TRUE(q.Lease(7, "cpu", 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(8, a, Ok(3))));  // another worker
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a + 1, Ok(3))));  // unknown batch
  EXPECT_TRUE(absl::IsInvalidArgument(q.Complete(7, a, Ok(2))));     // wrong count
  ASSERT_TRUE(q.Complete(7, a, Ok(3)).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a, Ok(3))));  // twice
  auto r = q.AwaitResults(a, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 3u);
}

TEST(LeaseQueue, ExpiredLostAndReleasedLeasesAreRequeuedAtTheFront) {
  LeaseQueue q(10);
  uint64_t a = q.Enqueue(Spec("cpu", 1));
  uint64_t b = q.Enqueue(Spec("cpu", 1));
  ASSERT_EQ(q.Lease(7, "cpu", 0)->first, a);
  EXPECT_TRUE(q.ExpireLeases(5).empty());
  EXPECT_EQ(q.ExpireLeases(11), std::vector<uint64_t>{7});
  ASSERT_TRUE(q.Release(7, a).ok());                                 // gives up its claim
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a, Ok(1))));  // its lease is gone
  ASSERT_EQ(q.Lease(8, "cpu", 11)->first, a);                        // front of the queue
  EXPECT_EQ(q.ReleaseWorker(8), 1);
  ASSERT_EQ(q.Lease(9, "cpu", 12)->first, a);
  ASSERT_TRUE(q.Release(9, a).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Release(9, a)));
  EXPECT_EQ(q.Lease(9, "cpu", 12)->first, a);
  EXPECT_EQ(q.Lease(9, "cpu", 12)->first, b);
}

TEST(LeaseQueue, WaitersWakeForResultsAndForCancellation) {
  LeaseQueue q(30);
  uint64_t a = q.Enqueue(Spec("cpu", 1, /*job=*/1));
  uint64_t c = q.Enqueue(Spec("cpu", 1, /*job=*/2));
  std::thread worker([&] {
    auto l = q.LeaseWait(7, "cpu", 10, [] { return 0.0; });
    ASSERT_TRUE(l);
    EXPECT_TRUE(q.Complete(7, l->first, Ok(1)).ok());
  });
  auto r = q.AwaitResults(a, 30);
  worker.join();
  ASSERT_TRUE(r);
  std::thread canceller([&] { q.Cancel(2); });
  EXPECT_FALSE(q.AwaitResults(c, 30));
  canceller.join();
  EXPECT_EQ(q.Queued("cpu"), 0u);
  EXPECT_FALSE(q.AwaitResults(c, 0.01));  // taken / gone
}

TEST(LeaseQueue, JobsShareWorkersByLeasesHeld) {
  LeaseQueue q(30);
  // Job 1 queues three batches before job 2 queues one: job 2's is leased second, not last.
  uint64_t a1 = q.Enqueue(Spec("cpu", 1, /*job=*/1));
  uint64_t a2 = q.Enqueue(Spec("cpu", 1, /*job=*/1));
  uint64_t a3 = q.Enqueue(Spec("cpu", 1, /*job=*/1));
  uint64_t b1 = q.Enqueue(Spec("cpu", 1, /*job=*/2));
  EXPECT_EQ(q.Lease(7, "cpu", 0)->first, a1);
  EXPECT_EQ(q.Lease(8, "cpu", 0)->first, b1);
  EXPECT_EQ(q.Lease(9, "cpu", 0)->first, a2);
  // Job 2 holds none once its batch is done, job 1 holds two: job 2's next batch goes first.
  ASSERT_TRUE(q.Complete(8, b1, Ok(1)).ok());
  uint64_t b2 = q.Enqueue(Spec("cpu", 1, /*job=*/2));
  EXPECT_EQ(q.Lease(8, "cpu", 0)->first, b2);
  EXPECT_EQ(q.Lease(10, "cpu", 0)->first, a3);
}

TEST(LeaseQueue, ACancelledBatchInAWorkersHandsIsDroppedWhenItReturns) {
  LeaseQueue q(30);
  uint64_t a = q.Enqueue(Spec("cpu", 2, /*job=*/1));
  uint64_t b = q.Enqueue(Spec("cpu", 2, /*job=*/1));
  ASSERT_EQ(q.Lease(7, "cpu", 0)->first, a);
  q.Cancel(1);
  EXPECT_FALSE(q.AwaitResults(a, 0.01));
  EXPECT_FALSE(q.Lease(8, "cpu", 0));  // b was queued: gone
  EXPECT_TRUE(absl::IsAborted(q.Complete(7, a, Ok(2))));
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a, Ok(2))));  // and forgotten
  EXPECT_FALSE(q.AwaitResults(b, 0.01));
  EXPECT_EQ(q.Stats().results_ingested, 0u);
}

TEST(LeaseQueue, CommitOrDiscardWakesTheAcknowledgerAndIsCounted) {
  LeaseQueue q(30);
  uint64_t a = q.Enqueue(Spec("cpu", 3));
  uint64_t b = q.Enqueue(Spec("cpu", 2));
  ASSERT_TRUE(q.Complete(7, q.Lease(7, "cpu", 0)->first, Ok(3)).ok());
  ASSERT_TRUE(q.Complete(8, q.Lease(8, "cpu", 0)->first, Ok(2)).ok());
  ASSERT_TRUE(q.AwaitResults(a, 1));
  ASSERT_TRUE(q.AwaitResults(b, 1));
  EXPECT_EQ(q.AwaitCommitted(a, 0.01), LeaseQueue::Outcome::kTimedOut);
  std::thread tuner([&] {
    q.MarkCommitted(a);
    q.MarkDiscarded(b);
  });
  EXPECT_EQ(q.AwaitCommitted(a, 30), LeaseQueue::Outcome::kCommitted);
  EXPECT_EQ(q.AwaitCommitted(b, 30), LeaseQueue::Outcome::kDiscarded);
  tuner.join();
  const LeaseStats s = q.Stats();
  EXPECT_EQ(s.batches_leased, 2u);
  EXPECT_EQ(s.results_ingested, 5u);
  EXPECT_EQ(s.results_committed, 3u);
}

TEST(LeaseQueue, ABatchLostTooOftenIsFailedInsteadOfRequeued) {
  std::mt19937_64 rng = test::TestRng();
  for (int round = 0; round < 50; ++round) {
    const int max_losses = std::uniform_int_distribution<int>(1, 5)(rng);
    const int configs = std::uniform_int_distribution<int>(1, 6)(rng);
    LeaseQueue q(10, max_losses);
    const uint64_t a = q.Enqueue(Spec("cpu", configs));
    double now = 0;
    int losses = 0;
    uint64_t worker = 1;
    bool last_expired = false;
    while (losses < max_losses) {
      ASSERT_EQ(q.Lease(worker, "cpu", now)->first, a) << "lost " << losses << " of " << max_losses;
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:  // a clean give-back is no loss
          ASSERT_TRUE(q.Release(worker, a).ok());
          q.ReleaseWorker(worker, /*lost=*/false);
          continue;
        case 1:  // the worker died or broke its stream
          EXPECT_EQ(q.ReleaseWorker(worker, /*lost=*/true), 1);
          last_expired = false;
          break;
        default:  // its lease ran out
          now += 11;
          EXPECT_EQ(q.ExpireLeases(now), std::vector<uint64_t>{worker});
          last_expired = true;
          break;
      }
      ++losses;
      ++worker;
    }
    // Not queued again: done, with one failed result per config saying why.
    EXPECT_FALSE(q.Lease(worker, "cpu", now));
    EXPECT_EQ(q.Queued("cpu"), 0u);
    auto r = q.AwaitResults(a, 1);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->size(), static_cast<size_t>(configs));
    for (const BatchResult& b : *r) {
      EXPECT_EQ(b.status, "runtime_error");
      EXPECT_EQ(b.message, "worker lost " + std::to_string(max_losses) + " times while measuring this batch");
      EXPECT_TRUE(b.costs_s.empty());
    }
    // A late result once the failed results are taken: a worker that died has no claim left;
    // one whose lease ran out is told its results are dropped.
    const absl::Status late = q.Complete(worker - 1, a, Ok(configs));
    if (last_expired) EXPECT_TRUE(absl::IsAborted(late)) << late;
    else EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
    q.MarkCommitted(a);
    EXPECT_EQ(q.Stats().results_committed, 0u);  // no worker's results were committed
  }
}

TEST(LeaseQueue, CancelSettlesReturnedBatchesAsDiscarded) {
  LeaseQueue q(30);
  const uint64_t a = q.Enqueue(Spec("cpu", 2, /*job=*/1));
  ASSERT_TRUE(q.Complete(7, q.Lease(7, "cpu", 0)->first, Ok(2)).ok());
  q.Cancel(1);  // returned, not yet taken by its job: its worker's Ack must not wait for it
  EXPECT_EQ(q.AwaitCommitted(a, 1), LeaseQueue::Outcome::kDiscarded);
  EXPECT_FALSE(q.AwaitResults(a, 0.01));
}

}  // namespace
}  // namespace tune::server

namespace tune::server {
namespace {

/// `n` ok results with random positive times (seconds), so whose results were kept shows.
std::vector<BatchResult> RandomResults(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> cost(1e-6, 1e-2);
  std::vector<BatchResult> out;
  for (int i = 0; i < n; ++i) out.push_back(BatchResult{"ok", "", {cost(rng), cost(rng)}, 1, 0, 0});
  return out;
}

// A GPU batch can outlast its lease while its worker keeps measuring: the batch goes to the
// next worker, and whichever of the two returns it first is recorded, once.
TEST(LeaseQueue, AWorkerWhoseLeaseRanOutStillReturnsTheBatchOnce) {
  std::mt19937_64 rng = test::TestRng();
  for (int round = 0; round < 20; ++round) {
    const int n = std::uniform_int_distribution<int>(1, 9)(rng);
    const bool slow_wins = round % 2 == 0;  // the first holder returns before the second
    LeaseQueue q(10);
    const uint64_t a = q.Enqueue(Spec("gpu", n));
    ASSERT_EQ(q.Lease(7, "gpu", 0)->first, a);
    EXPECT_EQ(q.ExpireLeases(11), std::vector<uint64_t>{7});
    ASSERT_EQ(q.Lease(8, "gpu", 11)->first, a);  // requeued at once to the idle worker
    const std::vector<BatchResult> first = RandomResults(rng, n), second = RandomResults(rng, n);
    const uint64_t winner = slow_wins ? 7 : 8, loser = slow_wins ? 8 : 7;
    EXPECT_TRUE(absl::IsInvalidArgument(q.Complete(winner, a, Ok(n + 1))));  // still checked
    ASSERT_TRUE(q.Complete(winner, a, first).ok());
    // The other one is told its results are dropped (not a protocol error), once.
    EXPECT_TRUE(absl::IsAborted(q.Complete(loser, a, second)));
    EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(loser, a, second)));
    EXPECT_FALSE(q.Lease(9, "gpu", 12));  // never measured a third time
    auto r = q.AwaitResults(a, 1);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) EXPECT_EQ((*r)[i].costs_s, first[i].costs_s) << i;
    EXPECT_EQ(q.Stats().results_ingested, static_cast<uint64_t>(n));
    q.MarkCommitted(a);
    EXPECT_EQ(q.AwaitCommitted(a, 1), LeaseQueue::Outcome::kCommitted);
    EXPECT_TRUE(q.ExpireLeases(1000).empty());  // nothing left leased
  }
}

TEST(LeaseQueue, AnExpiredClaimEndsWithARelease) {
  LeaseQueue q(10);
  const uint64_t a = q.Enqueue(Spec("gpu", 2));
  ASSERT_EQ(q.Lease(7, "gpu", 0)->first, a);
  EXPECT_EQ(q.ExpireLeases(11), std::vector<uint64_t>{7});
  EXPECT_EQ(q.ReleaseWorker(7), 0);  // it died: its claim goes with it
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(7, a, Ok(2))));
  ASSERT_EQ(q.Lease(8, "gpu", 11)->first, a);
  EXPECT_EQ(q.ExpireLeases(22), std::vector<uint64_t>{8});
  ASSERT_EQ(q.Lease(9, "gpu", 22)->first, a);
  ASSERT_TRUE(q.Complete(8, a, Ok(2)).ok());  // 9's lease is revoked
  ASSERT_TRUE(q.Release(9, a).ok());          // giving it back is no error
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Release(9, a)));
  EXPECT_FALSE(q.Lease(9, "gpu", 23));
  EXPECT_EQ(q.AwaitResults(a, 1)->size(), 2u);
}

// A batch failed after its last lease ran out gets the real results if they come before the
// job took the failed ones.
TEST(LeaseQueue, LateRealResultsReplaceTheFailedOnesNotYetTaken) {
  std::mt19937_64 rng = test::TestRng();
  LeaseQueue q(10, /*max_losses=*/1);
  const uint64_t a = q.Enqueue(Spec("gpu", 3));
  ASSERT_EQ(q.Lease(7, "gpu", 0)->first, a);
  EXPECT_EQ(q.ExpireLeases(11), std::vector<uint64_t>{7});
  const std::vector<BatchResult> real = RandomResults(rng, 3);
  ASSERT_TRUE(q.Complete(7, a, real).ok());
  auto r = q.AwaitResults(a, 1);
  ASSERT_TRUE(r);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*r)[i].status, "ok");
    EXPECT_EQ((*r)[i].costs_s, real[i].costs_s);
  }
  q.MarkCommitted(a);
  EXPECT_EQ(q.Stats().results_committed, 3u);  // a worker's results: acknowledged
  EXPECT_EQ(q.AwaitCommitted(a, 1), LeaseQueue::Outcome::kCommitted);
}

}  // namespace
}  // namespace tune::server
