// Tests of `tune db export|import|merge` and `tune db best --format json` as a user runs them.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune {
namespace db_exchange_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kTuneBin = std::string(TUNE_BIN_DIR) + "/tune";

test::ProcessResult RunTune(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kTuneBin);
  return test::RunProcess(args, dir.path());
}

// Tunes one small matmul into `db` (a few short measurements; their times are never asserted).
void TuneInto(const test::TempDir& dir, const std::string& db, const std::string& shape, int trials,
              const std::string& strategy = "random") {
  test::ProcessResult r = RunTune(dir, {"op", "matmul", "--shape", shape, "--target", "llvm", "--trials",
                                        std::to_string(trials), "--db", db, "--repeats", "1", "--min-repeat-ms", "1",
                                        "--strategy", strategy, "--resume"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
}

// A random small matmul shape ("M,N,K").
std::string DrawShape(std::mt19937_64& rng) {
  const int sizes[] = {8, 16, 32};
  auto pick = [&] { return std::to_string(sizes[rng() % 3]); };
  return pick() + "," + pick() + "," + pick();
}

std::string ExportOf(const test::TempDir& dir, const std::string& db) {
  test::ProcessResult r = RunTune(dir, {"db", "export", "--db", db});
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r;
  return r.out;
}

int LineCount(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

class DbExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kTuneBin)) << kTuneBin << " is not built"; }
  test::TempDir dir_;
  std::mt19937_64 rng_ = test::TestRng(21);
};

TEST_F(DbExchangeTest, ExportThenImportGivesTheSameRecordsAndBest) {
  std::string shape_a = DrawShape(rng_), shape_b = DrawShape(rng_);
  while (shape_b == shape_a) shape_b = DrawShape(rng_);
  TuneInto(dir_, "a.db", shape_a, 4);
  TuneInto(dir_, "a.db", shape_b, 3);
  test::ProcessResult exported = RunTune(dir_, {"db", "export", "--db", "a.db", "--out", "r.jsonl"});
  ASSERT_TRUE(exported.exited && exported.exit_code == 0) << exported;
  const std::string text = test::ReadFileBytes(dir_.Join("r.jsonl"));
  EXPECT_EQ(text, ExportOf(dir_, "a.db"));
  const int records = LineCount(text);
  ASSERT_GE(records, 4);
  EXPECT_THAT(text, StartsWith("{\"format\":\"tune-records/1\","));

  test::ProcessResult imported = RunTune(dir_, {"db", "import", "r.jsonl", "--db", "b.db"});
  ASSERT_TRUE(imported.exited && imported.exit_code == 0) << imported;
  EXPECT_EQ(imported.out, "imported " + std::to_string(records) + " records (2 tasks, 1 target); 0 already present\n");
  // Every field of every record, as the export writes it.
  EXPECT_EQ(ExportOf(dir_, "b.db"), text);

  test::ProcessResult best_a = RunTune(dir_, {"db", "best", "--db", "a.db", "--format", "json", "-k", "2"});
  test::ProcessResult best_b = RunTune(dir_, {"db", "best", "--db", "b.db", "--format", "json", "-k", "2"});
  ASSERT_TRUE(best_a.exit_code == 0 && best_b.exit_code == 0) << best_a << best_b;
  EXPECT_EQ(best_a.out, best_b.out);

  // The JSON names the best config of each task, as the database has it.
  nlohmann::json best = nlohmann::json::parse(best_a.out);
  ASSERT_TRUE(best.is_array());
  ASSERT_EQ(best.size(), 4u);
  auto db = dataset::RecordDatabase::Open(dir_.Join("a.db"), false);
  ASSERT_TRUE(db.ok()) << db.status();
  for (const nlohmann::json& entry : best) {
    ASSERT_TRUE(entry["config"].is_object()) << entry;
    EXPECT_TRUE(entry["config"].contains("tile_m")) << entry;
    EXPECT_TRUE(entry["seconds"].is_number());
    EXPECT_GT(entry["gflops"].get<double>(), 0);
    auto task = (*db)->FindTask(entry["task"].get<std::string>(), entry["template_version"].get<int>());
    auto target = (*db)->FindTarget(entry["target"].get<std::string>());
    ASSERT_TRUE(task.ok() && task->has_value() && target.ok() && target->has_value()) << entry;
    auto top = (*db)->Best((*task)->id, (*target)->id, 2);
    ASSERT_TRUE(top.ok());
    const int rank = entry["rank"].get<int>();
    ASSERT_LE(rank, static_cast<int>(top->size()));
    const dataset::Record& want = (*top)[rank - 1];
    EXPECT_EQ(entry["record_id"].get<int64_t>(), want.id);
    EXPECT_EQ(entry["config"], nlohmann::json::parse(want.config_json));
    EXPECT_EQ(entry["seconds"].get<double>(), want.result.Median());
    EXPECT_EQ(entry["strategy"].get<std::string>(), want.strategy);
  }

  // The same file again: nothing new.
  test::ProcessResult again = RunTune(dir_, {"db", "import", "r.jsonl", "--db", "b.db"});
  ASSERT_TRUE(again.exited && again.exit_code == 0) << again;
  EXPECT_EQ(again.out, "imported 0 records (0 tasks, 0 targets); " + std::to_string(records) + " already present\n");
  EXPECT_EQ(ExportOf(dir_, "b.db"), text);
}

TEST_F(DbExchangeTest, MergeCountsSharedRecordsOnceAndKeepsBothSides) {
  const std::string shape_a = DrawShape(rng_);
  std::string shape_b = DrawShape(rng_);
  while (shape_b == shape_a) shape_b = DrawShape(rng_);
  TuneInto(dir_, "a.db", shape_a, 3);
  ASSERT_EQ(RunTune(dir_, {"db", "export", "--db", "a.db", "--out", "a.jsonl"}).exit_code, 0);
  ASSERT_EQ(RunTune(dir_, {"db", "import", "a.jsonl", "--db", "b.db"}).exit_code, 0);
  TuneInto(dir_, "b.db", shape_b, 3);   // B: A's records and a task of its own
  TuneInto(dir_, "a.db", shape_a, 5);   // A: more records of its task
  const std::string export_a = ExportOf(dir_, "a.db"), export_b = ExportOf(dir_, "b.db");
  const int shared = LineCount(test::ReadFileBytes(dir_.Join("a.jsonl")));
  const int total = LineCount(export_a) + LineCount(export_b) - shared;

  test::ProcessResult merged = RunTune(dir_, {"db", "merge", "a.db", "b.db", "--into", "c.db"});
  ASSERT_TRUE(merged.exited && merged.exit_code == 0) << merged;
  EXPECT_EQ(merged.out, "merged " + std::to_string(total) + " records (2 tasks, 1 target); " +
                            std::to_string(shared) + " already present\n");
  const std::string export_c = ExportOf(dir_, "c.db");
  EXPECT_EQ(LineCount(export_c), total);
  // Every record of either side is in C once.
  std::vector<std::string> lines_c;
  std::istringstream in(export_c);
  for (std::string line; std::getline(in, line);) lines_c.push_back(line);
  for (const std::string& side : {export_a, export_b}) {
    std::istringstream lines(side);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_EQ(std::count(lines_c.begin(), lines_c.end(), line), 1) << line;
    }
  }
  // The sources are read only; merging again adds nothing.
  EXPECT_EQ(ExportOf(dir_, "a.db"), export_a);
  EXPECT_EQ(ExportOf(dir_, "b.db"), export_b);
  test::ProcessResult again = RunTune(dir_, {"db", "merge", "b.db", "a.db", "--into", "c.db"});
  ASSERT_EQ(again.exit_code, 0) << again;
  EXPECT_EQ(again.out, "merged 0 records (0 tasks, 0 targets); " +
                           std::to_string(LineCount(export_a) + LineCount(export_b)) + " already present\n");
  // --into one of the sources is refused.
  test::ProcessResult self = RunTune(dir_, {"db", "merge", "a.db", "b.db", "--into", "b.db"});
  EXPECT_EQ(self.exit_code, 2) << self;
  EXPECT_EQ(ExportOf(dir_, "b.db"), export_b);
}

TEST_F(DbExchangeTest, ABadLineIsRefusedWithItsNumberAndNothingIsWritten) {
  TuneInto(dir_, "a.db", DrawShape(rng_), 3);
  const std::string text = ExportOf(dir_, "a.db");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 3u);

  struct Mutation {
    const char* name;
    std::function<std::string(nlohmann::ordered_json)> apply;
    const char* why;
  };
  const std::vector<Mutation> mutations = {
      {"bad JSON", [](nlohmann::ordered_json j) { return j.dump().substr(0, 30); }, "not valid JSON"},
      {"missing field", [](nlohmann::ordered_json j) { j.erase("protocol"); return j.dump(); }, "missing field 'protocol'"},
      {"wrong type", [](nlohmann::ordered_json j) { j["task"]["flops"] = "many"; return j.dump(); },
       "'task.flops' must be a number"},
      {"negative time", [](nlohmann::ordered_json j) { j["samples_s"] = {-1e-6}; j["status"] = "ok"; return j.dump(); },
       "samples_s"},
      {"unknown status", [](nlohmann::ordered_json j) { j["status"] = "great"; return j.dump(); },
       "unknown measure status 'great'"},
  };
  // A database that exists keeps its records; one that does not is not created.
  ASSERT_EQ(RunTune(dir_, {"db", "import", "/dev/null", "--db", "old.db"}).exit_code, 0);
  const std::string old_before = ExportOf(dir_, "old.db");
  for (const Mutation& m : mutations) {
    SCOPED_TRACE(m.name);
    const size_t bad = rng_() % lines.size();
    std::string file;
    for (size_t i = 0; i < lines.size(); ++i) {
      file += (i == bad ? m.apply(nlohmann::ordered_json::parse(lines[i])) : lines[i]) + "\n";
    }
    test::WriteFileBytes(dir_.Join("bad.jsonl"), file);
    for (const char* db : {"new.db", "old.db"}) {
      test::ProcessResult r = RunTune(dir_, {"db", "import", "bad.jsonl", "--db", db});
      ASSERT_TRUE(r.exited) << r;
      EXPECT_EQ(r.exit_code, 2) << r;
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
      EXPECT_THAT(r.err, StartsWith("tune: bad.jsonl:" + std::to_string(bad + 1) + ": ")) << r;
      EXPECT_THAT(r.err, HasSubstr(m.why)) << r;
    }
    EXPECT_FALSE(std::filesystem::exists(dir_.Join("new.db")));
    EXPECT_EQ(ExportOf(dir_, "old.db"), old_before);
  }
  // Valid lines that contradict each other (one task, two flops) are refused in the write
  // transaction: the new database is removed again.
  nlohmann::ordered_json other = nlohmann::ordered_json::parse(lines.back());
  other["task"]["flops"] = other["task"]["flops"].get<double>() * 2;
  other["timestamp"] = other["timestamp"].get<double>() + 1;
  test::WriteFileBytes(dir_.Join("conflict.jsonl"), text + other.dump() + "\n");
  test::ProcessResult r = RunTune(dir_, {"db", "import", "conflict.jsonl", "--db", "new.db"});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_THAT(r.err, StartsWith("tune: conflict.jsonl:" + std::to_string(lines.size() + 1) + ": ")) << r;
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("new.db")));
}

}  // namespace
}  // namespace db_exchange_test
}  // namespace tune
