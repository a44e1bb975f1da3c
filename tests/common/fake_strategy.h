// A scripted search strategy and a recording cost model: fakes that log the order in which a
// tuning loop calls them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::test {

/// Proposes the configs of a fixed script in order, as they are (invalid or repeated ones
/// too), up to `batch` plus `overshoot` per call (overshoot > 0 breaks the contract on
/// purpose). Logs "propose <batch>" and "update <results>" into `log` (not owned; may be null).
class ScriptedStrategy : public search::SearchStrategy {
 public:
  ScriptedStrategy(std::vector<search::Config> script, std::vector<std::string>* log)
      : script_(std::move(script)), log_(log) {}

  std::string name() const override { return "scripted"; }
  std::vector<search::Config> Propose(int batch) override {
    if (log_ != nullptr) log_->push_back("propose " + std::to_string(batch));
    std::vector<search::Config> out;
    while (static_cast<int>(out.size()) < batch + overshoot && next_ < script_.size()) {
      out.push_back(script_[next_++]);
    }
    return out;
  }
  void Update(const std::vector<search::MeasuredConfig>& results) override {
    if (log_ != nullptr) log_->push_back("update " + std::to_string(results.size()));
    updates_.insert(updates_.end(), results.begin(), results.end());
  }
  /// The cost model the loop gave it (SetCostModel), or null.
  search::CostModel* model() const { return cost_model_; }
  /// Every result reported so far, in order.
  const std::vector<search::MeasuredConfig>& updates() const { return updates_; }

  int overshoot = 0;

 private:
  std::vector<search::Config> script_;
  size_t next_ = 0;
  std::vector<search::MeasuredConfig> updates_;
  std::vector<std::string>* log_;
};

/// A cost model that learns nothing: logs "fit <configs>" into `log` (not owned; may be null),
/// keeps the costs of the last Fit, and scores every config 0. With `fail_fits` every Fit
/// returns Internal (and does not count as trained).
class RecordingModel : public search::CostModel {
 public:
  explicit RecordingModel(std::vector<std::string>* log, bool fail_fits = false)
      : log_(log), fail_fits_(fail_fits) {}

  bool trained() const override { return fits_ > 0; }
  absl::Status Fit(const std::vector<search::Config>& configs, const std::vector<double>& costs) override {
    EXPECT_EQ(configs.size(), costs.size());
    if (log_ != nullptr) log_->push_back("fit " + std::to_string(configs.size()));
    last_costs_ = costs;
    if (fail_fits_) return absl::InternalError("fit refused by the test");
    ++fits_;
    return absl::OkStatus();
  }
  std::vector<double> Predict(const std::vector<search::Config>& configs, std::vector<double>* variance) override {
    if (variance != nullptr) variance->assign(configs.size(), 0.0);
    return std::vector<double>(configs.size(), 0.0);
  }
  absl::StatusOr<std::string> Save() const override { return std::string(); }
  absl::Status Load(const std::string&) override { return absl::OkStatus(); }

  /// The costs of the last Fit call (seconds, +inf for failures).
  const std::vector<double>& last_costs() const { return last_costs_; }

 private:
  std::vector<std::string>* log_;
  bool fail_fits_ = false;
  int fits_ = 0;
  std::vector<double> last_costs_;
};

}  // namespace tune::test
