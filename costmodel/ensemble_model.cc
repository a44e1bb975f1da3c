// EnsembleModel: members trained or taken from artifacts, each standardised by its spread within a task, averaged.
#include "costmodel/ensemble_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "costmodel/features.h"
#include "costmodel/program_graph.h"
#include "nlohmann/json.hpp"
#include "search/space.h"

namespace tune::costmodel {
namespace {

// Payload layout: kEnsembleMagic, u64 length + JSON meta, then per member u64 length + payload.
constexpr char kEnsembleMagic[8] = {'T', 'U', 'N', 'E', 'E', 'N', 'S', 'M'};
constexpr int kEnsemblePayloadVersion = 1;
constexpr int kDefaultMembers = 5;
constexpr double kDefaultValidShare = 0.1;  // of train + valid, for member splits when `valid` is empty

void EnsPutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool EnsGetU64(const std::string& in, size_t* pos, uint64_t* v) {
  if (in.size() < 8 || *pos > in.size() - 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*pos + i])) << (8 * i);
  *pos += 8;
  return true;
}

std::string MemberName(size_t i, const EnsembleMemberInfo& info) {
  return absl::StrCat("member ", i + 1, " (", info.kind, " seed ", info.seed, ")");
}

/// Fits `info`'s scale and offset: the mean over `groups` (with two or more configs) of the
/// standard deviation and of the mean of `model`'s scores of the group's configs.
void FitScale(const OfflineModel& model, const std::vector<const TrainGroup*>& groups, EnsembleMemberInfo* info) {
  double sd_sum = 0, mean_sum = 0;
  int n = 0;
  for (const TrainGroup* g : groups) {
    if (g->inputs.size() < 2) continue;
    std::vector<const ModelInput*> in;
    in.reserve(g->inputs.size());
    for (const ModelInput& x : g->inputs) in.push_back(&x);
    const std::vector<double> s = model.Score(in);
    double sum = 0, sum2 = 0;
    int k = 0;
    for (double v : s) {
      if (std::isfinite(v)) sum += v, ++k;
    }
    if (k < 2) continue;
    const double mean = sum / k;
    for (double v : s) {
      if (std::isfinite(v)) sum2 += (v - mean) * (v - mean);
    }
    sd_sum += std::sqrt(sum2 / k);
    mean_sum += mean;
    ++n;
  }
  const double sd = n > 0 ? sd_sum / n : 0;
  info->scale = std::isfinite(sd) && sd > 1e-12 ? sd : 1;
  info->offset = n > 0 && std::isfinite(mean_sum) ? mean_sum / n : 0;
}

}  // namespace

InputNeeds EnsembleModel::needs() const {
  InputNeeds n{.ast = true, .graph = false};
  for (const Member& m : members_) {
    const InputNeeds mn = m.model->needs();
    n.ast = n.ast || mn.ast;
    n.graph = n.graph || mn.graph;
  }
  return n;
}

absl::Status EnsembleModel::AddMember(std::unique_ptr<OfflineModel> model, EnsembleMemberInfo info) {
  if (model == nullptr) return absl::InvalidArgumentError("an ensemble member must be a model");
  if (model->kind() == "ensemble") return absl::InvalidArgumentError("an ensemble member cannot be an ensemble");
  if (!model->trained()) return absl::InvalidArgumentError("ensemble members must be trained (" + model->kind() + ")");
  info.kind = model->kind();
  if (info.feature_version == 0) info.feature_version = kFeatureVersion;
  if (info.graph_feature_version == 0) info.graph_feature_version = kGraphFeatureVersion;
  if (info.source.empty()) info.source = "given";
  members_.push_back({std::move(info), std::move(model)});
  fitted_ = false;
  return absl::OkStatus();
}

absl::Status EnsembleModel::Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>& valid,
                                  const TrainOptions& options) {
  // Earlier trained members are replaced; members added from elsewhere stay.
  const bool given = std::any_of(members_.begin(), members_.end(),
                                 [](const Member& m) { return m.info.source != "trained"; });
  const int count = options.members >= 0 ? options.members : (given ? 0 : kDefaultMembers);
  if (count == 0 && !given) return absl::InvalidArgumentError("an ensemble needs at least one member");

  // Member splits: the pool of training tasks and how many of them validate.
  std::vector<const TrainGroup*> pool;
  for (const TrainGroup& g : train) pool.push_back(&g);
  for (const TrainGroup& g : valid) pool.push_back(&g);
  const size_t n_valid = !valid.empty() ? valid.size()
                                        : std::max<size_t>(1, static_cast<size_t>(kDefaultValidShare * pool.size()));

  std::vector<Member> fresh;
  for (int i = 0; i < count; ++i) {
    EnsembleMemberInfo info;
    info.kind = "xgb";
    info.seed = options.seed + static_cast<uint64_t>(i);
    info.loss = options.member_losses.empty() ? (options.loss.empty() ? "pairwise" : options.loss)
                                              : options.member_losses[static_cast<size_t>(i) % options.member_losses.size()];
    info.source = "trained";
    info.feature_version = kFeatureVersion;
    info.graph_feature_version = kGraphFeatureVersion;
    TrainOptions o = options;
    o.seed = info.seed;
    o.loss = info.loss;
    if (options.progress) {
      o.progress = [&options, i, count](const TrainProgress& p) {
        TrainProgress q = p;
        q.member = i + 1;
        q.members = count;
        options.progress(q);
      };
    }
    std::unique_ptr<OfflineModel> model = MakeXgbOfflineModel();
    absl::Status st;
    if (options.member_splits && pool.size() >= 2) {
      std::vector<size_t> perm(pool.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 rng(info.seed ^ 0x5851f42d4c957f2dull);
      for (size_t j = perm.size(); j > 1; --j) std::swap(perm[j - 1], perm[search::UniformBelow(rng, j)]);
      std::vector<bool> held(pool.size(), false);
      for (size_t j = 0; j < std::min(n_valid, pool.size() - 1); ++j) held[perm[j]] = true;
      std::vector<TrainGroup> t, v;
      for (size_t j = 0; j < pool.size(); ++j) (held[j] ? v : t).push_back(*pool[j]);
      st = model->Train(t, v, o);
    } else {
      st = model->Train(train, valid, o);
    }
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("ensemble ", MemberName(static_cast<size_t>(i), info), ": ", st.message()));
    }
    fresh.push_back({std::move(info), std::move(model)});
  }

  // Commit: the added members first (in their order), then the trained ones.
  std::vector<Member> next;
  for (Member& m : members_) {
    if (m.info.source != "trained") next.push_back(std::move(m));
  }
  for (Member& m : fresh) next.push_back(std::move(m));
  members_ = std::move(next);
  std::vector<const TrainGroup*> fit;
  for (const TrainGroup* g : pool) fit.push_back(g);
  for (Member& m : members_) FitScale(*m.model, fit, &m.info);
  fitted_ = true;
  return absl::OkStatus();
}

absl::Status EnsembleModel::FineTune(const TrainGroup& group, const TrainOptions& options) {
  if (!trained()) return absl::FailedPreconditionError("the ensemble is not trained");
  std::vector<std::unique_ptr<OfflineModel>> tuned(members_.size());
  bool any = false;
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    auto copy = CreateOfflineModel(m.info.kind);
    if (!copy.ok()) return copy.status();
    auto payload = m.model->SavePayload();
    if (!payload.ok()) return payload.status();
    if (auto st = (*copy)->LoadPayload(*payload); !st.ok()) return st;
    TrainOptions o = options;
    o.seed = options.seed + m.info.seed;
    absl::Status st = (*copy)->FineTune(group, o);
    if (absl::IsUnimplemented(st)) continue;  // this member stays as trained offline
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat(MemberName(i, m.info), ": ", st.message()));
    tuned[i] = *std::move(copy);
    any = true;
  }
  if (!any) return absl::UnimplementedError("no member of the ensemble fine-tunes");
  for (size_t i = 0; i < members_.size(); ++i) {
    if (tuned[i] != nullptr) members_[i].model = std::move(tuned[i]);
  }
  return absl::OkStatus();
}

std::vector<std::vector<double>> EnsembleModel::MemberScores(const std::vector<const ModelInput*>& inputs) const {
  std::vector<std::vector<double>> out;
  out.reserve(members_.size());
  for (const Member& m : members_) out.push_back(m.model->Score(inputs));
  return out;
}

std::vector<double> EnsembleModel::Score(const std::vector<const ModelInput*>& inputs) const {
  std::vector<double> out(inputs.size(), 0.0);
  if (!trained() || inputs.empty()) return out;
  for (const Member& m : members_) {
    const std::vector<double> s = m.model->Score(inputs);
    for (size_t i = 0; i < out.size() && i < s.size(); ++i) out[i] += (s[i] - m.info.offset) / m.info.scale;
  }
  for (double& v : out) v /= static_cast<double>(members_.size());
  return out;
}

absl::StatusOr<std::string> EnsembleModel::SavePayload() const {
  if (!trained()) return absl::FailedPreconditionError("the ensemble is not trained");
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::string> payloads;
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    auto p = m.model->SavePayload();
    if (!p.ok()) return absl::Status(p.status().code(), absl::StrCat(MemberName(i, m.info), ": ", p.status().message()));
    list.push_back({{"kind", m.info.kind},
                    {"seed", m.info.seed},
                    {"loss", m.info.loss},
                    {"source", m.info.source},
                    {"feature_version", m.info.feature_version},
                    {"graph_feature_version", m.info.graph_feature_version},
                    {"scale", m.info.scale},
                    {"offset", m.info.offset},
                    {"payload_bytes", p->size()}});
    payloads.push_back(*std::move(p));
  }
  const nlohmann::json meta = {{"payload_version", kEnsemblePayloadVersion}, {"members", list}};
  const std::string meta_text = meta.dump();
  std::string out(kEnsembleMagic, sizeof(kEnsembleMagic));
  EnsPutU64(&out, meta_text.size());
  out += meta_text;
  for (const std::string& p : payloads) {
    EnsPutU64(&out, p.size());
    out += p;
  }
  return out;
}

absl::Status EnsembleModel::LoadPayload(const std::string& payload) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("not an ensemble model payload: " + why); };
  if (payload.size() < sizeof(kEnsembleMagic) ||
      std::memcmp(payload.data(), kEnsembleMagic, sizeof(kEnsembleMagic)) != 0)
    return bad("bad magic");
  size_t pos = sizeof(kEnsembleMagic);
  uint64_t meta_len = 0;
  if (!EnsGetU64(payload, &pos, &meta_len) || meta_len > payload.size() - pos) return bad("truncated");
  auto meta = nlohmann::json::parse(payload.substr(pos, meta_len), nullptr, false);
  pos += meta_len;
  if (!meta.is_object()) return bad("malformed header");
  std::vector<EnsembleMemberInfo> infos;
  try {
    const int version = meta.at("payload_version").get<int>();
    if (version != kEnsemblePayloadVersion)
      return bad(absl::StrCat("payload version ", version, ", this build reads ", kEnsemblePayloadVersion));
    for (const auto& j : meta.at("members")) {
      EnsembleMemberInfo info;
      info.kind = j.at("kind").get<std::string>();
      info.seed = j.at("seed").get<uint64_t>();
      info.loss = j.value("loss", "");
      info.source = j.value("source", "");
      info.feature_version = j.at("feature_version").get<int>();
      info.graph_feature_version = j.at("graph_feature_version").get<int>();
      info.scale = j.at("scale").get<double>();
      info.offset = j.at("offset").get<double>();
      infos.push_back(std::move(info));
    }
  } catch (const std::exception&) {
    return bad("header field missing or of the wrong type");
  }
  if (infos.empty()) return bad("no members");
  std::vector<Member> loaded;
  for (size_t i = 0; i < infos.size(); ++i) {
    EnsembleMemberInfo& info = infos[i];
    const std::string name = MemberName(i, info);
    if (info.kind == "ensemble") return bad(name + ": an ensemble member cannot be an ensemble");
    if (info.feature_version != kFeatureVersion)
      return bad(absl::StrCat(name, ": trained on feature version ", info.feature_version, ", this build extracts ",
                              kFeatureVersion, " (retrain it)"));
    if (info.graph_feature_version != kGraphFeatureVersion)
      return bad(absl::StrCat(name, ": trained on program-graph version ", info.graph_feature_version,
                              ", this build extracts ", kGraphFeatureVersion, " (retrain it)"));
    if (!std::isfinite(info.scale) || info.scale <= 0 || !std::isfinite(info.offset))
      return bad(absl::StrCat(name, ": scale ", info.scale, ", offset ", info.offset));
    uint64_t len = 0;
    if (!EnsGetU64(payload, &pos, &len) || len > payload.size() - pos) return bad(name + ": truncated");
    auto model = CreateOfflineModel(info.kind);
    if (!model.ok()) return bad(absl::StrCat(name, ": ", model.status().message()));
    if (auto st = (*model)->LoadPayload(payload.substr(pos, len)); !st.ok())
      return bad(absl::StrCat(name, ": ", st.message()));
    pos += len;
    loaded.push_back({std::move(info), *std::move(model)});
  }
  if (pos != payload.size()) return bad("trailing bytes after the members");
  members_ = std::move(loaded);
  fitted_ = true;
  return absl::OkStatus();
}

}  // namespace tune::costmodel
