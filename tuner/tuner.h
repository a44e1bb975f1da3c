// Tuner: the tuning loop over a model's tasks (propose -> build -> measure -> record -> learn).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"
#include "measure/kernel_measurer.h"
#include "measure/measure_result.h"
#include "measure/runner.h"
#include "measure/target.h"
#include "measure/task.h"
#include "measure/task_factory.h"
#include "costmodel/pretrained_cost_model.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"
#include "search/task_scheduler.h"

namespace tune::costmodel {
class OfflineModel;
}  // namespace tune::costmodel

namespace tune::tuner {

/// One workload to tune and how many times the model runs it (a layer of a model).
struct TuneTask {
  std::string name;
  codegen::Workload workload;
  int count = 1;
};

struct TuneOptions {
  /// Asked before every batch: true stops the run early (a signal, say). The records so far
  /// stay committed, finalists are not re-measured, and the run is marked "interrupted".
  std::function<bool()> should_stop;
  int trials_per_task = 32;  // measurements per task (the default baseline not included)
  int total_trials = 0;      // cap over all tasks; 0 = trials_per_task * tasks
  int batch = 8;             // candidates built and measured per round
  uint64_t seed = 0;
  /// A registered search strategy (SearchStrategy::Create); "auto" is the default choice
  /// (search/auto_strategy.h).
  std::string strategy = "auto";
  /// Strategy settings (`--strategy-option`); each task's seed replaces theirs.
  search::StrategyOptions strategy_options;
  std::string task_scheduler = "round-robin";  // see TaskScheduler::Create
  /// The cost model that model-guided strategies rank candidates with ("xgb", "xgb-reg",
  /// ..., see costmodel::CreateCostModel), "none", or "auto": "xgb" for the strategies that
  /// use one (sa, evolutionary, bandit), none otherwise.
  std::string cost_model = "auto";
  /// An offline-trained model (`--cost-model FILE.tcm`, or a daemon's model of the target):
  /// when set, every task whose strategy ranks with a cost model (the resolved `cost_model` is
  /// not "none") gets a costmodel::PretrainedCostModel over it, with the `cost_model` model
  /// ("auto": xgb) as its online part. Shared by the tasks, only read; null: none.
  std::shared_ptr<const costmodel::OfflineModel> pretrained;
  /// How each task's PretrainedCostModel blends, guards and fine-tunes (`--cost-model-option`);
  /// each task's seed replaces theirs.
  costmodel::PretrainedOptions pretrained_options;
  /// What the run record says of `pretrained` (e.g. "cost model m.tcm: xgb, created
  /// 2026-11-27T03:00:00Z"): written, with the tasks' model notes, as the run's message.
  std::string pretrained_note;
  /// Warm-start each task's cost model with records of other tasks on the same target, and
  /// seed its search with their configs (transfer_configs).
  bool transfer = true;
  /// Config transfer: a task with no records of its own first measures up to this many of the
  /// best configs recorded on the target for the most similar tasks of its template, mapped
  /// into its space (tuner/config_transfer.h), recorded with strategy "transfer" and counted
  /// against the budget; the strategy learns from them as from its own. 0 = off.
  int transfer_configs = 4;
  /// A task with no records of its own measures its template's start points
  /// (codegen::Template::StartConfigs: configs derived from the shape and the target alone)
  /// after any transferred configs, before the strategy's proposals; recorded with strategy
  /// "start", counted against the budget, learned from as the strategy's own.
  bool start_configs = true;
  int max_prior_rows = 512;  // rows of other tasks used for warm-starting, at most
  /// Warm-starting reads the records of at most this many other tasks: the nearest measured on
  /// the target (tuner/nearest_tasks.h), each giving its most recent max(8, max_prior_rows /
  /// their number) non-default records.
  int warm_start_tasks = 64;
  int threads = 1;           // threads a kernel may use
  /// Concurrent compilations; 0 = the target kind's default (measure::TaskFactoryOptions).
  int build_threads = 0;
  int early_stop = 0;        // stop a task after this many trials without improvement; 0 = off
  bool resume = false;       // count and skip configs already recorded for this task/target
  /// After the search, the best `finalists` configs of each task are measured again (records
  /// with strategy "finalist"), side by side with their samples interleaved
  /// (MeasureProtocol::interleave), and the fastest re-measurement wins: one noisy sample
  /// during the search does not pick the winner. 0 or 1 = off.
  int finalists = 3;
  /// With finalists (and transfer), up to this many configs of the tasks of the same shape with
  /// another epilogue (bias, relu), their fastest as recorded, are measured beside a task's
  /// finalists and may win (tuner/config_transfer.h: SiblingConfigs). 0 = off.
  int sibling_finalists = 2;
  /// A candidate whose first warm call is this many times slower than the task's best so far is
  /// not timed further (MeasureProtocol::cutoff_s); 0 = off.
  double cutoff_factor = 10;
  /// Configs (ToJson text) measured first for every task, before the strategy proposes any,
  /// recorded with strategy "given": known-good schedules to check or to start the search
  /// from (the strategy learns from them as from its own). Each must be a valid config of
  /// every task's space (Run fails with InvalidArgument before measuring otherwise); with
  /// --resume, ones already recorded are not measured again. They count against the budget.
  std::vector<std::string> given_configs;
  measure::MeasureProtocol protocol;
  std::string command;       // recorded with the run
  /// How many tasks may have a batch in flight at once (K), asked before each task is
  /// started: null, or an answer below 2, measures one batch at a time. With K > 1 the loop
  /// keeps up to K batches of different tasks in flight, each proposed, measured and committed
  /// on a thread of its own (a task never has two), so K measuring devices stay busy while
  /// the search of another task runs here; the default schedules are measured K at a time
  /// too, and a task's finalists as soon as its own budget is spent (with other tasks' batches
  /// still in flight; tasks stopped by the total budget get theirs at the end). Which task gets the next batch then depends on which
  /// batch came back first, so only K = 1 repeats a run exactly for a seed. Only for tasks
  /// whose Measure may be called from several threads at once (server::RemoteMeasurer, one
  /// device each on remote workers); the Tuner that measures with local runners ignores it,
  /// since kernels timed at once on one host disturb each other. Called on the tuning thread.
  std::function<int()> parallel_tasks;
};

/// What tuning one task produced.
struct TaskOutcome {
  TuneTask task;
  int64_t task_id = 0;
  int trials = 0;            // records of this task/target counted against the budget
  int measured_now = 0;      // of those, measured in this invocation
  int failed = 0;            // non-ok records among `trials`
  double best_s = 0;         // fastest of the search and the default schedule; +inf if none ran
  std::string best_config;   // JSON
  double default_s = 0;      // the untuned default schedule; +inf if it failed or the task has none
  double flops = 0;
  bool exhausted = false;    // the strategy proposed nothing more before the budget was spent
  int model_errors = 0;      // cost-model fits that failed (the search went on with the last model)
  /// What happened to the task's pretrained model, when something did: e.g. "pretrained xgb
  /// model dropped after 16 ok results: pairwise accuracy 0.31 < 0.50 on this task (online
  /// model only)" (the negative-transfer guard); "" otherwise.
  std::string model_note;
  /// Configs seeded by config transfer (TuneOptions::transfer_configs) and the workload keys
  /// of the recorded tasks they came from, most similar first.
  int transferred = 0;
  std::vector<std::string> transfer_sources;
  /// The template's start points queued for measuring (TuneOptions::start_configs).
  int started = 0;
  /// Configs of the same shape's other epilogues measured beside the finalists
  /// (TuneOptions::sibling_finalists), and 1 when one of them won.
  int sibling_finalists = 0;
  int sibling_won = 0;
  /// Another live run holds the task's lease on this target (it tunes the task now), so this
  /// run measured nothing of it, or stopped once that run took the lease over; `skipped`
  /// says which run, e.g. "being tuned by run 12 (pid 4242 on host h)".
  std::string skipped;
};

/// Progress events for a display. Called on the tuning thread, or with
/// TuneOptions::parallel_tasks on the thread of the task's batch, one call at a time.
struct ProgressEvent {
  int task_index = 0, task_count = 0;
  const TuneTask* task = nullptr;
  int trials = 0, trials_budget = 0;
  double best_s = 0;       // +inf when none yet
  double elapsed_s = 0;    // since the run started
  double eta_s = 0;        // estimate for the remaining tasks
  bool task_done = false;
};
using ProgressFn = std::function<void(const ProgressEvent&)>;

/// `text` (ConfigSpace::ToJson) as a config of `task`: InvalidArgument, naming the workload,
/// when it does not parse or breaks a constraint.
absl::StatusOr<search::Config> ParseGiven(const measure::Task& task, const std::string& text);

/// The seed of a task's random inputs: a worker measuring for a daemon draws the same ones.
uint64_t TaskDataSeed(uint64_t run_seed);

/// One task as the loop runs it. Nothing is owned; all must outlive Run.
struct LoopTask {
  TuneTask info;                                // the layer it tunes (name, count; workload for tables)
  measure::Task* task = nullptr;                // what is searched and how it is measured
  search::SearchStrategy* strategy = nullptr;   // null: TuneOptions::strategy by name
  search::CostModel* cost_model = nullptr;      // null: TuneOptions::cost_model by name
};

/// The tuning loop: the only place that drives strategy -> measure -> commit -> fit -> update,
/// for every kind of task (kernels on a CPU or GPU, here or on workers; recorded spaces).
/// Every batch of results is committed to the database before the cost model and the strategy
/// see it, so killing the process loses at most the batch in flight.
///
/// Concurrent runs on one database file: a run takes the lease of each task on its target
/// (dataset::RecordDatabase::AcquireLease) before measuring anything of it and keeps it until
/// it ends, a heartbeat thread renewing it; a task whose lease another live run holds is
/// skipped with one warning line ("mm: being tuned by run 12 (pid 4242 on host h), skipped").
/// Leases of runs whose process is gone are taken over. Before each batch the task's records
/// committed meanwhile by others are read, and their configs are never measured again. A run
/// that ends with an error is marked "failed" with its message.
///
/// With TuneOptions::parallel_tasks, batches of different tasks are in flight at once (see
/// there); the database connection, the trial budget and the progress reports are shared
/// under one lock, and a task's own state (strategy, cost model, history) is only touched by
/// the one thread that runs its batch.
class Tuner {
 public:
  /// Tasks made by `factory` (measure::TaskFactory). `db` is not owned and must outlive the tuner.
  Tuner(dataset::RecordDatabase* db, std::unique_ptr<measure::TaskFactory> factory, TuneOptions options,
        ProgressFn progress = nullptr);
  /// Kernel tasks of `target`, built and measured in this process with `runners` (empty: the
  /// target kind's own runners).
  Tuner(dataset::RecordDatabase* db, measure::Target target, measure::RunnerFactory runners,
        TuneOptions options, ProgressFn progress = nullptr);
  /// Kernel tasks of `target`, measured through `measurer` (e.g. on remote workers).
  Tuner(dataset::RecordDatabase* db, measure::Target target, std::unique_ptr<measure::KernelMeasurer> measurer,
        TuneOptions options, ProgressFn progress = nullptr);

  /// Makes each task with the factory and tunes them. Errors are infrastructure failures
  /// (database, a workload the target cannot instantiate, an unknown target kind, a strategy
  /// that breaks its contract); failing kernels are records, never errors.
  absl::StatusOr<std::vector<TaskOutcome>> Run(const std::vector<TuneTask>& tasks);
  /// Tunes tasks the caller made (and may inspect afterwards, e.g. a replay's trace).
  absl::StatusOr<std::vector<TaskOutcome>> Run(const std::vector<LoopTask>& tasks);

 private:
  struct TaskRun;
  absl::StatusOr<std::vector<TaskOutcome>> RunStarted(std::vector<TaskRun>& runs, search::TaskScheduler& scheduler,
                                                      int64_t target_id, int64_t run_id);
  absl::Status Prepare(TaskRun& t, int64_t target_id, int64_t run_id);
  absl::Status TakeLease(TaskRun& t, bool* taken);
  absl::Status CatchUp(TaskRun& t);
  /// One batch of at most `want` configs; `reserved`: the trials of the total budget it holds
  /// (RunConcurrent; 0 in the sequential loop).
  absl::Status RunBatch(TaskRun& t, int want, int reserved = 0);
  /// The sequential loop (TuneOptions::parallel_tasks null) and the one with batches of
  /// several tasks in flight; both stop at the budget, a stop or when every task is done.
  absl::Status RunSequential(std::vector<TaskRun>& runs, search::TaskScheduler& scheduler, bool* interrupted);
  absl::Status RunConcurrent(std::vector<TaskRun>& runs, search::TaskScheduler& scheduler, bool* interrupted);
  /// `pick` (called under mu_ with the number of items running; kWait: none to start now,
  /// kNoMore: none) names the next item, and `work` runs it on a thread of its own, at most
  /// Parallelism() at once. After the first error nothing more is started; returns it (a
  /// non-cancelled one before a cancellation) once every started item has ended.
  static constexpr int kWait = -1, kNoMore = -2;
  absl::Status RunOnThreads(const std::function<int(int active)>& pick, const std::function<absl::Status(int)>& work);
  int Parallelism() const;
  /// f() under mu_.
  template <typename F>
  auto Locked(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f();
  }
  absl::Status CreateModel(TaskRun& t, int64_t target_id);
  absl::Status WarmStart(TaskRun& t, int64_t target_id);
  /// Config transfer (TuneOptions::transfer_configs): fills the task's seeds.
  absl::Status SeedFromSimilar(TaskRun& t);
  /// The template's start points (TuneOptions::start_configs), after the transferred seeds.
  void SeedFromTemplate(TaskRun& t);
  void FitModel(TaskRun& t);
  absl::Status Finalize(TaskRun& t);
  absl::Status Commit(TaskRun& t, const std::vector<search::Config>& configs,
                      const std::vector<measure::MeasureResult>& results, const std::string& strategy,
                      const measure::MeasureProtocol& protocol);
  void Report(const TaskRun& t, bool done);
  /// The run's message: the pretrained model's note and the tasks' model notes ("" when none).
  std::string RunNote(const std::vector<TaskOutcome>& outcomes) const;

  dataset::RecordDatabase* db_;
  absl::StatusOr<std::unique_ptr<measure::TaskFactory>> factory_;
  TuneOptions options_;
  ProgressFn progress_;
  double start_ = 0;
  // Guards db_, done_trials_ and progress_ calls while batches of several tasks are in flight.
  mutable std::mutex mu_;
  std::condition_variable ended_;  // an item of RunOnThreads ended
  int done_trials_ = 0, total_budget_ = 0, task_count_ = 0;
  int reserved_ = 0;  // trials of the total budget held by batches in flight (RunConcurrent)
};

/// The strategy a run uses: "auto" becomes search::AutoStrategy::Choice(), or ChoiceWithModel()
/// where a cost model is asked for: `pretrained` (a trained model to start from: a file or the
/// daemon's) or a `cost_model` other than "auto" and "none". Other names pass.
std::string ResolveStrategy(const std::string& strategy, const std::string& cost_model, bool pretrained);

/// Resolves a cost model name: "auto" becomes "xgb" for the strategies that rank candidates
/// with a model (sa, evolutionary, bandit, and "auto" when it resolves to one of them, see
/// ResolveStrategy) and "none" for the others; other names pass.
std::string ResolveCostModel(const std::string& name, const std::string& strategy, bool pretrained = false);

/// The protocol for the untuned default schedule: no warm-up, few repeats, a long timeout
/// (naive loops can take seconds per call).
measure::MeasureProtocol DefaultScheduleProtocol(const measure::MeasureProtocol& p);

}  // namespace tune::tuner
