// FeasibilityModel implementation: GP regression on +-1 labels through a probit link.
#include "search/bo_feasibility.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"

namespace tune::search {

FeasibilityModel::FeasibilityModel(FeasibilityModelOptions options)
    : options_(std::move(options)), gp_(options_.gp) {
  TUNE_CHECK(options_.link_scale > 0) << "FeasibilityModel needs a positive link scale";
}

void FeasibilityModel::Fit(const std::vector<std::vector<double>>& x, const std::vector<bool>& ok) {
  TUNE_CHECK(x.size() == ok.size()) << x.size() << " points, " << ok.size() << " labels";
  const size_t n = x.size();
  size_t successes = 0;
  for (bool b : ok) successes += b ? 1 : 0;
  prior_ = (successes + 1.0) / (n + 2.0);
  has_failures_ = successes < n && successes > 0;
  if (!has_failures_) {
    gp_.Fit({}, {});
    return;
  }
  std::vector<double> labels(n);
  for (size_t i = 0; i < n; ++i) labels[i] = ok[i] ? 1.0 : -1.0;
  gp_.Fit(x, labels);
}

std::vector<double> FeasibilityModel::PredictAll(const std::vector<std::vector<double>>& points) const {
  std::vector<double> out(points.size(), has_failures_ ? 0.0 : prior_);
  if (!has_failures_ || points.empty()) return out;
  const GaussianProcess::Posterior p = gp_.PredictAll(points);
  const double s2 = options_.link_scale * options_.link_scale;
  for (size_t i = 0; i < points.size(); ++i) {
    const double z = p.mean()[i] / std::sqrt(s2 + p.variance()[i]);
    out[i] = std::clamp(0.5 * std::erfc(-z / std::sqrt(2.0)), 1e-300, 1.0 - 1e-16);
  }
  return out;
}

}  // namespace tune::search
