// TaskCache: a worker keeps the tasks of a job's round (more than a few) between batches, the
// least recently used going first by count and by the bytes of their data.
#include "server/task_cache.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "measure/target.h"
#include "measure/task_factory.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"

namespace tune::test {
namespace {

std::unique_ptr<server::TaskCache> CpuTaskCache(server::TaskCacheLimits limits = {}) {
  auto factory = measure::TaskFactory::Create(measure::Target::HostCpu(1));
  EXPECT_TRUE(factory.ok()) << factory.status();
  return std::make_unique<server::TaskCache>(std::move(*factory), limits);
}

std::string CacheMatmulKey(int m) {
  return ToyWorkload(codegen::OpKind::kMatmul, std::to_string(m) + ",24,16").Key();
}

// The 16 tasks of a resnet-18 job, visited round after round: each is made once.
TEST(TaskCacheTest, KeepsEveryTaskOfAJobRound) {
  auto cache = CpuTaskCache();
  const uint64_t seed = kTestSeed;
  std::vector<measure::Task*> first;
  for (int m = 1; m <= 16; ++m) {
    auto t = cache->Get(CacheMatmulKey(8 + m), seed);
    ASSERT_TRUE(t.ok()) << t.status();
    first.push_back(*t);
  }
  for (int round = 0; round < 3; ++round) {
    for (int m = 1; m <= 16; ++m) {
      auto t = cache->Get(CacheMatmulKey(8 + m), seed);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(*t, first[m - 1]) << "task " << m << " was made again in round " << round;
    }
  }
  EXPECT_EQ(cache->made(), 16);
  EXPECT_EQ(cache->size(), 16u);
  // Another data seed is another task.
  auto other = cache->Get(CacheMatmulKey(9), seed + 1);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, first[0]);
  EXPECT_EQ(cache->made(), 17);
}

TEST(TaskCacheTest, LeastRecentlyUsedGoFirstByCount) {
  auto cache = CpuTaskCache({.tasks = 3});
  const uint64_t seed = kTestSeed;
  for (int m : {10, 11, 12}) ASSERT_TRUE(cache->Get(CacheMatmulKey(m), seed).ok());
  ASSERT_TRUE(cache->Get(CacheMatmulKey(10), seed).ok());  // 10 is now the most recent
  ASSERT_TRUE(cache->Get(CacheMatmulKey(13), seed).ok());  // 11 goes
  EXPECT_EQ(cache->size(), 3u);
  EXPECT_EQ(cache->made(), 4);
  for (int m : {10, 12, 13}) ASSERT_TRUE(cache->Get(CacheMatmulKey(m), seed).ok());
  EXPECT_EQ(cache->made(), 4) << "a kept task was made again";
  ASSERT_TRUE(cache->Get(CacheMatmulKey(11), seed).ok());
  EXPECT_EQ(cache->made(), 5) << "the least recently used task was kept";
}

TEST(TaskCacheTest, DataBytesBoundWhatIsKept) {
  const codegen::Workload w = ToyWorkload(codegen::OpKind::kMatmul, "32,24,16");
  // Inputs 32x16 and 16x24, output 32x24 and its reference, float32.
  EXPECT_EQ(server::DataBytes(w), 4 * (32 * 16 + 16 * 24 + 2 * 32 * 24));
  const int64_t one = server::DataBytes(ToyWorkload(codegen::OpKind::kMatmul, "20,24,16"));
  auto cache = CpuTaskCache({.tasks = 64, .bytes = 2 * one + one / 2});
  const uint64_t seed = kTestSeed;
  for (int m = 0; m < 5; ++m) ASSERT_TRUE(cache->Get(CacheMatmulKey(20), seed + m).ok());
  EXPECT_EQ(cache->size(), 2u);
  EXPECT_LE(cache->bytes(), 2 * one + one / 2);
  // A task over the limit by itself is still kept while it is in use.
  auto tiny = CpuTaskCache({.tasks = 64, .bytes = 1});
  ASSERT_TRUE(tiny->Get(CacheMatmulKey(20), seed).ok());
  ASSERT_TRUE(tiny->Get(CacheMatmulKey(21), seed).ok());
  EXPECT_EQ(tiny->size(), 1u);
}

TEST(TaskCacheTest, ABadKeyEvictsNothing) {
  auto cache = CpuTaskCache({.tasks = 2});
  const uint64_t seed = kTestSeed;
  auto a = cache->Get(CacheMatmulKey(10), seed);
  auto b = cache->Get(CacheMatmulKey(11), seed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(cache->Get("matmul/not-a-shape", seed).ok());
  EXPECT_EQ(cache->size(), 2u);
  EXPECT_EQ(*cache->Get(CacheMatmulKey(10), seed), *a);
  EXPECT_EQ(*cache->Get(CacheMatmulKey(11), seed), *b);
  EXPECT_EQ(cache->made(), 2);
}

}  // namespace
}  // namespace tune::test
