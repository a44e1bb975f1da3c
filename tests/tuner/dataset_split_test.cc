// Tests of SplitDataset and `tune dataset split`: networks held out whole, no held-out task trained on.
#include "tuner/dataset_split.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "codegen/templates.h"
#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tuner/model_file.h"

namespace tune::tuner {
namespace {

using ::testing::HasSubstr;

// net_a and net_b share the dense task (count 2 in net_a, 1 in net_b); each has a matmul of its own.
constexpr char kSplitNetA[] = R"({"name": "net_a", "layers": [
  {"name": "fc", "op": "dense", "shape": "1,10,64", "count": 2},
  {"name": "mm", "op": "matmul", "shape": "8,8,8"}]})";
constexpr char kSplitNetB[] = R"({"name": "net_b", "layers": [
  {"name": "fc", "op": "dense", "shape": "1,10,64"},
  {"name": "mm", "op": "matmul", "shape": "16,16,16", "count": 3}]})";

void SplitTestWriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Adds `ok` ok records and `failed` runtime-error records of `workload` (under `version_offset`
// plus its current CPU template version) to `db`; returns the task id.
int64_t SplitTestAddTask(dataset::RecordDatabase& db, int64_t target_id, const codegen::Workload& workload, int ok,
                         int failed, int version_offset = 0) {
  auto tmpl = codegen::CreateTemplate(workload);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  if (!tmpl.ok()) return 0;
  dataset::TaskInfo info;
  info.workload_key = workload.Key();
  info.op = "made-up";
  info.shape_json = "{}";
  info.flops = 1;
  info.template_version = (*tmpl)->version() + version_offset;
  auto id = db.UpsertTask(info);
  EXPECT_TRUE(id.ok()) << id.status();
  std::vector<dataset::Record> records;
  for (int i = 0; i < ok + failed; ++i) {
    dataset::Record r;
    r.task_id = *id;
    r.target_id = target_id;
    r.config_json = "{\"i\": " + std::to_string(i) + "}";
    r.config_index = static_cast<uint64_t>(i);
    r.strategy = "random";
    r.protocol_json = measure::MeasureProtocol{}.ToJson();
    r.result.status = i < ok ? measure::MeasureStatus::kOk : measure::MeasureStatus::kRuntimeError;
    if (i < ok) r.result.costs_s = {1e-3 * (i + 1)};
    r.result.number = 1;
    records.push_back(r);
  }
  EXPECT_TRUE(db.AddRecords(records).ok());
  return *id;
}

class DatasetSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SplitTestWriteFile(dir_.Join("a.json"), kSplitNetA);
    SplitTestWriteFile(dir_.Join("b.json"), kSplitNetB);
    auto a = LoadModel(dir_.Join("a.json"));
    auto b = LoadModel(dir_.Join("b.json"));
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    models_ = {{dir_.Join("a.json"), *a}, {dir_.Join("b.json"), *b}};
    auto db = dataset::RecordDatabase::Open(dir_.Join("d.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    auto target = (*db)->UpsertTarget({0, "llvm|made-up", "{}"});
    ASSERT_TRUE(target.ok());
    // dense (shared): 4 ok + 1 failed; net_a's matmul: 3; net_b's matmul: 2 ok + 2 failed;
    // the dense workload under a template version no template has now: 7, never in the split.
    shared_id_ = SplitTestAddTask(**db, *target, a->layers[0].workload, 4, 1);
    a_only_id_ = SplitTestAddTask(**db, *target, a->layers[1].workload, 3, 0);
    b_only_id_ = SplitTestAddTask(**db, *target, b->layers[1].workload, 2, 2);
    stale_id_ = SplitTestAddTask(**db, *target, a->layers[0].workload, 7, 0, 1000);
  }

  test::ProcessResult RunSplit(std::vector<std::string> args) {
    args.insert(args.begin(), {std::string(TUNE_BIN_DIR) + "/tune", "dataset", "split"});
    return test::RunProcess(args, dir_.path());
  }

  test::TempDir dir_;
  std::vector<SplitInput> models_;
  int64_t shared_id_ = 0, a_only_id_ = 0, b_only_id_ = 0, stale_id_ = 0;
};

std::set<int64_t> SplitTestIds(const std::vector<SplitSetTask>& tasks) {
  std::set<int64_t> ids;
  for (const SplitSetTask& t : tasks) ids.insert(t.task_id);
  return ids;
}

TEST_F(DatasetSplitTest, HeldOutTasksNeverReachTrainingAndRecordsAreCounted) {
  auto db = dataset::RecordDatabase::OpenReadOnly(dir_.Join("d.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto split = SplitDataset(**db, models_, {"net_b"});
  ASSERT_TRUE(split.ok()) << split.status();
  // The shared dense task is net_b's: test only, although net_a trains.
  EXPECT_EQ(SplitTestIds(split->train), std::set<int64_t>({a_only_id_}));
  EXPECT_EQ(SplitTestIds(split->test), std::set<int64_t>({shared_id_, b_only_id_}));
  EXPECT_EQ(split->shared_tasks, 1);
  EXPECT_EQ(split->missing_tasks, 0);
  EXPECT_EQ(split->train_records, 3);
  EXPECT_EQ(split->test_records, 5 + 4);
  for (const SplitSetTask& t : split->test) {
    if (t.task_id == shared_id_) {
      EXPECT_EQ(t.ok_records, 4);
      EXPECT_EQ(t.networks, std::vector<std::string>({"net_a", "net_b"}));
    }
  }
  ASSERT_EQ(split->networks.size(), 2u);
  EXPECT_FALSE(split->networks[0].held_out);
  EXPECT_TRUE(split->networks[1].held_out);
  ASSERT_EQ(split->networks[0].tasks.size(), 2u);
  EXPECT_EQ(split->networks[0].tasks[0].weight, 2);
  EXPECT_EQ(split->networks[0].tasks[0].set, "test");
  EXPECT_EQ(split->networks[0].tasks[1].set, "train");

  // Holding out the other network instead: the shared task follows net_a into the test set.
  auto other = SplitDataset(**db, models_, {"net_a"});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(SplitTestIds(other->train), std::set<int64_t>({b_only_id_}));
  EXPECT_EQ(SplitTestIds(other->test), std::set<int64_t>({shared_id_, a_only_id_}));
  EXPECT_EQ(other->train_records, 4);
  EXPECT_EQ(other->test_records, 8);
}

TEST_F(DatasetSplitTest, CommandWritesTheDocumentedJsonAndATable) {
  ASSERT_TRUE(std::filesystem::exists(std::string(TUNE_BIN_DIR) + "/tune"));
  test::ProcessResult r = RunSplit({"--db", "d.db", "--models", "a.json,b.json", "--holdout", "net_b", "--out", "s.json"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(r.out, HasSubstr("net_a"));
  EXPECT_THAT(r.out, HasSubstr("kept in the test set only"));
  const nlohmann::json s = nlohmann::json::parse(test::ReadFileBytes(dir_.Join("s.json")));
  EXPECT_EQ(s["format"], kSplitFormat);
  EXPECT_EQ(s["shared_task_policy"], "test-only");
  ASSERT_EQ(s["networks"].size(), 2u);
  EXPECT_EQ(s["networks"][0]["name"], "net_a");
  EXPECT_EQ(s["networks"][0]["held_out"], false);
  EXPECT_EQ(s["networks"][1]["held_out"], true);
  EXPECT_EQ(s["networks"][0]["tasks"][0]["weight"], 2);
  EXPECT_EQ(s["networks"][1]["tasks"][1]["weight"], 3);
  EXPECT_EQ(s["networks"][1]["tasks"][1]["records"], 4);
  std::set<int64_t> train, test;
  for (const auto& t : s["train"]) train.insert(t["task_id"].get<int64_t>());
  for (const auto& t : s["test"]) test.insert(t["task_id"].get<int64_t>());
  EXPECT_EQ(train, std::set<int64_t>({a_only_id_}));
  EXPECT_EQ(test, std::set<int64_t>({shared_id_, b_only_id_}));
  EXPECT_FALSE(train.contains(stale_id_) || test.contains(stale_id_));
  EXPECT_EQ(s["counts"]["train_records"], 3);
  EXPECT_EQ(s["counts"]["test_records"], 9);
  EXPECT_EQ(s["counts"]["shared_tasks"], 1);
}

TEST_F(DatasetSplitTest, BadHoldoutNamesExitTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {"nope"},       // no such network
      {"resnet-18"},  // a real model, but not one of --models
      {"net_a,net_b"} // nothing left to train on
  };
  for (const auto& holdout : cases) {
    test::ProcessResult r = RunSplit({"--db", "d.db", "--models", "a.json,b.json", "--holdout", holdout[0], "--out", "s.json"});
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
    EXPECT_TRUE(r.out.empty()) << r;
    EXPECT_FALSE(std::filesystem::exists(dir_.Join("s.json")));
  }
  test::ProcessResult zoo = RunSplit({"--db", "d.db", "--models", "a.json,b.json", "--holdout", "resnet-18"});
  EXPECT_THAT(zoo.err, HasSubstr("not one of --models"));
  test::ProcessResult unknown = RunSplit({"--db", "d.db", "--models", "a.json,b.json", "--holdout", "nope"});
  EXPECT_THAT(unknown.err, HasSubstr("unknown network 'nope'"));
}

}  // namespace
}  // namespace tune::tuner
