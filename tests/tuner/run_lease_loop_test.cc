// Tests of the tuning loop sharing a database file with other runs: leases of live and gone
// runs, records committed meanwhile by others, and runs ended by an error.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/target.h"
#include "search/space.h"
#include "tests/common/fake_strategy.h"
#include "tests/common/fake_task.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_db.h"
#include "tests/common/test_seed.h"
#include "tests/common/toy_space.h"
#include "tuner/tuner.h"

namespace tune::tuner {
namespace {

using search::Config;
using ::testing::HasSubstr;

TuneOptions LeaseLoopOptions(int trials, int batch) {
  TuneOptions o;
  o.trials_per_task = trials;
  o.batch = batch;
  o.seed = test::kTestSeed;
  o.finalists = 0;
  o.command = "run_lease_loop_test";
  return o;
}

absl::StatusOr<TaskOutcome> RunFake(dataset::RecordDatabase* db, test::FakeTask& task, const TuneOptions& options,
                                    search::SearchStrategy* strategy = nullptr) {
  Tuner tuner(db, measure::Target::HostCpu(1), measure::RunnerFactory(), options);
  absl::StatusOr<std::vector<TaskOutcome>> outcomes =
      tuner.Run(std::vector<LoopTask>{{TuneTask{"fake", codegen::Workload{}, 1}, &task, strategy, nullptr}});
  if (!outcomes.ok()) return outcomes.status();
  EXPECT_EQ(outcomes->size(), 1u);
  return outcomes->at(0);
}

// The task and target rows the fake task is recorded under, made through `db`.
std::pair<int64_t, int64_t> FakeTaskRows(dataset::RecordDatabase& db, const test::FakeTask& task) {
  const measure::TaskKeys& keys = task.keys();
  absl::StatusOr<int64_t> task_id =
      db.UpsertTask({0, keys.workload_key, keys.op, keys.shape_json, keys.flops, keys.template_version});
  const measure::Target target = measure::Target::HostCpu(1);
  absl::StatusOr<int64_t> target_id = db.UpsertTarget({0, target.Key(), target.ToJson()});
  EXPECT_TRUE(task_id.ok() && target_id.ok());
  return {task_id.value_or(0), target_id.value_or(0)};
}

void LeaseLoopExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

int64_t GonePid() {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// A task whose lease another live run holds is not measured at all (not even its default
// schedule); once that run's process is gone, the next run takes the lease over and tunes it.
TEST(TunerLeaseTest, TaskLeasedByALiveRunIsSkippedUntilItsOwnerIsGone) {
  test::TempDir dir;
  const std::string path = dir.Join("shared.db");
  auto db = test::OpenTestDb(path);
  auto other = test::OpenTestDb(path);
  ASSERT_NE(db, nullptr);
  ASSERT_NE(other, nullptr);
  test::FakeTask task;
  const auto [task_id, target_id] = FakeTaskRows(*other, task);
  absl::StatusOr<int64_t> holder = other->StartRun("tune elsewhere", "k");
  ASSERT_TRUE(holder.ok());
  absl::StatusOr<std::optional<dataset::LeaseHolder>> lease = other->AcquireLease(task_id, target_id, *holder);
  ASSERT_TRUE(lease.ok() && !lease->has_value());

  absl::StatusOr<TaskOutcome> skipped = RunFake(db.get(), task, LeaseLoopOptions(6, 2));
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->skipped, absl::StrCat("being tuned by run ", *holder, " (pid ", ::getpid(), " on host ",
                                           dataset::LocalHostName(), ")"));
  EXPECT_EQ(skipped->trials, 0);
  EXPECT_TRUE(task.measured().empty());
  EXPECT_TRUE(db->Records(task_id, target_id)->empty());
  absl::StatusOr<std::vector<dataset::RunInfo>> runs = db->Runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[1].status, "finished");

  // The holder's process is gone (its run was killed): the lease is taken over.
  const int64_t gone = GonePid();
  LeaseLoopExec(path, absl::StrCat("UPDATE leases SET pid = ", gone, "; UPDATE runs SET pid = ", gone,
                                   " WHERE id = ", *holder));
  absl::StatusOr<TaskOutcome> tuned = RunFake(db.get(), task, LeaseLoopOptions(6, 2));
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->skipped, "");
  EXPECT_EQ(tuned->trials, 6);
  EXPECT_EQ(task.measured().size(), 7u);  // the default schedule and 6 trials
  lease = other->Lease(task_id, target_id);
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(lease->has_value()) << "the run's end releases its leases";
  runs = db->Runs();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)[0].status, "stale");
}

// A run whose lease was taken over (its heartbeat had stopped long enough: a suspended
// process) stops tuning the task before its next batch and leaves the finalists to the new
// holder.
TEST(TunerLeaseTest, RunWhoseLeaseWasTakenOverStopsTuningTheTask) {
  test::TempDir dir;
  const std::string path = dir.Join("shared.db");
  auto db = test::OpenTestDb(path);
  auto other = test::OpenTestDb(path);
  ASSERT_NE(db, nullptr);
  ASSERT_NE(other, nullptr);
  test::FakeTask task;
  absl::StatusOr<int64_t> taker = other->StartRun("tune elsewhere", "k");
  ASSERT_TRUE(taker.ok());
  std::mt19937_64 rng = test::TestRng();
  const int batches_before = std::uniform_int_distribution<int>(1, 3)(rng);
  int commits = 0;
  task.on_commit = [&] {  // the default schedule's commit, then `batches_before` batches
    if (commits++ == batches_before) {
      LeaseLoopExec(path, absl::StrCat("UPDATE leases SET run_id = ", *taker));
    }
  };
  TuneOptions options = LeaseLoopOptions(12, 2);
  options.finalists = 3;
  absl::StatusOr<TaskOutcome> outcome = RunFake(db.get(), task, options);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_THAT(outcome->skipped, ::testing::StartsWith(absl::StrCat("taken over by run ", *taker, " (pid ")));
  EXPECT_EQ(outcome->measured_now, 2 * batches_before);
  EXPECT_EQ(task.measured().size(), static_cast<size_t>(1 + 2 * batches_before)) << "no finalists";
  absl::StatusOr<std::optional<dataset::LeaseHolder>> lease = other->Lease(outcome->task_id, (*other->Targets())[0].id);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  EXPECT_EQ((*lease)->run_id, *taker) << "the run's end releases only its own leases";
}

// Records of the task committed by another connection while this run tunes it (an import, a
// run that held the lease before) are never measured again; with --resume they count against
// the budget.
TEST(TunerLeaseTest, RecordsCommittedMeanwhileAreNeverMeasuredAgain) {
  const std::set<Config> all = test::AllValid(test::ConstrainedSpace());
  const std::vector<Config> valid(all.begin(), all.end());
  for (bool resume : {false, true}) {
    SCOPED_TRACE(resume ? "resume" : "fresh");
    test::TempDir dir;
    const std::string path = dir.Join("shared.db");
    auto db = test::OpenTestDb(path);
    auto other = test::OpenTestDb(path);
    ASSERT_NE(db, nullptr);
    ASSERT_NE(other, nullptr);
    test::FakeTask task;
    const auto [task_id, target_id] = FakeTaskRows(*other, task);
    // A random third of the space is recorded by the other connection right after this run's
    // first commit (its default schedule).
    std::mt19937_64 rng = test::TestRng(resume ? 1 : 0);
    std::vector<Config> theirs = valid;
    std::shuffle(theirs.begin(), theirs.end(), rng);
    theirs.resize(valid.size() / 3);
    bool inserted = false;
    task.on_commit = [&, task_id = task_id, target_id = target_id] {
      if (inserted) return;
      inserted = true;
      std::vector<dataset::Record> records;
      for (const Config& c : theirs) {
        dataset::Record r;
        r.task_id = task_id;
        r.target_id = target_id;
        r.config_json = task.space().ToJson(c);
        r.config_index = task.space().ToIndex(c);
        r.strategy = "random";
        r.protocol_json = measure::MeasureProtocol().ToJson();
        r.result.status = measure::MeasureStatus::kOk;
        r.result.costs_s = {1.0};
        records.push_back(std::move(r));
      }
      ASSERT_TRUE(other->AddRecords(records).ok());
    };
    TuneOptions options = LeaseLoopOptions(static_cast<int>(valid.size()), 4);
    options.resume = resume;
    absl::StatusOr<TaskOutcome> outcome = RunFake(db.get(), task, options);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_TRUE(inserted);
    const std::vector<Config>& measured = task.measured();
    ASSERT_FALSE(measured.empty());
    std::map<Config, int> times;
    for (size_t i = 1; i < measured.size(); ++i) ++times[measured[i]];  // [0]: the default schedule
    for (const Config& c : theirs) EXPECT_EQ(times.count(c), 0u) << task.space().ToJson(c);
    for (const auto& [c, n] : times) EXPECT_EQ(n, 1) << task.space().ToJson(c);
    EXPECT_EQ(outcome->measured_now, static_cast<int>(valid.size() - theirs.size()));
    EXPECT_EQ(outcome->trials, resume ? static_cast<int>(valid.size()) : outcome->measured_now);
  }
}

// A run that ends with an error is marked failed with the error's message, never left running.
TEST(TunerLeaseTest, RunEndedByAnErrorIsMarkedFailed) {
  const std::set<Config> all = test::AllValid(test::ConstrainedSpace());
  const Config first = *all.begin();
  for (const std::string& path : {std::string(":memory:"), std::string("file")}) {
    SCOPED_TRACE(path);
    test::TempDir dir;
    auto db = test::OpenTestDb(path == ":memory:" ? path : dir.Join("failed.db"));
    ASSERT_NE(db, nullptr);
    test::FakeTask task;
    test::ScriptedStrategy strategy({first, first}, nullptr);  // proposes a config twice
    absl::StatusOr<TaskOutcome> outcome = RunFake(db.get(), task, LeaseLoopOptions(8, 2), &strategy);
    ASSERT_FALSE(outcome.ok());
    absl::StatusOr<std::vector<dataset::RunInfo>> runs = db->Runs();
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].status, "failed");
    EXPECT_EQ((*runs)[0].message, std::string(outcome.status().message()));
    EXPECT_THAT((*runs)[0].message, HasSubstr("a second time"));
    EXPECT_GT((*runs)[0].finished, 0);
  }
}

// A task whose measurement gives up after its default schedule, as a daemon shutting down while
// a batch waits for workers does (or Ctrl-C during a measurement): no results for the batch.
class GivingUpFakeTask : public test::FakeTask {
 public:
  std::vector<measure::MeasureResult> Measure(const std::vector<Config>& configs,
                                              const measure::MeasureProtocol& protocol) override {
    if (calls_++ == 0) return FakeTask::Measure(configs, protocol);
    gave_up = true;
    return {};
  }
  bool gave_up = false;

 private:
  int calls_ = 0;
};

// A batch cancelled because a stop was asked for ends the run "interrupted", as a stop between
// batches does; a batch cancelled without one is a failure.
TEST(TunerLeaseTest, BatchCancelledByAStopRequestEndsTheRunInterrupted) {
  for (bool asked : {true, false}) {
    SCOPED_TRACE(asked ? "stop asked" : "no stop asked");
    test::TempDir dir;
    auto db = test::OpenTestDb(dir.Join("stopped.db"));
    ASSERT_NE(db, nullptr);
    GivingUpFakeTask task;
    TuneOptions options = LeaseLoopOptions(8, 2);
    options.should_stop = [&task, asked] { return asked && task.gave_up; };
    absl::StatusOr<TaskOutcome> outcome = RunFake(db.get(), task, options);
    ASSERT_FALSE(outcome.ok());
    EXPECT_TRUE(absl::IsCancelled(outcome.status())) << outcome.status();
    absl::StatusOr<std::vector<dataset::RunInfo>> runs = db->Runs();
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), 1u);
    EXPECT_EQ((*runs)[0].status, asked ? "interrupted" : "failed") << (*runs)[0].message;
    EXPECT_EQ((*runs)[0].message, asked ? "" : std::string(outcome.status().message()));
  }
}

}  // namespace
}  // namespace tune::tuner
