// Tests of JobStore: jobs round-trip with their trial counts; older jobs tables keep working.
#include "server/job_store.h"

#include <string>

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

}  // namespace
}  // namespace tune::server
