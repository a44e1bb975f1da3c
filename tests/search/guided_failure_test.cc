// Tests that failures teach the model-guided strategies (sa, evolutionary) directly: with a
// model that never learns that a region fails, proposals leave that region once its
// measurements come back failed.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tests/common/fake_cost_model.h"
#include "tests/common/strategy_driver.h"

namespace tune::search {
namespace {

// 5 knobs of 10 options (10^5 points); every config with a < 3 (30% of the space) fails.
ConfigSpace FailRegionSpace() {
  ConfigSpace space;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    space.AddChoice(name, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  return space;
}

bool InFailRegion(const Config& c) { return c[0] < 3; }

MeasuredConfig FailRegionMeasure(const Config& c) {
  if (InFailRegion(c)) return {c, INFINITY, false};
  double q = 1;
  for (int k = 0; k < 5; ++k) q += (c[k] - 5.0) * (c[k] - 5.0) / 25.0;
  return {c, 1e-3 * q, true};
}

// Share of the proposals after the first `skip` that lie in the failing region, for
// `strategy` led by a model that prefers small a (the failing region) and ignores failures.
double FailRegionShare(const std::string& strategy, double failure_threshold, uint64_t seed) {
  ConfigSpace space = FailRegionSpace();
  test::FunctionCostModel model([](const Config& c) {
    return -static_cast<double>(c[0]) - 0.01 * std::abs(c[1] - 5);
  });
  StrategyOptions options = test::Seeded(seed);
  options.model_guided.failure_threshold = failure_threshold;
  auto s = test::MakeStrategy(strategy, &space, options);
  if (s == nullptr) return NAN;
  const int skip = 24;
  const std::vector<Config> proposed =
      test::Drive(*s, space, 120, 4, FailRegionMeasure, &model).proposed;
  double in = 0;
  for (size_t i = skip; i < proposed.size(); ++i) in += InFailRegion(proposed[i]);
  return in / static_cast<double>(proposed.size() - skip);
}

TEST(GuidedFailureTest, ProposalsLeaveARegionWhoseMeasurementsFail) {
  for (const char* strategy : {"sa", "evolutionary"}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      const double judged =
          FailRegionShare(strategy, StrategyOptions{}.model_guided.failure_threshold, seed);
      const double ignored = FailRegionShare(strategy, 1, seed);
      // Random search lands there 30% of the time; the misled model nearly always without the
      // estimate of failures. With it, only the random share (eps_greedy, and eps_stalled while
      // the fixed model stalls) lands there: 0.13 to 0.20 when written.
      EXPECT_LT(judged, 0.25) << strategy << " seed " << seed;
      EXPECT_GT(ignored, 0.6) << strategy << " seed " << seed;
    }
  }
}

TEST(GuidedFailureTest, OptionKeysAndRanges) {
  StrategyOptions options;
  ASSERT_TRUE(SetStrategyOption(options, "failure_threshold=0.75").ok());
  EXPECT_EQ(options.model_guided.failure_threshold, 0.75);
  EXPECT_FALSE(SetStrategyOption(options, "failure_threshold=-0.1").ok());
  EXPECT_FALSE(SetStrategyOption(options, "failure_threshold=1.5").ok());
}

}  // namespace
}  // namespace tune::search
