// A stand-in offline model for the pretrained-tuning tests: XGBoost on AST features.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/cost_model_adapters.h"
#include "costmodel/offline_model.h"
#include "costmodel/xgb_model.h"

namespace tune::costmodel::test {

/// An OfflineModel of kind "test-teacher": XGBoost on the AST features of its training groups
/// (in practice another GEMM shape's configs with analytic latencies). `sign` -1 inverts every
/// score (a model that ranks backwards); `noise_only` scores by a hash of the features instead
/// (a model that knows nothing).
class TeacherModel : public OfflineModel {
 public:
  explicit TeacherModel(double sign, bool noise_only = false)
      : sign_(sign), noise_only_(noise_only), xgb_(AstCostModel::Schema(), {}) {}
  std::string kind() const override { return "test-teacher"; }
  InputNeeds needs() const override { return {.ast = true, .graph = false}; }
  bool trained() const override { return xgb_.trained(); }
  absl::Status Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>&, const TrainOptions&) override {
    std::vector<float> rows;
    std::vector<double> costs;
    std::vector<int64_t> groups;
    for (size_t g = 0; g < train.size(); ++g) {
      for (size_t i = 0; i < train[g].inputs.size(); ++i) {
        rows.insert(rows.end(), train[g].inputs[i].ast.begin(), train[g].inputs[i].ast.end());
        costs.push_back(train[g].latencies_s[i]);
        groups.push_back(static_cast<int64_t>(g));
      }
    }
    return xgb_.Fit(rows, costs, groups);
  }
  std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const override {
    std::vector<double> out(inputs.size(), 0.0);
    if (noise_only_) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        uint64_t h = 1469598103934665603ull;
        for (float f : inputs[i]->ast) h = (h ^ std::hash<float>()(f)) * 1099511628211ull;
        out[i] = static_cast<double>(h % 100003);
      }
      return out;
    }
    std::vector<float> rows;
    for (const ModelInput* in : inputs) rows.insert(rows.end(), in->ast.begin(), in->ast.end());
    auto p = xgb_.Predict(rows.data(), inputs.size());
    if (!p.ok()) return out;
    for (size_t i = 0; i < out.size(); ++i) out[i] = sign_ * (*p)[i];
    return out;
  }
  absl::StatusOr<std::string> SavePayload() const override { return xgb_.Save(); }
  absl::Status LoadPayload(const std::string& payload) override { return xgb_.Load(payload); }

 private:
  double sign_;
  bool noise_only_;
  XgbModel xgb_;
};

}  // namespace tune::costmodel::test
