// `tune export`: a model's best kernels on one target as a library that builds without tune.
#include "exporter/export_cli.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "exporter/exporter.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuning_flags.h"

namespace tune::exporter {

int ExportCommand(int argc, char** argv) {
  CLI::App app{"tune export: a model's tuned kernels as a library that builds with CMake and links without tune",
               "tune export"};
  ExportRequest request;
  request.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--db", request.db_path, "record database file")->required();
  app.add_option("--model", request.model, "zoo name, JSON model file or ONNX model")->required();
  app.add_option("--input", request.inputs, "an ONNX input's shape, NAME=1x3x224x224 (repeatable)");
  auto* target = app.add_option("--target", request.target,
                                "llvm (this CPU, keyed as `tune MODEL --target llvm` keys it) or cuda[:N] (GPU N)");
  app.add_option("--target-key", request.target_key,
                 "a target of the database by key or id (`tune db best` lists them); no device needed")
      ->excludes(target);
  app.add_option("--threads", request.threads, "kernel threads of --target llvm (default: all cores)")
      ->check(CLI::Range(1, 256));
  app.add_option("--out", request.out_dir, "directory to write the library to")->required();
  app.add_flag("--force", request.force, "replace --out when it exists and is not empty");
  tuner::AddLayoutFlag(app, request.layout,
                       "the convolutions' NCHWc kernels, as `tune MODEL --layout nchwc` tuned them");
  if (auto code = tuner::ParseCommandLine(app, argc - 1, argv + 1)) return *code;

  auto library = Export(request);
  if (!library.ok()) return base::Fail("tune", library.status());
  std::vector<std::vector<std::string>> rows;
  int tuned = 0;
  for (const ExportedKernel& k : library->kernels) {
    tuned += k.tuned;
    rows.push_back({k.function, k.layer, k.workload.Label(), k.tuned ? "record " + std::to_string(k.record_id) : "default",
                    k.tuned ? absl::StrFormat("%.4f", k.time_s * 1e3) : "-"});
  }
  base::PrintTable({"function", "layer", "workload", "schedule", "ms"}, rows);
  std::fprintf(stderr, "tune: exported %zu kernels (%d tuned, %zu default schedules) for %s to %s\n",
               library->kernels.size(), tuned, library->kernels.size() - tuned, library->target.Key().c_str(),
               request.out_dir.c_str());
  return 0;
}

}  // namespace tune::exporter
