// Tests of the batch-selection helpers: TopCandidates and SelectDiverse.
#include "search/diversity.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "search/space.h"

namespace tune::search {
namespace {

using Configs = std::vector<Config>;

TEST(HammingDistanceTest, CountsDifferingKnobs) {
  EXPECT_EQ(HammingDistance({0, 1, 2}, {0, 1, 2}), 0);
  EXPECT_EQ(HammingDistance({0, 1, 2}, {0, 3, 2}), 1);
  EXPECT_EQ(HammingDistance({0, 1, 2}, {1, 0, 0}), 3);
}

TEST(SelectDiverseTest, SkipsNearDuplicatesInRankOrder) {
  const Configs ranked = {
      {0, 0, 0},  // taken first
      {1, 0, 0},  // one knob from {0,0,0}: skipped
      {1, 1, 0},  // two knobs from {0,0,0}: taken
      {0, 1, 0},  // one knob from {1,1,0}: skipped
      {0, 1, 1},  // two knobs from both: taken
  };
  EXPECT_EQ(SelectDiverse(ranked, 3), (Configs{{0, 0, 0}, {1, 1, 0}, {0, 1, 1}}));
}

TEST(SelectDiverseTest, RelaxesTheDistanceWhenCandidatesRunShort) {
  const Configs ranked = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {0, 1, 1}};
  // Three pass at distance 2; then distance 1 takes the skipped ones in rank order.
  EXPECT_EQ(SelectDiverse(ranked, 4), (Configs{{0, 0, 0}, {1, 1, 0}, {0, 1, 1}, {1, 0, 0}}));
  EXPECT_EQ(SelectDiverse(ranked, 10),
            (Configs{{0, 0, 0}, {1, 1, 0}, {0, 1, 1}, {1, 0, 0}, {0, 1, 0}}));
}

TEST(SelectDiverseTest, LargerDistanceRelaxesStepByStep) {
  const Configs ranked = {{0, 0, 0}, {1, 1, 0}, {1, 1, 1}, {0, 0, 1}};
  // Distance 3: {0,0,0}, {1,1,1}. Distance 2: {1,1,0} is 2 from {0,0,0} but 1 from {1,1,1};
  // {0,0,1} is 1 from {0,0,0}. Distance 1: both, in rank order.
  EXPECT_EQ(SelectDiverse(ranked, 3, 3), (Configs{{0, 0, 0}, {1, 1, 1}, {1, 1, 0}}));
  EXPECT_EQ(SelectDiverse(ranked, 2, 3), (Configs{{0, 0, 0}, {1, 1, 1}}));
}

TEST(SelectDiverseTest, DistanceOneIsPlainTopCountAndDuplicatesAreTakenOnce) {
  const Configs ranked = {{0, 0}, {0, 0}, {0, 1}, {1, 1}};
  EXPECT_EQ(SelectDiverse(ranked, 2, 1), (Configs{{0, 0}, {0, 1}}));
  EXPECT_EQ(SelectDiverse(ranked, 2, 0), (Configs{{0, 0}, {0, 1}}));
  EXPECT_EQ(SelectDiverse(ranked, 5), (Configs{{0, 0}, {1, 1}, {0, 1}}));
}

TEST(SelectDiverseTest, EmptyInputsGiveNothing) {
  EXPECT_TRUE(SelectDiverse({}, 4).empty());
  EXPECT_TRUE(SelectDiverse({{1, 2}}, 0).empty());
  EXPECT_TRUE(SelectDiverse({{1, 2}}, -1).empty());
}

TEST(TopCandidatesTest, KeepsTheBestDistinctConfigsBestFirst) {
  TopCandidates top(3);
  EXPECT_TRUE(top.Offer({0}, 1.0));
  EXPECT_TRUE(top.Offer({1}, 5.0));
  EXPECT_FALSE(top.Offer({1}, 9.0));  // already kept: the first score stays
  EXPECT_TRUE(top.Offer({2}, 3.0));
  EXPECT_TRUE(top.Offer({3}, 4.0));   // full: evicts {0}
  EXPECT_FALSE(top.Offer({4}, 2.0));  // not better than the worst kept (3.0)
  EXPECT_FALSE(top.Offer({5}, 3.0));  // a tie keeps the earlier offer
  EXPECT_FALSE(top.Offer({6}, std::nan("")));
  EXPECT_EQ(top.size(), 3u);
  EXPECT_TRUE(top.Contains({2}));
  EXPECT_FALSE(top.Contains({0}));
  EXPECT_EQ(top.Sorted(), (Configs{{1}, {3}, {2}}));
}

TEST(TopCandidatesTest, EqualScoresKeepOfferOrder) {
  TopCandidates top(10);
  for (int i = 0; i < 5; ++i) top.Offer({i}, 1.0);
  top.Offer({9}, 2.0);
  top.Offer({8}, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(top.Sorted(), (Configs{{9}, {0}, {1}, {2}, {3}, {4}, {8}}));
}

}  // namespace
}  // namespace tune::search
