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
    while (losses < max_losses) {
      ASSERT_EQ(q.Lease(worker, "cpu", now)->first, a) << "lost " << losses << " of " << max_losses;
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:  // a clean give-back is no loss
          ASSERT_TRUE(q.Release(worker, a).ok());
          q.ReleaseWorker(worker, /*lost=*/false);
          continue;
        case 1:  // the worker died or broke its stream
          EXPECT_EQ(q.ReleaseWorker(worker, /*lost=*/true), 1);
          break;
        default:  // its lease ran out
          now += 11;
          EXPECT_EQ(q.ExpireLeases(now), std::vector<uint64_t>{worker});
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
    EXPECT_TRUE(absl::IsFailedPrecondition(q.Complete(worker - 1, a, Ok(configs))));  // a late result
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
