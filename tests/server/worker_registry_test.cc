// WorkerRegistry: ids, heartbeats, expiry on the caller's clock, quarantine after crashes.
#include "server/worker_registry.h"

#include "gtest/gtest.h"

namespace tune::server {
namespace {

WorkerDesc Cpu(const std::string& name) { return {name, "host-a", "llvm", "llvm|x86_64|test", "test cpu"}; }

TEST(WorkerRegistry, IdsAreSequentialAndTargetIsRequired) {
  WorkerRegistry r(10, 3);
  EXPECT_EQ(*r.Register(Cpu("a"), 0), 1u);
  EXPECT_EQ(*r.Register(Cpu("b"), 0), 2u);
  WorkerDesc bad = Cpu("c");
  bad.target_key = "";
  EXPECT_TRUE(absl::IsInvalidArgument(r.Register(bad, 0).status()));
  EXPECT_EQ(r.List().size(), 2u);
  EXPECT_EQ(r.LiveCount(), 2u);
}

TEST(WorkerRegistry, SilentWorkersExpireAndThenAnswerNotFound) {
  WorkerRegistry r(10, 3);
  uint64_t a = *r.Register(Cpu("a"), 0);
  uint64_t b = *r.Register(Cpu("b"), 0);
  ASSERT_TRUE(r.Touch(a, 8).ok());
  EXPECT_TRUE(r.Expire(9).empty());
  std::vector<uint64_t> gone = r.Expire(12);  // b silent for 12 s, a for 4 s
  ASSERT_EQ(gone, std::vector<uint64_t>{b});
  EXPECT_TRUE(absl::IsNotFound(r.Touch(b, 12).status()));
  EXPECT_TRUE(r.Touch(a, 12).ok());
  EXPECT_TRUE(absl::IsNotFound(r.Touch(99, 12).status()));
  EXPECT_EQ(r.LiveCount(), 1u);
  EXPECT_EQ(r.List()[b - 1].state, WorkerState::kExpired);
}

TEST(WorkerRegistry, CrashesInARowQuarantineAndASuccessResetsTheCount) {
  WorkerRegistry r(10, 3);
  uint64_t a = *r.Register(Cpu("a"), 0);
  ASSERT_TRUE(r.BatchEnded(a, 0, true).ok());
  ASSERT_TRUE(r.BatchEnded(a, 0, true).ok());
  ASSERT_TRUE(r.BatchEnded(a, 8, false).ok());  // resets
  ASSERT_TRUE(r.BatchEnded(a, 0, true).ok());
  ASSERT_TRUE(r.BatchEnded(a, 0, true).ok());
  EXPECT_EQ(r.List()[0].state, WorkerState::kIdle);
  ASSERT_TRUE(r.BatchEnded(a, 0, true).ok());
  EXPECT_EQ(r.List()[0].state, WorkerState::kQuarantined);
  EXPECT_EQ(r.List()[0].results, 8u);
  EXPECT_EQ(r.List()[0].batches, 1u);
  EXPECT_EQ(r.LiveCount(), 0u);
  EXPECT_EQ(*r.Touch(a, 1), WorkerState::kQuarantined);
  EXPECT_TRUE(absl::IsNotFound(r.BatchEnded(7, 0, false)));
  // Registering again under a new id does not lift the quarantine; another worker is fine.
  uint64_t again = *r.Register(Cpu("a"), 2);
  EXPECT_EQ(*r.Touch(again, 2), WorkerState::kQuarantined);
  uint64_t other = *r.Register(Cpu("b"), 2);
  EXPECT_EQ(*r.Touch(other, 2), WorkerState::kIdle);
}

}  // namespace
}  // namespace tune::server
