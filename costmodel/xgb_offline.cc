// The offline XGBoost cost model: rank:pairwise (or rank:ndcg for the lambdarank loss, reg:squarederror for regression) on AST features, one group per task, early-stopped on validation.
#include <xgboost/c_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "costmodel/features.h"
#include "costmodel/offline_model.h"
#include "costmodel/ranking_metrics.h"
#include "nlohmann/json.hpp"
#include "search/space.h"

namespace tune::costmodel {
namespace {

// Payload layout: kPayloadMagic, then u64 length + JSON meta, then u64 length + the booster as
// XGBoost's UBJSON model.
constexpr char kPayloadMagic[8] = {'T', 'U', 'N', 'E', 'X', 'G', 'B', 'O'};
constexpr int kPayloadVersion = 1;
constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();

// Defaults. TenSet's XGBoost model has depth 10, eta 0.2, gamma 0.001, min_child_weight 0;
// on the held-out networks of both datasets (data/datasets, 3 seeds) shallower trees with
// min_child_weight 1 and 16 sampled pairs per config instead of XGBoost's 1 ranked better:
// with one pair per config and round, rank:pairwise sees a small random share of a task's
// pairs and the model kept depends strongly on the seed.
constexpr int kDefaultRounds = 400;
constexpr int kEvalEvery = 5;          // rounds per block: the validation objective is checked after each
constexpr int kDefaultPatience = 10;   // blocks without improvement before stopping
constexpr double kDefaultEta = 0.2;
constexpr int kMaxDepth = 6;
// rank:pairwise only: rank:ndcg's hessians are scaled by |delta NDCG| and small, so it keeps 0
// (with 1 it made no split on the tests' groups).
constexpr double kMinChildWeight = 1;
constexpr int kPairsPerConfig = 16;    // rank:pairwise / rank:ndcg pairs sampled per config and round
constexpr double kInternalValidShare = 0.1;  // of the training groups, when no validation set is given
// Fine-tuning on one task's records: a few shallow trees at a lower learning rate.
constexpr int kFineTuneRounds = 10;
constexpr int kFineTuneDepth = 6;
constexpr double kFineTuneEta = 0.1;

absl::Status XgbError(int rc, const char* what) {
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("XGBoost ", what, ": ", XGBGetLastError()));
}

#define TUNE_XGBO_RETURN_IF_ERROR(call, what) \
  do {                                        \
    absl::Status _st = XgbError((call), what); \
    if (!_st.ok()) return _st;                \
  } while (false)

struct MatrixDeleter {
  void operator()(void* h) const {
    if (h != nullptr) XGDMatrixFree(h);
  }
};
struct BoosterDeleter {
  void operator()(void* h) const {
    if (h != nullptr) XGBoosterFree(h);
  }
};
using MatrixPtr = std::unique_ptr<void, MatrixDeleter>;
using BoosterPtr = std::unique_ptr<void, BoosterDeleter>;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
bool GetU64(const std::string& in, size_t* pos, uint64_t* v) {
  if (in.size() < 8 || *pos > in.size() - 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*pos + i])) << (8 * i);
  *pos += 8;
  return true;
}

/// The groups' AST rows, labels (best latency / latency within the group; failures 0) and group sizes.
struct GroupMatrix {
  std::vector<float> rows;
  std::vector<float> labels;
  std::vector<unsigned> sizes;
  size_t n = 0;
};

absl::StatusOr<GroupMatrix> Flatten(const std::vector<const TrainGroup*>& groups) {
  GroupMatrix m;
  for (const TrainGroup* g : groups) {
    if (g->inputs.empty()) continue;
    if (g->inputs.size() != g->latencies_s.size()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g->name, ": ", g->inputs.size(), " inputs and ",
                                                     g->latencies_s.size(), " latencies"));
    }
    double best = std::numeric_limits<double>::infinity();
    for (double l : g->latencies_s)
      if (std::isfinite(l) && l > 0) best = std::min(best, l);
    for (size_t i = 0; i < g->inputs.size(); ++i) {
      const std::vector<float>& ast = g->inputs[i].ast;
      if (ast.size() != kNumFeatures) {
        return absl::InvalidArgumentError(absl::StrCat("group ", g->name, ": an input has ", ast.size(),
                                                       " AST features, expected ", kNumFeatures));
      }
      m.rows.insert(m.rows.end(), ast.begin(), ast.end());
      const double l = g->latencies_s[i];
      m.labels.push_back(std::isfinite(l) && l > 0 && std::isfinite(best) ? static_cast<float>(best / l) : 0.0f);
    }
    m.sizes.push_back(static_cast<unsigned>(g->inputs.size()));
    m.n += g->inputs.size();
  }
  return m;
}

absl::StatusOr<MatrixPtr> MakeMatrix(const GroupMatrix& m, bool with_labels) {
  DMatrixHandle h = nullptr;
  TUNE_XGBO_RETURN_IF_ERROR(XGDMatrixCreateFromMat(m.rows.data(), m.n, kNumFeatures, kMissing, &h), "creating a matrix");
  MatrixPtr p(h);
  if (with_labels) {
    TUNE_XGBO_RETURN_IF_ERROR(XGDMatrixSetFloatInfo(h, "label", m.labels.data(), m.n), "setting labels");
    TUNE_XGBO_RETURN_IF_ERROR(XGDMatrixSetUIntInfo(h, "group", m.sizes.data(), m.sizes.size()), "setting groups");
  }
  return p;
}

absl::StatusOr<std::vector<float>> PredictMatrix(BoosterHandle b, DMatrixHandle m, size_t n) {
  bst_ulong len = 0;
  const float* out = nullptr;
  TUNE_XGBO_RETURN_IF_ERROR(XGBoosterPredict(b, m, 0, 0, 0, &len, &out), "predicting");
  if (len != n) return absl::InternalError(absl::StrCat("XGBoost predicted ", len, " values for ", n, " rows"));
  return std::vector<float>(out, out + n);
}

/// ValidationObjective of `scores` (row-aligned with the groups' configs, in order).
double Objective(const std::vector<const TrainGroup*>& groups, const std::vector<float>& scores) {
  double top1 = 0, pair = 0;
  int n_top = 0, n_pair = 0;
  size_t at = 0;
  for (const TrainGroup* g : groups) {
    if (g->inputs.empty()) continue;
    RankedTask t;
    t.latencies_s = g->latencies_s;
    t.scores.assign(scores.begin() + static_cast<std::ptrdiff_t>(at),
                    scores.begin() + static_cast<std::ptrdiff_t>(at + g->inputs.size()));
    at += g->inputs.size();
    const double best = BestLatency(t);
    if (std::isfinite(best)) {
      const double l1 = TopKLatency(t, 1);
      top1 += std::isfinite(l1) ? best / l1 : 0;
      ++n_top;
    }
    if (auto p = PairwiseAccuracy(t)) pair += *p, ++n_pair;
  }
  EvalMetrics m;
  m.top1 = n_top ? top1 / n_top : 0;
  m.pairwise = n_pair ? pair / n_pair : 0;
  return ValidationObjective(m);
}

/// 1 - NDCG of the training set after `iter`, from XGBoost's own evaluation string
/// ("[12]\ttrain-ndcg:0.93"); 0 when it cannot be read.
double TrainLoss(BoosterHandle b, int iter, DMatrixHandle train) {
  DMatrixHandle mats[] = {train};
  const char* names[] = {"train"};
  const char* out = nullptr;
  if (XGBoosterEvalOneIter(b, iter, mats, names, 1, &out) != 0 || out == nullptr) return 0;
  const char* colon = std::strrchr(out, ':');
  if (colon == nullptr) return 0;
  return 1.0 - std::atof(colon + 1);
}

class XgbOfflineModel final : public OfflineModel {
 public:
  std::string kind() const override { return "xgb"; }
  InputNeeds needs() const override { return {.ast = true, .graph = false}; }
  bool trained() const override { return booster_ != nullptr; }

  absl::Status Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>& valid,
                     const TrainOptions& options) override {
    XGBSetGlobalConfig("{\"verbosity\": 0}");
    const auto start = std::chrono::steady_clock::now();
    const int max_rounds = options.max_epochs > 0 ? options.max_epochs : kDefaultRounds;
    const int patience = options.patience > 0 ? options.patience : kDefaultPatience;
    const double eta = options.learning_rate > 0 ? options.learning_rate : kDefaultEta;

    // Groups with something to learn, in order; a share held back when no validation set is given.
    std::vector<const TrainGroup*> fit, check;
    for (const TrainGroup& g : train) {
      if (!g.inputs.empty()) fit.push_back(&g);
    }
    for (const TrainGroup& g : valid) {
      if (!g.inputs.empty()) check.push_back(&g);
    }
    if (check.empty() && fit.size() >= 2) {
      std::vector<size_t> perm(fit.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ull);
      for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[search::UniformBelow(rng, i)]);
      const size_t n = std::max<size_t>(1, static_cast<size_t>(kInternalValidShare * fit.size()));
      std::vector<bool> held(fit.size(), false);
      for (size_t i = 0; i < n; ++i) held[perm[i]] = true;
      std::vector<const TrainGroup*> kept;
      for (size_t i = 0; i < fit.size(); ++i) (held[i] ? check : kept).push_back(fit[i]);
      fit = std::move(kept);
    }
    bool learnable = false;
    for (const TrainGroup* g : fit) {
      for (size_t i = 1; i < g->latencies_s.size() && !learnable; ++i)
        learnable = g->latencies_s[i] != g->latencies_s[0];
    }
    if (!learnable) {
      return absl::InvalidArgumentError("no training task has two configs of different latency");
    }

    auto fit_m = Flatten(fit);
    if (!fit_m.ok()) return fit_m.status();
    auto check_m = Flatten(check);
    if (!check_m.ok()) return check_m.status();
    auto dtrain = MakeMatrix(*fit_m, true);
    if (!dtrain.ok()) return dtrain.status();
    MatrixPtr dvalid;
    if (check_m->n > 0) {
      auto d = MakeMatrix(*check_m, false);
      if (!d.ok()) return d.status();
      dvalid = *std::move(d);
    }
    // XGBoost holds its own copies now.
    *fit_m = GroupMatrix();
    check_m->rows = std::vector<float>();

    BoosterHandle raw = nullptr;
    DMatrixHandle cache[] = {dtrain->get()};
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterCreate(cache, 1, &raw), "creating a booster");
    BoosterPtr booster(raw);
    const bool ndcg = options.loss == "lambdarank";
    const std::string objective = ndcg ? "rank:ndcg" : options.loss == "regression" ? "reg:squarederror" : "rank:pairwise";
    const double min_child_weight = ndcg ? 0.0 : kMinChildWeight;
    const double subsample = options.subsample > 0 ? std::min(options.subsample, 1.0) : 1.0;
    const double colsample = options.colsample > 0 ? std::min(options.colsample, 1.0) : 1.0;
    const std::pair<const char*, std::string> params[] = {
        {"subsample", absl::StrCat(subsample)},
        {"colsample_bytree", absl::StrCat(colsample)},
        {"verbosity", "0"},
        {"objective", objective},
        {"eval_metric", "ndcg"},
        {"eta", absl::StrCat(eta)},
        {"max_depth", absl::StrCat(kMaxDepth)},
        {"min_child_weight", absl::StrCat(min_child_weight)},
        {"num_pairsample", absl::StrCat(kPairsPerConfig)},
        {"gamma", "0.001"},
        {"lambda", "1"},
        {"tree_method", "hist"},
        {"nthread", absl::StrCat(std::max(options.threads, 1))},
        {"seed", absl::StrCat(options.seed & 0x7fffffff)},
    };
    for (const auto& [key, value] : params) {
      TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSetParam(raw, key, value.c_str()), absl::StrCat("setting ", key).c_str());
    }

    int best_rounds = 0, since_best = 0;
    double best_score = -1;
    for (int round = 0; round < max_rounds; ++round) {
      TUNE_XGBO_RETURN_IF_ERROR(XGBoosterUpdateOneIter(raw, round, dtrain->get()), "training");
      const int done = round + 1;
      if (done % kEvalEvery != 0 && done != max_rounds) continue;
      double score = 0;
      if (dvalid) {
        auto pred = PredictMatrix(raw, dvalid.get(), check_m->n);
        if (!pred.ok()) return pred.status();
        score = Objective(check, *pred);
      }
      // Without validation groups, the last round is kept.
      if (!dvalid || score > best_score) {
        best_score = score;
        best_rounds = done;
        since_best = 0;
      } else {
        ++since_best;
      }
      if (options.progress) {
        TrainProgress p;
        p.epoch = done;
        p.max_epochs = max_rounds;
        p.train_loss = TrainLoss(raw, round, dtrain->get());
        p.valid_score = score;
        p.best_valid_score = best_score;
        p.best_epoch = best_rounds;
        p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        options.progress(p);
      }
      if (since_best >= patience) break;
    }

    // The best round's model: the first best_rounds trees.
    int boosted = 0;
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterBoostedRounds(raw, &boosted), "counting rounds");
    if (best_rounds < boosted) {
      BoosterHandle sliced = nullptr;
      TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSlice(raw, 0, best_rounds, 1, &sliced), "keeping the best rounds");
      booster.reset(sliced);
    }
    booster_ = std::move(booster);
    train_params_ = {{"objective", objective},
                     {"eta", eta},
                     {"max_depth", kMaxDepth},
                     {"min_child_weight", min_child_weight},
                     {"num_pairsample", kPairsPerConfig},
                     {"subsample", subsample},
                     {"colsample_bytree", colsample}};
    rounds_ = best_rounds;
    valid_score_ = best_score;
    threads_ = std::max(options.threads, 1);
    return absl::OkStatus();
  }

  /// Continues boosting on the task's own records: options.fine_tune_epochs more rounds
  /// (default kFineTuneRounds) of shallower trees at a lower learning rate, fitted to the
  /// pairwise gradients left by the current model. The model is unchanged on failure.
  absl::Status FineTune(const TrainGroup& group, const TrainOptions& options) override {
    if (booster_ == nullptr) return absl::FailedPreconditionError("the xgb model is not trained");
    bool learnable = false;
    for (size_t i = 1; i < group.latencies_s.size() && !learnable; ++i)
      learnable = group.latencies_s[i] != group.latencies_s[0];
    if (!learnable) return absl::InvalidArgumentError("no two configs of different latency to fine-tune on");
    auto m = Flatten({&group});
    if (!m.ok()) return m.status();
    auto dtrain = MakeMatrix(*m, true);
    if (!dtrain.ok()) return dtrain.status();
    // A copy through the payload, so that a failure half-way leaves this model as it was.
    auto payload = SavePayload();
    if (!payload.ok()) return payload.status();
    XgbOfflineModel copy;
    copy.threads_ = std::max(options.threads, 1);
    if (auto st = copy.LoadPayload(*payload); !st.ok()) return st;
    BoosterHandle raw = copy.booster_.get();
    const double eta = options.learning_rate > 0 ? options.learning_rate : kFineTuneEta;
    const std::pair<const char*, std::string> params[] = {
        {"eta", absl::StrCat(eta)},
        {"max_depth", absl::StrCat(kFineTuneDepth)},
        {"min_child_weight", "0"},
        {"gamma", "0.001"},
        {"tree_method", "hist"},
        {"seed", absl::StrCat(options.seed & 0x7fffffff)},
    };
    for (const auto& [key, value] : params) {
      TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSetParam(raw, key, value.c_str()), absl::StrCat("setting ", key).c_str());
    }
    int boosted = 0;
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterBoostedRounds(raw, &boosted), "counting rounds");
    const int rounds = options.fine_tune_epochs > 0 ? options.fine_tune_epochs : kFineTuneRounds;
    for (int i = 0; i < rounds; ++i) {
      TUNE_XGBO_RETURN_IF_ERROR(XGBoosterUpdateOneIter(raw, boosted + i, dtrain->get()), "fine-tuning");
    }
    booster_ = std::move(copy.booster_);
    rounds_ = boosted + rounds;
    return absl::OkStatus();
  }

  std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const override {
    std::vector<double> scores(inputs.size(), 0.0);
    if (booster_ == nullptr || inputs.empty()) return scores;
    std::vector<float> rows;
    rows.reserve(inputs.size() * kNumFeatures);
    for (const ModelInput* in : inputs) {
      if (in->ast.size() == kNumFeatures) {
        rows.insert(rows.end(), in->ast.begin(), in->ast.end());
      } else {
        rows.insert(rows.end(), kNumFeatures, kMissing);  // no features: scored as missing values
      }
    }
    XGBSetGlobalConfig("{\"verbosity\": 0}");
    DMatrixHandle h = nullptr;
    if (XGDMatrixCreateFromMat(rows.data(), inputs.size(), kNumFeatures, kMissing, &h) != 0) return scores;
    MatrixPtr m(h);
    auto pred = PredictMatrix(booster_.get(), h, inputs.size());
    if (!pred.ok()) return scores;
    for (size_t i = 0; i < inputs.size(); ++i) scores[i] = (*pred)[i];
    return scores;
  }

  absl::StatusOr<std::string> SavePayload() const override {
    if (booster_ == nullptr) return absl::FailedPreconditionError("the xgb model is not trained");
    bst_ulong len = 0;
    const char* data = nullptr;
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSaveModelToBuffer(booster_.get(), "{\"format\": \"ubj\"}", &len, &data),
                              "saving the booster");
    nlohmann::json meta = {{"payload_version", kPayloadVersion},
                           {"objective", train_params_.value("objective", "rank:pairwise")},
                           {"params", train_params_},
                           {"feature_version", kFeatureVersion},
                           {"num_features", kNumFeatures},
                           {"rounds", rounds_},
                           {"valid_score", valid_score_}};
    const std::string meta_text = meta.dump();
    std::string out(kPayloadMagic, sizeof(kPayloadMagic));
    PutU64(&out, meta_text.size());
    out += meta_text;
    PutU64(&out, len);
    out.append(data, len);
    return out;
  }

  absl::Status LoadPayload(const std::string& payload) override {
    auto bad = [](const std::string& why) { return absl::InvalidArgumentError("not an xgb model payload: " + why); };
    if (payload.size() < sizeof(kPayloadMagic) || std::memcmp(payload.data(), kPayloadMagic, sizeof(kPayloadMagic)) != 0)
      return bad("bad magic");
    size_t pos = sizeof(kPayloadMagic);
    uint64_t meta_len = 0, model_len = 0;
    if (!GetU64(payload, &pos, &meta_len) || meta_len > payload.size() - pos) return bad("truncated");
    auto meta = nlohmann::json::parse(payload.substr(pos, meta_len), nullptr, false);
    pos += meta_len;
    if (!meta.is_object()) return bad("malformed header");
    if (!GetU64(payload, &pos, &model_len) || model_len != payload.size() - pos) return bad("truncated booster");
    int version = 0, feature_version = 0, rounds = 0;
    nlohmann::json params = nlohmann::json::object();
    size_t num_features = 0;
    double valid_score = 0;
    try {
      version = meta.at("payload_version").get<int>();
      feature_version = meta.at("feature_version").get<int>();
      num_features = meta.at("num_features").get<size_t>();
      rounds = meta.at("rounds").get<int>();
      valid_score = meta.value("valid_score", 0.0);
      if (meta.contains("params") && meta["params"].is_object()) params = meta["params"];
    } catch (const std::exception&) {
      return bad("header field missing or of the wrong type");
    }
    if (version != kPayloadVersion) return bad(absl::StrCat("payload version ", version, ", this build reads ", kPayloadVersion));
    if (feature_version != kFeatureVersion || num_features != kNumFeatures) {
      return bad(absl::StrCat("AST features v", feature_version, " x", num_features, ", this build extracts v",
                              kFeatureVersion, " x", kNumFeatures));
    }
    XGBSetGlobalConfig("{\"verbosity\": 0}");
    BoosterHandle raw = nullptr;
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterCreate(nullptr, 0, &raw), "creating a booster");
    BoosterPtr booster(raw);
    if (XGBoosterLoadModelFromBuffer(raw, payload.data() + pos, model_len) != 0) {
      return bad(absl::StrCat("booster: ", XGBGetLastError()));
    }
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSetParam(raw, "nthread", absl::StrCat(threads_).c_str()), "setting nthread");
    TUNE_XGBO_RETURN_IF_ERROR(XGBoosterSetParam(raw, "verbosity", "0"), "setting verbosity");
    booster_ = std::move(booster);
    rounds_ = rounds;
    valid_score_ = valid_score;
    train_params_ = std::move(params);
    return absl::OkStatus();
  }

 private:
  BoosterPtr booster_;
  int rounds_ = 0;          // boosting rounds kept (the best validation round)
  double valid_score_ = 0;  // ValidationObjective at that round
  // XGBoost's settings it was trained with (objective, eta, max_depth, min_child_weight,
  // num_pairsample); empty for models saved before they were recorded.
  nlohmann::json train_params_ = nlohmann::json::object();
  int threads_ = 1;         // XGBoost threads for prediction
};

}  // namespace

std::unique_ptr<OfflineModel> MakeXgbOfflineModel() { return std::make_unique<XgbOfflineModel>(); }

}  // namespace tune::costmodel
