// End-to-end tests of `tune train --model ensemble`: members trained and given, the artifact, --eval, tuning with it, bad members.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/artifact.h"
#include "costmodel/ensemble_model.h"
#include "costmodel/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kEtTune = std::string(TUNE_BIN_DIR) + "/tune";
const std::string kEtData = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/small-llvm.records.jsonl.gz";
const std::string kEtNetworks = std::string(TUNE_SOURCE_DIR) + "/tests/data/costmodel/networks";

test::ProcessResult EtTrain(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {kEtTune, "train", "--data", kEtData, "--networks", kEtNetworks, "--holdout",
                             "tiny-cnn-b,tiny-mlp", "--threads", "2"});
  return test::RunProcess(args, dir.path(), 300);
}

// The "overall" row of the first table in `text`.
std::string EtOverall(const std::string& text) {
  const size_t at = text.find("\noverall");
  return at == std::string::npos ? "" : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

TEST(EnsembleTrainTest, TrainsOnTheSmallDatasetRanksHeldOutTasksAndTunes) {
  test::TempDir dir;
  const std::string xgb = dir.Join("xgb.tcm"), ens = dir.Join("ens.tcm");
  auto single = EtTrain(dir, {"--model", "xgb", "--out", xgb, "--seed", "4", "--epochs", "20"});
  ASSERT_EQ(single.exit_code, 0) << single;
  // The xgb model above and two trained members (seeds 11, 12).
  auto trained = EtTrain(dir, {"--model", "ensemble", "--members", "2", "--member", xgb, "--out", ens, "--seed", "11",
                               "--epochs", "20", "--member-loss", "pairwise,regression"});
  ASSERT_EQ(trained.exit_code, 0) << trained;
  EXPECT_THAT(trained.err, HasSubstr("member 2/2 ["));
  EXPECT_THAT(trained.out, HasSubstr("member 3: xgb regression seed 12"));
  EXPECT_THAT(trained.out, HasSubstr("ensemble (fitted scales)"));
  EXPECT_THAT(trained.out, HasSubstr("validation, in-sample")) << "members trained on their own validation draws";
  EXPECT_THAT(single.out, Not(HasSubstr("in-sample")));

  auto a = costmodel::ReadArtifactFile(ens);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.kind, "ensemble");
  const auto& e = static_cast<const costmodel::EnsembleModel&>(*a->model);
  ASSERT_EQ(e.member_count(), 3u);
  EXPECT_EQ(e.member_info(0).source, xgb);
  EXPECT_EQ(e.member_info(0).seed, 4u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(e.member_info(i).source, "trained");
    EXPECT_EQ(e.member_info(i).seed, 10 + i);
    EXPECT_EQ(e.member_info(i).feature_version, costmodel::kFeatureVersion);
  }
  auto metrics = nlohmann::json::parse(a->info.metrics_json);
  EXPECT_EQ(metrics["ensemble"]["members"].size(), 3u);
  EXPECT_EQ(metrics.value("valid_in_sample", false), true);
  const double pairwise = metrics["test"]["overall"]["pairwise"].get<double>();
  EXPECT_GT(pairwise, 0.6) << "held-out pairwise accuracy of the ensemble";
  const double top5 = metrics["test"]["overall"]["top5"].get<double>();
  EXPECT_GT(top5, 0.6);

  // --eval reads it back and prints the same overall row.
  auto eval = test::RunProcess({kEtTune, "train", "--eval", ens, "--data", kEtData, "--networks", kEtNetworks,
                                "--holdout", "tiny-cnn-b,tiny-mlp"},
                               dir.path(), 300);
  ASSERT_EQ(eval.exit_code, 0) << eval;
  EXPECT_EQ(EtOverall(eval.out), EtOverall(trained.out));
  EXPECT_THAT(EtOverall(eval.out), HasSubstr("overall"));

  // It tunes as the pretrained cost model, fine-tuned on the task's records as it goes.
  auto tuned = test::RunProcess({kEtTune, "op", "matmul", "--shape", "48,32,64", "--trials", "8", "--batch", "4",
                                 "--strategy", "sa", "--cost-model", ens, "--db", dir.Join("t.db")},
                                dir.path(), 300);
  EXPECT_EQ(tuned.exit_code, 0) << tuned;
  EXPECT_TRUE(std::filesystem::exists(dir.Join("t.db")));
}

TEST(EnsembleTrainTest, BadMembersAndMisplacedOptionsExitTwoWithOneLine) {
  test::TempDir dir;
  auto expect_usage = [](const test::ProcessResult& r, const std::string& why) {
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_THAT(r.err, HasSubstr(why));
    const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
    EXPECT_THAT(last, HasSubstr(why)) << r.err;
  };
  std::ofstream(dir.Join("junk.tcm"), std::ios::binary) << "TUNETCM\nnot a model at all";
  expect_usage(EtTrain(dir, {"--model", "ensemble", "--member", dir.Join("junk.tcm"), "--out", dir.Join("e.tcm")}),
               "junk.tcm");
  expect_usage(EtTrain(dir, {"--model", "xgb", "--members", "3", "--out", dir.Join("e.tcm")}),
               "are for --model ensemble");
  expect_usage(EtTrain(dir, {"--model", "lstm", "--loss", "regression", "--out", dir.Join("e.tcm")}),
               "--loss regression is for xgb");
  EXPECT_FALSE(std::filesystem::exists(dir.Join("e.tcm")));
}

}  // namespace
}  // namespace tune::tuner
