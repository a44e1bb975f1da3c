// GaussianProcess implementation: Cholesky, triangular solves, grid-searched hyperparameters.
#include "search/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "base/check.h"

namespace tune::search {
namespace {

constexpr double kSqrt5 = 2.2360679774997896964;
constexpr double kLog2Pi = 1.8378770664093454836;
// Bounds of the profiled signal variance (standardized units): keeps a degenerate fit (e.g.
// all targets equal) from collapsing or exploding the predictive variance.
constexpr double kMinSignalVariance = 1e-2;
constexpr double kMaxSignalVariance = 1e2;

// Four partial sums: independent chains the CPU can overlap (a single running sum is
// latency-bound, and the compiler may not reorder it).
double Dot(const double* a, const double* b, size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

bool CholeskyFactor(std::vector<double>& a, int n) {
  TUNE_CHECK(n >= 0 && a.size() == static_cast<size_t>(n) * n)
      << "matrix of " << a.size() << " entries is not " << n << " x " << n;
  for (int j = 0; j < n; ++j) {
    double* row_j = &a[static_cast<size_t>(j) * n];
    const double pivot = row_j[j] - Dot(row_j, row_j, j);
    if (!(pivot > 0.0) || !std::isfinite(pivot)) return false;
    const double l_jj = std::sqrt(pivot);
    row_j[j] = l_jj;
    for (int i = j + 1; i < n; ++i) {
      double* row_i = &a[static_cast<size_t>(i) * n];
      row_i[j] = (row_i[j] - Dot(row_i, row_j, j)) / l_jj;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) a[static_cast<size_t>(i) * n + j] = 0.0;
  }
  return true;
}

void SolveLower(const std::vector<double>& l, int n, std::vector<double>& b) {
  TUNE_CHECK(b.size() == static_cast<size_t>(n)) << "rhs of " << b.size() << " for n=" << n;
  for (int i = 0; i < n; ++i) {
    const double* row = &l[static_cast<size_t>(i) * n];
    b[i] = (b[i] - Dot(row, b.data(), i)) / row[i];
  }
}

void SolveLowerTransposed(const std::vector<double>& l, int n, std::vector<double>& b) {
  TUNE_CHECK(b.size() == static_cast<size_t>(n)) << "rhs of " << b.size() << " for n=" << n;
  for (int i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int k = i + 1; k < n; ++k) s -= l[static_cast<size_t>(k) * n + i] * b[k];
    b[i] = s / l[static_cast<size_t>(i) * n + i];
  }
}

double Matern52(double r, double length_scale, double variance) {
  const double s = kSqrt5 * r / length_scale;
  return variance * (1.0 + s + s * s / 3.0) * std::exp(-s);
}

GaussianProcess::GaussianProcess(GaussianProcessOptions options)
    : options_(std::move(options)),
      length_scale_(options_.length_scale),
      noise_ratio_(options_.noise_ratio),
      signal_variance_(options_.signal_variance) {
  TUNE_CHECK(options_.length_scale > 0 && options_.noise_ratio >= 0 &&
             options_.signal_variance > 0)
      << "GaussianProcess needs a positive length scale and variance";
  if (options_.fit_hyperparameters) {
    TUNE_CHECK(!options_.length_scale_grid.empty() && !options_.noise_ratio_grid.empty())
        << "hyperparameter grids must not be empty";
  }
}

double GaussianProcess::ScaledDistance(const double* a, const double* b) const {
  double s = 0.0;
  for (int k = 0; k < dim_; ++k) {
    const double d = a[k] - b[k];
    s += d * d * inv_length2_[k];
  }
  return std::sqrt(s);
}

double GaussianProcess::Kernel(const double* a, const double* b) const {
  return Matern52(ScaledDistance(a, b), 1.0, signal_variance_);
}

void GaussianProcess::Fit(const std::vector<std::vector<double>>& x,
                          const std::vector<double>& y) {
  TUNE_CHECK(x.size() == y.size()) << x.size() << " points, " << y.size() << " targets";
  n_ = x.size();
  dim_ = n_ == 0 ? 0 : static_cast<int>(x[0].size());
  x_.assign(n_ * dim_, 0.0);
  for (size_t i = 0; i < n_; ++i) {
    TUNE_CHECK(static_cast<int>(x[i].size()) == dim_) << "point " << i << " has dimension "
                                                      << x[i].size() << ", not " << dim_;
    std::copy(x[i].begin(), x[i].end(), x_.begin() + i * dim_);
  }
  chol_.clear();
  alpha_.clear();
  log_marginal_likelihood_ = 0.0;
  length_scale_ = options_.length_scale;
  length_scales_.assign(dim_, length_scale_);
  inv_length2_.assign(dim_, 1.0 / (length_scale_ * length_scale_));
  noise_ratio_ = options_.noise_ratio;
  signal_variance_ = options_.signal_variance;
  y_mean_ = 0.0;
  y_scale_ = 1.0;
  if (n_ == 0) return;

  for (double v : y) TUNE_CHECK(std::isfinite(v)) << "GP targets must be finite";
  double sum = 0.0;
  for (double v : y) sum += v;
  y_mean_ = sum / n_;
  double sq = 0.0;
  for (double v : y) sq += (v - y_mean_) * (v - y_mean_);
  const double sd = std::sqrt(sq / n_);
  y_scale_ = sd > 1e-12 * std::max(1.0, std::abs(y_mean_)) ? sd : 1.0;
  std::vector<double> ys(n_);
  for (size_t i = 0; i < n_; ++i) ys[i] = (y[i] - y_mean_) / y_scale_;

  // Dimension groups (ARD shares one length scale per group).
  std::vector<int> group(dim_);
  int groups = dim_;
  if (!options_.dimension_groups.empty()) {
    TUNE_CHECK(static_cast<int>(options_.dimension_groups.size()) == dim_)
        << options_.dimension_groups.size() << " dimension groups for dimension " << dim_;
    groups = 0;
    for (int k = 0; k < dim_; ++k) {
      group[k] = options_.dimension_groups[k];
      TUNE_CHECK(group[k] >= 0 && group[k] < dim_) << "dimension group " << group[k];
      groups = std::max(groups, group[k] + 1);
    }
  } else {
    std::iota(group.begin(), group.end(), 0);
  }

  const int n = static_cast<int>(n_);
  const size_t nn = n_ * n_;
  // Squared differences per group (lower triangle), and their sum (isotropic squared distance).
  std::vector<double> group_sq(static_cast<size_t>(groups) * nn, 0.0);
  std::vector<double> dist2(nn, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      const double* a = &x_[i * dim_];
      const double* b = &x_[j * dim_];
      for (int k = 0; k < dim_; ++k) {
        const double d = a[k] - b[k];
        group_sq[group[k] * nn + i * n_ + j] += d * d;
        dist2[i * n_ + j] += d * d;
      }
    }
  }

  // Log marginal likelihood of the standardized targets for a scaled squared-distance matrix
  // `r2` (lower triangle, length scale 1) and noise ratio `eta`; leaves the factor in `work`.
  std::vector<double> work;
  std::vector<double> u;
  auto evaluate = [&](const std::vector<double>& r2, double eta, double* s2_out) {
    work.assign(nn, 0.0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < i; ++j) work[i * n_ + j] = Matern52(std::sqrt(r2[i * n_ + j]), 1.0, 1.0);
      work[i * n_ + i] = 1.0 + eta;
    }
    if (!CholeskyFactor(work, n)) return -std::numeric_limits<double>::infinity();
    u = ys;
    SolveLower(work, n, u);
    const double quad = Dot(u.data(), u.data(), n_);
    double log_det = 0.0;
    for (int i = 0; i < n; ++i) log_det += 2.0 * std::log(work[i * n_ + i]);
    double s2 = options_.signal_variance;
    if (options_.fit_hyperparameters) {
      s2 = std::clamp(quad / n_, kMinSignalVariance, kMaxSignalVariance);
    }
    *s2_out = s2;
    // log N(ys | 0, s2 R) with R = corr + eta I = work work^T.
    return -0.5 * quad / s2 - 0.5 * n_ * std::log(s2) - 0.5 * log_det - 0.5 * n_ * kLog2Pi;
  };

  std::vector<double> length_scales = options_.length_scale_grid;
  std::vector<double> noise_ratios = options_.noise_ratio_grid;
  if (!options_.fit_hyperparameters) {
    length_scales = {options_.length_scale};
    noise_ratios = {options_.noise_ratio};
  }
  // Tries every grid point; if none factorizes (only possible with a tiny nugget and
  // near-duplicate points), retries with ten times the noise, a few times.
  double best_lml = -std::numeric_limits<double>::infinity();
  bool found = false;
  std::vector<double> r2(nn);
  for (int attempt = 0; attempt < 8 && !found; ++attempt) {
    for (double ls : length_scales) {
      TUNE_CHECK(ls > 0) << "length scale " << ls;
      const double inv2 = 1.0 / (ls * ls);
      for (size_t e = 0; e < nn; ++e) r2[e] = dist2[e] * inv2;
      for (double eta0 : noise_ratios) {
        const double eta = std::max(eta0, 1e-10) * std::pow(10.0, attempt);
        double s2 = 0.0;
        const double lml = evaluate(r2, eta, &s2);
        if (!std::isfinite(lml)) continue;
        if (!found || lml > best_lml) {
          found = true;
          best_lml = lml;
          length_scale_ = ls;
          noise_ratio_ = eta;
          signal_variance_ = s2;
          chol_ = work;
        }
      }
    }
  }
  TUNE_CHECK(found) << "GP covariance is not positive definite even with a large nugget";
  std::vector<double> group_scale(groups, length_scale_);

  if (options_.fit_hyperparameters && options_.ard && n_ >= 2) {
    constexpr int kArdStepsPerGroup = 4;
    const double inv2 = 1.0 / (length_scale_ * length_scale_);
    for (size_t e = 0; e < nn; ++e) r2[e] = dist2[e] * inv2;
    std::vector<double> trial(nn);
    // Tries moving coordinate `g` (a group, or the noise ratio when g == groups) by `factor`
    // repeatedly while the likelihood improves; returns whether it moved.
    auto climb = [&](int g, double factor) {
      bool moved = false;
      for (int step = 0; step < kArdStepsPerGroup; ++step) {
        double s2 = 0.0;
        double lml;
        if (g == groups) {
          const double eta = noise_ratio_ * factor;
          if (eta < 1e-8 || eta > 1.0) break;
          lml = evaluate(r2, eta, &s2);
          if (!(lml > best_lml + 1e-9)) break;
          noise_ratio_ = eta;
        } else {
          const double ls = group_scale[g] * factor;
          if (ls < options_.min_length_scale || ls > options_.max_length_scale) break;
          const double delta = 1.0 / (ls * ls) - 1.0 / (group_scale[g] * group_scale[g]);
          const double* gs = &group_sq[g * nn];
          for (size_t e = 0; e < nn; ++e) trial[e] = std::max(r2[e] + gs[e] * delta, 0.0);
          lml = evaluate(trial, noise_ratio_, &s2);
          if (!(lml > best_lml + 1e-9)) break;
          group_scale[g] = ls;
          r2.swap(trial);
        }
        best_lml = lml;
        signal_variance_ = s2;
        chol_ = work;
        moved = true;
      }
      return moved;
    };
    for (int sweep = 0; sweep < std::max(options_.ard_sweeps, 1); ++sweep) {
      bool changed = false;
      for (int g = 0; g <= groups; ++g) {
        const double factor = g == groups ? 10.0 : 2.0;
        if (climb(g, factor)) {
          changed = true;
        } else if (climb(g, 1.0 / factor)) {
          changed = true;
        }
      }
      if (!changed) break;
    }
  }
  for (int k = 0; k < dim_; ++k) {
    length_scales_[k] = group_scale[group[k]];
    inv_length2_[k] = 1.0 / (length_scales_[k] * length_scales_[k]);
  }
  log_marginal_likelihood_ = best_lml;
  // chol_ factors R; K + noise = s2 R, so its factor is sqrt(s2) chol_.
  const double root = std::sqrt(signal_variance_);
  for (double& v : chol_) v *= root;
  alpha_ = ys;
  SolveLower(chol_, n, alpha_);
  SolveLowerTransposed(chol_, n, alpha_);
}

void GaussianProcess::Predict(const std::vector<double>& point, double* mean,
                              double* variance) const {
  Posterior p = PredictAll({point});
  if (mean != nullptr) *mean = p.mean()[0];
  if (variance != nullptr) *variance = p.variance()[0];
}

GaussianProcess::Posterior GaussianProcess::PredictAll(
    const std::vector<std::vector<double>>& points) const {
  Posterior p;
  p.gp_ = this;
  const size_t m = points.size();
  p.dim_ = n_ == 0 ? (m == 0 ? 0 : static_cast<int>(points[0].size())) : dim_;
  p.points_.resize(m * p.dim_);
  for (size_t c = 0; c < m; ++c) {
    TUNE_CHECK(static_cast<int>(points[c].size()) == p.dim_)
        << "point of dimension " << points[c].size() << ", model has " << p.dim_;
    std::copy(points[c].begin(), points[c].end(), p.points_.begin() + c * p.dim_);
  }
  // Rows of k(X, points), then forward substitution row by row: row i -= L[i][j] row j.
  std::vector<std::vector<double>>& v = p.whitened_;
  v.assign(n_, std::vector<double>(m));
  std::vector<double> mean_std(m, 0.0);
  for (size_t i = 0; i < n_; ++i) {
    double* row = v[i].data();
    const double* xi = &x_[i * dim_];
    for (size_t c = 0; c < m; ++c) row[c] = Kernel(xi, &p.points_[c * dim_]);
    const double a = alpha_[i];
    for (size_t c = 0; c < m; ++c) mean_std[c] += a * row[c];
  }
  for (size_t i = 0; i < n_; ++i) {
    double* row = v[i].data();
    const double* l = &chol_[i * n_];
    for (size_t j = 0; j < i; ++j) {
      const double lij = l[j];
      const double* prev = v[j].data();
      for (size_t c = 0; c < m; ++c) row[c] -= lij * prev[c];
    }
    const double inv = 1.0 / l[i];
    for (size_t c = 0; c < m; ++c) row[c] *= inv;
  }
  std::vector<double> norm2(m, 0.0);
  for (size_t i = 0; i < n_; ++i) {
    const double* row = v[i].data();
    for (size_t c = 0; c < m; ++c) norm2[c] += row[c] * row[c];
  }
  const double scale2 = y_scale_ * y_scale_;
  p.mean_.resize(m);
  p.variance_.resize(m);
  for (size_t c = 0; c < m; ++c) {
    p.mean_[c] = y_mean_ + y_scale_ * mean_std[c];
    p.variance_[c] = scale2 * std::max(signal_variance_ - norm2[c], 0.0);
  }
  return p;
}

void GaussianProcess::Posterior::Believe(size_t i) {
  const size_t m = mean_.size();
  TUNE_CHECK(i < m) << "believe point " << i << " of " << m;
  const GaussianProcess& gp = *gp_;
  const double scale2 = gp.y_scale_ * gp.y_scale_;
  // The Cholesky factor gains the row [v_i^T, d] with d^2 = k(x_i, x_i) + noise - |v_i|^2 =
  // posterior variance + noise; each point's whitened vector gains
  // w_c = (k(x_c, x_i) - v_c . v_i) / d, and its variance drops by w_c^2.
  const double noise = gp.noise_ratio_ * gp.signal_variance_;
  const double d = std::sqrt(std::max(variance_[i] / scale2, 0.0) + std::max(noise, 1e-12));
  const double* xi = &points_[i * dim_];
  std::vector<double> w(m);
  for (size_t c = 0; c < m; ++c) {
    const double* pc = &points_[c * dim_];
    double r = 0.0;
    if (gp.dim_ == dim_) {
      r = gp.ScaledDistance(pc, xi);
    } else {  // an empty model: isotropic with the prior's length scale
      for (int k = 0; k < dim_; ++k) r += (pc[k] - xi[k]) * (pc[k] - xi[k]);
      r = std::sqrt(r) / gp.length_scale_;
    }
    w[c] = Matern52(r, 1.0, gp.signal_variance_);
  }
  for (const std::vector<double>& row : whitened_) {
    const double vi = row[i];
    for (size_t c = 0; c < m; ++c) w[c] -= vi * row[c];
  }
  const double inv = 1.0 / d;
  for (size_t c = 0; c < m; ++c) {
    w[c] *= inv;
    variance_[c] = std::max(variance_[c] - scale2 * w[c] * w[c], 0.0);
  }
  whitened_.push_back(std::move(w));
}

}  // namespace tune::search
