// Tests of the Gaussian-process regressor and its dense linear algebra.
#include "search/gaussian_process.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tune::search {
namespace {

TEST(GaussianProcessLinalgTest, CholeskyOfAKnownMatrix) {
  // A classic example: A = L L^T with L = [[2,0,0],[6,1,0],[-8,5,3]].
  std::vector<double> a = {4, 12, -16, 12, 37, -43, -16, -43, 98};
  ASSERT_TRUE(CholeskyFactor(a, 3));
  const std::vector<double> expected = {2, 0, 0, 6, 1, 0, -8, 5, 3};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(a[i], expected[i], 1e-12) << "entry " << i;
}

TEST(GaussianProcessLinalgTest, CholeskyRejectsIndefiniteMatrices) {
  std::vector<double> indefinite = {1, 2, 2, 1};
  EXPECT_FALSE(CholeskyFactor(indefinite, 2));
  std::vector<double> singular = {1, 1, 1, 1};
  EXPECT_FALSE(CholeskyFactor(singular, 2));
  std::vector<double> empty;
  EXPECT_TRUE(CholeskyFactor(empty, 0));
}

TEST(GaussianProcessLinalgTest, TriangularSolvesInvertTheFactor) {
  const std::vector<double> l = {2, 0, 0, 6, 1, 0, -8, 5, 3};
  // L x = b with x = (1, -2, 0.5).
  std::vector<double> b = {2, 6 * 1 + 1 * -2, -8 * 1 + 5 * -2 + 3 * 0.5};
  SolveLower(l, 3, b);
  EXPECT_NEAR(b[0], 1, 1e-12);
  EXPECT_NEAR(b[1], -2, 1e-12);
  EXPECT_NEAR(b[2], 0.5, 1e-12);
  // L^T x = c with x = (1, -2, 0.5): L^T = [[2,6,-8],[0,1,5],[0,0,3]].
  std::vector<double> c = {2 * 1 + 6 * -2 + -8 * 0.5, -2 + 5 * 0.5, 1.5};
  SolveLowerTransposed(l, 3, c);
  EXPECT_NEAR(c[0], 1, 1e-12);
  EXPECT_NEAR(c[1], -2, 1e-12);
  EXPECT_NEAR(c[2], 0.5, 1e-12);
}

TEST(GaussianProcessLinalgTest, Matern52Shape) {
  EXPECT_DOUBLE_EQ(Matern52(0.0, 0.3, 2.0), 2.0);
  EXPECT_LT(Matern52(0.5, 0.3, 1.0), Matern52(0.1, 0.3, 1.0));
  EXPECT_LT(Matern52(5.0, 0.3, 1.0), 1e-6);
  // s = sqrt(5) at r = length scale: (1 + s + 5/3) e^-s.
  const double s = std::sqrt(5.0);
  EXPECT_NEAR(Matern52(0.3, 0.3, 1.0), (1 + s + 5.0 / 3.0) * std::exp(-s), 1e-12);
}

// A smooth function on [0,1]^2 sampled on a 5 x 5 grid.
void GridSamples(std::vector<std::vector<double>>* x, std::vector<double>* y) {
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 5; ++j) {
      const double u = i / 4.0;
      const double v = j / 4.0;
      x->push_back({u, v});
      y->push_back(3.0 + std::sin(3 * u) + (v - 0.4) * (v - 0.4) * 2);
    }
  }
}

TEST(GaussianProcessTest, InterpolatesTrainingPointsWithSmallVariance) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  GridSamples(&x, &y);
  GaussianProcessOptions options;
  options.fit_hyperparameters = false;
  options.length_scale = 0.5;
  options.noise_ratio = 1e-8;
  GaussianProcess gp(options);
  gp.Fit(x, y);
  ASSERT_EQ(gp.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double mean = 0;
    double variance = 0;
    gp.Predict(x[i], &mean, &variance);
    EXPECT_NEAR(mean, y[i], 1e-4) << "point " << i;
    EXPECT_LT(variance, 1e-6 * gp.signal_variance()) << "point " << i;
  }
  // Between grid points the model is still close (the function is smooth) but uncertain.
  double mean = 0;
  double variance = 0;
  gp.Predict({0.375, 0.625}, &mean, &variance);
  EXPECT_NEAR(mean, 3.0 + std::sin(3 * 0.375) + 2 * 0.225 * 0.225, 0.05);
  EXPECT_GT(variance, 1e-6 * gp.signal_variance());
  // Far away the variance returns to the prior's and the mean to the targets' mean.
  double far_mean = 0;
  double far_variance = 0;
  gp.Predict({6.0, -5.0}, &far_mean, &far_variance);
  EXPECT_GT(far_variance, 0.99 * gp.signal_variance());
  double target_mean = 0;
  for (double v : y) target_mean += v / y.size();
  EXPECT_NEAR(far_mean, target_mean, 1e-3);
}

TEST(GaussianProcessTest, FittedModelPredictsHeldOutPointsAndUncertaintyGrowsWithDistance) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  GridSamples(&x, &y);
  GaussianProcess gp;  // hyperparameters from the likelihood grid
  gp.Fit(x, y);
  EXPECT_TRUE(std::isfinite(gp.log_marginal_likelihood()));
  EXPECT_GT(gp.length_scale(), 0.1);  // a smooth function: not the shortest length scale
  double near_var = 0;
  double mid_var = 0;
  double far_var = 0;
  double mean = 0;
  gp.Predict({0.5, 0.5}, &mean, &near_var);  // a training point
  EXPECT_NEAR(mean, 3.0 + std::sin(1.5) + 0.02, 0.05);
  gp.Predict({0.625, 0.375}, &mean, &mid_var);  // between training points
  EXPECT_NEAR(mean, 3.0 + std::sin(3 * 0.625) + 2 * 0.025 * 0.025, 0.1);
  gp.Predict({2.0, 2.0}, nullptr, &far_var);
  EXPECT_LT(near_var, mid_var);
  EXPECT_LT(mid_var, far_var);
  EXPECT_LT(near_var, 0.05 * far_var);
}

TEST(GaussianProcessTest, ShortLengthScaleForWigglyData) {
  std::vector<std::vector<double>> x;
  std::vector<double> smooth;
  std::vector<double> wiggly;
  for (int i = 0; i <= 40; ++i) {
    const double u = i / 40.0;
    x.push_back({u});
    smooth.push_back(2 * u);
    wiggly.push_back(std::sin(40 * u));
  }
  GaussianProcess a;
  a.Fit(x, smooth);
  GaussianProcess b;
  b.Fit(x, wiggly);
  EXPECT_GT(a.length_scale(), b.length_scale());
  EXPECT_LE(b.length_scale(), 0.2);
}

TEST(GaussianProcessTest, EmptyAndConstantTrainingSets) {
  GaussianProcess empty;
  empty.Fit({}, {});
  double mean = 1;
  double variance = 0;
  empty.Predict({0.2, 0.4}, &mean, &variance);
  EXPECT_EQ(mean, 0.0);
  EXPECT_GT(variance, 0.0);

  GaussianProcess constant;
  constant.Fit({{0.1}, {0.5}, {0.9}}, {7.0, 7.0, 7.0});
  constant.Predict({0.3}, &mean, &variance);
  EXPECT_NEAR(mean, 7.0, 1e-9);
  EXPECT_TRUE(std::isfinite(variance));
}

TEST(GaussianProcessTest, BelieveMatchesRefittingWithTheBelievedPoints) {
  // With all-zero targets the standardization does not change when zero-valued (= predicted
  // mean) observations are added, so a refit is the exact reference for the variances.
  GaussianProcessOptions options;
  options.fit_hyperparameters = false;
  options.length_scale = 0.4;
  options.noise_ratio = 1e-3;
  std::vector<std::vector<double>> x = {{0.1, 0.2}, {0.8, 0.3}, {0.5, 0.9}};
  std::vector<std::vector<double>> cand = {{0.2, 0.2}, {0.6, 0.6}, {0.9, 0.9},
                                           {0.0, 1.0}, {0.4, 0.4}};
  GaussianProcess gp(options);
  gp.Fit(x, {0, 0, 0});
  GaussianProcess::Posterior posterior = gp.PredictAll(cand);
  posterior.Believe(1);
  posterior.Believe(3);

  std::vector<std::vector<double>> x2 = x;
  x2.push_back(cand[1]);
  x2.push_back(cand[3]);
  GaussianProcess refit(options);
  refit.Fit(x2, {0, 0, 0, 0, 0});
  for (size_t i = 0; i < cand.size(); ++i) {
    double variance = 0;
    refit.Predict(cand[i], nullptr, &variance);
    EXPECT_NEAR(posterior.variance()[i], variance, 1e-9) << "candidate " << i;
  }
  EXPECT_LT(posterior.variance()[1], 2e-3);
}

TEST(GaussianProcessTest, BelieveKeepsMeansAndShrinksNearbyVarianceMost) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  GridSamples(&x, &y);
  x.resize(6);
  y.resize(6);
  GaussianProcess gp;
  gp.Fit(x, y);
  std::vector<std::vector<double>> cand = {{0.9, 0.9}, {0.85, 0.9}, {0.1, 0.95}};
  GaussianProcess::Posterior posterior = gp.PredictAll(cand);
  const std::vector<double> mean_before = posterior.mean();
  const std::vector<double> var_before = posterior.variance();
  posterior.Believe(0);
  EXPECT_EQ(posterior.mean(), mean_before);
  EXPECT_LT(posterior.variance()[0], 0.2 * var_before[0]);
  const double shrink_near = var_before[1] - posterior.variance()[1];
  const double shrink_far = var_before[2] - posterior.variance()[2];
  EXPECT_GT(shrink_near, shrink_far);
  EXPECT_GE(shrink_far, 0.0);
}

// A function of the first of three inputs only, sampled at random points: ARD gives the two
// irrelevant dimensions much longer length scales than the relevant one; one shared group
// for the last two keeps them equal.
TEST(GaussianProcessArdTest, IrrelevantDimensionsGetLongLengthScales) {
  std::mt19937_64 rng(20261127);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (int i = 0; i < 60; ++i) {
    const std::vector<double> p = {unit(rng), unit(rng), unit(rng)};
    x.push_back(p);
    y.push_back(std::sin(6.0 * p[0]) + 0.5 * p[0]);
  }
  GaussianProcessOptions options;
  options.ard = true;
  GaussianProcess gp(options);
  gp.Fit(x, y);
  ASSERT_EQ(gp.length_scales().size(), 3u);
  EXPECT_GT(gp.length_scales()[1], 4.0 * gp.length_scales()[0]);
  EXPECT_GT(gp.length_scales()[2], 4.0 * gp.length_scales()[0]);
  // The fit is no worse than the isotropic one it starts from.
  GaussianProcess iso;
  iso.Fit(x, y);
  EXPECT_GE(gp.log_marginal_likelihood(), iso.log_marginal_likelihood());
  EXPECT_EQ(iso.length_scales()[0], iso.length_scales()[2]);
  // ARD predicts a fresh point better than the isotropic model.
  double ard_error = 0;
  double iso_error = 0;
  for (int i = 0; i < 40; ++i) {
    const std::vector<double> p = {unit(rng), unit(rng), unit(rng)};
    const double truth = std::sin(6.0 * p[0]) + 0.5 * p[0];
    double m = 0;
    gp.Predict(p, &m, nullptr);
    ard_error += std::abs(m - truth);
    iso.Predict(p, &m, nullptr);
    iso_error += std::abs(m - truth);
  }
  EXPECT_LT(ard_error, iso_error);

  GaussianProcessOptions grouped = options;
  grouped.dimension_groups = {0, 1, 1};
  GaussianProcess shared(grouped);
  shared.Fit(x, y);
  EXPECT_EQ(shared.length_scales()[1], shared.length_scales()[2]);
  EXPECT_GT(shared.length_scales()[1], 4.0 * shared.length_scales()[0]);
}

}  // namespace
}  // namespace tune::search
