// Tests of runs and leases in the record database: owners and heartbeats, stale runs, failed
// runs, per-(task, target) leases between runs, and the upgrade of version-1 files.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dataset/record_database.h"
#include "dataset/schema.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune::dataset {
namespace {

// The schema as version 1 of tune wrote it, before runs had owners and tasks had leases.
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE tasks(id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL, op TEXT NOT NULL,
  shape_json TEXT NOT NULL, flops REAL NOT NULL, template_version INTEGER NOT NULL,
  created REAL NOT NULL, UNIQUE(workload_key, template_version));
CREATE TABLE targets(id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, json TEXT NOT NULL,
  created REAL NOT NULL);
CREATE TABLE runs(id INTEGER PRIMARY KEY, command TEXT NOT NULL, target_key TEXT NOT NULL,
  started REAL NOT NULL, finished REAL NOT NULL DEFAULT 0, status TEXT NOT NULL);
CREATE TABLE records(id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL REFERENCES tasks(id),
  target_id INTEGER NOT NULL REFERENCES targets(id), run_id INTEGER REFERENCES runs(id),
  config_json TEXT NOT NULL, config_index INTEGER NOT NULL, strategy TEXT NOT NULL,
  protocol_json TEXT NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL,
  costs_json TEXT NOT NULL, number INTEGER NOT NULL, median_s REAL, mean_s REAL,
  build_s REAL NOT NULL, wall_s REAL NOT NULL, timestamp REAL NOT NULL);
CREATE INDEX records_by_task_target_status_median ON records(task_id, target_id, status, median_s);
PRAGMA user_version = 1;
)sql";

void LeaseTestExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "") << sql;
  sqlite3_free(error);
  sqlite3_close(db);
}

std::string LeaseTestQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string result;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text) result = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A pid that no process has now: a child that has exited and been reaped.
int64_t EndedPid() {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

std::unique_ptr<RecordDatabase> OpenLeaseTestDb(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

const RunInfo* FindRun(const std::vector<RunInfo>& runs, int64_t id) {
  for (const RunInfo& r : runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

class RunLeaseTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name = "runs.db") const { return dir_.Join(name); }
  test::TempDir dir_;
};

TEST_F(RunLeaseTest, RunRecordsItsOwnerAndFailedRunsKeepTheirMessage) {
  auto db = OpenLeaseTestDb(Path());
  ASSERT_NE(db, nullptr);
  const double before = WallSeconds();
  absl::StatusOr<int64_t> run = db->StartRun("tune op matmul", "k");
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<std::vector<RunInfo>> runs = db->Runs();
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].status, "running");
  EXPECT_EQ((*runs)[0].host, LocalHostName());
  EXPECT_EQ((*runs)[0].pid, ::getpid());
  EXPECT_GE((*runs)[0].heartbeat, before);

  ASSERT_TRUE(db->FinishRun(*run, "failed", "database is locked").ok());
  runs = db->Runs();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)[0].status, "failed");
  EXPECT_EQ((*runs)[0].message, "database is locked");
  EXPECT_GE((*runs)[0].finished, before);
  EXPECT_EQ(db->FinishRun(*run, "stale").code(), absl::StatusCode::kInvalidArgument);
}

// A run left "running" is listed "stale" once its owner is gone: a process of this host that
// ended (reaped or a zombie), or an owner elsewhere whose heartbeat is older than the limit.
TEST_F(RunLeaseTest, RunsOfGoneOwnersAreListedStale) {
  const std::string path = Path();
  auto db = OpenLeaseTestDb(path);
  ASSERT_NE(db, nullptr);
  std::mt19937_64 rng = test::TestRng();
  const double now = WallSeconds();
  const double fresh = now - std::uniform_real_distribution<double>(0, kStaleAfterS / 2)(rng);
  const double old = now - kStaleAfterS - std::uniform_real_distribution<double>(1, 1e6)(rng);
  const std::string here = LocalHostName();

  const pid_t zombie = ::fork();
  if (zombie == 0) _exit(0);
  ASSERT_GT(zombie, 0);
  // Wait (bounded) until the child has exited; it stays a zombie until reaped below.
  for (int i = 0; i < 1000; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, zombie, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == zombie) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  struct Case {
    std::string host;
    int64_t pid;
    double heartbeat;
    std::string want;
  };
  const std::vector<Case> cases = {
      {here, ::getpid(), fresh, "running"},
      {here, EndedPid(), fresh, "stale"},
      {here, zombie, fresh, "stale"},
      {here, ::getpid(), old, "stale"},
      {"elsewhere.example", 4242, fresh, "running"},
      {"elsewhere.example", 4242, old, "stale"},
      {"", 0, 0, "stale"},  // a run of a version-1 file: no owner known
  };
  std::vector<int64_t> ids;
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> run = db->StartRun("tune resnet-18", "k");
    ASSERT_TRUE(run.ok()) << run.status();
    ids.push_back(*run);
    LeaseTestExec(path, "UPDATE runs SET host = '" + c.host + "', pid = " + std::to_string(c.pid) +
                            ", heartbeat = " + std::to_string(c.heartbeat) + " WHERE id = " + std::to_string(*run));
  }
  absl::StatusOr<std::vector<RunInfo>> runs = db->Runs();
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (size_t i = 0; i < cases.size(); ++i) {
    const RunInfo* r = FindRun(*runs, ids[i]);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status, cases[i].want) << "host '" << cases[i].host << "' pid " << cases[i].pid << " heartbeat "
                                        << now - cases[i].heartbeat << " s ago";
  }
  // Listing does not write: the stored status is still "running".
  EXPECT_EQ(LeaseTestQuery(path, "SELECT count(*) FROM runs WHERE status = 'running'"), std::to_string(cases.size()));
  int status = 0;
  ::waitpid(zombie, &status, 0);

  // A finished run is finished, whatever its owner.
  ASSERT_TRUE(db->FinishRun(ids[1]).ok());
  runs = db->Runs();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(FindRun(*runs, ids[1])->status, "finished");
}

// A lease is exclusive while its holder lives; it is taken over once the holder's process is
// gone or its lease expired, and released when the holder's run ends.
TEST_F(RunLeaseTest, LeaseIsExclusiveUntilItsHolderIsGone) {
  const std::string path = Path();
  auto a = OpenLeaseTestDb(path);
  auto b = OpenLeaseTestDb(path);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::mt19937_64 rng = test::TestRng();
  const int tasks = std::uniform_int_distribution<int>(2, 6)(rng);
  std::vector<int64_t> task_ids;
  for (int i = 0; i < tasks; ++i) {
    absl::StatusOr<int64_t> id = a->UpsertTask({0, "matmul_" + std::to_string(i), "matmul", "{}", 1, 1});
    ASSERT_TRUE(id.ok()) << id.status();
    task_ids.push_back(*id);
  }
  const int64_t target = *a->UpsertTarget({0, "k", "{}"});
  const int64_t other_target = *a->UpsertTarget({0, "k2", "{}"});
  const int64_t run_a = *a->StartRun("a", "k");
  const int64_t run_b = *b->StartRun("b", "k");

  for (int64_t task : task_ids) {
    absl::StatusOr<std::optional<LeaseHolder>> got = a->AcquireLease(task, target, run_a);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(got->has_value());
    got = a->AcquireLease(task, target, run_a);  // held already: still ours
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE(got->has_value());

    absl::StatusOr<std::optional<LeaseHolder>> refused = b->AcquireLease(task, target, run_b);
    ASSERT_TRUE(refused.ok()) << refused.status();
    ASSERT_TRUE(refused->has_value());
    EXPECT_EQ((*refused)->run_id, run_a);
    EXPECT_EQ((*refused)->pid, ::getpid());
    EXPECT_EQ((*refused)->host, LocalHostName());
    EXPECT_GT((*refused)->expires, WallSeconds());

    // Another target is another lease.
    absl::StatusOr<std::optional<LeaseHolder>> elsewhere = b->AcquireLease(task, other_target, run_b);
    ASSERT_TRUE(elsewhere.ok());
    EXPECT_FALSE(elsewhere->has_value());
  }

  // Holder's process gone: the first task's lease is taken over. Expired: the second's.
  LeaseTestExec(path, "UPDATE leases SET pid = " + std::to_string(EndedPid()) +
                          " WHERE task_id = " + std::to_string(task_ids[0]));
  LeaseTestExec(path, "UPDATE leases SET expires = " + std::to_string(WallSeconds() - 1) +
                          " WHERE task_id = " + std::to_string(task_ids[1]));
  for (int i = 0; i < tasks; ++i) {
    absl::StatusOr<std::optional<LeaseHolder>> got = b->AcquireLease(task_ids[i], target, run_b);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->has_value(), i >= 2) << "task " << i;
    absl::StatusOr<std::optional<LeaseHolder>> now = a->Lease(task_ids[i], target);
    ASSERT_TRUE(now.ok() && now->has_value());
    EXPECT_EQ((*now)->run_id, i >= 2 ? run_a : run_b);
  }

  // The heartbeat renews the expiry of a run's leases; ending the run releases them.
  LeaseTestExec(path, "UPDATE leases SET expires = 0 WHERE run_id = " + std::to_string(run_a));
  ASSERT_TRUE(a->Heartbeat(run_a).ok());
  EXPECT_EQ(LeaseTestQuery(path, "SELECT count(*) FROM leases WHERE expires > " + std::to_string(WallSeconds()) +
                                     " AND run_id = " + std::to_string(run_a)),
            std::to_string(tasks - 2));
  ASSERT_TRUE(a->FinishRun(run_a, "interrupted").ok());
  EXPECT_EQ(LeaseTestQuery(path, "SELECT count(*) FROM leases WHERE run_id = " + std::to_string(run_a)), "0");
  for (int64_t task : task_ids) {
    absl::StatusOr<std::optional<LeaseHolder>> got = b->AcquireLease(task, target, run_b);
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE(got->has_value());
  }
}

// RunHeartbeat renews the heartbeat from its own thread, and stops when destroyed.
TEST_F(RunLeaseTest, RunHeartbeatKeepsTheRunAlive) {
  const std::string path = Path();
  auto db = OpenLeaseTestDb(path);
  ASSERT_NE(db, nullptr);
  const int64_t run = *db->StartRun("tune", "k");
  LeaseTestExec(path, "UPDATE runs SET heartbeat = 1 WHERE id = " + std::to_string(run));
  EXPECT_EQ((*db->Runs())[0].status, "stale");
  {
    absl::StatusOr<std::unique_ptr<RunHeartbeat>> beat = RunHeartbeat::Start(path, run, /*interval_s=*/0.05);
    ASSERT_TRUE(beat.ok()) << beat.status();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((*db->Runs())[0].status != "running" && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ((*db->Runs())[0].status, "running");
  }
  // Nothing to keep in memory, and no thread.
  absl::StatusOr<std::unique_ptr<RunHeartbeat>> in_memory = RunHeartbeat::Start(":memory:", 1);
  EXPECT_TRUE(in_memory.ok()) << in_memory.status();
}

// A file of schema version 1 opens: it is upgraded in place, its data kept, its runs left
// "running" listed stale (their owner cannot be known), and leases work on it.
TEST_F(RunLeaseTest, Version1FileIsUpgradedKeepingItsData) {
  const std::string path = Path("v1.db");
  LeaseTestExec(path, kVersion1Schema);
  LeaseTestExec(path,
                "INSERT INTO tasks VALUES (1, 'matmul_8_8_8', 'matmul', '{}', 1024, 1, 1.0);"
                "INSERT INTO targets VALUES (1, 'llvm|x', '{}', 1.0);"
                "INSERT INTO runs VALUES (1, 'tune op matmul', 'llvm|x', 1.0, 2.0, 'finished');"
                "INSERT INTO runs VALUES (2, 'tune op matmul', 'llvm|x', 3.0, 0, 'running');"
                "INSERT INTO records VALUES (1, 1, 1, 1, '{\"t\":1}', 0, 'random', '{}', 'ok', '', '[0.5]', 1, "
                "0.5, 0.5, 0.1, 0.2, 1.5);");
  {
    auto db = OpenLeaseTestDb(path);
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(LeaseTestQuery(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
    absl::StatusOr<std::vector<Record>> records = db->Records(1, 1);
    ASSERT_TRUE(records.ok()) << records.status();
    ASSERT_EQ(records->size(), 1u);
    EXPECT_EQ((*records)[0].config_json, "{\"t\":1}");
    EXPECT_EQ((*records)[0].result.Median(), 0.5);
    absl::StatusOr<std::vector<RunInfo>> runs = db->Runs();
    ASSERT_TRUE(runs.ok()) << runs.status();
    ASSERT_EQ(runs->size(), 2u);
    EXPECT_EQ((*runs)[0].status, "finished");
    EXPECT_EQ((*runs)[1].status, "stale");
    EXPECT_EQ((*runs)[1].pid, 0);
    const int64_t run = *db->StartRun("tune op matmul --resume", "llvm|x");
    absl::StatusOr<std::optional<LeaseHolder>> lease = db->AcquireLease(1, 1, run);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_FALSE(lease->has_value());
  }
  // Opened again: nothing more to upgrade.
  auto again = OpenLeaseTestDb(path);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->Runs()->size(), 3u);
}

// A version-1 file whose tables do not take the upgrade (a runs table that already has an owner
// column) is not one tune wrote: refused as such, and left unchanged.
TEST_F(RunLeaseTest, Version1FileThatCannotBeUpgradedIsRefusedUnchanged) {
  const std::string path = Path("odd_v1.db");
  LeaseTestExec(path, kVersion1Schema);
  LeaseTestExec(path, "ALTER TABLE runs ADD COLUMN host TEXT; INSERT INTO runs VALUES (1, 'c', 'k', 1, 0, 'running', 'h');");
  std::ifstream before_in(path, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(before_in)), std::istreambuf_iterator<char>());
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path, /*create=*/false);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  EXPECT_NE(db.status().message().find("is not a tune database"), std::string::npos) << db.status();
  EXPECT_EQ(db.status().message().find('\n'), std::string::npos) << db.status();
  std::ifstream after_in(path, std::ios::binary);
  const std::string after((std::istreambuf_iterator<char>(after_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, before);
  EXPECT_EQ(LeaseTestQuery(path, "PRAGMA user_version"), "1");
}

}  // namespace
}  // namespace tune::dataset
