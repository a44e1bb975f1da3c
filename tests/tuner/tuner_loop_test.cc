// Tests of the tuning loop on a caller-made task that compiles nothing: the order of its calls,
// given configs, resume, the strategy's contract and cost-model failures.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/target.h"
#include "search/space.h"
#include "tests/common/fake_strategy.h"
#include "tests/common/fake_task.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_space.h"
#include "tuner/tuner.h"

namespace tune::tuner {
namespace {

using search::Config;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::FakeTask;
using test::RecordingModel;
using test::ScriptedStrategy;

const std::string kTargetKey = measure::Target::HostCpu(1).Key();

TuneOptions LoopOptions(int trials, int batch) {
  TuneOptions o;
  o.trials_per_task = trials;
  o.batch = batch;
  o.seed = test::kTestSeed;
  o.finalists = 0;  // record counts below are exact
  o.command = "tuner_loop_test";
  return o;
}

// The 27 valid configs of the fake task's space, in index order.
std::vector<Config> Valid() {
  const std::set<Config> all = test::AllValid(test::ConstrainedSpace());
  return std::vector<Config>(all.begin(), all.end());
}

// `configs` without the ones in `drop`, in order.
std::vector<Config> Without(std::vector<Config> configs, const std::vector<Config>& drop) {
  std::erase_if(configs, [&](const Config& c) { return std::find(drop.begin(), drop.end(), c) != drop.end(); });
  return configs;
}

// Tunes the one caller-made `task` with `strategy` and `model` (either may be null).
absl::StatusOr<TaskOutcome> RunOne(dataset::RecordDatabase* db, FakeTask& task, search::SearchStrategy* strategy,
                                   search::CostModel* model, const TuneOptions& options) {
  Tuner tuner(db, measure::Target::HostCpu(1), measure::RunnerFactory(), options);
  absl::StatusOr<std::vector<TaskOutcome>> outcomes =
      tuner.Run(std::vector<LoopTask>{{TuneTask{"fake", codegen::Workload{}, 1}, &task, strategy, model}});
  if (!outcomes.ok()) return outcomes.status();
  EXPECT_EQ(outcomes->size(), 1u);
  return outcomes->at(0);
}

int64_t RecordCount(const dataset::RecordDatabase& db) {
  auto counts = db.StatusCounts();
  EXPECT_TRUE(counts.ok()) << counts.status();
  int64_t n = 0;
  for (const auto& [status, count] : *counts) n += count;
  return n;
}

// The default schedule first, then the given configs in a batch of their own, then the
// strategy's batches; each batch is in the database before the model is fitted and the
// strategy updated, and the given results teach both.
TEST(TunerLoopTest, GivenConfigsThenStrategyEachBatchCommittedBeforeLearning) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  std::vector<std::string> log;
  FakeTask task(&log);
  task.on_commit = [&] { log.push_back("rows " + std::to_string(RecordCount(*db))); };
  const std::vector<Config> valid = Valid();
  const std::vector<Config> given = {valid[5], valid[2]};
  const std::vector<Config> script = Without(valid, given);
  ScriptedStrategy strategy(script, &log);
  RecordingModel model(&log);
  TuneOptions options = LoopOptions(/*trials=*/10, /*batch=*/4);
  for (const Config& c : given) options.given_configs.push_back(task.space().ToJson(c));

  absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, &model, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(log, (std::vector<std::string>{"measure 1", "commit", "rows 1",                         // default
                                           "measure 2", "commit", "rows 3", "fit 2", "update 2",  // given
                                           "propose 4", "measure 4", "commit", "rows 7", "fit 6", "update 4",
                                           "propose 4", "measure 4", "commit", "rows 11", "fit 10", "update 4"}));
  EXPECT_EQ(strategy.model(), &model);
  const Config def = *task.DefaultConfig();
  EXPECT_EQ(task.measured(), (std::vector<Config>{def, valid[5], valid[2], script[0], script[1], script[2], script[3],
                                                  script[4], script[5], script[6], script[7]}));
  ASSERT_EQ(strategy.updates().size(), 10u);
  EXPECT_EQ(strategy.updates()[0].config, valid[5]);
  EXPECT_DOUBLE_EQ(strategy.updates()[0].cost, test::LinearCost(valid[5]));
  EXPECT_TRUE(strategy.updates()[0].ok);
  ASSERT_EQ(model.last_costs().size(), 10u);
  EXPECT_DOUBLE_EQ(model.last_costs()[1], test::LinearCost(valid[2]));

  EXPECT_EQ(outcome->trials, 10);
  EXPECT_EQ(outcome->measured_now, 10);
  EXPECT_EQ(outcome->failed, 0);
  EXPECT_FALSE(outcome->exhausted);
  EXPECT_EQ(outcome->model_errors, 0);
  EXPECT_DOUBLE_EQ(outcome->default_s, test::LinearCost(def));
  double best = INFINITY;
  Config best_config;
  for (size_t i = 1; i < task.measured().size(); ++i) {
    if (test::LinearCost(task.measured()[i]) < best) {
      best = test::LinearCost(task.measured()[i]);
      best_config = task.measured()[i];
    }
  }
  EXPECT_DOUBLE_EQ(outcome->best_s, best);
  EXPECT_EQ(outcome->best_config, task.space().ToJson(best_config));

  const std::vector<dataset::Record> records = test::RecordsOf(*db, outcome->task_id, kTargetKey);
  ASSERT_EQ(records.size(), 11u);
  EXPECT_EQ(records[0].strategy, "default");
  EXPECT_EQ(records[1].strategy, "given");
  EXPECT_EQ(records[1].config_json, task.space().ToJson(valid[5]));
  EXPECT_EQ(records[2].strategy, "given");
  EXPECT_EQ(records[2].config_json, task.space().ToJson(valid[2]));
  EXPECT_EQ(test::CountStrategy(records, "scripted"), 8);
  EXPECT_EQ(records[0].result.costs_s, std::vector<double>{test::LinearCost(def)});
}

// A strategy that runs out of configs ends its task early, marked exhausted; failing configs
// are records that count against the budget and reach the strategy as failures.
TEST(TunerLoopTest, StrategyThatRunsOutExhaustsTheTask) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  const std::vector<Config> valid = Valid();
  std::vector<std::string> log;
  FakeTask task(&log, [&](const Config& c) { return c == valid[1] ? INFINITY : test::LinearCost(c); });
  ScriptedStrategy strategy({valid[0], valid[1], valid[2], valid[3], valid[4]}, &log);

  absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, nullptr, LoopOptions(10, 4));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->exhausted);
  EXPECT_EQ(outcome->trials, 5);
  EXPECT_EQ(outcome->failed, 1);
  EXPECT_EQ(log, (std::vector<std::string>{"measure 1", "commit", "propose 4", "measure 4", "commit", "update 4",
                                           "propose 4", "measure 1", "commit", "update 1", "propose 4"}));
  ASSERT_EQ(strategy.updates().size(), 5u);
  EXPECT_FALSE(strategy.updates()[1].ok);
  EXPECT_TRUE(std::isinf(strategy.updates()[1].cost));
  const std::vector<dataset::Record> records = test::RecordsOf(*db, outcome->task_id, kTargetKey);
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[2].result.status, measure::MeasureStatus::kRuntimeError);
  EXPECT_EQ(records[2].result.message, "fake failure");
}

// The default schedule's record stands in for the best where it is faster, unless the default
// config was a finalist and lost side by side: then the finalists' verdict stands, in the run's
// outcome as in the database's best.
TEST(TunerLoopTest, ADefaultConfigThatLostAmongTheFinalistsIsNotThePick) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  const std::vector<Config> valid = Valid();
  const Config x = valid[0], d = valid.back();  // d: the fake task's default schedule
  std::map<Config, int> calls;
  FakeTask task(nullptr, [&](const Config& c) {
    const int n = ++calls[c];
    if (c == d) return n == 1 ? 1.0 : n == 2 ? 1.2 : 3.0;  // the default schedule, the search, side by side
    if (c == x) return n == 1 ? 1.1 : 2.0;                  // the search, side by side
    return 5.0;
  });
  ScriptedStrategy strategy({x, d, valid[2], valid[3]}, nullptr);
  TuneOptions o = LoopOptions(4, 4);
  o.finalists = 2;
  absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, nullptr, o);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(calls[d], 3) << "the default config is measured as the default, in the search and as a finalist";
  EXPECT_EQ(outcome->best_config, task.space().ToJson(x));
  EXPECT_DOUBLE_EQ(outcome->best_s, 1.1);
  const std::vector<dataset::Record> records = test::RecordsOf(*db, outcome->task_id, kTargetKey);
  ASSERT_FALSE(records.empty());
  auto best = db->Best(outcome->task_id, records[0].target_id);
  ASSERT_TRUE(best.ok() && best->size() == 1u);
  EXPECT_EQ((*best)[0].config_json, outcome->best_config);
}

// Resumed, the recorded trials count against the budget and teach the model and the strategy
// before anything is proposed; the default schedule and recorded given configs are not
// measured again.
TEST(TunerLoopTest, ResumeCountsRecordedTrialsAndMeasuresOnlyNewConfigs) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  const std::vector<Config> valid = Valid();
  {
    FakeTask task;
    ScriptedStrategy strategy(Without(valid, {valid[3]}), nullptr);
    TuneOptions options = LoopOptions(/*trials=*/4, /*batch=*/2);
    options.given_configs = {task.space().ToJson(valid[3])};
    absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, nullptr, options);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(task.measured(), (std::vector<Config>{*task.DefaultConfig(), valid[3], valid[0], valid[1], valid[2]}));
  }
  std::vector<std::string> log;
  FakeTask task(&log);
  ScriptedStrategy strategy({valid[5], valid[6], valid[7]}, &log);
  RecordingModel model(&log);
  TuneOptions options = LoopOptions(/*trials=*/7, /*batch=*/2);
  options.resume = true;
  options.given_configs = {task.space().ToJson(valid[3]), task.space().ToJson(valid[4])};
  absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, &model, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(log, (std::vector<std::string>{"fit 4", "update 4",                         // recorded
                                           "measure 1", "commit", "fit 5", "update 1",  // given valid[4]
                                           "propose 2", "measure 2", "commit", "fit 7", "update 2"}));
  EXPECT_EQ(task.measured(), (std::vector<Config>{valid[4], valid[5], valid[6]}));
  EXPECT_EQ(outcome->trials, 7);
  EXPECT_EQ(outcome->measured_now, 3);
  EXPECT_DOUBLE_EQ(outcome->default_s, test::LinearCost(*task.DefaultConfig())) << "the recorded default is reused";
  const std::vector<dataset::Record> records = test::RecordsOf(*db, outcome->task_id, kTargetKey);
  EXPECT_EQ(records.size(), 8u);
  EXPECT_EQ(test::CountStrategy(records, "default"), 1);
  EXPECT_EQ(test::CountStrategy(records, "given"), 2);
}

// A strategy that proposes an infeasible config, one proposed before (in the batch or an
// earlier one), or more configs than asked breaks its contract: the run fails with Internal
// naming the strategy, and the offending batch is not measured.
TEST(TunerLoopTest, StrategyContractViolationsAreInternalErrors) {
  const std::vector<Config> valid = Valid();
  const Config infeasible = {0, 0, 0};  // inner tiles 12 x 8
  ASSERT_FALSE(test::ConstrainedSpace().IsValid(infeasible));
  struct Case {
    std::string what;
    std::vector<Config> script;
    int overshoot;
    std::string message;
    size_t measured;  // configs measured before the error, the default schedule included
  };
  const std::vector<Case> cases = {
      {"infeasible", {valid[0], infeasible}, 0, "proposed the infeasible config", 1},
      {"repeat in a batch", {valid[0], valid[0]}, 0, "a second time", 1},
      {"repeat of a measured config", {valid[0], valid[1], valid[2], valid[0]}, 0, "a second time", 3},
      {"more than asked", valid, 1, "proposed 3 configs when asked for 2", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto db = test::OpenTestDb();
    ASSERT_NE(db, nullptr);
    FakeTask task;
    ScriptedStrategy strategy(c.script, nullptr);
    strategy.overshoot = c.overshoot;
    absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, nullptr, LoopOptions(8, 2));
    ASSERT_FALSE(outcome.ok());
    EXPECT_TRUE(absl::IsInternal(outcome.status())) << outcome.status();
    EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("strategy 'scripted'"));
    EXPECT_THAT(std::string(outcome.status().message()), HasSubstr(c.message));
    EXPECT_EQ(task.measured().size(), c.measured);
    EXPECT_EQ(RecordCount(*db), static_cast<int64_t>(c.measured));
  }
}

// A cost model whose Fit fails does not stop the run: the search goes on and every failed fit
// is counted. A task with no ok result yet is not fitted at all.
TEST(TunerLoopTest, FailingCostModelFitIsCountedAndTheRunGoesOn) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  const std::vector<Config> valid = Valid();
  std::vector<std::string> log;
  FakeTask task(&log);
  ScriptedStrategy strategy(valid, &log);
  RecordingModel model(&log, /*fail_fits=*/true);
  absl::StatusOr<TaskOutcome> outcome = RunOne(db.get(), task, &strategy, &model, LoopOptions(8, 4));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->model_errors, 2);
  EXPECT_EQ(outcome->trials, 8);
  EXPECT_FALSE(model.trained());
  EXPECT_EQ(log, (std::vector<std::string>{"measure 1", "commit", "propose 4", "measure 4", "commit", "fit 4",
                                           "update 4", "propose 4", "measure 4", "commit", "fit 8", "update 4"}));

  std::vector<std::string> failing_log;
  FakeTask failing(&failing_log, [](const Config&) { return INFINITY; });
  ScriptedStrategy failing_strategy(valid, nullptr);
  RecordingModel unused(&failing_log, /*fail_fits=*/true);
  outcome = RunOne(db.get(), failing, &failing_strategy, &unused, LoopOptions(4, 4));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->model_errors, 0);
  EXPECT_EQ(outcome->failed, 4);
  EXPECT_TRUE(std::isinf(outcome->best_s));
  EXPECT_THAT(failing_log, ElementsAre("measure 1", "commit", "measure 4", "commit"));
}

}  // namespace
}  // namespace tune::tuner
