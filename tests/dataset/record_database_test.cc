// Tests of RecordDatabase: schema, validation of foreign files, round trips, atomic batches.
#include "dataset/record_database.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "dataset/schema.h"
#include "gtest/gtest.h"

namespace tune::dataset {
namespace {

namespace fs = std::filesystem;
using measure::MeasureStatus;

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// Runs SQL on a file through the raw C API (to build foreign databases and inspect ours).
void RawExec(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

std::string RawQueryText(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string result;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text) result = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

class RecordDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "record_db_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string DbPath(const std::string& name = "records.db") const {
    return (dir_ / name).string();
  }

  static std::unique_ptr<RecordDatabase> MustOpen(const std::string& path) {
    absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? *std::move(db) : nullptr;
  }

  static TaskInfo Task(const std::string& key, int version = 1) {
    TaskInfo task;
    task.workload_key = key;
    task.op = "matmul";
    task.shape_json = R"({"M":64,"N":64,"K":64})";
    task.flops = 2.0 * 64 * 64 * 64;
    task.template_version = version;
    return task;
  }

  static TargetInfo Target(const std::string& key) {
    TargetInfo target;
    target.key = key;
    target.json = R"({"kind":"llvm"})";
    return target;
  }

  static Record Rec(int64_t task_id, int64_t target_id, MeasureStatus status,
                    std::vector<double> costs, uint64_t index = 0) {
    Record r;
    r.task_id = task_id;
    r.target_id = target_id;
    r.config_json = R"({"tile":)" + std::to_string(index) + "}";
    r.config_index = index;
    r.strategy = "random";
    r.protocol_json = measure::MeasureProtocol().ToJson();
    r.result.status = status;
    r.result.costs_s = std::move(costs);
    r.result.number = 4;
    if (status != MeasureStatus::kOk) r.result.message = "failed: " + measure::StatusName(status);
    return r;
  }

  fs::path dir_;
};

TEST_F(RecordDatabaseTest, CreatesSchemaAndReopens) {
  const std::string path = DbPath();
  int64_t task_id = 0;
  {
    auto db = MustOpen(path);
    ASSERT_NE(db, nullptr);
    absl::StatusOr<int64_t> id = db->UpsertTask(Task("matmul_64"));
    ASSERT_TRUE(id.ok()) << id.status();
    task_id = *id;
  }
  EXPECT_EQ(RawQueryText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  for (const char* table : {"tasks", "targets", "runs", "records", "leases"}) {
    EXPECT_EQ(RawQueryText(path, std::string("SELECT count(*) FROM sqlite_master WHERE "
                                             "type='table' AND name='") + table + "'"),
              "1")
        << table;
  }
  EXPECT_EQ(RawQueryText(path, "SELECT count(*) FROM sqlite_master WHERE type='index' AND "
                               "sql LIKE '%task_id, target_id, status, median_s%'"),
            "1");

  absl::StatusOr<std::unique_ptr<RecordDatabase>> again = RecordDatabase::Open(path, false);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<std::vector<TaskInfo>> tasks = (*again)->Tasks();
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].id, task_id);
  EXPECT_EQ((*tasks)[0].workload_key, "matmul_64");
  EXPECT_EQ((*tasks)[0].op, "matmul");
  EXPECT_EQ((*tasks)[0].shape_json, R"({"M":64,"N":64,"K":64})");
  EXPECT_EQ((*tasks)[0].flops, 2.0 * 64 * 64 * 64);
  EXPECT_EQ((*tasks)[0].template_version, 1);
}

TEST_F(RecordDatabaseTest, WalModeIsOn) {
  const std::string path = DbPath();
  auto db = MustOpen(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(RawQueryText(path, "PRAGMA journal_mode"), "wal");
}

TEST_F(RecordDatabaseTest, InMemoryWorks) {
  auto db = MustOpen(":memory:");
  ASSERT_NE(db, nullptr);
  absl::StatusOr<int64_t> task = db->UpsertTask(Task("t"));
  absl::StatusOr<int64_t> target = db->UpsertTarget(Target("llvm|x"));
  ASSERT_TRUE(task.ok() && target.ok());
  std::vector<Record> records = {Rec(*task, *target, MeasureStatus::kOk, {1.0})};
  ASSERT_TRUE(db->AddRecords(records).ok());
  EXPECT_EQ(db->Records(*task, *target)->size(), 1u);
}

TEST_F(RecordDatabaseTest, UpsertIsIdempotent) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  absl::StatusOr<int64_t> a = db->UpsertTask(Task("conv_1"));
  absl::StatusOr<int64_t> b = db->UpsertTask(Task("conv_1"));
  absl::StatusOr<int64_t> other_version = db->UpsertTask(Task("conv_1", 2));
  absl::StatusOr<int64_t> other_key = db->UpsertTask(Task("conv_2"));
  ASSERT_TRUE(a.ok() && b.ok() && other_version.ok() && other_key.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *other_version);
  EXPECT_NE(*a, *other_key);
  EXPECT_EQ(db->Tasks()->size(), 3u);

  absl::StatusOr<int64_t> t1 = db->UpsertTarget(Target("llvm|znver3"));
  absl::StatusOr<int64_t> t2 = db->UpsertTarget(Target("llvm|znver3"));
  absl::StatusOr<int64_t> t3 = db->UpsertTarget(Target("llvm|skylake"));
  ASSERT_TRUE(t1.ok() && t2.ok() && t3.ok());
  EXPECT_EQ(*t1, *t2);
  EXPECT_NE(*t1, *t3);
  EXPECT_EQ(db->Targets()->size(), 2u);

  absl::StatusOr<std::optional<TaskInfo>> found = db->FindTask("conv_1", 2);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id, *other_version);
  EXPECT_FALSE(db->FindTask("conv_1", 3)->has_value());
  absl::StatusOr<std::optional<TargetInfo>> target = db->FindTarget("llvm|skylake");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->id, *t3);
  EXPECT_EQ((*target)->json, R"({"kind":"llvm"})");
  EXPECT_FALSE(db->FindTarget("cuda|a100")->has_value());
}

TEST_F(RecordDatabaseTest, RecordsRoundTripAllFields) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  absl::StatusOr<int64_t> run = db->StartRun("tune resnet-18 --target llvm", "k");
  ASSERT_TRUE(run.ok()) << run.status();

  measure::MeasureProtocol protocol;
  protocol.repeats = 3;
  protocol.flush_cache = true;
  Record ok = Rec(task, target, MeasureStatus::kOk, {1.25e-4, 0.1 + 0.2, 1.0 / 3.0},
                  0xFFFFFFFFFFFFFFF0ull);
  ok.run_id = *run;
  ok.strategy = "evolutionary";
  ok.protocol_json = protocol.ToJson();
  ok.result.number = 17;
  ok.result.build_s = 0.375;
  ok.result.wall_s = 1.5;
  ok.timestamp = 1700000000.25;
  Record bad = Rec(task, target, MeasureStatus::kCompileError, {}, 7);
  bad.result.message = "error: 'x' \"quoted\"\nsecond line";
  std::vector<Record> batch = {ok, bad};
  const double before = 1e9;  // any sane clock is past 2001
  ASSERT_TRUE(db->AddRecords(batch).ok());
  EXPECT_GT(batch[0].id, 0);
  EXPECT_GT(batch[1].id, batch[0].id);
  EXPECT_EQ(batch[0].timestamp, 1700000000.25);  // kept when given
  EXPECT_GT(batch[1].timestamp, before);         // set by the database when 0

  absl::StatusOr<std::vector<Record>> back = db->Records(task, target);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  const Record& r = (*back)[0];  // oldest first
  EXPECT_EQ(r.id, batch[0].id);
  EXPECT_EQ(r.task_id, task);
  EXPECT_EQ(r.target_id, target);
  EXPECT_EQ(r.run_id, *run);
  EXPECT_EQ(r.config_json, ok.config_json);
  EXPECT_EQ(r.config_index, 0xFFFFFFFFFFFFFFF0ull);
  EXPECT_EQ(r.strategy, "evolutionary");
  EXPECT_EQ(r.protocol_json, protocol.ToJson());
  absl::StatusOr<measure::MeasureProtocol> p = measure::MeasureProtocol::FromJson(r.protocol_json);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->repeats, 3);
  EXPECT_TRUE(p->flush_cache);
  EXPECT_EQ(r.result.status, MeasureStatus::kOk);
  EXPECT_EQ(r.result.message, "");
  EXPECT_EQ(r.result.costs_s, ok.result.costs_s);  // raw samples, bit-exact and in order
  EXPECT_EQ(r.result.number, 17);
  EXPECT_EQ(r.result.build_s, 0.375);
  EXPECT_EQ(r.result.wall_s, 1.5);
  EXPECT_EQ(r.timestamp, 1700000000.25);

  const Record& f = (*back)[1];
  EXPECT_EQ(f.id, batch[1].id);
  EXPECT_EQ(f.run_id, 0);
  EXPECT_EQ(f.config_index, 7u);
  EXPECT_EQ(f.result.status, MeasureStatus::kCompileError);
  EXPECT_EQ(f.result.message, "error: 'x' \"quoted\"\nsecond line");
  EXPECT_TRUE(f.result.costs_s.empty());
  EXPECT_EQ(f.timestamp, batch[1].timestamp);

  EXPECT_TRUE(db->FinishRun(*run).ok());
  EXPECT_EQ(db->FinishRun(*run + 100).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(RawQueryText(DbPath(), "SELECT status FROM runs WHERE id = " + std::to_string(*run)),
            "finished");
}

TEST_F(RecordDatabaseTest, BestOrdersOkRecordsAndIgnoresFailures) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t other_task = *db->UpsertTask(Task("u"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  std::vector<Record> batch = {
      Rec(task, target, MeasureStatus::kOk, {3e-3, 3e-3, 9.0}, 1),   // median 3e-3
      Rec(task, target, MeasureStatus::kWrongResult, {1e-9}, 2),      // fast but wrong
      Rec(task, target, MeasureStatus::kOk, {1e-3, 2e-3, 1.5e-3}, 3), // median 1.5e-3
      Rec(task, target, MeasureStatus::kTimeout, {}, 4),
      Rec(task, target, MeasureStatus::kOk, {}, 5),                   // ok but no samples
      Rec(task, target, MeasureStatus::kOk, {2e-3}, 6),               // median 2e-3
      Rec(other_task, target, MeasureStatus::kOk, {1e-6}, 7),         // another task
  };
  ASSERT_TRUE(db->AddRecords(batch).ok());

  absl::StatusOr<std::vector<Record>> best = db->Best(task, target, 10);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(best->size(), 3u);
  EXPECT_EQ((*best)[0].config_index, 3u);
  EXPECT_EQ((*best)[1].config_index, 6u);
  EXPECT_EQ((*best)[2].config_index, 1u);

  absl::StatusOr<std::vector<Record>> top = db->Best(task, target);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ((*top)[0].config_index, 3u);
  EXPECT_TRUE(db->Best(task, target + 1)->empty());
}

// A config measured more than once (finalists, another run) takes one of the k places, as its
// fastest record.
TEST_F(RecordDatabaseTest, BestListsEachConfigOnceAtItsFastestRecord) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  std::vector<Record> batch = {
      Rec(task, target, MeasureStatus::kOk, {2e-3}, 1),
      Rec(task, target, MeasureStatus::kOk, {1e-3}, 1),  // config 1 again, faster
      Rec(task, target, MeasureStatus::kOk, {3e-3}, 1),  // and slower
      Rec(task, target, MeasureStatus::kOk, {1.5e-3}, 2),
      Rec(task, target, MeasureStatus::kOk, {1.2e-3}, 2),
      Rec(task, target, MeasureStatus::kOk, {4e-3}, 3),
  };
  ASSERT_TRUE(db->AddRecords(batch).ok());
  absl::StatusOr<std::vector<Record>> best = db->Best(task, target, 3);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_EQ(best->size(), 3u);
  EXPECT_EQ((*best)[0].config_index, 1u);
  EXPECT_DOUBLE_EQ((*best)[0].result.Median(), 1e-3);
  EXPECT_EQ((*best)[1].config_index, 2u);
  EXPECT_DOUBLE_EQ((*best)[1].result.Median(), 1.2e-3);
  EXPECT_EQ((*best)[2].config_index, 3u);
  EXPECT_EQ(db->Best(task, target, 10)->size(), 3u);
}

// A run's finalists timed side by side outrank single records from other moments of a
// drifting host: a config ranks after every config that beat it in the last side-by-side group
// it was in, however fast its own record; a later group's verdict replaces an earlier one;
// finalists not timed interleaved, and configs never compared, keep their place by their
// fastest record.
TEST_F(RecordDatabaseTest, BestTakesTheVerdictOfTheFinalistsTimedSideBySide) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  const absl::StatusOr<int64_t> run1 = db->StartRun("tune t", "k");
  const absl::StatusOr<int64_t> run2 = db->StartRun("tune t", "k");
  ASSERT_TRUE(run1.ok() && run2.ok());
  measure::MeasureProtocol interleaved;
  interleaved.interleave = true;
  auto finalist = [&](int64_t run, uint64_t index, double median_s, bool side_by_side = true) {
    Record r = Rec(task, target, MeasureStatus::kOk, {median_s}, index);
    r.run_id = run;
    r.strategy = kFinalistStrategy;
    if (side_by_side) r.protocol_json = interleaved.ToJson();
    return r;
  };
  auto order = [&](int k) {
    std::vector<uint64_t> out;
    absl::StatusOr<std::vector<Record>> best = db->Best(task, target, k);
    EXPECT_TRUE(best.ok()) << best.status();
    if (best.ok()) {
      for (const Record& r : *best) out.push_back(r.config_index);
    }
    return out;
  };

  // The search's records, each at its own moment: config 1 looks fastest.
  std::vector<Record> search = {
      Rec(task, target, MeasureStatus::kOk, {1.593e-3}, 1), Rec(task, target, MeasureStatus::kOk, {1.602e-3}, 2),
      Rec(task, target, MeasureStatus::kOk, {1.616e-3}, 3), Rec(task, target, MeasureStatus::kOk, {1.700e-3}, 4),
      Rec(task, target, MeasureStatus::kOk, {1.610e-3}, 5)};
  ASSERT_TRUE(db->AddRecords(search).ok());
  // Finalists not timed side by side say nothing over the records.
  std::vector<Record> apart = {finalist(*run1, 3, 2.0e-3, false), finalist(*run1, 1, 2.5e-3, false)};
  ASSERT_TRUE(db->AddRecords(apart).ok());
  EXPECT_EQ(order(5), (std::vector<uint64_t>{1, 2, 5, 3, 4}));

  // Side by side, config 3 beats 1 and 2 (all slower at that moment); 4 and 5 were not there.
  std::vector<Record> group1 = {finalist(*run1, 1, 2.760e-3), finalist(*run1, 2, 2.761e-3),
                                finalist(*run1, 3, 2.453e-3)};
  ASSERT_TRUE(db->AddRecords(group1).ok());
  EXPECT_EQ(order(5), (std::vector<uint64_t>{5, 3, 1, 2, 4}));
  absl::StatusOr<std::vector<Record>> top = db->Best(task, target);
  ASSERT_TRUE(top.ok() && top->size() == 1u);
  EXPECT_EQ((*top)[0].config_index, 5u);
  // The winner is listed at its fastest record (the search's), not the side-by-side one.
  absl::StatusOr<std::vector<Record>> two = db->Best(task, target, 2);
  ASSERT_TRUE(two.ok() && two->size() == 2u);
  EXPECT_DOUBLE_EQ((*two)[1].result.Median(), 1.616e-3);

  // A later group where 1 beats 3, and 3 beats 5: its verdict stands; 2 keeps the verdict of
  // its last group (after 3 and 1).
  std::vector<Record> group2 = {finalist(*run2, 5, 3.1e-3), finalist(*run2, 3, 3.0e-3), finalist(*run2, 1, 2.9e-3)};
  ASSERT_TRUE(db->AddRecords(group2).ok());
  EXPECT_EQ(order(5), (std::vector<uint64_t>{1, 3, 2, 5, 4}));
  EXPECT_EQ(order(1), (std::vector<uint64_t>{1}));
  EXPECT_EQ(order(2), (std::vector<uint64_t>{1, 3}));
}

// RecentRecords is the tail of Records (by timestamp, then id), newest first, without the
// skipped strategy's records, the other tasks' and targets', cut to the limit after the offset:
// pages of it put together are that whole tail.
TEST_F(RecordDatabaseTest, RecentRecordsAreTheNewestOnesInPages) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  std::mt19937 rng(std::random_device{}());
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t other_task = *db->UpsertTask(Task("u"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  const int64_t other_target = *db->UpsertTarget(Target("j"));
  const char* strategies[] = {"random", "default", "sa", "transfer"};
  const MeasureStatus statuses[] = {MeasureStatus::kOk, MeasureStatus::kTimeout, MeasureStatus::kCompileError};
  const int n = 40 + static_cast<int>(rng() % 80);
  std::vector<Record> batch;
  for (int i = 0; i < n; ++i) {
    const int which = static_cast<int>(rng() % 6);  // mostly the task on the target
    Record r = Rec(which == 0 ? other_task : task, which == 1 ? other_target : target, statuses[rng() % 3],
                   {1e-3 * (1 + static_cast<double>(rng() % 100))}, static_cast<uint64_t>(i));
    r.strategy = strategies[rng() % 4];
    r.timestamp = 1.7e9 + static_cast<double>(rng() % 20);  // out of id order, with ties
    batch.push_back(std::move(r));
  }
  ASSERT_TRUE(db->AddRecords(batch).ok());

  absl::StatusOr<std::vector<Record>> all = db->Records(task, target);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<uint64_t> want;  // newest first, no "default"
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (it->strategy != "default") want.push_back(it->config_index);
  }
  ASSERT_GT(want.size(), 4u);

  auto indices = [](const std::vector<Record>& records) {
    std::vector<uint64_t> out;
    for (const Record& r : records) out.push_back(r.config_index);
    return out;
  };
  const int limit = 1 + static_cast<int>(rng() % (want.size() - 1));
  absl::StatusOr<std::vector<Record>> first = db->RecentRecords(task, target, limit, "default");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(indices(*first), std::vector<uint64_t>(want.begin(), want.begin() + limit));
  for (const Record& r : *first) {
    EXPECT_EQ(r.task_id, task);
    EXPECT_EQ(r.target_id, target);
    EXPECT_NE(r.strategy, "default");
  }

  std::vector<uint64_t> paged;
  const int page = 1 + static_cast<int>(rng() % 7);
  for (int64_t offset = 0;; offset += page) {
    absl::StatusOr<std::vector<Record>> part = db->RecentRecords(task, target, page, "default", offset);
    ASSERT_TRUE(part.ok()) << part.status();
    ASSERT_LE(part->size(), static_cast<size_t>(page));
    for (uint64_t i : indices(*part)) paged.push_back(i);
    if (part->size() < static_cast<size_t>(page)) break;
  }
  EXPECT_EQ(paged, want);

  absl::StatusOr<std::vector<Record>> everything = db->RecentRecords(task, target, n + 1);  // nothing skipped
  ASSERT_TRUE(everything.ok()) << everything.status();
  EXPECT_EQ(everything->size(), all->size());
  EXPECT_TRUE(db->RecentRecords(task, target, 0)->empty());
}

TEST_F(RecordDatabaseTest, AddRecordsIsAtomic) {
  const std::string path = DbPath();
  auto db = MustOpen(path);
  ASSERT_NE(db, nullptr);
  const int64_t task = *db->UpsertTask(Task("t"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  std::vector<Record> batch = {
      Rec(task, target, MeasureStatus::kOk, {1.0}, 1),
      Rec(task, target, MeasureStatus::kOk, {2.0}, 2),
      Rec(task + 999, target, MeasureStatus::kOk, {3.0}, 3),  // no such task
  };
  absl::Status status = db->AddRecords(batch);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("FOREIGN KEY"), std::string::npos) << status;
  EXPECT_EQ(batch[0].id, 0);  // ids only filled on commit
  EXPECT_EQ(batch[0].timestamp, 0);
  EXPECT_TRUE(db->Records(task, target)->empty());
  EXPECT_EQ(RawQueryText(path, "SELECT count(*) FROM records"), "0");

  // The handle is still usable after the rollback.
  batch.pop_back();
  ASSERT_TRUE(db->AddRecords(batch).ok());
  EXPECT_EQ(db->Records(task, target)->size(), 2u);

  // A bad target or run id fails the same way.
  std::vector<Record> bad_target = {Rec(task, target + 5, MeasureStatus::kOk, {1.0})};
  EXPECT_FALSE(db->AddRecords(bad_target).ok());
  std::vector<Record> bad_run = {Rec(task, target, MeasureStatus::kOk, {1.0})};
  bad_run[0].run_id = 42;
  EXPECT_FALSE(db->AddRecords(bad_run).ok());
  EXPECT_EQ(db->Records(task, target)->size(), 2u);

  std::vector<Record> none;
  EXPECT_TRUE(db->AddRecords(none).ok());
}

TEST_F(RecordDatabaseTest, CorruptFileIsRejectedAndUnchanged) {
  const std::string path = DbPath("random.db");
  std::mt19937 rng(12345);
  std::string bytes(8192, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  WriteBytes(path, bytes);
  for (bool create : {true, false}) {
    absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path, create);
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
    EXPECT_NE(db.status().message().find("not a tune database"), std::string::npos)
        << db.status();
    EXPECT_EQ(db.status().message().find('\n'), std::string::npos);
  }
  EXPECT_EQ(ReadBytes(path), bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(RecordDatabaseTest, TextFileIsRejectedAndUnchanged) {
  const std::string path = DbPath("notes.txt");
  const std::string text = "these are my notes\nnot a database\n";
  WriteBytes(path, text);
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status();
  EXPECT_EQ(ReadBytes(path), text);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(RecordDatabaseTest, ForeignSqliteDatabaseIsRejectedAndUnchanged) {
  const std::string path = DbPath("other_app.db");
  RawExec(path, "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT);"
                "INSERT INTO photos(name) VALUES ('cat.jpg');");
  const std::string before = ReadBytes(path);
  ASSERT_FALSE(before.empty());
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  EXPECT_NE(db.status().message().find("not a tune database"), std::string::npos);
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_EQ(RawQueryText(path, "PRAGMA journal_mode"), "delete");
  EXPECT_EQ(RawQueryText(path, "SELECT count(*) FROM sqlite_master WHERE name='records'"), "0");

  // Same version number as ours but without our tables: still foreign.
  const std::string versioned = DbPath("versioned.db");
  RawExec(versioned, "CREATE TABLE t(x); PRAGMA user_version = 1;");
  const std::string versioned_before = ReadBytes(versioned);
  EXPECT_EQ(RecordDatabase::Open(versioned).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadBytes(versioned), versioned_before);
}

TEST_F(RecordDatabaseTest, NewerSchemaIsRejectedAndUnchanged) {
  const std::string path = DbPath();
  { ASSERT_NE(MustOpen(path), nullptr); }
  RawExec(path, "PRAGMA user_version = " + std::to_string(kSchemaVersion + 1) + ";");
  const std::string before = ReadBytes(path);
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  EXPECT_NE(db.status().message().find("newer"), std::string::npos) << db.status();
  EXPECT_EQ(ReadBytes(path), before);
}

TEST_F(RecordDatabaseTest, UncreatablePathFailsWithoutLeavingAFile) {
  const fs::path missing_dir = dir_ / "no" / "such" / "dir";
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db =
      RecordDatabase::Open((missing_dir / "x.db").string());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable) << db.status();
  EXPECT_FALSE(fs::exists(dir_ / "no"));

  absl::StatusOr<std::unique_ptr<RecordDatabase>> in_proc =
      RecordDatabase::Open("/proc/tune_record_db_test.db");
  ASSERT_FALSE(in_proc.ok());
  EXPECT_EQ(in_proc.status().code(), absl::StatusCode::kUnavailable) << in_proc.status();
  EXPECT_FALSE(fs::exists("/proc/tune_record_db_test.db"));

  // A directory where the file should be.
  fs::create_directory(dir_ / "a_dir.db");
  EXPECT_FALSE(RecordDatabase::Open((dir_ / "a_dir.db").string()).ok());
  EXPECT_TRUE(fs::is_directory(dir_ / "a_dir.db"));
}

TEST_F(RecordDatabaseTest, OpenWithoutCreateOnMissingIsNotFound) {
  const std::string path = DbPath("missing.db");
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path, false);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kNotFound) << db.status();
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(RecordDatabaseTest, EmptyFileIsInitializedOnlyWithCreate) {
  const std::string path = DbPath("empty.db");
  WriteBytes(path, "");
  EXPECT_EQ(RecordDatabase::Open(path, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs::file_size(path), 0u);
  auto db = MustOpen(path);
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(db->UpsertTask(Task("t")).ok());
}

TEST_F(RecordDatabaseTest, TwoHandlesSeeEachOthersCommits) {
  const std::string path = DbPath();
  auto a = MustOpen(path);
  auto b = MustOpen(path);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int64_t task = *a->UpsertTask(Task("t"));
  const int64_t target = *a->UpsertTarget(Target("k"));
  EXPECT_EQ(*b->UpsertTask(Task("t")), task);
  EXPECT_EQ(*b->UpsertTarget(Target("k")), target);

  std::vector<Record> from_a = {Rec(task, target, MeasureStatus::kOk, {2.0}, 1)};
  ASSERT_TRUE(a->AddRecords(from_a).ok());
  EXPECT_EQ(b->Records(task, target)->size(), 1u);

  std::vector<Record> from_b = {Rec(task, target, MeasureStatus::kOk, {1.0}, 2)};
  ASSERT_TRUE(b->AddRecords(from_b).ok());
  absl::StatusOr<std::vector<Record>> best = a->Best(task, target);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].id, from_b[0].id);
}

TEST_F(RecordDatabaseTest, StatusCounts) {
  auto db = MustOpen(DbPath());
  ASSERT_NE(db, nullptr);
  const int64_t t1 = *db->UpsertTask(Task("t1"));
  const int64_t t2 = *db->UpsertTask(Task("t2"));
  const int64_t target = *db->UpsertTarget(Target("k"));
  std::vector<Record> batch = {
      Rec(t1, target, MeasureStatus::kOk, {1.0}),
      Rec(t1, target, MeasureStatus::kOk, {2.0}),
      Rec(t1, target, MeasureStatus::kTimeout, {}),
      Rec(t2, target, MeasureStatus::kCompileError, {}),
      Rec(t2, target, MeasureStatus::kOk, {1.0}),
  };
  ASSERT_TRUE(db->AddRecords(batch).ok());
  using Counts = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(*db->StatusCounts(), (Counts{{"compile_error", 1}, {"ok", 3}, {"timeout", 1}}));
  EXPECT_EQ(*db->StatusCounts(t1), (Counts{{"ok", 2}, {"timeout", 1}}));
  EXPECT_EQ(*db->StatusCounts(t2, target), (Counts{{"compile_error", 1}, {"ok", 1}}));
  EXPECT_TRUE(db->StatusCounts(t1, target + 1)->empty());
}

// A connection's page cache bound is its own: set on one connection, the file's other
// connections keep SQLite's default.
TEST_F(RecordDatabaseTest, CacheBoundIsPerConnection) {
  auto a = MustOpen(DbPath());
  auto b = MustOpen(DbPath());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<int64_t> before = b->CacheKiB();
  ASSERT_TRUE(before.ok()) << before.status();
  std::mt19937 rng(std::random_device{}());
  const int64_t kib = 16 + static_cast<int64_t>(rng() % 1000);
  ASSERT_NE(kib, *before);
  ASSERT_TRUE(a->SetCacheKiB(kib).ok());
  absl::StatusOr<int64_t> set = a->CacheKiB();
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, kib);
  absl::StatusOr<int64_t> other = b->CacheKiB();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, *before);
}

}  // namespace
}  // namespace tune::dataset
