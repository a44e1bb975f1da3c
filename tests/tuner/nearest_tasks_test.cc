// NearestMeasuredTasks: the tasks warm-starting reads, bounded however many the database holds.
#include "tuner/nearest_tasks.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/test_db.h"
#include "tests/common/toy_template.h"
#include "tuner/config_transfer.h"

namespace tune::test {
namespace {

// A database of random matmul, dense and conv2d tasks, most with an ok record on the target;
// the others have only failures there, or records on another target only.
struct NtDb {
  std::unique_ptr<dataset::RecordDatabase> db;
  int64_t target = 0;
  std::vector<int64_t> measured;  // the tasks with an ok record on `target`, by id
  std::vector<codegen::Workload> workloads;  // by task id - 1
};

codegen::Workload NtRandomWorkload(std::mt19937& rng) {
  auto dim = [&] { return std::to_string(1 << (2 + rng() % 7)); };
  switch (rng() % 4) {
    case 0:
      return ToyWorkload(codegen::OpKind::kConv2d, "1," + dim() + ",14,14," + dim() + ",3,3,1,1");
    case 1:
      return ToyWorkload(codegen::OpKind::kDense, dim() + "," + dim() + "," + dim());
    default:
      return ToyWorkload(codegen::OpKind::kMatmul, dim() + "," + dim() + "," + dim());
  }
}

NtDb NtMakeDb(std::mt19937& rng, int tasks) {
  NtDb out;
  out.db = OpenTestDb();
  if (out.db == nullptr) return out;
  out.target = *out.db->UpsertTarget({0, "nt-target", R"({"kind":"llvm"})"});
  const int64_t elsewhere = *out.db->UpsertTarget({0, "nt-elsewhere", R"({"kind":"llvm"})"});
  std::vector<dataset::Record> records;
  for (int i = 0; i < tasks; ++i) {
    codegen::Workload w = NtRandomWorkload(rng);
    dataset::TaskInfo info;
    info.workload_key = w.Key();
    info.op = codegen::OpName(w.op);
    info.template_version = 1 + i;  // distinct rows even for a repeated shape
    absl::StatusOr<int64_t> id = out.db->UpsertTask(info);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return out;
    out.workloads.push_back(w);
    dataset::Record r;
    r.task_id = *id;
    r.config_json = "{}";
    r.strategy = "random";
    r.protocol_json = measure::MeasureProtocol().ToJson();
    const int kind = static_cast<int>(rng() % 5);
    r.target_id = kind == 4 ? elsewhere : out.target;
    r.result.status = kind == 3 ? measure::MeasureStatus::kCompileError : measure::MeasureStatus::kOk;
    if (r.result.ok()) r.result.costs_s = {1e-3};
    r.result.number = 1;
    records.push_back(r);
    if (kind < 3) out.measured.push_back(*id);
  }
  EXPECT_TRUE(out.db->AddRecords(records).ok());
  return out;
}

// The brute-force answer: every measured task but `self`, nearest first (ties: older), the first
// `max_tasks`, by id.
std::vector<int64_t> NtExpected(const NtDb& d, int64_t self, const codegen::Workload& w, int max_tasks) {
  std::vector<std::pair<double, int64_t>> all;
  for (int64_t id : d.measured) {
    if (id != self) all.push_back({tuner::WorkloadDistance(w, d.workloads[id - 1]), id});
  }
  std::sort(all.begin(), all.end());
  if (all.size() > static_cast<size_t>(max_tasks)) all.resize(max_tasks);
  std::vector<int64_t> ids;
  for (const auto& [distance, id] : all) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int64_t> NtIds(const std::vector<tuner::NearTask>& tasks) {
  std::vector<int64_t> ids;
  for (const tuner::NearTask& t : tasks) ids.push_back(t.info.id);
  return ids;
}

// More measured tasks than the bound: exactly the bound's nearest come back (other operator
// families last), oldest first, each with its workload and distance.
TEST(NearestTasksTest, ABoundedNumberOfTheNearestTasks) {
  std::mt19937 rng(std::random_device{}());
  NtDb d = NtMakeDb(rng, 120 + static_cast<int>(rng() % 60));
  ASSERT_NE(d.db, nullptr);
  const int max_tasks = 4 + static_cast<int>(rng() % 30);
  ASSERT_GT(d.measured.size(), static_cast<size_t>(max_tasks) + 1);
  const int64_t self = d.measured[rng() % d.measured.size()];
  const codegen::Workload& w = d.workloads[self - 1];
  absl::StatusOr<std::vector<tuner::NearTask>> near = tuner::NearestMeasuredTasks(*d.db, d.target, self, w, max_tasks);
  ASSERT_TRUE(near.ok()) << near.status();
  EXPECT_EQ(near->size(), static_cast<size_t>(max_tasks));
  EXPECT_EQ(NtIds(*near), NtExpected(d, self, w, max_tasks));
  for (const tuner::NearTask& t : *near) {
    EXPECT_EQ(t.workload.Key(), d.workloads[t.info.id - 1].Key());
    EXPECT_EQ(t.distance, tuner::WorkloadDistance(w, t.workload));
  }
}

// Fewer measured tasks than the bound: all of them but the task itself, in id order (the order
// the whole tasks table was walked in before), conv2d and matmul alike.
TEST(NearestTasksTest, EveryMeasuredTaskWhenTheyAreFew) {
  std::mt19937 rng(std::random_device{}());
  NtDb d = NtMakeDb(rng, 5 + static_cast<int>(rng() % 20));
  ASSERT_NE(d.db, nullptr);
  const codegen::Workload w = NtRandomWorkload(rng);  // a new task: not in the database
  absl::StatusOr<std::vector<tuner::NearTask>> near = tuner::NearestMeasuredTasks(*d.db, d.target, 0, w, 64);
  ASSERT_TRUE(near.ok()) << near.status();
  EXPECT_EQ(NtIds(*near), d.measured);
  if (!d.measured.empty()) {
    absl::StatusOr<std::vector<tuner::NearTask>> but_one =
        tuner::NearestMeasuredTasks(*d.db, d.target, d.measured.front(), w, 64);
    ASSERT_TRUE(but_one.ok()) << but_one.status();
    EXPECT_EQ(NtIds(*but_one), std::vector<int64_t>(d.measured.begin() + 1, d.measured.end()));
  }
}

}  // namespace
}  // namespace tune::test
