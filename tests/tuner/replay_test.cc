// Tests of replay: the recorded space, the driver, the random baseline and P, and `tune replay`.
#include "tuner/replay.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/fake_strategy.h"
#include "tests/common/measure_cache_fixture.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;
using test::Gzip;
using json = nlohmann::json;

const std::string kTune = std::string(TUNE_BIN_DIR) + "/tune";
constexpr double kInf = std::numeric_limits<double>::infinity();

// A 3 x 4 x 2 space (24 points) with 14 recorded: 3 failures, a tie, and 10 infeasible points.
json ToyCacheJson() {
  json doc = {{"device_name", "Toy GPU"},
              {"kernel_name", "toy"},
              {"tune_params_keys", {"a", "b", "c"}},
              {"tune_params", {{"a", {1, 2, 3}}, {"b", {8, 16, 32, 64}}, {"c", {0, 1}}}},
              {"objective", "time"},
              {"cache", json::object()}};
  const std::vector<int64_t> a = {1, 2, 3}, b = {8, 16, 32, 64}, c = {0, 1};
  // (a, b, c) -> time; "F" marks a failure. Points not listed are infeasible.
  struct Rec {
    int ia, ib, ic;
    double ms;  // < 0: failure
  };
  const std::vector<Rec> recs = {{0, 0, 0, 9.0}, {0, 0, 1, 7.5}, {0, 1, 0, 6.0}, {0, 2, 1, -1},
                                 {0, 3, 0, 5.0}, {1, 0, 0, 4.0}, {1, 1, 1, 3.0}, {1, 2, 0, -1},
                                 {1, 3, 1, 3.0}, {2, 0, 1, 2.5}, {2, 1, 0, 8.0}, {2, 2, 0, 2.0},
                                 {2, 2, 1, -1},  {2, 3, 1, 12.0}};
  for (const Rec& r : recs) {
    std::string key = std::to_string(a[r.ia]) + "," + std::to_string(b[r.ib]) + "," + std::to_string(c[r.ic]);
    json rec = {{"a", a[r.ia]}, {"b", b[r.ib]}, {"c", c[r.ic]}};
    if (r.ms < 0) {
      rec["time"] = "RuntimeFailedConfig";
    } else {
      rec["time"] = r.ms;
      rec["times"] = {r.ms};
    }
    doc["cache"][key] = rec;
  }
  return doc;
}

std::unique_ptr<ReplaySpace> ToySpace(const test::TempDir& dir) {
  std::string path = dir.Join("toy.json");
  test::WriteFileBytes(path, ToyCacheJson().dump());
  auto cache = measure::KernelTunerCache::Load(path);
  EXPECT_TRUE(cache.ok()) << cache.status();
  auto space = ReplaySpace::Create(std::move(*cache));
  EXPECT_TRUE(space.ok()) << space.status();
  return std::move(*space);
}

TEST(ReplaySpaceTest, KnobsConstraintAndMeasure) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  const auto& space = rs->space();
  ASSERT_EQ(space.knobs().size(), 3u);
  EXPECT_EQ(space.knobs()[1].name, "b");
  EXPECT_EQ(space.knobs()[1].options, (std::vector<std::vector<int64_t>>{{8}, {16}, {32}, {64}}));
  EXPECT_EQ(space.Size(), 24u);
  EXPECT_EQ(rs->recorded(), 14u);
  EXPECT_EQ(rs->failed(), 3u);
  EXPECT_DOUBLE_EQ(rs->optimum_ms(), 2.0);
  int valid = 0;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    search::Config c = space.FromIndex(i);
    bool recorded = rs->Find(c) != nullptr;
    EXPECT_EQ(space.IsValid(c), recorded);
    if (!recorded) EXPECT_EQ(space.WhyInvalid(c), "recorded");
    valid += recorded;
  }
  EXPECT_EQ(valid, 14);
  auto ok = rs->Measure({2, 2, 0});
  EXPECT_TRUE(ok.ok);
  EXPECT_DOUBLE_EQ(ok.cost, 2.0e-3);  // seconds
  auto failed = rs->Measure({2, 2, 1});
  EXPECT_FALSE(failed.ok);
  EXPECT_TRUE(std::isinf(failed.cost));
  EXPECT_EQ(rs->sorted_times_ms().front(), 2.0);
  EXPECT_TRUE(std::isinf(rs->sorted_times_ms().back()));
}

TEST(ReplaySpaceTest, NoSuccessfulConfigIsInvalid) {
  test::TempDir dir;
  json doc = ToyCacheJson();
  for (auto& [key, rec] : doc["cache"].items()) rec["time"] = "CompilationFailedConfig";
  std::string path = dir.Join("allfail.json");
  test::WriteFileBytes(path, doc.dump());
  auto cache = measure::KernelTunerCache::Load(path);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto rs = ReplaySpace::Create(std::move(*cache));
  ASSERT_FALSE(rs.ok());
  EXPECT_THAT(std::string(rs.status().message()), HasSubstr("no successful configuration"));
}

TEST(ReplayMetricsTest, RandomBaselineMatchesMonteCarlo) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  const std::vector<double>& times = rs->sorted_times_ms();
  const int n = static_cast<int>(times.size());
  std::mt19937_64 rng(12345);
  constexpr int kTrials = 200000;
  for (int b = 1; b <= n; ++b) {
    double sum = 0;
    std::vector<int> idx(n);
    for (int t = 0; t < kTrials; ++t) {
      for (int i = 0; i < n; ++i) idx[i] = i;
      double best = kInf;
      for (int k = 0; k < b; ++k) {  // partial Fisher-Yates: b draws without replacement
        int j = k + static_cast<int>(search::UniformBelow(rng, n - k));
        std::swap(idx[k], idx[j]);
        best = std::min(best, times[idx[k]]);
      }
      sum += FractionOfOptimum(rs->optimum_ms(), best);
    }
    double exact = RandomBaselineFraction(times, b);
    EXPECT_NEAR(exact, sum / kTrials, 0.004) << "b = " << b;
  }
  // One draw: the plain mean of the fractions (failures count 0).
  double mean = 0;
  for (double t : times) mean += FractionOfOptimum(2.0, t);
  EXPECT_NEAR(RandomBaselineFraction(times, 1), mean / n, 1e-12);
  // b >= N draws everything: the optimum for sure.
  EXPECT_DOUBLE_EQ(RandomBaselineFraction(times, n), 1.0);
  EXPECT_DOUBLE_EQ(RandomBaselineFraction(times, n + 5), 1.0);
  EXPECT_DOUBLE_EQ(RandomBaselineFraction(times, 0), 0.0);
  // b = N - 1 misses exactly one config: the optimum with probability 1/N.
  EXPECT_NEAR(RandomBaselineFraction(times, n - 1), (n - 1.0) / n + (1.0 / n) * (2.0 / 2.5), 1e-12);
}

TEST(ReplayMetricsTest, ScoreAndFraction) {
  EXPECT_DOUBLE_EQ(FractionOfOptimum(2.0, 4.0), 0.5);
  EXPECT_DOUBLE_EQ(FractionOfOptimum(2.0, kInf), 0.0);
  EXPECT_DOUBLE_EQ(MethodologyScore(0.6, 0.6), 0.0);
  EXPECT_DOUBLE_EQ(MethodologyScore(1.0, 0.6), 1.0);
  EXPECT_LT(MethodologyScore(0.5, 0.6), 0.0);
  EXPECT_TRUE(std::isnan(MethodologyScore(1.0, 1.0)));
  EXPECT_EQ(ReplayCheckpoints(400), (std::vector<int>{25, 50, 100, 200, 400}));
  EXPECT_EQ(ReplayCheckpoints(300), (std::vector<int>{25, 50, 100, 200, 300}));
  EXPECT_EQ(ReplayCheckpoints(10), (std::vector<int>{10}));
}

TEST(ReplayDriverTest, GridWithFullBudgetFindsOptimumAndNeverEvaluatesInfeasible) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  ReplayOptions o;
  o.strategy = "grid";
  o.budget = static_cast<int>(rs->recorded());
  auto trace = RunReplay(*rs, o);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->evaluations.size(), rs->recorded());
  EXPECT_EQ(trace->failures, 3);
  EXPECT_DOUBLE_EQ(trace->BestAt(o.budget), rs->optimum_ms());
  EXPECT_DOUBLE_EQ(FractionOfOptimum(rs->optimum_ms(), trace->BestAt(o.budget)), 1.0);
  for (const auto& m : trace->evaluations) EXPECT_NE(rs->Find(m.config), nullptr);
  // A larger budget: the grid runs out, keeping its best.
  o.budget = 100;
  trace = RunReplay(*rs, o);
  ASSERT_TRUE(trace.ok());
  EXPECT_TRUE(trace->exhausted);
  EXPECT_EQ(trace->evaluations.size(), rs->recorded());
  EXPECT_DOUBLE_EQ(trace->BestAt(100), 2.0);
}

TEST(ReplayDriverTest, RandomRunsNeverEvaluateInfeasibleAndFractionInRange) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    ReplayOptions o;
    o.seed = seed;
    o.budget = 9;
    o.batch = 1 + static_cast<int>(seed % 4);
    auto trace = RunReplay(*rs, o);
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_EQ(trace->evaluations.size(), 9u);
    std::set<search::Config> distinct;
    double best = kInf;
    for (size_t i = 0; i < trace->evaluations.size(); ++i) {
      const auto& m = trace->evaluations[i];
      const auto* e = rs->Find(m.config);
      ASSERT_NE(e, nullptr) << "infeasible config evaluated";
      EXPECT_EQ(m.ok, e->ok);
      distinct.insert(m.config);
      if (e->ok) best = std::min(best, e->time_ms);
      EXPECT_DOUBLE_EQ(trace->best_ms[i], best);
      double f = FractionOfOptimum(rs->optimum_ms(), trace->best_ms[i]);
      if (std::isfinite(best)) {
        EXPECT_GT(f, 0.0);
        EXPECT_LE(f, 1.0);
      } else {
        EXPECT_EQ(f, 0.0);
      }
    }
    EXPECT_EQ(distinct.size(), 9u);
    EXPECT_GT(FractionOfOptimum(rs->optimum_ms(), trace->BestAt(9)), 0.0);  // 9 > 3 failures
  }
}

TEST(ReplayDriverTest, RandomStrategyMatchesTheBaseline) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  std::vector<ReplayTrace> runs;
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    ReplayOptions o;
    o.seed = seed;
    o.budget = 6;
    auto trace = RunReplay(*rs, o);
    ASSERT_TRUE(trace.ok());
    runs.push_back(std::move(*trace));
  }
  for (const ReplayCheckpoint& c : SummarizeReplay(*rs, runs, {1, 3, 6})) {
    EXPECT_NEAR(c.mean_fraction, c.random_fraction, 0.02) << "budget " << c.budget;
    EXPECT_NEAR(c.score, 0.0, 0.08) << "budget " << c.budget;
    EXPECT_DOUBLE_EQ(c.min_best_ms, 2.0);
  }
}

using test::RecordingModel;
using test::ScriptedStrategy;

TEST(ReplayDriverTest, BatchesAndCostModelFitBeforeUpdate) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  std::vector<search::Config> script;
  for (uint64_t i = 0; i < rs->space().Size(); ++i) {
    if (rs->space().IsValid(rs->space().FromIndex(i))) script.push_back(rs->space().FromIndex(i));
  }
  std::vector<std::string> log;
  ScriptedStrategy strategy(script, &log);
  RecordingModel model(&log);
  ReplayOptions o;
  o.budget = 10;
  o.batch = 4;
  o.cost_model = &model;
  auto trace = RunReplay(*rs, strategy, o);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(strategy.model(), &model);
  EXPECT_EQ(log, (std::vector<std::string>{"propose 4", "fit 4", "update 4", "propose 4", "fit 8", "update 4",
                                           "propose 2", "fit 10", "update 2"}));
  ASSERT_EQ(model.last_costs().size(), 10u);
  EXPECT_DOUBLE_EQ(model.last_costs()[0], 9.0e-3);  // seconds
  EXPECT_TRUE(std::isinf(model.last_costs()[3]));   // "1,32,1" failed
}

TEST(ReplayDriverTest, ContractViolationsAreErrors) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  std::vector<std::string> log;
  ReplayOptions o;
  o.budget = 5;
  {
    ScriptedStrategy s({{0, 0, 0}, {0, 1, 1}}, &log);  // "1,16,1" is not recorded
    auto trace = RunReplay(*rs, s, o);
    ASSERT_FALSE(trace.ok());
    EXPECT_TRUE(absl::IsInternal(trace.status()));
    EXPECT_THAT(std::string(trace.status().message()), HasSubstr("infeasible"));
  }
  {
    ScriptedStrategy s({{0, 0, 0}, {0, 0, 0}}, &log);
    auto trace = RunReplay(*rs, s, o);
    ASSERT_FALSE(trace.ok());
    EXPECT_THAT(std::string(trace.status().message()), HasSubstr("a second time"));
  }
  o.strategy = "no-such-strategy";
  EXPECT_TRUE(absl::IsInvalidArgument(RunReplay(*rs, o).status()));
}

TEST(ReplayDriverTest, CostModelHook) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  auto bad = CreateReplayCostModel("nonesuch", *rs);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("cost model 'nonesuch'"));
  auto model = CreateReplayCostModel("xgb", *rs, 7);
  ASSERT_TRUE(model.ok()) << model.status();
  ReplayOptions o;
  o.strategy = "random";
  o.budget = 12;
  o.batch = 4;
  o.cost_model = model->get();
  auto trace = RunReplay(*rs, o);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->evaluations.size(), 12u);
  EXPECT_TRUE((*model)->trained());
}

// A budget beyond the recorded configs runs to the space's end: never more evaluations than
// configs, whatever the budget.
TEST(ReplayDriverTest, BudgetBeyondTheSpaceStopsAtItsRecordedConfigs) {
  test::TempDir dir;
  auto rs = ToySpace(dir);
  std::mt19937_64 rng = test::TestRng(7);
  for (const char* strategy : {"random", "grid"}) {
    ReplayOptions o;
    o.strategy = strategy;
    o.budget = static_cast<int>(15 + rng() % (std::numeric_limits<int>::max() - 15));
    o.seed = rng();
    auto trace = RunReplay(*rs, o);
    ASSERT_TRUE(trace.ok()) << trace.status();
    EXPECT_EQ(trace->evaluations.size(), rs->recorded()) << strategy << " budget " << o.budget;
    EXPECT_TRUE(trace->exhausted);
    EXPECT_DOUBLE_EQ(trace->BestAt(o.budget), rs->optimum_ms());
  }
}

TEST(ReplayDriverTest, GridFindsOptimumOfRealConvolution) {
  const std::string path = test::kDataDir + "/convolution_A100.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto cache = measure::KernelTunerCache::Load(path);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto rs = ReplaySpace::Create(std::move(*cache));
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ((*rs)->space().Size(), 10240u);
  ReplayOptions o;
  o.strategy = "grid";
  o.budget = 4362;
  auto trace = RunReplay(**rs, o);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->evaluations.size(), 4362u);
  EXPECT_EQ(trace->failures, 161);
  EXPECT_DOUBLE_EQ(trace->BestAt(4362), (*rs)->optimum_ms());
}

// ---- tune replay ---------------------------------------------------------------------------

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class ReplayCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kTune)) << kTune << " is not built"; }
  test::ProcessResult Tune(std::vector<std::string> args) {
    args.insert(args.begin(), {kTune, "replay"});
    return test::RunProcess(args, dir_.path());
  }
  // Exit code 2, nothing on stdout, exactly one line on stderr containing `needle`.
  void ExpectOneLineError(const test::ProcessResult& r, const std::string& needle) {
    EXPECT_TRUE(r.exited) << r;
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r;
    EXPECT_THAT(r.err, HasSubstr(needle)) << r;
  }
  test::TempDir dir_;
};

TEST_F(ReplayCliTest, PrintsCheckpointTable) {
  std::string path = dir_.Join("toy.json.gz");
  test::WriteFileBytes(path, Gzip(ToyCacheJson().dump()));
  auto r = Tune({path, "--strategy", "random", "--budget", "12", "--runs", "5", "--seed", "3", "--jobs", "2"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(r.out, HasSubstr("24 points, 14 recorded (3 failed), optimum 2.0000 ms"));
  EXPECT_THAT(r.out, HasSubstr("evals  fraction"));
  auto lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.back(), ::testing::StartsWith("   12"));
  // --jobs does not change the results.
  auto r1 = Tune({path, "--budget", "12", "--runs", "5", "--seed", "3"});
  ASSERT_EQ(r1.exit_code, 0) << r1;
  EXPECT_EQ(r1.out, r.out);
  // Grid with the space's size: the optimum, every run.
  auto g = Tune({path, "--strategy", "grid", "--budget", "14", "--runs", "2"});
  ASSERT_EQ(g.exit_code, 0) << g;
  EXPECT_THAT(Lines(g.out).back(), HasSubstr("1.000"));
}

// A cache that marks its failures with time 1e20 (older Kernel Tuner caches) is replayed with
// those configs as failures: counted as failed, never the optimum.
TEST_F(ReplayCliTest, HugeTimesAreCountedAsFailures) {
  json doc = ToyCacheJson();
  for (auto& [key, rec] : doc["cache"].items()) {
    if (rec["time"].is_string()) rec["time"] = 1e20;
  }
  doc["cache"]["3,32,0"]["time"] = 1e20;  // the fastest config (2.0 ms) marked failed too
  std::string path = dir_.Join("marked.json.gz");
  test::WriteFileBytes(path, Gzip(doc.dump()));
  auto r = Tune({path, "--strategy", "grid", "--budget", "14", "--runs", "1"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(r.out, HasSubstr("24 points, 14 recorded (4 failed), optimum 2.5000 ms"));
}

TEST_F(ReplayCliTest, StrategyOptionsApplyAndBadOnesFailWithOneLine) {
  std::string path = dir_.Join("toy.json.gz");
  test::WriteFileBytes(path, Gzip(ToyCacheJson().dump()));
  ExpectOneLineError(Tune({path, "--strategy-option", "no_such=1"}), "unknown strategy option 'no_such'");
  ExpectOneLineError(Tune({path, "--strategy-option", "eps_greedy=2"}), "eps_greedy=2");
  ExpectOneLineError(Tune({path, "--strategy", "bandit", "--strategy-option", "bandit_arms=random,nope"}),
                     "nope");
  // A valid option is taken: a bandit over random search alone runs to the budget.
  auto arms = Tune({path, "--strategy", "bandit", "--budget", "12", "--runs", "3", "--strategy-option",
                    "bandit_arms=random"});
  ASSERT_EQ(arms.exit_code, 0) << arms;
  EXPECT_THAT(Lines(arms.out).back(), ::testing::StartsWith("   12"));
}

TEST_F(ReplayCliTest, TruncatedGzipFailsWithOneLine) {
  std::string gz = Gzip(ToyCacheJson().dump());
  std::string path = dir_.Join("cut.json.gz");
  test::WriteFileBytes(path, gz.substr(0, gz.size() / 2));
  ExpectOneLineError(Tune({path, "--budget", "5", "--runs", "1"}), "truncated gzip");
}

TEST_F(ReplayCliTest, TruncatedRealCacheFailsWithOneLine) {
  const std::string real = test::kDataDir + "/convolution_A100.json.gz";
  if (!std::filesystem::exists(real)) GTEST_SKIP() << real << " is absent";
  std::string bytes = test::ReadFileBytes(real);
  std::string path = dir_.Join("convolution_cut.json.gz");
  test::WriteFileBytes(path, bytes.substr(0, bytes.size() * 2 / 3));
  ExpectOneLineError(Tune({path, "--budget", "5", "--runs", "1"}), "truncated gzip");
}

TEST_F(ReplayCliTest, MalformedJsonFailsWithOneLine) {
  std::string path = dir_.Join("bad.json");
  test::WriteFileBytes(path, "{\"tune_params_keys\": [\"a\"],\n \"cache\": {\n");
  auto r = Tune({path, "--budget", "5", "--runs", "1"});
  ExpectOneLineError(r, "invalid JSON");
  EXPECT_THAT(r.err, HasSubstr(path));
  json doc = ToyCacheJson();
  doc["cache"]["1,8,0"]["a"] = 2;
  test::WriteFileBytes(path, doc.dump());
  ExpectOneLineError(Tune({path, "--runs", "1"}), "but its key says");
  ExpectOneLineError(Tune({dir_.Join("missing.json"), "--runs", "1"}), "missing.json");
}

// `--budget` far beyond a 48-point space: clamped to the recorded configs, in bounded memory (the
// command runs under a 4 GB address-space limit, so a table sized by the budget fails the test
// instead of the machine).
TEST_F(ReplayCliTest, BudgetBeyondTheSpaceIsClampedInBoundedMemory) {
  json doc = {{"device_name", "Grid GPU"}, {"kernel_name", "grid48"}, {"tune_params_keys", {"x", "y"}},
              {"tune_params", {{"x", {1, 2, 3, 4, 5, 6}}, {"y", {1, 2, 3, 4, 5, 6, 7, 8}}}}, {"cache", json::object()}};
  for (int x = 1; x <= 6; ++x) {
    for (int y = 1; y <= 8; ++y) {
      doc["cache"][std::to_string(x) + "," + std::to_string(y)] = {{"x", x}, {"y", y}, {"time", 0.5 * x + y}};
    }
  }
  std::string path = dir_.Join("grid48.json");
  test::WriteFileBytes(path, doc.dump());
  std::mt19937_64 rng = test::TestRng(8);
  const int64_t lo = int64_t{1} << 30, hi = std::numeric_limits<int>::max();
  for (int64_t budget : {int64_t{2000000000}, lo + static_cast<int64_t>(rng() % (hi - lo + 1))}) {
    auto r = test::RunProcess({"/bin/sh", "-c",
                               "ulimit -v 4000000 && exec \"$0\" replay \"$1\" --budget \"$2\" --runs 3 --jobs 2",
                               kTune, path, std::to_string(budget)},
                              dir_.path(), 120);
    ASSERT_TRUE(r.exited && r.exit_code == 0) << "budget " << budget << " " << r;
    EXPECT_THAT(r.out, HasSubstr("budget " + std::to_string(budget) + " is more than the 48 recorded configs: clamped to 48"));
    auto lines = Lines(r.out);
    ASSERT_FALSE(lines.empty());
    EXPECT_THAT(lines.back(), ::testing::StartsWith("   48"));
    EXPECT_THAT(lines.back(), HasSubstr("1.000"));
  }
}

TEST_F(ReplayCliTest, NumberBeyondDoubleRangeFailsWithOneLine) {
  std::string text = ToyCacheJson().dump();
  const std::string time = "\"time\":2.0";
  ASSERT_NE(text.find(time), std::string::npos) << text;
  text.replace(text.find(time), time.size(), "\"time\":1e400");
  std::string path = dir_.Join("overflow.json");
  test::WriteFileBytes(path, text);
  ExpectOneLineError(Tune({path, "--runs", "1"}), "number overflow parsing '1e400'");
  path = dir_.Join("overflow.json.gz");
  test::WriteFileBytes(path, Gzip(text));
  ExpectOneLineError(Tune({path, "--runs", "1"}), "number overflow parsing '1e400'");
}

TEST_F(ReplayCliTest, BadFlagsFailWithOneLine) {
  std::string path = dir_.Join("toy.json");
  test::WriteFileBytes(path, ToyCacheJson().dump());
  ExpectOneLineError(Tune({path, "--budget", "0"}), "budget");
  ExpectOneLineError(Tune({path, "--runs", "x"}), "runs");
  ExpectOneLineError(Tune({path, "--strategy", "nonesuch"}), "unknown search strategy 'nonesuch'");
  ExpectOneLineError(Tune({path, "--cost-model", "knob"}), "cost model 'knob'");
  ExpectOneLineError(Tune({"--budget", "5"}), "cache");
}

}  // namespace
}  // namespace tune::tuner
