// Tests of the tuning loop: failing kernels become records, budgets, determinism and resume.
#include "tuner/tuner.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <algorithm>
#include <set>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/ir/template.h"
#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/builder.h"
#include "measure/local_runner.h"
#include "search/auto_strategy.h"
#include "tests/common/temp_dir.h"
#include "tests/common/fast_tune_options.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_template.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;

constexpr char kDefault[] = "default";

TuneTask SmallTask(const std::string& shape = "16,32,24") {
  return TuneTask{"mm" + shape, test::ToyWorkload(codegen::OpKind::kMatmul, shape), 1};
}

// A quick measurement protocol: candidates are tiny and timings are not under test.
// (The tests count records by the strategy that proposed them; finalists have their own test.)
TuneOptions FastOptions(int trials, int batch, uint64_t seed = test::kTestSeed) {
  return test::FastTuneOptions(trials, batch, "tuner_test", seed);
}

// FastOptions that continue from the records already in the database (--resume).
TuneOptions ResumeOptions(int trials, int batch) {
  TuneOptions o = FastOptions(trials, batch);
  o.resume = true;
  return o;
}

// All records of one task on the host target, oldest first.
std::vector<dataset::Record> RecordsOf(dataset::RecordDatabase& db, int64_t task_id) {
  return test::RecordsOf(db, task_id, measure::Target::HostCpu(1).Key());
}

std::vector<TaskOutcome> RunTuner(dataset::RecordDatabase* db, const std::vector<TuneTask>& tasks,
                                  const TuneOptions& options, measure::RunnerFactory runners = measure::LocalRunner::Factory(1)) {
  Tuner tuner(db, measure::Target::HostCpu(1), std::move(runners), options);
  auto outcomes = tuner.Run(tasks);
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  if (!outcomes.ok()) return {};
  EXPECT_EQ(outcomes->size(), tasks.size());
  return *outcomes;
}

// config_json of every record not made by the default schedule, with how often each occurs.
std::map<std::string, int> SearchConfigs(const std::vector<dataset::Record>& records) {
  std::map<std::string, int> configs;
  for (const auto& r : records) {
    if (r.strategy != kDefault) ++configs[r.config_json];
  }
  return configs;
}

// ---------------------------------------------------------------------------------------------
// Fault injection: a loader that crashes or hangs chosen kernels. It runs in LocalRunner's child
// processes, so its call counter and what it saw live in memory shared with this process.

struct FaultPlan {
  std::atomic<int> loads{0};  // loader calls so far, over all children
  int crash_at = -1;          // the call that gets a segfaulting kernel
  int hang_at = -1;           // the call that gets a kernel that never returns
  char crashed_symbol[256] = {};
  char hung_symbol[256] = {};
};

void Segfaults(float* const*) {
  volatile int* volatile null = nullptr;  // volatile: the store happens and faults
  *null = 1;
}

void Spins(float* const*) {
  volatile bool spin = true;
  while (spin) {
  }
}

class SharedFaultPlan {
 public:
  SharedFaultPlan() {
    void* mem = ::mmap(nullptr, sizeof(FaultPlan), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      ADD_FAILURE() << "mmap failed";
      return;
    }
    plan_ = new (mem) FaultPlan();
  }
  ~SharedFaultPlan() {
    if (plan_ != nullptr) {
      plan_->~FaultPlan();
      ::munmap(plan_, sizeof(FaultPlan));
    }
  }
  FaultPlan* get() const { return plan_; }

 private:
  FaultPlan* plan_ = nullptr;
};

measure::LocalRunner::KernelLoader FaultyLoader(FaultPlan* plan) {
  measure::LocalRunner::KernelLoader real = measure::LocalRunner::DefaultLoader();
  return [plan, real](const codegen::CompiledKernel& kernel) -> absl::StatusOr<codegen::KernelFn> {
    const int call = plan->loads.fetch_add(1);
    if (call == plan->crash_at) {
      std::strncpy(plan->crashed_symbol, kernel.symbol.c_str(), sizeof(plan->crashed_symbol) - 1);
      return &Segfaults;
    }
    if (call == plan->hang_at) {
      std::strncpy(plan->hung_symbol, kernel.symbol.c_str(), sizeof(plan->hung_symbol) - 1);
      return &Spins;
    }
    return real(kernel);
  };
}

measure::RunnerFactory FaultyRunnerFactory(FaultPlan* plan) {
  return [plan](const measure::MeasureProtocol& protocol) -> std::unique_ptr<measure::Runner> {
    measure::LocalRunnerOptions o;
    o.protocol = protocol;
    o.threads = 1;
    return std::make_unique<measure::LocalRunner>(o, FaultyLoader(plan));
  };
}

std::string SymbolOf(const codegen::Workload& workload, uint64_t config_index) {
  auto tmpl = test::MakeTemplate(workload);
  return tmpl == nullptr ? "" : measure::Builder::KernelName(*tmpl, tmpl->space().FromIndex(config_index));
}

TEST(TunerTest, CrashingAndHangingKernelsCostOneRecordEach) {
  SharedFaultPlan shared;
  FaultPlan* plan = shared.get();
  ASSERT_NE(plan, nullptr);
  // Loader call 0 is the default schedule; calls 1, 2, 3 are the 1st, 2nd and 3rd candidates.
  plan->crash_at = 2;
  plan->hang_at = 3;

  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/8, /*batch=*/4);
  options.protocol.timeout_s = 2;  // what the spinning kernel costs
  TuneTask task = SmallTask();
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, options, FaultyRunnerFactory(plan));
  ASSERT_EQ(outcomes.size(), 1u);
  const TaskOutcome& outcome = outcomes[0];

  EXPECT_EQ(plan->loads.load(), 9) << "every candidate, and the default schedule, is loaded once";
  EXPECT_EQ(outcome.trials, 8);
  EXPECT_EQ(outcome.measured_now, 8);
  EXPECT_EQ(outcome.failed, 2);
  EXPECT_TRUE(std::isfinite(outcome.best_s));
  EXPECT_GT(outcome.best_s, 0);
  EXPECT_FALSE(outcome.best_config.empty());
  EXPECT_TRUE(std::isfinite(outcome.default_s));

  std::vector<dataset::Record> records = RecordsOf(*db, outcome.task_id);
  ASSERT_EQ(records.size(), 9u);
  EXPECT_EQ(records[0].strategy, kDefault);
  int crashed = 0, timed_out = 0, ok = 0;
  for (const auto& r : records) {
    switch (r.result.status) {
      case measure::MeasureStatus::kRuntimeError:
        ++crashed;
        EXPECT_THAT(r.result.message, HasSubstr("SIGSEGV"));
        EXPECT_THAT(r.result.message, HasSubstr("signal"));
        EXPECT_EQ(SymbolOf(task.workload, r.config_index), plan->crashed_symbol);
        EXPECT_EQ(r.result.Median(), std::numeric_limits<double>::infinity());
        break;
      case measure::MeasureStatus::kTimeout:
        ++timed_out;
        EXPECT_EQ(SymbolOf(task.workload, r.config_index), plan->hung_symbol);
        EXPECT_THAT(r.result.message, HasSubstr("did not finish"));
        break;
      case measure::MeasureStatus::kOk:
        ++ok;
        EXPECT_FALSE(r.result.costs_s.empty());
        break;
      default:
        ADD_FAILURE() << "record " << r.id << " is " << measure::StatusName(r.result.status) << ": "
                      << r.result.message;
    }
  }
  EXPECT_EQ(crashed, 1);
  EXPECT_EQ(timed_out, 1);
  EXPECT_EQ(ok, 7);
  // In proposal order: the 2nd and 3rd candidates are the ones that failed.
  EXPECT_EQ(records[2].result.status, measure::MeasureStatus::kRuntimeError);
  EXPECT_EQ(records[3].result.status, measure::MeasureStatus::kTimeout);
  // The database's best is an ok record, no slower than the best the search found (it may be
  // the default schedule, which the outcome's best leaves out).
  auto best = db->Best(outcome.task_id, records[0].target_id);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(best->size(), 1u);
  EXPECT_TRUE((*best)[0].result.ok());
  EXPECT_LE((*best)[0].result.Median(), outcome.best_s);
  if ((*best)[0].strategy != kDefault) EXPECT_EQ((*best)[0].config_json, outcome.best_config);
}

TEST(TunerTest, TrialsPerTaskBudgetIsRespected) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  std::vector<ProgressEvent> events;
  Tuner tuner(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), FastOptions(/*trials=*/5, /*batch=*/2),
              [&events](const ProgressEvent& e) { events.push_back(e); });
  auto outcomes = tuner.Run({SmallTask()});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].trials, 5);
  EXPECT_EQ((*outcomes)[0].measured_now, 5);

  std::vector<dataset::Record> records = RecordsOf(*db, (*outcomes)[0].task_id);
  EXPECT_EQ(records.size(), 5u + 1u) << "trials_per_task plus the default schedule";
  EXPECT_EQ(test::CountStrategy(records, kDefault), 1);
  EXPECT_EQ(test::CountStrategy(records, "random"), 5);

  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().task_done);
  EXPECT_EQ(events.back().trials, 5);
  EXPECT_EQ(events.back().trials_budget, 5);
  for (const auto& e : events) EXPECT_LE(e.trials, e.trials_budget);
}

// A stop request (Ctrl-C in the CLI) ends the run after the batch in flight: its records stay,
// no finalists are re-measured, and the run is marked interrupted; a normal run is finished.
TEST(TunerTest, StopRequestEndsTheRunAsInterrupted) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/8, /*batch=*/2);
  options.finalists = 3;  // would add finalist records if the run were not interrupted
  int asked = 0;
  options.should_stop = [&asked] { return ++asked > 2; };  // two batches, then stop
  Tuner tuner(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), options, nullptr);
  auto outcomes = tuner.Run({SmallTask()});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ((*outcomes)[0].trials, 4);
  std::vector<dataset::Record> records = RecordsOf(*db, (*outcomes)[0].task_id);
  EXPECT_EQ(test::CountStrategy(records, "random"), 4);
  EXPECT_EQ(test::CountStrategy(records, "finalist"), 0);
  auto runs = db->Runs();
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].status, "interrupted");
  EXPECT_GT((*runs)[0].finished, 0);

  TuneOptions plain = FastOptions(/*trials=*/2, /*batch=*/2);
  Tuner again(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), plain, nullptr);
  ASSERT_TRUE(again.Run({SmallTask()}).ok());
  runs = db->Runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[1].status, "finished");
  EXPECT_FALSE(db->FinishRun((*runs)[1].id, "done").ok());
}

TEST(TunerTest, TotalTrialsCapIsSpreadOverTasks) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/10, /*batch=*/4);
  options.total_trials = 7;
  std::vector<TuneTask> tasks = {SmallTask("16,16,16"), SmallTask("8,24,16"), SmallTask("32,8,8")};
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), tasks, options);
  ASSERT_EQ(outcomes.size(), 3u);
  int total = 0;
  for (const auto& o : outcomes) {
    // 7 over 3 tasks, as evenly as possible: 2 or 3 each.
    EXPECT_GE(o.trials, 2) << o.task.name;
    EXPECT_LE(o.trials, 3) << o.task.name;
    EXPECT_EQ(o.measured_now, o.trials);
    total += o.trials;
    std::vector<dataset::Record> records = RecordsOf(*db, o.task_id);
    EXPECT_EQ(static_cast<int>(records.size()), o.trials + 1) << o.task.name;
    EXPECT_EQ(test::CountStrategy(records, kDefault), 1) << o.task.name;
  }
  EXPECT_EQ(total, 7);
}

TEST(TunerTest, TotalTrialsAbovePerTaskBudgetDoesNotRaiseIt) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/2, /*batch=*/4);
  options.total_trials = 100;
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {SmallTask("16,16,16"), SmallTask("8,24,16")}, options);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.trials, 2) << o.task.name;
    EXPECT_EQ(RecordsOf(*db, o.task_id).size(), 3u) << o.task.name;
  }
}

// A task's finalists include the best kernel recorded for the same shape with another epilogue
// (its own search may have missed it). Config transfer's seeding is off, so the second task's
// search is its own; --no-transfer turns the siblings off too.
TEST(TunerTest, FinalistsIncludeTheBestConfigOfTheSameShapeWithAnotherEpilogue) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneTask with_relu = SmallTask("32,32,32");
  with_relu.name = "mm-relu";
  with_relu.workload.relu = true;
  std::vector<TaskOutcome> first = RunTuner(db.get(), {with_relu}, FastOptions(8, 4, /*seed=*/1));
  ASSERT_EQ(first.size(), 1u);
  std::string sibling_best;  // its fastest searched config
  double best_s = std::numeric_limits<double>::infinity();
  for (const auto& r : RecordsOf(*db, first[0].task_id)) {
    if (r.strategy != kDefault && r.result.ok() && r.result.Median() < best_s) {
      best_s = r.result.Median();
      sibling_best = r.config_json;
    }
  }
  ASSERT_FALSE(sibling_best.empty());

  for (const bool transfer : {true, false}) {
    TuneTask plain = SmallTask("32,32,32");  // no epilogue: a task of its own
    TuneOptions options = FastOptions(3, 3, /*seed=*/transfer ? 2 : 3);
    options.finalists = 3;
    options.transfer_configs = 0;
    options.transfer = transfer;
    options.resume = false;
    std::vector<TaskOutcome> second = RunTuner(db.get(), {plain}, options);
    ASSERT_EQ(second.size(), 1u);
    std::set<std::string> searched, finalists;
    const std::vector<dataset::Record> records = RecordsOf(*db, second[0].task_id);
    for (const auto& r : records) {
      if (r.run_id != records.back().run_id) continue;  // this run's
      if (r.strategy == "finalist") finalists.insert(r.config_json);
      else if (r.strategy != kDefault) searched.insert(r.config_json);
    }
    if (transfer) {
      EXPECT_EQ(finalists.count(sibling_best), 1u) << sibling_best;
      // Counted as a sibling's unless this run's search had measured it too.
      EXPECT_EQ(second[0].sibling_finalists, searched.count(sibling_best) > 0 ? 0 : 1);
    } else {
      EXPECT_EQ(second[0].sibling_finalists, 0);
      for (const std::string& f : finalists) EXPECT_EQ(searched.count(f), 1u) << f << " was not searched";
    }
  }
}

TEST(TunerTest, FinalistsAreMeasuredAgainAndTheWinnerComesFromThem) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/8, /*batch=*/4);
  options.finalists = 3;
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {SmallTask("32,32,32")}, options);
  ASSERT_EQ(outcomes.size(), 1u);
  const TaskOutcome& o = outcomes[0];
  EXPECT_EQ(o.trials, 8) << "re-measurements are not trials";
  std::vector<dataset::Record> records = RecordsOf(*db, o.task_id);
  ASSERT_EQ(records.size(), 8u + 1u + 3u);
  // The finalists are the three fastest search records, measured again after the search.
  std::vector<std::pair<double, std::string>> search;
  std::set<std::string> finalists;
  double best_finalist = std::numeric_limits<double>::infinity();
  std::string best_finalist_config;
  for (const auto& r : records) {
    if (r.strategy == "finalist") {
      finalists.insert(r.config_json);
      // Timed side by side in one child, and the records say so.
      EXPECT_NE(r.protocol_json.find(R"("interleave":true)"), std::string::npos) << r.protocol_json;
      if (r.result.ok() && r.result.Median() < best_finalist) {
        best_finalist = r.result.Median();
        best_finalist_config = r.config_json;
      }
    } else if (r.strategy != kDefault && r.result.ok()) {
      search.emplace_back(r.result.Median(), r.config_json);
    }
  }
  std::sort(search.begin(), search.end());
  ASSERT_GE(search.size(), 3u);
  EXPECT_EQ(finalists, (std::set<std::string>{search[0].second, search[1].second, search[2].second}));
  // The winner is the fastest re-measurement (or the default schedule, if that is faster); its
  // time the fastest of its two measurements.
  const dataset::Record* def = nullptr;
  for (const auto& r : records) def = r.strategy == kDefault ? &r : def;
  ASSERT_NE(def, nullptr);
  double winner_s = best_finalist;
  for (const auto& [seconds, config] : search) {
    if (config == best_finalist_config) winner_s = std::min(winner_s, seconds);
  }
  if (def->result.Median() >= winner_s) {
    EXPECT_EQ(o.best_s, winner_s);
    EXPECT_EQ(o.best_config, best_finalist_config);
  } else {
    EXPECT_EQ(o.best_s, def->result.Median());
  }
  // The database's best is the run's pick, at that time, whichever finalist's search record was
  // fastest.
  auto db_best = db->Best(o.task_id, RecordsOf(*db, o.task_id)[0].target_id);
  ASSERT_TRUE(db_best.ok() && db_best->size() == 1u);
  EXPECT_EQ((*db_best)[0].config_json, o.best_config);
  EXPECT_EQ((*db_best)[0].result.Median(), o.best_s);
  // Resuming a finished task measures nothing, finalists included.
  TuneOptions resume = options;
  resume.resume = true;
  std::vector<TaskOutcome> again = RunTuner(db.get(), {SmallTask("32,32,32")}, resume);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].trials, 8);
  EXPECT_EQ(again[0].measured_now, 0);
  EXPECT_EQ(RecordsOf(*db, o.task_id).size(), records.size());
}

TEST(TunerTest, CutoffStopsTimingCandidatesFarSlowerThanTheBest) {
  auto db = test::OpenTestDb();
  ASSERT_NE(db, nullptr);
  TuneOptions options = FastOptions(/*trials=*/24, /*batch=*/8);
  options.protocol.repeats = 3;
  options.cutoff_factor = 1.0;  // anything slower than the best so far: one sample only
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {SmallTask("48,48,48")}, options);
  ASSERT_EQ(outcomes.size(), 1u);
  int cut = 0, full = 0;
  for (const auto& r : RecordsOf(*db, outcomes[0].task_id)) {
    if (!r.result.ok() || r.strategy == kDefault) continue;
    auto protocol = measure::MeasureProtocol::FromJson(r.protocol_json);
    ASSERT_TRUE(protocol.ok()) << protocol.status();
    if (r.result.message.find("cut off") != std::string::npos) {
      ++cut;
      EXPECT_EQ(r.result.costs_s.size(), 1u);
      EXPECT_GT(protocol->cutoff_s, 0) << "a cut-off record carries the cutoff it was measured with";
      EXPECT_GT(r.result.costs_s[0], protocol->cutoff_s);
    } else {
      ++full;
      EXPECT_EQ(r.result.costs_s.size(), 3u) << r.result.message;
    }
  }
  // The cutoff follows the best so far (the default schedule's to begin with): candidates at
  // least as fast are timed in full, slower ones are cut.
  EXPECT_GT(full, 0);
  EXPECT_GT(cut, 0);
}

std::vector<std::string> ConfigSequence(uint64_t seed) {
  auto db = test::OpenTestDb();
  if (db == nullptr) return {};
  std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {SmallTask()}, FastOptions(/*trials=*/10, /*batch=*/4, seed));
  if (outcomes.size() != 1) return {};
  std::vector<std::string> sequence;
  for (const auto& r : RecordsOf(*db, outcomes[0].task_id)) sequence.push_back(r.strategy + " " + r.config_json);
  return sequence;
}

TEST(TunerTest, SameSeedGivesSameSequenceOfConfigs) {
  std::vector<std::string> first = ConfigSequence(42);
  std::vector<std::string> second = ConfigSequence(42);
  ASSERT_EQ(first.size(), 11u);
  EXPECT_EQ(first, second);
  // The seed is actually used: another seed explores other configs.
  std::vector<std::string> other = ConfigSequence(43);
  ASSERT_EQ(other.size(), 11u);
  EXPECT_EQ(other[0], first[0]) << "the default schedule does not depend on the seed";
  EXPECT_NE(other, first);
}

TEST(TunerTest, ResumeMeasuresOnlyNewConfigs) {
  test::TempDir dir;
  const std::string path = dir.Join("resume.db");
  TuneTask task = SmallTask();
  int64_t task_id = 0;
  std::vector<dataset::Record> before;
  {
    auto db = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, FastOptions(/*trials=*/8, /*batch=*/3));
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].measured_now, 8);
    task_id = outcomes[0].task_id;
    before = RecordsOf(*db, task_id);
    ASSERT_EQ(before.size(), 9u);
  }
  {
    auto db = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, ResumeOptions(/*trials=*/12, /*batch=*/3));
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].task_id, task_id);
    EXPECT_EQ(outcomes[0].trials, 12);
    EXPECT_EQ(outcomes[0].measured_now, 4);
    EXPECT_TRUE(std::isfinite(outcomes[0].default_s)) << "the recorded default schedule is reused";

    std::vector<dataset::Record> after = RecordsOf(*db, task_id);
    ASSERT_EQ(after.size(), 13u);
    EXPECT_EQ(test::CountStrategy(after, kDefault), 1) << "the default schedule is not measured again";
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(after[i].id, before[i].id);
      EXPECT_EQ(after[i].config_json, before[i].config_json);
      EXPECT_EQ(after[i].result.costs_s, before[i].result.costs_s);
    }
    std::map<std::string, int> configs = SearchConfigs(after);
    EXPECT_EQ(configs.size(), 12u);
    for (const auto& [config, n] : configs) EXPECT_EQ(n, 1) << config << " was measured " << n << " times";
  }
  {
    // Resuming a task whose budget is spent measures nothing.
    auto db = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, ResumeOptions(/*trials=*/12, /*batch=*/3));
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].trials, 12);
    EXPECT_EQ(outcomes[0].measured_now, 0);
    EXPECT_EQ(RecordsOf(*db, task_id).size(), 13u);
  }
}

// Given configs (tune op --config) are measured first, in order and in batches of their own,
// recorded as "given", count against the budget, teach the strategy (it does not propose them
// again), and are not measured twice: a repeat is dropped, and --resume skips recorded ones.
TEST(TunerTest, GivenConfigsAreMeasuredFirstAndOnce) {
  test::TempDir dir;
  const std::string path = dir.Join("given.db");
  TuneTask task = SmallTask();
  auto tmpl = test::MakeTemplate(task.workload);
  ASSERT_NE(tmpl, nullptr);
  const search::ConfigSpace& space = tmpl->space();
  std::mt19937_64 rng = test::TestRng();
  std::vector<std::string> given;
  while (given.size() < 3) {
    absl::StatusOr<search::Config> c = space.Sample(rng);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string text = space.ToJson(*c);
    if (std::find(given.begin(), given.end(), text) == given.end()) given.push_back(text);
  }
  int64_t task_id = 0;
  {
    auto db = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    TuneOptions options = FastOptions(/*trials=*/7, /*batch=*/2);
    options.given_configs = {given[0], given[1], given[0], given[2]};  // a repeat is measured once
    std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, options);
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].trials, 7);
    task_id = outcomes[0].task_id;
    std::vector<dataset::Record> records = RecordsOf(*db, task_id);
    ASSERT_EQ(records.size(), 8u);
    EXPECT_EQ(records[0].strategy, kDefault);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(records[1 + i].strategy, "given");
      EXPECT_EQ(records[1 + i].config_json, given[i]);
    }
    std::map<std::string, int> configs = SearchConfigs(records);
    EXPECT_EQ(configs.size(), 7u) << "the search proposes none of the given configs again";
    EXPECT_EQ(test::CountStrategy(records, "random"), 4);
  }
  {
    // Resumed with the same and one more budget: the recorded given configs are not measured
    // again; the budget left goes to the search.
    auto db = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    TuneOptions options = ResumeOptions(/*trials=*/8, /*batch=*/2);
    options.given_configs = given;
    std::vector<TaskOutcome> outcomes = RunTuner(db.get(), {task}, options);
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0].measured_now, 1);
    std::vector<dataset::Record> records = RecordsOf(*db, task_id);
    EXPECT_EQ(test::CountStrategy(records, "given"), 3);
  }
}

// A given config that does not parse, or breaks a constraint, fails the run before anything is
// written: no run, no task, no record.
TEST(TunerTest, InvalidGivenConfigWritesNothing) {
  test::TempDir dir;
  TuneTask task = SmallTask();
  auto tmpl = test::MakeTemplate(task.workload);
  ASSERT_NE(tmpl, nullptr);
  const search::ConfigSpace& space = tmpl->space();
  // An unconstrained point that is not valid: some knob combination breaks a constraint.
  std::mt19937_64 rng = test::TestRng();
  std::string invalid;
  for (int i = 0; i < 100000 && invalid.empty(); ++i) {
    search::Config c = space.Draw(rng);
    if (!space.IsValid(c)) invalid = space.ToJson(c);
  }
  ASSERT_FALSE(invalid.empty());
  for (const std::string& text : {std::string("{\"tile_m\": [1, 2]}"), std::string("not json"), invalid}) {
    auto db = test::OpenTestDb(dir.Join("invalid" + std::to_string(text.size()) + ".db"));
    ASSERT_NE(db, nullptr);
    TuneOptions options = FastOptions(/*trials=*/2, /*batch=*/2);
    options.given_configs = {text};
    Tuner tuner(db.get(), measure::Target::HostCpu(1), measure::LocalRunner::Factory(1), options);
    absl::StatusOr<std::vector<TaskOutcome>> outcomes = tuner.Run({task});
    ASSERT_FALSE(outcomes.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(outcomes.status())) << outcomes.status();
    EXPECT_THAT(std::string(outcomes.status().message()), HasSubstr(task.workload.Key()));
    auto runs = db->Runs();
    ASSERT_TRUE(runs.ok());
    EXPECT_TRUE(runs->empty()) << text;
    auto tasks = db->Tasks();
    ASSERT_TRUE(tasks.ok());
    EXPECT_TRUE(tasks->empty()) << text;
  }
}

}  // namespace
}  // namespace tune::tuner

namespace tune::tuner {
namespace {

// Without --strategy a run uses "auto", and "auto" gets the online cost model its choice needs.
TEST(TunerDefaultsTest, DefaultStrategyIsAutoWithItsChoicesCostModel) {
  EXPECT_EQ(TuneOptions{}.strategy, "auto");
  EXPECT_EQ(ResolveCostModel("auto", "auto"), ResolveCostModel("auto", search::AutoStrategy::Choice()));
  EXPECT_EQ(ResolveCostModel("auto", "random"), "none");
  EXPECT_EQ(ResolveCostModel("auto", "sa"), "xgb");
  EXPECT_EQ(ResolveCostModel("xgb-reg", "auto"), "xgb-reg");
}

// auto is Bayesian optimisation, which ranks with its own GP; where a model is asked for (a
// pretrained one, or an explicit --cost-model) it is a strategy that ranks with that model.
TEST(TunerDefaultsTest, AutoRanksWithTheModelAskedFor) {
  EXPECT_EQ(ResolveStrategy("auto", "auto", false), search::AutoStrategy::Choice());
  EXPECT_EQ(ResolveStrategy("auto", "none", false), search::AutoStrategy::Choice());
  EXPECT_EQ(ResolveCostModel("auto", "auto"), "none");
  EXPECT_EQ(ResolveStrategy("auto", "auto", true), search::AutoStrategy::ChoiceWithModel());
  EXPECT_EQ(ResolveStrategy("auto", "xgb", false), search::AutoStrategy::ChoiceWithModel());
  EXPECT_EQ(ResolveCostModel("auto", "auto", true), "xgb");
  EXPECT_EQ(ResolveStrategy("sa", "none", true), "sa");
  EXPECT_NE(std::string(search::AutoStrategy::Choice()), search::AutoStrategy::ChoiceWithModel());
}

}  // namespace
}  // namespace tune::tuner
