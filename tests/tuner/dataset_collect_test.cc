// Tests of `tune dataset collect` as a user runs it: exact counts, resuming, strategies, bad flags.
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dataset/record_database.h"
#include "measure/measure_result.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kDcTune = std::string(TUNE_BIN_DIR) + "/tune";

// Two small tasks: a dense layer and a 3x3 convolution.
constexpr char kDcModel[] = R"({
  "name": "dc-net",
  "layers": [
    {"name": "fc", "op": "dense", "shape": "8,16,32"},
    {"name": "conv", "op": "conv2d", "shape": "1,4,8,8,4,3,3,1,1"}
  ]
})";

test::ProcessResult DcCollect(const test::TempDir& dir, std::vector<std::string> extra,
                              const std::string& models = "dc.json") {
  std::vector<std::string> args = {kDcTune, "dataset", "collect", "--models", models, "--target", "llvm",
                                   "--db", "d.db", "--repeats", "1", "--min-repeat-ms", "1", "--threads", "1",
                                   "--batch", "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::RunProcess(args, dir.path());
}

// Per task: its records' configs (with repeats) and strategies, read from the database.
struct DcTaskRecords {
  std::vector<std::string> configs;
  std::map<std::string, int> strategies;
};

std::map<std::string, DcTaskRecords> DcReadRecords(const std::string& path) {
  std::map<std::string, DcTaskRecords> out;
  auto db = dataset::RecordDatabase::Open(path, /*create=*/false);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return out;
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  EXPECT_TRUE(tasks.ok() && targets.ok());
  if (!tasks.ok() || !targets.ok()) return out;
  EXPECT_EQ(targets->size(), 1u);
  for (const auto& task : *tasks) {
    for (const auto& target : *targets) {
      auto records = (*db)->Records(task.id, target.id);
      EXPECT_TRUE(records.ok()) << records.status();
      if (!records.ok()) continue;
      DcTaskRecords& r = out[task.workload_key];
      for (const auto& rec : *records) {
        r.configs.push_back(rec.config_json);
        ++r.strategies[rec.strategy];
      }
    }
  }
  return out;
}

bool DcHasDuplicate(std::vector<std::string> configs) {
  std::sort(configs.begin(), configs.end());
  return std::adjacent_find(configs.begin(), configs.end()) != configs.end();
}

// stdout up to the "collected ..." line: the table.
std::string DcTable(const std::string& out) {
  const size_t at = out.find("collected ");
  return out.substr(0, at);
}

int DcCountLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

class DatasetCollectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kDcTune)) << kDcTune << " is not built";
    test::WriteFileBytes(dir_.Join("dc.json"), kDcModel);
  }

  // Expects `extra` to be refused: exit 2, one line on stderr, nothing on stdout, no database.
  void ExpectRefused(const std::vector<std::string>& extra, const std::string& mention,
                     const std::string& models = "dc.json") {
    test::ProcessResult r = DcCollect(dir_, extra, models);
    ASSERT_TRUE(r.exited) << r;
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "want one line: " << r;
    EXPECT_THAT(r.err, StartsWith("tune")) << r;
    EXPECT_THAT(r.err, HasSubstr(mention)) << r;
    EXPECT_FALSE(std::filesystem::exists(dir_.Join("d.db"))) << "a refused command writes no database: " << r;
  }

  test::TempDir dir_;
};

TEST_F(DatasetCollectTest, CollectsExactlyNPerTaskAndARerunMeasuresNothing) {
  test::ProcessResult first = DcCollect(dir_, {"--per-task", "6", "--seed", "3"});
  ASSERT_TRUE(first.exited) << first;
  ASSERT_EQ(first.exit_code, 0) << first;
  EXPECT_THAT(first.out, HasSubstr("collected 12 new records (2 tasks)")) << first;
  EXPECT_THAT(first.err, HasSubstr("records/s")) << first;
  EXPECT_THAT(first.err, HasSubstr("ETA")) << first;
  EXPECT_THAT(first.err, HasSubstr("records 12/12")) << first;
  EXPECT_EQ(DcCountLines(first.out, "dc-net/"), 2) << "one table row per task: " << first;

  auto records = DcReadRecords(dir_.Join("d.db"));
  ASSERT_EQ(records.size(), 2u);
  for (const auto& [key, r] : records) {
    EXPECT_EQ(r.configs.size(), 6u) << key;
    EXPECT_FALSE(DcHasDuplicate(r.configs)) << key;
    // 0.7 x 6 rounds to 4 random configs; the other 2 come from the guided search.
    EXPECT_EQ(r.strategies.count("random") ? r.strategies.at("random") : 0, 4) << key;
    EXPECT_EQ(r.strategies.count("sa") ? r.strategies.at("sa") : 0, 2) << key;
    EXPECT_EQ(r.strategies.count("default"), 0u) << "the default schedule is not part of a dataset: " << key;
  }

  test::ProcessResult again = DcCollect(dir_, {"--per-task", "6", "--seed", "3"});
  ASSERT_TRUE(again.exited) << again;
  ASSERT_EQ(again.exit_code, 0) << again;
  EXPECT_THAT(again.out, HasSubstr("collected 0 new records (2 tasks)")) << again;
  EXPECT_EQ(DcCountLines(again.err, "records already"), 2) << again;
  EXPECT_THAT(again.err, HasSubstr("task 1: 6 records already")) << again;
  EXPECT_EQ(DcTable(again.out), DcTable(first.out)) << "the table is unchanged";
  auto same = DcReadRecords(dir_.Join("d.db"));
  for (const auto& [key, r] : same) EXPECT_EQ(r.configs.size(), 6u) << key;
}

TEST_F(DatasetCollectTest, ALargerNAddsTheDifferenceAndRepeatsNoConfig) {
  test::ProcessResult first = DcCollect(dir_, {"--per-task", "3", "--random-share", "0.5", "--strategy", "evolutionary"});
  ASSERT_TRUE(first.exited) << first;
  ASSERT_EQ(first.exit_code, 0) << first;
  EXPECT_THAT(first.out, HasSubstr("collected 6 new records (2 tasks)")) << first;

  test::ProcessResult more = DcCollect(dir_, {"--per-task", "6", "--random-share", "0.5", "--strategy", "evolutionary"});
  ASSERT_TRUE(more.exited) << more;
  ASSERT_EQ(more.exit_code, 0) << more;
  EXPECT_THAT(more.out, HasSubstr("collected 6 new records (2 tasks)")) << more;
  EXPECT_EQ(DcCountLines(more.err, "records already"), 0) << more;

  auto records = DcReadRecords(dir_.Join("d.db"));
  ASSERT_EQ(records.size(), 2u);
  for (const auto& [key, r] : records) {
    EXPECT_EQ(r.configs.size(), 6u) << key;
    EXPECT_FALSE(DcHasDuplicate(r.configs)) << "no config is measured twice: " << key;
    // Half of 6 at random over both runs, the rest guided, each run keeping its strategy's name.
    EXPECT_EQ(r.strategies.count("random") ? r.strategies.at("random") : 0, 3) << key;
    EXPECT_EQ(r.strategies.count("evolutionary") ? r.strategies.at("evolutionary") : 0, 3) << key;
  }
}

TEST_F(DatasetCollectTest, BadInputIsOneLineWithExit2AndNoDatabase) {
  ExpectRefused({"--per-task", "0"}, "--per-task");
  ExpectRefused({"--per-task", "100001"}, "--per-task");
  ExpectRefused({"--per-task", "6", "--random-share", "1.5"}, "--random-share");
  ExpectRefused({"--per-task", "6", "--random-share", "-0.1"}, "--random-share");
  ExpectRefused({"--per-task", "6"}, "no-such-net", "dc.json,no-such-net");
  ExpectRefused({"--per-task", "6"}, "--models", "dc.json,,dc.json");
  ExpectRefused({"--per-task", "6", "--strategy", "no-such-strategy"}, "no-such-strategy");
  ExpectRefused({"--per-task", "6", "--build-timeout", "-1"}, "--build-timeout");
}

// --layout nchwc collects the convolutions' NCHWc workloads (their keys name the channel
// block); on a GPU target it is refused before anything is written.
TEST_F(DatasetCollectTest, BlockedLayoutCollectsTheNchwcConvolutions) {
  test::WriteFileBytes(dir_.Join("blocked.json"), R"({"name": "blocked", "layers": [
      {"name": "conv", "op": "conv2d", "shape": "1,16,8,8,16,3,3,1,1"}]})");
  test::ProcessResult r = DcCollect(dir_, {"--per-task", "2", "--layout", "nchwc"}, "blocked.json");
  ASSERT_EQ(r.exit_code, 0) << r;
  const auto records = DcReadRecords(dir_.Join("d.db"));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_THAT(records.begin()->first, ::testing::ContainsRegex("_nchw(8|16)c/")) << records.begin()->first;
  EXPECT_EQ(records.begin()->second.configs.size(), 2u);
  std::filesystem::remove(dir_.Join("d.db"));
  test::ProcessResult gpu = test::RunProcess({kDcTune, "dataset", "collect", "--models", "blocked.json", "--target",
                                              "cuda", "--per-task", "2", "--db", "d.db", "--layout", "nchwc"},
                                             dir_.path());
  EXPECT_EQ(gpu.exit_code, 2) << gpu;
  EXPECT_THAT(gpu.err, HasSubstr("--layout nchwc is for CPU targets"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("d.db")));
}

// The measurement flags are the tuning commands' own: --build-timeout lands in every record's
// protocol.
TEST_F(DatasetCollectTest, BuildTimeoutIsRecordedInEachProtocol) {
  std::mt19937 rng(std::random_device{}());
  const double seconds = 0.5 * static_cast<double>(1 + rng() % 200);
  test::ProcessResult r = DcCollect(dir_, {"--per-task", "2", "--build-timeout", std::to_string(seconds)});
  ASSERT_TRUE(r.exited) << r;
  ASSERT_EQ(r.exit_code, 0) << r;
  auto db = dataset::RecordDatabase::OpenReadOnly(dir_.Join("d.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto records = (*db)->ExportRecords();
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 4u);
  for (const dataset::PortableRecord& p : *records) {
    auto protocol = measure::MeasureProtocol::FromJson(p.record.protocol_json);
    ASSERT_TRUE(protocol.ok()) << protocol.status();
    EXPECT_EQ(protocol->build_timeout_s, seconds) << p.record.protocol_json;
  }
}

}  // namespace
}  // namespace tune
