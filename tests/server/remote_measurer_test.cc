// RemoteMeasurer with two tasks' batches measured at once on two threads: each thread's
// Committed() acknowledges its own batches only, and a round is split among the workers only
// as far as the rounds in flight leave workers to share.
#include "server/remote_measurer.h"

#include <chrono>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/lease_queue.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"

namespace tune::test {
namespace {

/// Two matmul tasks of different shapes and a round of lo..hi random configs for each.
bool MakeTwoRounds(std::mt19937_64& rng, int lo, int hi, std::vector<std::unique_ptr<codegen::Template>>* templates,
                   std::vector<std::vector<search::Config>>* configs) {
  configs->assign(2, {});
  for (const char* shape : {"8,8,8", "16,8,8"}) {
    templates->push_back(MakeTemplate(codegen::OpKind::kMatmul, shape));
    if (templates->back() == nullptr) return false;
    const int n = std::uniform_int_distribution<int>(lo, hi)(rng);
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<search::Config> c = templates->back()->space().Sample(rng);
      EXPECT_TRUE(c.ok()) << c.status();
      if (!c.ok()) return false;
      (*configs)[templates->size() - 1].push_back(*c);
    }
  }
  return true;
}

// Two threads measure a batch of a different template each through one RemoteMeasurer; a
// fake worker returns both; then the first thread's Committed() settles its batch and leaves
// the other's waiting until that thread commits too.
TEST(RemoteMeasurerThreads, EachThreadCommitsOnlyTheBatchesItMeasured) {
  std::mt19937_64 rng = TestRng(91);
  server::LeaseQueue queue(600);
  server::RemoteMeasurer measurer(&queue, /*job_id=*/1, "cpu", /*data_seed=*/rng(), [] { return 1; },
                                  [] { return false; });
  std::vector<std::unique_ptr<codegen::Template>> templates;
  std::vector<std::vector<search::Config>> configs;
  ASSERT_TRUE(MakeTwoRounds(rng, 1, 4, &templates, &configs));
  // Each thread: Measure, say how many results came back, wait for its turn, Committed.
  std::promise<void> turn[2];
  std::promise<size_t> measured[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      measured[t].set_value(measurer.Measure(*templates[t], nullptr, configs[t], measure::MeasureProtocol()).size());
      turn[t].get_future().wait();
      measurer.Committed();
    });
  }
  // The worker: both batches leased (one per Measure call: one live worker), then returned.
  std::map<std::string, uint64_t> batch_of;  // workload key -> batch id
  for (int tries = 0; tries < 3000 && batch_of.size() < 2; ++tries) {
    if (auto lease = queue.Lease(/*worker_id=*/5, "cpu", 0)) {
      batch_of[lease->second.workload_key] = lease->first;
      std::vector<server::BatchResult> ok(lease->second.configs_json.size(), server::BatchResult{"ok", "", {1e-3}, 1, 0, 0});
      ASSERT_TRUE(queue.Complete(5, lease->first, ok).ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ASSERT_EQ(batch_of.size(), 2u);
  for (int t = 0; t < 2; ++t) EXPECT_EQ(measured[t].get_future().get(), configs[t].size());
  const uint64_t first = batch_of.at(templates[0]->workload().Key());
  const uint64_t second = batch_of.at(templates[1]->workload().Key());
  turn[0].set_value();
  threads[0].join();
  EXPECT_EQ(queue.AwaitCommitted(first, 10), server::LeaseQueue::Outcome::kCommitted);
  EXPECT_EQ(queue.AwaitCommitted(second, 0.05), server::LeaseQueue::Outcome::kTimedOut)
      << "the first thread's Committed() acknowledged the other thread's batch";
  turn[1].set_value();
  threads[1].join();
  EXPECT_EQ(queue.AwaitCommitted(second, 10), server::LeaseQueue::Outcome::kCommitted);
}


TEST(RemoteMeasurerSplit, WorkersAreSharedOutAmongTheRoundsInFlight) {
  using server::RemoteMeasurer;
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 1, 16), 4u);  // one round: every worker
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 2, 16), 2u);
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 3, 16), 2u);  // ceil: no worker left without a batch
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 4, 16), 1u);
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 8, 16), 1u);  // more rounds than workers: each whole
  EXPECT_EQ(RemoteMeasurer::SplitParts(4, 1, 3), 3u);   // never an empty batch
  EXPECT_EQ(RemoteMeasurer::SplitParts(0, 0, 5), 1u);   // no worker yet: one batch, queued
  EXPECT_EQ(RemoteMeasurer::SplitParts(3, 1, 0), 1u);
}

// Two live workers. A round measured alone is leased as two batches; a second task's round
// that starts while the first is still out goes as one batch of all its configs.
TEST(RemoteMeasurerSplit, ARoundStartedWhileAnotherIsOutGoesWhole) {
  std::mt19937_64 rng = TestRng(92);
  server::LeaseQueue queue(600);
  server::RemoteMeasurer measurer(&queue, /*job_id=*/1, "cpu", /*data_seed=*/rng(), [] { return 2; },
                                  [] { return false; });
  std::vector<std::unique_ptr<codegen::Template>> templates;
  std::vector<std::vector<search::Config>> configs;
  ASSERT_TRUE(MakeTwoRounds(rng, 4, 9, &templates, &configs));
  // Leases every batch queued for `want` batches (or until tries run out), keeping them out.
  std::vector<std::pair<uint64_t, server::BatchSpec>> held;
  auto lease = [&](size_t want, int tries_left = 3000) {
    for (int tries = 0; tries < tries_left && held.size() < want; ++tries) {
      if (auto l = queue.Lease(/*worker_id=*/5 + held.size(), "cpu", 0)) {
        held.push_back(*l);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  };
  std::future<size_t> first = std::async(std::launch::async, [&] {
    return measurer.Measure(*templates[0], nullptr, configs[0], measure::MeasureProtocol()).size();
  });
  lease(2);
  ASSERT_EQ(held.size(), 2u) << "a round alone is split between the two workers";
  EXPECT_EQ(held[0].second.configs_json.size() + held[1].second.configs_json.size(), configs[0].size());
  std::future<size_t> second = std::async(std::launch::async, [&] {
    return measurer.Measure(*templates[1], nullptr, configs[1], measure::MeasureProtocol()).size();
  });
  lease(3);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[2].second.workload_key, templates[1]->workload().Key());
  EXPECT_EQ(held[2].second.configs_json.size(), configs[1].size()) << "the second round was split";
  // Anything more is a failure, and is returned too so that the rounds end.
  lease(held.size() + configs[1].size(), /*tries_left=*/20);
  EXPECT_EQ(held.size(), 3u) << "more batches than the three expected";
  for (size_t i = 0; i < held.size(); ++i) {
    const auto& [id, spec] = held[i];
    std::vector<server::BatchResult> ok(spec.configs_json.size(), server::BatchResult{"ok", "", {1e-3}, 1, 0, 0});
    ASSERT_TRUE(queue.Complete(5 + i, id, ok).ok());
  }
  EXPECT_EQ(first.get(), configs[0].size());
  EXPECT_EQ(second.get(), configs[1].size());
}

}  // namespace
}  // namespace tune::test
