// XgbModel: a bootstrap ensemble of XGBoost boosters (C API) scoring feature rows by speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tune::costmodel {

/// Training knobs. Defaults follow TVM's XGBoost cost model, scaled for fitting after every
/// measured batch in well under a second.
struct XgbOptions {
  /// "rank:pairwise" (learn the order within each group) or "reg:squarederror" (regress the
  /// normalized throughput, see XgbModel::Fit).
  std::string objective = "rank:pairwise";
  int num_rounds = 80;        // boosting rounds per booster
  int max_depth = 8;
  double eta = 0.2;           // learning rate
  double min_child_weight = 1;
  double lambda = 1;          // L2 regularization of leaf weights
  double gamma = 0;           // minimum loss reduction of a split
  double colsample_bytree = 1;
  std::string tree_method = "hist";
  /// Boosters in the ensemble. 1: one booster on all rows, zero variance. n > 1: n boosters,
  /// each on a bootstrap resample of the rows (drawn within each group), predicting their mean
  /// with the variance of their predictions as the uncertainty.
  int ensemble_size = 3;
  uint64_t seed = 0;  // bootstrap draws and XGBoost's own seed; same seed, same model
  int nthread = 1;    // XGBoost threads; fixed so that results are reproducible
};

/// What the feature columns are: saved with a model so that it is never applied to rows of
/// another extractor. `signature` distinguishes same-length feature sets (e.g. a hash of knob
/// names); 0 when the name and version say everything.
struct FeatureSchema {
  std::string name;  // e.g. "ast", "knob"
  int version = 0;
  int length = 0;    // floats per row
  uint64_t signature = 0;

  bool operator==(const FeatureSchema&) const = default;
};

/// Scores feature rows (higher = expected faster) with XGBoost. Not thread-safe; moving is
/// fine, copying is not. Rows are row-major float arrays of schema().length values.
class XgbModel {
 public:
  XgbModel(FeatureSchema schema, XgbOptions options);
  ~XgbModel();
  XgbModel(XgbModel&&) noexcept;
  XgbModel& operator=(XgbModel&&) noexcept;
  XgbModel(const XgbModel&) = delete;
  XgbModel& operator=(const XgbModel&) = delete;

  const FeatureSchema& schema() const { return schema_; }
  const XgbOptions& options() const { return options_; }
  /// True once Fit (or Load of a trained artifact) has succeeded.
  bool trained() const { return !boosters_.empty(); }

  /// Replaces the model by one trained on `rows` (costs.size() rows). `costs` are seconds;
  /// +inf, NaN or non-positive costs are failures and get the worst label. Rows with equal
  /// `groups` form one ranking group (one task); labels are normalized throughput within the
  /// group, best cost / cost in (0, 1], failures 0. InvalidArgument on size mismatches or no
  /// rows; Internal when XGBoost fails (the previous model is kept then).
  absl::Status Fit(const std::vector<float>& rows, const std::vector<double>& costs,
                   const std::vector<int64_t>& groups);

  /// One score per row of `rows` (n rows), and when `variance` is not null the variance of
  /// the ensemble members' scores per row. Zeros before training. Internal when XGBoost fails.
  absl::StatusOr<std::vector<double>> Predict(const float* rows, size_t n,
                                              std::vector<double>* variance = nullptr) const;

  /// A versioned artifact: magic "TUNEXGB1", artifact version, objective, feature schema,
  /// options, then each booster as XGBoost JSON. An untrained model saves as zero boosters.
  absl::StatusOr<std::string> Save() const;
  /// Restores a Save() artifact: objective, options (except nthread, which stays this
  /// model's) and boosters. InvalidArgument when the bytes are not such an artifact, have
  /// another artifact version, or another feature schema; the model is unchanged then.
  absl::Status Load(const std::string& artifact);

 private:
  struct Booster;
  FeatureSchema schema_;
  XgbOptions options_;
  std::vector<std::unique_ptr<Booster>> boosters_;
};

/// The artifact format version written by XgbModel::Save.
inline constexpr uint32_t kXgbArtifactVersion = 1;

}  // namespace tune::costmodel
