// search::CostModel implementations over XgbModel: loop-AST features, knob features, a factory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "costmodel/xgb_model.h"
#include "search/cost_model.h"
#include "search/space.h"

namespace tune::costmodel {

struct CostModelOptions {
  XgbOptions xgb;
  /// AstCostModel keeps the features of at most this many configs (about 0.7 KB each); the
  /// cache is emptied when it is full.
  size_t max_cached_features = 100000;
};

/// Predict's score for a config the space rejects (it has no kernel): below any model score,
/// finite so that strategies can do arithmetic with it.
inline constexpr double kInvalidConfigScore = -1e9;

/// A CostModel that turns each config into a fixed-length feature row and scores rows with an
/// XgbModel. Subclasses say how a config is featurized. Rows of other tasks can be added as
/// prior data; each Fit trains on them (each prior group its own ranking group) plus the
/// task's own measurements (one group). Not thread-safe.
class FeatureCostModel : public search::CostModel {
 public:
  FeatureCostModel(FeatureSchema schema, CostModelOptions options);

  bool trained() const override { return model_.trained(); }
  /// Rows of configs that cannot be featurized (invalid in the space) are skipped; the rest
  /// train the model together with the prior data. InvalidArgument on a size mismatch or
  /// when there is no row at all; the previous model stays in use on any error.
  absl::Status Fit(const std::vector<search::Config>& configs, const std::vector<double>& costs) override;
  /// Mean ensemble score per config (kInvalidConfigScore for invalid configs, 0 for all
  /// before training); `variance` gets the ensemble variance (0 for invalid configs).
  std::vector<double> Predict(const std::vector<search::Config>& configs,
                              std::vector<double>* variance = nullptr) override;
  /// The XgbModel artifact; it records the feature schema, so Load refuses a model of
  /// another feature set, feature version or space. Prior data is not part of it.
  absl::StatusOr<std::string> Save() const override;
  absl::Status Load(const std::string& artifact) override;

  /// Adds rows measured on another task (or device) for warm-starting: `features[i]` (of
  /// schema().length floats; a wrong length aborts) measured `costs[i]` seconds (+inf for
  /// failures). All rows of one call form ranking group `group`; calls with the same group
  /// extend it. Used by every later Fit.
  void AddPriorData(std::vector<std::vector<float>> features, std::vector<double> costs, int group);
  size_t num_prior_rows() const { return prior_costs_.size(); }
  void ClearPriorData();

  const FeatureSchema& schema() const { return model_.schema(); }
  const XgbModel& model() const { return model_; }

  /// Writes the feature row of `config` to `out` (schema().length floats); false when the
  /// config has none (invalid in the space).
  virtual bool Featurize(const search::Config& config, std::vector<float>* out) = 0;

 protected:
  CostModelOptions options_;

 private:
  XgbModel model_;
  std::vector<float> prior_rows_;
  std::vector<double> prior_costs_;
  std::vector<int64_t> prior_groups_;
};

/// Features from the scheduled loop AST (costmodel/features.h): each config is lowered with
/// Template::Lower and passed to ExtractFeatures; rows are cached per config. Models trained
/// on one task's rows apply to any other task's. `tmpl` is not owned and must outlive this.
class AstCostModel : public FeatureCostModel {
 public:
  AstCostModel(const codegen::Template* tmpl, CostModelOptions options = {});
  bool Featurize(const search::Config& config, std::vector<float>* out) override;
  const codegen::Template& tmpl() const { return *tmpl_; }
  size_t num_cached() const { return cache_.size(); }

  /// Where rows come from instead of lowering here: fills `out` with the config's
  /// ExtractFeatures row of this template, or returns false when the config does not lower.
  /// A PretrainedCostModel whose online model this is sets it, so a config is lowered once for
  /// both models. Rows from a source are not cached here (the source keeps them).
  using RowSource = std::function<bool(const search::Config&, std::vector<float>*)>;
  void SetRowSource(RowSource source) { source_ = std::move(source); }

  /// The schema of AST feature rows ("ast", kFeatureVersion, kNumFeatures).
  static FeatureSchema Schema();

 private:
  const codegen::Template* tmpl_;
  RowSource source_;
  // Config -> feature row; an empty row marks a config that failed to lower.
  std::unordered_map<search::Config, std::vector<float>, search::ConfigHash> cache_;
};

/// Features from the knob values alone, for spaces without a template (replay of recorded
/// spaces): per knob, in knob order, the option's index normalized to [0, 1] (0 for a knob of
/// one option) followed by sign(v) * log2(1 + |v|) of each of the option's values (padded
/// with 0 to the knob's longest option). Rows do not transfer between spaces. `space` is not
/// owned and must outlive this.
class KnobCostModel : public FeatureCostModel {
 public:
  KnobCostModel(const search::ConfigSpace* space, CostModelOptions options = {});
  bool Featurize(const search::Config& config, std::vector<float>* out) override;

  /// The schema of `space`'s knob rows ("knob", version 1, its length, a hash of the knob
  /// names and options as the signature).
  static FeatureSchema Schema(const search::ConfigSpace& space);

 private:
  const search::ConfigSpace* space_;
  std::vector<size_t> widths_;  // values per option, per knob
};

/// What a cost model scores: a template (whose loop ASTs can be featurized) or, for spaces
/// without kernels, just a space. Neither is owned.
struct CostModelSubject {
  const codegen::Template* tmpl = nullptr;
  const search::ConfigSpace* space = nullptr;  // defaults to &tmpl->space()
};

/// The cost models by name, as the CLI's --cost-model and `tune train --model` spell them:
///  "xgb"          XGBoost, rank:pairwise; AST features when the subject has a template,
///                 knob features otherwise;
///  "xgb-reg"      the same with reg:squarederror on normalized throughput;
///  "xgb-knob", "xgb-knob-reg"  knob features even when a template is given.
/// `options.xgb.objective` is set from the name. "gnn" and "lstm" are reserved (Unimplemented
/// in this build); other names and subjects without a space are InvalidArgument.
absl::StatusOr<std::unique_ptr<search::CostModel>> CreateCostModel(const std::string& name,
                                                                   const CostModelSubject& subject,
                                                                   CostModelOptions options = {});
/// The same, as the FeatureCostModel it is (for callers that add prior rows or featurize).
absl::StatusOr<std::unique_ptr<FeatureCostModel>> CreateFeatureCostModel(const std::string& name,
                                                                          const CostModelSubject& subject,
                                                                          CostModelOptions options = {});
/// The names CreateCostModel accepts in this build.
std::vector<std::string> CostModelNames();

}  // namespace tune::costmodel
