// Tests of many connections and processes creating one new record database at the same moment:
// each gets a tune database of the current schema, none calls the file foreign.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dataset/record_database.h"
#include "dataset/schema.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune::test {
namespace {

// PRAGMA user_version of `path` read through a plain connection; -1 when it cannot be read.
int64_t ConcurrentCreateSchemaVersion(const std::string& path) {
  sqlite3* db = nullptr;
  int64_t version = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      version = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return version;
}

// Opens `path` with create and uses it (a task written and read back); "" on success, else
// what went wrong.
std::string ConcurrentCreateOpenAndUse(const std::string& path, const std::string& workload_key) {
  absl::StatusOr<std::unique_ptr<dataset::RecordDatabase>> db = dataset::RecordDatabase::Open(path, /*create=*/true);
  if (!db.ok()) return std::string(db.status().ToString());
  absl::StatusOr<int64_t> task = (*db)->UpsertTask(dataset::TaskInfo{0, workload_key, "matmul", "[8,8,8]", 1024.0, 1});
  if (!task.ok()) return std::string(task.status().ToString());
  absl::StatusOr<std::vector<dataset::TaskInfo>> tasks = (*db)->Tasks();
  if (!tasks.ok()) return std::string(tasks.status().ToString());
  for (const dataset::TaskInfo& t : *tasks) {
    if (t.id == *task && t.workload_key == workload_key) return "";
  }
  return "the task just written is not listed";
}

class ConcurrentCreateTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

// Many threads (one connection each) open the same absent file with create at once, over
// fresh paths: every one succeeds and the file has the current schema version.
TEST_F(ConcurrentCreateTest, ThreadsOpeningOneNewFileTogetherAllGetTheSchema) {
  std::mt19937_64 rng = TestRng(17);
  for (int round = 0; round < 20; ++round) {
    const int openers = std::uniform_int_distribution<int>(8, 16)(rng);
    const std::string path = dir_.Join("threads_" + std::to_string(round) + "_" + std::to_string(rng() % 100000) + ".db");
    std::atomic<int> waiting{openers};
    std::vector<std::string> errors(openers);
    std::vector<std::thread> threads;
    for (int i = 0; i < openers; ++i) {
      threads.emplace_back([&, i] {
        waiting.fetch_sub(1);
        while (waiting.load() > 0) std::this_thread::yield();  // all start together
        errors[i] = ConcurrentCreateOpenAndUse(path, "thread-" + std::to_string(i));
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < openers; ++i) EXPECT_EQ(errors[i], "") << "round " << round << ", opener " << i;
    EXPECT_EQ(ConcurrentCreateSchemaVersion(path), dataset::kSchemaVersion) << path;
  }
}

// Many processes open the same absent file with create at once (released together by closing
// a pipe they all block on), over fresh paths: every one succeeds and writes its task.
TEST_F(ConcurrentCreateTest, ProcessesOpeningOneNewFileTogetherAllGetTheSchema) {
  std::mt19937_64 rng = TestRng(18);
  for (int round = 0; round < 20; ++round) {
    const int openers = std::uniform_int_distribution<int>(8, 16)(rng);
    const std::string path = dir_.Join("procs_" + std::to_string(round) + "_" + std::to_string(rng() % 100000) + ".db");
    int gate[2];
    ASSERT_EQ(::pipe(gate), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < openers; ++i) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(gate[1]);
        char byte;
        while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
        }
        const std::string error = ConcurrentCreateOpenAndUse(path, "process-" + std::to_string(i));
        if (!error.empty()) {
          const std::string line = "opener " + std::to_string(i) + ": " + error + "\n";
          (void)!::write(STDERR_FILENO, line.data(), line.size());
        }
        _exit(error.empty() ? 0 : 1);
      }
      children.push_back(pid);
    }
    ::close(gate[0]);
    ::close(gate[1]);  // end of file for every child at once: they all open now
    int failed = 0;
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    EXPECT_EQ(failed, 0) << "round " << round << ": " << failed << " of " << openers << " openers failed";
    EXPECT_EQ(ConcurrentCreateSchemaVersion(path), dataset::kSchemaVersion) << path;
    absl::StatusOr<std::unique_ptr<dataset::RecordDatabase>> db = dataset::RecordDatabase::Open(path, /*create=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    absl::StatusOr<std::vector<dataset::TaskInfo>> tasks = (*db)->Tasks();
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    EXPECT_EQ(static_cast<int>(tasks->size()), openers - failed) << "round " << round;
  }
}

}  // namespace
}  // namespace tune::test
