// The `tune` command line: parsing, the live progress line, result tables, db queries.
#include "tuner/cli.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "base/table.h"
#include "dataset/record_database.h"
#include "measure/target.h"
#include "measure/task_factory.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "tuner/cli_commands.h"
#include "tuner/cli_format.h"
#include "tuner/cli_support.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"
#include "tuner/replay.h"
#include "tuner/tuner.h"
#include "tuner/tuning_flags.h"

namespace tune::tuner {
namespace {


/// The live progress display: one rewritten line on a terminal, one line per event otherwise.
class ProgressLine {
 public:
  void operator()(const ProgressEvent& e) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "[%d/%d] %-44.44s trials %3d/%-3d best %8s GFLOP/s (%s ms)  elapsed %s  ETA %s",
                  e.task_index + 1, e.task_count, e.task->workload.Label().c_str(), e.trials, e.trials_budget,
                  Gflops(e.task->workload.Flops(), e.best_s).c_str(), Ms(e.best_s).c_str(),
                  FormatSeconds(e.elapsed_s).c_str(), FormatSeconds(e.eta_s).c_str());
    line_.Show(buf, e.task_done);
  }
  void Finish() { line_.Finish(); }

 private:
  LiveLine line_;
};

/// The flags of `tune MODEL` and `tune op`: the shared tuning flags, the local run's own
/// (bound to the same TuneOptions), where to run and where to record.
struct CommonFlags {
  CommonFlags() { tuning.options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

  TuningFlags tuning;
  std::string target = "llvm";
  std::string db_path = "tune.db";
  bool show_kernel = false;
};

void AddTuneFlags(CLI::App& app, CommonFlags& f) {
  TuneOptions& o = f.tuning.options;
  app.add_option("--target", f.target, "where kernels run: llvm (this CPU) or cuda[:N] (NVIDIA GPU N)");
  app.add_option("--db", f.db_path, "record database file (SQLite)");
  AddTuningFlags(app, f.tuning);
  app.add_flag("--resume", o.resume, "continue from the records in the database, re-measuring none");
  app.add_option("--threads", o.threads, "threads a kernel may use (default: all cores)")->check(CLI::Range(1, 256));
  app.add_option("--early-stop", o.early_stop, "stop a task after N trials without improvement (0 = off)")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--finalists", o.finalists, "re-measure the best N configs of each task at the end (0 = off)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--sibling-finalists", o.sibling_finalists,
                 "measure beside the finalists up to N best configs of the same shape with another epilogue "
                 "(bias, relu), which may win (0 = off)")
      ->check(CLI::Range(0, 100))->capture_default_str();
  app.add_option("--cutoff-factor", o.cutoff_factor,
                 "stop timing a candidate whose first warm call (after the checked cold one) is this many times slower than the best (0 = off)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_flag_callback("--no-transfer", [&o] { o.transfer = false; },
                        "do not warm-start cost models from other tasks' records nor seed configs from them");
  app.add_option("--transfer-configs", o.transfer_configs,
                 "measure first up to N of the best configs of the most similar recorded tasks (0 = off)")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  app.add_flag_callback("--no-start-configs", [&o] { o.start_configs = false; },
                        "do not measure the templates' start points (configs derived from the shape and the "
                        "target) before the search's own");
  app.add_flag("--show-kernel", f.show_kernel, "print the best kernel of each task as pseudo-C");
}

// The exit code of a run ended by the first SIGINT or SIGTERM: the shell's code for Ctrl-C.
constexpr int kExitInterrupted = 128 + SIGINT;

// The run this process started (after the first `runs_before` runs, with `command`) marked
// "interrupted": a signal stopped it inside a task's preparation or measurement, where the loop
// ends with a cancelled batch rather than at its own check between batches.
void MarkInterrupted(dataset::RecordDatabase& db, size_t runs_before, const std::string& command) {
  auto runs = db.Runs();
  if (!runs.ok()) return;
  const int64_t pid = getpid();
  for (size_t i = runs->size(); i-- > runs_before;) {
    const dataset::RunInfo& run = (*runs)[i];
    if (run.command == command && (run.pid == pid || run.pid == 0) && run.status != "interrupted") {
      (void)db.FinishRun(run.id, "interrupted");
      return;
    }
  }
}

/// Tunes `tasks` as `tune MODEL` and `tune op` do, after InstallStopHandlers.
int TuneTasks(const std::string& raw_title, const std::vector<TuneTask>& tasks, const CommonFlags& f,
              const std::string& command) {
  const std::string title = base::EscapeControl(raw_title);  // a model file's name, printed
  // The stop handlers are installed (InstallStopHandlers): the first SIGINT or SIGTERM stops
  // whatever phase is running: making the tasks, drawing their data, the naive reference, the
  // search.
  auto stop_requested = [] { return StopRequested(); };
  auto interrupted_early = [] {
    std::fprintf(stderr, "tune: interrupted while preparing the tasks; nothing was written\n");
    return kExitInterrupted;
  };
  if (stop_requested()) return interrupted_early();
  auto target = measure::Target::Parse(f.target, f.tuning.options.threads);
  if (!target.ok()) return base::Fail("tune", target.status());
  TuningFlags tuning = f.tuning;
  tuning.target_family = target->kind;  // a --cost-model FILE.tcm must be of the target's family
  absl::StatusOr<TuneOptions> options = ToTuneOptions(tuning);
  if (!options.ok()) return base::Fail("tune", options.status());
  TuneOptions o = *std::move(options);
  o.command = command;
  if (absl::Status st = CheckTrialBudget(o, tasks.size()); !st.ok()) return base::Fail("tune", st);
  {
    std::vector<codegen::Workload> workloads;
    for (const auto& t : tasks) workloads.push_back(t.workload);
    if (absl::Status st = measure::CheckBuffersFit(workloads, *target); !st.ok()) return base::Fail("tune", st);
  }
  // Every task made and checked before anything is written; the loop tunes these same tasks.
  measure::TaskFactoryOptions factory_options;
  factory_options.should_stop = stop_requested;
  auto factory = measure::TaskFactory::Create(*target, std::move(factory_options));
  if (!factory.ok()) return base::Fail("tune", factory.status());
  std::vector<std::unique_ptr<measure::Task>> made;
  std::vector<LoopTask> loop;
  for (const auto& t : tasks) {
    if (stop_requested()) return interrupted_early();
    auto task = (*factory)->Make({t.workload, TaskDataSeed(o.seed)});
    if (!task.ok()) return base::Fail("tune", task.status());
    for (const std::string& text : o.given_configs) {
      if (auto config = ParseGiven(**task, text); !config.ok()) {
        return base::Fail("tune", base::kExitUsage, "--config: " + std::string(config.status().message()));
      }
    }
    made.push_back(*std::move(task));
    loop.push_back({t, made.back().get()});
  }
  if (stop_requested()) return interrupted_early();
  auto db = dataset::RecordDatabase::Open(f.db_path, /*create=*/true);
  if (!db.ok()) return base::Fail("tune", db.status());
  auto runs_before = (*db)->Runs();
  if (!runs_before.ok()) return base::Fail("tune", runs_before.status());

  std::fprintf(stderr, "tune: %s on %s (%s), %zu tasks, %d trials per task, database %s\n", title.c_str(),
               target->device_model.c_str(), target->Key().c_str(), tasks.size(), o.trials_per_task,
               f.db_path.c_str());
  o.should_stop = stop_requested;
  ProgressLine progress;
  Tuner tuner(db->get(), std::move(*factory), o, [&progress](const ProgressEvent& e) { progress(e); });
  auto outcomes = tuner.Run(loop);
  progress.Finish();
  const bool interrupted = StopRequested();
  auto say_interrupted = [&] {
    std::fprintf(stderr, "tune: interrupted; the records measured so far are in %s (--resume continues)\n",
                 f.db_path.c_str());
  };
  if (!outcomes.ok() && interrupted && absl::IsCancelled(outcomes.status())) {
    // Stopped inside a task's preparation or measurement (its data, its reference): the
    // batches committed so far stay, the run is marked as a signal leaves it.
    MarkInterrupted(**db, runs_before->size(), o.command);
    say_interrupted();
    return kExitInterrupted;
  }
  if (!outcomes.ok()) return base::Fail("tune", outcomes.status());
  if (interrupted) say_interrupted();

  std::vector<std::vector<std::string>> rows;
  double total_best = 0, total_default = 0;
  bool all_best = true, all_default = true;
  int skipped = 0;
  for (const auto& o : *outcomes) {
    if (!o.skipped.empty() && o.trials == 0) {  // another live run tunes it now
      rows.push_back({o.task.name, o.task.workload.Label(), std::to_string(o.task.count), "skipped: " + o.skipped,
                      "-", "-", "-", "-"});
      ++skipped;
      all_best = all_default = false;
      continue;
    }
    char speedup[32] = "-";
    if (std::isfinite(o.best_s) && std::isfinite(o.default_s)) {
      std::snprintf(speedup, sizeof(speedup), "%.1fx", o.default_s / o.best_s);
    }
    rows.push_back({o.task.name, o.task.workload.Label(), std::to_string(o.task.count),
                    std::to_string(o.trials) + (o.failed ? " (" + std::to_string(o.failed) + " failed)" : ""),
                    Ms(o.best_s), Gflops(o.flops, o.best_s), Ms(o.default_s), speedup});
    if (std::isfinite(o.best_s)) total_best += o.best_s * o.task.count; else all_best = false;
    if (std::isfinite(o.default_s)) total_default += o.default_s * o.task.count; else all_default = false;
  }
  std::printf("\n");
  base::PrintTable({"task", "workload", "count", "trials", "best ms", "GFLOP/s", "default ms", "speedup"}, rows);
  std::printf("\nestimated %s latency (sum of best x count): %s ms%s; untuned default: %s ms\n", title.c_str(),
              all_best ? Ms(total_best).c_str() : "-", all_best ? "" : skipped ? " (some tasks were skipped: tuned by another run)" : " (some tasks have no valid kernel)",
              all_default ? Ms(total_default).c_str() : "-");
  if (o.pretrained != nullptr) std::printf("%s\n", base::EscapeControl(o.pretrained_note).c_str());
  for (const auto& out : *outcomes) {
    if (!out.model_note.empty()) {
      std::printf("%s: %s\n", base::EscapeControl(out.task.name).c_str(), base::EscapeControl(out.model_note).c_str());
    }
  }
  // The configs a count of each outcome says were seeded, and the tasks with any.
  auto seeded = [&](int TaskOutcome::*count) {
    std::pair<int, int> sum{0, 0};
    for (const auto& out : *outcomes) {
      sum.first += out.*count;
      sum.second += out.*count > 0 ? 1 : 0;
    }
    return sum;
  };
  if (const auto [configs, tasks] = seeded(&TaskOutcome::transferred); configs > 0) {
    std::printf("config transfer: %d configs seeded into %d task(s) from similar recorded tasks (strategy \"transfer\")\n",
                configs, tasks);
  }
  if (const auto [configs, tasks] = seeded(&TaskOutcome::started); configs > 0) {
    std::printf("start configs: %d of the templates' start points measured first in %d task(s) (strategy \"start\")\n",
                configs, tasks);
  }
  if (const auto [configs, tasks] = seeded(&TaskOutcome::sibling_finalists); configs > 0) {
    std::printf("sibling finalists: %d configs of the same shapes with another epilogue measured beside %d task(s)' "
                "finalists; %d of them won\n",
                configs, tasks, seeded(&TaskOutcome::sibling_won).first);
  }
  if (f.show_kernel) {
    auto factory = measure::TaskFactory::Create(*target);
    for (const auto& o : *outcomes) {
      if (o.best_config.empty() || !factory.ok()) continue;
      auto text = (*factory)->KernelSource(o.task.workload, o.best_config);
      if (!text.ok()) continue;
      std::printf("\n// %s  %s\n// config %s\n%s", o.task.name.c_str(), o.task.workload.Label().c_str(),
                  o.best_config.c_str(), text->c_str());
    }
  }
  return interrupted ? kExitInterrupted : 0;
}


int ModelCommand(int argc, char** argv) {
  CLI::App app{"tune: autotune the kernels of a model.\n"
               "usage: tune MODEL --target llvm [options]   (MODEL: a built-in name, a JSON model file or an ONNX model)\n"
               "       tune op KIND --shape S [options]     (one operator)\n"
               "       tune db tasks|best|history|stats|runs|export|import|merge [options]\n"
               "       tune plot --db DB --out DIR [options]   (tuning curves, speed-up charts)\n"
               "       tune dataset collect|split [options]   (datasets for cost models)\n"
               "       tune run MODEL.onnx --db DB --target T [options]   (the whole model with its tuned kernels)\n"
               "       tune export --db DB --model MODEL --target T --out DIR   (the kernels as a library)\n"
               "       tune replay CACHE --strategy S --budget B --runs R   (recorded Kernel Tuner space)\n",
               "tune"};
  std::string model;
  std::string layout = "nchw";
  CommonFlags f;
  app.add_option("model", model,
                 "built-in model (resnet-18, resnet-50, mobilenet-v2, bert-base), JSON model file or ONNX model (.onnx)")
      ->required();
  AddTuneFlags(app, f);
  AddLayoutFlag(app, layout,
                "the convolutions' NCHWc workloads, in channel blocks of the vector width (or half of it "
                "where the width does not divide a conv's channels), as `tune run --layout nchwc` runs "
                "them");
  if (auto code = ParseCommandLine(app, argc, argv)) return *code;
  const absl::StatusOr<int64_t> layout_block = LayoutBlock(layout, f.target);
  if (!layout_block.ok()) return base::Fail("tune", layout_block.status());
  InstallStopHandlers();
  auto m = LoadModel(model, f.tuning.inputs, *layout_block);
  if (!m.ok()) return base::Fail("tune", m.status());
  if (!m->summary.empty()) std::fprintf(stderr, "%s\n", base::EscapeControl(m->summary).c_str());
  return TuneTasks(m->name, ExtractTasks(*m), f, JoinArgs(argc, argv));
}

int OpCommand(int argc, char** argv) {
  CLI::App app{"tune op: autotune one operator.\n"
               "shapes: matmul/dense M,N,K   batch_matmul B,M,N,K   "
               "conv2d N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]][,nchwXc]",
               "tune op"};
  std::string kind, shape;
  bool bias = false, relu = false;
  CommonFlags f;
  app.add_option("kind", kind, "dense, matmul, batch_matmul or conv2d")->required();
  app.add_option("--shape", shape, "the operator's shape")->required();
  app.add_flag("--bias", bias, "fuse a bias add");
  app.add_flag("--relu", relu, "fuse a ReLU");
  app.add_option("--config", f.tuning.options.given_configs,
                 "a config (JSON, as `tune db best` shows it) measured before the search, repeatable; "
                 "--trials N with N configs measures just those");
  AddTuneFlags(app, f);
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;
  if (!f.tuning.inputs.empty()) return base::Fail("tune", base::kExitUsage, "--input applies only to ONNX models");
  InstallStopHandlers();
  auto op = codegen::ParseOpName(kind);
  if (!op.ok()) return base::Fail("tune", op.status());
  auto w = codegen::Workload::Parse(*op, shape);
  if (!w.ok()) return base::Fail("tune", w.status());
  w->bias = bias;
  w->relu = relu;
  return TuneTasks(kind, {TuneTask{kind, *w, 1}}, f, JoinArgs(argc, argv));
}

}  // namespace

int RunCli(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  if (argc >= 2 && std::string(argv[1]) == "op") return OpCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "db") return DbCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "plot") return PlotCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "dataset") {
    const std::string sub = argc >= 3 ? argv[2] : "";
    if (sub == "collect") return DatasetCollectCommand(argc, argv);
    if (sub == "split") return DatasetSplitCommand(argc, argv);
    return base::Fail("tune", base::kExitUsage, "usage: tune dataset collect|split ... (see tune dataset collect --help)");
  }
  if (argc >= 2 && std::string(argv[1]) == "replay") return ReplayCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "train") return TrainCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "tasks") return TasksCommand(argc, argv);
  return ModelCommand(argc, argv);
}

}  // namespace tune::tuner
