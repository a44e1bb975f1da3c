// `tune db`: queries of the record database (tasks, best, history, stats, runs).
#include <ctime>
#include <limits>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "base/table.h"
#include "dataset/record_database.h"
#include "tuner/cli_commands.h"
#include "tuner/cli_format.h"
#include "tuner/parse_command_line.h"

namespace tune::tuner {

int DbCommand(int argc, char** argv) {
  CLI::App app{"tune db: query the record database", "tune db"};
  std::string db_path = "tune.db", task_sel, target_sel;
  int k = 1;
  app.require_subcommand(1);
  auto* tasks_cmd = app.add_subcommand("tasks", "list tasks with record counts and best speed");
  auto* best_cmd = app.add_subcommand("best", "best schedule per task and target");
  auto* hist_cmd = app.add_subcommand("history", "every record of a task, oldest first");
  auto* stats_cmd = app.add_subcommand("stats", "records per status");
  auto* runs_cmd = app.add_subcommand("runs", "every tuning run, its owner and how it ended (stale: its process is gone)");
  for (auto* c : {tasks_cmd, best_cmd, hist_cmd, stats_cmd, runs_cmd}) {
    c->add_option("--db", db_path, "record database file");
  }
  for (auto* c : {best_cmd, hist_cmd}) {
    c->add_option("--task", task_sel, "task id or workload key (default: all tasks)");
    c->add_option("--target", target_sel, "target key (default: all targets)");
  }
  best_cmd->add_option("-k", k, "how many of the best to show")->check(CLI::Range(1, 100000000));
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;

  auto db = dataset::RecordDatabase::Open(db_path, /*create=*/false);
  if (!db.ok()) return base::Fail("tune", db.status());
  auto tasks = (*db)->Tasks();
  if (!tasks.ok()) return base::Fail("tune", tasks.status());
  auto targets = (*db)->Targets();
  if (!targets.ok()) return base::Fail("tune", targets.status());

  std::vector<dataset::TaskInfo> sel_tasks;
  for (const auto& t : *tasks) {
    if (task_sel.empty() || task_sel == std::to_string(t.id) || task_sel == t.workload_key) sel_tasks.push_back(t);
  }
  if (!task_sel.empty() && sel_tasks.empty()) return base::Fail("tune", base::kExitUsage, "no task '" + task_sel + "' in " + db_path);
  std::vector<dataset::TargetInfo> sel_targets;
  for (const auto& t : *targets) {
    if (target_sel.empty() || target_sel == t.key || target_sel == std::to_string(t.id)) sel_targets.push_back(t);
  }
  if (!target_sel.empty() && sel_targets.empty()) return base::Fail("tune", base::kExitUsage, "no target '" + target_sel + "' in " + db_path);

  if (tasks_cmd->parsed()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : sel_tasks) {
      int64_t n = 0;
      double best = std::numeric_limits<double>::infinity();
      for (const auto& tg : sel_targets) {
        auto recs = (*db)->Records(t.id, tg.id);
        if (!recs.ok()) return base::Fail("tune", recs.status());
        n += static_cast<int64_t>(recs->size());
        auto b = (*db)->Best(t.id, tg.id, 1);
        if (b.ok() && !b->empty()) best = std::min(best, (*b)[0].result.Median());
      }
      rows.push_back({std::to_string(t.id), t.workload_key, std::to_string(n), Ms(best), Gflops(t.flops, best)});
    }
    base::PrintTable({"id", "workload", "records", "best ms", "GFLOP/s"}, rows);
    return 0;
  }
  if (stats_cmd->parsed()) {
    auto counts = (*db)->StatusCounts();
    if (!counts.ok()) return base::Fail("tune", counts.status());
    std::vector<std::vector<std::string>> rows;
    for (auto& [status, n] : *counts) rows.push_back({status, std::to_string(n)});
    base::PrintTable({"status", "records"}, rows);
    return 0;
  }
  if (runs_cmd->parsed()) {
    auto runs = (*db)->Runs();
    if (!runs.ok()) return base::Fail("tune", runs.status());
    auto when = [](double seconds) -> std::string {
      if (seconds <= 0) return "-";
      const std::time_t t = static_cast<std::time_t>(seconds);
      std::tm tm{};
      char text[32] = "-";
      if (localtime_r(&t, &tm) != nullptr) std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
      return text;
    };
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : *runs) {
      rows.push_back({std::to_string(r.id), r.status, when(r.started), when(r.finished),
                      r.pid > 0 ? "pid " + std::to_string(r.pid) + " on " + r.host : "-", r.command, r.message});
    }
    base::PrintTable({"id", "status", "started", "ended", "owner", "command", "message"}, rows);
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : sel_tasks) {
    for (const auto& tg : sel_targets) {
      if (best_cmd->parsed()) {
        auto b = (*db)->Best(t.id, tg.id, k);
        if (!b.ok()) return base::Fail("tune", b.status());
        for (const auto& r : *b) {
          rows.push_back({t.workload_key, tg.key, Ms(r.result.Median()), Gflops(t.flops, r.result.Median()),
                          r.strategy, r.config_json});
        }
      } else {
        auto recs = (*db)->Records(t.id, tg.id);
        if (!recs.ok()) return base::Fail("tune", recs.status());
        double best = std::numeric_limits<double>::infinity();
        for (const auto& r : *recs) {
          if (r.result.ok()) best = std::min(best, r.result.Median());
          rows.push_back({std::to_string(r.id), t.workload_key, measure::StatusName(r.result.status),
                          Ms(r.result.Median()), Ms(best), r.strategy,
                          r.result.ok() ? r.config_json : r.result.message.substr(0, 80)});
        }
      }
    }
  }
  if (best_cmd->parsed()) {
    base::PrintTable({"workload", "target", "best ms", "GFLOP/s", "strategy", "config"}, rows);
  } else {
    base::PrintTable({"id", "workload", "status", "ms", "best so far", "strategy", "config / message"}, rows);
  }
  return 0;
}

}  // namespace tune::tuner
