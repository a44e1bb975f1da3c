// Tests of the LSTM and GNN cost models on GEMM configs with analytic latencies: ranking, determinism, payloads, fine-tuning.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "costmodel/offline_model.h"
#include "costmodel/ranking_metrics.h"
#include "gtest/gtest.h"
#include "tests/common/toy_template.h"
#include "tests/costmodel/analytic_gemm.h"

namespace tune::costmodel {
namespace {

using codegen::OpKind;

/// Groups of `per_group` random GEMM configs of each shape, latencies from the analytic model;
/// the slowest tenth of each group counts as failed (+inf), as a real dataset's timeouts would.
std::vector<TrainGroup> MakeTorchGemmGroups(const std::vector<std::string>& shapes, int per_group, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TrainGroup> groups;
  for (const std::string& shape : shapes) {
    auto t = ::tune::test::MakeTemplate(OpKind::kMatmul, shape);
    TrainGroup g;
    g.name = "matmul " + shape;
    for (int i = 0; i < per_group * 3 && static_cast<int>(g.inputs.size()) < per_group; ++i) {
      auto c = t->space().Sample(rng);
      if (!c.ok()) continue;
      auto in = MakeModelInput(*t, *c, InputNeeds{false, true});
      if (!in.ok()) continue;
      g.inputs.push_back(std::move(*in));
      g.latencies_s.push_back(test::AnalyticGemmSeconds(*t, *c));
    }
    std::vector<double> sorted = g.latencies_s;
    std::sort(sorted.begin(), sorted.end());
    const double cut = sorted[sorted.size() * 9 / 10];
    for (double& l : g.latencies_s)
      if (l > cut) l = std::numeric_limits<double>::infinity();
    groups.push_back(std::move(g));
  }
  return groups;
}

struct TorchData {
  std::vector<TrainGroup> train, held_out;
};

/// Built once per process (lowering and graph extraction of ~500 configs).
const TorchData& TorchGemmData() {
  static const TorchData data = [] {
    TorchData d;
    const uint64_t seed = std::random_device{}();
    std::printf("torch model test data seed %llu\n", static_cast<unsigned long long>(seed));
    d.train = MakeTorchGemmGroups({"64,64,64", "128,128,64", "96,128,256", "256,64,128", "128,256,128", "32,512,64",
                                   "192,96,96", "64,256,256", "128,128,128", "256,256,64"},
                                  48, seed);
    d.held_out = MakeTorchGemmGroups({"128,64,192", "256,128,64", "96,96,128", "64,128,512", "160,96,64",
                                      "64,320,96", "224,128,128", "48,256,192"},
                                     48, seed + 1);
    return d;
  }();
  return data;
}

TrainOptions FastOptions(uint64_t seed, int threads) {
  TrainOptions o;
  o.seed = seed;
  o.threads = threads;
  o.max_epochs = 12;
  o.patience = 12;
  o.hidden = 32;
  return o;
}

std::vector<double> ScoreGroup(const OfflineModel& m, const TrainGroup& g) {
  std::vector<const ModelInput*> in;
  for (const ModelInput& x : g.inputs) in.push_back(&x);
  return m.Score(in);
}

std::vector<double> ScoreAll(const OfflineModel& m, const std::vector<TrainGroup>& groups) {
  std::vector<double> out;
  for (const TrainGroup& g : groups) {
    auto s = ScoreGroup(m, g);
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

std::unique_ptr<OfflineModel> NewTorchModel(const std::string& kind) {
  auto m = CreateOfflineModel(kind);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

/// Skips itself in builds without LibTorch (TUNE_WITH_TORCH=OFF: the kinds are Unimplemented).
class TorchModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto probe = CreateOfflineModel(GetParam());
    if (probe.status().code() == absl::StatusCode::kUnimplemented) GTEST_SKIP() << probe.status();
  }
};

TEST_P(TorchModelTest, RanksHeldOutGemmShapesBetterThanChance) {
  const TorchData& data = TorchGemmData();
  auto model = NewTorchModel(GetParam());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->kind(), GetParam());
  EXPECT_TRUE(model->needs().graph);
  EXPECT_FALSE(model->trained());
  for (double s : ScoreGroup(*model, data.held_out[0])) EXPECT_EQ(s, 0.0) << "untrained scores are 0";

  TrainOptions o = FastOptions(1, 1);
  o.max_epochs = o.patience = 24;
  std::vector<TrainProgress> progress;
  o.progress = [&](const TrainProgress& p) { progress.push_back(p); };
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(model->Train(data.train, {}, o).ok());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(model->trained());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().epoch, static_cast<int>(progress.size()));
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_TRUE(std::isfinite(progress[i].train_loss));
    EXPECT_LE(progress[i].valid_score, progress[i].best_valid_score + 1e-12);
  }
  EXPECT_LT(progress.back().train_loss, progress.front().train_loss) << "the ranking loss falls";

  EvalMetrics m = EvaluateGroups(*model, data.held_out);
  std::printf("%s: %zu epochs in %.1f s, held-out pairwise %.3f top1 %.3f kendall %.3f\n", GetParam().c_str(),
              progress.size(), seconds, m.pairwise, m.top1, m.kendall);
  EXPECT_EQ(m.groups, static_cast<int>(data.held_out.size()));
  // Chance is 0.5 (kendall 0). Over fresh data seeds, at 24 epochs and 8 held-out shapes, the gnn
  // scored 0.706-0.811 (24 seeds); the lstm mostly 0.70-0.78 but 0.597 and 0.598 (kendall 0.19)
  // in 2 of 30 (at 12 epochs and 4 shapes: 0.56-0.76). The margins sit below the worst draws
  // seen, not at the typical value: 0.1 over chance for the gnn, 0.05 for the lstm.
  const bool lstm = GetParam() == "lstm";
  EXPECT_GE(m.pairwise, lstm ? 0.55 : 0.6);
  EXPECT_GT(m.kendall, lstm ? 0.1 : 0.2);
}

// loss "lambdarank" weights each pair by its |delta NDCG|: still a ranking of held-out shapes far
// above chance, and another model than RankNet's for the same seed (the option is not ignored).
TEST_P(TorchModelTest, LambdaRankLossRanksHeldOutShapesAndIsAnotherModel) {
  const TorchData& data = TorchGemmData();
  auto ranknet = NewTorchModel(GetParam());
  auto lambda = NewTorchModel(GetParam());
  ASSERT_TRUE(ranknet != nullptr && lambda != nullptr);
  TrainOptions o = FastOptions(1, 1);
  o.max_epochs = o.patience = 24;
  ASSERT_TRUE(ranknet->Train(data.train, {}, o).ok());
  o.loss = "lambdarank";
  ASSERT_TRUE(lambda->Train(data.train, {}, o).ok());
  EvalMetrics m = EvaluateGroups(*lambda, data.held_out);
  std::printf("%s lambdarank: held-out pairwise %.3f top1 %.3f kendall %.3f\n", GetParam().c_str(), m.pairwise,
              m.top1, m.kendall);
  // Well above chance (0.5, 0) for any data draw: over draws the LSTM's held-out pairwise
  // accuracy ran 0.68-0.76 and once 0.61 (its kendall 0.21), RankNet's 0.73-0.80.
  EXPECT_GE(m.pairwise, 0.58);
  EXPECT_GT(m.kendall, 0.15);
  EXPECT_NE(ScoreGroup(*ranknet, data.held_out[0]), ScoreGroup(*lambda, data.held_out[0]));
}

TEST_P(TorchModelTest, EarlyStoppingKeepsTheBestEpochOnTheGivenValidation) {
  const TorchData& data = TorchGemmData();
  std::vector<TrainGroup> train(data.train.begin(), data.train.begin() + 5);
  std::vector<TrainGroup> valid(data.held_out.begin(), data.held_out.begin() + 2);
  TrainOptions o = FastOptions(11, 1);
  o.max_epochs = 10;
  o.patience = 2;
  o.learning_rate = 2e-2;  // large steps: the validation score moves up and down
  std::vector<TrainProgress> progress;
  o.progress = [&](const TrainProgress& p) { progress.push_back(p); };
  auto model = NewTorchModel(GetParam());
  ASSERT_TRUE(model->Train(train, valid, o).ok());
  ASSERT_FALSE(progress.empty());
  const TrainProgress& last = progress.back();
  EXPECT_LE(last.epoch, last.best_epoch + o.patience);
  double best = -1;
  for (const TrainProgress& p : progress) best = std::max(best, p.valid_score);
  EXPECT_EQ(last.best_valid_score, best);
  EXPECT_NEAR(ValidationObjective(EvaluateGroups(*model, valid)), best, 1e-9) << "the best epoch's parameters are kept";
}

TEST_P(TorchModelTest, SameSeedSameScoresWithOneAndTwoThreads) {
  const TorchData& data = TorchGemmData();
  std::vector<TrainGroup> train(data.train.begin(), data.train.begin() + 2);
  // Every minibatch is split into parts whose gradients are summed in order (see RunEpoch in
  // torch_models.cc), on one thread or several: the same model either way.
  std::vector<double> one_thread;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    TrainOptions o = FastOptions(7, threads);
    o.max_epochs = 2;
    auto a = NewTorchModel(GetParam()), b = NewTorchModel(GetParam()), c = NewTorchModel(GetParam());
    ASSERT_TRUE(a->Train(train, {}, o).ok());
    ASSERT_TRUE(b->Train(train, {}, o).ok());
    const std::vector<double> scores = ScoreAll(*a, data.held_out);
    EXPECT_EQ(scores, ScoreAll(*b, data.held_out));
    o.seed = 8;
    ASSERT_TRUE(c->Train(train, {}, o).ok());
    EXPECT_NE(scores, ScoreAll(*c, data.held_out)) << "another seed, another model";
    if (threads == 1) {
      one_thread = scores;
      continue;
    }
    EXPECT_EQ(scores, one_thread) << "the threads do not change the model";
  }
}

TEST_P(TorchModelTest, MinibatchPartsSumToTheWholeMinibatchsGradient) {
  const TorchData& data = TorchGemmData();
  std::vector<TrainGroup> train(data.train.begin(), data.train.begin() + 2);
  // One part (the whole minibatch's gradient at once) against four parts whose
  // gradients are summed: the same training up to the order of float additions.
  std::vector<double> whole;
  for (int parts : {1, 4}) {
    TrainOptions o = FastOptions(7, 2);
    o.max_epochs = 2;
    o.minibatch_parts = parts;
    auto model = NewTorchModel(GetParam());
    ASSERT_TRUE(model->Train(train, {}, o).ok());
    const std::vector<double> scores = ScoreAll(*model, data.held_out);
    if (parts == 1) {
      whole = scores;
      continue;
    }
    ASSERT_EQ(scores.size(), whole.size());
    double spread = 0, gap = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      spread = std::max(spread, std::abs(whole[i] - whole[0]));
      gap = std::max(gap, std::abs(scores[i] - whole[i]));
    }
    EXPECT_GT(spread, 0.0);
    // Float order alone moved the scores by 0.03-1.3% of their spread in trials; summing only
    // the first part's gradients moved them by 12-60% of it (Adam hides the gradient's scale).
    EXPECT_LT(gap, 0.05 * spread) << "the parts' gradients sum to the whole minibatch's";
  }
}

TEST_P(TorchModelTest, PayloadRoundTripsAndRefusesOtherKinds) {
  const TorchData& data = TorchGemmData();
  std::vector<TrainGroup> train(data.train.begin(), data.train.begin() + 4);
  TrainOptions o = FastOptions(3, 1);
  o.max_epochs = 2;
  auto model = NewTorchModel(GetParam());
  EXPECT_FALSE(model->SavePayload().ok()) << "nothing to save before training";
  ASSERT_TRUE(model->Train(train, {}, o).ok());
  auto payload = model->SavePayload();
  ASSERT_TRUE(payload.ok()) << payload.status();

  auto loaded = NewTorchModel(GetParam());
  ASSERT_TRUE(loaded->LoadPayload(*payload).ok());
  EXPECT_TRUE(loaded->trained());
  EXPECT_EQ(ScoreAll(*loaded, data.held_out), ScoreAll(*model, data.held_out));

  const std::string other_kind = GetParam() == "lstm" ? "gnn" : "lstm";
  auto other = NewTorchModel(other_kind);
  absl::Status refused = other->LoadPayload(*payload);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_FALSE(other->trained()) << "a refused payload leaves the model unchanged";

  // Truncated, extended and foreign bytes are refused and leave the loaded model as it was.
  const std::vector<double> before = ScoreAll(*loaded, data.held_out);
  EXPECT_EQ(loaded->LoadPayload(payload->substr(0, payload->size() - 5)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded->LoadPayload(*payload + "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded->LoadPayload("not a model").code(), absl::StatusCode::kInvalidArgument);
  std::string old_version = *payload;
  old_version.replace(old_version.find(' ' + GetParam() + " 1 ") + GetParam().size() + 2, 1, "9");
  EXPECT_EQ(loaded->LoadPayload(old_version).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScoreAll(*loaded, data.held_out), before);
}

TEST_P(TorchModelTest, FineTuneMovesScoresTowardTheGroupsOrder) {
  const TorchData& data = TorchGemmData();
  TrainOptions o = FastOptions(5, 1);
  o.max_epochs = 6;
  auto model = NewTorchModel(GetParam());
  EXPECT_EQ(model->FineTune(data.held_out[0], o).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(model->Train(data.train, {}, o).ok());
  // The group's own order disagrees with what the model learned: the latencies reversed.
  TrainGroup reversed = data.held_out[1];
  for (double& l : reversed.latencies_s) l = std::isfinite(l) ? 1.0 / l : 1e-9;
  RankedTask before{reversed.latencies_s, ScoreGroup(*model, reversed)};
  const double acc_before = *PairwiseAccuracy(before);
  TrainOptions ft;
  ft.seed = 5;
  ft.threads = 1;
  ft.fine_tune_epochs = 12;
  ASSERT_TRUE(model->FineTune(reversed, ft).ok());
  RankedTask after{reversed.latencies_s, ScoreGroup(*model, reversed)};
  const double acc_after = *PairwiseAccuracy(after);
  std::printf("%s fine-tune on a reversed group: pairwise %.3f -> %.3f\n", GetParam().c_str(), acc_before, acc_after);
  EXPECT_GT(acc_after, acc_before + 0.1);
}

TEST_P(TorchModelTest, RefusesTrainingWithoutAnOrder) {
  const TorchData& data = TorchGemmData();
  TrainGroup flat = data.train[0];
  for (double& l : flat.latencies_s) l = 1e-3;
  TrainGroup single = data.train[1];
  single.inputs.resize(1);
  single.latencies_s.resize(1);
  auto model = NewTorchModel(GetParam());
  EXPECT_EQ(model->Train({flat, single}, {}, FastOptions(1, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(model->trained());
}

INSTANTIATE_TEST_SUITE_P(Kinds, TorchModelTest, ::testing::Values("lstm", "gnn"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// Training throughput on a large synthetic set (not run by default; prints a table). Records,
// threads and epochs: TUNE_TORCH_BENCH_RECORDS (20000), TUNE_TORCH_BENCH_THREADS (2),
// TUNE_TORCH_BENCH_EPOCHS (3), TUNE_TORCH_BENCH_KINDS ("lstm,gnn").
//   costmodel_test --gtest_also_run_disabled_tests --gtest_filter='*TorchTrainingSpeed*'
int TorchBenchEnv(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

TEST(TorchTrainingSpeed, DISABLED_TwentyThousandRecords) {
  if (CreateOfflineModel("lstm").status().code() == absl::StatusCode::kUnimplemented) GTEST_SKIP();
  const int records_wanted = TorchBenchEnv("TUNE_TORCH_BENCH_RECORDS", 20000);
  const int threads = TorchBenchEnv("TUNE_TORCH_BENCH_THREADS", 2);
  const int epochs = TorchBenchEnv("TUNE_TORCH_BENCH_EPOCHS", 3);
  const char* kinds_env = std::getenv("TUNE_TORCH_BENCH_KINDS");
  const std::string kinds = kinds_env != nullptr ? kinds_env : "lstm,gnn";
  std::vector<std::string> shapes;
  const int dims[] = {32, 64, 96, 128, 192, 256, 384, 512};
  std::mt19937_64 rng(std::random_device{}());
  while (static_cast<int>(shapes.size()) * 200 < records_wanted) {
    shapes.push_back(std::to_string(dims[rng() % 8]) + "," + std::to_string(dims[rng() % 8]) + "," +
                     std::to_string(dims[rng() % 8]));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<TrainGroup> train = MakeTorchGemmGroups(shapes, 200, rng());
  std::vector<TrainGroup> held = MakeTorchGemmGroups({"128,64,192", "256,128,64", "96,96,128", "64,128,512"}, 100, 1);
  size_t records = 0;
  double seq = 0, nodes = 0, edges = 0;
  for (auto& g : train) {
    records += g.inputs.size();
    for (auto& in : g.inputs) {
      seq += static_cast<double>(in.graph.sequence.size());
      nodes += in.graph.num_nodes;
      edges += static_cast<double>(in.graph.edge_kinds.size());
    }
  }
  std::printf("%zu records in %zu groups (mean sequence %.1f, nodes %.1f, edges %.1f), inputs built in %.1f s\n",
              records, train.size(), seq / records, nodes / records, edges / records,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (const char* kind : {"lstm", "gnn"}) {
    if (kinds.find(kind) == std::string::npos) continue;
    auto model = NewTorchModel(kind);
    TrainOptions o;
    o.seed = 1;
    o.threads = threads;
    o.max_epochs = epochs;
    o.patience = epochs;
    o.progress = [&](const TrainProgress& p) {
      std::printf("%-5s threads %d epoch %d/%d loss %.4f valid %.4f best %.4f (epoch %d) %.1f s\n", kind, threads,
                  p.epoch, p.max_epochs, p.train_loss, p.valid_score, p.best_valid_score, p.best_epoch, p.elapsed_s);
      std::fflush(stdout);
    };
    ASSERT_TRUE(model->Train(train, {}, o).ok());
    EvalMetrics m = EvaluateGroups(*model, held);
    std::printf("%-5s held-out pairwise %.3f top1 %.3f top5 %.3f\n", kind, m.pairwise, m.top1, m.top5);
  }
}

}  // namespace
}  // namespace tune::costmodel
