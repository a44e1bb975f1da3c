// A measure::Task that compiles nothing: configs of a toy space cost a fixed function of their
// knobs, so tests of the tuning loop's bookkeeping run in microseconds.
#pragma once

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "measure/measure_result.h"
#include "measure/task.h"
#include "search/space.h"
#include "tests/common/toy_space.h"

namespace tune::test {

/// A tuning task over ConstrainedSpace() (27 valid configs). Measuring is a look-up: a config
/// whose `cost` is finite is ok with that many seconds as its one sample; +inf makes it a
/// runtime error. The default schedule is the slowest valid config under LinearCost (the last
/// in index order), or none. Logs "measure <configs>" and "commit" into `log` (not owned; may
/// be null) and calls `on_commit`, when set, from Committed. Not thread-safe.
class FakeTask : public measure::Task {
 public:
  using CostFn = std::function<double(const search::Config&)>;

  explicit FakeTask(std::vector<std::string>* log = nullptr, CostFn cost = LinearCost, bool has_default = true)
      : space_(ConstrainedSpace()), cost_(std::move(cost)), log_(log) {
    keys_.workload_key = "fake/constrained";
    keys_.op = "fake";
    keys_.shape_json = "{}";
    keys_.flops = 1e6;
    if (has_default) default_ = *AllValid(space_).rbegin();
  }

  const measure::TaskKeys& keys() const override { return keys_; }
  const search::ConfigSpace& space() const override { return space_; }
  std::optional<search::Config> DefaultConfig() const override { return default_; }
  const codegen::Template* tmpl() const override { return nullptr; }
  std::vector<measure::MeasureResult> Measure(const std::vector<search::Config>& configs,
                                              const measure::MeasureProtocol& protocol) override {
    if (log_ != nullptr) log_->push_back("measure " + std::to_string(configs.size()));
    std::vector<measure::MeasureResult> out;
    for (const search::Config& c : configs) {
      measured_.push_back(c);
      protocols_.push_back(protocol);
      measure::MeasureResult r;
      const double cost = cost_(c);
      if (std::isfinite(cost)) {
        r.status = measure::MeasureStatus::kOk;
        r.costs_s = {cost};
        r.number = 1;
      } else {
        r.status = measure::MeasureStatus::kRuntimeError;
        r.message = "fake failure";
      }
      out.push_back(std::move(r));
    }
    return out;
  }
  void Committed() override {
    if (log_ != nullptr) log_->push_back("commit");
    if (on_commit) on_commit();
  }

  /// Every config measured so far, in order (the default schedule included).
  const std::vector<search::Config>& measured() const { return measured_; }
  /// The protocol each of them was measured with.
  const std::vector<measure::MeasureProtocol>& protocols() const { return protocols_; }

  std::function<void()> on_commit;

 private:
  search::ConfigSpace space_;
  CostFn cost_;
  std::vector<std::string>* log_;
  measure::TaskKeys keys_;
  std::optional<search::Config> default_;
  std::vector<search::Config> measured_;
  std::vector<measure::MeasureProtocol> protocols_;
};

}  // namespace tune::test
