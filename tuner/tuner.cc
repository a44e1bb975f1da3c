// The tuning loop: per task, measure the default schedule, then search within the budget.
#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/table.h"
#include "codegen/ir/workload.h"
#include "costmodel/cost_model_adapters.h"
#include "costmodel/pretrained_cost_model.h"
#include "search/auto_strategy.h"
#include "search/strategy.h"
#include "spdlog/spdlog.h"
#include "search/task_scheduler.h"
#include "tuner/config_transfer.h"
#include "tuner/nearest_tasks.h"

namespace tune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kDefaultStrategy[] = "default";
using dataset::kFinalistStrategy;
constexpr char kGivenStrategy[] = "given";
constexpr char kTransferStrategy[] = "transfer";
constexpr char kStartStrategy[] = "start";

/// A config as text for messages: its JSON, or its raw indices when they are out of range.
std::string ConfigText(const search::ConfigSpace& space, const search::Config& config) {
  bool in_range = config.size() == space.knobs().size();
  for (size_t k = 0; in_range && k < config.size(); ++k) {
    in_range = config[k] >= 0 && static_cast<size_t>(config[k]) < space.knobs()[k].options.size();
  }
  return in_range ? space.ToJson(config) : absl::StrCat("[", absl::StrJoin(config, ","), "] (indices)");
}

// "run 12 (pid 4242 on host h)": who holds a lease, for messages.
std::string HolderText(const dataset::LeaseHolder& holder) {
  return absl::StrCat("run ", holder.run_id, " (pid ", holder.pid, " on host ", holder.host, ")");
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string ResolveStrategy(const std::string& strategy, const std::string& cost_model, bool pretrained) {
  return search::AutoStrategy::Resolve(strategy, pretrained || (cost_model != "auto" && cost_model != "none"));
}

std::string ResolveCostModel(const std::string& name, const std::string& strategy, bool pretrained) {
  if (name != "auto") return name;
  const std::string s = ResolveStrategy(strategy, name, pretrained);
  return (s == "sa" || s == "evolutionary" || s == "bandit") ? "xgb" : "none";
}

measure::MeasureProtocol DefaultScheduleProtocol(const measure::MeasureProtocol& p) {
  measure::MeasureProtocol d = p;
  d.warmup = 0;
  d.repeats = std::min(p.repeats, 3);
  d.min_repeat_ms = 0;
  d.timeout_s = std::max(p.timeout_s, 120.0);
  return d;
}

uint64_t TaskDataSeed(uint64_t run_seed) { return run_seed ^ 0x9e3779b97f4a7c15ULL; }

Tuner::Tuner(dataset::RecordDatabase* db, std::unique_ptr<measure::TaskFactory> factory, TuneOptions options,
             ProgressFn progress)
    : db_(db), factory_(std::move(factory)), options_(std::move(options)), progress_(std::move(progress)) {}

Tuner::Tuner(dataset::RecordDatabase* db, measure::Target target, measure::RunnerFactory runners,
             TuneOptions options, ProgressFn progress)
    : db_(db), options_(std::move(options)), progress_(std::move(progress)) {
  options_.parallel_tasks = nullptr;  // kernels timed here one batch at a time (TuneOptions)
  measure::TaskFactoryOptions fo;
  fo.runners = std::move(runners);
  fo.build_threads = options_.build_threads;
  factory_ = measure::TaskFactory::Create(target, std::move(fo));
}

Tuner::Tuner(dataset::RecordDatabase* db, measure::Target target, std::unique_ptr<measure::KernelMeasurer> measurer,
             TuneOptions options, ProgressFn progress)
    : db_(db), options_(std::move(options)), progress_(std::move(progress)) {
  measure::TaskFactoryOptions fo;
  fo.measurer = std::move(measurer);
  factory_ = measure::TaskFactory::Create(target, std::move(fo));
}

/// Everything the loop keeps per task.
struct Tuner::TaskRun {
  int index = 0;
  TuneTask info;
  measure::Task* task = nullptr;
  search::SearchStrategy* strategy = nullptr;  // owned_strategy, or the caller's
  std::unique_ptr<search::SearchStrategy> owned_strategy;
  search::CostModel* model = nullptr;          // owned_model, or the caller's; null: none
  std::unique_ptr<costmodel::FeatureCostModel> owned_model;
  // With TuneOptions::pretrained: the blend that owns owned_model's model, and what it says.
  std::unique_ptr<costmodel::PretrainedCostModel> owned_pretrained;
  std::vector<search::Config> history;  // every measured config of this task (for Fit)
  std::vector<double> history_costs;
  std::unordered_set<search::Config, search::ConfigHash> seen;  // history, as a set
  std::vector<search::Config> given;  // TuneOptions::given_configs not yet measured, in order, once each
  std::vector<search::Config> transferred;  // config-transfer seeds not yet measured (SeedFromSimilar)
  std::vector<search::Config> started;      // the template's start points not yet measured (SeedFromTemplate)
  bool transfer_tried = false;
  TaskOutcome outcome;
  search::TaskProgress progress;
  int64_t target_id = 0, run_id = 0;
  int64_t last_record_id = 0;  // records up to this id are known (CatchUp reads the newer ones)
  int since_improvement = 0;
  int reserved = 0;  // RunConcurrent: trials of the total budget held by its batch in flight
  bool finalized = false;  // its finalists measured (RunConcurrent does so once its budget is spent)
};

absl::StatusOr<std::vector<TaskOutcome>> Tuner::Run(const std::vector<TuneTask>& tasks) {
  if (!factory_.ok()) return factory_.status();
  std::vector<std::unique_ptr<measure::Task>> made;
  std::vector<LoopTask> loop;
  for (const TuneTask& t : tasks) {
    auto task = (*factory_)->Make({t.workload, TaskDataSeed(options_.seed)});
    if (!task.ok()) return task.status();
    made.push_back(std::move(*task));
    loop.push_back({t, made.back().get()});
  }
  return Run(loop);
}

absl::StatusOr<std::vector<TaskOutcome>> Tuner::Run(const std::vector<LoopTask>& tasks) {
  if (!factory_.ok()) return factory_.status();
  const measure::Target& target = (*factory_)->target();
  start_ = Now();
  auto scheduler = search::TaskScheduler::Create(options_.task_scheduler, options_.seed);
  if (!scheduler.ok()) return scheduler.status();
  const int n = static_cast<int>(tasks.size());
  std::vector<TaskRun> runs(n);
  // The given configs parsed in every task's space before anything is written: a config that
  // does not fit fails the run with nothing recorded.
  for (int i = 0; i < n; ++i) {
    runs[i].index = i;
    runs[i].info = tasks[i].info;
    runs[i].task = tasks[i].task;
    runs[i].strategy = tasks[i].strategy;
    runs[i].model = tasks[i].cost_model;
    for (const std::string& text : options_.given_configs) {
      auto config = ParseGiven(*runs[i].task, text);
      if (!config.ok()) return config.status();
      std::vector<search::Config>& given = runs[i].given;
      if (std::find(given.begin(), given.end(), *config) == given.end()) given.push_back(*config);
    }
  }
  auto target_id = db_->UpsertTarget({0, target.Key(), target.ToJson()});
  if (!target_id.ok()) return target_id.status();
  auto run_id = db_->StartRun(options_.command, target.Key());
  if (!run_id.ok()) return run_id.status();
  // From here on the run ends marked: finished, interrupted, or failed with the error.
  absl::StatusOr<std::vector<TaskOutcome>> out;
  {
    auto heartbeat = dataset::RunHeartbeat::Start(db_->path(), *run_id);
    if (!heartbeat.ok()) {
      out = heartbeat.status();
    } else {
      try {
        out = RunStarted(runs, **scheduler, *target_id, *run_id);
      } catch (const std::exception& e) {
        out = absl::InternalError(absl::StrCat("the tuning loop ended by an exception: ", e.what()));
      }
    }
  }
  if (!out.ok()) {
    // A batch cancelled because a stop was asked for ends the run as a stop between batches does.
    const bool stopped = absl::IsCancelled(out.status()) && options_.should_stop && options_.should_stop();
    const std::string status = stopped ? "interrupted" : "failed";
    if (auto st = db_->FinishRun(*run_id, status, stopped ? "" : std::string(out.status().message())); !st.ok()) {
      spdlog::warn("run {} could not be marked {}: {}", *run_id, status, std::string(st.message()));
    }
  }
  return out;
}

absl::StatusOr<std::vector<TaskOutcome>> Tuner::RunStarted(std::vector<TaskRun>& runs,
                                                           search::TaskScheduler& scheduler, int64_t target_id,
                                                           int64_t run_id) {
  const int n = static_cast<int>(runs.size());
  task_count_ = n;
  total_budget_ = options_.total_trials > 0 ? std::min(options_.total_trials, options_.trials_per_task * n)
                                            : options_.trials_per_task * n;
  done_trials_ = 0;
  reserved_ = 0;

  for (int i = 0; i < n; ++i) {
    // Round-robin splits a total budget evenly; the adaptive schedulers share it freely.
    int budget = options_.trials_per_task;
    if (options_.task_scheduler == "round-robin" && options_.total_trials > 0) {
      budget = std::min(budget, total_budget_ / n + (i < total_budget_ % n ? 1 : 0));
    }
    runs[i].progress.budget = budget;
    runs[i].progress.weight = runs[i].info.count;
  }

  bool interrupted = false;
  // One task has no other task's batch to overlap with: the sequential loop, on this thread.
  if (!options_.parallel_tasks || n == 1) {
    for (int i = 0; i < n; ++i) {
      if (auto st = Prepare(runs[i], target_id, run_id); !st.ok()) return st;
    }
    if (auto st = RunSequential(runs, scheduler, &interrupted); !st.ok()) return st;
    if (!interrupted) {
      for (auto& t : runs) {
        if (auto st = Finalize(t); !st.ok()) return st;
      }
    }
  } else {
    // The tasks' default schedules K at a time, in task order.
    int next = 0;
    if (auto st = RunOnThreads([&](int) { return next < n ? next++ : kNoMore; },
                               [&](int i) { return Prepare(runs[i], target_id, run_id); });
        !st.ok()) {
      return st;
    }
    if (auto st = RunConcurrent(runs, scheduler, &interrupted); !st.ok()) return st;
    if (!interrupted) {
      next = 0;
      if (auto st = RunOnThreads([&](int) { return next < n ? next++ : kNoMore; },
                                 [&](int i) { return runs[i].finalized ? absl::OkStatus() : Finalize(runs[i]); });
          !st.ok()) {
        return st;
      }
    }
  }
  std::vector<TaskOutcome> out;
  for (auto& t : runs) {
    Report(t, true);
    out.push_back(t.outcome);
  }
  if (auto st = db_->FinishRun(run_id, interrupted ? "interrupted" : "finished", RunNote(out)); !st.ok()) return st;
  return out;
}

absl::Status Tuner::RunSequential(std::vector<TaskRun>& runs, search::TaskScheduler& scheduler, bool* interrupted) {
  const int n = static_cast<int>(runs.size());
  std::vector<search::TaskProgress> progress(n);
  while (done_trials_ < total_budget_) {
    if (options_.should_stop && options_.should_stop()) {
      *interrupted = true;
      break;
    }
    for (int i = 0; i < n; ++i) progress[i] = runs[i].progress;
    int i = scheduler.Next(progress);
    if (i < 0) break;
    TaskRun& t = runs[i];
    int want = std::min({options_.batch, t.progress.budget - t.outcome.trials, total_budget_ - done_trials_});
    if (auto st = RunBatch(t, want); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Tuner::RunConcurrent(std::vector<TaskRun>& runs, search::TaskScheduler& scheduler, bool* interrupted) {
  const int n = static_cast<int>(runs.size());
  // What the scheduler sees: a task with a batch in flight is "done" for now (it is never
  // picked twice), with its progress as it was when its batch started (its thread changes it).
  std::vector<search::TaskProgress> progress(n);
  std::vector<bool> in_flight(n, false);
  // Called under mu_; the batch of the task it names starts with its share of the budget held.
  auto pick = [&](int active) -> int {
    for (int i = 0; i < n; ++i) {
      if (in_flight[i] && runs[i].reserved == 0) in_flight[i] = false;  // its batch ended
      if (!in_flight[i]) progress[i] = runs[i].progress;
    }
    if (options_.should_stop && options_.should_stop()) {
      *interrupted = true;
      return kNoMore;
    }
    // The budget left is held by batches in flight: what they do not use is given back.
    if (done_trials_ + reserved_ >= total_budget_) return active > 0 ? kWait : kNoMore;
    int i = scheduler.Next(progress);
    // A task without budget of its own left is done (as RunBatch with nothing to want says).
    while (i >= 0 && runs[i].progress.budget - runs[i].outcome.trials <= 0) {
      runs[i].progress.done = true;
      progress[i] = runs[i].progress;
      i = scheduler.Next(progress);
    }
    if (i < 0) return active > 0 ? kWait : kNoMore;
    TaskRun& t = runs[i];
    const int want = std::min(
        {options_.batch, t.progress.budget - t.outcome.trials, total_budget_ - done_trials_ - reserved_});
    t.reserved = want;
    reserved_ += want;
    in_flight[i] = true;
    progress[i].done = true;
    return i;
  };
  auto work = [&](int i) {
    TaskRun& t = runs[i];
    absl::Status st = RunBatch(t, t.reserved, t.reserved);
    // A task whose own budget is spent gets no other batch: its finalists are measured now, on
    // this thread, while other tasks' batches are in flight, rather than after the last of them.
    // The task stays in flight for `pick` (t.reserved) until they are committed.
    const bool finish =
        st.ok() && t.progress.budget - t.outcome.trials <= 0 && !(options_.should_stop && options_.should_stop());
    {
      std::lock_guard<std::mutex> lock(mu_);
      reserved_ -= t.reserved;
      if (!finish) t.reserved = 0;
    }
    if (finish) {
      st = Finalize(t);
      t.finalized = true;
      std::lock_guard<std::mutex> lock(mu_);
      t.reserved = 0;
    }
    return st;
  };
  return RunOnThreads(pick, work);
}

int Tuner::Parallelism() const {
  return options_.parallel_tasks ? std::max(1, options_.parallel_tasks()) : 1;
}

absl::Status Tuner::RunOnThreads(const std::function<int(int active)>& pick,
                                 const std::function<absl::Status(int)>& work) {
  std::map<uint64_t, std::thread> threads;  // by start number, until joined
  std::vector<uint64_t> ended;              // threads that have returned, not yet joined
  uint64_t started = 0;
  int active = 0;
  absl::Status first_error;
  auto keep_error = [&](const absl::Status& st) {  // under mu_
    if (st.ok()) return;
    if (first_error.ok() || (absl::IsCancelled(first_error) && !absl::IsCancelled(st))) first_error = st;
  };
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (!ended.empty()) {
      std::vector<std::thread> done;
      for (uint64_t id : ended) {
        done.push_back(std::move(threads.at(id)));
        threads.erase(id);
      }
      ended.clear();
      lock.unlock();
      for (std::thread& th : done) th.join();
      lock.lock();
    }
    int next = kNoMore;
    if (first_error.ok()) {
      lock.unlock();
      const int limit = Parallelism();  // asked without the lock: it may take locks of its own
      lock.lock();
      next = active < limit ? pick(active) : kWait;
    }
    if (next == kNoMore && active == 0) break;
    if (next < 0) {
      // Woken when an item ends; the time-out asks again about a stop and the parallelism.
      ended_.wait_for(lock, std::chrono::milliseconds(100), [&] { return !ended.empty(); });
      continue;
    }
    const uint64_t id = started++;
    ++active;
    try {
      // Its bookkeeping at the end takes mu_, held here until the thread is in `threads`.
      threads.emplace(id, std::thread([&, id, next] {
        absl::Status st;
        try {
          st = work(next);
        } catch (const std::exception& e) {
          st = absl::InternalError(absl::StrCat("the tuning loop ended by an exception: ", e.what()));
        }
        std::lock_guard<std::mutex> guard(mu_);
        keep_error(st);
        --active;
        ended.push_back(id);
        ended_.notify_all();
      }));
    } catch (const std::system_error& e) {
      --active;
      keep_error(absl::ResourceExhaustedError(absl::StrCat("cannot start a thread of the tuning loop: ", e.what())));
    }
  }
  lock.unlock();
  for (auto& [id, th] : threads) th.join();  // none left running: each has said it ended
  return first_error;
}

std::string Tuner::RunNote(const std::vector<TaskOutcome>& outcomes) const {
  std::string note = options_.pretrained ? options_.pretrained_note : "";
  for (const TaskOutcome& o : outcomes) {
    if (o.model_note.empty()) continue;
    absl::StrAppend(&note, note.empty() ? "" : "; ", o.task.name, ": ", o.model_note);
  }
  return note;
}

void Tuner::Report(const TaskRun& t, bool done) {
  if (!progress_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ProgressEvent e;
  e.task_index = t.index;
  e.task_count = task_count_;
  e.task = &t.info;
  e.trials = t.outcome.trials;
  e.trials_budget = t.progress.budget;
  e.best_s = t.outcome.best_s;
  e.elapsed_s = Now() - start_;
  int remaining = total_budget_ - done_trials_;
  e.eta_s = done_trials_ > 0 ? e.elapsed_s / done_trials_ * std::max(0, remaining) : 0;
  e.task_done = done;
  progress_(e);
}

absl::StatusOr<search::Config> ParseGiven(const measure::Task& task, const std::string& text) {
  const std::string& key = task.keys().workload_key;
  auto config = task.space().FromJson(text);
  if (!config.ok()) {
    return absl::InvalidArgumentError("config " + text + " for " + key + ": " + std::string(config.status().message()));
  }
  if (!task.space().IsValid(*config)) {
    return absl::InvalidArgumentError("config " + text + " is not valid for " + key + " (constraint '" +
                                      task.space().WhyInvalid(*config) + "': it breaks a constraint of the space on this target)");
  }
  return config;
}

absl::Status Tuner::Prepare(TaskRun& t, int64_t target_id, int64_t run_id) {
  const search::ConfigSpace& space = t.task->space();
  t.target_id = target_id;
  t.run_id = run_id;

  const measure::TaskKeys& keys = t.task->keys();
  dataset::TaskInfo info;
  info.workload_key = keys.workload_key;
  info.op = keys.op;
  info.shape_json = keys.shape_json;
  info.flops = keys.flops;
  info.template_version = keys.template_version;
  auto task_id = Locked([&] { return db_->UpsertTask(info); });
  if (!task_id.ok()) return task_id.status();

  TaskOutcome& outcome = t.outcome;
  outcome.task = t.info;
  outcome.task_id = *task_id;
  outcome.flops = info.flops;
  outcome.best_s = kInf;
  outcome.default_s = kInf;

  // Nothing of the task is measured before this run holds its lease.
  bool taken = false;
  if (auto st = TakeLease(t, &taken); !st.ok()) return st;
  if (!taken) {
    t.progress.done = true;
    Report(t, false);
    return absl::OkStatus();
  }

  if (t.strategy == nullptr) {
    search::StrategyOptions strategy_options = options_.strategy_options;
    strategy_options.seed = options_.seed + static_cast<uint64_t>(t.index);
    auto strategy = search::SearchStrategy::Create(
        ResolveStrategy(options_.strategy, options_.cost_model, options_.pretrained != nullptr), &space,
        strategy_options);
    if (!strategy.ok()) return strategy.status();
    t.owned_strategy = std::move(*strategy);
    t.strategy = t.owned_strategy.get();
  }
  if (auto st = CreateModel(t, target_id); !st.ok()) return st;
  if (t.model != nullptr) t.strategy->SetCostModel(t.model);

  // Records already in the database: with --resume they count against the budget and are
  // never measured again, and the default schedule's record is reused.
  bool have_default = false;
  if (options_.resume) {
    auto old = Locked([&] { return db_->Records(*task_id, target_id); });
    if (!old.ok()) return old.status();
    std::vector<search::MeasuredConfig> known;
    for (const auto& rec : *old) {
      auto cfg = space.FromJson(rec.config_json);
      if (!cfg.ok()) continue;  // a config of another space layout: not comparable
      if (rec.strategy == kDefaultStrategy) {
        have_default = true;
        outcome.default_s = rec.result.Median();
        continue;
      }
      if (rec.strategy == kFinalistStrategy) continue;  // a re-measurement, not a trial
      if (!t.seen.insert(*cfg).second) continue;
      known.push_back({*cfg, rec.result.ok() ? rec.result.Median() : kInf, rec.result.ok()});
      ++outcome.trials;
      if (!rec.result.ok()) ++outcome.failed;
      if (rec.result.ok() && rec.result.Median() < outcome.best_s) {
        outcome.best_s = rec.result.Median();
        outcome.best_config = rec.config_json;
      }
    }
    for (const auto& k : known) {
      t.history.push_back(k.config);
      t.history_costs.push_back(k.cost);
    }
    FitModel(t);
    t.strategy->Update(known);
    int counted = std::min(outcome.trials, t.progress.budget);
    Locked([&] { return done_trials_ += counted; });
    if (counted > 0) t.progress.best_history.push_back(outcome.best_s);
  }
  t.progress.trials = outcome.trials;
  // Given configs already recorded (--resume) are not measured again.
  t.given.erase(std::remove_if(t.given.begin(), t.given.end(), [&](const search::Config& c) { return t.seen.count(c) > 0; }),
                t.given.end());

  const std::optional<search::Config> def = t.task->DefaultConfig();
  if (def.has_value() && !have_default) {
    measure::MeasureProtocol protocol = DefaultScheduleProtocol(options_.protocol);
    auto results = t.task->Measure({*def}, protocol);
    if (auto st = Commit(t, {*def}, results, kDefaultStrategy, protocol); !st.ok()) return st;
    outcome.default_s = results[0].Median();
  }
  // The default schedule is a correct kernel too: the best is never slower than it.
  if (def.has_value() && outcome.default_s < outcome.best_s) {
    outcome.best_s = outcome.default_s;
    outcome.best_config = space.ToJson(*def);
  }
  t.progress.default_s = outcome.default_s;
  t.progress.done = outcome.trials >= t.progress.budget;
  Report(t, false);
  return absl::OkStatus();
}

absl::Status Tuner::TakeLease(TaskRun& t, bool* taken) {
  *taken = true;
  // A private in-memory database has no other connection to share its tasks with.
  if (db_->path() == ":memory:") return absl::OkStatus();
  auto holder = Locked([&] { return db_->AcquireLease(t.outcome.task_id, t.target_id, t.run_id); });
  if (!holder.ok()) return holder.status();
  if (holder->has_value()) {
    *taken = false;
    t.outcome.skipped = "being tuned by " + HolderText(**holder);
    spdlog::warn("{}: {}, skipped", base::EscapeControl(t.info.name), base::EscapeControl(t.outcome.skipped));
    return absl::OkStatus();
  }
  // Records committed from now on by anyone are read before each batch (CatchUp).
  auto last = Locked([&] { return db_->LastRecordId(); });
  if (!last.ok()) return last.status();
  t.last_record_id = *last;
  return absl::OkStatus();
}

absl::Status Tuner::CatchUp(TaskRun& t) {
  if (db_->path() == ":memory:") return absl::OkStatus();
  TaskOutcome& outcome = t.outcome;
  // The lease should still be this run's; a run that took it over (this one's heartbeat had
  // stopped for kStaleAfterS: a suspended process, say) tunes the task from now on.
  auto holder = Locked([&] { return db_->Lease(outcome.task_id, t.target_id); });
  if (!holder.ok()) return holder.status();
  if (!holder->has_value()) {  // released meanwhile (by hand, say): taken again if free
    const int64_t known_up_to = t.last_record_id;
    bool taken = false;
    if (auto st = TakeLease(t, &taken); !st.ok()) return st;
    t.last_record_id = known_up_to;
    if (!taken) {
      t.progress.done = true;
      return absl::OkStatus();
    }
  } else if ((*holder)->run_id != t.run_id) {
    outcome.skipped = "taken over by " + HolderText(**holder);
    spdlog::warn("{}: {}, stopped", base::EscapeControl(t.info.name), base::EscapeControl(outcome.skipped));
    t.progress.done = true;
    return absl::OkStatus();
  }
  // Configs recorded by others since: never measured again; with --resume they count.
  auto fresh = Locked([&] { return db_->Records(outcome.task_id, t.target_id, t.last_record_id); });
  if (!fresh.ok()) return fresh.status();
  const search::ConfigSpace& space = t.task->space();
  std::vector<search::MeasuredConfig> known;
  for (const dataset::Record& rec : *fresh) {
    t.last_record_id = std::max(t.last_record_id, rec.id);
    if (rec.run_id == t.run_id || rec.strategy == kDefaultStrategy || rec.strategy == kFinalistStrategy) continue;
    auto cfg = space.FromJson(rec.config_json);
    if (!cfg.ok() || !t.seen.insert(*cfg).second) continue;
    const double cost = rec.result.ok() ? rec.result.Median() : kInf;
    known.push_back({*cfg, cost, rec.result.ok()});
    t.history.push_back(*cfg);
    t.history_costs.push_back(cost);
    if (!options_.resume) continue;
    const int counted_before = std::min(outcome.trials, t.progress.budget);
    ++outcome.trials;
    Locked([&] { return done_trials_ += std::min(outcome.trials, t.progress.budget) - counted_before; });
    if (!rec.result.ok()) ++outcome.failed;
    if (rec.result.ok() && rec.result.Median() < outcome.best_s) {
      outcome.best_s = rec.result.Median();
      outcome.best_config = rec.config_json;
    }
  }
  if (known.empty()) return absl::OkStatus();
  std::erase_if(t.given, [&](const search::Config& c) { return t.seen.count(c) > 0; });
  std::erase_if(t.transferred, [&](const search::Config& c) { return t.seen.count(c) > 0; });
  std::erase_if(t.started, [&](const search::Config& c) { return t.seen.count(c) > 0; });
  FitModel(t);
  t.strategy->Update(known);
  t.progress.trials = outcome.trials;
  return absl::OkStatus();
}

absl::Status Tuner::CreateModel(TaskRun& t, int64_t target_id) {
  if (t.model != nullptr) return absl::OkStatus();  // the caller's
  std::string name = ResolveCostModel(options_.cost_model, options_.strategy, options_.pretrained != nullptr);
  if (name == "none") return absl::OkStatus();
  costmodel::CostModelOptions mo;
  mo.xgb.seed = options_.seed + static_cast<uint64_t>(t.index);
  auto model = costmodel::CreateFeatureCostModel(name, {t.task->tmpl(), &t.task->space()}, mo);
  if (!model.ok()) return model.status();
  t.owned_model = std::move(*model);
  t.model = t.owned_model.get();
  if (options_.transfer) {
    if (auto st = WarmStart(t, target_id); !st.ok()) return st;
  }
  // A pretrained model ranks first; the online model (warm-started as above) takes over as
  // the task's own measurements rank better. Spaces without a template have nothing it reads.
  if (options_.pretrained != nullptr && t.task->tmpl() != nullptr) {
    costmodel::PretrainedOptions po = options_.pretrained_options;
    po.seed = options_.seed + static_cast<uint64_t>(t.index);
    t.owned_pretrained = std::make_unique<costmodel::PretrainedCostModel>(t.task->tmpl(), options_.pretrained,
                                                                          std::move(t.owned_model), po);
    t.model = t.owned_pretrained.get();
  }
  return absl::OkStatus();
}

absl::Status Tuner::WarmStart(TaskRun& t, int64_t target_id) {
  // Other tasks' records on this target, featurized through their own templates: rows
  // transfer where the feature schemas agree (loop-AST features do across shapes and
  // operators; knob features of recorded spaces do not). Only what is used is read: the
  // nearest tasks measured on the target (the tasks table a row at a time), and of each the
  // most recent records a page at a time, so a daemon's database of thousands of tasks costs
  // each new task no more than a small one does.
  if (t.task->tmpl() == nullptr) return absl::OkStatus();
  costmodel::FeatureCostModel& model = *t.owned_model;
  auto sources = Locked([&] {
    return NearestMeasuredTasks(*db_, target_id, t.outcome.task_id, t.info.workload, options_.warm_start_tasks);
  });
  if (!sources.ok()) return sources.status();
  if (sources->empty()) return absl::OkStatus();
  const std::string name = ResolveCostModel(options_.cost_model, options_.strategy, options_.pretrained != nullptr);
  const size_t per_task = std::max<size_t>(8, static_cast<size_t>(options_.max_prior_rows) / sources->size());
  for (const NearTask& source : *sources) {
    const dataset::TaskInfo& info = source.info;
    if (model.num_prior_rows() >= static_cast<size_t>(options_.max_prior_rows)) break;
    auto tmpl = (*factory_)->MakeTemplate(source.workload);
    if (!tmpl.ok() || (*tmpl)->version() != info.template_version) continue;
    auto other = costmodel::CreateFeatureCostModel(name, {tmpl->get(), nullptr});
    if (!other.ok() || !((*other)->schema() == model.schema())) continue;
    std::vector<std::vector<float>> rows;
    std::vector<double> costs;
    // The most recent records (late in a search they are the informative ones), but the
    // default schedule's; a page holds as many as are still wanted, and a record that does not
    // featurize costs another page.
    for (int64_t offset = 0; rows.size() < per_task;) {
      const int want = static_cast<int>(per_task - rows.size());
      auto recs = Locked([&] { return db_->RecentRecords(info.id, target_id, want, kDefaultStrategy, offset); });
      if (!recs.ok()) return recs.status();
      for (const dataset::Record& rec : *recs) {
        auto cfg = (*tmpl)->space().FromJson(rec.config_json);
        std::vector<float> row;
        if (!cfg.ok() || !(*other)->Featurize(*cfg, &row)) continue;
        rows.push_back(std::move(row));
        costs.push_back(rec.result.ok() ? rec.result.Median() : kInf);
      }
      if (recs->size() < static_cast<size_t>(want)) break;  // no more records
      offset += static_cast<int64_t>(recs->size());
    }
    if (!rows.empty()) model.AddPriorData(std::move(rows), std::move(costs), static_cast<int>(info.id));
  }
  return absl::OkStatus();
}

void Tuner::FitModel(TaskRun& t) {
  if (t.model == nullptr || t.history.empty()) return;
  bool any_ok = false;
  for (double c : t.history_costs) any_ok |= std::isfinite(c);
  if (!any_ok) return;  // nothing to rank yet
  // A model that cannot be trained keeps its last fit (or its untrained behaviour); it is not
  // a reason to stop tuning. Counted, and said once per task.
  if (absl::Status st = t.model->Fit(t.history, t.history_costs); !st.ok()) {
    if (t.outcome.model_errors++ == 0) {
      spdlog::warn("{}: cost model fit after {} results failed: {}", base::EscapeControl(t.info.name), t.history.size(), std::string(st.message()));
    }
  }
  // The negative-transfer guard dropped the pretrained model: said once, and in the run record.
  if (t.owned_pretrained != nullptr && t.outcome.model_note.empty() && !t.owned_pretrained->note().empty()) {
    t.outcome.model_note = t.owned_pretrained->note();
    spdlog::warn("{}: {}", base::EscapeControl(t.info.name), t.outcome.model_note);
  }
}

absl::Status Tuner::Finalize(TaskRun& t) {
  // A task another run took over is that run's to finish.
  if (options_.finalists < 2 || t.outcome.measured_now == 0 || !t.outcome.skipped.empty()) return absl::OkStatus();
  std::vector<size_t> order;
  for (size_t i = 0; i < t.history.size(); ++i) {
    if (std::isfinite(t.history_costs[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.history_costs[a] < t.history_costs[b]; });
  if (order.size() > static_cast<size_t>(options_.finalists)) order.resize(options_.finalists);
  std::vector<search::Config> configs;
  for (size_t i : order) configs.push_back(t.history[i]);
  // Beside them, the best kernels of the same shape with another epilogue (bias, relu), found
  // by their own searches (in this run or before): one search may miss what the other found.
  int from_siblings = 0;
  if (options_.transfer && options_.sibling_finalists > 0 && t.task->tmpl() != nullptr) {
    auto siblings = Locked([&] {
      return SiblingConfigs(*db_, t.target_id, t.outcome.task_id, t.info.workload, *t.task->tmpl(), **factory_,
                            options_.sibling_finalists);
    });
    if (!siblings.ok()) return siblings.status();
    for (search::Config& c : *siblings) {
      if (std::find(configs.begin(), configs.end(), c) != configs.end()) continue;
      configs.push_back(std::move(c));
      ++from_siblings;
    }
  }
  if (configs.size() < 2) return absl::OkStatus();  // nothing to choose between
  t.outcome.sibling_finalists = from_siblings;
  // Timed side by side, sample by sample, so that a host's drift does not pick the winner.
  measure::MeasureProtocol protocol = options_.protocol;
  protocol.interleave = true;
  auto results = t.task->Measure(configs, protocol);
  if (auto st = Commit(t, configs, results, kFinalistStrategy, protocol); !st.ok()) return st;
  double best = kInf;
  size_t winner = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (results[i].ok() && results[i].Median() < best) {
      best = results[i].Median();
      winner = i;
      t.outcome.best_config = t.task->space().ToJson(configs[i]);
    }
  }
  if (!std::isfinite(best)) return absl::OkStatus();  // keep the search's pick
  // The side-by-side medians pick the winner; its time is the fastest of its measurements in
  // this run, as a task's best record is its fastest: the finalists share one moment of the
  // host, which on a drifting host may be a slow one that the search's record did not share.
  t.outcome.best_s = best;
  for (size_t i = 0; i < t.history.size(); ++i) {
    if (t.history[i] == configs[winner]) t.outcome.best_s = std::min(t.outcome.best_s, t.history_costs[i]);
  }
  t.outcome.sibling_won = winner >= configs.size() - from_siblings ? 1 : 0;
  // The default schedule's record stands in where it is faster, unless the default config was
  // a finalist: then the side-by-side verdict stands (as RecordDatabase::Best ranks it).
  const std::optional<search::Config> def = t.task->DefaultConfig();
  const bool default_compared = def.has_value() && std::find(configs.begin(), configs.end(), *def) != configs.end();
  if (def.has_value() && !default_compared && t.outcome.default_s < t.outcome.best_s) {
    t.outcome.sibling_won = 0;
    t.outcome.best_s = t.outcome.default_s;
    t.outcome.best_config = t.task->space().ToJson(*def);
  }
  return absl::OkStatus();
}

absl::Status Tuner::Commit(TaskRun& t, const std::vector<search::Config>& configs,
                           const std::vector<measure::MeasureResult>& results, const std::string& strategy,
                           const measure::MeasureProtocol& protocol) {
  if (results.size() != configs.size()) return absl::CancelledError("a batch could not be measured (shutting down)");
  const search::ConfigSpace& space = t.task->space();
  // The batch's protocol serialised once, not once per result.
  const std::string protocol_json = protocol.ToJson();
  std::vector<dataset::Record> records;
  records.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    dataset::Record r;
    r.task_id = t.outcome.task_id;
    r.target_id = t.target_id;
    r.run_id = t.run_id;
    r.config_json = space.ToJson(configs[i]);
    r.config_index = space.ToIndex(configs[i]);
    r.strategy = strategy;
    r.protocol_json = protocol_json;
    r.result = results[i];
    records.push_back(std::move(r));
  }
  if (auto st = Locked([&] { return db_->AddRecords(records); }); !st.ok()) return st;
  t.task->Committed();
  return absl::OkStatus();
}

absl::Status Tuner::SeedFromSimilar(TaskRun& t) {
  // Only a task with nothing recorded of its own starts from others' configs, and only where
  // configs have a template to map through (not recorded replay spaces).
  if (!options_.transfer || options_.transfer_configs <= 0 || t.outcome.trials > 0 || t.task->tmpl() == nullptr) {
    return absl::OkStatus();
  }
  ConfigTransferOptions o;
  o.max_configs = options_.transfer_configs;
  o.per_task = std::max(1, (options_.transfer_configs + 1) / 2);
  auto seeds = Locked([&] {
    return TransferConfigs(*db_, t.target_id, t.outcome.task_id, t.info.workload, *t.task->tmpl(), **factory_, o);
  });
  if (!seeds.ok()) return seeds.status();
  // Not the task's own default schedule, measured already (strategy "default").
  const std::optional<search::Config> own_default = t.task->DefaultConfig();
  for (search::Config& c : seeds->configs) {
    if (own_default.has_value() && c == *own_default) continue;
    if (t.seen.count(c) == 0 && std::find(t.given.begin(), t.given.end(), c) == t.given.end()) {
      t.transferred.push_back(std::move(c));
    }
  }
  if (t.transferred.empty()) return absl::OkStatus();
  t.outcome.transferred = static_cast<int>(t.transferred.size());
  t.outcome.transfer_sources = seeds->sources;
  spdlog::info("{}: seeded {} configs from {} similar recorded task(s), nearest {}", base::EscapeControl(t.info.name),
               t.transferred.size(), seeds->sources.size(), seeds->sources.front());
  return absl::OkStatus();
}

void Tuner::SeedFromTemplate(TaskRun& t) {
  // As config transfer: only a task with nothing recorded of its own, and only with a template.
  if (!options_.start_configs || t.outcome.trials > 0 || t.task->tmpl() == nullptr) return;
  const std::optional<search::Config> own_default = t.task->DefaultConfig();
  auto queued = [&](const std::vector<search::Config>& list, const search::Config& c) {
    return std::find(list.begin(), list.end(), c) != list.end();
  };
  for (search::Config& c : t.task->tmpl()->StartConfigs()) {
    if ((own_default.has_value() && c == *own_default) || t.seen.count(c) > 0 || queued(t.given, c) ||
        queued(t.transferred, c) || queued(t.started, c)) {
      continue;
    }
    t.started.push_back(std::move(c));
  }
  t.outcome.started = static_cast<int>(t.started.size());
  if (!t.started.empty()) {
    spdlog::info("{}: {} start configs of the {} template first", base::EscapeControl(t.info.name), t.started.size(),
                 t.task->tmpl()->name());
  }
}

absl::Status Tuner::RunBatch(TaskRun& t, int want, int reserved) {
  TaskOutcome& outcome = t.outcome;
  const int trials_before = outcome.trials;
  if (want > 0) {
    if (auto st = CatchUp(t); !st.ok()) return st;
    if (t.progress.done) return absl::OkStatus();
    if (outcome.trials != trials_before) {  // others' records counted against the budget
      // Of the total budget left, what other batches in flight hold is theirs.
      const int left = Locked([&] { return total_budget_ - done_trials_ - (reserved_ - reserved); });
      want = std::min({want, t.progress.budget - outcome.trials, left});
    }
  }
  if (want <= 0 || (options_.early_stop > 0 && t.since_improvement >= options_.early_stop)) {
    t.progress.done = true;
    return absl::OkStatus();
  }
  if (!t.transfer_tried) {
    t.transfer_tried = true;
    if (auto st = SeedFromSimilar(t); !st.ok()) return st;
    SeedFromTemplate(t);
  }
  // Given configs first, then config-transfer seeds, then the template's start points, each
  // in batches of their own; then the strategy's proposals.
  std::vector<search::Config> configs;
  std::string strategy = t.strategy->name();
  const search::ConfigSpace& space = t.task->space();
  auto take = [&](std::vector<search::Config>& from) {
    const size_t n = std::min(from.size(), static_cast<size_t>(want));
    configs.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
    from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
  };
  if (!t.given.empty()) {
    take(t.given);
    strategy = kGivenStrategy;
  } else if (!t.transferred.empty()) {
    take(t.transferred);
    strategy = kTransferStrategy;
  } else if (!t.started.empty()) {
    take(t.started);
    strategy = kStartStrategy;
  } else {
    configs = t.strategy->Propose(want);
    // The strategy's contract (search/strategy.h): at most `want` valid configs, none
    // proposed or reported before.
    if (static_cast<int>(configs.size()) > want) {
      return absl::InternalError(
          absl::StrCat("strategy '", strategy, "' proposed ", configs.size(), " configs when asked for ", want));
    }
    std::unordered_set<search::Config, search::ConfigHash> batch;
    for (const search::Config& c : configs) {
      if (!space.IsValid(c)) {
        return absl::InternalError(absl::StrCat("strategy '", strategy, "' proposed the infeasible config ",
                                                ConfigText(space, c)));
      }
      if (t.seen.count(c) > 0 || !batch.insert(c).second) {
        return absl::InternalError(
            absl::StrCat("strategy '", strategy, "' proposed ", ConfigText(space, c), " a second time"));
      }
    }
  }
  if (configs.empty()) {  // space exhausted
    t.progress.done = true;
    outcome.exhausted = true;
    return absl::OkStatus();
  }
  measure::MeasureProtocol protocol = options_.protocol;
  if (options_.cutoff_factor > 0 && std::isfinite(outcome.best_s)) {
    protocol.cutoff_s = options_.cutoff_factor * outcome.best_s;
  }
  auto results = t.task->Measure(configs, protocol);
  if (auto st = Commit(t, configs, results, strategy, protocol); !st.ok()) return st;
  std::vector<search::MeasuredConfig> measured;
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& r = results[i];
    measured.push_back({configs[i], r.ok() ? r.Median() : kInf, r.ok()});
    t.history.push_back(configs[i]);
    t.history_costs.push_back(measured.back().cost);
    t.seen.insert(configs[i]);
    ++outcome.trials;
    ++outcome.measured_now;
    ++t.since_improvement;
    if (!r.ok()) ++outcome.failed;
    if (r.ok() && r.Median() < outcome.best_s) {
      outcome.best_s = r.Median();
      outcome.best_config = space.ToJson(configs[i]);
      t.since_improvement = 0;
    }
  }
  Locked([&] { return done_trials_ += static_cast<int>(configs.size()); });
  FitModel(t);
  t.strategy->Update(measured);
  t.progress.trials = outcome.trials;
  t.progress.best_history.push_back(outcome.best_s);
  t.progress.done = outcome.trials >= t.progress.budget ||
                    (options_.early_stop > 0 && t.since_improvement >= options_.early_stop);
  Report(t, false);
  return absl::OkStatus();
}

}  // namespace tune::tuner
