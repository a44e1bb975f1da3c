// Tests of tuning from a pretrained cost model: better first batches, the guard in the run record, --cost-model FILE.tcm.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/ir/template.h"
#include "costmodel/artifact.h"
#include "costmodel/cost_model_adapters.h"
#include "costmodel/offline_model.h"
#include "costmodel/xgb_model.h"
#include "dataset/record_database.h"
#include "gtest/gtest.h"
#include "measure/measure_result.h"
#include "measure/target.h"
#include "measure/task.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"
#include "tests/costmodel/analytic_gemm.h"
#include "tests/costmodel/teacher_model.h"
#include "tuner/tuner.h"
#include "tuner/tuning_flags.h"

namespace tune::tuner {
namespace {

/// A GEMM task of a real template whose measurements are its analytic latency (no compiling):
/// the space has a known-best region that a model trained on another shape can know.
class PtgAnalyticTask : public measure::Task {
 public:
  explicit PtgAnalyticTask(const std::string& shape) : tmpl_(::tune::test::MakeTemplate(codegen::OpKind::kMatmul, shape)) {
    keys_.workload_key = tmpl_->workload().Key();
    keys_.op = "matmul";
    keys_.shape_json = "{}";
    keys_.flops = tmpl_->workload().Flops();
    keys_.template_version = tmpl_->version();
  }
  const measure::TaskKeys& keys() const override { return keys_; }
  const search::ConfigSpace& space() const override { return tmpl_->space(); }
  std::optional<search::Config> DefaultConfig() const override { return std::nullopt; }
  const codegen::Template* tmpl() const override { return tmpl_.get(); }
  std::vector<measure::MeasureResult> Measure(const std::vector<search::Config>& configs,
                                              const measure::MeasureProtocol&) override {
    std::vector<measure::MeasureResult> out;
    for (const search::Config& c : configs) {
      measure::MeasureResult r;
      r.status = measure::MeasureStatus::kOk;
      r.costs_s = {costmodel::test::AnalyticGemmSeconds(*tmpl_, c)};
      r.number = 1;
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  std::unique_ptr<codegen::Template> tmpl_;
  measure::TaskKeys keys_;
};

/// 300 configs of a 96x64x128 GEMM with their analytic latencies, as one training group.
costmodel::TrainGroup PtgTrainingGroup(costmodel::InputNeeds needs) {
  auto tmpl = ::tune::test::MakeTemplate(codegen::OpKind::kMatmul, "96,64,128");
  costmodel::TrainGroup g;
  g.name = "teacher";
  std::mt19937_64 rng = ::tune::test::TestRng(11);
  std::set<search::Config> seen;
  for (int tries = 0; g.inputs.size() < 300 && tries < 100000; ++tries) {
    auto c = tmpl->space().Sample(rng);
    if (!c.ok() || !seen.insert(*c).second) continue;
    auto in = costmodel::MakeModelInput(*tmpl, *c, needs);
    if (!in.ok()) continue;
    g.inputs.push_back(*std::move(in));
    g.latencies_s.push_back(costmodel::test::AnalyticGemmSeconds(*tmpl, *c));
  }
  return g;
}

std::shared_ptr<const costmodel::OfflineModel> PtgTeacher(double sign) {
  auto model = std::make_shared<costmodel::test::TeacherModel>(sign);
  EXPECT_TRUE(model->Train({PtgTrainingGroup(model->needs())}, {}, {}).ok());
  return model;
}

struct PtgRun {
  TaskOutcome outcome;
  std::vector<double> first_batch;  // latencies of the first batch, in order [s]
  std::string run_message;
};

/// Tunes one 64x128x64 GEMM with sa from seed `seed`, with `pretrained` (may be null).
PtgRun PtgTune(std::shared_ptr<const costmodel::OfflineModel> pretrained, uint64_t seed, int trials) {
  PtgRun out;
  auto db = dataset::RecordDatabase::Open(":memory:");
  EXPECT_TRUE(db.ok()) << db.status();
  PtgAnalyticTask task("64,128,64");
  TuneOptions o;
  o.strategy = "sa";
  o.seed = seed;
  o.batch = 8;
  o.trials_per_task = trials;
  o.finalists = 0;
  o.transfer = false;
  o.pretrained = std::move(pretrained);
  o.pretrained_note = o.pretrained ? "cost model teacher.tcm: test-teacher" : "";
  Tuner tuner(db->get(), measure::Target::HostCpu(1), measure::RunnerFactory(), o);
  auto outcomes = tuner.Run(std::vector<LoopTask>{{TuneTask{"mm", task.tmpl()->workload(), 1}, &task}});
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  if (!outcomes.ok()) return out;
  out.outcome = outcomes->at(0);
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  auto records = (*db)->Records(tasks->at(0).id, targets->at(0).id);
  for (size_t i = 0; i < records->size() && i < 8; ++i) out.first_batch.push_back(records->at(i).result.Median());
  auto runs = (*db)->Runs();
  out.run_message = runs->back().message;
  return out;
}

double PtgMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? INFINITY : v[v.size() / 2];
}

TEST(PretrainedTuningTest, FirstBatchWithAPretrainedModelIsBetterThanWithout) {
  auto teacher = PtgTeacher(1);
  int better_best = 0, better_median = 0;
  double sum_with = 0, sum_without = 0;
  const int kSeeds = 5;
  for (int s = 0; s < kSeeds; ++s) {
    const uint64_t seed = ::tune::test::kTestSeed + 100 * s;
    PtgRun with = PtgTune(teacher, seed, 8);
    PtgRun without = PtgTune(nullptr, seed, 8);
    ASSERT_EQ(with.first_batch.size(), 8u);
    ASSERT_EQ(without.first_batch.size(), 8u);
    EXPECT_NE(with.first_batch, without.first_batch);
    const double best_with = *std::min_element(with.first_batch.begin(), with.first_batch.end());
    const double best_without = *std::min_element(without.first_batch.begin(), without.first_batch.end());
    better_best += best_with < best_without;
    better_median += PtgMedian(with.first_batch) < PtgMedian(without.first_batch);
    sum_with += best_with;
    sum_without += best_without;
    // The run record names the pretrained model.
    EXPECT_NE(with.run_message.find("cost model teacher.tcm"), std::string::npos) << with.run_message;
    EXPECT_EQ(without.run_message, "");
  }
  std::printf("first batch of 8 (sa), best latency, mean over %d seeds: %.3f ms with the pretrained model, %.3f ms "
              "without\n", kSeeds, 1e3 * sum_with / kSeeds, 1e3 * sum_without / kSeeds);
  EXPECT_GE(better_best, 4) << "best of the first batch: with " << sum_with / kSeeds << " s, without "
                            << sum_without / kSeeds << " s (mean over seeds)";
  EXPECT_GE(better_median, 4);
  EXPECT_LT(sum_with, sum_without);
}

TEST(PretrainedTuningTest, GuardFallsBackOnAnInvertedModelAndTheRunRecordSaysSo) {
  PtgRun inverted = PtgTune(PtgTeacher(-1), ::tune::test::kTestSeed, 24);
  EXPECT_NE(inverted.outcome.model_note.find("pretrained test-teacher model dropped"), std::string::npos)
      << inverted.outcome.model_note;
  EXPECT_NE(inverted.run_message.find("mm: pretrained test-teacher model dropped"), std::string::npos)
      << inverted.run_message;
  EXPECT_EQ(inverted.outcome.trials, 24);

  PtgRun good = PtgTune(PtgTeacher(1), ::tune::test::kTestSeed, 24);
  EXPECT_EQ(good.outcome.model_note, "");
  EXPECT_EQ(good.run_message.find("dropped"), std::string::npos) << good.run_message;
}

TEST(PretrainedTuningTest, StrategiesWithoutAModelIgnoreIt) {
  // random ranks nothing: the pretrained model changes none of its proposals.
  auto run = [](std::shared_ptr<const costmodel::OfflineModel> m) {
    auto db = dataset::RecordDatabase::Open(":memory:");
    PtgAnalyticTask task("64,128,64");
    TuneOptions o;
    o.strategy = "random";
    o.seed = ::tune::test::kTestSeed + 5;
    o.trials_per_task = 8;
    o.finalists = 0;
    o.pretrained = std::move(m);
    Tuner tuner(db->get(), measure::Target::HostCpu(1), measure::RunnerFactory(), o);
    auto out = tuner.Run(std::vector<LoopTask>{{TuneTask{"mm", task.tmpl()->workload(), 1}, &task}});
    EXPECT_TRUE(out.ok());
    return out.ok() ? out->at(0).best_config : "";
  };
  EXPECT_EQ(run(PtgTeacher(1)), run(nullptr));
}

// --- the command line -------------------------------------------------------------------------

const std::string kPtgTune = std::string(TUNE_BIN_DIR) + "/tune";

TEST(PretrainedTuningCliTest, CorruptOrMissingArtifactExitsTwoWithoutWritingTheDatabase) {
  ASSERT_TRUE(std::filesystem::exists(kPtgTune)) << kPtgTune << " is not built";
  ::tune::test::TempDir dir;
  std::mt19937_64 rng = ::tune::test::TestRng(21);
  {
    std::ofstream bad(dir.Join("bad.tcm"), std::ios::binary);
    bad << "TUNETCM";
    for (int i = 0; i < 200; ++i) bad << static_cast<char>(rng() & 0xff);
  }
  for (const std::string& file : {std::string("bad.tcm"), std::string("missing.tcm")}) {
    auto r = ::tune::test::RunProcess({kPtgTune, "op", "matmul", "--shape", "32,32,32", "--trials", "2", "--strategy",
                                       "sa", "--cost-model", dir.Join(file), "--db", dir.Join("t.db")},
                                      dir.path());
    EXPECT_TRUE(r.exited) << r;
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_NE(r.err.find("--cost-model " + dir.Join(file)), std::string::npos) << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
    EXPECT_FALSE(std::filesystem::exists(dir.Join("t.db"))) << file;
  }
}

TEST(PretrainedTuningCliTest, ArtifactOfAnotherTargetFamilyExitsTwo) {
  ASSERT_TRUE(std::filesystem::exists(kPtgTune)) << kPtgTune << " is not built";
  auto model = costmodel::CreateOfflineModel("xgb");
  if (!model.ok() || *model == nullptr) GTEST_SKIP() << "this build has no offline xgb model";
  ASSERT_TRUE((*model)->Train({PtgTrainingGroup((*model)->needs())}, {}, {}).ok());
  ::tune::test::TempDir dir;
  costmodel::ArtifactInfo info;
  info.kind = "xgb";
  info.target_family = "cuda";
  info.target_key = "cuda/test";
  ASSERT_TRUE(costmodel::WriteArtifactFile(dir.Join("gpu.tcm"), info, **model).ok());
  auto r = ::tune::test::RunProcess({kPtgTune, "op", "matmul", "--shape", "32,32,32", "--trials", "2", "--strategy", "sa",
                                     "--cost-model", dir.Join("gpu.tcm"), "--db", dir.Join("t.db")},
                                    dir.path());
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_NE(r.err.find("does not apply to a llvm target"), std::string::npos) << r;
  EXPECT_FALSE(std::filesystem::exists(dir.Join("t.db")));
  // The same artifact marked llvm is taken, and the run record names it.
  info.target_family = "llvm";
  info.target_key = "llvm/test";
  ASSERT_TRUE(costmodel::WriteArtifactFile(dir.Join("cpu.tcm"), info, **model).ok());
  TuningFlags flags;
  flags.options.strategy = "sa";
  flags.options.cost_model = dir.Join("cpu.tcm");
  flags.target_family = "llvm";
  auto o = ToTuneOptions(flags);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_NE(o->pretrained, nullptr);
  EXPECT_EQ(o->cost_model, "auto");
  EXPECT_NE(o->pretrained_note.find("cpu.tcm: xgb"), std::string::npos) << o->pretrained_note;
  EXPECT_EQ(o->pretrained_note.find("not used"), std::string::npos) << o->pretrained_note;
  // With a strategy that ranks nothing, the note says it is not used.
  flags.options.strategy = "random";
  auto unused = ToTuneOptions(flags);
  ASSERT_TRUE(unused.ok()) << unused.status();
  EXPECT_NE(unused->pretrained_note.find("(not used: strategy random ranks no candidates"), std::string::npos)
      << unused->pretrained_note;
  // --cost-model-option settings reach the pretrained model's options; a bad one is refused.
  flags.options.strategy = "sa";
  flags.cost_model_options = {"weight_half_life=48", "fine_tune=0"};
  auto tuned = ToTuneOptions(flags);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->pretrained_options.weight_half_life, 48);
  EXPECT_FALSE(tuned->pretrained_options.fine_tune);
  flags.cost_model_options = {"weight_halflife=48"};
  auto bad = ToTuneOptions(flags);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown cost model option 'weight_halflife'"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace tune::tuner
