// Tests of the ensemble cost model: the mean of scale-normalised members, save/load, refusal of bad member data, fine-tuning.
#include "costmodel/ensemble_model.h"

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
#include "costmodel/features.h"
#include "costmodel/offline_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/test_seed.h"
#include "tests/costmodel/analytic_gemm.h"
#include "tests/costmodel/artifact_rewrite.h"

namespace tune::test {
namespace {

using ::testing::HasSubstr;
using costmodel::EnsembleMemberInfo;
using costmodel::EnsembleModel;
using costmodel::ModelInput;
using costmodel::TrainGroup;

// A member whose score is a + b * x + c * x^2 of the first AST feature x.
class EnsTestQuadratic final : public costmodel::OfflineModel {
 public:
  EnsTestQuadratic(double a, double b, double c) : a_(a), b_(b), c_(c) {}
  std::string kind() const override { return "xgb"; }
  costmodel::InputNeeds needs() const override { return {.ast = true}; }
  bool trained() const override { return true; }
  absl::Status Train(const std::vector<TrainGroup>&, const std::vector<TrainGroup>&,
                     const costmodel::TrainOptions&) override {
    return absl::OkStatus();
  }
  std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const override {
    std::vector<double> out;
    for (const ModelInput* in : inputs) out.push_back(At(in->ast[0]));
    return out;
  }
  absl::StatusOr<std::string> SavePayload() const override { return absl::UnimplementedError("fake"); }
  absl::Status LoadPayload(const std::string&) override { return absl::UnimplementedError("fake"); }
  double At(double x) const { return a_ + b_ * x + c_ * x * x; }

 private:
  double a_, b_, c_;
};

ModelInput EnsTestInput(double x) {
  ModelInput in;
  in.ast.assign(costmodel::kNumFeatures, 0.0f);
  in.ast[0] = static_cast<float>(x);
  return in;
}

// Mean of the per-group standard deviations and of the per-group means of f over `groups`.
void EnsTestExpectedScale(const std::vector<std::vector<double>>& groups, const EnsTestQuadratic& f, double* scale,
                          double* offset) {
  double sd_sum = 0, mean_sum = 0;
  for (const auto& xs : groups) {
    double mean = 0, var = 0;
    for (double x : xs) mean += f.At(static_cast<float>(x));
    mean /= static_cast<double>(xs.size());
    for (double x : xs) var += (f.At(static_cast<float>(x)) - mean) * (f.At(static_cast<float>(x)) - mean);
    sd_sum += std::sqrt(var / static_cast<double>(xs.size()));
    mean_sum += mean;
  }
  *scale = sd_sum / static_cast<double>(groups.size());
  *offset = mean_sum / static_cast<double>(groups.size());
}

// Matmul tasks of random valid configs with analytic latencies (every 9th fails).
std::vector<TrainGroup> EnsTestGemmGroups(const std::vector<std::string>& shapes, int per_task, uint64_t stream) {
  std::vector<TrainGroup> groups;
  std::mt19937_64 rng = TestRng(stream);
  for (const std::string& shape : shapes) {
    groups.push_back(costmodel::test::AnalyticGemmGroup(shape, per_task, rng, 9));
  }
  return groups;
}

std::vector<const ModelInput*> EnsTestPointers(const TrainGroup& g) {
  std::vector<const ModelInput*> in;
  for (const ModelInput& x : g.inputs) in.push_back(&x);
  return in;
}

// A trained ensemble of 3 small xgb members, with its training and test groups.
struct EnsTestTrained {
  std::vector<TrainGroup> train, valid, test;
  std::unique_ptr<costmodel::OfflineModel> model;
};

const EnsTestTrained& EnsTestTrainedEnsemble() {
  static const EnsTestTrained* trained = [] {
    auto* t = new EnsTestTrained;
    t->train = EnsTestGemmGroups({"64,64,64", "128,64,128", "64,128,256", "256,64,64", "128,128,64"}, 60, 40);
    t->valid = EnsTestGemmGroups({"96,96,96"}, 50, 41);
    t->test = EnsTestGemmGroups({"160,64,128", "64,192,64"}, 60, 42);
    auto m = costmodel::CreateOfflineModel("ensemble");
    EXPECT_TRUE(m.ok()) << m.status();
    costmodel::TrainOptions o;
    o.seed = 7;
    o.members = 3;
    o.max_epochs = 30;
    o.member_losses = {"pairwise", "regression"};
    absl::Status st = (*m)->Train(t->train, t->valid, o);
    EXPECT_TRUE(st.ok()) << st;
    t->model = *std::move(m);
    return t;
  }();
  return *trained;
}

std::string EnsTestArtifactBytes() {
  costmodel::ArtifactInfo info;
  info.kind = "ensemble";
  info.target_family = "llvm";
  auto bytes = costmodel::SerializeArtifact(info, *EnsTestTrainedEnsemble().model);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

void EnsTestExpectOneLineRefusal(const absl::StatusOr<costmodel::Artifact>& a, const std::string& why) {
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(a.status().message());
  EXPECT_THAT(msg, HasSubstr(why));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(EnsembleModelTest, ScoreIsTheMeanOfMembersNormalisedByTheirSpreadWithinATask) {
  std::mt19937_64 rng = TestRng(60);
  std::uniform_real_distribution<double> coef(-3, 3), pos(0.5, 4), x(-2, 2);
  const EnsTestQuadratic f(coef(rng), pos(rng), coef(rng) * 0.3), g(coef(rng) * 10, -pos(rng) * 25, coef(rng));
  std::vector<std::vector<double>> xs = {{}, {}, {}};
  std::vector<TrainGroup> train(2), valid(1);
  for (size_t k = 0; k < xs.size(); ++k) {
    TrainGroup& group = k < 2 ? train[k] : valid[0];
    for (size_t i = 0; i < 4 + 2 * k; ++i) {
      xs[k].push_back(static_cast<float>(x(rng)));
      group.inputs.push_back(EnsTestInput(xs[k].back()));
      group.latencies_s.push_back(1.0 + static_cast<double>(i));
    }
  }
  EnsembleModel e;
  ASSERT_TRUE(e.AddMember(std::make_unique<EnsTestQuadratic>(f), {}).ok());
  ASSERT_TRUE(e.AddMember(std::make_unique<EnsTestQuadratic>(g), {}).ok());
  EXPECT_FALSE(e.trained());  // scales not fitted yet
  costmodel::TrainOptions o;
  o.members = 0;  // only the given members
  ASSERT_TRUE(e.Train(train, valid, o).ok());
  ASSERT_TRUE(e.trained());
  ASSERT_EQ(e.member_count(), 2u);
  double scale_f, offset_f, scale_g, offset_g;
  EnsTestExpectedScale(xs, f, &scale_f, &offset_f);
  EnsTestExpectedScale(xs, g, &scale_g, &offset_g);
  EXPECT_NEAR(e.member_info(0).scale, scale_f, 1e-9 * scale_f);
  EXPECT_NEAR(e.member_info(0).offset, offset_f, 1e-9 * (1 + std::fabs(offset_f)));
  EXPECT_NEAR(e.member_info(1).scale, scale_g, 1e-9 * scale_g);
  EXPECT_NEAR(e.member_info(1).offset, offset_g, 1e-9 * (1 + std::fabs(offset_g)));

  std::vector<ModelInput> fresh;
  for (int i = 0; i < 7; ++i) fresh.push_back(EnsTestInput(static_cast<float>(x(rng))));
  std::vector<const ModelInput*> in;
  for (const ModelInput& v : fresh) in.push_back(&v);
  const std::vector<double> scores = e.Score(in);
  ASSERT_EQ(scores.size(), fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) {
    const double v = fresh[i].ast[0];
    const double want = ((f.At(v) - offset_f) / scale_f + (g.At(v) - offset_g) / scale_g) / 2;
    EXPECT_NEAR(scores[i], want, 1e-9 * (1 + std::fabs(want))) << "x = " << v;
    // A config scores the same alone as among others: scores of separate calls compare.
    EXPECT_EQ(e.Score({in[i]})[0], scores[i]);
  }
}

TEST(EnsembleModelTest, MembersMustBeTrainedModelsOtherThanEnsembles) {
  EnsembleModel e;
  EXPECT_FALSE(e.AddMember(nullptr, {}).ok());
  EXPECT_THAT(std::string(e.AddMember(std::make_unique<EnsembleModel>(), {}).message()), HasSubstr("cannot be an ensemble"));
  EXPECT_THAT(std::string(e.AddMember(costmodel::MakeXgbOfflineModel(), {}).message()), HasSubstr("must be trained"));
  costmodel::TrainOptions o;
  o.members = 0;
  EXPECT_EQ(e.Train({}, {}, o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(e.SavePayload().ok());
}

TEST(EnsembleModelTest, TrainedMembersAreRecordedAndSaveLoadGivesIdenticalScores) {
  const EnsTestTrained& t = EnsTestTrainedEnsemble();
  ASSERT_TRUE(t.model != nullptr && t.model->trained());
  const auto& e = static_cast<const EnsembleModel&>(*t.model);
  ASSERT_EQ(e.member_count(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e.member_info(i).kind, "xgb");
    EXPECT_EQ(e.member_info(i).seed, 7 + i);
    EXPECT_EQ(e.member_info(i).loss, i % 2 == 0 ? "pairwise" : "regression");
    EXPECT_EQ(e.member_info(i).feature_version, costmodel::kFeatureVersion);
    EXPECT_GT(e.member_info(i).scale, 0);
  }
  auto a = costmodel::ParseArtifact(EnsTestArtifactBytes());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.kind, "ensemble");
  const auto& back = static_cast<const EnsembleModel&>(*a->model);
  ASSERT_EQ(back.member_count(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.member_info(i).seed, e.member_info(i).seed);
    EXPECT_EQ(back.member_info(i).loss, e.member_info(i).loss);
    EXPECT_EQ(back.member_info(i).scale, e.member_info(i).scale);
    EXPECT_EQ(back.member_info(i).offset, e.member_info(i).offset);
  }
  for (const TrainGroup& g : t.test) {
    const std::vector<double> before = t.model->Score(EnsTestPointers(g));
    EXPECT_EQ(a->model->Score(EnsTestPointers(g)), before);
    // The members disagree somewhere, and the ensemble is their scaled mean.
    const auto members = e.MemberScores(EnsTestPointers(g));
    for (size_t j = 0; j < before.size(); ++j) {
      double want = 0;
      for (size_t i = 0; i < 3; ++i) want += (members[i][j] - e.member_info(i).offset) / e.member_info(i).scale;
      EXPECT_NEAR(before[j], want / 3, 1e-9);
    }
  }
}

TEST(EnsembleModelTest, RanksHeldOutTasksBetterThanChance) {
  const EnsTestTrained& t = EnsTestTrainedEnsemble();
  const costmodel::EvalMetrics m = costmodel::EvaluateGroups(*t.model, t.test);
  EXPECT_EQ(m.groups, 2);
  EXPECT_GT(m.pairwise, 0.7);
}

TEST(EnsembleModelTest, CorruptOrWrongVersionMemberDataIsRefusedWithOneLine) {
  const std::string bytes = EnsTestArtifactBytes();
  ASSERT_FALSE(bytes.empty());
  // The second member's xgb payload, its magic broken.
  const size_t first = bytes.find("TUNEXGBO");
  const size_t second = bytes.find("TUNEXGBO", first + 1);
  ASSERT_NE(second, std::string::npos);
  std::string broken = bytes.substr(0, second) + "TUNEXGBX" + bytes.substr(second + 8);
  EnsTestExpectOneLineRefusal(costmodel::ParseArtifact(RewriteArtifact(broken, "TUNEXGBX", "TUNEXGBX")),
                              "member 2 (xgb seed 8): not an xgb model payload: bad magic");
  // A member recorded as trained on other AST features.
  const std::string fv = absl::StrCat("\"feature_version\":", costmodel::kFeatureVersion, ",\"graph_feature_version\":",
                                      costmodel::kGraphFeatureVersion, ",\"kind\":\"xgb\"");
  std::string other = fv;
  other[std::string("\"feature_version\":").size()] = costmodel::kFeatureVersion == 9 ? '8' : '9';
  EnsTestExpectOneLineRefusal(costmodel::ParseArtifact(RewriteArtifact(bytes, fv, other)),
                              "member 1 (xgb seed 7): trained on feature version 9");
  // A scale that is no scale, in the payload's meta.
  auto payload = EnsTestTrainedEnsemble().model->SavePayload();
  ASSERT_TRUE(payload.ok());
  {
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<unsigned char>((*payload)[8 + i])) << (8 * i);
    auto meta = nlohmann::json::parse(payload->substr(16, len));
    meta["members"][1]["scale"] = -0.5;
    const std::string text = meta.dump();
    std::string p = payload->substr(0, 8);
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
    p += text + payload->substr(16 + len);
    EnsembleModel e;
    absl::Status st = e.LoadPayload(p);
    EXPECT_THAT(std::string(st.message()), HasSubstr("member 2 (xgb seed 8): scale -0.5"));
    EXPECT_FALSE(e.trained());
  }
  // The payload itself, truncated at random points: refused, and the model is unchanged.
  std::mt19937_64 rng = TestRng(61);
  EnsembleModel e;
  for (int trial = 0; trial < 8; ++trial) {
    const size_t cut = 1 + rng() % (payload->size() - 1);
    absl::Status st = e.LoadPayload(payload->substr(0, cut));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut;
    EXPECT_EQ(std::string(st.message()).find('\n'), std::string::npos) << st;
    EXPECT_FALSE(e.trained());
  }
  EXPECT_THAT(std::string(e.LoadPayload(*payload + "x").message()), HasSubstr("trailing bytes"));
  EXPECT_TRUE(e.LoadPayload(*payload).ok());
  EXPECT_TRUE(e.trained());
}

TEST(EnsembleModelTest, FineTuneChangesEveryXgbMemberAndKeepsTheShared) {
  const EnsTestTrained& t = EnsTestTrainedEnsemble();
  auto payload = t.model->SavePayload();
  ASSERT_TRUE(payload.ok());
  EnsembleModel copy;
  ASSERT_TRUE(copy.LoadPayload(*payload).ok());
  const TrainGroup& task = t.test[0];
  const std::vector<double> before = copy.Score(EnsTestPointers(task));
  ASSERT_TRUE(copy.FineTune(task, {}).ok());
  const auto members = copy.MemberScores(EnsTestPointers(task));
  const auto shared = static_cast<const EnsembleModel&>(*t.model).MemberScores(EnsTestPointers(task));
  for (size_t i = 0; i < members.size(); ++i) EXPECT_NE(members[i], shared[i]) << "member " << i + 1;
  EXPECT_NE(copy.Score(EnsTestPointers(task)), before);
  EXPECT_EQ(t.model->Score(EnsTestPointers(task)), before);
  // Fine-tuned on the task's own records, it ranks them at least as well as before.
  costmodel::EvalMetrics after = costmodel::EvaluateGroups(copy, {task});
  costmodel::EvalMetrics was = costmodel::EvaluateGroups(*t.model, {task});
  EXPECT_GE(after.pairwise, was.pairwise);

  // Members that cannot be copied or fine-tuned: an error, and the scores stay.
  EnsembleModel fakes;
  ASSERT_TRUE(fakes.AddMember(std::make_unique<EnsTestQuadratic>(1, 2, 0), {}).ok());
  costmodel::TrainOptions o;
  o.members = 0;
  ASSERT_TRUE(fakes.Train({task}, {}, o).ok());
  const std::vector<double> fake_before = fakes.Score(EnsTestPointers(task));
  EXPECT_FALSE(fakes.FineTune(task, {}).ok());
  EXPECT_EQ(fakes.Score(EnsTestPointers(task)), fake_before);
}

}  // namespace
}  // namespace tune::test
