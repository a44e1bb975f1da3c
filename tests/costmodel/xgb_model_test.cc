// Tests of XgbModel: training, failures, uncertainty, determinism and the saved artifact.
#include "costmodel/xgb_model.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tune::costmodel {
namespace {

using ::testing::HasSubstr;

constexpr int kWidth = 4;
constexpr double kInf = std::numeric_limits<double>::infinity();

FeatureSchema Schema() { return FeatureSchema{"toy", 3, kWidth, 42}; }

XgbOptions SmallOptions(const std::string& objective = "rank:pairwise") {
  XgbOptions o;
  o.objective = objective;
  o.num_rounds = 30;
  o.max_depth = 4;
  o.ensemble_size = 3;
  o.seed = 11;
  return o;
}

// Rows of 4 uniform features; cost = exp(2*x0 + x1) (x2, x3 are noise); x0 > 0.9 fails.
struct Data {
  std::vector<float> rows;
  std::vector<double> costs;
  std::vector<int64_t> groups;
};
Data MakeData(int n, uint64_t seed, int64_t group = 0) {
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53); };
  Data d;
  for (int i = 0; i < n; ++i) {
    float x[kWidth];
    for (float& v : x) v = uniform();
    d.rows.insert(d.rows.end(), x, x + kWidth);
    d.costs.push_back(x[0] > 0.9f ? kInf : std::exp(2.0 * x[0] + x[1]));
    d.groups.push_back(group);
  }
  return d;
}

// Share of pairs with different costs that the scores order correctly (ties count half).
double PairAccuracy(const std::vector<double>& scores, const std::vector<double>& costs) {
  double right = 0, total = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    for (size_t j = i + 1; j < costs.size(); ++j) {
      if (costs[i] == costs[j]) continue;
      bool i_faster = costs[i] < costs[j];
      total += 1;
      if (scores[i] == scores[j]) right += 0.5;
      else if ((scores[i] > scores[j]) == i_faster) right += 1;
    }
  }
  return right / total;
}

TEST(XgbModelTest, UntrainedPredictsZeros) {
  XgbModel model(Schema(), SmallOptions());
  EXPECT_FALSE(model.trained());
  Data d = MakeData(5, 1);
  std::vector<double> var;
  auto p = model.Predict(d.rows.data(), 5, &var);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, std::vector<double>(5, 0.0));
  EXPECT_EQ(var, std::vector<double>(5, 0.0));
}

TEST(XgbModelTest, LearnsTheOrderAndRanksFailuresLast) {
  for (const std::string objective : {"rank:pairwise", "reg:squarederror"}) {
    SCOPED_TRACE(objective);
    XgbModel model(Schema(), SmallOptions(objective));
    Data train = MakeData(300, 1), test = MakeData(200, 2);
    ASSERT_TRUE(model.Fit(train.rows, train.costs, train.groups).ok());
    EXPECT_TRUE(model.trained());
    auto scores = model.Predict(test.rows.data(), test.costs.size());
    ASSERT_TRUE(scores.ok()) << scores.status();
    EXPECT_GT(PairAccuracy(*scores, test.costs), 0.85);
    // Failures (x0 > 0.9) score below the fastest configs (x0 < 0.2) on average.
    double fail = 0, fast = 0;
    int n_fail = 0, n_fast = 0;
    for (size_t i = 0; i < test.costs.size(); ++i) {
      float x0 = test.rows[i * kWidth];
      if (x0 > 0.9f) fail += (*scores)[i], ++n_fail;
      if (x0 < 0.2f) fast += (*scores)[i], ++n_fast;
    }
    ASSERT_GT(n_fail, 0);
    ASSERT_GT(n_fast, 0);
    EXPECT_LT(fail / n_fail, fast / n_fast);
  }
}

TEST(XgbModelTest, GroupsAreRankedSeparately) {
  // Group 1 is 100x slower than group 0 but has the same internal order; with ranking groups
  // and per-group normalized labels both halves are learned.
  Data a = MakeData(150, 3, 0), b = MakeData(150, 4, 1);
  Data all = a;
  all.rows.insert(all.rows.end(), b.rows.begin(), b.rows.end());
  for (double c : b.costs) all.costs.push_back(c * 100);
  all.groups.insert(all.groups.end(), b.groups.begin(), b.groups.end());
  XgbModel model(Schema(), SmallOptions());
  ASSERT_TRUE(model.Fit(all.rows, all.costs, all.groups).ok());
  Data test = MakeData(100, 5);
  auto scores = model.Predict(test.rows.data(), test.costs.size());
  ASSERT_TRUE(scores.ok());
  EXPECT_GT(PairAccuracy(*scores, test.costs), 0.85);
}

TEST(XgbModelTest, EnsembleVarianceAndDeterminism) {
  Data train = MakeData(200, 6), test = MakeData(50, 7);
  XgbModel a(Schema(), SmallOptions()), b(Schema(), SmallOptions());
  ASSERT_TRUE(a.Fit(train.rows, train.costs, train.groups).ok());
  ASSERT_TRUE(b.Fit(train.rows, train.costs, train.groups).ok());
  std::vector<double> va, vb;
  auto pa = a.Predict(test.rows.data(), 50, &va), pb = b.Predict(test.rows.data(), 50, &vb);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(*pa, *pb) << "same seed, same data: same model";
  EXPECT_EQ(va, vb);
  int positive = 0;
  for (double v : va) {
    EXPECT_GE(v, 0.0);
    positive += v > 0;
  }
  EXPECT_GT(positive, 25) << "bootstrap members should disagree on most rows";

  XgbOptions other = SmallOptions();
  other.seed = 12;
  XgbModel c(Schema(), other);
  ASSERT_TRUE(c.Fit(train.rows, train.costs, train.groups).ok());
  EXPECT_NE(*c.Predict(test.rows.data(), 50), *pa) << "another seed draws other bootstrap samples";

  XgbOptions single = SmallOptions();
  single.ensemble_size = 1;
  XgbModel d(Schema(), single);
  ASSERT_TRUE(d.Fit(train.rows, train.costs, train.groups).ok());
  std::vector<double> vd;
  ASSERT_TRUE(d.Predict(test.rows.data(), 50, &vd).ok());
  EXPECT_EQ(vd, std::vector<double>(50, 0.0));
}

TEST(XgbModelTest, FitRejectsBadInput) {
  XgbModel model(Schema(), SmallOptions());
  Data d = MakeData(10, 8);
  EXPECT_EQ(model.Fit({}, {}, {}).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> short_rows(d.rows.begin(), d.rows.end() - 1);
  EXPECT_EQ(model.Fit(short_rows, d.costs, d.groups).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Fit(d.rows, d.costs, {}).code(), absl::StatusCode::kInvalidArgument);
  XgbOptions bad = SmallOptions("binary:hinge");
  XgbModel wrong(Schema(), bad);
  EXPECT_EQ(wrong.Fit(d.rows, d.costs, d.groups).code(), absl::StatusCode::kInvalidArgument);
  // An XGBoost-side error (a bad parameter value) surfaces as a Status, not a crash.
  XgbOptions broken = SmallOptions();
  broken.tree_method = "no-such-method";
  XgbModel x(Schema(), broken);
  absl::Status st = x.Fit(d.rows, d.costs, d.groups);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_FALSE(x.trained());
}

TEST(XgbModelTest, SaveLoadRestoresPredictions) {
  for (const std::string objective : {"rank:pairwise", "reg:squarederror"}) {
    SCOPED_TRACE(objective);
    Data train = MakeData(200, 9), test = MakeData(60, 10);
    XgbModel model(Schema(), SmallOptions(objective));
    ASSERT_TRUE(model.Fit(train.rows, train.costs, train.groups).ok());
    auto bytes = model.Save();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->substr(0, 8), "TUNEXGB1");

    XgbModel restored(Schema(), SmallOptions("rank:pairwise"));  // objective comes from the artifact
    ASSERT_TRUE(restored.Load(*bytes).ok());
    EXPECT_TRUE(restored.trained());
    EXPECT_EQ(restored.options().objective, objective);
    std::vector<double> v1, v2;
    auto p1 = model.Predict(test.rows.data(), 60, &v1), p2 = restored.Predict(test.rows.data(), 60, &v2);
    ASSERT_TRUE(p1.ok() && p2.ok());
    EXPECT_EQ(*p1, *p2);
    EXPECT_EQ(v1, v2);
    auto again = restored.Save();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *bytes) << "save(load(x)) == x";
  }
}

TEST(XgbModelTest, UntrainedRoundTrips) {
  XgbModel model(Schema(), SmallOptions());
  auto bytes = model.Save();
  ASSERT_TRUE(bytes.ok());
  XgbModel restored(Schema(), SmallOptions());
  ASSERT_TRUE(restored.Load(*bytes).ok());
  EXPECT_FALSE(restored.trained());
}

TEST(XgbModelTest, LoadRejectsOtherArtifacts) {
  Data train = MakeData(100, 11);
  XgbModel model(Schema(), SmallOptions());
  ASSERT_TRUE(model.Fit(train.rows, train.costs, train.groups).ok());
  std::string bytes = *model.Save();

  XgbModel target(Schema(), SmallOptions());
  auto expect_invalid = [&](const std::string& artifact, const std::string& why) {
    absl::Status st = target.Load(artifact);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << why << ": " << st;
    EXPECT_FALSE(target.trained()) << why;
  };
  expect_invalid("", "empty");
  expect_invalid("garbage bytes that are not a model", "garbage");
  expect_invalid(bytes.substr(0, bytes.size() / 2), "truncated");
  expect_invalid(bytes + "x", "trailing bytes");
  std::string version = bytes;
  version[8] = 2;  // artifact version (little-endian u32 after the magic)
  expect_invalid(version, "artifact version");
  std::string booster = bytes;
  booster[booster.size() - 10] = '#';  // inside the last booster's JSON
  expect_invalid(booster, "corrupt booster");

  for (FeatureSchema other : {FeatureSchema{"toy", 4, kWidth, 42}, FeatureSchema{"toy", 3, kWidth + 1, 42},
                              FeatureSchema{"toy", 3, kWidth, 43}, FeatureSchema{"ast", 3, kWidth, 42}}) {
    XgbModel mismatched(other, SmallOptions());
    absl::Status st = mismatched.Load(bytes);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("features"));
  }
}

}  // namespace
}  // namespace tune::costmodel
