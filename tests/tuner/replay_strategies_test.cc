// Tests that the learned search strategies beat random search on a real recorded GEMM space.
#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "measure/kernel_tuner_cache.h"
#include "search/strategy.h"
#include "tuner/replay.h"
#include "tests/common/measure_cache_fixture.h"

namespace tune::tuner {
namespace {

const std::string kGemmCache = test::kDataDir + "/gemm_RTX_3090.json.gz";

constexpr int kBudget = 100;
constexpr int kSeeds = 20;
constexpr int kThreads = 2;

// One strategy under test. `cost_model` is a CreateReplayCostModel name or "" for none.
// XGBoost-driven strategies run with batch 10 so the model is refitted every 10 evaluations,
// not after each one (as a tuner measuring batches does); the Gaussian process strategies use
// the same batches (kriging believer within a batch).
struct StrategyCase {
  std::string strategy;
  std::string cost_model;
  int batch = 10;
  // Required lead over random search: mean fraction of optimum at kBudget over kSeeds seeds
  // >= E[f_random(kBudget)] + margin.
  double margin = 0.06;
};

// The margin. Measured on this space (budget 100, seeds 0-19, batch 10; random search's exact
// expectation 0.8375):
//   strategy       mean   sd     lead over random
//   sa + xgb       0.965  0.047  0.128
//   evolutionary   0.975  0.036  0.138
//   bo_ei          0.958  0.065  0.121
//   bo_multi       0.963  0.058  0.125
//   bandit + xgb   0.962  0.048  0.124
// A lead of 0.06 (P = 0.37) is about half the smallest measured lead: a change that leaves a
// strategy as good in expectation passes with about 4 standard errors of the 20-seed mean to
// spare (sd / sqrt(20) <= 0.015), while a strategy no better than random search fails by
// the whole margin.

std::string CaseName(const ::testing::TestParamInfo<StrategyCase>& info) { return info.param.strategy; }

class ReplayStrategiesTest : public ::testing::TestWithParam<StrategyCase> {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kGemmCache)) return;
    auto cache = measure::KernelTunerCache::Load(kGemmCache);
    ASSERT_TRUE(cache.ok()) << cache.status();
    auto space = ReplaySpace::Create(std::move(*cache));
    ASSERT_TRUE(space.ok()) << space.status();
    space_ = space->release();
  }
  static void TearDownTestSuite() {
    delete space_;
    space_ = nullptr;
  }
  static const ReplaySpace* space_;
};

const ReplaySpace* ReplayStrategiesTest::space_ = nullptr;

// Fractions of optimum at kBudget of seeds 0..kSeeds-1, each an independent run with its own
// strategy and cost model, spread over kThreads threads (the recorded space is immutable and
// shared). Fails the test (and returns nothing) when a run fails or stops early.
std::vector<double> RunSeeds(const ReplaySpace& space, const StrategyCase& c) {
  std::vector<double> fraction(kSeeds, 0.0);
  std::vector<std::string> errors(kSeeds);
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int s = next++; s < kSeeds; s = next++) {
      ReplayOptions o;
      o.strategy = c.strategy;
      o.budget = kBudget;
      o.batch = c.batch;
      o.seed = static_cast<uint64_t>(s);
      std::unique_ptr<search::CostModel> model;
      if (!c.cost_model.empty()) {
        auto m = CreateReplayCostModel(c.cost_model, space, o.seed);
        if (!m.ok()) {
          errors[s] = m.status().ToString();
          continue;
        }
        model = std::move(*m);
        o.cost_model = model.get();
      }
      auto trace = RunReplay(space, o);
      if (!trace.ok()) {
        errors[s] = trace.status().ToString();
        continue;
      }
      if (trace->evaluations.size() != static_cast<size_t>(kBudget)) {
        errors[s] = "stopped after " + std::to_string(trace->evaluations.size()) + " evaluations";
        continue;
      }
      fraction[s] = FractionOfOptimum(space.optimum_ms(), trace->BestAt(kBudget));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < kThreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (int s = 0; s < kSeeds; ++s) {
    EXPECT_EQ(errors[s], "") << c.strategy << ", seed " << s;
    if (!errors[s].empty()) return {};
  }
  return fraction;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

#define SKIP_WITHOUT_GEMM_CACHE()                                                       \
  if (!std::filesystem::exists(kGemmCache)) {                                           \
    GTEST_SKIP() << "the recorded GEMM space " << kGemmCache                            \
                 << " is absent (shared/data/kernel_tuner beside the repository)";     \
  }

TEST_P(ReplayStrategiesTest, BeatsRandomSearchOnGemm) {
  SKIP_WITHOUT_GEMM_CACHE();
  ASSERT_NE(space_, nullptr);
  const StrategyCase& c = GetParam();
  const std::vector<double> fraction = RunSeeds(*space_, c);
  ASSERT_EQ(fraction.size(), static_cast<size_t>(kSeeds));

  const double mean = Mean(fraction);
  const double random = RandomBaselineFraction(space_->sorted_times_ms(), kBudget);
  const double worst = *std::min_element(fraction.begin(), fraction.end());
  double var = 0;
  for (double f : fraction) var += (f - mean) * (f - mean);
  const double sd = std::sqrt(var / (kSeeds - 1));
  EXPECT_GE(mean, random + c.margin) << c.strategy << (c.cost_model.empty() ? "" : " with " + c.cost_model)
                                     << ", batch " << c.batch << ": mean fraction of optimum " << mean
                                     << " over " << kSeeds << " seeds at " << kBudget
                                     << " evaluations (worst seed " << worst << "); random search's "
                                     << "exact expectation " << random << ", required lead " << c.margin;
  std::printf("%s: mean fraction %.4f (sd %.3f, worst seed %.4f), random %.4f, P %.3f\n", c.strategy.c_str(),
              mean, sd, worst, random, MethodologyScore(mean, random));
}

// The control: random search itself, run the same way, lands on its exact expectation (20-seed
// standard error about 0.01) and so far below the bar the learned strategies must clear.
TEST_F(ReplayStrategiesTest, RandomSearchMatchesItsExpectationOnGemm) {
  SKIP_WITHOUT_GEMM_CACHE();
  ASSERT_NE(space_, nullptr);
  const StrategyCase c{"random", ""};
  const std::vector<double> fraction = RunSeeds(*space_, c);
  ASSERT_EQ(fraction.size(), static_cast<size_t>(kSeeds));
  const double random = RandomBaselineFraction(space_->sorted_times_ms(), kBudget);
  EXPECT_NEAR(Mean(fraction), random, 0.03);
  EXPECT_LT(Mean(fraction), random + c.margin);
}

INSTANTIATE_TEST_SUITE_P(Learned, ReplayStrategiesTest,
                         ::testing::Values(StrategyCase{"sa", "xgb"}, StrategyCase{"evolutionary", "xgb"},
                                           StrategyCase{"bo_ei", ""}, StrategyCase{"bo_multi", ""},
                                           StrategyCase{"bandit", "xgb"}),
                         CaseName);

}  // namespace
}  // namespace tune::tuner
