// PretrainedCostModel: pretrained scores first, then a blend weighted by each model's accuracy on the task, and the guard.
#include "costmodel/pretrained_cost_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "costmodel/cost_model_adapters.h"
#include "spdlog/spdlog.h"

namespace tune::costmodel {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Mean and standard deviation of the finite values of `v` (deviation 1 when there is no spread).
void Standardization(const std::vector<double>& v, double* mean, double* sd) {
  double sum = 0, sum2 = 0;
  size_t n = 0;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    sum += x;
    ++n;
  }
  *mean = n ? sum / static_cast<double>(n) : 0;
  for (double x : v) {
    if (std::isfinite(x)) sum2 += (x - *mean) * (x - *mean);
  }
  const double s = n > 1 ? std::sqrt(sum2 / static_cast<double>(n)) : 0;
  *sd = s > 1e-12 ? s : 1;
}

}  // namespace

PretrainedCostModel::PretrainedCostModel(const codegen::Template* tmpl, std::shared_ptr<const OfflineModel> pretrained,
                                         std::unique_ptr<FeatureCostModel> online, PretrainedOptions options)
    : tmpl_(tmpl), pretrained_(std::move(pretrained)), online_(std::move(online)), options_(options) {
  TUNE_CHECK(tmpl_ != nullptr) << "a pretrained cost model needs the task's template";
  TUNE_CHECK(pretrained_ != nullptr) << "a pretrained cost model needs a pretrained model";
  TUNE_CHECK(online_ != nullptr) << "a pretrained cost model needs an online model";
  needs_ = pretrained_->needs();
  // An online model of loop-AST rows of the same template reads them from this model's
  // inputs: each config is lowered once for both.
  if (auto* ast = dynamic_cast<AstCostModel*>(online_.get()); ast != nullptr && &ast->tmpl() == tmpl_) {
    needs_.ast = true;
    ast->SetRowSource([this](const search::Config& config, std::vector<float>* out) {
      // Called only from online_'s methods, when no pointer into inputs_ is held.
      if (inputs_.size() >= options_.max_cached_inputs && inputs_.count(config) == 0) inputs_.clear();
      const ModelInput* in = Input(config);
      if (in == nullptr || in->ast.empty()) return false;
      *out = in->ast;
      return true;
    });
    shares_rows_ = true;
  }
}

bool PretrainedCostModel::trained() const { return (active_ && pretrained_->trained()) || online_->trained(); }

std::unique_ptr<ModelInput> PretrainedCostModel::NewInput(const search::Config& config) const {
  if (!tmpl_->space().IsValid(config)) return nullptr;
  auto made = MakeModelInput(*tmpl_, config, needs_);
  return made.ok() ? std::make_unique<ModelInput>(*std::move(made)) : nullptr;
}

void PretrainedCostModel::PrepareInputs(const std::vector<search::Config>& configs) {
  // Emptied before, never during, a batch: callers gather pointers into inputs_ afterwards.
  if (inputs_.size() + configs.size() > options_.max_cached_inputs) inputs_.clear();
  std::vector<const search::Config*> missing;
  std::unordered_set<search::Config, search::ConfigHash> seen;
  for (const search::Config& c : configs) {
    if (inputs_.count(c) == 0 && seen.insert(c).second) missing.push_back(&c);
  }
  // Lowering takes about a millisecond a config: a few hundred are worth the threads.
  const size_t per_thread = 32;
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                          (missing.size() + per_thread - 1) / per_thread);
  if (threads < 2) return;  // Input() makes them one by one
  std::vector<std::unique_ptr<ModelInput>> made(missing.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < missing.size(); i = next++) made[i] = NewInput(*missing[i]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < missing.size(); ++i) inputs_.emplace(*missing[i], std::move(made[i]));
}

const ModelInput* PretrainedCostModel::Input(const search::Config& config) {
  auto it = inputs_.find(config);
  if (it != inputs_.end()) return it->second.get();
  return inputs_.emplace(config, NewInput(config)).first->second.get();
}

std::vector<double> PretrainedCostModel::PretrainedScores(const std::vector<search::Config>& configs) {
  std::vector<double> out(configs.size(), kNaN);
  PrepareInputs(configs);  // the pointers gathered below stay valid
  std::vector<const ModelInput*> inputs;
  std::vector<size_t> where;
  inputs.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    if (const ModelInput* in = Input(configs[i])) {
      inputs.push_back(in);
      where.push_back(i);
    }
  }
  if (inputs.empty()) return out;
  const OfflineModel& model = tuned_ ? *tuned_ : *pretrained_;
  const std::vector<double> scores = model.Score(inputs);
  TUNE_CHECK(scores.size() == inputs.size()) << model.kind() << " gave " << scores.size() << " scores for "
                                             << inputs.size() << " inputs";
  for (size_t j = 0; j < where.size(); ++j) out[where[j]] = std::isfinite(scores[j]) ? scores[j] : kNaN;
  return out;
}

void PretrainedCostModel::AddPairs(const std::vector<double>& scores, const std::vector<double>& costs, Tally* tally) {
  for (size_t i = 0; i < costs.size(); ++i) {
    for (size_t j = i + 1; j < costs.size(); ++j) {
      if (costs[i] == costs[j] || std::isnan(costs[i]) || std::isnan(costs[j]) || std::isnan(scores[i]) ||
          std::isnan(scores[j])) {
        continue;
      }
      const size_t fast = costs[i] < costs[j] ? i : j, slow = fast == i ? j : i;
      tally->pairs += 1;
      if (scores[fast] > scores[slow]) tally->right += 1;
      else if (scores[fast] == scores[slow]) tally->right += 0.5;
    }
  }
}

absl::Status SetPretrainedOption(PretrainedOptions& options, const std::string& key_equals_value) {
  const size_t eq = key_equals_value.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("cost model option '", key_equals_value, "': expected KEY=VALUE"));
  }
  const std::string key = key_equals_value.substr(0, eq), text = key_equals_value.substr(eq + 1);
  PretrainedOptions o = options;
  auto number = [&](double lo, double hi, double* out) -> absl::Status {
    double v = 0;
    if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < lo || v > hi) {
      return absl::InvalidArgumentError(absl::StrCat("cost model option ", key, "=", text, ": expected a number in [", lo,
                                                     ", ", hi, "]"));
    }
    *out = v;
    return absl::OkStatus();
  };
  auto integer = [&](int64_t lo, int64_t hi, int64_t* out) -> absl::Status {
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
      return absl::InvalidArgumentError(absl::StrCat("cost model option ", key, "=", text, ": expected an integer in [",
                                                     lo, ", ", hi, "]"));
    }
    *out = v;
    return absl::OkStatus();
  };
  absl::Status st;
  int64_t i = 0;
  if (key == "guard_min_configs") {
    st = integer(2, 1000000, &i);
    o.guard_min_configs = static_cast<int>(i);
  } else if (key == "guard_min_accuracy") {
    st = number(0, 1, &o.guard_min_accuracy);
  } else if (key == "guard_z") {
    st = number(0, 100, &o.guard_z);
  } else if (key == "guard_min_ratio") {
    st = number(1, 1000, &o.guard_min_ratio);
  } else if (key == "prior_accuracy") {
    st = number(0.5, 1, &o.prior_accuracy);
  } else if (key == "prior_pairs") {
    st = number(0, 1e9, &o.prior_pairs);
  } else if (key == "weight_half_life") {
    st = number(0, 1e9, &o.weight_half_life);
  } else if (key == "weight_max_ratio") {
    st = number(0, 1e9, &o.weight_max_ratio);
    if (st.ok() && o.weight_max_ratio > 0 && o.weight_max_ratio <= 1) {
      // At 1 only configs as fast as the best would count, and equal latencies make no pair.
      st = absl::InvalidArgumentError(
          absl::StrCat("cost model option ", key, "=", text, ": expected 0 (every pair) or a ratio > 1"));
    }
  } else if (key == "online_share") {
    st = number(0, 1, &o.online_share);
  } else if (key == "fine_tune") {
    st = integer(0, 1, &i);
    o.fine_tune = i == 1;
  } else if (key == "fine_tune_epochs") {
    st = integer(0, 100000, &i);
    o.fine_tune_epochs = static_cast<int>(i);
  } else if (key == "fine_tune_max_configs") {
    st = integer(2, 1000000, &i);
    o.fine_tune_max_configs = static_cast<size_t>(i);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown cost model option '", key,
        "' (known: guard_min_configs, guard_min_accuracy, guard_z, guard_min_ratio, prior_accuracy, prior_pairs, "
        "weight_half_life, weight_max_ratio, online_share, fine_tune, fine_tune_epochs, fine_tune_max_configs)"));
  }
  if (!st.ok()) return st;
  options = o;
  return absl::OkStatus();
}

void PretrainedCostModel::UpdateWeights() {
  const double m = options_.prior_pairs;
  const double acc_p = (tally_pretrained_.right + options_.prior_accuracy * m) / (tally_pretrained_.pairs + m);
  const double acc_o = (tally_online_.right + 0.5 * m) / (tally_online_.pairs + m);
  w_pretrained_ = active_ ? std::max(0.0, acc_p - 0.5) : 0;
  w_online_ = online_->trained() ? std::max(0.0, acc_o - 0.5) : 0;
}

absl::Status PretrainedCostModel::Fit(const std::vector<search::Config>& configs, const std::vector<double>& costs) {
  if (configs.size() != costs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(configs.size(), " configs but ", costs.size(), " costs"));
  }
  if (configs.size() < fitted_) fitted_ = 0;  // another history: everything is new
  if (options_.weight_half_life > 0 && configs.size() > fitted_) {
    // Older batches' pairs count less, by their age in measured configs.
    const double keep =
        std::exp2(-static_cast<double>(configs.size() - fitted_) / options_.weight_half_life);
    for (Tally* t : {&tally_pretrained_, &tally_online_}) {
      t->right *= keep;
      t->pairs *= keep;
    }
  }
  // The configs measured since the last Fit, scored by both models before either learns them:
  // how well each ranks what it has not seen.
  if (configs.size() > fitted_) {
    const std::vector<search::Config> fresh(configs.begin() + static_cast<std::ptrdiff_t>(fitted_), configs.end());
    const std::vector<double> fresh_costs(costs.begin() + static_cast<std::ptrdiff_t>(fitted_), costs.end());
    // With weight_max_ratio, only pairs of configs close to the best measured count: how
    // each model ranks among the configs that decide the search, not fast against slow.
    std::vector<double> weight_costs = fresh_costs;
    if (options_.weight_max_ratio > 0) {
      double best = std::numeric_limits<double>::infinity();
      for (double c : costs) best = std::min(best, c);
      for (double& c : weight_costs)
        if (!(c <= options_.weight_max_ratio * best)) c = kNaN;
    }
    if (active_) AddPairs(PretrainedScores(fresh), weight_costs, &tally_pretrained_);
    if (online_->trained()) {
      std::vector<double> o = online_->Predict(fresh);
      for (double& s : o)
        if (s <= kInvalidConfigScore / 2) s = kNaN;
      AddPairs(o, weight_costs, &tally_online_);
    }
  }
  fitted_ = configs.size();
  absl::Status online_status = online_->Fit(configs, costs);
  if (active_) Guard(configs, costs);
  if (active_) FineTune(configs, costs);
  // Each model's scores standardized over the measured configs, fixed until the next Fit.
  if (active_) Standardization(PretrainedScores(configs), &mean_p_, &sd_p_);
  if (online_->trained()) {
    std::vector<double> o = online_->Predict(configs);
    for (double& s : o)
      if (s <= kInvalidConfigScore / 2) s = kNaN;
    Standardization(o, &mean_o_, &sd_o_);
  }
  UpdateWeights();
  fitted_once_ = true;
  // The share of batches ranked by the online model alone, once it ranks anything.
  online_only_ = false;
  if (options_.online_share > 0 && online_->trained()) {
    online_credit_ += options_.online_share;
    if (online_credit_ >= 1 - 1e-9) {
      online_credit_ -= 1;
      online_only_ = true;
    }
  }
  return online_status;
}

void PretrainedCostModel::Guard(const std::vector<search::Config>& configs, const std::vector<double>& costs) {
  std::set<double> distinct;
  for (double c : costs)
    if (std::isfinite(c)) distinct.insert(c);
  // The shared model as trained offline (never the fine-tuned copy, which has seen these).
  std::unique_ptr<OfflineModel> keep = std::move(tuned_);
  std::vector<double> scores = PretrainedScores(configs);
  tuned_ = std::move(keep);
  for (double& s : scores)
    if (std::isnan(s)) s = -1e30;  // a measured config that no longer lowers ranks last
  Tally tally;
  for (size_t i = 0; i < costs.size(); ++i) {
    for (size_t j = i + 1; j < costs.size(); ++j) {
      const size_t fast = costs[i] < costs[j] ? i : j, slow = fast == i ? j : i;
      if (!std::isfinite(costs[fast])) continue;  // two failures
      if (std::isfinite(costs[slow]) && costs[slow] < options_.guard_min_ratio * costs[fast]) continue;
      tally.pairs += 1;
      if (scores[fast] > scores[slow]) tally.right += 1;
      else if (scores[fast] == scores[slow]) tally.right += 0.5;
    }
  }
  const std::optional<double> acc =
      tally.pairs > 0 ? std::optional<double>(tally.right / tally.pairs) : std::nullopt;
  pretrained_accuracy_ = acc.value_or(-1);
  if (static_cast<int>(distinct.size()) < options_.guard_min_configs || !acc.has_value()) return;
  if (*acc >= options_.guard_min_accuracy) return;
  // Configs that took part in a counted pair.
  const double n = static_cast<double>(std::count_if(costs.begin(), costs.end(), [](double c) { return std::isfinite(c); }));
  const double sd = n > 1 ? std::sqrt(2 * (2 * n + 5) / (9 * n * (n - 1))) / 2 : 1;
  if (*acc > options_.guard_min_accuracy - options_.guard_z * sd) return;
  active_ = false;
  tuned_.reset();
  note_ = absl::StrFormat("pretrained %s model dropped after %d ok results: pairwise accuracy %.2f, below %.2f by "
                          "more than %.2f standard deviations of a random ranking, on this task (online model only)",
                          pretrained_->kind(), static_cast<int>(std::count_if(costs.begin(), costs.end(),
                                                                              [](double c) { return std::isfinite(c); })),
                          *acc, options_.guard_min_accuracy, options_.guard_z);
}

void PretrainedCostModel::FineTune(const std::vector<search::Config>& configs, const std::vector<double>& costs) {
  if (!options_.fine_tune || !can_fine_tune_) return;
  if (inputs_.size() + options_.fine_tune_max_configs > options_.max_cached_inputs) inputs_.clear();
  TrainGroup group;
  group.name = tmpl_->workload().Key();
  const size_t first = configs.size() > options_.fine_tune_max_configs ? configs.size() - options_.fine_tune_max_configs : 0;
  for (size_t i = first; i < configs.size(); ++i) {
    if (const ModelInput* in = Input(configs[i])) {
      group.inputs.push_back(*in);
      group.latencies_s.push_back(costs[i]);
    }
  }
  if (group.inputs.size() < 2) return;
  // A private copy, fresh from the shared parameters each time (fine-tuned on the latest
  // measurements, never on the same ones twice over).
  auto copy = CreateOfflineModel(pretrained_->kind());
  if (!copy.ok() || *copy == nullptr) {
    can_fine_tune_ = false;
    return;
  }
  if (payload_.empty()) {
    auto payload = pretrained_->SavePayload();
    if (!payload.ok()) {
      can_fine_tune_ = false;
      return;
    }
    payload_ = *std::move(payload);
  }
  if (!(*copy)->LoadPayload(payload_).ok()) {
    can_fine_tune_ = false;
    return;
  }
  TrainOptions to;
  to.seed = options_.seed;
  to.fine_tune_epochs = options_.fine_tune_epochs;
  absl::Status st = (*copy)->FineTune(group, to);
  if (absl::IsUnimplemented(st)) {
    can_fine_tune_ = false;
    return;
  }
  if (!st.ok()) {
    spdlog::debug("{}: fine-tuning the pretrained model failed: {}", group.name, std::string(st.message()));
    return;  // the previous copy (or the shared model) stays in use
  }
  tuned_ = *std::move(copy);
}

std::vector<double> PretrainedCostModel::Predict(const std::vector<search::Config>& configs,
                                                 std::vector<double>* variance) {
  const size_t n = configs.size();
  if (variance != nullptr) variance->assign(n, 0.0);
  std::vector<double> out(n, 0.0);
  if (n == 0) return out;
  const bool online = online_->trained();
  double wp = active_ && pretrained_->trained() ? w_pretrained_ : 0, wo = online ? w_online_ : 0;
  if (online_only_ && online) wp = 0, wo = 1;
  if (!fitted_once_ || wp + wo <= 0) {
    if (online && (!active_ || fitted_once_)) wo = 1, wp = 0;
    else if (active_ && pretrained_->trained()) wp = 1, wo = 0;
    else return out;  // nothing trained: zeros, as the interface says
  }
  // Before the first Fit the pretrained scores stand alone, unscaled.
  const bool blend = fitted_once_;
  std::vector<double> p, o, var;
  if (wp > 0) p = PretrainedScores(configs);
  if (wo > 0) {
    if (shares_rows_ && wp <= 0) PrepareInputs(configs);
    o = online_->Predict(configs, variance != nullptr ? &var : nullptr);
  }
  for (size_t i = 0; i < n; ++i) {
    bool invalid = false;
    double s = 0;
    if (wp > 0) {
      if (std::isnan(p[i])) invalid = true;
      else s += blend ? wp * (p[i] - mean_p_) / sd_p_ : p[i];
    }
    if (wo > 0) {
      if (o[i] <= kInvalidConfigScore / 2) invalid = true;
      else s += wo * (o[i] - mean_o_) / sd_o_;
      if (variance != nullptr && !var.empty()) (*variance)[i] = var[i] * (wo / sd_o_) * (wo / sd_o_);
    }
    if (invalid) {
      out[i] = kInvalidConfigScore;
      if (variance != nullptr) (*variance)[i] = 0;
    } else {
      out[i] = s;
    }
  }
  return out;
}

absl::StatusOr<std::string> PretrainedCostModel::Save() const { return online_->Save(); }

absl::Status PretrainedCostModel::Load(const std::string& artifact) {
  online_only_ = false;  // the loaded model ranks with the blend until the next Fit
  return online_->Load(artifact);
}

}  // namespace tune::costmodel
