// XgbModel: training, prediction and the versioned artifact, over the XGBoost C API.
#include "costmodel/xgb_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "search/space.h"

namespace tune::costmodel {
namespace {

constexpr char kMagic[8] = {'T', 'U', 'N', 'E', 'X', 'G', 'B', '1'};
constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();

absl::Status XgbStatus(int rc, const char* what) {
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("XGBoost ", what, ": ", XGBGetLastError()));
}

#define TUNE_XGB_RETURN_IF_ERROR(call, what)               \
  do {                                                     \
    absl::Status _st = XgbStatus((call), what);            \
    if (!_st.ok()) return _st;                             \
  } while (false)

/// An owned DMatrix.
class Matrix {
 public:
  Matrix() = default;
  ~Matrix() {
    if (handle_ != nullptr) XGDMatrixFree(handle_);
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  absl::Status Create(const float* rows, size_t n, size_t length) {
    return XgbStatus(XGDMatrixCreateFromMat(rows, n, length, kMissing, &handle_), "creating a matrix");
  }
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

bool IsFailure(double cost) { return !std::isfinite(cost) || !(cost > 0); }

void SilenceXgboost() { XGBSetGlobalConfig("{\"verbosity\": 0}"); }

// Little-endian artifact encoding.
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString(std::string* out, const std::string& s) {
  PutU64(out, s.size());
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Bytes(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Bytes(8, v); }
  bool String(std::string* s) {
    uint64_t n;
    if (!U64(&n) || n > bytes_.size() - pos_) return false;
    s->assign(bytes_, pos_, n);
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  bool Bytes(int n, uint64_t* v) {
    if (bytes_.size() - pos_ < static_cast<size_t>(n)) return false;
    *v = 0;
    for (int i = 0; i < n; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return true;
  }
  const std::string& bytes_;
  size_t pos_ = 0;
};

nlohmann::json OptionsToJson(const XgbOptions& o) {
  return {{"objective", o.objective},
          {"num_rounds", o.num_rounds},
          {"max_depth", o.max_depth},
          {"eta", o.eta},
          {"min_child_weight", o.min_child_weight},
          {"lambda", o.lambda},
          {"gamma", o.gamma},
          {"colsample_bytree", o.colsample_bytree},
          {"tree_method", o.tree_method},
          {"ensemble_size", o.ensemble_size},
          {"seed", o.seed}};
}

bool OptionsFromJson(const std::string& text, XgbOptions* o) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  try {
    o->objective = j.at("objective").get<std::string>();
    o->num_rounds = j.at("num_rounds").get<int>();
    o->max_depth = j.at("max_depth").get<int>();
    o->eta = j.at("eta").get<double>();
    o->min_child_weight = j.at("min_child_weight").get<double>();
    o->lambda = j.at("lambda").get<double>();
    o->gamma = j.at("gamma").get<double>();
    o->colsample_bytree = j.at("colsample_bytree").get<double>();
    o->tree_method = j.at("tree_method").get<std::string>();
    o->ensemble_size = j.at("ensemble_size").get<int>();
    o->seed = j.at("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

bool KnownObjective(const std::string& objective) {
  return objective == "rank:pairwise" || objective == "reg:squarederror";
}

}  // namespace

struct XgbModel::Booster {
  BoosterHandle handle = nullptr;
  ~Booster() {
    if (handle != nullptr) XGBoosterFree(handle);
  }
};

XgbModel::XgbModel(FeatureSchema schema, XgbOptions options)
    : schema_(std::move(schema)), options_(std::move(options)) {}
XgbModel::~XgbModel() = default;
XgbModel::XgbModel(XgbModel&&) noexcept = default;
XgbModel& XgbModel::operator=(XgbModel&&) noexcept = default;

absl::Status XgbModel::Fit(const std::vector<float>& rows, const std::vector<double>& costs,
                           const std::vector<int64_t>& groups) {
  const size_t n = costs.size(), length = static_cast<size_t>(schema_.length);
  if (n == 0) return absl::InvalidArgumentError("no training rows");
  if (rows.size() != n * length || groups.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("training data of ", n, " costs has ", rows.size(),
                                                   " feature values (expected ", n * length, ") and ",
                                                   groups.size(), " group ids"));
  }
  if (!KnownObjective(options_.objective)) {
    return absl::InvalidArgumentError("unknown objective '" + options_.objective + "'");
  }
  if (options_.ensemble_size < 1 || options_.num_rounds < 1) {
    return absl::InvalidArgumentError("ensemble_size and num_rounds must be positive");
  }
  SilenceXgboost();

  // Rows ordered by group (stable), the group boundaries, and normalized-throughput labels.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a] < groups[b]; });
  std::vector<size_t> bounds = {0};
  for (size_t i = 1; i < n; ++i) {
    if (groups[order[i]] != groups[order[i - 1]]) bounds.push_back(i);
  }
  bounds.push_back(n);
  std::vector<float> label(n, 0.0f);
  for (size_t g = 0; g + 1 < bounds.size(); ++g) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = bounds[g]; i < bounds[g + 1]; ++i) {
      if (!IsFailure(costs[order[i]])) best = std::min(best, costs[order[i]]);
    }
    for (size_t i = bounds[g]; i < bounds[g + 1]; ++i) {
      double c = costs[order[i]];
      label[order[i]] = IsFailure(c) ? 0.0f : static_cast<float>(best / c);
    }
  }

  std::mt19937_64 rng(options_.seed);
  std::vector<std::unique_ptr<Booster>> trained;
  std::vector<float> matrix;
  std::vector<float> labels;
  std::vector<unsigned> group_sizes;
  for (int member = 0; member < options_.ensemble_size; ++member) {
    matrix.clear();
    labels.clear();
    group_sizes.clear();
    for (size_t g = 0; g + 1 < bounds.size(); ++g) {
      const size_t begin = bounds[g], size = bounds[g + 1] - bounds[g];
      for (size_t j = 0; j < size; ++j) {
        size_t pick = options_.ensemble_size == 1 ? begin + j : begin + search::UniformBelow(rng, size);
        size_t row = order[pick];
        matrix.insert(matrix.end(), rows.begin() + row * length, rows.begin() + (row + 1) * length);
        labels.push_back(label[row]);
      }
      group_sizes.push_back(static_cast<unsigned>(size));
    }
    Matrix dtrain;
    if (auto st = dtrain.Create(matrix.data(), n, length); !st.ok()) return st;
    TUNE_XGB_RETURN_IF_ERROR(XGDMatrixSetFloatInfo(dtrain.get(), "label", labels.data(), n), "setting labels");
    TUNE_XGB_RETURN_IF_ERROR(XGDMatrixSetUIntInfo(dtrain.get(), "group", group_sizes.data(), group_sizes.size()),
                             "setting groups");
    auto booster = std::make_unique<Booster>();
    DMatrixHandle cache[] = {dtrain.get()};
    TUNE_XGB_RETURN_IF_ERROR(XGBoosterCreate(cache, 1, &booster->handle), "creating a booster");
    const std::pair<const char*, std::string> params[] = {
        {"verbosity", "0"},
        {"objective", options_.objective},
        {"eta", absl::StrCat(options_.eta)},
        {"max_depth", absl::StrCat(options_.max_depth)},
        {"min_child_weight", absl::StrCat(options_.min_child_weight)},
        {"lambda", absl::StrCat(options_.lambda)},
        {"gamma", absl::StrCat(options_.gamma)},
        {"colsample_bytree", absl::StrCat(options_.colsample_bytree)},
        {"tree_method", options_.tree_method},
        {"nthread", absl::StrCat(std::max(options_.nthread, 1))},
        {"seed", absl::StrCat((options_.seed + static_cast<uint64_t>(member)) & 0x7fffffff)},
    };
    for (const auto& [key, value] : params) {
      TUNE_XGB_RETURN_IF_ERROR(XGBoosterSetParam(booster->handle, key, value.c_str()),
                               absl::StrCat("setting ", key).c_str());
    }
    for (int round = 0; round < options_.num_rounds; ++round) {
      TUNE_XGB_RETURN_IF_ERROR(XGBoosterUpdateOneIter(booster->handle, round, dtrain.get()), "training");
    }
    trained.push_back(std::move(booster));
  }
  boosters_ = std::move(trained);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> XgbModel::Predict(const float* rows, size_t n,
                                                      std::vector<double>* variance) const {
  std::vector<double> mean(n, 0.0);
  if (variance != nullptr) variance->assign(n, 0.0);
  if (boosters_.empty() || n == 0) return mean;
  SilenceXgboost();
  Matrix dmat;
  if (auto st = dmat.Create(rows, n, static_cast<size_t>(schema_.length)); !st.ok()) return st;
  std::vector<double> sum_sq(n, 0.0);
  for (const auto& booster : boosters_) {
    bst_ulong len = 0;
    const float* out = nullptr;
    TUNE_XGB_RETURN_IF_ERROR(XGBoosterPredict(booster->handle, dmat.get(), 0, 0, 0, &len, &out), "predicting");
    if (len != n) return absl::InternalError(absl::StrCat("XGBoost predicted ", len, " values for ", n, " rows"));
    for (size_t i = 0; i < n; ++i) {
      mean[i] += out[i];
      sum_sq[i] += static_cast<double>(out[i]) * out[i];
    }
  }
  const double k = static_cast<double>(boosters_.size());
  for (size_t i = 0; i < n; ++i) {
    mean[i] /= k;
    if (variance != nullptr) (*variance)[i] = std::max(0.0, sum_sq[i] / k - mean[i] * mean[i]);
  }
  return mean;
}

absl::StatusOr<std::string> XgbModel::Save() const {
  std::string out(kMagic, sizeof(kMagic));
  PutU32(&out, kXgbArtifactVersion);
  PutString(&out, options_.objective);
  PutString(&out, schema_.name);
  PutU32(&out, static_cast<uint32_t>(schema_.version));
  PutU32(&out, static_cast<uint32_t>(schema_.length));
  PutU64(&out, schema_.signature);
  PutString(&out, OptionsToJson(options_).dump());
  PutU32(&out, static_cast<uint32_t>(boosters_.size()));
  for (const auto& booster : boosters_) {
    bst_ulong len = 0;
    const char* data = nullptr;
    TUNE_XGB_RETURN_IF_ERROR(XGBoosterSaveModelToBuffer(booster->handle, "{\"format\": \"json\"}", &len, &data),
                             "saving a booster");
    PutString(&out, std::string(data, len));
  }
  return out;
}

absl::Status XgbModel::Load(const std::string& artifact) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("not an XGBoost cost model artifact: " + why); };
  if (artifact.size() < sizeof(kMagic) || std::memcmp(artifact.data(), kMagic, sizeof(kMagic)) != 0) {
    return bad("bad magic");
  }
  std::string tail = artifact.substr(sizeof(kMagic));
  Reader r(tail);
  uint32_t version, feature_version, feature_length, count;
  uint64_t signature;
  std::string objective, feature_name, options_json;
  if (!r.U32(&version)) return bad("truncated header");
  if (version != kXgbArtifactVersion) {
    return bad(absl::StrCat("artifact version ", version, ", this build reads ", kXgbArtifactVersion));
  }
  if (!r.String(&objective) || !r.String(&feature_name) || !r.U32(&feature_version) ||
      !r.U32(&feature_length) || !r.U64(&signature) || !r.String(&options_json) || !r.U32(&count)) {
    return bad("truncated header");
  }
  if (feature_name != schema_.name || static_cast<int>(feature_version) != schema_.version ||
      static_cast<int>(feature_length) != schema_.length || signature != schema_.signature) {
    return bad(absl::StrCat("features '", feature_name, "' v", feature_version, " x", feature_length, " #",
                            signature, ", expected '", schema_.name, "' v", schema_.version, " x",
                            schema_.length, " #", schema_.signature));
  }
  XgbOptions options = options_;
  if (!OptionsFromJson(options_json, &options) || options.objective != objective || !KnownObjective(objective)) {
    return bad("bad options");
  }
  options.nthread = options_.nthread;
  SilenceXgboost();
  std::vector<std::unique_ptr<Booster>> boosters;
  for (uint32_t i = 0; i < count; ++i) {
    std::string bytes;
    if (!r.String(&bytes)) return bad("truncated booster");
    auto booster = std::make_unique<Booster>();
    if (auto st = XgbStatus(XGBoosterCreate(nullptr, 0, &booster->handle), "creating a booster"); !st.ok()) return st;
    if (XGBoosterLoadModelFromBuffer(booster->handle, bytes.data(), bytes.size()) != 0) {
      return bad(absl::StrCat("booster ", i, ": ", XGBGetLastError()));
    }
    const std::string nthread = absl::StrCat(std::max(options.nthread, 1));
    TUNE_XGB_RETURN_IF_ERROR(XGBoosterSetParam(booster->handle, "nthread", nthread.c_str()), "setting nthread");
    TUNE_XGB_RETURN_IF_ERROR(XGBoosterSetParam(booster->handle, "verbosity", "0"), "setting verbosity");
    boosters.push_back(std::move(booster));
  }
  if (!r.AtEnd()) return bad("trailing bytes");
  options_ = options;
  boosters_ = std::move(boosters);
  return absl::OkStatus();
}

}  // namespace tune::costmodel
