// Tests of the search::CostModel adapters: factory, ranking quality, transfer, warm start, I/O.
#include "costmodel/cost_model_adapters.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "costmodel/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/kernel_tuner_cache.h"
#include "tests/common/toy_template.h"
#include "tests/costmodel/analytic_gemm.h"

namespace tune::costmodel {
namespace {

using codegen::OpKind;
using codegen::Template;
using ::tune::test::MakeTemplate;
using search::Config;

const std::string kDataDir = std::string(TUNE_SOURCE_DIR) + "/../shared/data/kernel_tuner";

// `n` distinct valid configs of `space` drawn with `rng`.
std::vector<Config> DistinctConfigs(const search::ConfigSpace& space, size_t n, std::mt19937_64& rng) {
  std::vector<Config> out;
  std::unordered_set<Config, search::ConfigHash> seen;
  while (out.size() < n) {
    auto c = space.Sample(rng);
    EXPECT_TRUE(c.ok());
    if (seen.insert(*c).second) out.push_back(*c);
  }
  return out;
}

std::vector<double> Costs(const Template& t, const std::vector<Config>& configs) {
  std::vector<double> out;
  for (const auto& c : configs) out.push_back(test::AnalyticGemmSeconds(t, c));
  return out;
}

// Accuracy over `pairs` random pairs (of different cost) of held-out configs: the share the
// scores order like the costs (higher score = faster). Chance is 0.5.
double PairwiseAccuracy(const std::vector<double>& scores, const std::vector<double>& costs, int pairs,
                        uint64_t seed) {
  std::mt19937_64 rng(seed);
  int right = 0, total = 0;
  while (total < pairs) {
    size_t i = search::UniformBelow(rng, costs.size()), j = search::UniformBelow(rng, costs.size());
    if (i == j || costs[i] == costs[j]) continue;
    ++total;
    if ((scores[i] > scores[j]) == (costs[i] < costs[j]) && scores[i] != scores[j]) ++right;
  }
  return static_cast<double>(right) / total;
}

CostModelOptions TestOptions() {
  CostModelOptions o;
  o.xgb.seed = 5;
  o.xgb.num_rounds = 60;
  return o;
}

TEST(CostModelFactoryTest, CreatesByName) {
  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  auto xgb = CreateCostModel("xgb", {t.get()}, TestOptions());
  ASSERT_TRUE(xgb.ok()) << xgb.status();
  auto* ast = dynamic_cast<AstCostModel*>(xgb->get());
  ASSERT_NE(ast, nullptr);
  EXPECT_EQ(ast->model().options().objective, "rank:pairwise");
  EXPECT_EQ(ast->schema().length, static_cast<int>(kNumFeatures));

  auto reg = CreateCostModel("xgb-reg", {t.get()}, TestOptions());
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(dynamic_cast<AstCostModel*>(reg->get())->model().options().objective, "reg:squarederror");

  auto knob = CreateCostModel("xgb-knob", {t.get()}, TestOptions());
  ASSERT_TRUE(knob.ok());
  EXPECT_NE(dynamic_cast<KnobCostModel*>(knob->get()), nullptr);
  auto space_only = CreateCostModel("xgb", {nullptr, &t->space()}, TestOptions());
  ASSERT_TRUE(space_only.ok());
  EXPECT_NE(dynamic_cast<KnobCostModel*>(space_only->get()), nullptr);

  EXPECT_EQ(CreateCostModel("gnn", {t.get()}).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(CreateCostModel("lstm", {t.get()}).status().code(), absl::StatusCode::kUnimplemented);
  auto unknown = CreateCostModel("forest", {t.get()});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("xgb-reg"));
  EXPECT_EQ(CreateCostModel("xgb", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AstCostModelTest, UntrainedScoresZeroAndInvalidConfigsScoreLowest) {
  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  AstCostModel model(t.get(), TestOptions());
  EXPECT_FALSE(model.trained());
  std::mt19937_64 rng(1);
  std::vector<Config> configs = DistinctConfigs(t->space(), 20, rng);
  std::vector<double> var;
  EXPECT_EQ(model.Predict(configs, &var), std::vector<double>(20, 0.0));
  EXPECT_EQ(var, std::vector<double>(20, 0.0));

  ASSERT_TRUE(model.Fit(configs, Costs(*t, configs)).ok());
  EXPECT_TRUE(model.trained());
  // A register tile of 16x64 floats violates "register_tile".
  Config invalid = t->space().FromJson(R"({"tile_m":[1,4,16],"tile_n":[1,1,64],"tile_k":[64,1],"order":[0],)"
                                       R"("vectorize":[1],"unroll_m":[0],"unroll_k":[0],"pack_b":[0],)"
                                       R"("acc_tile":[1],"parallel":[0]})").value();
  ASSERT_FALSE(t->space().IsValid(invalid));
  std::vector<Config> mixed = {configs[0], invalid, configs[1]};
  std::vector<double> scores = model.Predict(mixed, &var);
  EXPECT_EQ(scores[1], kInvalidConfigScore);
  EXPECT_GT(scores[0], kInvalidConfigScore);
  EXPECT_EQ(var[1], 0.0);
  // Invalid configs in Fit are skipped, not an error.
  EXPECT_TRUE(model.Fit(mixed, {1e-3, 1e-3, 2e-3}).ok());
  EXPECT_EQ(model.Fit(mixed, {1e-3}).code(), absl::StatusCode::kInvalidArgument);
}

// The headline check: trained on 500 random configs of a 256^3 matmul (synthetic analytic
// latencies, 3% noise), the AST model orders 1000 held-out pairs with >= 0.80 accuracy
// (chance: 0.5) under both objectives.
TEST(AstCostModelTest, RanksHeldOutConfigs) {
  auto t = MakeTemplate(OpKind::kMatmul, "256,256,256");
  std::mt19937_64 rng(2);
  std::vector<Config> configs = DistinctConfigs(t->space(), 1500, rng);
  std::vector<Config> train(configs.begin(), configs.begin() + 500), test(configs.begin() + 500, configs.end());
  std::vector<double> train_costs = Costs(*t, train), test_costs = Costs(*t, test);
  for (const std::string name : {"xgb", "xgb-reg"}) {
    SCOPED_TRACE(name);
    auto model = CreateCostModel(name, {t.get()}, TestOptions());
    ASSERT_TRUE(model.ok());
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE((*model)->Fit(train, train_costs).ok());
    double fit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<double> var;
    start = std::chrono::steady_clock::now();
    std::vector<double> scores = (*model)->Predict(test, &var);
    double predict_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double accuracy = PairwiseAccuracy(scores, test_costs, 1000, 3);
    std::printf("[ quality ] %s: held-out pairwise accuracy %.3f (fit %.2f s, predict %.1f us/config)\n",
                name.c_str(), accuracy, fit_s, predict_s / test.size() * 1e6);
    EXPECT_GE(accuracy, 0.80);
    for (double v : var) EXPECT_GE(v, 0.0);
  }
}

// Transfer: a model fitted only on another task's rows (AddPriorData, no own measurement)
// still orders a differently shaped matmul's configs with >= 0.70 accuracy; adding 100 of the
// target's own measurements does not make it worse than 0.75.
TEST(AstCostModelTest, TransfersAcrossShapesThroughPriorData) {
  auto source = MakeTemplate(OpKind::kMatmul, "256,256,256");
  auto target = MakeTemplate(OpKind::kMatmul, "128,512,192");
  std::mt19937_64 rng(4);
  std::vector<Config> src = DistinctConfigs(source->space(), 600, rng);
  std::vector<std::vector<float>> src_rows;
  for (const auto& c : src) src_rows.push_back(ExtractFeatures(*source->Lower(c, "k")));

  AstCostModel model(target.get(), TestOptions());
  model.AddPriorData(src_rows, Costs(*source, src), /*group=*/7);
  EXPECT_EQ(model.num_prior_rows(), 600u);
  ASSERT_TRUE(model.Fit({}, {}).ok()) << "prior data alone trains the model";

  std::vector<Config> tgt = DistinctConfigs(target->space(), 1100, rng);
  std::vector<Config> own(tgt.begin(), tgt.begin() + 100), held(tgt.begin() + 100, tgt.end());
  std::vector<double> held_costs = Costs(*target, held);
  double zero_shot = PairwiseAccuracy(model.Predict(held), held_costs, 1000, 5);
  ASSERT_TRUE(model.Fit(own, Costs(*target, own)).ok());
  double warm = PairwiseAccuracy(model.Predict(held), held_costs, 1000, 5);

  AstCostModel cold(target.get(), TestOptions());
  ASSERT_TRUE(cold.Fit(own, Costs(*target, own)).ok());
  double cold_accuracy = PairwiseAccuracy(cold.Predict(held), held_costs, 1000, 5);
  std::printf("[ quality ] transfer 256^3 -> 128x512x192: zero-shot %.3f, warm (+100 own) %.3f, "
              "cold (100 own) %.3f\n", zero_shot, warm, cold_accuracy);
  EXPECT_GE(zero_shot, 0.70);
  EXPECT_GE(warm, 0.75);
}

TEST(AstCostModelTest, CachesFeaturesPerConfig) {
  auto t = MakeTemplate(OpKind::kConv2d, "1,16,14,14,32,3,3,1,1");
  CostModelOptions o = TestOptions();
  o.max_cached_features = 50;
  AstCostModel model(t.get(), o);
  std::mt19937_64 rng(6);
  std::vector<Config> configs = DistinctConfigs(t->space(), 40, rng);
  std::vector<float> row;
  for (const auto& c : configs) ASSERT_TRUE(model.Featurize(c, &row));
  EXPECT_EQ(model.num_cached(), 40u);
  ASSERT_TRUE(model.Featurize(configs[3], &row));
  EXPECT_EQ(row, ExtractFeatures(*t->Lower(configs[3], "x")));
  EXPECT_EQ(model.num_cached(), 40u);
  for (const auto& c : DistinctConfigs(t->space(), 30, rng)) model.Featurize(c, &row);
  EXPECT_LE(model.num_cached(), 50u) << "the cache is bounded";
}

TEST(AstCostModelTest, SaveLoadAndDeterminism) {
  auto t = MakeTemplate(OpKind::kMatmul, "128,128,128");
  std::mt19937_64 rng(8);
  std::vector<Config> configs = DistinctConfigs(t->space(), 300, rng);
  std::vector<Config> train(configs.begin(), configs.begin() + 200), test(configs.begin() + 200, configs.end());
  AstCostModel a(t.get(), TestOptions()), b(t.get(), TestOptions());
  ASSERT_TRUE(a.Fit(train, Costs(*t, train)).ok());
  ASSERT_TRUE(b.Fit(train, Costs(*t, train)).ok());
  std::vector<double> va, vb;
  std::vector<double> pa = a.Predict(test, &va);
  EXPECT_EQ(pa, b.Predict(test, &vb)) << "same seed, same predictions";
  EXPECT_EQ(va, vb);

  auto bytes = a.Save();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto other_task = MakeTemplate(OpKind::kConv2d, "1,16,14,14,32,3,3,1,1");
  AstCostModel restored(other_task.get(), TestOptions());  // AST models load across tasks
  ASSERT_TRUE(restored.Load(*bytes).ok());
  AstCostModel same_task(t.get(), TestOptions());
  ASSERT_TRUE(same_task.Load(*bytes).ok());
  std::vector<double> vr;
  EXPECT_EQ(same_task.Predict(test, &vr), pa);
  EXPECT_EQ(vr, va);

  EXPECT_EQ(restored.Load("not a model").code(), absl::StatusCode::kInvalidArgument);
  KnobCostModel knob(&t->space(), TestOptions());
  EXPECT_EQ(knob.Load(*bytes).code(), absl::StatusCode::kInvalidArgument) << "AST artifact into a knob model";
  ASSERT_TRUE(knob.Fit(train, Costs(*t, train)).ok());
  EXPECT_EQ(a.Load(*knob.Save()).code(), absl::StatusCode::kInvalidArgument) << "knob artifact into an AST model";
}

TEST(KnobCostModelTest, FeaturesAndSpaceSignature) {
  search::ConfigSpace space;
  space.AddSplit("tile", 16, 2);
  space.AddChoice("unroll", {0, 1});
  space.AddChoice("single", {4});
  KnobCostModel model(&space, TestOptions());
  // tile: index + 2 factors; unroll: index + value; single: index + value.
  ASSERT_EQ(model.schema().length, 7);
  Config c = {2, 1, 0};  // tile option 2 of {[1,16],[2,8],[4,4],[8,2],[16,1]}
  std::vector<float> row;
  ASSERT_TRUE(model.Featurize(c, &row));
  const auto& opt = space.knobs()[0].options[2];
  EXPECT_EQ(row, (std::vector<float>{0.5f, static_cast<float>(std::log2(1.0 + opt[0])),
                                     static_cast<float>(std::log2(1.0 + opt[1])), 1.0f, 1.0f, 0.0f,
                                     static_cast<float>(std::log2(5.0))}));
  EXPECT_FALSE(model.Featurize({9, 0, 0}, &row));

  search::ConfigSpace renamed;
  renamed.AddSplit("tile", 16, 2);
  renamed.AddChoice("vectorize", {0, 1});
  renamed.AddChoice("single", {4});
  EXPECT_EQ(KnobCostModel::Schema(renamed).length, model.schema().length);
  EXPECT_NE(KnobCostModel::Schema(renamed).signature, model.schema().signature);
}

// Real measurements: the CLBlast GEMM space brute-forced on an RTX 3090 (17956 configs).
// Knob features, 500 random configs for training, 1000 random held-out pairs; the margin is
// >= 0.75 pairwise accuracy (chance 0.5).
TEST(KnobCostModelTest, RanksRecordedGpuGemmSpace) {
  const std::string path = kDataDir + "/gemm_RTX_3090.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto cache = measure::KernelTunerCache::Load(path);
  ASSERT_TRUE(cache.ok()) << cache.status();
  search::ConfigSpace space;
  for (size_t p = 0; p < cache->param_names.size(); ++p) space.AddChoice(cache->param_names[p], cache->param_values[p]);

  std::vector<size_t> ok;
  for (size_t i = 0; i < cache->entries.size(); ++i) {
    if (cache->entries[i].ok) ok.push_back(i);
  }
  ASSERT_GT(ok.size(), 2000u);
  std::mt19937_64 rng(9);
  for (size_t i = ok.size() - 1; i > 0; --i) std::swap(ok[i], ok[search::UniformBelow(rng, i + 1)]);
  auto config = [&](size_t e) { return Config(cache->entries[e].value_index.begin(), cache->entries[e].value_index.end()); };
  std::vector<Config> train, test;
  std::vector<double> train_costs, test_costs;
  for (size_t i = 0; i < 500; ++i) {
    train.push_back(config(ok[i]));
    train_costs.push_back(cache->entries[ok[i]].time_ms * 1e-3);
  }
  for (size_t i = 500; i < 2500; ++i) {
    test.push_back(config(ok[i]));
    test_costs.push_back(cache->entries[ok[i]].time_ms * 1e-3);
  }
  for (const std::string name : {"xgb", "xgb-reg"}) {
    auto model = CreateCostModel(name, {nullptr, &space}, TestOptions());
    ASSERT_TRUE(model.ok());
    ASSERT_TRUE((*model)->Fit(train, train_costs).ok());
    double accuracy = PairwiseAccuracy((*model)->Predict(test), test_costs, 1000, 10);
    std::printf("[ quality ] %s on %s (%s): held-out pairwise accuracy %.3f\n", name.c_str(),
                cache->kernel_name.c_str(), cache->device_name.c_str(), accuracy);
    EXPECT_GE(accuracy, 0.75) << name;
  }
}

}  // namespace
}  // namespace tune::costmodel
