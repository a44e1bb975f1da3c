// Dataset collection: a random phase and a guided phase per task, both run by the tuning loop.
#include "tuner/dataset_collect.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A task as collection measures it: the same space, keys and measurements, without the
/// untuned default schedule (a dataset holds the configs its strategies proposed, each once).
class NoDefaultTask : public measure::Task {
 public:
  explicit NoDefaultTask(measure::Task* inner) : inner_(inner) {}
  const measure::TaskKeys& keys() const override { return inner_->keys(); }
  const search::ConfigSpace& space() const override { return inner_->space(); }
  std::optional<search::Config> DefaultConfig() const override { return std::nullopt; }
  const codegen::Template* tmpl() const override { return inner_->tmpl(); }
  std::vector<measure::MeasureResult> Measure(const std::vector<search::Config>& configs,
                                              const measure::MeasureProtocol& protocol) override {
    return inner_->Measure(configs, protocol);
  }
  void Committed() override { inner_->Committed(); }

 private:
  measure::Task* inner_;
};

}  // namespace

absl::StatusOr<std::vector<TuneTask>> CollectTasks(const std::vector<std::string>& models,
                                                   const std::vector<std::string>& inputs, int64_t layout_block) {
  std::vector<TuneTask> out;
  std::map<std::string, size_t> by_key;
  for (const std::string& name : models) {
    auto model = LoadModel(name, inputs, layout_block);
    if (!model.ok()) return model.status();
    for (const TuneTask& t : ExtractTasks(*model)) {
      const std::string key = t.workload.Key();
      auto it = by_key.find(key);
      if (it != by_key.end()) {
        out[it->second].count += t.count;
        continue;
      }
      by_key.emplace(key, out.size());
      TuneTask named = t;
      named.name = model->name + "/" + t.name;
      out.push_back(std::move(named));
    }
  }
  return out;
}

absl::StatusOr<RecordCount> CountRecords(const dataset::RecordDatabase& db, const measure::Task& task,
                                         const std::string& target_key) {
  RecordCount count;
  count.best_s = kInf;
  auto info = db.FindTask(task.keys().workload_key, task.keys().template_version);
  if (!info.ok()) return info.status();
  auto target = db.FindTarget(target_key);
  if (!target.ok()) return target.status();
  if (!info->has_value() || !target->has_value()) return count;
  auto records = db.Records((*info)->id, (*target)->id);
  if (!records.ok()) return records.status();
  // As the tuning loop counts them with resume on (tuner.cc, Prepare): one per distinct config
  // of the space; the default schedule and finalist re-measurements are not trials.
  const search::ConfigSpace& space = task.space();
  std::unordered_set<search::Config, search::ConfigHash> seen;
  for (const dataset::Record& rec : *records) {
    if (rec.strategy == "default" || rec.strategy == "finalist") continue;
    auto config = space.FromJson(rec.config_json);
    if (!config.ok() || !seen.insert(*config).second) continue;
    ++count.records;
    if (rec.strategy == "random") ++count.random;
    if (rec.result.ok()) {
      ++count.ok;
      count.best_s = std::min(count.best_s, rec.result.Median());
    } else {
      ++count.failed;
    }
  }
  return count;
}

absl::StatusOr<std::vector<CollectedTask>> CollectDataset(dataset::RecordDatabase* db, measure::TaskFactory& factory,
                                                          const std::vector<TuneTask>& infos,
                                                          const std::vector<measure::Task*>& tasks,
                                                          const CollectOptions& options, CollectProgressFn progress,
                                                          std::function<void(const std::string&)> say) {
  if (infos.size() != tasks.size()) return absl::InvalidArgumentError("one task is needed per task description");
  if (options.per_task < 1 || options.per_task > CollectOptions::kMaxPerTask) {
    return absl::InvalidArgumentError(
        absl::StrCat("records per task ", options.per_task, " is not in 1 to ", CollectOptions::kMaxPerTask));
  }
  if (!(options.random_share >= 0 && options.random_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("random share ", options.random_share, " is not in [0, 1]"));
  }
  const std::string target_key = factory.target().Key();
  const int n = static_cast<int>(tasks.size());
  const int per_task = options.per_task;
  const int random_goal = static_cast<int>(std::lround(options.random_share * per_task));

  // What each task has and misses, before anything is measured.
  std::vector<CollectedTask> out(n);
  std::vector<RecordCount> before(n);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    auto count = CountRecords(*db, *tasks[i], target_key);
    if (!count.ok()) return count.status();
    before[i] = *count;
    out[i].task = infos[i];
    out[i].before = count->records;
    total += std::max(0, per_task - count->records);
  }

  const double start = NowS();
  int64_t done = 0;
  for (int i = 0; i < n; ++i) {
    CollectedTask& c = out[i];
    const int missing = per_task - before[i].records;
    if (missing <= 0) {
      c.already = true;
      if (say) say(absl::StrCat("task ", i + 1, ": ", before[i].records, " records already (", infos[i].name, ")"));
      continue;
    }
    if (options.tune.should_stop && options.tune.should_stop()) break;
    // The random share of the whole per_task, less the random records there are: a rerun with
    // a larger N keeps the mix.
    const int random_want = std::clamp(random_goal - before[i].random, 0, missing);
    NoDefaultTask task(tasks[i]);
    int counted = before[i].records;  // what the loop counts against the budget so far
    struct Phase {
      std::string strategy;
      int want;
      uint64_t seed_offset;
    };
    const Phase phases[] = {{"random", random_want, 0}, {options.guided_strategy, missing - random_want, 1}};
    for (const Phase& phase : phases) {
      if (phase.want <= 0) continue;
      if (options.tune.should_stop && options.tune.should_stop()) break;
      TuneOptions o = options.tune;
      o.strategy = phase.strategy;
      if (phase.strategy == "random") o.cost_model = "none";
      o.trials_per_task = counted + phase.want;
      o.total_trials = 0;
      o.resume = true;
      o.finalists = 0;
      o.given_configs.clear();
      o.start_configs = false;  // (the dataset is the phases' own draws and proposals)
      o.early_stop = 0;
      o.task_scheduler = "round-robin";
      // Each task and phase draws from its own stream; the same seed gives the same dataset.
      o.seed = options.tune.seed + 2 * static_cast<uint64_t>(i) + phase.seed_offset;
      auto run_factory = measure::TaskFactory::Create(factory.target());
      if (!run_factory.ok()) return run_factory.status();
      const int64_t done_before = done;
      const int base = counted;
      auto report = [&](const ProgressEvent& e) {
        done = done_before + std::max(0, e.trials - base);
        if (!progress) return;
        CollectProgress p;
        p.task_index = i;
        p.task_count = n;
        p.task = &infos[i];
        p.done = done;
        p.total = total;
        p.elapsed_s = NowS() - start;
        p.rate = p.elapsed_s > 0 ? static_cast<double>(done) / p.elapsed_s : 0;
        p.eta_s = p.rate > 0 ? static_cast<double>(total - done) / p.rate : 0;
        progress(p);
      };
      Tuner tuner(db, std::move(*run_factory), o, report);
      auto outcomes = tuner.Run(std::vector<LoopTask>{{infos[i], &task}});
      if (!outcomes.ok()) return outcomes.status();
      const TaskOutcome& outcome = outcomes->front();
      c.measured_now += outcome.measured_now;
      done = done_before + outcome.measured_now;
      counted = outcome.trials;
      if (!outcome.skipped.empty()) {
        c.skipped = outcome.skipped;
        break;
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    auto count = CountRecords(*db, *tasks[i], target_key);
    if (!count.ok()) return count.status();
    out[i].after = *count;
  }
  return out;
}

}  // namespace tune::tuner
