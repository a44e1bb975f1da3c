// Tests of JobStore: jobs round-trip with their trial counts; older jobs tables keep working.
#include "server/job_store.h"

#include <random>
#include <string>
#include <vector>

#include "dataset/schema.h"
#include "dataset/sqlite.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace tune::server {
namespace {

std::unique_ptr<JobStore> MustOpen(const std::string& path) {
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// A file without a jobs table lists no jobs; a job's trial counts are stored with its final
// state and kept when a later update gives none.
TEST(JobStoreTest, JobTrialsAreStoredWithTheFinalState) {
  test::TempDir dir;
  auto store = MustOpen(dir.Join("records.db"));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRow>> jobs = store->List();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->empty());
  absl::StatusOr<int64_t> id = store->Add("{}", "queued");
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(store->SetState(*id, "running", "").ok());
  ASSERT_TRUE(store->SetState(*id, "done", "", 17, 18).ok());
  ASSERT_TRUE(store->SetState(*id, "done", "again").ok());  // no counts: the stored ones stay
  jobs = store->List();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state, "done");
  EXPECT_EQ((*jobs)[0].message, "again");
  EXPECT_EQ((*jobs)[0].trials_done, 17);
  EXPECT_EQ((*jobs)[0].trials_total, 18);
}

// A jobs table made before the trial columns existed reads as 0 trials and gains them at the
// next state change.
TEST(JobStoreTest, OldJobTablesGainTheTrialColumns) {
  test::TempDir dir;
  const std::string old = dir.Join("old.db");
  {
    absl::StatusOr<dataset::SqliteConnection> db = dataset::OpenWithSchema(old, /*create=*/true);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(dataset::Exec(db->get(),
                              "CREATE TABLE jobs(id INTEGER PRIMARY KEY, request_json TEXT NOT NULL, "
                              "state TEXT NOT NULL, message TEXT NOT NULL, submitted REAL NOT NULL); "
                              "INSERT INTO jobs VALUES (1, '{}', 'done', '', 1.5)")
                    .ok());
  }
  auto store = MustOpen(old);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobRow>> jobs = store->List();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].trials_done, 0);
  EXPECT_EQ((*jobs)[0].submitted, 1.5);
  ASSERT_TRUE(store->SetState(1, "done", "", 4, 6).ok());
  jobs = store->List();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].trials_done, 4);
  EXPECT_EQ((*jobs)[0].trials_total, 6);
  absl::StatusOr<int64_t> next = store->Add("{}", "queued");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 2);
}

// The store refuses a file that is not a record database, as RecordDatabase does.
TEST(JobStoreTest, RefusesForeignFiles) {
  test::TempDir dir;
  const std::string path = dir.Join("foreign.db");
  {
    absl::StatusOr<dataset::SqliteConnection> db = dataset::SqliteConnection::Open(path, /*create=*/true);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(dataset::Exec(db->get(), "CREATE TABLE notes(x)").ok());
  }
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
}

// A job is read by its id alone: one row, the right one, however many jobs are stored; an id
// not stored (or a file without jobs) reads as none.
TEST(JobStoreTest, GetReadsOneJobByItsId) {
  test::TempDir dir;
  auto store = MustOpen(dir.Join("records.db"));
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::optional<JobRow>> none = store->Get(1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  std::mt19937 rng(std::random_device{}());
  const int n = 40 + static_cast<int>(rng() % 40);
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<int64_t> id = store->Add("{\"n\": " + std::to_string(i) + "}", "queued");
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(store->SetState(*id, i % 2 ? "done" : "cancelled", "m" + std::to_string(i), i, i + 1).ok());
    ids.push_back(*id);
  }
  for (int k = 0; k < 8; ++k) {
    const int i = static_cast<int>(rng() % ids.size());
    const int64_t before = store->RowsRead();
    absl::StatusOr<std::optional<JobRow>> job = store->Get(ids[i]);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE(job->has_value()) << "job " << ids[i];
    EXPECT_EQ(store->RowsRead() - before, 1) << "rows read to find one job of " << n;
    EXPECT_EQ((*job)->id, ids[i]);
    EXPECT_EQ((*job)->request_json, "{\"n\": " + std::to_string(i) + "}");
    EXPECT_EQ((*job)->state, i % 2 ? "done" : "cancelled");
    EXPECT_EQ((*job)->message, "m" + std::to_string(i));
    EXPECT_EQ((*job)->trials_done, i);
    EXPECT_EQ((*job)->trials_total, i + 1);
  }
  const int64_t before = store->RowsRead();
  none = store->Get(ids.back() + 1 + static_cast<int64_t>(rng() % 100));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store->RowsRead(), before);
}

// List's pages, each starting after the last id of the one before, are List's rows in order.
TEST(JobStoreTest, ListPagesFollowEachOther) {
  test::TempDir dir;
  auto store = MustOpen(dir.Join("records.db"));
  ASSERT_NE(store, nullptr);
  std::mt19937 rng(std::random_device{}());
  const int n = 20 + static_cast<int>(rng() % 30);
  for (int i = 0; i < n; ++i) ASSERT_TRUE(store->Add("{\"n\": " + std::to_string(i) + "}", "queued").ok());
  absl::StatusOr<std::vector<JobRow>> all = store->List();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), static_cast<size_t>(n));
  const int64_t page = 1 + static_cast<int64_t>(rng() % 7);
  std::vector<JobRow> paged;
  for (int64_t after = 0;;) {
    absl::StatusOr<std::vector<JobRow>> rows = store->List(after, page);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_LE(static_cast<int64_t>(rows->size()), page);
    if (rows->empty()) break;
    after = rows->back().id;
    paged.insert(paged.end(), rows->begin(), rows->end());
  }
  ASSERT_EQ(paged.size(), all->size());
  for (size_t i = 0; i < paged.size(); ++i) {
    EXPECT_EQ(paged[i].id, (*all)[i].id);
    EXPECT_EQ(paged[i].request_json, (*all)[i].request_json);
  }
}

}  // namespace
}  // namespace tune::server
