// Tests of the `tune` executable as a user runs it: bad input, kill and resume, tables, db queries.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dataset/record_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/measure_result.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kTune = std::string(TUNE_BIN_DIR) + "/tune";

// Flags that keep measurements short; the timings themselves are never asserted on.
const std::vector<std::string> kQuick = {"--repeats", "1", "--min-repeat-ms", "1"};

test::ProcessResult Tune(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kTune);
  return test::RunProcess(args, dir.path());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int CountLinesWith(const std::string& text, const std::string& needle) {
  int n = 0;
  for (const auto& line : Lines(text)) n += line.find(needle) != std::string::npos;
  return n;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kTune)) << kTune << " is not built";
    ASSERT_FALSE(dir_.path().empty());
  }

  // Runs `args` expecting a usage/input error: non-zero exit, nothing on stdout, exactly one
  // line on stderr that mentions every one of `mentions`, and no change to the directory.
  void ExpectRejected(const std::vector<std::string>& args, const std::vector<std::string>& mentions) {
    std::vector<std::string> before = dir_.List();
    test::ProcessResult r = Tune(dir_, args);
    ASSERT_TRUE(r.exited) << r;
    EXPECT_NE(r.exit_code, 0) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "want one line on stderr: " << r;
    EXPECT_FALSE(r.err.empty() || r.err.back() != '\n') << r;
    EXPECT_THAT(r.err, StartsWith("tune: ")) << r;
    for (const auto& m : mentions) EXPECT_THAT(r.err, HasSubstr(m)) << r;
    EXPECT_EQ(dir_.List(), before) << "a rejected command must not create or remove files";
  }

  test::TempDir dir_;
};

// ---------------------------------------------------------------------------------------------
// Bad input

TEST_F(CliTest, UnknownModelName) {
  ExpectRejected({"no-such-net", "--db", "x.db"}, {"no-such-net", "resnet-18"});
}

TEST_F(CliTest, MissingModelFile) {
  ExpectRejected({"nets/missing.json", "--db", "x.db"}, {"nets/missing.json"});
}

TEST_F(CliTest, MalformedShape) {
  ExpectRejected({"op", "matmul", "--shape", "1,x,3", "--db", "x.db"}, {"1,x,3"});
  ExpectRejected({"op", "matmul", "--shape", "0,4,4", "--db", "x.db"}, {"0,4,4"});
  ExpectRejected({"op", "conv2d", "--shape", "1,3,8", "--db", "x.db"}, {"1,3,8"});
}

TEST_F(CliTest, UnknownFlag) {
  // No --db: the default database file (in the working directory) must not appear either.
  ExpectRejected({"resnet-18", "--frobnicate"}, {"--frobnicate"});
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--frobnicate", "--db", "x.db"}, {"--frobnicate"});
}

TEST_F(CliTest, UnknownOpKind) {
  ExpectRejected({"op", "convolution3d", "--shape", "1,2,3", "--db", "x.db"}, {"convolution3d"});
}

TEST_F(CliTest, BadOptionValues) {
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "0", "--db", "x.db"}, {"--trials"});
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--strategy", "annealing", "--db", "x.db"},
                 {"annealing"});
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--target", "tpu", "--db", "x.db"}, {"tpu"});
  for (const char* seconds : {"-1", "nan", "inf", "15s", "", "1e9"}) {
    ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--build-timeout", seconds, "--db", "x.db"},
                   {"--build-timeout", "seconds"});
  }
}

// --build-timeout lands in the measurement protocol, so every record says the build timeout
// it was measured under (the default schedule's and the finalists' too).
TEST_F(CliTest, BuildTimeoutIsRecordedInEachProtocol) {
  std::mt19937 rng(std::random_device{}());
  const double seconds = 0.25 * static_cast<double>(1 + rng() % 400);
  test::ProcessResult r = Tune(dir_, {"op", "matmul", "--shape", "16,16,16", "--target", "llvm", "--trials", "2",
                                      "--batch", "2", "--repeats", "1", "--min-repeat-ms", "0", "--build-timeout",
                                      std::to_string(seconds), "--db", "bt.db"});
  ASSERT_TRUE(r.exited) << r;
  ASSERT_EQ(r.exit_code, 0) << r;
  auto db = dataset::RecordDatabase::OpenReadOnly(dir_.Join("bt.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto records = (*db)->ExportRecords();
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_GE(records->size(), 3u);  // the default schedule and two trials
  for (const dataset::PortableRecord& p : *records) {
    auto protocol = measure::MeasureProtocol::FromJson(p.record.protocol_json);
    ASSERT_TRUE(protocol.ok()) << protocol.status();
    EXPECT_EQ(protocol->build_timeout_s, seconds) << p.record.strategy << ": " << p.record.protocol_json;
  }
}

// --interleave times the search's batches side by side; without it only the finalists are.
TEST_F(CliTest, InterleaveIsRecordedInTheSearchProtocol) {
  for (const bool interleave : {false, true}) {
    const std::string name = interleave ? "il.db" : "plain.db";
    std::vector<std::string> args = {"op", "matmul", "--shape", "16,16,16", "--target", "llvm", "--trials", "4",
                                     "--batch", "2", "--repeats", "1", "--min-repeat-ms", "0", "--db", name};
    if (interleave) args.push_back("--interleave");
    test::ProcessResult r = Tune(dir_, args);
    ASSERT_TRUE(r.exited) << r;
    ASSERT_EQ(r.exit_code, 0) << r;
    auto db = dataset::RecordDatabase::OpenReadOnly(dir_.Join(name));
    ASSERT_TRUE(db.ok()) << db.status();
    auto records = (*db)->ExportRecords();
    ASSERT_TRUE(records.ok()) << records.status();
    int search = 0;
    for (const dataset::PortableRecord& p : *records) {
      auto protocol = measure::MeasureProtocol::FromJson(p.record.protocol_json);
      ASSERT_TRUE(protocol.ok()) << protocol.status();
      if (p.record.strategy == "finalist") {
        EXPECT_TRUE(protocol->interleave) << p.record.protocol_json;
      } else if (p.record.strategy != "default") {
        ++search;
        EXPECT_EQ(protocol->interleave, interleave) << p.record.strategy << ": " << p.record.protocol_json;
      }
    }
    EXPECT_EQ(search, 4);
  }
}

TEST_F(CliTest, UnwritableDatabasePath) {
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "/proc/nonexistent/x.db"},
                 {"/proc/nonexistent/x.db"});
  test::WriteFileBytes(dir_.Join("plain"), "not a directory\n");
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "plain/x.db"}, {"plain/x.db"});
  EXPECT_EQ(test::ReadFileBytes(dir_.Join("plain")), "not a directory\n");
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "no/such/dir/x.db"},
                 {"no/such/dir/x.db"});
}

TEST_F(CliTest, ReadOnlyDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write to read-only directories";
  std::filesystem::create_directory(dir_.Join("ro"));
  ASSERT_EQ(::chmod(dir_.Join("ro").c_str(), 0555), 0);
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "ro/x.db"}, {"ro/x.db"});
  EXPECT_TRUE(std::filesystem::is_empty(dir_.Join("ro")));
}

TEST_F(CliTest, CorruptDatabaseIsLeftUntouched) {
  std::mt19937 rng(12345);
  std::string garbage(16384, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng());
  test::WriteFileBytes(dir_.Join("corrupt.db"), garbage);
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "corrupt.db"}, {"corrupt.db"});
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--resume", "--db", "corrupt.db"},
                 {"corrupt.db"});
  ExpectRejected({"db", "best", "--db", "corrupt.db"}, {"corrupt.db"});
  ExpectRejected({"db", "tasks", "--db", "corrupt.db"}, {"corrupt.db"});
  EXPECT_TRUE(test::ReadFileBytes(dir_.Join("corrupt.db")) == garbage) << "corrupt.db was modified";
}

TEST_F(CliTest, ForeignSqliteDatabaseIsLeftUntouched) {
  const std::string path = dir_.Join("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); "
                             "INSERT INTO notes(text) VALUES ('keep me');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string bytes = test::ReadFileBytes(path);
  ASSERT_FALSE(bytes.empty());
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "1", "--db", "other.db"}, {"other.db"});
  ExpectRejected({"db", "stats", "--db", "other.db"}, {"other.db"});
  EXPECT_TRUE(test::ReadFileBytes(path) == bytes) << "other.db was modified";
}

TEST_F(CliTest, MalformedModelFile) {
  test::WriteFileBytes(dir_.Join("broken.json"), "{\"name\": \"broken\", \"layers\": [ {\"op\": ");
  ExpectRejected({"broken.json", "--db", "x.db"}, {"broken.json"});
  test::WriteFileBytes(dir_.Join("badlayer.json"),
                       R"({"name": "n", "layers": [{"name": "fc", "op": "matmul", "shape": "4,4"}]})");
  ExpectRejected({"badlayer.json", "--db", "x.db"}, {"badlayer.json", "4,4"});
  test::WriteFileBytes(dir_.Join("badop.json"),
                       R"({"name": "n", "layers": [{"name": "p", "op": "maxpool", "shape": "4,4,4"}]})");
  ExpectRejected({"badop.json", "--db", "x.db"}, {"badop.json", "maxpool"});
}

// A model file's "name" of any type but a string is a malformed file (exit 2), never an abort.
TEST_F(CliTest, ModelFileNameOfAnotherType) {
  for (const char* name : {"5", "null", "true", "[]", "{}", "-1.5", "[\"a\"]", "{\"a\": 1}"}) {
    test::WriteFileBytes(dir_.Join("named.json"), std::string(R"({"name": )") + name +
                                                      R"(, "layers": [{"op": "dense", "shape": "1,4,4"}]})");
    ExpectRejected({"named.json", "--db", "x.db"}, {"malformed model file 'named.json'", "\"name\" must be a string"});
    test::ProcessResult r = Tune(dir_, {"named.json", "--db", "x.db"});
    EXPECT_TRUE(r.exited && r.exit_code == 2) << name << ": " << r;
  }
}

// Shapes whose buffers cannot fit this machine are refused before anything is written, with
// the bytes needed and the limit.
TEST_F(CliTest, ShapeTooBigForMemoryIsRefusedUpFront) {
  for (const auto& [op, shape] : std::vector<std::pair<std::string, std::string>>{
           {"matmul", "99999999999,4,4"}, {"conv2d", "1,100000,56,56,100000,3,3,1,1"}, {"dense", "4,4,77777777777"}}) {
    ExpectRejected({"op", op, "--shape", shape, "--target", "llvm", "--trials", "1", "--db", "x.db"},
                   {op + " ", " of buffers; this machine allows ", "(half of its "});
    test::ProcessResult r = Tune(dir_, {"op", op, "--shape", shape, "--trials", "1", "--db", "x.db"});
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r;
  }
  test::WriteFileBytes(dir_.Join("huge.json"), R"({"layers": [{"op": "dense", "shape": "1,4,4"},
      {"op": "matmul", "shape": "99999999999,4,4"}]})");
  ExpectRejected({"huge.json", "--db", "x.db"}, {"matmul 99999999999x4x4 needs "});
}

// Trials x tasks beyond what a run can count, and layer counts that add up beyond an int, are
// refused (exit 2); neither wraps around to 0 trials or a negative count.
TEST_F(CliTest, TrialAndCountOverflowsAreRefused) {
  std::mt19937_64 rng(1);
  std::string layers;
  const int tasks = 2148 + static_cast<int>(rng() % 500);  // x 10^6 trials > 2^31 - 1
  for (int i = 0; i < tasks; ++i) {
    layers += std::string(i ? "," : "") + R"({"op": "matmul", "shape": ")" + std::to_string(i + 1) + R"(,4,4"})";
  }
  test::WriteFileBytes(dir_.Join("many.json"), R"({"name": "many", "layers": [)" + layers + "]}");
  ExpectRejected({"many.json", "--trials", "1000000", "--db", "x.db"},
                 {"--trials 1000000 x " + std::to_string(tasks) + " tasks", "more than one run can count"});
  ExpectRejected({"op", "matmul", "--shape", "4,4,4", "--trials", "100000000", "--db", "x.db"}, {"--trials"});

  const int copies = 2148 + static_cast<int>(rng() % 1000);  // x 10^6 > 2^31 - 1
  layers.clear();
  for (int i = 0; i < copies; ++i) {
    layers += std::string(i ? "," : "") + R"({"op": "matmul", "shape": "8,4,4", "count": 1000000})";
  }
  test::WriteFileBytes(dir_.Join("dup.json"), R"({"name": "dup", "layers": [)" + layers + "]}");
  ExpectRejected({"dup.json", "--trials", "1", "--db", "x.db"}, {"dup.json", "add up to more than 2147483647"});
  test::ProcessResult r = Tune(dir_, {"dup.json", "--trials", "1", "--db", "x.db"});
  EXPECT_TRUE(r.exited && r.exit_code == 2) << r;
}

TEST_F(CliTest, DbQueryOfMissingDatabase) {
  ExpectRejected({"db", "best", "--db", "missing.db"}, {"missing.db"});
  ExpectRejected({"db", "tasks", "--db", "missing.db"}, {"missing.db"});
  ExpectRejected({"db", "history", "--task", "1", "--db", "missing.db"}, {"missing.db"});
  ExpectRejected({"db", "stats", "--db", "missing.db"}, {"missing.db"});
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("missing.db")));
}

// ---------------------------------------------------------------------------------------------
// Kill and resume

// A record as committed, for comparing database snapshots.
struct Committed {
  int64_t id = 0;
  int64_t task_id = 0;
  std::string config_json, strategy, status, message;
  std::vector<double> costs_s;
  double timestamp = 0;
  bool operator==(const Committed&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Committed& c) {
  return os << "#" << c.id << " " << c.strategy << " " << c.status << " " << c.config_json;
}

// Every record in the database at `path`, by id; nullopt while the file cannot be opened yet
// (not created, or its schema not yet committed by the writer).
std::optional<std::map<int64_t, Committed>> Snapshot(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  auto db = dataset::RecordDatabase::Open(path, /*create=*/false);
  if (!db.ok()) return std::nullopt;
  auto tasks = (*db)->Tasks();
  auto targets = (*db)->Targets();
  if (!tasks.ok() || !targets.ok()) return std::nullopt;
  std::map<int64_t, Committed> out;
  for (const auto& task : *tasks) {
    for (const auto& target : *targets) {
      auto records = (*db)->Records(task.id, target.id);
      if (!records.ok()) return std::nullopt;
      for (const auto& r : *records) {
        out[r.id] = Committed{r.id,
                              r.task_id,
                              r.config_json,
                              r.strategy,
                              measure::StatusName(r.result.status),
                              r.result.message,
                              r.result.costs_s,
                              r.timestamp};
      }
    }
  }
  return out;
}

TEST_F(CliTest, KillAndResumeLosesNothingAndRepeatsNothing) {
  const std::string db_path = dir_.Join("kill.db");
  // --repeats 2 x --min-repeat-ms 20: every candidate takes at least ~40 ms whatever the machine,
  // so after 8 committed trials the run is surely not over when it is killed.
  const std::vector<std::string> command = {"op",        "matmul", "--shape", "128,128,128", "--trials",
                                            "40",        "--batch", "4",      "--db",        db_path,
                                            "--timeout", "5",       "--repeats", "2",         "--min-repeat-ms",
                                            "20",        "--seed",  "3"};
  test::TempDir logs;
  std::map<int64_t, Committed> before;
  {
    test::Subprocess tune;
    std::vector<std::string> argv = command;
    argv.insert(argv.begin(), kTune);
    ASSERT_TRUE(tune.Start(argv, dir_.path(), logs.Join("out"), logs.Join("err")));
    // Poll until the default schedule and at least 8 trials are committed. The limit only
    // keeps a broken build from hanging the suite.
    const auto limit = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    int search_records = 0;
    while (search_records < 8) {
      ASSERT_FALSE(tune.Finished()) << "tune ended before it could be killed: "
                                    << tune.result() << test::ReadFileBytes(logs.Join("err"));
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "no progress: " << test::ReadFileBytes(logs.Join("err"));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      auto snap = Snapshot(db_path);
      if (!snap) continue;
      search_records = 0;
      for (const auto& [id, r] : *snap) search_records += r.strategy != "default";
    }
    tune.Kill(SIGKILL);
    const test::ProcessResult& killed = tune.Wait();
    EXPECT_EQ(killed.term_signal, SIGKILL) << killed;
    auto snap = Snapshot(db_path);
    ASSERT_TRUE(snap.has_value());
    before = *snap;
  }
  int before_search = 0;
  for (const auto& [id, r] : before) before_search += r.strategy != "default";
  ASSERT_GE(before_search, 8);
  ASSERT_LT(before_search, 40) << "the run finished before it was killed";

  std::vector<std::string> resume = command;
  resume.push_back("--resume");
  test::ProcessResult r = Tune(dir_, resume);
  ASSERT_TRUE(r.exited) << r;
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("speedup")) << r;

  auto after = Snapshot(db_path);
  ASSERT_TRUE(after.has_value());
  for (const auto& [id, rec] : before) {
    auto it = after->find(id);
    ASSERT_NE(it, after->end()) << "committed record lost: " << rec;
    EXPECT_EQ(it->second, rec) << "committed record changed";
  }
  std::set<int64_t> task_ids;
  std::map<std::string, int> configs;
  int defaults = 0, search = 0;
  for (const auto& [id, rec] : *after) {
    task_ids.insert(rec.task_id);
    if (rec.strategy == "default") {
      ++defaults;
      continue;
    }
    if (rec.strategy == "finalist") continue;  // deliberate re-measurements of the best configs
    ++search;
    ++configs[rec.config_json];
  }
  EXPECT_EQ(task_ids.size(), 1u);
  EXPECT_EQ(defaults, 1) << "the default schedule was committed before the kill and is reused";
  EXPECT_EQ(search, 40);
  for (const auto& [config, n] : configs) EXPECT_EQ(n, 1) << config << " measured " << n << " times";
  // The resumed run reports the whole budget, not just what it measured itself.
  EXPECT_EQ(CountLinesWith(r.out, "128x128x128"), 1) << r;
  EXPECT_THAT(r.out, HasSubstr(" 40 ")) << r;
}

// ---------------------------------------------------------------------------------------------
// Signals in every phase

/// Waits up to `limit_s` for `p` to end; SIGKILLs it (and reports hit_limit) otherwise.
test::ProcessResult WaitForCliEnd(test::Subprocess& p, double limit_s) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (!p.Finished() && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (p.Finished()) return p.result();
  p.Kill(SIGKILL);
  test::ProcessResult r = p.Wait();
  r.hit_limit = true;
  return r;
}

/// Waits up to `limit_s` for `path` to contain `text`; false when it does not in time.
bool WaitForText(const std::string& path, const std::string& text, double limit_s) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (std::chrono::steady_clock::now() < limit) {
    if (std::filesystem::exists(path) && test::ReadFileBytes(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// The runs recorded in `db_path`.
std::vector<dataset::RunInfo> RunsOf(const std::string& db_path) {
  auto db = dataset::RecordDatabase::Open(db_path, /*create=*/false);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return {};
  auto runs = (*db)->Runs();
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? *runs : std::vector<dataset::RunInfo>{};
}

// How long a stopped run may take to end: "about a second", with room for a loaded machine.
constexpr double kStopLimitS = 4;

// SIGINT while the naive reference of a big matmul is computed (minutes of work): tune ends
// within about a second with the interrupted run's code, the run marked interrupted and no
// record written.
TEST_F(CliTest, SigintStopsTheReferenceComputation) {
  test::TempDir logs;
  test::Subprocess tune;
  const std::string db_path = dir_.Join("ref.db");
  ASSERT_TRUE(tune.Start({kTune, "op", "matmul", "--shape", "3000,3000,3000", "--trials", "1", "--db", db_path},
                         dir_.path(), logs.Join("out"), logs.Join("err")));
  // The line printed just before the loop starts; the default schedule's reference follows.
  ASSERT_TRUE(WaitForText(logs.Join("err"), "database " + db_path, 60)) << test::ReadFileBytes(logs.Join("err"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto signalled = std::chrono::steady_clock::now();
  tune.Kill(SIGINT);
  test::ProcessResult r = WaitForCliEnd(tune, kStopLimitS);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::string err = test::ReadFileBytes(logs.Join("err"));
  ASSERT_FALSE(r.hit_limit) << "still running " << kStopLimitS << " s after SIGINT: " << err;
  EXPECT_TRUE(r.exited) << r << err;
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << err;
  EXPECT_THAT(err, HasSubstr("tune: interrupted")) << took;
  std::vector<dataset::RunInfo> runs = RunsOf(db_path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, "interrupted");
  auto snap = Snapshot(db_path);
  ASSERT_TRUE(snap.has_value());
  EXPECT_TRUE(snap->empty()) << "no record of a default that was never measured";
}

// SIGTERM while the tasks of a large model are prepared (made and checked, then their defaults
// measured): tune ends promptly with the interrupted run's code. Before the database is opened
// nothing is written; after, the run is marked interrupted.
TEST_F(CliTest, SigtermStopsTaskPreparation) {
  std::string layers;
  std::mt19937_64 rng(2);
  const int offset = static_cast<int>(rng() % 50);
  for (int i = 0; i < 12000; ++i) {
    const int c = 16 + (i + offset) % 7, h = 14 + i % 11, w = 14 + i % 13, oc = 16 + i % 17;
    layers += std::string(i ? "," : "") + R"({"op": "conv2d", "shape": "1,)" + std::to_string(c) + "," +
              std::to_string(h) + "," + std::to_string(w) + "," + std::to_string(oc) + R"(,3,3,1,1"})";
  }
  test::WriteFileBytes(dir_.Join("large.json"), R"({"name": "large", "layers": [)" + layers + "]}");
  for (double delay_s : {0.4, 2.5}) {
    SCOPED_TRACE(delay_s);
    test::TempDir logs;
    test::Subprocess tune;
    const std::string db_path = dir_.Join("prep" + std::to_string(static_cast<int>(delay_s * 10)) + ".db");
    ASSERT_TRUE(tune.Start({kTune, "large.json", "--trials", "1", "--db", db_path}, dir_.path(), logs.Join("out"),
                           logs.Join("err")));
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    ASSERT_FALSE(tune.Finished()) << test::ReadFileBytes(logs.Join("err"));
    tune.Kill(SIGTERM);
    test::ProcessResult r = WaitForCliEnd(tune, kStopLimitS);
    const std::string err = test::ReadFileBytes(logs.Join("err"));
    ASSERT_FALSE(r.hit_limit) << "still running " << kStopLimitS << " s after SIGTERM: " << err.substr(0, 2000);
    EXPECT_TRUE(r.exited) << r << err.substr(0, 2000);
    EXPECT_EQ(r.exit_code, 128 + SIGINT) << err.substr(0, 2000);
    if (err.find("nothing was written") != std::string::npos) {
      EXPECT_FALSE(std::filesystem::exists(db_path));
    } else {
      EXPECT_THAT(err, HasSubstr("tune: interrupted;"));
      std::vector<dataset::RunInfo> runs = RunsOf(db_path);
      ASSERT_EQ(runs.size(), 1u);
      EXPECT_EQ(runs[0].status, "interrupted");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The main job, end to end, on a tiny model file

TEST_F(CliTest, ModelFileTuneThenQueryDb) {
  test::WriteFileBytes(dir_.Join("tiny.json"), R"({
    "name": "tiny-net",
    "layers": [
      {"name": "fc1", "op": "dense", "shape": "1,64,32", "bias": true, "relu": true},
      {"name": "conv1", "op": "conv2d", "shape": "1,4,8,8,4,3,3,1,1", "relu": true, "count": 2},
      {"name": "conv2", "op": "conv2d", "shape": "1,4,8,8,4,3,3,1,1", "relu": true}
    ]
  })");
  std::vector<std::string> args = {"tiny.json", "--target", "llvm", "--trials", "3", "--batch", "2", "--db", "t.db"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  test::ProcessResult r = Tune(dir_, args);
  ASSERT_TRUE(r.exited) << r;
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(CountLinesWith(r.out, "speedup"), 1) << r;
  EXPECT_EQ(CountLinesWith(r.out, "estimated"), 1) << r;
  EXPECT_THAT(r.out, HasSubstr("tiny-net")) << r;
  EXPECT_EQ(CountLinesWith(r.out, "fc1"), 1) << r;
  EXPECT_EQ(CountLinesWith(r.out, "conv1"), 1) << r;
  EXPECT_EQ(CountLinesWith(r.out, "conv2 "), 0) << "identical workloads are merged into one task: " << r;

  // The tasks as stored, to find them in the query output.
  std::vector<dataset::TaskInfo> tasks;
  {
    auto db = dataset::RecordDatabase::Open(dir_.Join("t.db"), /*create=*/false);
    ASSERT_TRUE(db.ok()) << db.status();
    auto t = (*db)->Tasks();
    ASSERT_TRUE(t.ok()) << t.status();
    tasks = *t;
  }
  ASSERT_EQ(tasks.size(), 2u);

  test::ProcessResult best = Tune(dir_, {"db", "best", "--db", "t.db"});
  ASSERT_TRUE(best.exited) << best;
  EXPECT_EQ(best.exit_code, 0) << best;
  for (const auto& t : tasks) EXPECT_EQ(CountLinesWith(best.out, t.workload_key), 1) << t.workload_key << best;

  test::ProcessResult best_k = Tune(dir_, {"db", "best", "--db", "t.db", "--task", tasks[0].workload_key, "-k", "2"});
  ASSERT_TRUE(best_k.exited) << best_k;
  EXPECT_EQ(best_k.exit_code, 0) << best_k;
  EXPECT_EQ(CountLinesWith(best_k.out, tasks[0].workload_key), 2) << best_k;
  EXPECT_EQ(CountLinesWith(best_k.out, tasks[1].workload_key), 0) << best_k;

  test::ProcessResult list = Tune(dir_, {"db", "tasks", "--db", "t.db"});
  ASSERT_TRUE(list.exited) << list;
  EXPECT_EQ(list.exit_code, 0) << list;
  for (const auto& t : tasks) EXPECT_EQ(CountLinesWith(list.out, t.workload_key), 1) << t.workload_key << list;

  test::ProcessResult history = Tune(dir_, {"db", "history", "--task", "1", "--db", "t.db"});
  ASSERT_TRUE(history.exited) << history;
  EXPECT_EQ(history.exit_code, 0) << history;
  const dataset::TaskInfo& first = tasks[0].id == 1 ? tasks[0] : tasks[1];
  EXPECT_EQ(CountLinesWith(history.out, first.workload_key), 7)
      << "3 trials + the default schedule + the 3 finalists measured again: " << history;
  EXPECT_EQ(CountLinesWith(history.out, "finalist"), 3) << history;
  EXPECT_EQ(CountLinesWith(history.out, "default"), 1) << history;

  test::ProcessResult stats = Tune(dir_, {"db", "stats", "--db", "t.db"});
  ASSERT_TRUE(stats.exited) << stats;
  EXPECT_EQ(stats.exit_code, 0) << stats;
  EXPECT_THAT(stats.out, HasSubstr("ok")) << stats;

  // A selector that matches nothing is an error of one line, not an empty table.
  test::ProcessResult none = Tune(dir_, {"db", "history", "--task", "99", "--db", "t.db"});
  ASSERT_TRUE(none.exited) << none;
  EXPECT_NE(none.exit_code, 0) << none;
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none;
  EXPECT_THAT(none.err, HasSubstr("99")) << none;
}

TEST_F(CliTest, BadGivenConfig) {
  ExpectRejected({"op", "matmul", "--shape", "16,16,16", "--config", "{\"tile_m\":[1,1,16]}", "--db", "x.db"},
                 {"--config", "tile_n", "missing"});
  ExpectRejected({"op", "matmul", "--shape", "16,16,16", "--config", "[1,2", "--db", "x.db"}, {"[1,2"});
}

// `tune op --config` measures the given config first; with --trials equal to their number,
// nothing else: `tune db best` then shows it, as given.
TEST_F(CliTest, GivenConfigIsMeasured) {
  std::vector<std::string> args = {"op", "matmul", "--shape", "16,16,16", "--trials", "1", "--db", "g.db"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  test::ProcessResult first = Tune(dir_, args);
  ASSERT_TRUE(first.exited && first.exit_code == 0) << first;
  test::ProcessResult best = Tune(dir_, {"db", "best", "--db", "g.db"});
  ASSERT_TRUE(best.exited && best.exit_code == 0) << best;
  const size_t at = best.out.find("{\"tile_m\"");
  ASSERT_NE(at, std::string::npos) << best;
  const std::string config = best.out.substr(at, best.out.find('\n', at) - at);
  args = {"op", "matmul", "--shape", "16,16,16", "--trials", "1", "--finalists", "0", "--config", config,
          "--db", "h.db"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  test::ProcessResult given = Tune(dir_, args);
  ASSERT_TRUE(given.exited && given.exit_code == 0) << given;
  test::ProcessResult history = Tune(dir_, {"db", "history", "--db", "h.db"});
  ASSERT_TRUE(history.exited && history.exit_code == 0) << history;
  EXPECT_EQ(CountLinesWith(history.out, "given"), 1) << history;
  for (const std::string& line : Lines(history.out)) {
    if (line.find("given") != std::string::npos) EXPECT_THAT(line, HasSubstr(config)) << history;
  }
}

TEST_F(CliTest, ShowKernelPrintsPseudoC) {
  std::vector<std::string> args = {"op", "conv2d", "--shape", "1,8,10,10,8,3,3,1,1", "--trials", "4",
                                   "--show-kernel", "--db", "k.db"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  test::ProcessResult r = Tune(dir_, args);
  ASSERT_TRUE(r.exited) << r;
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_THAT(r.out, HasSubstr("speedup")) << r;
  EXPECT_THAT(r.out, HasSubstr("for (")) << r;
  EXPECT_THAT(r.out, HasSubstr("// config {")) << r;
}

}  // namespace
}  // namespace tune
