// Tests of the offline XGBoost model: ranking held-out tasks, early stopping, determinism, payload round trip.
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codegen/templates.h"
#include "costmodel/artifact.h"
#include "costmodel/offline_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/test_seed.h"
#include "tests/costmodel/analytic_gemm.h"

namespace tune::costmodel {
namespace {

using ::testing::HasSubstr;

// One matmul task: `n` random valid configs featurized, latencies from the analytic GEMM model
// (knob-level ground truth the AST features must be mapped to); every 9th config "fails".
TrainGroup XgbOfflineGemmGroup(int64_t m, int64_t n_dim, int64_t k, int n, uint64_t seed) {
  std::mt19937_64 rng = tune::test::TestRng(seed);
  TrainGroup g = test::AnalyticGemmGroup(absl::StrCat(m, ",", n_dim, ",", k), n, rng, 9);
  g.task_id = m * 1000000 + n_dim * 1000 + k;
  return g;
}

struct XgbOfflineSets {
  std::vector<TrainGroup> train, valid, test;
};

const XgbOfflineSets& XgbOfflineData() {
  static const XgbOfflineSets* sets = [] {
    auto* s = new XgbOfflineSets;
    const int64_t shapes[][3] = {{64, 64, 64},   {128, 64, 128}, {64, 128, 256}, {256, 64, 64},
                                 {128, 128, 64}, {64, 256, 128}, {192, 64, 96}};
    uint64_t stream = 10;
    for (const auto& sh : shapes) s->train.push_back(XgbOfflineGemmGroup(sh[0], sh[1], sh[2], 80, stream++));
    s->valid.push_back(XgbOfflineGemmGroup(96, 96, 96, 60, stream++));
    s->test.push_back(XgbOfflineGemmGroup(128, 128, 128, 80, stream++));
    s->test.push_back(XgbOfflineGemmGroup(64, 192, 160, 80, stream++));
    return s;
  }();
  return *sets;
}

TrainOptions XgbOfflineOptions(uint64_t seed) {
  TrainOptions o;
  o.seed = seed;
  o.max_epochs = 60;
  o.patience = 4;
  o.threads = 1;
  return o;
}

std::vector<double> XgbOfflineScores(const OfflineModel& model, const TrainGroup& g) {
  std::vector<const ModelInput*> in;
  for (const ModelInput& x : g.inputs) in.push_back(&x);
  return model.Score(in);
}

TEST(XgbOfflineTest, KindNeedsAndUntrainedState) {
  auto model = CreateOfflineModel("xgb");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE(*model, nullptr);
  EXPECT_EQ((*model)->kind(), "xgb");
  EXPECT_TRUE((*model)->needs().ast);
  EXPECT_FALSE((*model)->needs().graph);
  EXPECT_FALSE((*model)->trained());
  const auto scores = XgbOfflineScores(**model, XgbOfflineData().test[0]);
  ASSERT_EQ(scores.size(), XgbOfflineData().test[0].inputs.size());
  for (double s : scores) EXPECT_EQ(s, 0);
  EXPECT_FALSE((*model)->SavePayload().ok());
  EXPECT_EQ(SerializeArtifact(ArtifactInfo{}, **model).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(XgbOfflineTest, RanksHeldOutTasksWellAboveChance) {
  const XgbOfflineSets& d = XgbOfflineData();
  auto model = MakeXgbOfflineModel();
  std::vector<TrainProgress> seen;
  TrainOptions o = XgbOfflineOptions(7);
  o.progress = [&seen](const TrainProgress& p) { seen.push_back(p); };
  ASSERT_TRUE(model->Train(d.train, d.valid, o).ok());
  EXPECT_TRUE(model->trained());
  // Progress after every block of rounds, the best score never decreasing and never below the
  // current one.
  ASSERT_FALSE(seen.empty());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].max_epochs, 60);
    EXPECT_GE(seen[i].best_valid_score, seen[i].valid_score);
    EXPECT_LE(seen[i].best_epoch, seen[i].epoch);
    if (i > 0) {
      EXPECT_GT(seen[i].epoch, seen[i - 1].epoch);
      EXPECT_GE(seen[i].best_valid_score, seen[i - 1].best_valid_score);
    }
  }
  const EvalMetrics test = EvaluateGroups(*model, d.test);
  const EvalMetrics valid = EvaluateGroups(*model, d.valid);
  EXPECT_EQ(test.groups, 2);
  // A constant model scores 0.5 pairwise and Kendall 0; the analytic cost is learnable from the AST.
  EXPECT_GE(test.pairwise, 0.7) << "top1 " << test.top1;
  EXPECT_GT(test.kendall, 0.35);
  EXPECT_GT(test.top5, 0.5);
  // The kept model is the best validation block's.
  EXPECT_NEAR(ValidationObjective(valid), seen.back().best_valid_score, 1e-9);
}

// loss "lambdarank" trains XGBoost's rank:ndcg: a model that ranks held-out tasks well above
// chance, and another model than rank:pairwise's for the same seed (the option is not ignored).
TEST(XgbOfflineTest, LambdaRankLossRanksHeldOutTasksAndIsAnotherModel) {
  const XgbOfflineSets& d = XgbOfflineData();
  auto pairwise = MakeXgbOfflineModel();
  auto lambda = MakeXgbOfflineModel();
  TrainOptions o = XgbOfflineOptions(7);
  ASSERT_TRUE(pairwise->Train(d.train, d.valid, o).ok());
  o.loss = "lambdarank";
  ASSERT_TRUE(lambda->Train(d.train, d.valid, o).ok());
  const EvalMetrics test = EvaluateGroups(*lambda, d.test);
  // Well above chance (pairwise 0.5, Kendall 0). rank:ndcg weighs the top of each group and
  // trails rank:pairwise on these groups, more so since the template's splits have tails
  // (measured 0.65 / 0.31 against pairwise's >= 0.7 / > 0.35).
  EXPECT_GE(test.pairwise, 0.6) << "top1 " << test.top1;
  EXPECT_GT(test.kendall, 0.2);
  bool differs = false;
  for (const TrainGroup& g : d.test) {
    std::vector<const ModelInput*> inputs;
    for (const ModelInput& in : g.inputs) inputs.push_back(&in);
    differs = differs || pairwise->Score(inputs) != lambda->Score(inputs);
  }
  EXPECT_TRUE(differs) << "rank:ndcg and rank:pairwise gave the same scores";
}

TEST(XgbOfflineTest, SameSeedSameScoresAndPayloadRoundTrip) {
  const XgbOfflineSets& d = XgbOfflineData();
  auto a = MakeXgbOfflineModel();
  auto b = MakeXgbOfflineModel();
  ASSERT_TRUE(a->Train(d.train, d.valid, XgbOfflineOptions(3)).ok());
  ASSERT_TRUE(b->Train(d.train, d.valid, XgbOfflineOptions(3)).ok());
  const auto sa = XgbOfflineScores(*a, d.test[1]);
  EXPECT_EQ(sa, XgbOfflineScores(*b, d.test[1]));
  // Scores differ between configs (the model is not constant).
  EXPECT_NE(*std::min_element(sa.begin(), sa.end()), *std::max_element(sa.begin(), sa.end()));

  ArtifactInfo info;
  info.kind = "xgb";
  info.target_family = "llvm";
  info.target_key = "llvm|test";
  auto bytes = SerializeArtifact(info, *a);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto parsed = ParseArtifact(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->info.kind, "xgb");
  EXPECT_EQ(parsed->info.target_key, "llvm|test");
  EXPECT_TRUE(parsed->model->trained());
  for (const TrainGroup& g : d.test) EXPECT_EQ(XgbOfflineScores(*parsed->model, g), XgbOfflineScores(*a, g));
}

TEST(XgbOfflineTest, ForeignPayloadRefusedAndModelUnchanged) {
  const XgbOfflineSets& d = XgbOfflineData();
  auto model = MakeXgbOfflineModel();
  ASSERT_TRUE(model->Train(d.train, {}, XgbOfflineOptions(5)).ok());  // validation drawn from train
  const auto before = XgbOfflineScores(*model, d.test[0]);
  auto payload = model->SavePayload();
  ASSERT_TRUE(payload.ok());
  std::mt19937_64 rng = tune::test::TestRng(77);
  std::string garbage(64, '\0');
  for (char& c : garbage) c = static_cast<char>(rng() & 0xff);
  for (const std::string& bad : {garbage, payload->substr(0, payload->size() / 2), std::string("TUNEXGBO")}) {
    absl::Status st = model->LoadPayload(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(st.message()).find('\n'), std::string::npos);
  }
  EXPECT_EQ(XgbOfflineScores(*model, d.test[0]), before);
  // A payload of a later feature version is refused by name.
  std::string newer = *payload;
  const std::string key = "\"feature_version\":";
  const size_t at = newer.find(key);
  ASSERT_NE(at, std::string::npos);
  newer[at + key.size()] = static_cast<char>(newer[at + key.size()] + 1);
  EXPECT_THAT(std::string(model->LoadPayload(newer).message()), HasSubstr("features"));
  EXPECT_EQ(XgbOfflineScores(*model, d.test[0]), before);
}

TEST(XgbOfflineTest, FineTuneLearnsTheTaskAndFailsCleanly) {
  const XgbOfflineSets& d = XgbOfflineData();
  auto untrained = MakeXgbOfflineModel();
  EXPECT_EQ(untrained->FineTune(d.test[0], XgbOfflineOptions(1)).code(), absl::StatusCode::kFailedPrecondition);

  auto model = MakeXgbOfflineModel();
  ASSERT_TRUE(model->Train(d.train, d.valid, XgbOfflineOptions(8)).ok());
  // Half of a held-out task's records to fine-tune on, the other half to judge.
  const TrainGroup& task = d.test[1];
  TrainGroup seen, unseen;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    TrainGroup& to = i % 2 == 0 ? seen : unseen;
    to.inputs.push_back(task.inputs[i]);
    to.latencies_s.push_back(task.latencies_s[i]);
  }
  const EvalMetrics before_seen = EvaluateGroups(*model, {seen});
  const EvalMetrics before_unseen = EvaluateGroups(*model, {unseen});
  const auto before_scores = XgbOfflineScores(*model, task);
  TrainGroup flat = seen;
  for (double& l : flat.latencies_s) l = 2e-4;
  EXPECT_EQ(model->FineTune(flat, XgbOfflineOptions(1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(XgbOfflineScores(*model, task), before_scores);

  TrainOptions o = XgbOfflineOptions(1);
  o.fine_tune_epochs = 20;
  ASSERT_TRUE(model->FineTune(seen, o).ok());
  const EvalMetrics after_seen = EvaluateGroups(*model, {seen});
  const EvalMetrics after_unseen = EvaluateGroups(*model, {unseen});
  EXPECT_GT(after_seen.pairwise, before_seen.pairwise + 0.03);
  EXPECT_GT(after_unseen.pairwise, before_unseen.pairwise - 0.05);  // no collapse on the task's other configs
  EXPECT_NE(XgbOfflineScores(*model, task), before_scores);
  // The fine-tuned parameters survive the payload.
  auto payload = model->SavePayload();
  ASSERT_TRUE(payload.ok());
  auto loaded = MakeXgbOfflineModel();
  ASSERT_TRUE(loaded->LoadPayload(*payload).ok());
  EXPECT_EQ(XgbOfflineScores(*loaded, task), XgbOfflineScores(*model, task));
}

// The JSON header of an xgb payload (magic, u64 little-endian length, JSON, then the booster)
// and the booster's bytes after it.
std::pair<nlohmann::json, std::string> XgbOfflinePayloadParts(const std::string& payload) {
  EXPECT_GE(payload.size(), 16u);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<unsigned char>(payload[8 + i])) << (8 * i);
  EXPECT_LE(16 + len, payload.size());
  return {nlohmann::json::parse(payload.substr(16, len), nullptr, false), payload.substr(16 + len + 8)};
}

// The settings chosen on the held-out networks of data/datasets: trees of depth 6 with
// min_child_weight 1 (rank:ndcg: 0), 16 pairs sampled per config and round (XGBoost's
// default is 1). The
// booster itself carries num_pairsample (so the setting reached XGBoost), and the payload
// header records them all, also after a round trip; the lambdarank loss records rank:ndcg.
TEST(XgbOfflineTest, TrainsWithTheChosenSettingsAndRecordsThem) {
  const XgbOfflineSets& d = XgbOfflineData();
  for (const std::string loss : {"", "lambdarank"}) {
    auto model = MakeXgbOfflineModel();
    TrainOptions o = XgbOfflineOptions(11);
    o.loss = loss;
    ASSERT_TRUE(model->Train(d.train, d.valid, o).ok());
    auto payload = model->SavePayload();
    ASSERT_TRUE(payload.ok()) << payload.status();
    const auto [meta, booster] = XgbOfflinePayloadParts(*payload);
    ASSERT_TRUE(meta.is_object());
    const std::string objective = loss.empty() ? "rank:pairwise" : "rank:ndcg";
    EXPECT_EQ(meta.value("objective", ""), objective);
    ASSERT_TRUE(meta.contains("params")) << meta.dump();
    const nlohmann::json& params = meta["params"];
    EXPECT_EQ(params.value("objective", ""), objective);
    EXPECT_EQ(params.value("max_depth", 0), 6);
    EXPECT_EQ(params.value("min_child_weight", -1.0), loss.empty() ? 1.0 : 0.0);
    EXPECT_EQ(params.value("num_pairsample", 0), 16);
    EXPECT_DOUBLE_EQ(params.value("eta", 0.0), 0.2);
    // XGBoost keeps the objective's parameters with the model (as strings).
    const size_t at = booster.find("num_pairsample");
    ASSERT_NE(at, std::string::npos);
    EXPECT_NE(booster.substr(at, 32).find("16"), std::string::npos);
    EXPECT_EQ(booster.find(loss.empty() ? "rank:ndcg" : "rank:pairwise"), std::string::npos);
    auto loaded = MakeXgbOfflineModel();
    ASSERT_TRUE(loaded->LoadPayload(*payload).ok());
    auto again = loaded->SavePayload();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(XgbOfflinePayloadParts(*again).first["params"], params);
  }
}

TEST(XgbOfflineTest, NothingToLearnIsInvalidArgument) {
  TrainGroup g = XgbOfflineData().train[0];
  for (double& l : g.latencies_s) l = 1e-3;
  auto model = MakeXgbOfflineModel();
  absl::Status st = model->Train({g}, {}, XgbOfflineOptions(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(model->trained());
  TrainGroup wrong = XgbOfflineData().train[0];
  wrong.inputs[3].ast.pop_back();
  EXPECT_EQ(model->Train({wrong}, {}, XgbOfflineOptions(1)).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tune::costmodel
