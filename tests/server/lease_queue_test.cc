// LeaseQueue: per-target FIFO, leases held by one worker, requeue on expiry / release / loss,
// results only from the holder, cancellation wakes the waiter.
#include "server/lease_queue.h"

#include <thread>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace tune::server
