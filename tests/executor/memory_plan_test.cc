// The memory plan: live buffers never overlap, the arena reuses memory (ResNet-18 below the sum).
#include "executor/memory_plan.h"

#include <random>

#include "executor/backend.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::executor {
namespace {

/// Fails the test when two buffers whose live intervals intersect share a byte.
void ExpectNoLiveOverlap(const std::vector<BufferLifetime>& b, const std::vector<int64_t>& offsets, int64_t arena) {
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(offsets[i] % kArenaAlignment, 0) << b[i].name;
    EXPECT_LE(offsets[i] + b[i].bytes, arena) << b[i].name;
    for (size_t j = i + 1; j < b.size(); ++j) {
      const bool live_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
      const bool share = offsets[i] < offsets[j] + b[j].bytes && offsets[j] < offsets[i] + b[i].bytes;
      EXPECT_FALSE(live_together && share) << b[i].name << " and " << b[j].name;
    }
  }
}

TEST(MemoryPlanTest, RandomLifetimesNeverOverlapWhileLive) {
  std::mt19937_64 rng = test::TestRng(11);
  for (int round = 0; round < 20; ++round) {
    std::vector<BufferLifetime> buffers;
    std::uniform_int_distribution<int> step(0, 40), len(0, 8);
    std::uniform_int_distribution<int64_t> bytes(1, 5000);
    for (int i = 0; i < 60; ++i) {
      const int first = step(rng);
      buffers.push_back({"t" + std::to_string(i), bytes(rng), first, first + len(rng)});
    }
    MemoryPlan plan = PlanMemory(buffers);
    ASSERT_EQ(plan.offsets.size(), buffers.size());
    ExpectNoLiveOverlap(buffers, plan.offsets, plan.arena_bytes);
    int64_t sum = 0;
    for (const auto& b : buffers) sum += AlignArena(b.bytes);
    EXPECT_EQ(plan.total_bytes, sum);
    EXPECT_LT(plan.arena_bytes, sum);  // 60 short intervals over 48 steps always leave reuse
  }
}

TEST(MemoryPlanTest, ChainReusesTheFreedBuffer) {
  // a -> b -> c -> d of one size: two buffers suffice (each step reads one, writes the next).
  std::vector<BufferLifetime> chain = {{"a", 1000, 0, 0}, {"b", 1000, 0, 1}, {"c", 1000, 1, 2}, {"d", 1000, 2, 3}};
  MemoryPlan plan = PlanMemory(chain);
  ExpectNoLiveOverlap(chain, plan.offsets, plan.arena_bytes);
  EXPECT_EQ(plan.arena_bytes, 2 * AlignArena(1000));
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
}

TEST(MemoryPlanTest, ResNet18ArenaIsSmallerThanItsTensorsAndLiveTensorsAreDisjoint) {
  auto g = graph::ImportOnnx(std::string(TUNE_ONNX_DIR) + "/resnet18.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  auto backend = CreateBackend("llvm", 1);
  ASSERT_TRUE(backend.ok());
  std::shared_ptr<const Backend> shared = *std::move(backend);
  auto choices = ChooseTaskKernels(*g, *shared, nullptr);
  ASSERT_TRUE(choices.ok()) << choices.status();
  for (const auto& c : *choices) EXPECT_FALSE(c.tuned);
  auto plan = ExecutionPlan::Create(*std::move(g), shared, *choices);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MemoryStats& m = (*plan)->memory();
  EXPECT_LT(m.arena_bytes, m.tensor_bytes / 2);
  std::vector<BufferLifetime> lifetimes;
  std::vector<int64_t> offsets;
  for (const PlannedBuffer& b : (*plan)->buffers()) {
    lifetimes.push_back({b.name, b.bytes, b.first, b.last});
    offsets.push_back(b.offset);
  }
  EXPECT_GT(lifetimes.size(), 20u);
  ExpectNoLiveOverlap(lifetimes, offsets, m.arena_bytes);
  // Distinct workloads share kernels: fewer kernels than tuned nodes.
  int nodes = 0;
  for (const auto& c : *choices) nodes += c.count;
  EXPECT_EQ((*plan)->task_kernels(), static_cast<int>(choices->size()));
  EXPECT_LT((*plan)->task_kernels(), nodes);
}

}  // namespace
}  // namespace tune::executor
