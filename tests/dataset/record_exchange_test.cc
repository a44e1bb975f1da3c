// Tests of the record exchange format: exact round trips, duplicates, every kind of bad line.
#include "dataset/record_exchange.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <zlib.h>

#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/measure_result.h"
#include "nlohmann/json.hpp"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune::dataset {
namespace exchange_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::unique_ptr<RecordDatabase> OpenExchangeDb(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RecordDatabase>> db = RecordDatabase::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *std::move(db) : nullptr;
}

// A double of any magnitude a time may have, drawn so that its shortest decimal form is long.
double DrawSeconds(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> mantissa(1.0, 10.0);
  std::uniform_int_distribution<int> exponent(-9, 1);
  return mantissa(rng) * std::pow(10.0, exponent(rng));
}

// Fills `db` with random records: several tasks, two targets, a run or none, every status,
// finalists that measure a config again with the same protocol. Returns how many it added.
int FillRandomDb(RecordDatabase& db, std::mt19937_64& rng) {
  std::vector<int64_t> tasks, targets;
  for (int t = 0; t < 3; ++t) {
    TaskInfo task{0, "matmul|" + std::to_string(16 << t) + ",32,32|f32", "matmul",
                  R"({"M":)" + std::to_string(16 << t) + R"(,"N":32,"K":32,"relu":false})", 2.0 * (16 << t) * 32 * 32,
                  3};
    auto id = db.UpsertTask(task);
    EXPECT_TRUE(id.ok()) << id.status();
    tasks.push_back(*id);
  }
  for (const char* key : {"llvm|znver3|cpu A|avx2|llvm-15|t1", "llvm|skylake|cpu \"B\"|avx512|llvm-15|t2"}) {
    auto id = db.UpsertTarget(TargetInfo{0, key, std::string(R"({"kind":"llvm","key":")") +
                                                     (key[6] == 'z' ? "a" : "b") + R"(","threads":1})"});
    EXPECT_TRUE(id.ok()) << id.status();
    targets.push_back(*id);
  }
  auto run = db.StartRun("tune op matmul --shape 16,32,32", "llvm|znver3|cpu A|avx2|llvm-15|t1");
  EXPECT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(db.FinishRun(*run, "failed", "a message with \"quotes\"\tand a tab").ok());

  const measure::MeasureStatus statuses[] = {
      measure::MeasureStatus::kOk,           measure::MeasureStatus::kInvalidConfig,
      measure::MeasureStatus::kCompileError, measure::MeasureStatus::kRuntimeError,
      measure::MeasureStatus::kTimeout,      measure::MeasureStatus::kWrongResult};
  int added = 0;
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<Record> records;
    const int64_t task = tasks[pick(rng) % tasks.size()];
    const int64_t target = targets[pick(rng) % targets.size()];
    measure::MeasureProtocol protocol;
    protocol.repeats = 1 + pick(rng) % 5;
    protocol.min_repeat_ms = DrawSeconds(rng) * 1000;
    for (int i = 0; i < 5; ++i) {
      Record r;
      r.task_id = task;
      r.target_id = target;
      r.run_id = batch % 2 == 0 ? *run : 0;
      // Configs are distinct within a batch (a strategy never proposes one twice).
      r.config_json = R"({"tile_m":)" + std::to_string(batch * 5 + i) + R"(,"order":"mnk","unroll":)" +
                      std::to_string(pick(rng) % 2) + "}";
      r.config_index = static_cast<uint64_t>(pick(rng)) << 20;
      r.strategy = batch == 0 && i == 0 ? "default" : "random";
      r.protocol_json = protocol.ToJson();
      r.result.status = statuses[(batch + i) % 6];
      r.result.number = 1 + pick(rng) % 100;
      r.result.build_s = DrawSeconds(rng);
      r.result.wall_s = DrawSeconds(rng);
      if (r.result.ok()) {
        for (int s = 0; s < protocol.repeats; ++s) r.result.costs_s.push_back(DrawSeconds(rng));
      } else {
        r.result.message = "error: line 1\nline 2 \xc3\xa9";
        if (r.result.status == measure::MeasureStatus::kTimeout) {
          r.result.costs_s = {std::numeric_limits<double>::quiet_NaN()};
        }
      }
      records.push_back(r);
    }
    EXPECT_TRUE(db.AddRecords(records).ok());
    added += static_cast<int>(records.size());
    // Finalists: the same configs and protocol measured again (a later commit).
    if (batch == 3) {
      for (Record& r : records) {
        r.id = 0;
        r.timestamp += 0.25;
        r.strategy = "finalist";
      }
      EXPECT_TRUE(db.AddRecords(records).ok());
      added += static_cast<int>(records.size());
    }
  }
  return added;
}

std::string ExportText(const RecordDatabase& db) {
  auto records = db.ExportRecords();
  EXPECT_TRUE(records.ok()) << records.status();
  std::ostringstream out;
  EXPECT_TRUE(WriteRecords(*records, out).ok());
  return out.str();
}

// Every field but the ids the database assigns.
void ExpectSameRecord(const PortableRecord& a, const PortableRecord& b) {
  EXPECT_EQ(a.task.workload_key, b.task.workload_key);
  EXPECT_EQ(a.task.op, b.task.op);
  EXPECT_EQ(a.task.shape_json, b.task.shape_json);
  EXPECT_EQ(a.task.flops, b.task.flops);
  EXPECT_EQ(a.task.template_version, b.task.template_version);
  EXPECT_EQ(a.target.key, b.target.key);
  EXPECT_EQ(a.target.json, b.target.json);
  ASSERT_EQ(a.run.has_value(), b.run.has_value());
  if (a.run.has_value()) {
    EXPECT_EQ(a.run->command, b.run->command);
    EXPECT_EQ(a.run->started, b.run->started);
    EXPECT_EQ(a.run->finished, b.run->finished);
    EXPECT_EQ(a.run->status, b.run->status);
    EXPECT_EQ(a.run->message, b.run->message);
    EXPECT_EQ(a.run->pid, b.run->pid);
  }
  const Record& x = a.record;
  const Record& y = b.record;
  EXPECT_EQ(x.config_json, y.config_json);
  EXPECT_EQ(x.config_index, y.config_index);
  EXPECT_EQ(x.strategy, y.strategy);
  EXPECT_EQ(x.protocol_json, y.protocol_json);
  EXPECT_EQ(x.result.status, y.result.status);
  EXPECT_EQ(x.result.message, y.result.message);
  ASSERT_EQ(x.result.costs_s.size(), y.result.costs_s.size());
  for (size_t i = 0; i < x.result.costs_s.size(); ++i) {
    if (std::isnan(x.result.costs_s[i])) {
      EXPECT_TRUE(std::isnan(y.result.costs_s[i]));
    } else {
      EXPECT_EQ(x.result.costs_s[i], y.result.costs_s[i]);  // exact, not approximately
    }
  }
  EXPECT_EQ(x.result.number, y.result.number);
  EXPECT_EQ(x.result.build_s, y.result.build_s);
  EXPECT_EQ(x.result.wall_s, y.result.wall_s);
  EXPECT_EQ(x.timestamp, y.timestamp);
}

TEST(RecordExchangeTest, ExportImportKeepsEveryFieldExactly) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(11);
  auto source = OpenExchangeDb(dir.Join("a.db"));
  const int added = FillRandomDb(*source, rng);
  const std::string text = ExportText(*source);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), added);

  std::istringstream in(text);
  auto read = ReadRecords(in, "records.jsonl");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), static_cast<size_t>(added));
  EXPECT_EQ((*read)[4].origin, "records.jsonl:5");

  auto copy = OpenExchangeDb(dir.Join("b.db"));
  auto counts = copy->ImportRecords(*read);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->imported, added);  // finalists measured the same config again: kept
  EXPECT_EQ(counts->already_present, 0);
  EXPECT_EQ(counts->tasks, static_cast<int64_t>(copy->Tasks()->size()));
  EXPECT_EQ(counts->targets, static_cast<int64_t>(copy->Targets()->size()));

  auto before = source->ExportRecords();
  auto after = copy->ExportRecords();
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ(before->size(), after->size());
  for (size_t i = 0; i < before->size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameRecord((*before)[i], (*after)[i]);
  }
  EXPECT_EQ(ExportText(*copy), text);
  const std::vector<TaskInfo> tasks = *source->Tasks();
  const std::vector<TargetInfo> targets = *source->Targets();
  ASSERT_EQ(tasks.size(), 3u);
  for (const auto& task : tasks) {
    for (const auto& target : targets) {
      auto copied_task = copy->FindTask(task.workload_key, task.template_version);
      auto copied_target = copy->FindTarget(target.key);
      ASSERT_TRUE(copied_task.ok() && copied_target.ok());
      auto best_a = source->Best(task.id, target.id, 3);
      if (best_a->empty()) continue;
      ASSERT_TRUE(copied_task->has_value() && copied_target->has_value());
      auto best_b = copy->Best((*copied_task)->id, (*copied_target)->id, 3);
      ASSERT_EQ(best_a->size(), best_b->size());
      for (size_t i = 0; i < best_a->size(); ++i) {
        EXPECT_EQ((*best_a)[i].config_json, (*best_b)[i].config_json);
        EXPECT_EQ((*best_a)[i].result.Median(), (*best_b)[i].result.Median());
      }
    }
  }
}

// A gzip-compressed export (the committed datasets are .jsonl.gz) reads as the plain text does;
// a truncated one is refused, not read in part.
TEST(RecordExchangeTest, AGzipFileReadsLikeThePlainOneAndATruncatedOneIsRefused) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(12);
  auto source = OpenExchangeDb(dir.Join("a.db"));
  const int added = FillRandomDb(*source, rng);
  const std::string text = ExportText(*source);
  const std::string gz_path = dir.Join("records.jsonl.gz");
  {
    gzFile out = gzopen(gz_path.c_str(), "wb9");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
    ASSERT_EQ(gzclose(out), Z_OK);
  }
  ASSERT_LT(std::filesystem::file_size(gz_path), text.size());  // really compressed
  auto read = ReadRecordsFile(gz_path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), static_cast<size_t>(added));
  EXPECT_EQ((*read)[2].origin, gz_path + ":3");
  std::istringstream plain(text);
  auto expected = ReadRecords(plain, gz_path);
  ASSERT_TRUE(expected.ok());
  for (size_t i = 0; i < read->size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameRecord((*expected)[i], (*read)[i]);
  }

  std::filesystem::resize_file(gz_path, std::filesystem::file_size(gz_path) / 2);
  auto truncated = ReadRecordsFile(gz_path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr(gz_path + ": not a readable records file"));
}

TEST(RecordExchangeTest, ImportingTwiceAddsNothingTheSecondTime) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(12);
  auto source = OpenExchangeDb(dir.Join("a.db"));
  const int added = FillRandomDb(*source, rng);
  std::istringstream in(ExportText(*source));
  auto read = ReadRecords(in, "r.jsonl");
  ASSERT_TRUE(read.ok()) << read.status();

  // Into the database they came from: all present already.
  auto again = source->ImportRecords(*read);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->imported, 0);
  EXPECT_EQ(again->already_present, added);

  auto copy = OpenExchangeDb(dir.Join("b.db"));
  ASSERT_EQ(copy->ImportRecords(*read)->imported, added);
  auto second = copy->ImportRecords(*read);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->imported, 0);
  EXPECT_EQ(second->already_present, added);
  EXPECT_EQ(copy->ExportRecords()->size(), static_cast<size_t>(added));

  // A line twice in one batch counts once; key order inside the config does not matter.
  std::vector<PortableRecord> twice = {(*read)[0], (*read)[0]};
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(twice[1].record.config_json);
  nlohmann::ordered_json reversed = nlohmann::ordered_json::object();
  for (auto it = config.rbegin(); it != config.rend(); ++it) reversed[it.key()] = it.value();
  twice[1].record.config_json = reversed.dump();
  ASSERT_NE(twice[1].record.config_json, twice[0].record.config_json);
  auto third = OpenExchangeDb(dir.Join("c.db"));
  auto counts = third->ImportRecords(twice);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->imported, 1);
  EXPECT_EQ(counts->already_present, 1);
}

// A valid line, as a JSON value to break.
nlohmann::ordered_json ValidExchangeLine() {
  PortableRecord r;
  r.task = TaskInfo{0, "matmul|8,8,8|f32", "matmul", R"({"M":8})", 1024, 1};
  r.target = TargetInfo{0, "llvm|x|t1", R"({"kind":"llvm"})"};
  r.record.config_json = R"({"tile":4})";
  r.record.strategy = "random";
  r.record.protocol_json = measure::MeasureProtocol().ToJson();
  r.record.result.status = measure::MeasureStatus::kOk;
  r.record.result.costs_s = {1e-5, 2e-5};
  r.record.result.number = 3;
  r.record.timestamp = 1.7e9;
  auto line = RecordToJsonLine(r);
  EXPECT_TRUE(line.ok()) << line.status();
  return nlohmann::ordered_json::parse(*line);
}

TEST(RecordExchangeTest, RefusesABadLineWithItsNumber) {
  struct Case {
    const char* name;
    std::function<std::string(nlohmann::ordered_json)> make;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"bad JSON", [](nlohmann::ordered_json j) { return j.dump().substr(0, 40); }, "not valid JSON"},
      {"not an object", [](nlohmann::ordered_json) { return std::string("[1,2]"); }, "must be a JSON object"},
      {"missing field", [](nlohmann::ordered_json j) { j.erase("strategy"); return j.dump(); }, "missing field 'strategy'"},
      {"missing nested", [](nlohmann::ordered_json j) { j["task"].erase("flops"); return j.dump(); },
       "missing field 'task.flops'"},
      {"wrong type", [](nlohmann::ordered_json j) { j["number"] = "3"; return j.dump(); }, "'number' must be an integer"},
      {"config a string", [](nlohmann::ordered_json j) { j["config"] = "{\"tile\":4}"; return j.dump(); },
       "'config' must be a JSON object"},
      {"negative sample", [](nlohmann::ordered_json j) { j["samples_s"][1] = -1e-6; return j.dump(); },
       "samples_s"},
      {"null sample of ok", [](nlohmann::ordered_json j) { j["samples_s"][0] = nullptr; return j.dump(); },
       "samples_s"},
      {"negative build", [](nlohmann::ordered_json j) { j["build_s"] = -0.5; return j.dump(); }, "'build_s' must be >= 0"},
      {"zero timestamp", [](nlohmann::ordered_json j) { j["timestamp"] = 0; return j.dump(); }, "'timestamp' must be > 0"},
      {"unknown status", [](nlohmann::ordered_json j) { j["status"] = "fast"; return j.dump(); }, "unknown measure status 'fast'"},
      {"ok without samples", [](nlohmann::ordered_json j) { j["samples_s"] = nlohmann::ordered_json::array(); return j.dump(); },
       "at least one sample"},
      {"other format", [](nlohmann::ordered_json j) { j["format"] = "tune-records/2"; return j.dump(); }, "tune-records/2"},
      {"bad protocol", [](nlohmann::ordered_json j) { j["protocol"]["repeats"] = 0; return j.dump(); }, "repeats"},
      {"bad run", [](nlohmann::ordered_json j) { j["run"] = 5; return j.dump(); }, "'run' must be null or a JSON object"},
  };
  std::mt19937_64 rng = test::TestRng(13);
  const std::string valid = ValidExchangeLine().dump();
  ASSERT_TRUE(RecordFromJsonLine(valid).ok());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int lines = 2 + static_cast<int>(rng() % 30);
    const int bad = 1 + static_cast<int>(rng() % lines);
    std::string text;
    for (int i = 1; i <= lines; ++i) text += (i == bad ? c.make(ValidExchangeLine()) : valid) + "\n";
    std::istringstream in(text);
    auto read = ReadRecords(in, "records.jsonl");
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(read.status().message()), StartsWith("records.jsonl:" + std::to_string(bad) + ": "));
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(c.why));
    EXPECT_EQ(std::string(read.status().message()).find('\n'), std::string::npos);
  }
}

TEST(RecordExchangeTest, AConflictingTaskWritesNothing) {
  test::TempDir dir;
  auto line = ValidExchangeLine();
  std::string text = line.dump() + "\n";
  line["task"]["flops"] = 2048;  // the same task key with other flops
  line["timestamp"] = 1.8e9;
  text += line.dump() + "\n";
  std::istringstream in(text);
  auto read = ReadRecords(in, "x.jsonl");
  ASSERT_TRUE(read.ok()) << read.status();
  auto db = OpenExchangeDb(dir.Join("c.db"));
  auto counts = db->ImportRecords(*read);
  ASSERT_FALSE(counts.ok());
  EXPECT_THAT(std::string(counts.status().message()), StartsWith("x.jsonl:2: "));
  EXPECT_TRUE(db->Tasks()->empty());
  EXPECT_TRUE(db->ExportRecords()->empty());
}

TEST(RecordExchangeTest, ReadOnlyOpenWritesNothing) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(14);
  {
    auto db = OpenExchangeDb(dir.Join("a.db"));
    FillRandomDb(*db, rng);
  }
  auto db = RecordDatabase::OpenReadOnly(dir.Join("a.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  const size_t n = (*db)->ExportRecords()->size();
  std::istringstream in(ExportText(**db));
  auto read = ReadRecords(in, "r");
  ASSERT_TRUE(read.ok());
  for (auto& r : *read) r.record.timestamp += 1;  // new measurements
  EXPECT_FALSE((*db)->ImportRecords(*read).ok());
  EXPECT_EQ((*db)->ExportRecords()->size(), n);
  EXPECT_EQ(RecordDatabase::OpenReadOnly(dir.Join("absent.db")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.Join("absent.db")));
}

}  // namespace
}  // namespace exchange_test
}  // namespace tune::dataset
