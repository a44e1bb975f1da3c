// FeatureCostModel (rows + prior data -> XgbModel), the AST and knob featurizers, the factory.
#include "costmodel/cost_model_adapters.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "costmodel/features.h"
#include "base/check.h"
#include "spdlog/spdlog.h"

namespace tune::costmodel {
namespace {

// The task's own rows sort before every prior group.
constexpr int64_t kTaskGroup = std::numeric_limits<int64_t>::min();

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

FeatureCostModel::FeatureCostModel(FeatureSchema schema, CostModelOptions options)
    : options_(options), model_(std::move(schema), options.xgb) {}

absl::Status FeatureCostModel::Fit(const std::vector<search::Config>& configs, const std::vector<double>& costs) {
  if (configs.size() != costs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(configs.size(), " configs but ", costs.size(), " costs"));
  }
  std::vector<float> rows = prior_rows_;
  std::vector<double> all_costs = prior_costs_;
  std::vector<int64_t> groups = prior_groups_;
  std::vector<float> row;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!Featurize(configs[i], &row)) continue;
    rows.insert(rows.end(), row.begin(), row.end());
    all_costs.push_back(costs[i]);
    groups.push_back(kTaskGroup);
  }
  return model_.Fit(rows, all_costs, groups);
}

std::vector<double> FeatureCostModel::Predict(const std::vector<search::Config>& configs,
                                              std::vector<double>* variance) {
  const size_t n = configs.size();
  std::vector<double> scores(n, 0.0);
  if (variance != nullptr) variance->assign(n, 0.0);
  if (!model_.trained() || n == 0) return scores;
  std::vector<float> rows, row;
  rows.reserve(n * static_cast<size_t>(schema().length));
  std::vector<size_t> valid;
  for (size_t i = 0; i < n; ++i) {
    if (!Featurize(configs[i], &row)) {
      scores[i] = kInvalidConfigScore;
      continue;
    }
    rows.insert(rows.end(), row.begin(), row.end());
    valid.push_back(i);
  }
  std::vector<double> var;
  auto predicted = model_.Predict(rows.data(), valid.size(), variance != nullptr ? &var : nullptr);
  if (!predicted.ok()) {
    // Only a broken XGBoost gets here; scoring on is still safer than stopping the search.
    spdlog::error("cost model prediction failed: {}", predicted.status().ToString());
    return std::vector<double>(n, 0.0);
  }
  for (size_t j = 0; j < valid.size(); ++j) {
    scores[valid[j]] = (*predicted)[j];
    if (variance != nullptr) (*variance)[valid[j]] = var[j];
  }
  return scores;
}

absl::StatusOr<std::string> FeatureCostModel::Save() const { return model_.Save(); }

absl::Status FeatureCostModel::Load(const std::string& artifact) { return model_.Load(artifact); }

void FeatureCostModel::AddPriorData(std::vector<std::vector<float>> features, std::vector<double> costs, int group) {
  TUNE_CHECK(features.size() == costs.size()) << features.size() << " rows, " << costs.size() << " costs";
  const size_t length = static_cast<size_t>(schema().length);
  for (size_t i = 0; i < features.size(); ++i) {
    TUNE_CHECK(features[i].size() == length)
        << "prior row of " << features[i].size() << " features, the model's '" << schema().name << "' rows have "
        << length;
    prior_rows_.insert(prior_rows_.end(), features[i].begin(), features[i].end());
    prior_costs_.push_back(costs[i]);
    prior_groups_.push_back(group);
  }
}

void FeatureCostModel::ClearPriorData() {
  prior_rows_.clear();
  prior_costs_.clear();
  prior_groups_.clear();
}

// ---------------------------------------------------------------------------------------------

FeatureSchema AstCostModel::Schema() {
  return FeatureSchema{"ast", kFeatureVersion, static_cast<int>(kNumFeatures), 0};
}

AstCostModel::AstCostModel(const codegen::Template* tmpl, CostModelOptions options)
    : FeatureCostModel(Schema(), options), tmpl_(tmpl) {
  TUNE_CHECK_MSG(tmpl_ != nullptr, "AstCostModel needs a template");
}

bool AstCostModel::Featurize(const search::Config& config, std::vector<float>* out) {
  if (source_) return source_(config, out);
  auto it = cache_.find(config);
  if (it == cache_.end()) {
    if (cache_.size() >= options_.max_cached_features) cache_.clear();
    std::vector<float> row;
    auto func = tmpl_->Lower(config, "k");
    if (func.ok()) row = ExtractFeatures(*func);
    it = cache_.emplace(config, std::move(row)).first;
  }
  if (it->second.empty()) return false;
  *out = it->second;
  return true;
}

// ---------------------------------------------------------------------------------------------

FeatureSchema KnobCostModel::Schema(const search::ConfigSpace& space) {
  uint64_t h = 0xcbf29ce484222325ull;
  int length = 0;
  for (const search::Knob& k : space.knobs()) {
    h = Fnv1a(h, k.name.data(), k.name.size() + 1);
    size_t width = 0;
    for (const auto& opt : k.options) {
      width = std::max(width, opt.size());
      h = Fnv1a(h, opt.data(), opt.size() * sizeof(int64_t));
      h = Fnv1a(h, "|", 1);
    }
    length += 1 + static_cast<int>(width);
  }
  return FeatureSchema{"knob", 1, length, h};
}

KnobCostModel::KnobCostModel(const search::ConfigSpace* space, CostModelOptions options)
    : FeatureCostModel(Schema(*space), options), space_(space) {
  for (const search::Knob& k : space_->knobs()) {
    size_t width = 0;
    for (const auto& opt : k.options) width = std::max(width, opt.size());
    widths_.push_back(width);
  }
}

bool KnobCostModel::Featurize(const search::Config& config, std::vector<float>* out) {
  const auto& knobs = space_->knobs();
  if (config.size() != knobs.size()) return false;
  out->clear();
  for (size_t k = 0; k < knobs.size(); ++k) {
    const auto& options = knobs[k].options;
    if (config[k] < 0 || static_cast<size_t>(config[k]) >= options.size()) return false;
    out->push_back(options.size() > 1 ? static_cast<float>(config[k]) / static_cast<float>(options.size() - 1) : 0.0f);
    const auto& values = options[config[k]];
    for (size_t j = 0; j < widths_[k]; ++j) {
      double v = j < values.size() ? static_cast<double>(values[j]) : 0.0;
      out->push_back(static_cast<float>(std::copysign(std::log2(1.0 + std::fabs(v)), v)));
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------

std::vector<std::string> CostModelNames() { return {"xgb", "xgb-reg", "xgb-knob", "xgb-knob-reg"}; }

absl::StatusOr<std::unique_ptr<FeatureCostModel>> CreateFeatureCostModel(const std::string& name,
                                                                          const CostModelSubject& subject,
                                                                          CostModelOptions options) {
  if (name == "gnn" || name == "lstm") {
    return absl::UnimplementedError("cost model '" + name + "' is not part of this build");
  }
  bool knob = name == "xgb-knob" || name == "xgb-knob-reg";
  bool reg = name == "xgb-reg" || name == "xgb-knob-reg";
  if (!knob && !reg && name != "xgb") {
    return absl::InvalidArgumentError("unknown cost model '" + name + "' (known: " +
                                      absl::StrJoin(CostModelNames(), ", ") + ")");
  }
  options.xgb.objective = reg ? "reg:squarederror" : "rank:pairwise";
  const search::ConfigSpace* space = subject.space;
  if (space == nullptr && subject.tmpl != nullptr) space = &subject.tmpl->space();
  if (!knob && subject.tmpl != nullptr) return std::unique_ptr<FeatureCostModel>(new AstCostModel(subject.tmpl, options));
  if (space == nullptr) return absl::InvalidArgumentError("cost model '" + name + "' needs a template or a space");
  return std::unique_ptr<FeatureCostModel>(new KnobCostModel(space, options));
}

absl::StatusOr<std::unique_ptr<search::CostModel>> CreateCostModel(const std::string& name,
                                                                   const CostModelSubject& subject,
                                                                   CostModelOptions options) {
  auto model = CreateFeatureCostModel(name, subject, std::move(options));
  if (!model.ok()) return model.status();
  return std::unique_ptr<search::CostModel>(std::move(*model));
}

}  // namespace tune::costmodel
