// `tune plot`: tuning curves and the speed-up chart of a record database, drawn by gnuplot.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "dataset/record_database.h"
#include "tuner/cli_commands.h"
#include "tuner/parse_command_line.h"
#include "tuner/plot.h"

namespace tune::tuner {

int PlotCommand(int argc, char** argv) {
  CLI::App app{"tune plot: tuning curves (best-so-far latency per strategy) and the speed-up chart", "tune plot"};
  std::string db_path = "tune.db", task_sel, target_sel, vendor_path;
  PlotOptions options;
  app.add_option("--db", db_path, "record database file (opened read-only)");
  app.add_option("--task", task_sel, "task id or workload key (default: every task)");
  app.add_option("--target", target_sel, "target key or id (default: every target)");
  app.add_option("--out", options.out_dir, "directory for the data files, gnuplot scripts and images")->required();
  app.add_option("--format", options.format, "image format: svg or png")->check(CLI::IsMember({"svg", "png"}));
  app.add_option("--vendor", vendor_path,
                 "CSV of vendor times (workload_key,target_key,vendor,seconds) for extra speed-up bars");
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;

  auto db = dataset::RecordDatabase::OpenReadOnly(db_path);
  if (!db.ok()) return base::Fail("tune", db.status());
  auto tasks = (*db)->Tasks();
  if (!tasks.ok()) return base::Fail("tune", tasks.status());
  auto targets = (*db)->Targets();
  if (!targets.ok()) return base::Fail("tune", targets.status());
  if (!task_sel.empty()) {
    for (const auto& t : *tasks) {
      if (task_sel == std::to_string(t.id) || task_sel == t.workload_key) options.task_ids.push_back(t.id);
    }
    if (options.task_ids.empty()) return base::Fail("tune", base::kExitUsage, "no task '" + task_sel + "' in " + db_path);
  }
  if (!target_sel.empty()) {
    for (const auto& t : *targets) {
      if (target_sel == t.key || target_sel == std::to_string(t.id)) options.target_ids.push_back(t.id);
    }
    if (options.target_ids.empty()) {
      return base::Fail("tune", base::kExitUsage, "no target '" + target_sel + "' in " + db_path);
    }
  }
  if (!vendor_path.empty()) {
    auto vendor = ReadVendorCsv(vendor_path);
    if (!vendor.ok()) return base::Fail("tune", vendor.status());
    options.vendor = *std::move(vendor);
  }

  auto files = WritePlotFiles(**db, options);
  if (!files.ok()) return base::Fail("tune", files.status());
  for (const std::string& note : files->notes) std::printf("note: %s\n", note.c_str());
  for (const std::string& path : files->data) std::printf("%s\n", path.c_str());
  std::fflush(stdout);
  for (const PlotScript& plot : files->scripts) {
    absl::Status drawn = RunGnuplot(options.out_dir, plot.script);
    if (absl::IsNotFound(drawn)) {
      return base::Fail("tune", base::kExitUsage,
                        std::string(drawn.message()) + "; the data files and gnuplot scripts above are written in " +
                            options.out_dir);
    }
    if (!drawn.ok()) return base::Fail("tune", base::kExitFailure, std::string(drawn.message()));
    std::printf("%s/%s\n", options.out_dir.c_str(), plot.image.c_str());
  }
  if (files->scripts.empty()) std::printf("no plot: no task has records to draw\n");
  return 0;
}

}  // namespace tune::tuner
