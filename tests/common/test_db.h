// Record databases for tests: opened in memory (or at a test's path) and read back by task.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataset/record_database.h"
#include "gtest/gtest.h"

namespace tune::test {

/// The record database at `path` (":memory:": a private one that lives as long as the
/// result); a test failure, and null, when it does not open.
inline std::unique_ptr<dataset::RecordDatabase> OpenTestDb(const std::string& path = ":memory:") {
  absl::StatusOr<std::unique_ptr<dataset::RecordDatabase>> db = dataset::RecordDatabase::Open(path);
  EXPECT_TRUE(db.ok()) << path << ": " << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

/// Every record of task `task_id` on the target keyed `target_key`, oldest first; a test
/// failure, and none, when the target is not in the database.
inline std::vector<dataset::Record> RecordsOf(dataset::RecordDatabase& db, int64_t task_id,
                                              const std::string& target_key) {
  auto target = db.FindTarget(target_key);
  EXPECT_TRUE(target.ok() && target->has_value()) << target_key;
  if (!target.ok() || !target->has_value()) return {};
  auto records = db.Records(task_id, (*target)->id);
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *records : std::vector<dataset::Record>{};
}

/// How many of `records` were made by `strategy` ("default", "given", "random", ...).
inline int CountStrategy(const std::vector<dataset::Record>& records, const std::string& strategy) {
  int n = 0;
  for (const dataset::Record& r : records) n += r.strategy == strategy;
  return n;
}

}  // namespace tune::test
