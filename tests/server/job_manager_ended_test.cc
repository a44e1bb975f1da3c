// A daemon's job manager keeps only the most recently ended jobs in memory; the ones it lets go
// of are still listed, watched and cancelled (as ended) from the jobs table.
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/job_manager.h"
#include "server/job_store.h"
#include "server/lease_queue.h"
#include "server/worker_registry.h"
#include "tests/common/temp_dir.h"

namespace tune::test {
namespace {

v1::SubmitJobRequest EndedTestJob(int m) {
  v1::SubmitJobRequest req;
  req.set_model_json(R"({"name": "ended", "layers": [{"name": "mm", "op": "matmul", "shape": ")" +
                     std::to_string(m) + R"(,32,32"}]})");
  req.set_name("ended-" + std::to_string(m));
  req.set_target("llvm");
  req.set_trials(4);
  req.set_strategy("random");
  return req;
}

// Waits (bounded) until `manager` holds at most `n` jobs, the threads of cancelled ones having
// ended; a manager that never lets go of ended jobs stays above it.
bool WaitForInMemory(server::JobManager& manager, size_t n, const std::function<void()>& poke) {
  for (int i = 0; i < 100; ++i) {
    poke();
    if (manager.InMemoryCount() <= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(JobManagerEndedTest, KeepsOnlyTheLatestEndedJobsAndReadsTheOthersFromTheStore) {
  TempDir dir;
  auto store = server::JobStore::Open(dir.Join("jobs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  server::WorkerRegistry registry(10, 3);
  server::LeaseQueue queue(600);
  const size_t kept = 2;
  server::JobManager manager(dir.Join("records.db"), store->get(), &registry, &queue, [] { return false; },
                             nullptr, kept);
  std::mt19937 rng(std::random_device{}());
  const int m0 = 8 + static_cast<int>(rng() % 64);
  // No worker: each job waits for one until cancelled.
  std::vector<uint64_t> ids;
  const int ended = 6;
  for (int i = 0; i < ended; ++i) {
    auto id = manager.Submit(EndedTestJob(m0 + i));
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
    auto cancelled = manager.Cancel(*id);
    ASSERT_TRUE(cancelled.ok()) << cancelled.status();
    EXPECT_EQ(*cancelled, v1::JOB_CANCELLED);
  }
  // A job launched once the others' threads ended lets go of all but the `kept` latest ended.
  std::vector<uint64_t> live;
  int next = m0 + ended;
  ASSERT_TRUE(WaitForInMemory(manager, kept + 1, [&] {
    auto id = manager.Submit(EndedTestJob(next++));
    ASSERT_TRUE(id.ok()) << id.status();
    live.push_back(*id);
    ASSERT_TRUE(manager.Cancel(*id).ok());
  })) << manager.InMemoryCount() << " jobs in memory, at most " << kept + 1 << " expected";

  // Every job is still listed, oldest first, each in its final state.
  const std::vector<v1::JobInfo> listed = manager.List();
  ASSERT_EQ(listed.size(), ids.size() + live.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(listed[i].job_id(), ids[i]);
    EXPECT_EQ(listed[i].state(), v1::JOB_CANCELLED);
    EXPECT_EQ(listed[i].name(), "ended-" + std::to_string(m0 + static_cast<int>(i)));
    EXPECT_EQ(listed[i].model(), "ended");
  }
  // The first job, long let go of: watched, it shows its final state once; cancelled again, it
  // stays cancelled.
  // Each of Watch and Cancel reads it by its id: one row, not the whole jobs table.
  const int64_t rows_before = (*store)->RowsRead();
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(manager
                  .Watch(
                      ids[0],
                      [&](const v1::JobEvent& e) {
                        events.push_back(e);
                        return true;
                      },
                      [] { return false; })
                  .ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].job_id(), ids[0]);
  EXPECT_EQ(events[0].state(), v1::JOB_CANCELLED);
  auto again = manager.Cancel(ids[0]);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, v1::JOB_CANCELLED);
  EXPECT_EQ((*store)->RowsRead() - rows_before, 2) << "rows read to watch and cancel one old job";
  EXPECT_EQ(manager.Cancel(ids.back() + 1000).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tune::test
