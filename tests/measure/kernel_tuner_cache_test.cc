// Tests of KernelTunerCache::Load: handcrafted caches, every kind of malformed file, the real caches.
#include "measure/kernel_tuner_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/measure_cache_fixture.h"
#include "tests/common/test_seed.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

const std::string kDataDir = std::string(TUNE_SOURCE_DIR) + "/../shared/data/kernel_tuner";

// A 2 x 3 space with 5 of its 6 points recorded: one runtime failure, one compile failure,
// and "2,4" absent (infeasible).
json SmallCache() {
  return json::parse(R"({
    "device_name": "Test GPU", "kernel_name": "toy", "problem_size": [64, 64],
    "tune_params_keys": ["bx", "tile"],
    "tune_params": {"bx": [1, 2], "tile": [1, 2, 4]},
    "objective": "time",
    "cache": {
      "1,1": {"bx": 1, "tile": 1, "time": 4.0, "times": [4.1, 3.9], "compile_time": 1.5},
      "1,2": {"bx": 1, "tile": 2, "time": 2.5, "times": [2.5, 2.5]},
      "1,4": {"bx": 1, "tile": 4, "time": "RuntimeFailedConfig"},
      "2,1": {"bx": 2, "tile": 1, "time": 1.25},
      "2,2": {"bx": 2, "tile": 2, "time": "CompilationFailedConfig"}
    }
  })");
}

class KernelTunerCacheTest : public test::CacheFileFixture {
 protected:
  // Loads `doc` written as plain JSON and expects InvalidArgument whose one-line message names
  // the file and contains `needle`.
  void ExpectInvalid(const std::string& bytes, const std::string& needle, const std::string& name = "bad.json") {
    std::string path = Write(name, bytes);
    auto c = KernelTunerCache::Load(path);
    ASSERT_FALSE(c.ok()) << "loaded " << bytes.substr(0, 200);
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    std::string msg(c.status().message());
    EXPECT_THAT(msg, HasSubstr(path));
    EXPECT_THAT(msg, HasSubstr(needle));
    EXPECT_THAT(msg, Not(HasSubstr("\n")));
  }
};

void ExpectSmall(const KernelTunerCache& c, const std::string& path) {
  EXPECT_EQ(c.path, path);
  EXPECT_EQ(c.device_name, "Test GPU");
  EXPECT_EQ(c.kernel_name, "toy");
  EXPECT_EQ(c.param_names, (std::vector<std::string>{"bx", "tile"}));
  EXPECT_EQ(c.param_values, (std::vector<std::vector<int64_t>>{{1, 2}, {1, 2, 4}}));
  ASSERT_EQ(c.entries.size(), 5u);
  ASSERT_EQ(c.by_key.size(), 5u);
  const auto* e = c.Find({0, 0});
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->ok);
  EXPECT_DOUBLE_EQ(e->time_ms, 4.0);
  EXPECT_EQ(e->times_ms, (std::vector<double>{4.1, 3.9}));
  EXPECT_EQ(e->value_index, (std::vector<int>{0, 0}));
  const auto* rt = c.Find({0, 2});
  ASSERT_NE(rt, nullptr);
  EXPECT_FALSE(rt->ok);
  EXPECT_EQ(rt->failure, "RuntimeFailedConfig");
  EXPECT_TRUE(rt->times_ms.empty());
  const auto* ce = c.Find({1, 1});
  ASSERT_NE(ce, nullptr);
  EXPECT_FALSE(ce->ok);
  EXPECT_EQ(ce->failure, "CompilationFailedConfig");
  EXPECT_EQ(c.Find({1, 2}), nullptr);  // absent: infeasible
  EXPECT_EQ(c.Find({2, 0}), nullptr);  // out of range
  EXPECT_EQ(c.Find({0}), nullptr);     // wrong arity
  EXPECT_EQ(c.Key({1, 2}), "2,4");
  EXPECT_DOUBLE_EQ(c.BestTimeMs(), 1.25);
}

TEST_F(KernelTunerCacheTest, LoadsPlainJson) {
  std::string path = Write("small.json", SmallCache().dump(1));
  auto c = KernelTunerCache::Load(path);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectSmall(*c, path);
}

TEST_F(KernelTunerCacheTest, LoadsGzipByContentNotName) {
  std::string gz = test::Gzip(SmallCache().dump());
  for (const std::string name : {"small.json.gz", "small.json"}) {
    std::string path = Write(name, gz);
    auto c = KernelTunerCache::Load(path);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    ExpectSmall(*c, path);
  }
  // Concatenated gzip members form one file, as gzip(1) reads them.
  std::string text = SmallCache().dump();
  std::string path = Write("two_members.json.gz", test::Gzip(text.substr(0, 100)) + test::Gzip(text.substr(100)));
  auto c = KernelTunerCache::Load(path);
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectSmall(*c, path);
}

TEST_F(KernelTunerCacheTest, FailedConfigIsAnyStringTime) {
  json doc = SmallCache();
  doc["cache"]["2,1"]["time"] = "InvalidConfig";
  auto c = KernelTunerCache::Load(Write("s.json", doc.dump()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->Find({1, 0})->ok);
  EXPECT_EQ(c->Find({1, 0})->failure, "InvalidConfig");
  EXPECT_DOUBLE_EQ(c->BestTimeMs(), 2.5);
}

// Caches that mark failures with a huge time (1e20, the largest double) load them as failures,
// so a replay never takes them for measurements; a slow but real time stays a measurement.
TEST_F(KernelTunerCacheTest, HugeTimeIsAFailureMarker) {
  for (double marker : {1e20, 1.7976931348623157e308, KernelTunerCache::kFailureMarkerMs}) {
    json doc = SmallCache();
    doc["cache"]["2,1"]["time"] = marker;   // was the fastest config (1.25 ms)
    doc["cache"]["1,1"]["time"] = 8.64e7;   // a day: slow, but a measurement
    auto c = KernelTunerCache::Load(Write("marker.json", doc.dump()));
    ASSERT_TRUE(c.ok()) << c.status();
    const auto* e = c->Find({1, 0});
    ASSERT_NE(e, nullptr);
    EXPECT_FALSE(e->ok) << marker;
    EXPECT_THAT(e->failure, HasSubstr("FailureMarkerTime"));
    EXPECT_TRUE(c->Find({0, 0})->ok);
    EXPECT_DOUBLE_EQ(c->BestTimeMs(), 2.5) << "the marker must not become the optimum";
    int failed = 0;
    for (const auto& entry : c->entries) failed += entry.ok ? 0 : 1;
    EXPECT_EQ(failed, 3);  // the two failure strings and the marker
  }
}

TEST_F(KernelTunerCacheTest, NoSuccessfulEntryHasInfiniteBest) {
  json doc = SmallCache();
  doc["cache"] = json::object();
  auto c = KernelTunerCache::Load(Write("empty.json", doc.dump()));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->entries.empty());
  EXPECT_TRUE(std::isinf(c->BestTimeMs()));
}

TEST_F(KernelTunerCacheTest, MissingFileIsNotFound) {
  auto c = KernelTunerCache::Load(dir_.Join("nope.json.gz"));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsNotFound(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nope.json.gz"));
  EXPECT_TRUE(absl::IsNotFound(KernelTunerCache::Load(dir_.path()).status()));
}

TEST_F(KernelTunerCacheTest, TruncatedGzip) {
  std::string gz = test::Gzip(SmallCache().dump());
  for (size_t keep : {gz.size() - 1, gz.size() - 8, gz.size() / 2, size_t{12}, size_t{3}}) {
    SCOPED_TRACE(keep);
    ExpectInvalid(gz.substr(0, keep), "truncated gzip", "cut.json.gz");
  }
}

TEST_F(KernelTunerCacheTest, CorruptGzip) {
  std::string gz = test::Gzip(SmallCache().dump());
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0x55;  // inside the CRC32 trailer
  ExpectInvalid(bad_crc, "corrupt gzip", "crc.json.gz");
  ExpectInvalid(gz + "garbage", "trailing garbage", "tail.json.gz");
  ExpectInvalid(SmallCache().dump(), "not a gzip file", "plain.json.gz");
}

TEST_F(KernelTunerCacheTest, InvalidJson) {
  std::string text = SmallCache().dump(1);
  ExpectInvalid(text.substr(0, text.size() / 2), "invalid JSON");
  ExpectInvalid("", "invalid JSON");
  ExpectInvalid("{\"tune_params_keys\": [\"a\",]}", "invalid JSON");
  ExpectInvalid(test::Gzip(text.substr(0, text.size() - 3)), "invalid JSON", "half.json.gz");
  ExpectInvalid("[1, 2]", "top level is array");
}

TEST_F(KernelTunerCacheTest, MissingFields) {
  for (const char* field : {"tune_params_keys", "tune_params", "cache"}) {
    json doc = SmallCache();
    doc.erase(field);
    ExpectInvalid(doc.dump(), std::string("missing field '") + field + "'");
  }
  json doc = SmallCache();
  doc["cache"]["2,1"].erase("time");
  ExpectInvalid(doc.dump(), "has no 'time'");
  doc = SmallCache();
  doc["cache"]["2,1"].erase("tile");
  ExpectInvalid(doc.dump(), "lacks parameter 'tile'");
  doc = SmallCache();
  doc["tune_params"].erase("tile");
  ExpectInvalid(doc.dump(), "'tune_params' lacks parameter 'tile'");
}

TEST_F(KernelTunerCacheTest, BadParameters) {
  json doc = SmallCache();
  doc["tune_params"]["extra"] = {1};
  ExpectInvalid(doc.dump(), "parameter 'extra' that 'tune_params_keys' lacks");
  doc = SmallCache();
  doc["tune_params"]["tile"] = json::array();
  ExpectInvalid(doc.dump(), "non-empty array");
  doc = SmallCache();
  doc["tune_params"]["tile"] = {1, 2, 2};
  ExpectInvalid(doc.dump(), "lists 2 twice");
  doc = SmallCache();
  doc["tune_params"]["tile"] = {1, 2.5, 4};
  ExpectInvalid(doc.dump(), "expected an integer");
  doc = SmallCache();
  doc["tune_params_keys"] = {"bx", "bx"};
  ExpectInvalid(doc.dump(), "lists 'bx' twice");
  doc = SmallCache();
  doc["tune_params_keys"] = json::array();
  ExpectInvalid(doc.dump(), "tune_params_keys");
}

TEST_F(KernelTunerCacheTest, KeyParamMismatch) {
  json doc = SmallCache();
  doc["cache"]["2,1"]["bx"] = 1;
  ExpectInvalid(doc.dump(), "cache entry '2,1' has bx=1 but its key says 2");
  doc = SmallCache();
  doc["cache"]["2,1,7"] = doc["cache"]["2,1"];
  ExpectInvalid(doc.dump(), "'2,1,7' has 3 values, expected 2");
  doc = SmallCache();
  doc["cache"]["02,1"] = doc["cache"]["2,1"];
  doc["cache"].erase("2,1");
  ExpectInvalid(doc.dump(), "value '02' of parameter 'bx' is not in tune_params");
}

TEST_F(KernelTunerCacheTest, ValuesNotInTuneParams) {
  json doc = SmallCache();
  doc["cache"]["2,8"] = {{"bx", 2}, {"tile", 8}, {"time", 1.0}};
  ExpectInvalid(doc.dump(), "value '8' of parameter 'tile' is not in tune_params");
}

TEST_F(KernelTunerCacheTest, BadTimes) {
  json doc = SmallCache();
  doc["cache"]["2,1"]["time"] = nullptr;
  ExpectInvalid(doc.dump(), "'time' is null");
  doc = SmallCache();
  doc["cache"]["2,1"]["time"] = -1.0;
  ExpectInvalid(doc.dump(), "expected a positive number");
  doc = SmallCache();
  doc["cache"]["2,1"]["times"] = "fast";
  ExpectInvalid(doc.dump(), "'times' is string");
  doc = SmallCache();
  doc["cache"]["2,1"] = 3;
  ExpectInvalid(doc.dump(), "cache entry '2,1' is number");
}

// Numbers beyond the double range anywhere in a cache (a time, a run's time, a parameter) are a
// one-line InvalidArgument naming the number, never an exception out of the loader.
TEST_F(KernelTunerCacheTest, NumbersBeyondDoubleRangeAreInvalid) {
  std::mt19937_64 rng = test::TestRng();
  for (int i = 0; i < 12; ++i) {
    const std::string number = std::string(rng() % 2 ? "-" : "") + std::to_string(1 + rng() % 9) + "e" +
                               std::to_string(309 + rng() % 5000);
    // A marker value where the number goes: a time, a run's time or a parameter of a record.
    json doc = SmallCache();
    constexpr int64_t kMarker = 987654321;
    switch (rng() % 3) {
      case 0: doc["cache"]["2,1"]["time"] = kMarker; break;
      case 1: doc["cache"]["1,1"]["times"][1] = kMarker; break;
      default: doc["cache"]["1,2"]["tile"] = kMarker; break;
    }
    std::string text = doc.dump();
    text.replace(text.find(std::to_string(kMarker)), std::to_string(kMarker).size(), number);
    ExpectInvalid(text, "invalid JSON: number overflow parsing '" + number + "'");
    ExpectInvalid(test::Gzip(text), "number overflow", "overflow.json.gz");
  }
}

TEST_F(KernelTunerCacheTest, NegativeRunTimesAreInvalid) {
  json doc = SmallCache();
  doc["cache"]["1,1"]["times"] = {4.1, -3.9};
  ExpectInvalid(doc.dump(), "'times' holds -3.9, expected non-negative milliseconds");
  doc = SmallCache();
  doc["cache"]["2,1"]["time"] = -1e300;
  ExpectInvalid(doc.dump(), "expected a positive number");
}

// JSON text (inflated or plain) longer than the limit is refused; inflating stops at the limit
// instead of holding the whole expansion of a small file.
TEST_F(KernelTunerCacheTest, TextBeyondTheLimitIsRefused) {
  std::mt19937_64 rng = test::TestRng(1);
  constexpr size_t kLimit = size_t{1} << 20;
  const std::string valid = SmallCache().dump();
  // Valid JSON padded with whitespace to 2..9 MiB: a small gzip file that inflates far.
  const std::string padded = valid.substr(0, valid.size() - 1) + std::string((2 + rng() % 8) << 20, ' ') + "}";
  const std::string gz = test::Gzip(padded);
  ASSERT_LT(gz.size(), kLimit / 16);
  std::string path = Write("bomb.json.gz", gz);
  auto c = KernelTunerCache::Load(path, kLimit);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("decompressed data larger than 1 MiB"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path));
  path = Write("big.json", padded);
  c = KernelTunerCache::Load(path, kLimit);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("file larger than 1 MiB"));
  // Within a larger limit both load.
  EXPECT_TRUE(KernelTunerCache::Load(path, padded.size()).ok());
  EXPECT_TRUE(KernelTunerCache::Load(Write("ok.json.gz", gz), padded.size()).ok());
}

// The default limit follows the machine's memory: 1/16 of it, within [64 MiB, 4 GiB].
TEST(KernelTunerCacheLimit, DefaultFollowsPhysicalMemory) {
  const size_t mem = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  const size_t limit = KernelTunerCache::DefaultMaxTextBytes();
  EXPECT_EQ(limit, std::clamp(mem / 16, size_t{64} << 20, size_t{4} << 30));
  EXPECT_LT(limit, mem);
}

struct RealCache {
  const char* file;
  size_t entries, ok, failed;
  double best_ms;
  const char* kernel;
};

class RealCacheTest : public ::testing::TestWithParam<RealCache> {};

TEST_P(RealCacheTest, CountsMatchTheReadme) {
  const RealCache& want = GetParam();
  const std::string path = kDataDir + "/" + want.file;
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is absent (the shared data folder is expected beside the repository)";
  }
  auto c = KernelTunerCache::Load(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kernel_name, want.kernel);
  EXPECT_EQ(c->entries.size(), want.entries);
  size_t ok = 0, failed = 0;
  for (const auto& e : c->entries) {
    (e.ok ? ok : failed)++;
    if (e.ok) EXPECT_FALSE(e.times_ms.empty());
    ASSERT_EQ(c->Find(e.value_index), &e);
  }
  EXPECT_EQ(ok, want.ok);
  EXPECT_EQ(failed, want.failed);
  EXPECT_NEAR(c->BestTimeMs(), want.best_ms, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    SharedData, RealCacheTest,
    ::testing::Values(RealCache{"convolution_A100.json.gz", 4362, 4201, 161, 0.5536000076681376, "convolution_kernel"},
                      RealCache{"gemm_RTX_3090.json.gz", 17956, 17956, 0, 5.657843999999999, "Xgemm"},
                      RealCache{"pnpoly_RTX_3090.json.gz", 4092, 3774, 318, 8.714240169525146, "cn_pnpoly"}),
    [](const auto& info) { return std::string(info.param.kernel).substr(0, 4); });

TEST(RealCacheTruncation, CutRealFileIsInvalid) {
  const std::string path = kDataDir + "/pnpoly_RTX_3090.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  std::string bytes = test::ReadFileBytes(path);
  test::TempDir dir;
  std::string cut = dir.Join("pnpoly_cut.json.gz");
  test::WriteFileBytes(cut, bytes.substr(0, bytes.size() / 2));
  auto c = KernelTunerCache::Load(cut);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("truncated gzip"));
}

}  // namespace
}  // namespace tune::measure
