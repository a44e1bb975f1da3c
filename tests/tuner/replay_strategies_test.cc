// Tests that every search strategy is at least as good as random search on each real recorded
// Kernel Tuner space, and clearly better on the GEMM space.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "measure/kernel_tuner_cache.h"
#include "tests/common/measure_cache_fixture.h"
#include "tests/tuner/replay_seed_runs.h"
#include "tuner/replay.h"

namespace tune::tuner {
namespace {

constexpr int kSharedBudget = 100;
constexpr int kSharedSeeds = 20;

// The recorded space `name` (a file of the shared data folder), loaded once per test binary;
// null when the file is absent.
const ReplaySpace* SharedSpace(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ReplaySpace>> spaces;
  std::lock_guard<std::mutex> lock(mu);
  auto it = spaces.find(name);
  if (it != spaces.end()) return it->second.get();
  std::unique_ptr<ReplaySpace> space;
  const std::string path = test::kDataDir + "/" + name;
  if (std::filesystem::exists(path)) {
    auto cache = measure::KernelTunerCache::Load(path);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (cache.ok()) {
      auto created = ReplaySpace::Create(std::move(*cache));
      EXPECT_TRUE(created.ok()) << created.status();
      if (created.ok()) space = std::move(*created);
    }
  }
  return spaces.emplace(name, std::move(space)).first->second.get();
}

using SharedCase = std::tuple<std::string, ReplayStrategyCase>;

std::string SharedCaseName(const ::testing::TestParamInfo<SharedCase>& info) {
  std::string space = std::get<0>(info.param);
  space = space.substr(0, space.find('_'));
  return space + "_" + std::get<1>(info.param).strategy;
}

class ReplayStrategiesTest : public ::testing::TestWithParam<SharedCase> {};

// Mean fraction of optimum at kSharedBudget over kSharedSeeds seeds >= random search's exact
// expectation + the case's margin. Margins: 0 ("never below random") on every space; on the
// GEMM space the strategies must lead by 0.06, about half the smallest lead measured there
// (0.12-0.14 for sa, evolutionary, bo_ei, bo_multi and the bandit at batch 10): a strategy as
// good in expectation passes with about 4 standard errors of the 20-seed mean to spare (sd /
// sqrt(20) <= 0.015), one no better than random fails by the whole margin.
TEST_P(ReplayStrategiesTest, AtLeastRandomSearch) {
  const auto& [file, c] = GetParam();
  const ReplaySpace* space = SharedSpace(file);
  if (space == nullptr) {
    GTEST_SKIP() << "the recorded space " << test::kDataDir << "/" << file
                 << " is absent (shared/data/kernel_tuner beside the repository)";
  }
  const std::vector<double> fraction = RunReplaySeeds(*space, c, kSharedBudget, kSharedSeeds);
  ASSERT_EQ(fraction.size(), static_cast<size_t>(kSharedSeeds));
  const ReplaySeedSummary s = SummarizeReplaySeeds(fraction);
  const double random = RandomBaselineFraction(space->sorted_times_ms(), kSharedBudget);
  EXPECT_GE(s.mean, random + c.margin)
      << c.strategy << (c.cost_model.empty() ? "" : " with " + c.cost_model) << " on " << file << ", batch "
      << c.batch << ": mean fraction of optimum " << s.mean << " over " << kSharedSeeds << " seeds at "
      << kSharedBudget << " evaluations (worst seed " << s.worst << "); random search's exact expectation "
      << random << ", required lead " << c.margin;
  std::printf("%s on %s: mean fraction %.4f (sd %.3f, worst seed %.4f), random %.4f, P %.3f\n", c.strategy.c_str(),
              file.c_str(), s.mean, s.sd, s.worst, random, MethodologyScore(s.mean, random));
}

// The control: random search itself, run the same way, lands on its exact expectation (20-seed
// standard error about 0.01), below the GEMM bar the others clear.
TEST(ReplayStrategiesControl, RandomSearchMatchesItsExpectationOnGemm) {
  const ReplaySpace* space = SharedSpace("gemm_RTX_3090.json.gz");
  if (space == nullptr) GTEST_SKIP() << "the recorded GEMM space is absent";
  const std::vector<double> fraction =
      RunReplaySeeds(*space, ReplayStrategyCase{"random", ""}, kSharedBudget, kSharedSeeds);
  ASSERT_EQ(fraction.size(), static_cast<size_t>(kSharedSeeds));
  const double random = RandomBaselineFraction(space->sorted_times_ms(), kSharedBudget);
  const double mean = SummarizeReplaySeeds(fraction).mean;
  EXPECT_NEAR(mean, random, 0.03);
  EXPECT_LT(mean, random + 0.06);
}

std::vector<ReplayStrategyCase> EveryStrategy(double margin) {
  return {{"auto", "", 10, margin},   {"sa", "xgb", 10, margin},     {"evolutionary", "xgb", 10, margin},
          {"bo_ei", "", 10, margin},     {"bo_pi", "", 10, margin},     {"bo_ucb", "", 10, margin},
          {"bo_multi", "", 10, margin},  {"bandit", "xgb", 10, margin}};
}

INSTANTIATE_TEST_SUITE_P(Gemm, ReplayStrategiesTest,
                         ::testing::Combine(::testing::Values("gemm_RTX_3090.json.gz"),
                                            ::testing::ValuesIn(EveryStrategy(0.06))),
                         SharedCaseName);
INSTANTIATE_TEST_SUITE_P(Convolution, ReplayStrategiesTest,
                         ::testing::Combine(::testing::Values("convolution_A100.json.gz"),
                                            ::testing::ValuesIn(EveryStrategy(0.0))),
                         SharedCaseName);
INSTANTIATE_TEST_SUITE_P(Pnpoly, ReplayStrategiesTest,
                         ::testing::Combine(::testing::Values("pnpoly_RTX_3090.json.gz"),
                                            ::testing::ValuesIn(EveryStrategy(0.0))),
                         SharedCaseName);

}  // namespace
}  // namespace tune::tuner
