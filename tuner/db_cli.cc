// `tune db`: queries of the record database (tasks, best, history, stats, runs) and the exchange
// of its records with other databases (export, import, merge).
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "dataset/file_guard.h"
#include "dataset/record_database.h"
#include "dataset/record_exchange.h"
#include "nlohmann/json.hpp"
#include "tuner/cli_commands.h"
#include "tuner/cli_format.h"
#include "tuner/parse_command_line.h"

namespace tune::tuner {
namespace {

// "1 record", "3 records".
std::string Count(int64_t n, const char* noun) { return absl::StrCat(n, " ", noun, n == 1 ? "" : "s"); }

// "imported 120 records (3 tasks, 1 target); 14 already present".
std::string DescribeImport(const char* verb, const dataset::ImportCounts& c) {
  return absl::StrCat(verb, " ", Count(c.imported, "record"), " (", Count(c.tasks, "task"), ", ",
                      Count(c.targets, "target"), "); ", c.already_present, " already present");
}

// Adds `records` to the database at `path` (created when absent) in one transaction; a
// database this created is removed again when that fails, unless another process has it open
// (FileGuard::RemoveIfSoleHolder). Prints the counts.
int ImportInto(const std::string& path, const std::vector<dataset::PortableRecord>& records, const char* verb) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  absl::StatusOr<dataset::ImportCounts> counts;
  {
    auto db = dataset::RecordDatabase::Open(path, /*create=*/true);
    if (!db.ok()) return base::Fail("tune", db.status());
    counts = (*db)->ImportRecords(records);
  }
  if (!counts.ok()) {
    if (!existed) {
      if (auto guard = dataset::FileGuard::Acquire(path); guard.ok()) guard->RemoveIfSoleHolder();
    }
    return base::Fail("tune", counts.status());
  }
  std::printf("%s\n", DescribeImport(verb, *counts).c_str());
  return 0;
}

// Whether `a` and `b` name the same file (both existing), or the same path.
bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec) && !ec;
}

// `tune db export|import|merge`.
int ExchangeCommand(CLI::App* export_cmd, CLI::App* import_cmd, const std::string& db_path,
                    const std::string& task_sel, const std::string& target_sel, const std::string& out_path,
                    const std::string& import_file, const std::vector<std::string>& sources,
                    const std::string& into) {
  if (import_cmd->parsed()) {
    auto records = dataset::ReadRecordsFile(import_file);
    if (!records.ok()) return base::Fail("tune", records.status());
    return ImportInto(db_path, *records, "imported");
  }
  if (export_cmd->parsed()) {
    auto db = dataset::RecordDatabase::OpenReadOnly(db_path);
    if (!db.ok()) return base::Fail("tune", db.status());
    auto tasks = (*db)->Tasks();
    if (!tasks.ok()) return base::Fail("tune", tasks.status());
    auto targets = (*db)->Targets();
    if (!targets.ok()) return base::Fail("tune", targets.status());
    std::set<int64_t> task_ids, target_ids;
    for (const auto& t : *tasks) {
      if (task_sel == std::to_string(t.id) || task_sel == t.workload_key) task_ids.insert(t.id);
    }
    for (const auto& t : *targets) {
      if (target_sel == t.key || target_sel == std::to_string(t.id)) target_ids.insert(t.id);
    }
    if (!task_sel.empty() && task_ids.empty()) {
      return base::Fail("tune", base::kExitUsage, "no task '" + task_sel + "' in " + db_path);
    }
    if (!target_sel.empty() && target_ids.empty()) {
      return base::Fail("tune", base::kExitUsage, "no target '" + target_sel + "' in " + db_path);
    }
    auto all = (*db)->ExportRecords();
    if (!all.ok()) return base::Fail("tune", all.status());
    std::vector<dataset::PortableRecord> records;
    for (auto& r : *all) {
      if ((task_sel.empty() || task_ids.count(r.record.task_id) > 0) &&
          (target_sel.empty() || target_ids.count(r.record.target_id) > 0)) {
        records.push_back(std::move(r));
      }
    }
    absl::Status written = out_path.empty() || out_path == "-" ? dataset::WriteRecords(records, std::cout)
                                                               : dataset::WriteRecordsFile(records, out_path);
    if (!written.ok()) return base::Fail("tune", written);
    if (!out_path.empty() && out_path != "-") {
      std::printf("exported %s to %s\n", Count(static_cast<int64_t>(records.size()), "record").c_str(),
                  out_path.c_str());
    }
    return 0;
  }
  // merge
  for (const std::string& source : sources) {
    if (SameFile(source, into)) {
      return base::Fail("tune", base::kExitUsage, "--into " + into + " is one of the databases merged; name a third one");
    }
  }
  std::vector<dataset::PortableRecord> records;
  for (const std::string& source : sources) {
    auto db = dataset::RecordDatabase::OpenReadOnly(source);
    if (!db.ok()) return base::Fail("tune", db.status());
    auto from = (*db)->ExportRecords();
    if (!from.ok()) return base::Fail("tune", from.status());
    for (auto& r : *from) {
      r.origin = absl::StrCat(source, " record ", r.record.id);
      records.push_back(std::move(r));
    }
  }
  return ImportInto(into, records, "merged");
}

// `tune db best --format json`: one JSON array, an object per best record.
void PrintBestJson(const std::vector<dataset::TaskInfo>& tasks, const std::vector<dataset::TargetInfo>& targets,
                   const std::vector<std::vector<dataset::Record>>& best) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  size_t i = 0;
  for (const auto& t : tasks) {
    for (const auto& tg : targets) {
      const std::vector<dataset::Record>& records = best[i++];
      for (size_t rank = 0; rank < records.size(); ++rank) {
        const dataset::Record& r = records[rank];
        const double s = r.result.Median();
        nlohmann::ordered_json config = nlohmann::ordered_json::parse(r.config_json, nullptr, false);
        nlohmann::ordered_json entry = {
            {"task", t.workload_key}, {"task_id", t.id}, {"template_version", t.template_version},
            {"target", tg.key},       {"rank", rank + 1}, {"seconds", s},
            {"gflops", s > 0 && std::isfinite(s) ? nlohmann::ordered_json(t.flops / s / 1e9) : nullptr},
            {"config", config.is_discarded() ? nlohmann::ordered_json(r.config_json) : config},
            {"strategy", r.strategy}, {"record_id", r.id}};
        array.push_back(std::move(entry));
      }
    }
  }
  // An array with one object per line: easy to read, and to cut up with line tools.
  std::string text = "[";
  for (size_t j = 0; j < array.size(); ++j) {
    text += (j == 0 ? "\n" : ",\n") + array[j].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::printf("%s\n]\n", text.c_str());
}

}  // namespace

int DbCommand(int argc, char** argv) {
  CLI::App app{"tune db: query the record database", "tune db"};
  std::string db_path = "tune.db", task_sel, target_sel, format = "text", out_path, import_file, into;
  std::vector<std::string> sources;
  int k = 1;
  app.require_subcommand(1);
  auto* tasks_cmd = app.add_subcommand("tasks", "list tasks with record counts and best speed");
  auto* best_cmd = app.add_subcommand("best", "best schedule per task and target");
  auto* hist_cmd = app.add_subcommand("history", "every record of a task, oldest first");
  auto* stats_cmd = app.add_subcommand("stats", "records per status");
  auto* runs_cmd = app.add_subcommand("runs", "every tuning run, its owner and how it ended (stale: its process is gone)");
  auto* export_cmd = app.add_subcommand(
      "export", "every record, with its task, target and run, as JSON lines (tune-records/1)");
  auto* import_cmd = app.add_subcommand(
      "import", "add the records of a JSON lines file (tune db export) to --db, created if absent");
  auto* merge_cmd = app.add_subcommand("merge", "add the records of two databases to a third (--into)");
  for (auto* c : {tasks_cmd, best_cmd, hist_cmd, stats_cmd, runs_cmd, export_cmd, import_cmd}) {
    c->add_option("--db", db_path, "record database file");
  }
  export_cmd->add_option("--out", out_path, "file to write (default: standard output)");
  import_cmd->add_option("file", import_file, "records file (JSON lines, tune-records/1; gzip-compressed too, e.g. a .jsonl.gz)")->required();
  merge_cmd->add_option("databases", sources, "the two databases to merge (opened read-only)")->required()->expected(2);
  merge_cmd->add_option("--into", into, "database to add their records to (created if absent)")->required();
  best_cmd->add_option("--format", format, "text (a table) or json (an array of objects)")
      ->check(CLI::IsMember({"text", "json"}));
  for (auto* c : {best_cmd, hist_cmd, export_cmd}) {
    c->add_option("--task", task_sel, "task id or workload key (default: all tasks)");
    c->add_option("--target", target_sel, "target key (default: all targets)");
  }
  best_cmd->add_option("-k", k, "how many of the best to show")->check(CLI::Range(1, 100000000));
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;
  if (export_cmd->parsed() || import_cmd->parsed() || merge_cmd->parsed()) {
    return ExchangeCommand(export_cmd, import_cmd, db_path, task_sel, target_sel, out_path, import_file, sources, into);
  }

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
  std::vector<std::vector<dataset::Record>> best;  // per selected task and target, for --format json
  for (const auto& t : sel_tasks) {
    for (const auto& tg : sel_targets) {
      if (best_cmd->parsed()) {
        auto b = (*db)->Best(t.id, tg.id, k);
        if (!b.ok()) return base::Fail("tune", b.status());
        best.push_back(*b);
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
  if (best_cmd->parsed() && format == "json") {
    PrintBestJson(sel_tasks, sel_targets, best);
  } else if (best_cmd->parsed()) {
    base::PrintTable({"workload", "target", "best ms", "GFLOP/s", "strategy", "config"}, rows);
  } else {
    base::PrintTable({"id", "workload", "status", "ms", "best so far", "strategy", "config / message"}, rows);
  }
  return 0;
}

}  // namespace tune::tuner
