// SqliteConnection: the settings every connection of the record database opens with.
#include "dataset/sqlite.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace tune::test {
namespace {

// A writer waits kBusyTimeoutMs (a minute) for another connection's lock, not SQLite's default
// of failing at once nor the 5 s that failed a job under an hour's load.
TEST(SqliteConnectionTest, WritersWaitAMinuteForTheLock) {
  EXPECT_GE(dataset::kBusyTimeoutMs, 30000);
  TempDir dir;
  absl::StatusOr<dataset::SqliteConnection> c = dataset::SqliteConnection::Open(dir.Join("busy.db"), true);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<dataset::Statement> pragma = dataset::Statement::Prepare(c->get(), "PRAGMA busy_timeout");
  ASSERT_TRUE(pragma.ok()) << pragma.status();
  absl::StatusOr<bool> row = pragma->Step();
  ASSERT_TRUE(row.ok() && *row) << row.status();
  EXPECT_EQ(pragma->Int64(0), dataset::kBusyTimeoutMs);
}

}  // namespace
}  // namespace tune::test
