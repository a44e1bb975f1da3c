// FeasibilityModel: the probability that a config runs successfully, learned from ok/failed results.
#pragma once

#include <vector>

#include "search/gaussian_process.h"

namespace tune::search {

/// Options of FeasibilityModel.
struct FeasibilityModelOptions {
  /// Options of the underlying GP regression on the labels (ARD on by default, so that the
  /// model learns which knobs decide failure; dimension groups as for the cost model).
  GaussianProcessOptions gp = [] {
    GaussianProcessOptions o;
    o.ard = true;
    return o;
  }();
  /// Spread s of the label noise in the probit link below (label units); > 0.
  double link_scale = 0.25;
};

/// A least-squares GP classifier of success over points in [0,1]^d: a GaussianProcess
/// (Matérn 5/2, hyperparameters and per-group length scales by marginal likelihood) is
/// regressed on labels +1 (ok) and -1 (failed); with its posterior mean mu and variance v,
///   P(feasible | x) = Phi(mu(x) / sqrt(s^2 + v(x)))   (s = link_scale),
/// so P is near 1 close to successes, near 0 close to failures, and tends to the prior (the
/// labels' mean, shrunk by the prior variance) far from all data. Fit costs as a GP fit of n
/// points, a prediction O(n d + n^2). With no failure, or no success, among the labels it
/// predicts the smoothed success rate (ok + 1) / (n + 2) everywhere. Not thread-safe for
/// Fit; Predict may run concurrently.
class FeasibilityModel {
 public:
  explicit FeasibilityModel(FeasibilityModelOptions options = {});

  /// Fits to points `x` (same dimension each) with labels `ok` (same length). An empty
  /// training set predicts 0.5 everywhere.
  void Fit(const std::vector<std::vector<double>>& x, const std::vector<bool>& ok);

  /// P(feasible) at each of `points` (of the training dimension), each in (0, 1).
  std::vector<double> PredictAll(const std::vector<std::vector<double>>& points) const;
  /// P(feasible) at one point.
  double Predict(const std::vector<double>& point) const { return PredictAll({point})[0]; }

  /// The smoothed overall success rate (ok + 1) / (n + 2).
  double prior() const { return prior_; }
  /// Whether the labels hold both a failure and a success (otherwise P is constant).
  bool has_failures() const { return has_failures_; }
  /// The label GP (meaningful when has_failures()).
  const GaussianProcess& gp() const { return gp_; }

 private:
  FeasibilityModelOptions options_;
  GaussianProcess gp_;
  double prior_ = 0.5;
  bool has_failures_ = false;
};

}  // namespace tune::search
