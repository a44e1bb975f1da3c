// Retrainer: record counts per target polled on a thread of its own, models retrained from scratch and swapped in.
#include "tuner/retrainer.h"

#include <chrono>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "tuner/training_data.h"

namespace tune::tuner {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Retrainer::Retrainer(RetrainerOptions options) : options_(std::move(options)) {
  if (!options_.make_model) {
    const std::string kind = options_.kind;
    options_.make_model = [kind]() { return costmodel::CreateOfflineModel(kind); };
  }
  if (!options_.load_groups) options_.load_groups = LoadGroups;
}

absl::StatusOr<std::unique_ptr<Retrainer>> Retrainer::Manual(RetrainerOptions options) {
  if (options.every < 1) return absl::InvalidArgumentError(absl::StrCat("--retrain-every ", options.every, " is not >= 1"));
  if (options.db_path.empty()) return absl::InvalidArgumentError("retraining needs a record database");
  return std::unique_ptr<Retrainer>(new Retrainer(std::move(options)));
}

absl::StatusOr<std::unique_ptr<Retrainer>> Retrainer::Start(RetrainerOptions options) {
  auto r = Manual(std::move(options));
  if (!r.ok()) return r.status();
  Retrainer* raw = r->get();
  raw->thread_ = std::thread([raw] { raw->Loop(); });
  return r;
}

Retrainer::~Retrainer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Retrainer::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::duration<double>(options_.poll_s), [this] { return stop_; });
      if (stop_) return;
    }
    CheckNow();
  }
}

int64_t Retrainer::retrains() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retrains_;
}

std::optional<RetrainedModel> Retrainer::Latest(const std::string& target_key) const {
  Stored stored;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(target_key);
    if (it == models_.end()) return std::nullopt;
    stored = it->second;
  }
  // A copy of the job's own: models are not thread-safe, jobs run on threads of their own.
  auto model = options_.make_model();
  if (!model.ok() || *model == nullptr) return std::nullopt;
  if (absl::Status st = (*model)->LoadPayload(stored.payload); !st.ok()) {
    spdlog::warn("the retrained model of {} cannot be loaded: {}", target_key, std::string(st.message()));
    return std::nullopt;
  }
  return RetrainedModel{std::shared_ptr<const costmodel::OfflineModel>(*std::move(model)), stored.note};
}

int Retrainer::CheckNow() {
  std::lock_guard<std::mutex> check(check_mu_);
  if (db_ == nullptr) {
    // Read-only: the retrainer never writes; a database not created yet is looked at again later.
    auto db = dataset::RecordDatabase::OpenReadOnly(options_.db_path);
    if (!db.ok()) {
      spdlog::debug("retrainer: {}", std::string(db.status().message()));
      return 0;
    }
    db_ = *std::move(db);
  }
  auto targets = db_->Targets();
  if (!targets.ok()) {
    spdlog::warn("retrainer: cannot list the targets: {}", std::string(targets.status().message()));
    return 0;
  }
  int replaced = 0;
  for (const dataset::TargetInfo& target : *targets) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
    }
    auto counts = db_->StatusCounts(0, target.id);
    if (!counts.ok()) continue;
    int64_t records = 0;
    for (const auto& [status, n] : *counts) records += n;
    const int64_t last = trained_at_.count(target.id) ? trained_at_[target.id] : 0;
    if (records - last < options_.every) continue;
    trained_at_[target.id] = records;  // a failed attempt is retried after `every` more records
    RetrainEvent e = Train(*db_, target.id, target.key, records);
    if (e.error.empty()) ++replaced;
    if (options_.on_retrain) options_.on_retrain(e);
  }
  return replaced;
}

RetrainEvent Retrainer::Train(const dataset::RecordDatabase& db, int64_t target_id, const std::string& key,
                              int64_t records) {
  RetrainEvent e;
  e.target_key = key;
  e.records = records;
  const double start = SteadySeconds();
  auto finish = [&](const absl::Status& st) {
    e.seconds = SteadySeconds() - start;
    if (!st.ok()) e.error = std::string(st.message());
    return e;
  };
  auto model = options_.make_model();
  if (!model.ok()) return finish(model.status());
  if (*model == nullptr) return finish(absl::UnimplementedError("this build has no " + options_.kind + " model"));
  auto groups = options_.load_groups(db, target_id, (*model)->needs(), options_.max_per_task);
  if (!groups.ok()) return finish(groups.status());
  e.groups = static_cast<int>(groups->size());
  for (const auto& g : *groups) e.configs += static_cast<int64_t>(g.inputs.size());
  costmodel::TrainOptions to;
  to.seed = options_.seed;
  to.threads = options_.threads;
  if (absl::Status st = (*model)->Train(*groups, {}, to); !st.ok()) return finish(st);
  auto payload = (*model)->SavePayload();
  if (!payload.ok()) return finish(payload.status());
  Stored stored{(*model)->kind(), *std::move(payload),
                absl::StrCat("the daemon's ", (*model)->kind(), " model of ", key, " (trained on ", records,
                             " records at ", UtcNow(), ")")};
  {
    std::lock_guard<std::mutex> lock(mu_);
    models_[key] = std::move(stored);
    ++retrains_;
  }
  return finish(absl::OkStatus());
}

bool UseLatestModel(const Retrainer* retrainer, const std::string& target_key, TuneOptions* options) {
  if (retrainer == nullptr || options->pretrained != nullptr) return false;
  if (ResolveCostModel(options->cost_model, options->strategy, true) == "none") return false;  // it would rank nothing
  std::optional<RetrainedModel> m = retrainer->Latest(target_key);
  if (!m.has_value()) return false;
  options->pretrained = std::move(m->model);
  options->pretrained_note = std::move(m->note);
  return true;
}

}  // namespace tune::tuner
