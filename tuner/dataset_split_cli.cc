// `tune dataset split`: a record database's tasks split by network into training and held-out sets.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/exit_code.h"
#include "dataset/record_database.h"
#include "tuner/cli_commands.h"
#include "tuner/dataset_split.h"
#include "tuner/model_file.h"
#include "tuner/parse_command_line.h"

namespace tune::tuner {
namespace {

// Writes `text` to `path` through a temporary file renamed over it: the file is whole or absent.
absl::Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::UnavailableError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError("cannot write " + path);
  }
  return absl::OkStatus();
}

}  // namespace

int DatasetSplitCommand(int argc, char** argv) {
  CLI::App app{"tune dataset split: the dataset's tasks split by network into training and held-out (test) sets; "
               "a task a held-out network has is never in the training set",
               "tune dataset split"};
  std::string db_path, out_path;
  std::vector<std::string> models, holdout;
  app.add_option("--db", db_path, "record database file (opened read-only)")->required();
  app.add_option("--models", models, "the dataset's networks: zoo names, model files or ONNX files (comma-separated)")
      ->required()
      ->delimiter(',');
  app.add_option("--holdout", holdout, "networks held out for testing: model names or --models entries (comma-separated)")
      ->required()
      ->delimiter(',');
  app.add_option("--out", out_path, "write the split as JSON (tune-split/1) to this file");
  if (auto code = ParseCommandLine(app, argc - 2, argv + 2)) return *code;

  std::vector<SplitInput> inputs;
  for (const std::string& spec : models) {
    auto model = LoadModel(spec);
    if (!model.ok()) return base::Fail("tune", model.status());
    inputs.push_back({spec, *std::move(model)});
  }
  auto db = dataset::RecordDatabase::OpenReadOnly(db_path);
  if (!db.ok()) return base::Fail("tune", db.status());
  auto split = SplitDataset(**db, inputs, holdout);
  if (!split.ok()) return base::Fail("tune", split.status());
  if (!out_path.empty()) {
    absl::Status written = WriteWhole(out_path, SplitToJson(*split, db_path));
    if (!written.ok()) return base::Fail("tune", written);
  }
  std::fputs(SplitTable(*split).c_str(), stdout);
  if (split->shared_tasks > 0) {
    std::printf("%d task(s) of training networks are also in held-out networks: kept in the test set only\n",
                split->shared_tasks);
  }
  if (split->missing_tasks > 0) {
    std::printf("%d network task(s) are not in %s\n", split->missing_tasks, db_path.c_str());
  }
  if (!out_path.empty()) std::printf("split written to %s\n", out_path.c_str());
  return 0;
}

}  // namespace tune::tuner
