// GaussianProcess: a small GP regressor (Matérn 5/2) over points in [0,1]^d, for BO strategies.
#pragma once

#include <cstddef>
#include <vector>

namespace tune::search {

/// Dense linear algebra on row-major n x n matrices, enough for a GP of a few hundred points.
///
/// Factors the symmetric positive-definite matrix `a` in place into its lower Cholesky factor
/// L (a = L L^T). Only the lower triangle of `a` is read; on success the strict upper
/// triangle is zeroed. Returns false (leaving `a` unspecified) when a pivot is not positive,
/// i.e. `a` is not numerically positive definite.
bool CholeskyFactor(std::vector<double>& a, int n);
/// Solves L x = b in place (`l` lower triangular with a non-zero diagonal).
void SolveLower(const std::vector<double>& l, int n, std::vector<double>& b);
/// Solves L^T x = b in place (`l` lower triangular with a non-zero diagonal).
void SolveLowerTransposed(const std::vector<double>& l, int n, std::vector<double>& b);

/// Matérn 5/2 covariance at Euclidean distance `r`:
/// variance * (1 + s + s^2 / 3) * exp(-s) with s = sqrt(5) r / length_scale.
double Matern52(double r, double length_scale, double variance);

struct GaussianProcessOptions {
  /// When true, Fit picks (length scale, noise ratio) from the grids below by maximizing the
  /// log marginal likelihood, with the signal variance profiled out in closed form. When
  /// false, `length_scale`, `noise_ratio` and `signal_variance` are used as given.
  bool fit_hyperparameters = true;
  /// Length scale in units of the [0,1] input cube.
  double length_scale = 0.3;
  /// Noise variance as a fraction of the signal variance (a nugget; > 0 keeps K well
  /// conditioned).
  double noise_ratio = 1e-2;
  /// Signal variance of the standardized targets (used only when not fitting).
  double signal_variance = 1.0;
  std::vector<double> length_scale_grid = {0.1, 0.2, 0.35, 0.6, 1.0, 1.7};
  std::vector<double> noise_ratio_grid = {1e-4, 1e-2, 1e-1};
  /// Automatic relevance determination (used only when fitting): after the grid picks one
  /// isotropic length scale and a noise ratio, each dimension group gets its own length
  /// scale by coordinate search on a log2 grid (one group at a time: halve or double while
  /// the log marginal likelihood improves, at most 4 steps; the noise ratio
  /// is searched likewise by factors of 10), repeated for at most `ard_sweeps` sweeps or
  /// until a sweep changes nothing. Cost: about (groups + 1) * 3 * sweeps extra
  /// factorizations of n x n.
  bool ard = false;
  /// Most coordinate-search sweeps of the ARD fit (>= 1).
  int ard_sweeps = 3;
  /// Group of each input dimension for ARD: dimensions of one group share a length scale (e.g.
  /// the one-hot coordinates of one categorical knob). Empty: every dimension is its own
  /// group. Otherwise its size is the input dimension and the ids are in [0, dimension).
  std::vector<int> dimension_groups;
  /// Bounds of the ARD length scales, in units of the input cube.
  double min_length_scale = 0.03;
  double max_length_scale = 64.0;
};

/// Gaussian-process regression with a constant (mean-of-targets) prior mean, a Matérn 5/2
/// kernel over the distance r = sqrt(sum_k ((a_k - b_k) / l_k)^2) (one length scale l_k per
/// input dimension: all equal unless GaussianProcessOptions::ard) and Gaussian noise. Targets are standardized internally (zero mean, unit variance);
/// predictions are returned in the units of the targets. Fit costs O(n^3) per hyperparameter
/// candidate, a prediction O(n^2). Not thread-safe for Fit; const methods may run
/// concurrently.
class GaussianProcess {
 public:
  explicit GaussianProcess(GaussianProcessOptions options = {});

  /// Fits to points `x` (each of the same dimension, coordinates normally in [0,1]) and
  /// finite targets `y` (same length). Distinct points are expected; duplicates are tolerated
  /// through the noise term. An empty training set gives the prior (mean 0, variance
  /// signal_variance).
  void Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

  /// Posterior mean and variance (of the latent function, without observation noise) at
  /// `point`, in target units. Either output may be null.
  void Predict(const std::vector<double>& point, double* mean, double* variance) const;

  /// The posterior over a fixed set of points that can be conditioned on "believed"
  /// observations, for greedy batch selection (kriging believer): Believe(i) updates every
  /// point's variance as if point i had been observed at its current posterior mean, which
  /// leaves all means unchanged. Each Believe costs O(m (n + k)) for m points after k
  /// believes. Keeps a pointer to the GaussianProcess, which must outlive it and not be
  /// refitted meanwhile.
  class Posterior {
   public:
    size_t size() const { return mean_.size(); }
    /// Posterior means, target units.
    const std::vector<double>& mean() const { return mean_; }
    /// Posterior latent variances, target units squared (>= 0).
    const std::vector<double>& variance() const { return variance_; }
    /// Conditions on point `i` observed (with the model's noise) at its posterior mean.
    void Believe(size_t i);

   private:
    friend class GaussianProcess;
    const GaussianProcess* gp_ = nullptr;
    int dim_ = 0;
    std::vector<double> points_;  // m x dim, row-major
    // Row r, column c: entry r of L^{-1} k(X, point c), where L is the Cholesky factor of the
    // training covariance extended by one row per Believe. Stored by rows so that the solves
    // and updates run along contiguous memory over all points at once.
    std::vector<std::vector<double>> whitened_;
    std::vector<double> mean_;
    std::vector<double> variance_;
  };
  /// The joint posterior at `points` (each of the training dimension).
  Posterior PredictAll(const std::vector<std::vector<double>>& points) const;

  /// Number of training points.
  size_t size() const { return n_; }
  /// The isotropic length scale chosen from the grid (or given), input-cube units.
  double length_scale() const { return length_scale_; }
  /// The length scale of each input dimension in use (input-cube units); equal to
  /// length_scale() unless ARD is on. Empty before the first Fit with points.
  const std::vector<double>& length_scales() const { return length_scales_; }
  /// Noise variance / signal variance in use.
  double noise_ratio() const { return noise_ratio_; }
  /// Signal variance in target units squared.
  double signal_variance() const { return signal_variance_ * y_scale_ * y_scale_; }
  /// Standard deviation used to standardize the targets (1 when they are all equal).
  double target_scale() const { return y_scale_; }
  /// Log marginal likelihood of the standardized targets under the chosen hyperparameters
  /// (0 for an empty training set).
  double log_marginal_likelihood() const { return log_marginal_likelihood_; }

 private:
  // Covariance in standardized units between a training point and `point`.
  double Kernel(const double* a, const double* b) const;
  // Distance between two points in units of the per-dimension length scales.
  double ScaledDistance(const double* a, const double* b) const;

  GaussianProcessOptions options_;
  size_t n_ = 0;
  int dim_ = 0;
  std::vector<double> x_;        // n x dim, row-major
  std::vector<double> chol_;     // n x n lower Cholesky factor of K + noise I (standardized)
  std::vector<double> alpha_;    // (K + noise I)^{-1} y_standardized
  double y_mean_ = 0.0;
  double y_scale_ = 1.0;
  double length_scale_;
  std::vector<double> length_scales_;    // per dimension
  std::vector<double> inv_length2_;      // 1 / length_scales_^2
  double noise_ratio_;
  double signal_variance_;       // standardized units
  double log_marginal_likelihood_ = 0.0;
};

}  // namespace tune::search
