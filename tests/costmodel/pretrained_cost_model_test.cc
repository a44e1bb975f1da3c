// Tests of PretrainedCostModel: pretrained ranking first, the blend, the negative-transfer guard, Save/Load.
#include "costmodel/pretrained_cost_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "costmodel/cost_model_adapters.h"
#include "costmodel/features.h"
#include "costmodel/offline_model.h"
#include "costmodel/ranking_metrics.h"
#include "costmodel/xgb_model.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"
#include "tests/costmodel/analytic_gemm.h"
#include "tests/costmodel/teacher_model.h"

namespace tune::costmodel {
namespace {

/// `n` distinct valid configs of `t`'s space drawn with `rng`.
std::vector<search::Config> PtDrawConfigs(const codegen::Template& t, size_t n, std::mt19937_64& rng) {
  std::vector<search::Config> out;
  std::set<search::Config> seen;
  for (int tries = 0; out.size() < n && tries < 100000; ++tries) {
    auto c = t.space().Sample(rng);
    if (c.ok() && seen.insert(*c).second) out.push_back(*c);
  }
  return out;
}

/// A teacher trained on 300 configs of a 96x64x128 GEMM (another task than the ones tested).
std::shared_ptr<const OfflineModel> PtTeacher(double sign = 1, bool noise_only = false) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "96,64,128");
  if (tmpl == nullptr) return nullptr;
  std::mt19937_64 rng = ::tune::test::TestRng(7);
  TrainGroup g;
  for (const search::Config& c : PtDrawConfigs(*tmpl, 300, rng)) {
    auto in = MakeModelInput(*tmpl, c, {.ast = true, .graph = false});
    if (!in.ok()) continue;
    g.inputs.push_back(*std::move(in));
    g.latencies_s.push_back(test::AnalyticGemmSeconds(*tmpl, c));
  }
  auto model = std::make_shared<test::TeacherModel>(sign, noise_only);
  EXPECT_TRUE(model->Train({g}, {}, {}).ok());
  return model;
}

std::unique_ptr<FeatureCostModel> PtOnline(const codegen::Template* tmpl) {
  auto m = CreateFeatureCostModel("xgb", {tmpl, nullptr});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<double> PtCosts(const codegen::Template& t, const std::vector<search::Config>& configs) {
  std::vector<double> out;
  for (const auto& c : configs) out.push_back(test::AnalyticGemmSeconds(t, c));
  return out;
}

double PtAccuracy(const std::vector<double>& scores, const std::vector<double>& costs) {
  RankedTask task;
  task.scores = scores;
  task.latencies_s = costs;
  return PairwiseAccuracy(task).value_or(-1);
}

// The pretrained model's blend weight after fitting `configs` 16 at a time, the guard and
// fine-tuning off and `po` otherwise as given.
double PtWeightAfterBatches(const codegen::Template* tmpl, std::shared_ptr<const OfflineModel> teacher,
                            const std::vector<search::Config>& configs, const std::vector<double>& costs,
                            PretrainedOptions po) {
  po.guard_min_configs = 1000000;  // the blend alone, no guard
  po.fine_tune = false;
  PretrainedCostModel model(tmpl, std::move(teacher), PtOnline(tmpl), po);
  for (size_t n = 16; n <= configs.size(); n += 16) {
    EXPECT_TRUE(model.Fit(std::vector<search::Config>(configs.begin(), configs.begin() + n),
                          std::vector<double>(costs.begin(), costs.begin() + n)).ok());
  }
  EXPECT_TRUE(model.pretrained_active());
  return model.pretrained_weight();
}

TEST(PretrainedCostModelTest, RanksByThePretrainedModelBeforeAnyMeasurement) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher();
  ASSERT_TRUE(teacher->trained());
  PretrainedCostModel model(tmpl.get(), teacher, PtOnline(tmpl.get()));
  EXPECT_TRUE(model.trained());
  std::mt19937_64 rng = ::tune::test::TestRng(1);
  const auto configs = PtDrawConfigs(*tmpl, 120, rng);
  const std::vector<double> scores = model.Predict(configs);
  // The pretrained model's own scores, and a ranking of this unseen shape well above chance.
  std::vector<const ModelInput*> inputs;
  std::vector<ModelInput> held;
  held.reserve(configs.size());
  for (const auto& c : configs) held.push_back(*MakeModelInput(*tmpl, c, {.ast = true, .graph = false}));
  for (const auto& h : held) inputs.push_back(&h);
  EXPECT_EQ(scores, teacher->Score(inputs));
  EXPECT_GT(PtAccuracy(scores, PtCosts(*tmpl, configs)), 0.7);

  // The same with no pretrained model: the untrained online model scores all zeros.
  auto online = PtOnline(tmpl.get());
  EXPECT_FALSE(online->trained());
  const std::vector<double> plain = online->Predict(configs);
  EXPECT_TRUE(std::all_of(plain.begin(), plain.end(), [](double s) { return s == 0; }));
}

TEST(PretrainedCostModelTest, GuardDropsAnInvertedModelAndSaysWhy) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  PretrainedCostModel model(tmpl.get(), PtTeacher(-1), PtOnline(tmpl.get()));
  std::mt19937_64 rng = ::tune::test::TestRng(2);
  const auto configs = PtDrawConfigs(*tmpl, 40, rng);
  const auto costs = PtCosts(*tmpl, configs);
  // Fewer ok results than the guard needs: it waits.
  std::vector<search::Config> seen(configs.begin(), configs.begin() + 8);
  std::vector<double> seen_costs(costs.begin(), costs.begin() + 8);
  ASSERT_TRUE(model.Fit(seen, seen_costs).ok());
  EXPECT_TRUE(model.pretrained_active());
  EXPECT_TRUE(model.note().empty());
  // Enough of them, ranked backwards: dropped, with the accuracy in the note.
  seen.assign(configs.begin(), configs.begin() + 24);
  seen_costs.assign(costs.begin(), costs.begin() + 24);
  ASSERT_TRUE(model.Fit(seen, seen_costs).ok());
  EXPECT_FALSE(model.pretrained_active());
  EXPECT_LT(model.pretrained_accuracy(), 0.5);
  EXPECT_NE(model.note().find("dropped after 24 ok results: pairwise accuracy 0."), std::string::npos) << model.note();
  EXPECT_EQ(model.pretrained_weight(), 0);
  // From then on Predict is the online model's ranking alone.
  const auto rest = std::vector<search::Config>(configs.begin() + 24, configs.end());
  const auto blended = model.Predict(rest);
  const auto online = model.online().Predict(rest);
  std::vector<double> a = blended, b = online;
  EXPECT_NEAR(PtAccuracy(a, std::vector<double>(costs.begin() + 24, costs.end())),
              PtAccuracy(b, std::vector<double>(costs.begin() + 24, costs.end())), 1e-12);
  // It stays dropped.
  ASSERT_TRUE(model.Fit(configs, costs).ok());
  EXPECT_FALSE(model.pretrained_active());
}

TEST(PretrainedCostModelTest, GuardKeepsAGoodModel) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  PretrainedCostModel model(tmpl.get(), PtTeacher(1), PtOnline(tmpl.get()));
  std::mt19937_64 rng = ::tune::test::TestRng(3);
  const auto configs = PtDrawConfigs(*tmpl, 48, rng);
  const auto costs = PtCosts(*tmpl, configs);
  for (size_t n = 8; n <= configs.size(); n += 8) {
    ASSERT_TRUE(model.Fit(std::vector<search::Config>(configs.begin(), configs.begin() + n),
                          std::vector<double>(costs.begin(), costs.begin() + n)).ok());
  }
  EXPECT_TRUE(model.pretrained_active());
  EXPECT_TRUE(model.note().empty());
  EXPECT_GT(model.pretrained_accuracy(), 0.6);
  EXPECT_GT(model.pretrained_weight(), 0);
}

TEST(PretrainedCostModelTest, TheTasksOwnDataTakesOverFromAModelThatKnowsNothing) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  PretrainedOptions po;
  po.guard_min_configs = 1000000;  // the blend alone, no guard
  po.weight_max_ratio = 0;         // every pair: random configs give few close ones
  PretrainedCostModel model(tmpl.get(), PtTeacher(1, /*noise_only=*/true), PtOnline(tmpl.get()), po);
  std::mt19937_64 rng = ::tune::test::TestRng(4);
  const auto configs = PtDrawConfigs(*tmpl, 200, rng);
  const auto costs = PtCosts(*tmpl, configs);
  for (size_t n = 16; n <= 96; n += 16) {
    ASSERT_TRUE(model.Fit(std::vector<search::Config>(configs.begin(), configs.begin() + n),
                          std::vector<double>(costs.begin(), costs.begin() + n)).ok());
  }
  EXPECT_TRUE(model.pretrained_active());
  EXPECT_GT(model.online_weight(), model.pretrained_weight());
  // The blend ranks unseen configs about as the online model does, far better than the noise.
  const std::vector<search::Config> rest(configs.begin() + 96, configs.end());
  const std::vector<double> rest_costs(costs.begin() + 96, costs.end());
  EXPECT_GT(PtAccuracy(model.Predict(rest), rest_costs), 0.7);
}

TEST(PretrainedCostModelTest, WeightsWithAHalfLifeFollowTheLatestBatches) {
  // Five batches the pretrained model ranks well, then two it ranks backwards (the costs
  // inverted): counted whenever measured, the early pairs keep its weight above zero; with a
  // half-life of one batch the latest batches decide, and its weight drops to zero.
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher(1);
  std::mt19937_64 rng = ::tune::test::TestRng(5);
  const auto configs = PtDrawConfigs(*tmpl, 112, rng);
  ASSERT_EQ(configs.size(), 112u);
  std::vector<double> costs = PtCosts(*tmpl, configs);
  for (size_t i = 80; i < costs.size(); ++i) costs[i] = 1e-6 / costs[i];
  auto run = [&](double half_life) {
    PretrainedOptions po;
    po.weight_max_ratio = 0;  // every pair, so the early batches' pairs count until they decay
    po.weight_half_life = half_life;
    return PtWeightAfterBatches(tmpl.get(), teacher, configs, costs, po);
  };
  EXPECT_GT(run(0), 0.05);
  EXPECT_EQ(run(16), 0);
}

TEST(PretrainedCostModelTest, WeightsFromClosePairsFollowHowTheFastConfigsAreRanked) {
  // A pretrained model that ranks fast against slow configs right and the fastest quarter
  // backwards (their latencies mirrored within the quarter): counting every pair, its weight
  // stays up on the easy pairs; counting only pairs within the quarter's ratio to the best, it
  // drops to zero.
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher(1);
  std::mt19937_64 rng = ::tune::test::TestRng(13);
  const auto configs = PtDrawConfigs(*tmpl, 112, rng);
  ASSERT_EQ(configs.size(), 112u);
  std::vector<double> costs = PtCosts(*tmpl, configs);
  std::vector<double> sorted = costs;
  std::sort(sorted.begin(), sorted.end());
  const double best = sorted.front(), quarter = sorted[sorted.size() / 4];
  ASSERT_GT(quarter, best);
  for (double& c : costs)
    if (c <= quarter) c = best + quarter - c;
  auto run = [&](double max_ratio) {
    PretrainedOptions po;
    po.weight_max_ratio = max_ratio;
    return PtWeightAfterBatches(tmpl.get(), teacher, configs, costs, po);
  };
  EXPECT_GT(run(0), 0.1);
  EXPECT_EQ(run(quarter / best * (1 + 1e-9)), 0);
}

TEST(PretrainedCostModelTest, AShareOfBatchesIsRankedByTheOnlineModelAlone) {
  // A pretrained model the blend keeps trusting (its prior is worth more pairs than the task
  // has measured) that ranks this task backwards: the blend's picks are where it peaks, never
  // where the task's measurements point. With online_share 0.5 every other batch is ranked by
  // the online model alone, as well as that ranks on its own.
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher(-1);
  std::mt19937_64 rng = ::tune::test::TestRng(11);
  const auto configs = PtDrawConfigs(*tmpl, 200, rng);
  ASSERT_EQ(configs.size(), 200u);
  const std::vector<double> costs = PtCosts(*tmpl, configs);
  const std::vector<search::Config> rest(configs.begin() + 96, configs.end());
  const std::vector<double> rest_costs(costs.begin() + 96, costs.end());
  struct Step {
    bool online_only;
    double blend_accuracy, online_accuracy;
  };
  auto run = [&](double share) {
    PretrainedOptions po;
    po.guard_min_configs = 1000000;  // never dropped
    po.fine_tune = false;
    po.prior_accuracy = 1;
    po.prior_pairs = 2000;
    po.online_share = share;
    PretrainedCostModel model(tmpl.get(), teacher, PtOnline(tmpl.get()), po);
    std::vector<Step> steps;
    for (size_t n = 16; n <= 96; n += 16) {
      EXPECT_TRUE(model.Fit(std::vector<search::Config>(configs.begin(), configs.begin() + n),
                            std::vector<double>(costs.begin(), costs.begin() + n)).ok());
      steps.push_back({model.online_only(), PtAccuracy(model.Predict(rest), rest_costs),
                       PtAccuracy(model.online().Predict(rest), rest_costs)});
    }
    return steps;
  };
  const std::vector<Step> off = run(0);
  for (const Step& s : off) {
    EXPECT_FALSE(s.online_only);
    EXPECT_LT(s.blend_accuracy, 0.5);  // the backward model decides
  }
  const std::vector<Step> half = run(0.5);
  ASSERT_EQ(half.size(), 6u);
  for (size_t i = 0; i < half.size(); ++i) {
    EXPECT_EQ(half[i].online_only, i % 2 == 1) << "fit " << i;
    if (half[i].online_only) {
      EXPECT_NEAR(half[i].blend_accuracy, half[i].online_accuracy, 1e-12) << "fit " << i;
      EXPECT_GT(half[i].blend_accuracy, 0.65) << "fit " << i;
      EXPECT_GT(half[i].blend_accuracy, off[i].blend_accuracy + 0.2) << "fit " << i;
    } else {
      EXPECT_LT(half[i].blend_accuracy, 0.5) << "fit " << i;
    }
  }
  // A share of 1/3: one batch in three.
  const std::vector<Step> third = run(1.0 / 3);
  EXPECT_EQ(std::count_if(third.begin(), third.end(), [](const Step& s) { return s.online_only; }), 2);
}

TEST(PretrainedCostModelTest, OptionsParseFromText) {
  PretrainedOptions o;
  ASSERT_TRUE(SetPretrainedOption(o, "weight_half_life=64").ok());
  EXPECT_EQ(o.weight_half_life, 64);
  ASSERT_TRUE(SetPretrainedOption(o, "fine_tune=0").ok());
  EXPECT_FALSE(o.fine_tune);
  ASSERT_TRUE(SetPretrainedOption(o, "guard_min_configs=24").ok());
  EXPECT_EQ(o.guard_min_configs, 24);
  ASSERT_TRUE(SetPretrainedOption(o, "prior_accuracy=0.9").ok());
  EXPECT_EQ(o.prior_accuracy, 0.9);
  std::mt19937_64 rng = ::tune::test::TestRng(12);
  const double share = std::uniform_real_distribution<double>(0, 1)(rng);
  ASSERT_TRUE(SetPretrainedOption(o, absl::StrCat("online_share=", share)).ok());
  EXPECT_NEAR(o.online_share, share, 1e-5);  // StrCat writes 6 digits
  ASSERT_TRUE(SetPretrainedOption(o, "online_share=1").ok());
  EXPECT_EQ(o.online_share, 1);
  const double ratio = std::uniform_real_distribution<double>(1, 3)(rng);
  ASSERT_TRUE(SetPretrainedOption(o, absl::StrCat("weight_max_ratio=", ratio)).ok());
  EXPECT_NEAR(o.weight_max_ratio, ratio, 1e-5);
  ASSERT_TRUE(SetPretrainedOption(o, "weight_max_ratio=0").ok());
  EXPECT_EQ(o.weight_max_ratio, 0);
  const PretrainedOptions before = o;
  for (const char* bad : {"weight_half_life", "weight_half_life=-1", "weight_half_life=x", "fine_tune=2",
                          "prior_accuracy=0.4", "guard_min_ratio=0.5", "online_share=1.01", "online_share=-0.2",
                          "online_share=nan", "online_share=", "weight_max_ratio=0.5", "weight_max_ratio=1",
                          "weight_max_ratio=-1", "weight_max_ratio=inf", "nonsense=1"}) {
    const absl::Status st = SetPretrainedOption(o, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad << ": " << st;
    EXPECT_EQ(o.weight_half_life, before.weight_half_life) << bad;
    EXPECT_EQ(o.fine_tune, before.fine_tune) << bad;
    EXPECT_EQ(o.prior_accuracy, before.prior_accuracy) << bad;
    EXPECT_EQ(o.online_share, before.online_share) << bad;
    EXPECT_EQ(o.weight_max_ratio, before.weight_max_ratio) << bad;
  }
  EXPECT_NE(SetPretrainedOption(o, "nonsense=1").message().find("known: guard_min_configs"), std::string::npos);
}

TEST(PretrainedCostModelTest, AKindThatFineTunesDoesSoOnAPrivateCopy) {
  auto xgb = CreateOfflineModel("xgb");
  if (!xgb.ok() || *xgb == nullptr) GTEST_SKIP() << "this build has no offline xgb model";
  auto other = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "96,64,128");
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(other, nullptr);
  ASSERT_NE(tmpl, nullptr);
  std::mt19937_64 rng = ::tune::test::TestRng(9);
  TrainGroup g;
  for (const search::Config& c : PtDrawConfigs(*other, 200, rng)) {
    auto in = MakeModelInput(*other, c, (*xgb)->needs());
    if (!in.ok()) continue;
    g.inputs.push_back(*std::move(in));
    g.latencies_s.push_back(test::AnalyticGemmSeconds(*other, c));
  }
  ASSERT_TRUE((*xgb)->Train({g}, {}, {}).ok());
  std::shared_ptr<const OfflineModel> shared(std::move(*xgb));
  const auto payload = shared->SavePayload();
  ASSERT_TRUE(payload.ok());
  PretrainedOptions po;
  po.guard_min_configs = 1000000;
  PretrainedCostModel model(tmpl.get(), shared, PtOnline(tmpl.get()), po);
  const auto configs = PtDrawConfigs(*tmpl, 32, rng);
  ASSERT_TRUE(model.Fit(configs, PtCosts(*tmpl, configs)).ok());
  EXPECT_TRUE(model.fine_tuned());
  EXPECT_EQ(*shared->SavePayload(), *payload) << "the shared model was changed";
}

TEST(PretrainedCostModelTest, SaveAndLoadRestoreTheOnlineModel) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher();
  PretrainedCostModel model(tmpl.get(), teacher, PtOnline(tmpl.get()));
  std::mt19937_64 rng = ::tune::test::TestRng(5);
  const auto configs = PtDrawConfigs(*tmpl, 40, rng);
  ASSERT_TRUE(model.Fit(configs, PtCosts(*tmpl, configs)).ok());
  auto saved = model.Save();
  ASSERT_TRUE(saved.ok()) << saved.status();
  PretrainedCostModel restored(tmpl.get(), teacher, PtOnline(tmpl.get()));
  ASSERT_TRUE(restored.Load(*saved).ok());
  EXPECT_EQ(restored.online().Predict(configs), model.online().Predict(configs));
  EXPECT_FALSE(restored.Load("not a model").ok());
}

}  // namespace
}  // namespace tune::costmodel

namespace tune::costmodel {
namespace {

// The input cache is emptied when full, but never in the middle of scoring one batch: the
// scores of a batch larger than the cache are those of an unbounded cache (they were read
// through freed inputs before).
TEST(PretrainedCostModelTest, ScoresOfABatchLargerThanTheInputCacheAreExact) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  auto teacher = PtTeacher();
  std::mt19937_64 rng = ::tune::test::TestRng(3);
  const auto configs = PtDrawConfigs(*tmpl, 60, rng);
  PretrainedOptions small;
  small.max_cached_inputs = 7;
  PretrainedCostModel bounded(tmpl.get(), teacher, PtOnline(tmpl.get()), small);
  PretrainedCostModel unbounded(tmpl.get(), teacher, PtOnline(tmpl.get()));
  const std::vector<double> expected = unbounded.Predict(configs);
  EXPECT_EQ(bounded.Predict(configs), expected);
  EXPECT_EQ(bounded.Predict(configs), expected);  // again, from a cache emptied on entry
}

// The online XGBoost model reads its loop-AST rows from the pretrained model's inputs (one
// lowering of a config for both): it keeps no rows of its own and ranks exactly as the same
// model lowering the configs itself.
TEST(PretrainedCostModelTest, TheOnlineModelReadsTheRowsOfThePretrainedInputs) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "64,128,64");
  ASSERT_NE(tmpl, nullptr);
  std::mt19937_64 rng = ::tune::test::TestRng(5);
  const auto configs = PtDrawConfigs(*tmpl, 96, rng);
  const auto costs = PtCosts(*tmpl, configs);
  PretrainedOptions po;
  po.fine_tune = false;
  PretrainedCostModel model(tmpl.get(), PtTeacher(), PtOnline(tmpl.get()), po);
  auto alone = PtOnline(tmpl.get());
  for (size_t n = 32; n <= 64; n += 32) {
    const std::vector<search::Config> seen(configs.begin(), configs.begin() + n);
    const std::vector<double> seen_costs(costs.begin(), costs.begin() + n);
    ASSERT_TRUE(model.Fit(seen, seen_costs).ok());
    ASSERT_TRUE(alone->Fit(seen, seen_costs).ok());
  }
  const std::vector<search::Config> unseen(configs.begin() + 64, configs.end());
  ASSERT_TRUE(model.online().trained());
  EXPECT_EQ(model.online().Predict(unseen), alone->Predict(unseen));
  auto* shared = dynamic_cast<AstCostModel*>(&model.online());
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->num_cached(), 0u);
  EXPECT_GT(dynamic_cast<AstCostModel*>(alone.get())->num_cached(), 0u);
}

}  // namespace
}  // namespace tune::costmodel
