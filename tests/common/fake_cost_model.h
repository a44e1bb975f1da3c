// Fake search::CostModel implementations for strategy tests: a fixed scoring function and a
// nearest-neighbour model that learns only from what it is fitted on.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "search/space.h"

namespace tune::test {

/// A model trained from the start whose score (higher = faster) is a fixed function of the
/// config; Fit is accepted and ignored. Counts Predict calls; variances are 0. Save and Load
/// are unimplemented.
class FunctionCostModel : public search::CostModel {
 public:
  explicit FunctionCostModel(std::function<double(const search::Config&)> score)
      : score_(std::move(score)) {}

  bool trained() const override { return true; }
  absl::Status Fit(const std::vector<search::Config>&, const std::vector<double>&) override {
    return absl::OkStatus();
  }
  std::vector<double> Predict(const std::vector<search::Config>& configs,
                              std::vector<double>* variance) override {
    ++calls_;
    std::vector<double> out;
    out.reserve(configs.size());
    for (const search::Config& c : configs) out.push_back(score_(c));
    if (variance != nullptr) variance->assign(configs.size(), 0.0);
    return out;
  }
  absl::StatusOr<std::string> Save() const override { return absl::UnimplementedError("test"); }
  absl::Status Load(const std::string&) override { return absl::UnimplementedError("test"); }

  /// Predict calls so far.
  int calls() const { return calls_; }

 private:
  std::function<double(const search::Config&)> score_;
  int calls_ = 0;
};

/// A model that knows nothing of the objective: the inverse-distance-weighted mean of
/// -log(cost) over the 3 nearest fitted configs (squared Euclidean distance in knob indices;
/// a fitted config scores its own value). Failures (+inf cost) count as one below the worst
/// success. Trained once fitted on at least one config; each Fit replaces the data.
class NearestNeighbourModel : public search::CostModel {
 public:
  bool trained() const override { return !values_.empty(); }
  absl::Status Fit(const std::vector<search::Config>& configs,
                   const std::vector<double>& costs) override {
    dims_ = configs.empty() ? 0 : configs[0].size();
    flat_.clear();
    for (const search::Config& c : configs) flat_.insert(flat_.end(), c.begin(), c.end());
    values_.assign(costs.size(), 0);
    double worst = INFINITY;
    for (size_t i = 0; i < costs.size(); ++i) {
      if (!std::isfinite(costs[i])) continue;
      values_[i] = -std::log(costs[i]);
      worst = std::min(worst, values_[i]);
    }
    for (size_t i = 0; i < costs.size(); ++i) {
      if (!std::isfinite(costs[i])) values_[i] = std::isfinite(worst) ? worst - 1 : 0;
    }
    return absl::OkStatus();
  }
  std::vector<double> Predict(const std::vector<search::Config>& configs,
                              std::vector<double>* variance) override {
    std::vector<double> out;
    out.reserve(configs.size());
    for (const search::Config& q : configs) {
      // The 3 nearest points by squared distance, kept sorted (ties: earlier point first).
      int best_d[3] = {INT32_MAX, INT32_MAX, INT32_MAX};
      size_t best_i[3] = {0, 0, 0};
      for (size_t i = 0; i < values_.size(); ++i) {
        const int32_t* point = &flat_[i * dims_];
        int d = 0;
        for (size_t k = 0; k < dims_; ++k) d += (q[k] - point[k]) * (q[k] - point[k]);
        if (d >= best_d[2]) continue;
        int j = 2;
        for (; j > 0 && d < best_d[j - 1]; --j) {
          best_d[j] = best_d[j - 1];
          best_i[j] = best_i[j - 1];
        }
        best_d[j] = d;
        best_i[j] = i;
      }
      double num = 0, den = 0;
      for (int j = 0; j < 3 && best_d[j] != INT32_MAX; ++j) {
        if (best_d[j] == 0) {  // a fitted config: its own value
          num = values_[best_i[j]];
          den = 1;
          break;
        }
        num += values_[best_i[j]] / best_d[j];
        den += 1.0 / best_d[j];
      }
      out.push_back(den > 0 ? num / den : 0);
    }
    if (variance != nullptr) variance->assign(configs.size(), 0);
    return out;
  }
  absl::StatusOr<std::string> Save() const override { return absl::UnimplementedError("test"); }
  absl::Status Load(const std::string&) override { return absl::UnimplementedError("test"); }

 private:
  size_t dims_ = 0;
  std::vector<int32_t> flat_;  // the configs, one after another
  std::vector<double> values_;
};

}  // namespace tune::test
