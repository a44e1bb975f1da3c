// Tests of `tune` processes sharing one record database: concurrent --resume runs measure no
// config twice, and a killed run is listed stale and its tasks are taken over.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSharedDbTune = std::string(TUNE_BIN_DIR) + "/tune";

// --repeats 2 x --min-repeat-ms 20: every candidate takes at least ~40 ms whatever the machine,
// so runs started together overlap; timings are never asserted on.
const std::vector<std::string> kSlowEnough = {"--repeats", "2", "--min-repeat-ms", "20", "--timeout", "10"};

// Waits (bounded) for a background `tune` to end; a test failure when it does not.
const test::ProcessResult& AwaitTune(test::Subprocess& tune, double limit_s = 240) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (!tune.Finished() && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!tune.Finished()) {
    ADD_FAILURE() << "tune did not end within " << limit_s << " s";
    tune.Kill(SIGKILL);
    tune.Wait();
  }
  return tune.result();
}

// Every record in the database, and its runs.
struct SharedDbContents {
  std::vector<dataset::Record> records;
  std::vector<dataset::RunInfo> runs;
};

SharedDbContents ReadSharedDb(const std::string& path) {
  SharedDbContents out;
  auto db = dataset::RecordDatabase::Open(path, /*create=*/false);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return out;
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  EXPECT_TRUE(tasks.ok() && targets.ok());
  for (const auto& task : tasks.value_or(std::vector<dataset::TaskInfo>{})) {
    for (const auto& target : targets.value_or(std::vector<dataset::TargetInfo>{})) {
      auto records = (*db)->Records(task.id, target.id);
      EXPECT_TRUE(records.ok()) << records.status();
      if (records.ok()) out.records.insert(out.records.end(), records->begin(), records->end());
    }
  }
  auto runs = (*db)->Runs();
  EXPECT_TRUE(runs.ok()) << runs.status();
  if (runs.ok()) out.runs = *runs;
  return out;
}

// Records per (task, config) among the search's trials (the default schedule and the
// finalists' re-measurements are counted per task).
struct RecordCounts {
  std::map<std::pair<int64_t, std::string>, int> trials;
  std::map<int64_t, int> defaults, finalists, trials_per_task;
};

RecordCounts CountSharedDbRecords(const std::vector<dataset::Record>& records) {
  RecordCounts c;
  for (const dataset::Record& r : records) {
    if (r.strategy == "default") {
      ++c.defaults[r.task_id];
    } else if (r.strategy == "finalist") {
      ++c.finalists[r.task_id];
    } else {
      ++c.trials[{r.task_id, r.config_json}];
      ++c.trials_per_task[r.task_id];
    }
  }
  return c;
}

// The line of run `id` in a `tune db runs` listing ("" when there is none).
std::string RunsLine(const std::string& listing, int64_t id) {
  std::istringstream in(listing);
  const std::string prefix = std::to_string(id) + " ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

class ConcurrentRunsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kSharedDbTune)) << kSharedDbTune << " is not built"; }

  std::vector<std::string> Command(std::vector<std::string> args) const {
    args.insert(args.begin(), kSharedDbTune);
    args.insert(args.end(), kSlowEnough.begin(), kSlowEnough.end());
    return args;
  }

  test::TempDir dir_;
};

// Two `tune MODEL --resume` processes started together on one database: every task is tuned
// by one of them (the other says it skips it), so no config is measured twice, and each task
// gets its budget exactly once.
TEST_F(ConcurrentRunsTest, TwoResumeRunsStartedTogetherMeasureNoConfigTwice) {
  test::WriteFileBytes(dir_.Join("pair.json"), R"({
    "name": "pair-net",
    "layers": [
      {"name": "fc", "op": "dense", "shape": "1,64,32"},
      {"name": "conv", "op": "conv2d", "shape": "1,4,8,8,4,3,3,1,1"}
    ]
  })");
  const int trials = 6;
  const std::vector<std::string> argv =
      Command({"pair.json", "--target", "llvm", "--trials", std::to_string(trials), "--batch", "2", "--resume",
               "--seed", "3", "--db", "shared.db"});
  test::Subprocess first, second;
  ASSERT_TRUE(first.Start(argv, dir_.path(), dir_.Join("first.out"), dir_.Join("first.err")));
  ASSERT_TRUE(second.Start(argv, dir_.path(), dir_.Join("second.out"), dir_.Join("second.err")));
  const test::ProcessResult a = AwaitTune(first);
  const test::ProcessResult b = AwaitTune(second);
  std::string logs;
  for (const char* file : {"first.out", "first.err", "second.out", "second.err"}) {
    logs += test::ReadFileBytes(dir_.Join(file));
  }
  ASSERT_TRUE(a.exited && a.exit_code == 0) << a << logs;
  ASSERT_TRUE(b.exited && b.exit_code == 0) << b << logs;

  const SharedDbContents db = ReadSharedDb(dir_.Join("shared.db"));
  ASSERT_EQ(db.runs.size(), 2u);
  for (const dataset::RunInfo& run : db.runs) EXPECT_EQ(run.status, "finished") << run.id;
  // The runs did overlap: otherwise the test would prove nothing.
  EXPECT_LT(db.runs[0].started, db.runs[1].finished);
  EXPECT_LT(db.runs[1].started, db.runs[0].finished);

  const RecordCounts counts = CountSharedDbRecords(db.records);
  for (const auto& [key, n] : counts.trials) {
    EXPECT_EQ(n, 1) << "task " << key.first << " config " << key.second << " measured " << n << " times\n" << logs;
  }
  ASSERT_EQ(counts.defaults.size(), 2u) << logs;
  for (const auto& [task, n] : counts.defaults) EXPECT_EQ(n, 1) << "default schedule of task " << task;
  for (const auto& [task, n] : counts.trials_per_task) EXPECT_EQ(n, trials) << "task " << task;
  for (const auto& [task, n] : counts.finalists) EXPECT_LE(n, 3) << "finalists of task " << task;
  // The runs overlapped, so one of them found a task the other held: it said so and skipped it.
  EXPECT_THAT(logs, ::testing::ContainsRegex(": being tuned by run [12] \\(pid [0-9]+ on host [^)]+\\), skipped"));
  EXPECT_THAT(logs, Not(HasSubstr("taken over")));
  // ... and its summary table lists the task as skipped, not as a task without a valid kernel.
  EXPECT_THAT(logs, HasSubstr("skipped: being tuned by run"));
  EXPECT_THAT(logs, HasSubstr("(some tasks were skipped: tuned by another run)"));
  EXPECT_THAT(logs, Not(HasSubstr("some tasks have no valid kernel")));
}

// A run killed with SIGKILL stays "running" in the database; it is listed "stale" at once (its
// process is gone), and the next run takes its task over without waiting and measures none of
// its configs again.
TEST_F(ConcurrentRunsTest, KilledRunIsListedStaleAndItsTaskTakenOver) {
  const std::string db_path = dir_.Join("killed.db");
  const std::vector<std::string> argv = Command({"op", "matmul", "--shape", "96,96,96", "--trials", "40", "--batch",
                                                 "4", "--seed", "5", "--db", db_path});
  pid_t killed_pid = 0;
  {
    test::Subprocess tune;
    ASSERT_TRUE(tune.Start(argv, dir_.path(), dir_.Join("killed.out"), dir_.Join("killed.err")));
    killed_pid = tune.pid();
    // Poll until some trials are committed; the limit only keeps a broken build from hanging.
    const auto limit = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    size_t search_records = 0;
    while (search_records < 4) {
      ASSERT_FALSE(tune.Finished()) << "tune ended before it could be killed: " << tune.result()
                                    << test::ReadFileBytes(dir_.Join("killed.err"));
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << test::ReadFileBytes(dir_.Join("killed.err"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!std::filesystem::exists(db_path)) continue;
      auto db = dataset::RecordDatabase::Open(db_path, /*create=*/false);
      if (!db.ok()) continue;
      auto tasks = (*db)->Tasks();
      auto targets = (*db)->Targets();
      if (!tasks.ok() || tasks->empty() || !targets.ok() || targets->empty()) continue;
      auto records = (*db)->Records((*tasks)[0].id, (*targets)[0].id);
      if (records.ok()) search_records = records->size() > 0 ? records->size() - 1 : 0;
    }
    tune.Kill(SIGKILL);
    const test::ProcessResult& r = AwaitTune(tune, 30);
    ASSERT_EQ(r.term_signal, SIGKILL) << r;
  }

  SharedDbContents before = ReadSharedDb(db_path);
  ASSERT_EQ(before.runs.size(), 1u);
  EXPECT_EQ(before.runs[0].status, "stale");
  EXPECT_EQ(before.runs[0].pid, killed_pid);
  EXPECT_EQ(before.runs[0].host, dataset::LocalHostName());
  EXPECT_EQ(before.runs[0].finished, 0);
  // `tune db runs` lists it so.
  const test::ProcessResult listing =
      test::RunProcess({kSharedDbTune, "db", "runs", "--db", db_path}, dir_.path(), 60);
  ASSERT_TRUE(listing.exited && listing.exit_code == 0) << listing;
  EXPECT_THAT(RunsLine(listing.out, 1), ::testing::ContainsRegex("^1 +stale .* - +pid " + std::to_string(killed_pid) +
                                                                  " on "))
      << listing;

  std::vector<std::string> resume = argv;
  resume.insert(resume.end(), {"--resume"});
  for (size_t i = 0; i + 1 < resume.size(); ++i) {
    if (resume[i] == "--trials") resume[i + 1] = std::to_string(CountSharedDbRecords(before.records).trials.size() + 4);
  }
  test::Subprocess again;
  ASSERT_TRUE(again.Start(resume, dir_.path(), dir_.Join("again.out"), dir_.Join("again.err")));
  const test::ProcessResult r = AwaitTune(again);
  const std::string err = test::ReadFileBytes(dir_.Join("again.out")) + test::ReadFileBytes(dir_.Join("again.err"));
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r << err;
  EXPECT_THAT(err, Not(HasSubstr("being tuned by run"))) << err;

  const SharedDbContents after = ReadSharedDb(db_path);
  ASSERT_EQ(after.runs.size(), 2u);
  EXPECT_EQ(after.runs[0].status, "stale");
  EXPECT_EQ(after.runs[1].status, "finished");
  const test::ProcessResult relisting =
      test::RunProcess({kSharedDbTune, "db", "runs", "--db", db_path}, dir_.path(), 60);
  EXPECT_THAT(RunsLine(relisting.out, 1), ::testing::ContainsRegex("^1 +stale ")) << relisting;
  EXPECT_THAT(RunsLine(relisting.out, 2), ::testing::ContainsRegex("^2 +finished ")) << relisting;
  const RecordCounts counts = CountSharedDbRecords(after.records);
  for (const auto& [key, n] : counts.trials) EXPECT_EQ(n, 1) << key.second;
  ASSERT_EQ(counts.trials_per_task.size(), 1u);
  EXPECT_EQ(counts.trials_per_task.begin()->second, static_cast<int>(CountSharedDbRecords(before.records).trials.size() + 4));
}

}  // namespace
}  // namespace tune
