// `tune tasks MODEL`: a model's tuning tasks as a table, or as a model file (--json).
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "base/exit_code.h"
#include "base/table.h"
#include "tuner/cli_commands.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"
#include "tuner/tuning_flags.h"

namespace tune::tuner {

int TasksCommand(int argc, char** argv) {
  CLI::App app{"tune tasks: the tuning tasks of a model (one per distinct workload, with how many layers share "
               "it and its GFLOP per run), as a table or, with --json, as a model file tune reads back.\n"
               "usage: tune tasks MODEL [--input NAME=SHAPE ...] [--layout nchw|nchwc] [--json]",
               "tune tasks"};
  std::string model;
  std::vector<std::string> inputs;
  bool json = false;
  app.add_option("model", model, "built-in model (resnet-18, ...), JSON model file or ONNX model (.onnx)")
      ->required();
  app.add_option("--input", inputs, "NAME=1x3x224x224: the shape of an ONNX model's input, repeatable");
  app.add_flag("--json", json, "print the model file (JSON) instead of the table");
  std::string layout = "nchw";
  AddLayoutFlag(app, layout,
                "the convolutions' NCHWc workloads, in channel blocks of this CPU's vector width (or half "
                "of it where the width does not divide a conv's channels), as `tune MODEL --layout nchwc` "
                "tunes them");
  if (auto code = ParseCommandLine(app, argc - 1, argv + 1)) return *code;

  const absl::StatusOr<int64_t> layout_block = LayoutBlock(layout, "llvm");
  if (!layout_block.ok()) return base::Fail("tune", layout_block.status());
  auto m = LoadModel(model, inputs, *layout_block);
  if (!m.ok()) return base::Fail("tune", m.status());
  // The summary (what an ONNX import tuned and left out) goes to stderr, so that stdout stays
  // the table or the JSON alone.
  if (!m->summary.empty()) std::fprintf(stderr, "%s\n", base::EscapeControl(m->summary).c_str());
  if (json) {
    std::string text = ModelToJson(*m);
    if (text.empty() || text.back() != '\n') text += '\n';
    std::fputs(text.c_str(), stdout);
    return std::fflush(stdout) == 0 ? base::kExitOk : base::kExitFailure;
  }

  std::vector<std::vector<std::string>> rows;
  double total_gflop = 0;
  int total_layers = 0;
  for (size_t i = 0; i < m->layers.size(); ++i) {
    const ZooLayer& l = m->layers[i];
    // GFLOP of one run of the workload; the model's total counts each layer that shares it.
    const double gflop = l.workload.Flops() / 1e9;
    total_gflop += gflop * l.count;
    total_layers += l.count;
    rows.push_back({std::to_string(i + 1), l.name, codegen::OpName(l.workload.op), l.workload.Label(),
                    std::to_string(l.count), absl::StrFormat("%.4f", gflop),
                    absl::StrFormat("%.4f", gflop * l.count)});
  }
  std::printf("%s: %zu tasks, %d layers, %.3f GFLOP per run\n", base::EscapeControl(m->name).c_str(),
              m->layers.size(), total_layers, total_gflop);
  base::PrintTable({"#", "layer", "op", "workload", "count", "GFLOP", "GFLOP x count"}, rows);
  return std::fflush(stdout) == 0 ? base::kExitOk : base::kExitFailure;
}

}  // namespace tune::tuner
