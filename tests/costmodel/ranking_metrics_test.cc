// Tests of TenSet's ranking metrics on hand-made rankings with known values.
#include "costmodel/ranking_metrics.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tune::costmodel {
namespace {

constexpr double kFailed = std::numeric_limits<double>::infinity();

// Latencies 1..n ms (config i takes i+1 ms) with scores that rank them perfectly (the fastest
// highest), reversed, or all equal.
RankedTask RankingMetricsPerfect(int n) {
  RankedTask t;
  for (int i = 0; i < n; ++i) {
    t.latencies_s.push_back((i + 1) * 1e-3);
    t.scores.push_back(-static_cast<double>(i));
  }
  return t;
}
RankedTask RankingMetricsReversed(int n) {
  RankedTask t = RankingMetricsPerfect(n);
  for (double& s : t.scores) s = -s;
  return t;
}
RankedTask RankingMetricsConstant(int n) {
  RankedTask t = RankingMetricsPerfect(n);
  for (double& s : t.scores) s = 0.25;
  return t;
}

Network RankingMetricsNetworkOf(size_t tasks) {
  Network net{"net", {}};
  for (size_t i = 0; i < tasks; ++i) net.tasks.push_back({i, 1});
  return net;
}

TEST(RankingMetricsTest, TopOneIsOneForAPerfectRanking) {
  std::vector<RankedTask> tasks = {RankingMetricsPerfect(5), RankingMetricsPerfect(3)};
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, RankingMetricsNetworkOf(2), 1), 1.0);
}

TEST(RankingMetricsTest, TopOneOfAReversedRankingIsTheWorstPick) {
  // Task 0: best 1 ms, the model's pick 5 ms; task 1: best 1 ms, pick 3 ms; weights 1:
  // (1 + 1) / (5 + 3) = 0.25.
  std::vector<RankedTask> tasks = {RankingMetricsReversed(5), RankingMetricsReversed(3)};
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, RankingMetricsNetworkOf(2), 1), 2.0 / 8.0);
  // One task alone: best / worst.
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, {"one", {{0, 1}}}, 1), 1.0 / 5.0);
}

TEST(RankingMetricsTest, TopKGrowsWithKAndReachesOneAtTheNumberOfConfigs) {
  std::vector<RankedTask> tasks = {RankingMetricsReversed(6)};
  const Network net = RankingMetricsNetworkOf(1);
  double last = 0;
  for (int k = 1; k <= 6; ++k) {
    const double score = *TopKScore(tasks, net, k);
    // The k picks of the reversed model are the k slowest: best among them is 6-k+1 ms.
    EXPECT_DOUBLE_EQ(score, 1.0 / (6 - k + 1)) << "k=" << k;
    EXPECT_GT(score, last) << "k=" << k;
    last = score;
  }
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, net, 6), 1.0);
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, net, 100), 1.0);
}

TEST(RankingMetricsTest, WeightedTwoTaskExampleWorkedOutByHand) {
  // Task A (weight 2): latencies 1, 2, 4 ms, the model ranks 2 ms first, then 4 ms, then 1 ms.
  // Task B (weight 1): latencies 3, 6 ms, the model ranks 6 ms first.
  //   top-1 = (2*1 + 1*3) / (2*2 + 1*6) = 5 / 10 = 0.5
  //   top-2 = (2*1 + 1*3) / (2*min(2,4) + 1*min(6,3)) = 5 / 7
  //   top-3 = 5 / (2*1 + 1*3) = 1
  RankedTask a{{1e-3, 2e-3, 4e-3}, {0.1, 0.9, 0.5}};
  RankedTask b{{3e-3, 6e-3}, {-1, 1}};
  std::vector<RankedTask> tasks = {a, b};
  Network net{"net", {{0, 2}, {1, 1}}};
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, net, 1), 0.5);
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, net, 2), 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, net, 3), 1.0);
  // Equal weights give another value: (1 + 3) / (2 + 6).
  Network equal{"equal", {{0, 1}, {1, 1}}};
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, equal, 1), 4.0 / 8.0);
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, equal, 2), 4.0 / 5.0);
  // The mean over networks: (0.5 + 0.5) / 2 at k = 1; (5/7 + 4/5) / 2 at k = 2.
  TopKSummary summary = TopKScores(tasks, {net, equal}, 2);
  ASSERT_EQ(summary.per_network.size(), 2u);
  EXPECT_DOUBLE_EQ(*summary.mean, (5.0 / 7.0 + 4.0 / 5.0) / 2);
}

TEST(RankingMetricsTest, TiedScoresAreBrokenAgainstTheModelAndFailuresCount) {
  // A constant model's top-1 pick is the slowest config, whatever the listing order.
  std::vector<RankedTask> tasks = {RankingMetricsConstant(4)};
  EXPECT_DOUBLE_EQ(*TopKScore(tasks, RankingMetricsNetworkOf(1), 1), 1.0 / 4.0);
  // A failing config ranked first and alone in the picks gives 0; with a second pick it is 1.
  std::vector<RankedTask> failing = {RankedTask{{kFailed, 1e-3, 2e-3}, {3, 2, 1}}};
  EXPECT_DOUBLE_EQ(*TopKScore(failing, RankingMetricsNetworkOf(1), 1), 0.0);
  EXPECT_DOUBLE_EQ(*TopKScore(failing, RankingMetricsNetworkOf(1), 2), 1.0);
  // A task where everything failed has no best and is skipped; alone it leaves no score.
  std::vector<RankedTask> all_failed = {RankedTask{{kFailed, kFailed}, {1, 2}}, RankingMetricsPerfect(2)};
  EXPECT_FALSE(TopKScore(all_failed, {"dead", {{0, 1}}}, 1).has_value());
  EXPECT_DOUBLE_EQ(*TopKScore(all_failed, RankingMetricsNetworkOf(2), 1), 1.0);
}

TEST(RankingMetricsTest, PairwiseAccuracyPerfectReversedConstant) {
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(RankingMetricsPerfect(7)), 1.0);
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(RankingMetricsReversed(7)), 0.0);
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(RankingMetricsConstant(7)), 0.5);
  // Pairs of equal latency are skipped: (1,1) ms is not a pair; of the other two pairs,
  // (1 ms, 2 ms) is right and (1 ms, 2 ms) with equal scores is half right: 1.5 / 2.
  RankedTask t{{1e-3, 1e-3, 2e-3}, {5, 1, 1}};
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(t), 0.75);
  // Two failures tie (skipped); a failure against a finite latency is a pair.
  RankedTask f{{kFailed, kFailed, 1e-3}, {2, 0, 1}};
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(f), 0.5);
  EXPECT_FALSE(PairwiseAccuracy(RankedTask{{1e-3, 1e-3}, {1, 2}}).has_value());
}

TEST(RankingMetricsTest, KendallTauAndSpearmanPerfectReversedAndKnownValues) {
  EXPECT_DOUBLE_EQ(*KendallTau(RankingMetricsPerfect(6)), 1.0);
  EXPECT_DOUBLE_EQ(*KendallTau(RankingMetricsReversed(6)), -1.0);
  EXPECT_DOUBLE_EQ(*SpearmanRho(RankingMetricsPerfect(6)), 1.0);
  EXPECT_DOUBLE_EQ(*SpearmanRho(RankingMetricsReversed(6)), -1.0);
  EXPECT_FALSE(KendallTau(RankingMetricsConstant(6)).has_value());
  EXPECT_FALSE(SpearmanRho(RankingMetricsConstant(6)).has_value());
  // Latencies 1, 2, 3, 4 ms; the model swaps the two fastest (ranks fast->slow: 2,1,3,4 ms).
  // Kendall: 6 pairs, one discordant: (5 - 1) / 6 = 2/3.
  // Spearman: rank differences d = 1, 1, 0, 0: 1 - 6 * 2 / (4 * 15) = 0.8.
  RankedTask swapped{{1e-3, 2e-3, 3e-3, 4e-3}, {3, 4, 2, 1}};
  EXPECT_DOUBLE_EQ(*KendallTau(swapped), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(*SpearmanRho(swapped), 0.8);
  EXPECT_DOUBLE_EQ(*PairwiseAccuracy(swapped), 5.0 / 6.0);
}

}  // namespace
}  // namespace tune::costmodel
