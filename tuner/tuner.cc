// The tuning loop: per task, measure the default schedule, then search within the budget.
#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "codegen/template.h"
#include "measure/builder.h"
#include "measure/local_runner.h"
#include "nlohmann/json.hpp"
#include "search/strategy.h"

namespace tune::tuner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kDefaultStrategy[] = "default";

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

measure::MeasureProtocol DefaultScheduleProtocol(const measure::MeasureProtocol& p) {
  measure::MeasureProtocol d = p;
  d.warmup = 0;
  d.repeats = std::min(p.repeats, 3);
  d.min_repeat_ms = 0;
  d.timeout_s = std::max(p.timeout_s, 120.0);
  return d;
}

std::string WorkloadJson(const codegen::Workload& w) {
  nlohmann::json j;
  j["op"] = codegen::OpName(w.op);
  if (w.op == codegen::OpKind::kConv2d) {
    j["n"] = w.batch;
    j["c"] = w.in_c;
    j["h"] = w.in_h;
    j["w"] = w.in_w;
    j["oc"] = w.out_c;
    j["kernel"] = {w.kernel_h, w.kernel_w};
    j["stride"] = {w.stride_h, w.stride_w};
    j["pad"] = {w.pad_h, w.pad_w};
    j["dilation"] = {w.dilation_h, w.dilation_w};
    j["groups"] = w.groups;
  } else {
    j["batch"] = w.batch;
    j["m"] = w.m;
    j["n"] = w.n;
    j["k"] = w.k;
  }
  j["bias"] = w.bias;
  j["relu"] = w.relu;
  j["dtype"] = w.dtype;
  return j.dump();
}

RunnerFactory LocalRunnerFactory(int threads) {
  return [threads](const measure::MeasureProtocol& protocol) -> std::unique_ptr<measure::Runner> {
    measure::LocalRunnerOptions o;
    o.protocol = protocol;
    o.threads = threads;
    return std::make_unique<measure::LocalRunner>(o);
  };
}

Tuner::Tuner(dataset::RecordDatabase* db, measure::Target target, RunnerFactory runners,
             TuneOptions options, ProgressFn progress)
    : db_(db), target_(std::move(target)), runners_(std::move(runners)), options_(std::move(options)),
      progress_(std::move(progress)) {}

absl::StatusOr<std::vector<TaskOutcome>> Tuner::Run(const std::vector<TuneTask>& tasks) {
  start_ = Now();
  auto target_id = db_->UpsertTarget({0, target_.Key(), target_.ToJson()});
  if (!target_id.ok()) return target_id.status();
  auto run_id = db_->StartRun(options_.command, target_.Key());
  if (!run_id.ok()) return run_id.status();
  int n = static_cast<int>(tasks.size());
  total_budget_ = options_.total_trials > 0 ? options_.total_trials : options_.trials_per_task * n;
  done_trials_ = 0;
  std::vector<TaskOutcome> out;
  for (int i = 0; i < n; ++i) {
    // Spread what is left of the total budget evenly over the remaining tasks.
    int left = total_budget_ - done_trials_;
    int budget = std::min(options_.trials_per_task, std::max(0, left / (n - i) + (left % (n - i) ? 1 : 0)));
    auto r = TuneOne(tasks[i], i, n, budget, *target_id, *run_id);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  if (auto st = db_->FinishRun(*run_id); !st.ok()) return st;
  return out;
}

absl::StatusOr<TaskOutcome> Tuner::TuneOne(const TuneTask& task, int index, int count, int budget,
                                           int64_t target_id, int64_t run_id) {
  auto tmpl_or = codegen::Template::Create(task.workload);
  if (!tmpl_or.ok()) return tmpl_or.status();
  const codegen::Template& tmpl = **tmpl_or;
  const search::ConfigSpace& space = tmpl.space();

  dataset::TaskInfo info;
  info.workload_key = task.workload.Key();
  info.op = codegen::OpName(task.workload.op);
  info.shape_json = WorkloadJson(task.workload);
  info.flops = task.workload.Flops();
  info.template_version = tmpl.version();
  auto task_id = db_->UpsertTask(info);
  if (!task_id.ok()) return task_id.status();

  TaskOutcome outcome;
  outcome.task = task;
  outcome.task_id = *task_id;
  outcome.flops = info.flops;
  outcome.best_s = kInf;
  outcome.default_s = kInf;

  auto strategy_or = search::SearchStrategy::Create(options_.strategy, &space,
                                                    {options_.seed + static_cast<uint64_t>(index)});
  if (!strategy_or.ok()) return strategy_or.status();
  search::SearchStrategy& strategy = **strategy_or;

  // Records already in the database: with --resume they count against the budget and are
  // never measured again; the default schedule's record is reused either way when resuming.
  std::unordered_set<search::Config, search::ConfigHash> seen;
  bool have_default = false;
  if (options_.resume) {
    auto old = db_->Records(*task_id, target_id);
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
      if (!seen.insert(*cfg).second) continue;
      known.push_back({*cfg, rec.result.ok() ? rec.result.Median() : kInf, rec.result.ok()});
      ++outcome.trials;
      if (!rec.result.ok()) ++outcome.failed;
      if (rec.result.ok() && rec.result.Median() < outcome.best_s) {
        outcome.best_s = rec.result.Median();
        outcome.best_config = rec.config_json;
      }
    }
    strategy.Update(known);
  }

  measure::TaskData data = measure::TaskData::Create(task.workload, options_.seed ^ 0x9e3779b97f4a7c15ULL);
  measure::Builder builder({}, options_.build_threads);

  auto commit = [&](const std::vector<search::Config>& configs, const std::vector<measure::MeasureResult>& results,
                    const std::string& strategy_name, const measure::MeasureProtocol& protocol) -> absl::Status {
    std::vector<dataset::Record> records;
    for (size_t i = 0; i < configs.size(); ++i) {
      dataset::Record r;
      r.task_id = *task_id;
      r.target_id = target_id;
      r.run_id = run_id;
      r.config_json = space.ToJson(configs[i]);
      r.config_index = space.ToIndex(configs[i]);
      r.strategy = strategy_name;
      r.protocol_json = protocol.ToJson();
      r.result = results[i];
      records.push_back(std::move(r));
    }
    return db_->AddRecords(records);
  };

  auto report = [&](bool done) {
    if (!progress_) return;
    ProgressEvent e;
    e.task_index = index;
    e.task_count = count;
    e.task = &task;
    e.trials = outcome.trials;
    e.trials_budget = budget;
    e.best_s = outcome.best_s;
    e.elapsed_s = Now() - start_;
    int remaining = total_budget_ - done_trials_;
    e.eta_s = done_trials_ > 0 ? e.elapsed_s / done_trials_ * std::max(0, remaining) : 0;
    e.task_done = done;
    progress_(e);
  };

  if (!have_default) {
    search::Config def = tmpl.DefaultConfig();
    measure::MeasureProtocol protocol = DefaultScheduleProtocol(options_.protocol);
    auto builds = builder.BuildAll(tmpl, {def});
    auto results = runners_(protocol)->Run(data, builds);
    if (auto st = commit({def}, results, kDefaultStrategy, protocol); !st.ok()) return st;
    outcome.default_s = results[0].Median();
  }
  report(false);

  std::unique_ptr<measure::Runner> runner = runners_(options_.protocol);
  int since_improvement = 0;
  int resumed = outcome.trials;
  done_trials_ += resumed;
  while (outcome.trials < budget) {
    if (options_.early_stop > 0 && since_improvement >= options_.early_stop) break;
    int want = std::min(options_.batch, budget - outcome.trials);
    std::vector<search::Config> configs = strategy.Propose(want);
    if (configs.empty()) break;  // space exhausted
    auto builds = builder.BuildAll(tmpl, configs);
    auto results = runner->Run(data, builds);
    if (auto st = commit(configs, results, strategy.name(), options_.protocol); !st.ok()) return st;
    std::vector<search::MeasuredConfig> measured;
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto& r = results[i];
      measured.push_back({configs[i], r.ok() ? r.Median() : kInf, r.ok()});
      ++outcome.trials;
      ++outcome.measured_now;
      ++done_trials_;
      ++since_improvement;
      if (!r.ok()) ++outcome.failed;
      if (r.ok() && r.Median() < outcome.best_s) {
        outcome.best_s = r.Median();
        outcome.best_config = space.ToJson(configs[i]);
        since_improvement = 0;
      }
    }
    strategy.Update(measured);
    report(false);
  }
  report(true);
  return outcome;
}

}  // namespace tune::tuner
