// Training data for offline cost models: records loaded, featurized by task template and split by network.
#include "tuner/training_data.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "dataset/file_guard.h"
#include "dataset/record_exchange.h"
#include "measure/target.h"
#include "measure/task_factory.h"
#include "nlohmann/json.hpp"
#include "search/space.h"
#include "tuner/dataset_split.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

constexpr int64_t kImportBatch = 20000;  // records per import transaction from a --data file

/// The records of a file of `tune db export` lines (plain or gzip) imported into `db`,
/// streamed in batches. InvalidArgument "FILE:LINE: why" for a bad line, NotFound when the file
/// cannot be opened.
absl::Status ImportDataFile(const std::string& path, dataset::RecordDatabase* db) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return absl::NotFoundError("cannot read data file " + path);
  std::vector<dataset::PortableRecord> batch;
  int64_t records_read = 0;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    auto counts = db->ImportRecords(batch);
    batch.clear();
    if (!counts.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", counts.status().message()));
    return absl::OkStatus();
  };
  absl::Status read = dataset::ForEachRecordInFile(path, [&](dataset::PortableRecord record) {
    batch.push_back(std::move(record));
    ++records_read;
    return static_cast<int64_t>(batch.size()) >= kImportBatch ? flush() : absl::OkStatus();
  });
  if (absl::IsNotFound(read)) return absl::NotFoundError("cannot read data file " + path);
  if (!read.ok()) return read;
  if (auto st = flush(); !st.ok()) return st;
  if (records_read == 0) return absl::InvalidArgumentError(path + ": no records");
  return absl::OkStatus();
}

/// "llvm" or "cuda": the family part of a target key.
std::string FamilyOf(const std::string& target_key) { return target_key.substr(0, target_key.find('|')); }

/// The template a task's records were measured with, for the target family; nullptr with the
/// reason when the workload cannot be read or no current template has the task's version.
struct TaskTemplate {
  std::unique_ptr<codegen::Template> tmpl;
  std::string why_not;
};
TaskTemplate TemplateOf(const dataset::TaskInfo& task, const measure::Target& target) {
  TaskTemplate out;
  auto workload = codegen::Workload::FromKey(task.workload_key);
  if (!workload.ok()) {
    out.why_not = std::string(workload.status().message());
    return out;
  }
  // As the target's tasks make it, but with any thread count's parallel loops (threads unset),
  // so records of any thread count parse.
  measure::Target any_threads = target;
  if (any_threads.kind == "llvm") any_threads.threads = 0;
  absl::StatusOr<std::unique_ptr<codegen::Template>> tmpl = measure::TaskFactory::MakeTemplateFor(any_threads, *workload);
  if (!tmpl.ok()) {
    out.why_not = std::string(tmpl.status().message());
    return out;
  }
  if ((*tmpl)->version() != task.template_version) {
    out.why_not = absl::StrCat("template version ", task.template_version, ", current ", (*tmpl)->version());
    return out;
  }
  out.tmpl = *std::move(tmpl);
  return out;
}

/// The latency a record stands for: its median [s] when ok, +inf for a kernel that failed
/// when run (runtime error, timeout, wrong result); nullopt for records that say nothing about
/// the kernel's speed (invalid config, compile error).
std::optional<double> LatencyOf(const dataset::Record& r) {
  using measure::MeasureStatus;
  switch (r.result.status) {
    case MeasureStatus::kOk: {
      const double m = r.result.Median();
      if (!std::isfinite(m) || m < 0) return std::nullopt;
      return m;
    }
    case MeasureStatus::kRuntimeError:
    case MeasureStatus::kTimeout:
    case MeasureStatus::kWrongResult:
      return std::numeric_limits<double>::infinity();
    default:
      return std::nullopt;
  }
}

/// One task to featurize: its records already read, and where its group goes.
struct TaskJob {
  const dataset::TaskInfo* info = nullptr;
  std::unique_ptr<codegen::Template> tmpl;
  std::vector<dataset::Record> records;
  std::vector<double> latencies;  // per record
  costmodel::TrainGroup group;
  int64_t skipped = 0;
  std::string first_skip;  // why the first left-out record was left out
};

/// The usable records of `task` on `target_id` (at most `max_per_task`, the first by id).
absl::Status ReadTaskRecords(const dataset::RecordDatabase& db, int64_t target_id, int max_per_task, TaskJob* job) {
  auto records = db.Records(job->info->id, target_id);
  if (!records.ok()) return records.status();
  std::sort(records->begin(), records->end(),
            [](const dataset::Record& a, const dataset::Record& b) { return a.id < b.id; });
  for (dataset::Record& r : *records) {
    auto latency = LatencyOf(r);
    if (!latency) continue;
    if (max_per_task > 0 && static_cast<int>(job->records.size()) >= max_per_task) break;
    job->latencies.push_back(*latency);
    job->records.push_back(std::move(r));
  }
  return absl::OkStatus();
}

/// Lowers and featurizes every record of `job` into job->group; configs that no longer parse
/// or lower are counted in job->skipped.
void Featurize(TaskJob* job, costmodel::InputNeeds needs, std::atomic<int64_t>* done) {
  const search::ConfigSpace& space = job->tmpl->space();
  for (size_t i = 0; i < job->records.size(); ++i) {
    auto config = space.FromJson(job->records[i].config_json);
    absl::StatusOr<costmodel::ModelInput> in =
        config.ok() ? costmodel::MakeModelInput(*job->tmpl, *config, needs)
                    : absl::StatusOr<costmodel::ModelInput>(config.status());
    if (in.ok()) {
      job->group.inputs.push_back(*std::move(in));
      job->group.latencies_s.push_back(job->latencies[i]);
    } else {
      if (job->skipped++ == 0) job->first_skip = std::string(in.status().message());
    }
    if (done != nullptr) done->fetch_add(1, std::memory_order_relaxed);
  }
  job->records.clear();
  job->records.shrink_to_fit();
}

/// Featurizes `jobs` on `threads` threads (whole tasks per thread), calling `progress` from
/// the calling thread now and then.
void FeaturizeAll(std::vector<TaskJob>& jobs, costmodel::InputNeeds needs, int threads,
                  const std::function<void(int64_t, int64_t)>& progress) {
  int64_t total = 0;
  for (const TaskJob& j : jobs) total += static_cast<int64_t>(j.records.size());
  // Largest tasks first, so that one big task does not finish alone at the end.
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].records.size() > jobs[b].records.size(); });
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> running{0};
  auto worker = [&] {
    for (size_t k = next.fetch_add(1); k < order.size(); k = next.fetch_add(1)) Featurize(&jobs[order[k]], needs, &done);
    running.fetch_sub(1);
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  running = n;
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) pool.emplace_back(worker);
  if (progress) {
    while (running.load() > 0) {
      progress(done.load(), total);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  for (std::thread& t : pool) t.join();
  if (progress) progress(done.load(), total);
}

/// A target chosen by `spec` (key, id, family or "" = most records) among those with records.
absl::StatusOr<dataset::TargetInfo> ChooseTarget(const dataset::RecordDatabase& db, const std::string& spec) {
  auto targets = db.Targets();
  if (!targets.ok()) return targets.status();
  std::vector<std::pair<dataset::TargetInfo, int64_t>> counted;
  for (const dataset::TargetInfo& t : *targets) {
    auto counts = db.StatusCounts(0, t.id);
    if (!counts.ok()) return counts.status();
    int64_t n = 0;
    for (const auto& [status, c] : *counts) n += c;
    if (n > 0) counted.push_back({t, n});
  }
  if (counted.empty()) return absl::InvalidArgumentError("the dataset has no records");
  const dataset::TargetInfo* best = nullptr;
  int64_t best_n = -1;
  int64_t id = 0;
  const bool by_id = absl::SimpleAtoi(spec, &id);
  for (const auto& [t, n] : counted) {
    const bool match = spec.empty() || t.key == spec || (by_id && t.id == id) || FamilyOf(t.key) == spec;
    if (match && n > best_n) best = &t, best_n = n;
  }
  if (best == nullptr) {
    std::vector<std::string> keys;
    for (const auto& [t, n] : counted) keys.push_back(absl::StrCat(t.id, ": ", t.key, " (", n, " records)"));
    return absl::InvalidArgumentError(absl::StrCat("no records of target '", spec,
                                                   "' in the dataset (targets: ", absl::StrJoin(keys, "; "), ")"));
  }
  return *best;
}

/// `specs` with directories replaced by their model files (*.json, *.onnx), sorted.
absl::StatusOr<std::vector<std::string>> ExpandNetworks(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  for (const std::string& spec : specs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(spec, ec)) {
      out.push_back(spec);
      continue;
    }
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(spec, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".json" || ext == ".onnx")) files.push_back(entry.path().string());
    }
    if (ec) return absl::InvalidArgumentError("cannot list the networks in " + spec);
    if (files.empty()) return absl::InvalidArgumentError("no network files (*.json, *.onnx) in " + spec);
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

/// An owned temporary file name, removed (with SQLite's side files) on destruction.
class TempDbPath {
 public:
  TempDbPath() {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (ec) dir = "/tmp";
    std::string templ = (dir / "tune-train-XXXXXX").string();
    int fd = mkstemp(templ.data());
    if (fd >= 0) {
      close(fd);
      std::filesystem::remove(templ, ec);
      path_ = templ + ".db";
    }
  }
  ~TempDbPath() {
    if (path_.empty()) return;
    dataset::RemoveDatabaseFiles(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

nlohmann::json SetCounts(const std::vector<costmodel::TrainGroup>& groups) {
  int64_t configs = 0;
  for (const auto& g : groups) configs += static_cast<int64_t>(g.inputs.size());
  return {{"tasks", groups.size()}, {"records", configs}};
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& options,
                                              std::function<void(int64_t, int64_t)> progress) {
  if (options.db_path.empty() == options.data_path.empty()) {
    return absl::InvalidArgumentError("give the records as exactly one of --db or --data");
  }
  if (!(options.valid_share >= 0 && options.valid_share < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--valid-share ", options.valid_share, " is not in [0, 1)"));
  }
  if (!options.holdout.empty() && options.networks.empty()) {
    return absl::InvalidArgumentError("--holdout needs the networks of the dataset (--networks)");
  }
  if (!options.needs.ast && !options.needs.graph) {
    return absl::InvalidArgumentError("the model reads neither AST features nor program graphs");
  }

  // The networks first: a bad name fails before any data is read.
  std::vector<SplitInput> networks;
  {
    auto specs = ExpandNetworks(options.networks);
    if (!specs.ok()) return specs.status();
    for (const std::string& spec : *specs) {
      auto model = LoadModel(spec);
      if (!model.ok()) return absl::InvalidArgumentError(std::string(model.status().message()));
      networks.push_back({spec, *std::move(model)});
    }
  }

  // The records: a database opened read-only, or a data file imported into a temporary one.
  TempDbPath temp;
  std::unique_ptr<dataset::RecordDatabase> db;
  std::string source;
  if (!options.db_path.empty()) {
    auto opened = dataset::RecordDatabase::OpenReadOnly(options.db_path);
    if (!opened.ok()) return absl::InvalidArgumentError(std::string(opened.status().message()));
    db = *std::move(opened);
    source = options.db_path;
  } else {
    if (temp.path().empty()) return absl::UnavailableError("cannot create a temporary database");
    auto opened = dataset::RecordDatabase::Open(temp.path(), /*create=*/true);
    if (!opened.ok()) return opened.status();
    db = *std::move(opened);
    if (auto st = ImportDataFile(options.data_path, db.get()); !st.ok()) return st;
    source = options.data_path;
  }

  auto target_info = ChooseTarget(*db, options.target);
  if (!target_info.ok()) return target_info.status();
  auto target = measure::Target::FromJson(target_info->json);
  if (!target.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("target ", target_info->key, ": ", target.status().message()));
  }

  TrainingData data;
  data.target_key = target_info->key;
  data.target_family = target->kind;

  // Which task goes where.
  auto tasks = db->Tasks();
  if (!tasks.ok()) return tasks.status();
  std::map<int64_t, const dataset::TaskInfo*> by_id;
  for (const dataset::TaskInfo& t : *tasks) by_id[t.id] = &t;
  std::set<int64_t> test_ids;
  std::map<int64_t, double> weight;  // task id -> its count over the networks
  std::optional<DatasetSplit> split;
  if (!options.holdout.empty()) {
    auto s = SplitDataset(*db, networks, options.holdout);
    if (!s.ok()) return s.status();
    split = *std::move(s);
    for (const SplitSetTask& t : split->test) test_ids.insert(t.task_id);
  }
  for (const SplitInput& net : networks) {
    for (const ZooLayer& layer : net.model.layers) {
      for (const dataset::TaskInfo& t : *tasks) {
        if (t.workload_key == layer.workload.Key()) weight[t.id] += layer.count;
      }
    }
  }

  // Every task with usable records on the target, with the template of its version.
  std::vector<TaskJob> jobs;
  for (const dataset::TaskInfo& t : *tasks) {
    TaskJob job;
    job.info = &t;
    if (auto st = ReadTaskRecords(*db, target_info->id, options.max_per_task, &job); !st.ok()) return st;
    if (job.records.empty()) continue;
    TaskTemplate tt = TemplateOf(t, *target);
    if (tt.tmpl == nullptr) {
      data.skipped += static_cast<int64_t>(job.records.size());
      data.skip_reasons.push_back(absl::StrCat(t.workload_key, ": ", job.records.size(), " records: ", tt.why_not));
      continue;
    }
    job.tmpl = std::move(tt.tmpl);
    job.group.name = t.workload_key;
    job.group.task_id = t.id;
    auto w = weight.find(t.id);
    job.group.weight = w != weight.end() && w->second > 0 ? w->second : 1;
    jobs.push_back(std::move(job));
  }
  db.reset();  // the temporary database is no longer needed

  FeaturizeAll(jobs, options.needs, options.threads, progress);

  // Groups by set; validation = a seeded share of the training tasks.
  std::vector<costmodel::TrainGroup> train_all;
  std::map<int64_t, size_t> test_index;  // task id -> index into data.test
  for (TaskJob& job : jobs) {
    data.skipped += job.skipped;
    if (job.skipped > 0) {
      data.skip_reasons.push_back(absl::StrCat(job.info->workload_key, ": ", job.skipped, " records: ", job.first_skip));
    }
    if (job.group.inputs.empty()) continue;
    data.records += static_cast<int64_t>(job.group.inputs.size());
    data.template_versions[job.tmpl->name()] = job.tmpl->version();
    if (test_ids.count(job.info->id) > 0) {
      test_index[job.info->id] = data.test.size();
      data.test.push_back(std::move(job.group));
    } else {
      train_all.push_back(std::move(job.group));
    }
  }
  jobs.clear();
  std::sort(train_all.begin(), train_all.end(),
            [](const costmodel::TrainGroup& a, const costmodel::TrainGroup& b) { return a.task_id < b.task_id; });
  size_t n_valid = static_cast<size_t>(std::llround(options.valid_share * static_cast<double>(train_all.size())));
  if (options.valid_share > 0 && n_valid == 0 && train_all.size() >= 2) n_valid = 1;
  if (n_valid >= train_all.size()) n_valid = train_all.size() > 0 ? train_all.size() - 1 : 0;
  std::vector<size_t> perm(train_all.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(options.seed);
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[search::UniformBelow(rng, i)]);
  std::vector<bool> is_valid(train_all.size(), false);
  for (size_t i = 0; i < n_valid; ++i) is_valid[perm[i]] = true;
  for (size_t i = 0; i < train_all.size(); ++i) {
    (is_valid[i] ? data.valid : data.train).push_back(std::move(train_all[i]));
  }

  bool trainable = false;
  for (const auto& g : data.train) {
    for (size_t i = 1; i < g.latencies_s.size() && !trainable; ++i) trainable = g.latencies_s[i] != g.latencies_s[0];
  }
  if (!trainable) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": nothing to train on for target ", data.target_key,
                                                   " (no training task has two configs of different latency)"));
  }

  // The held-out networks over the test groups.
  if (split) {
    for (const SplitNetwork& net : split->networks) {
      if (!net.held_out) continue;
      TestNetwork tn;
      tn.name = net.name;
      tn.network.name = net.name;
      for (const SplitNetworkTask& t : net.tasks) {
        auto it = test_index.find(t.task_id);
        if (t.task_id == 0 || it == test_index.end()) continue;
        tn.network.tasks.push_back({it->second, static_cast<double>(std::max(1, t.weight))});
      }
      data.test_networks.push_back(std::move(tn));
    }
  }

  nlohmann::json summary;
  summary["source"] = source;
  summary["target"] = data.target_key;
  summary["records"] = data.records;
  summary["skipped"] = data.skipped;
  summary["train"] = SetCounts(data.train);
  summary["valid"] = SetCounts(data.valid);
  summary["test"] = SetCounts(data.test);
  std::vector<std::string> net_names;
  for (const SplitInput& n : networks) net_names.push_back(n.model.name);
  summary["networks"] = net_names;
  summary["holdout"] = options.holdout;
  summary["valid_share"] = options.valid_share;
  summary["max_per_task"] = options.max_per_task;
  summary["seed"] = options.seed;
  data.summary_json = summary.dump();
  return data;
}

absl::StatusOr<std::vector<costmodel::TrainGroup>> LoadGroups(const dataset::RecordDatabase& db, int64_t target_id,
                                                              costmodel::InputNeeds needs, int max_per_task) {
  auto targets = db.Targets();
  if (!targets.ok()) return targets.status();
  const dataset::TargetInfo* info = nullptr;
  for (const dataset::TargetInfo& t : *targets) {
    if (t.id == target_id) info = &t;
  }
  if (info == nullptr) return absl::InvalidArgumentError(absl::StrCat("no target ", target_id, " in the database"));
  auto target = measure::Target::FromJson(info->json);
  if (!target.ok()) return absl::InvalidArgumentError(absl::StrCat("target ", info->key, ": ", target.status().message()));
  auto tasks = db.Tasks();
  if (!tasks.ok()) return tasks.status();
  std::vector<costmodel::TrainGroup> groups;
  for (const dataset::TaskInfo& t : *tasks) {
    TaskJob job;
    job.info = &t;
    if (auto st = ReadTaskRecords(db, target_id, max_per_task, &job); !st.ok()) return st;
    if (job.records.empty()) continue;
    TaskTemplate tt = TemplateOf(t, *target);
    if (tt.tmpl == nullptr) continue;
    job.tmpl = std::move(tt.tmpl);
    job.group.name = t.workload_key;
    job.group.task_id = t.id;
    Featurize(&job, needs, nullptr);
    if (!job.group.inputs.empty()) groups.push_back(std::move(job.group));
  }
  return groups;
}

}  // namespace tune::tuner
