// `tune dataset collect`: N diverse measured configs per task of a list of models, resumably.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "dataset/record_database.h"
#include "measure/target.h"
#include "measure/task_factory.h"
#include "tuner/cli_commands.h"
#include "tuner/cli_format.h"
#include "tuner/cli_support.h"
#include "tuner/dataset_collect.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuning_flags.h"

namespace tune::tuner {
namespace {

constexpr char kWho[] = "tune dataset collect";

/// The live progress line: rewritten in place on a terminal, one line per batch otherwise.
class CollectProgressLine {
 public:
  void operator()(const CollectProgress& p) {
    // Without a terminal, one line per change of task or count (not per event of the loop).
    if (!line_.tty() && p.task_index == last_task_ && p.done == last_done_) return;
    last_task_ = p.task_index;
    last_done_ = p.done;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "[task %d/%d] %-40.40s records %lld/%lld  %.2f records/s  elapsed %s  ETA %s",
                  p.task_index + 1, p.task_count, p.task->workload.Label().c_str(), static_cast<long long>(p.done),
                  static_cast<long long>(p.total), p.rate, FormatSeconds(p.elapsed_s).c_str(),
                  p.done > 0 ? FormatSeconds(p.eta_s).c_str() : "-");
    line_.Show(buf);
  }
  void Finish() { line_.Finish(); }

 private:
  LiveLine line_;
  int last_task_ = -1;
  int64_t last_done_ = -1;
};

}  // namespace

int DatasetCollectCommand(int argc, char** argv) {
  CLI::App app{"tune dataset collect: measure N diverse configs of every task of some models into a record "
               "database (a share at random, the rest from a model-guided search); a rerun measures only what "
               "is missing.\n"
               "usage: tune dataset collect --models resnet-18,net.json,model.onnx --target llvm --per-task N "
               "[--layout nchw|nchwc] [--db FILE] [options]",
               kWho};
  std::string models_text, target_text = "llvm", db_path = "dataset.db";
  CollectOptions c;
  c.per_task = 0;
  TuningFlags flags;  // the fields the shared checks (ToTuneOptions) read
  TuneOptions& o = flags.options;
  o.strategy = c.guided_strategy;
  o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--models", models_text, "comma-separated models: built-in names, JSON model files, ONNX models")
      ->required();
  app.add_option("--target", target_text, "where kernels run: llvm (this CPU) or cuda[:N] (NVIDIA GPU N)");
  app.add_option("--per-task", c.per_task, "records wanted per task on the target")
      ->required()
      ->check(CLI::Range(1, CollectOptions::kMaxPerTask));
  app.add_option("--db", db_path, "record database file (SQLite)")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--random-share", c.random_share, "share of each task's records drawn uniformly at random")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--strategy", o.strategy, "strategy of the guided share: sa, evolutionary, bandit, ...")
      ->capture_default_str();
  app.add_option("--cost-model", o.cost_model, "cost model of the guided share: auto, none, xgb, xgb-reg");
  app.add_option("--batch", o.batch, "candidates built and measured per round")
      ->check(CLI::Range(1, TuningFlags::kMaxBatch));
  app.add_option("--threads", o.threads, "threads a kernel may use (default: all cores)")->check(CLI::Range(1, 256));
  AddProtocolFlags(app, o.protocol);
  app.add_option("--input", flags.inputs, "NAME=1x3x224x224: the shape of an ONNX model's input, repeatable");
  std::string layout = "nchw";
  AddLayoutFlag(app, layout,
                "the convolutions' NCHWc workloads, as `tune MODEL --layout nchwc` tunes them");
  if (auto code = ParseCommandLine(app, argc - 2, argv + 2)) return *code;
  const absl::StatusOr<int64_t> layout_block = LayoutBlock(layout, target_text);
  if (!layout_block.ok()) return base::Fail("tune", layout_block.status());

  std::vector<std::string> models;
  for (absl::string_view part : absl::StrSplit(models_text, ',')) {
    std::string name(absl::StripAsciiWhitespace(part));
    if (name.empty()) {
      return base::Fail("tune", base::kExitUsage, "--models: an empty model name in '" + models_text + "'");
    }
    models.push_back(std::move(name));
  }
  auto checked = ToTuneOptions(flags);
  if (!checked.ok()) return base::Fail("tune", checked.status());
  c.tune = *std::move(checked);
  c.guided_strategy = c.tune.strategy;
  c.tune.command = JoinArgs(argc, argv);
  InstallStopHandlers();
  auto stop_requested = [] { return StopRequested(); };
  c.tune.should_stop = stop_requested;

  // Every model loaded and every task made before anything is written.
  auto infos = CollectTasks(models, flags.inputs, *layout_block);
  if (!infos.ok()) return base::Fail("tune", infos.status());
  auto target = measure::Target::Parse(target_text, o.threads);
  if (!target.ok()) return base::Fail("tune", target.status());
  {
    std::vector<codegen::Workload> workloads;
    for (const TuneTask& t : *infos) workloads.push_back(t.workload);
    if (absl::Status st = measure::CheckBuffersFit(workloads, *target); !st.ok()) return base::Fail("tune", st);
  }
  measure::TaskFactoryOptions factory_options;
  factory_options.should_stop = stop_requested;
  auto factory = measure::TaskFactory::Create(*target, std::move(factory_options));
  if (!factory.ok()) return base::Fail("tune", factory.status());
  std::vector<std::unique_ptr<measure::Task>> made;
  std::vector<measure::Task*> tasks;
  std::vector<TuneTask> kept;  // the tasks of `infos` that the target can run, in order
  for (const TuneTask& t : *infos) {
    if (stop_requested()) {
      std::fprintf(stderr, "tune: interrupted while preparing the tasks; nothing was written\n");
      return 128 + SIGINT;
    }
    auto task = (*factory)->Make({t.workload, TaskDataSeed(c.tune.seed)});
    if (!task.ok()) {
      if (absl::IsCancelled(task.status())) return base::Fail("tune", task.status());
      // A layer the target cannot run (no valid config of its template) is skipped with one
      // line: the other tasks' records are still worth collecting.
      std::fprintf(stderr, "tune: skipped %s (%s): %s\n", base::EscapeControl(t.name).c_str(),
                   t.workload.Label().c_str(), base::EscapeControl(std::string(task.status().message())).c_str());
      continue;
    }
    made.push_back(*std::move(task));
    tasks.push_back(made.back().get());
    kept.push_back(t);
  }
  if (kept.empty()) return base::Fail("tune", base::kExitUsage, "no task of the models can run on " + target->Key());
  *infos = std::move(kept);
  auto db = dataset::RecordDatabase::Open(db_path, /*create=*/true);
  if (!db.ok()) return base::Fail("tune", db.status());

  std::fprintf(stderr, "tune: collecting %d records per task of %zu tasks on %s (%s), %.0f%% at random, the rest by %s; database %s\n",
               c.per_task, infos->size(), target->device_model.c_str(), target->Key().c_str(), c.random_share * 100,
               c.guided_strategy.c_str(), db_path.c_str());
  const auto start = std::chrono::steady_clock::now();
  CollectProgressLine progress;
  auto collected = CollectDataset(
      db->get(), **factory, *infos, tasks, c, [&progress](const CollectProgress& p) { progress(p); },
      [&progress](const std::string& line) {
        progress.Finish();
        std::fprintf(stderr, "%s\n", base::EscapeControl(line).c_str());
      });
  progress.Finish();
  const bool interrupted = StopRequested();
  if (!collected.ok()) {
    if (interrupted && absl::IsCancelled(collected.status())) {
      std::fprintf(stderr, "tune: interrupted; the records measured so far are in %s (a rerun continues)\n",
                   db_path.c_str());
      return 128 + SIGINT;
    }
    return base::Fail("tune", collected.status());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::vector<std::string>> rows;
  int64_t added = 0;
  for (const CollectedTask& t : *collected) {
    added += t.measured_now;
    std::string records = std::to_string(t.after.records);
    if (!t.skipped.empty()) records += " (" + t.skipped + ")";
    rows.push_back({t.task.name, t.task.workload.Label(), records, std::to_string(t.after.ok),
                    std::to_string(t.after.failed), Ms(t.after.best_s)});
  }
  std::printf("\n");
  base::PrintTable({"task", "workload", "records", "ok", "failed", "best ms"}, rows);
  std::printf("\ncollected %lld new records (%zu tasks) in %s s\n", static_cast<long long>(added), collected->size(),
              absl::StrCat(std::round(seconds * 10) / 10).c_str());
  if (interrupted) {
    std::fprintf(stderr, "tune: interrupted; the records measured so far are in %s (a rerun continues)\n",
                 db_path.c_str());
    return 128 + SIGINT;
  }
  return 0;
}

}  // namespace tune::tuner
