// End-to-end tests of `tune train`: training writes a .tcm with its metrics, --eval prints them, bad input exits 2.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/artifact.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tuner/training_data.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;

const std::string kTcTune = std::string(TUNE_BIN_DIR) + "/tune";
const std::string kTcData = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/small-llvm.records.jsonl.gz";
const std::string kTcNetworks = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/networks";

test::ProcessResult TcRun(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {kTcTune, "train"});
  return test::RunProcess(args, dir.path(), 300);
}

// The lines of `text` from the one starting with "network" up to the "overall" row.
std::string TcTable(const std::string& text) {
  const size_t begin = text.find("network ");
  const size_t overall = text.find("\noverall", begin);
  if (begin == std::string::npos || overall == std::string::npos) return "";
  return text.substr(begin, text.find('\n', overall + 1) - begin);
}

void TcExpectUsageError(const test::ProcessResult& r, const std::string& why) {
  EXPECT_TRUE(r.exited) << r;
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, HasSubstr(why));
  // One line of error (progress lines of the data loading may come before it).
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_THAT(last, HasSubstr(why)) << r.err;
}

TEST(TrainCliTest, TrainWritesArtifactAndEvalPrintsTheSameMetrics) {
  test::TempDir dir;
  const std::string out = dir.Join("xgb.tcm");
  auto trained = TcRun(dir, {"--model", "xgb", "--data", kTcData, "--networks", kTcNetworks, "--holdout",
                             "tiny-cnn-b,tiny-mlp", "--out", out, "--seed", "3", "--threads", "2", "--epochs", "40"});
  ASSERT_EQ(trained.exit_code, 0) << trained;
  EXPECT_THAT(trained.out, HasSubstr("model written to " + out));
  EXPECT_THAT(trained.out, HasSubstr("peak RSS"));
  EXPECT_THAT(trained.err, HasSubstr("featurizing records 600/600"));
  EXPECT_THAT(trained.err, HasSubstr("[40/40] train loss"));
  const std::string train_table = TcTable(trained.out);
  EXPECT_THAT(train_table, HasSubstr("tiny-cnn-b"));
  EXPECT_THAT(train_table, HasSubstr("tiny-mlp"));

  auto a = costmodel::ReadArtifactFile(out);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.kind, "xgb");
  EXPECT_EQ(a->info.target_family, "llvm");
  EXPECT_EQ(a->info.target_key.rfind("llvm|", 0), 0u);
  EXPECT_FALSE(a->info.template_versions.empty());
  auto metrics = nlohmann::json::parse(a->info.metrics_json);
  ASSERT_TRUE(metrics["test"]["networks"].contains("tiny-cnn-b"));
  const double pairwise = metrics["test"]["overall"]["pairwise"].get<double>();
  EXPECT_GT(pairwise, 0.5);
  EXPECT_LE(pairwise, 1.0);
  EXPECT_EQ(metrics["test"]["networks"]["tiny-mlp"]["tasks"].get<int>(), 4);
  auto summary = nlohmann::json::parse(a->info.summary_json);
  EXPECT_EQ(summary["records"].get<int>(), 600);
  EXPECT_EQ(summary["holdout"], nlohmann::json({"tiny-cnn-b", "tiny-mlp"}));
  EXPECT_EQ(nlohmann::json::parse(a->info.options_json)["seed"].get<int>(), 3);
  EXPECT_FALSE(nlohmann::json::parse(a->info.options_json).contains("minibatch_parts"));  // lstm, gnn only

  // --eval of the written model on the same split prints the same table.
  auto eval = TcRun(dir, {"--eval", out, "--data", kTcData, "--networks", kTcNetworks, "--holdout", "tiny-cnn-b,tiny-mlp"});
  ASSERT_EQ(eval.exit_code, 0) << eval;
  EXPECT_EQ(TcTable(eval.out), train_table);
  // Two models side by side, as Markdown.
  std::filesystem::copy_file(out, dir.Join("again.tcm"));
  auto md = TcRun(dir, {"--eval", out, dir.Join("again.tcm"), "--data", kTcData, "--networks", kTcNetworks,
                        "--holdout", "tiny-cnn-b,tiny-mlp", "--markdown"});
  ASSERT_EQ(md.exit_code, 0) << md;
  EXPECT_THAT(md.out, HasSubstr("| network | tasks | configs | xgb top-1 |"));
  EXPECT_THAT(md.out, HasSubstr("| again top-1 |"));
  EXPECT_THAT(md.out, HasSubstr("| overall | 8 | 320 |"));
}

TEST(TrainCliTest, TorchArtifactsRecordTheMinibatchPartsUsed) {
  test::TempDir dir;
  for (const auto& [args, parts] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{"--model", "lstm"}, costmodel::kDefaultMinibatchParts}, {{"--model", "gnn", "--minibatch-parts", "2"}, 2}}) {
    const std::string out = dir.Join(args[1] + ".tcm");
    std::vector<std::string> argv = args;
    argv.insert(argv.end(), {"--data", kTcData, "--networks", kTcNetworks, "--holdout", "tiny-cnn-b,tiny-mlp",
                             "--epochs", "1", "--threads", "2", "--out", out});
    auto trained = TcRun(dir, argv);
    if (trained.exit_code != 0 && trained.err.find("LibTorch") != std::string::npos) GTEST_SKIP() << trained.err;
    ASSERT_EQ(trained.exit_code, 0) << trained;
    auto a = costmodel::ReadArtifactFile(out);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(nlohmann::json::parse(a->info.options_json)["minibatch_parts"].get<int>(), parts) << args[1];
  }
}

TEST(TrainCliTest, BadInputExitsTwoWithOneLineAndWritesNothing) {
  test::TempDir dir;
  const std::string out = dir.Join("m.tcm");
  auto unknown_holdout = TcRun(dir, {"--model", "xgb", "--data", kTcData, "--networks", kTcNetworks, "--holdout",
                                     "resnet-9000", "--out", out});
  TcExpectUsageError(unknown_holdout, "resnet-9000");
  auto unknown_kind = TcRun(dir, {"--model", "forest", "--data", kTcData, "--networks", kTcNetworks, "--holdout",
                                  "tiny-mlp", "--out", out});
  TcExpectUsageError(unknown_kind, "unknown cost model kind 'forest'");
  const std::string bad_data = dir.Join("bad.jsonl");
  std::ofstream(bad_data) << "this is not a record\n";
  auto bad = TcRun(dir, {"--model", "xgb", "--data", bad_data, "--networks", kTcNetworks, "--holdout", "tiny-mlp",
                         "--out", out});
  TcExpectUsageError(bad, "bad.jsonl:1");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(dir.List(), std::vector<std::string>{"bad.jsonl"});

  // A model, then a corrupt copy, a truncated copy and a file that is no model at all.
  {
    TrainingDataOptions o;
    o.data_path = kTcData;
    o.max_per_task = 10;
    o.needs = {.ast = true};
    auto data = LoadTrainingData(o);
    ASSERT_TRUE(data.ok()) << data.status();
    auto model = costmodel::CreateOfflineModel("xgb");
    ASSERT_TRUE(model.ok());
    costmodel::TrainOptions t;
    t.max_epochs = 5;
    ASSERT_TRUE((*model)->Train(data->train, data->valid, t).ok());
    costmodel::ArtifactInfo info;
    info.kind = "xgb";
    info.target_family = "llvm";
    ASSERT_TRUE(costmodel::WriteArtifactFile(out, info, **model).ok());
  }
  std::ifstream in(out, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  std::string corrupt = bytes;
  corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 0x20);
  std::ofstream(dir.Join("corrupt.tcm"), std::ios::binary) << corrupt;
  std::ofstream(dir.Join("cut.tcm"), std::ios::binary) << bytes.substr(0, bytes.size() - 9);
  std::ofstream(dir.Join("text.tcm"), std::ios::binary) << "hello\n";
  for (const char* name : {"corrupt.tcm", "cut.tcm", "text.tcm"}) {
    auto r = TcRun(dir, {"--eval", dir.Join(name), "--data", kTcData, "--networks", kTcNetworks, "--holdout",
                         "tiny-mlp"});
    TcExpectUsageError(r, name);
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  auto both = TcRun(dir, {"--eval", out, "--model", "xgb", "--data", kTcData, "--holdout", "tiny-mlp",
                          "--networks", kTcNetworks});
  TcExpectUsageError(both, "--eval takes no --model");
}

}  // namespace
}  // namespace tune::tuner
