// Tests of FeasibilityModel, the P(feasible) estimate of Bayesian optimisation.
#include "search/bo_feasibility.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tune::search {
namespace {

// Points of [0,1]^2 that fail where x0 + x1 > 1.2 (a corner, as resource limits give).
bool FeasibilityTestOk(const std::vector<double>& p) { return p[0] + p[1] <= 1.2; }

TEST(FeasibilityModelTest, LearnsAFailingCornerFromRandomPoints) {
  std::mt19937_64 rng(5150);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::vector<double>> x;
  std::vector<bool> ok;
  for (int i = 0; i < 80; ++i) {
    x.push_back({unit(rng), unit(rng)});
    ok.push_back(FeasibilityTestOk(x.back()));
  }
  FeasibilityModel model;
  model.Fit(x, ok);
  EXPECT_TRUE(model.has_failures());
  // Fresh points well inside each region.
  double sum_ok = 0, sum_fail = 0;
  int n_ok = 0, n_fail = 0;
  for (int i = 0; i < 200; ++i) {
    const std::vector<double> p = {unit(rng), unit(rng)};
    const double margin = p[0] + p[1] - 1.2;
    const double prob = model.Predict(p);
    EXPECT_GT(prob, 0.0);
    EXPECT_LT(prob, 1.0);
    if (margin < -0.25) {
      sum_ok += prob;
      ++n_ok;
    } else if (margin > 0.25) {
      sum_fail += prob;
      ++n_fail;
    }
  }
  ASSERT_GT(n_ok, 10);
  ASSERT_GT(n_fail, 3);
  EXPECT_GT(sum_ok / n_ok, 0.85);
  EXPECT_LT(sum_fail / n_fail, 0.3);
}

TEST(FeasibilityModelTest, EmptyAndAllOkData) {
  FeasibilityModel empty;
  empty.Fit({}, {});
  EXPECT_EQ(empty.Predict({0.3, 0.7}), 0.5);
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::vector<double>> x;
  for (int i = 0; i < 20; ++i) x.push_back({unit(rng), unit(rng)});
  FeasibilityModel all_ok;
  all_ok.Fit(x, std::vector<bool>(x.size(), true));
  EXPECT_FALSE(all_ok.has_failures());
  EXPECT_GT(all_ok.Predict({unit(rng), unit(rng)}), 0.9);
}

}  // namespace
}  // namespace tune::search
