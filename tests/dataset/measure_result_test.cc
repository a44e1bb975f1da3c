// Tests of the measure value types used by dataset: status names, protocol JSON, statistics, Target.
#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "measure/measure_result.h"
#include "measure/target.h"
#include "nlohmann/json.hpp"

namespace tune::measure {
namespace {

TEST(MeasureStatusTest, NamesRoundTrip) {
  const MeasureStatus all[] = {MeasureStatus::kOk,           MeasureStatus::kInvalidConfig,
                               MeasureStatus::kCompileError, MeasureStatus::kRuntimeError,
                               MeasureStatus::kTimeout,      MeasureStatus::kWrongResult};
  const char* names[] = {"ok",           "invalid_config", "compile_error",
                         "runtime_error", "timeout",       "wrong_result"};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(StatusName(all[i]), names[i]);
    absl::StatusOr<MeasureStatus> parsed = ParseStatusName(names[i]);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, all[i]);
  }
}

TEST(MeasureStatusTest, UnknownNameIsInvalidArgument) {
  absl::StatusOr<MeasureStatus> parsed = ParseStatusName("fast");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("fast"), std::string::npos);
  EXPECT_FALSE(ParseStatusName("OK").ok());
}

TEST(MeasureProtocolTest, JsonRoundTrip) {
  MeasureProtocol p;
  p.warmup = 3;
  p.repeats = 11;
  p.min_repeat_ms = 7.25;
  p.flush_cache = true;
  p.timeout_s = 2.5;
  p.rtol = 1e-5;
  p.atol = 3e-7;
  absl::StatusOr<MeasureProtocol> back = MeasureProtocol::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->warmup, 3);
  EXPECT_EQ(back->repeats, 11);
  EXPECT_EQ(back->min_repeat_ms, 7.25);
  EXPECT_TRUE(back->flush_cache);
  EXPECT_EQ(back->timeout_s, 2.5);
  EXPECT_EQ(back->rtol, 1e-5);
  EXPECT_EQ(back->atol, 3e-7);
  EXPECT_EQ(back->ToJson(), p.ToJson());
}

// The build timeout travels with the protocol (records, daemon jobs, workers' batches); a
// protocol written before it had one reads as the default, and a negative or infinite one is
// refused where a protocol is parsed (the daemon's job check, the worker's batch).
TEST(MeasureProtocolTest, BuildTimeoutRoundTripsAndIsChecked) {
  std::mt19937 rng(std::random_device{}());
  MeasureProtocol p;
  p.build_timeout_s = std::uniform_real_distribution<double>(0.001, 100.0)(rng);
  absl::StatusOr<MeasureProtocol> back = MeasureProtocol::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->build_timeout_s, p.build_timeout_s) << p.ToJson();
  p.build_timeout_s = 0;  // none
  back = MeasureProtocol::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->build_timeout_s, 0);

  absl::StatusOr<MeasureProtocol> old = MeasureProtocol::FromJson(R"({"repeats": 3, "timeout_s": 10})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->build_timeout_s, MeasureProtocol::kDefaultBuildTimeoutS);
  EXPECT_GE(MeasureProtocol::kDefaultBuildTimeoutS, 10);
  EXPECT_LE(MeasureProtocol::kDefaultBuildTimeoutS, 30);

  const double negative = -std::uniform_real_distribution<double>(0.001, 100.0)(rng);
  absl::StatusOr<MeasureProtocol> bad =
      MeasureProtocol::FromJson(nlohmann::json{{"build_timeout_s", negative}}.dump());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("build_timeout_s"), std::string::npos) << bad.status();
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"build_timeout_s": "15"})").ok());
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"build_timeout_s": 1e400})").ok());
}

TEST(MeasureProtocolTest, BuildTimedOutMessageSaysTheSeconds) {
  EXPECT_EQ(BuildTimedOutMessage(15), "build timed out after 15 s");
  EXPECT_EQ(BuildTimedOutMessage(0.25), "build timed out after 0.25 s");
}

TEST(MeasureProtocolTest, MissingFieldsKeepDefaults) {
  absl::StatusOr<MeasureProtocol> p = MeasureProtocol::FromJson(R"({"repeats": 9})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->repeats, 9);
  EXPECT_EQ(p->warmup, MeasureProtocol().warmup);
  EXPECT_EQ(p->min_repeat_ms, MeasureProtocol().min_repeat_ms);
}

// Interleaving is written only when on, so the protocols of records made before it keep their JSON.
TEST(MeasureProtocolTest, InterleaveRoundTripsAndIsAbsentWhenOff) {
  MeasureProtocol p;
  EXPECT_EQ(p.ToJson().find("interleave"), std::string::npos);
  p.interleave = true;
  EXPECT_NE(p.ToJson().find(R"("interleave":true)"), std::string::npos) << p.ToJson();
  absl::StatusOr<MeasureProtocol> back = MeasureProtocol::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->interleave);
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"repeats": 9})")->interleave);
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"interleave": 1})").ok());
}

TEST(MeasureProtocolTest, RejectsBadJson) {
  EXPECT_EQ(MeasureProtocol::FromJson("{not json").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MeasureProtocol::FromJson("[1, 2]").ok());
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"repeats": "five"})").ok());
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"repeats": 0})").ok());
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"flush_cache": 1})").ok());
  EXPECT_FALSE(MeasureProtocol::FromJson(R"({"timeout_s": -1})").ok());
}

TEST(MeasureResultTest, MedianAndMean) {
  MeasureResult r;
  r.status = MeasureStatus::kOk;
  r.costs_s = {3.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(r.Median(), 2.0);
  EXPECT_DOUBLE_EQ(r.Mean(), 2.0);
  r.costs_s = {4.0, 1.0, 2.0, 10.0};
  EXPECT_DOUBLE_EQ(r.Median(), 3.0);
  EXPECT_DOUBLE_EQ(r.Mean(), 4.25);
}

TEST(MeasureResultTest, InfinityWhenNotOkOrEmpty) {
  const double inf = std::numeric_limits<double>::infinity();
  MeasureResult empty;
  empty.status = MeasureStatus::kOk;
  EXPECT_EQ(empty.Median(), inf);
  EXPECT_EQ(empty.Mean(), inf);
  MeasureResult failed;
  failed.status = MeasureStatus::kWrongResult;
  failed.costs_s = {1e-3};
  EXPECT_EQ(failed.Median(), inf);
  EXPECT_EQ(failed.Mean(), inf);
}

TEST(TargetTest, HostCpuIsDescribed) {
  Target t = Target::HostCpu(2);
  EXPECT_EQ(t.kind, "llvm");
  EXPECT_FALSE(t.device_model.empty());
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_EQ(t.toolkit.rfind("llvm-", 0), 0u) << t.toolkit;
  EXPECT_EQ(t.threads, 2);
  if (!t.features.empty()) {
    EXPECT_EQ(t.features[0], '+') << t.features;
  }
  // Stable: asking twice gives the same key.
  EXPECT_EQ(t.Key(), Target::HostCpu(2).Key());
  EXPECT_NE(t.Key(), Target::HostCpu(1).Key());
}

TEST(TargetTest, KeyAndJson) {
  Target t;
  t.kind = "llvm";
  t.device_model = "AMD EPYC 7B13";
  t.cpu = "znver3";
  t.features = "+avx2,+fma";
  t.toolkit = "llvm-15.0.6";
  t.threads = 2;
  EXPECT_EQ(t.Key(), "llvm|znver3|AMD EPYC 7B13|avx2,fma|llvm-15.0.6|t2");
  nlohmann::json j = nlohmann::json::parse(t.ToJson());
  EXPECT_EQ(j["kind"], "llvm");
  EXPECT_EQ(j["device_model"], "AMD EPYC 7B13");
  EXPECT_EQ(j["cpu"], "znver3");
  EXPECT_EQ(j["features"], "+avx2,+fma");
  EXPECT_EQ(j["toolkit"], "llvm-15.0.6");
  EXPECT_EQ(j["threads"], 2);
}

}  // namespace
}  // namespace tune::measure
