// Tests of the .tcm artifact container: round trip, and refusal of corrupt, truncated and foreign-version files.
#include "costmodel/artifact.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codegen/templates.h"
#include "costmodel/features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"
#include "tests/costmodel/analytic_gemm.h"
#include "tests/costmodel/artifact_rewrite.h"

namespace tune::costmodel {
namespace {

using ::tune::test::RewriteArtifact;

using ::testing::HasSubstr;

// A small trained xgb model on two random matmul tasks (analytic latencies).
std::unique_ptr<OfflineModel> ArtifactTestModel(std::vector<TrainGroup>* groups_out = nullptr) {
  std::vector<TrainGroup> groups;
  std::mt19937_64 rng = tune::test::TestRng(31);
  for (const char* shape : {"64,64,64", "128,64,96", "96,128,64"}) {
    groups.push_back(test::AnalyticGemmGroup(shape, 40, rng));
  }
  auto model = MakeXgbOfflineModel();
  TrainOptions o;
  o.seed = 2;
  o.max_epochs = 10;
  EXPECT_TRUE(model->Train({groups[0], groups[1]}, {groups[2]}, o).ok());
  if (groups_out != nullptr) *groups_out = std::move(groups);
  return model;
}

void ExpectOneLineRefusal(const absl::StatusOr<Artifact>& a, const std::string& why) {
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(a.status().message());
  EXPECT_THAT(msg, HasSubstr(why));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

ArtifactInfo ArtifactTestInfo() {
  ArtifactInfo info;
  info.kind = "xgb";
  info.template_versions = {{"gemm", 3}};
  info.target_family = "llvm";
  info.target_key = "llvm|x|y";
  info.summary_json = R"({"records": 120})";
  info.metrics_json = R"({"test": {"overall": {"top1": 0.9}}})";
  info.options_json = R"({"seed": 2})";
  return info;
}

TEST(ArtifactTest, RoundTripKeepsInfoAndScores) {
  std::vector<TrainGroup> groups;
  auto model = ArtifactTestModel(&groups);
  auto bytes = SerializeArtifact(ArtifactTestInfo(), *model);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto a = ParseArtifact(*bytes);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.kind, "xgb");
  EXPECT_EQ(a->info.feature_version, kFeatureVersion);
  EXPECT_EQ(a->info.template_versions.at("gemm"), 3);
  EXPECT_EQ(a->info.target_key, "llvm|x|y");
  EXPECT_THAT(a->info.metrics_json, HasSubstr("0.9"));
  EXPECT_THAT(a->info.summary_json, HasSubstr("120"));
  for (const TrainGroup& g : groups) {
    std::vector<const ModelInput*> in;
    for (const auto& x : g.inputs) in.push_back(&x);
    EXPECT_EQ(a->model->Score(in), model->Score(in));
  }
}

TEST(ArtifactTest, EveryCorruptByteIsRefused) {
  auto model = ArtifactTestModel();
  auto bytes = SerializeArtifact(ArtifactTestInfo(), *model);
  ASSERT_TRUE(bytes.ok());
  // Random positions past the magic, each flipped alone: the checksum catches all of them.
  std::mt19937_64 rng = tune::test::TestRng(5);
  for (int trial = 0; trial < 24; ++trial) {
    std::string bad = *bytes;
    const size_t at = 8 + rng() % (bad.size() - 8);
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    ExpectOneLineRefusal(ParseArtifact(bad), "checksum mismatch");
  }
  std::string bad_magic = *bytes;
  bad_magic[1] = 'X';
  ExpectOneLineRefusal(ParseArtifact(bad_magic), "no TUNETCM header");
}

TEST(ArtifactTest, TruncatedFileIsRefusedNamingIt) {
  tune::test::TempDir dir;
  auto model = ArtifactTestModel();
  const std::string path = dir.Join("m.tcm");
  ASSERT_TRUE(WriteArtifactFile(path, ArtifactTestInfo(), *model).ok());
  ASSERT_TRUE(ReadArtifactFile(path).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string whole = ss.str();
  std::mt19937_64 rng = tune::test::TestRng(6);
  for (size_t keep : {whole.size() - 1, whole.size() / 2, static_cast<size_t>(20), static_cast<size_t>(1 + rng() % (whole.size() - 1))}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(whole.data(), static_cast<std::streamsize>(keep));
    auto a = ReadArtifactFile(path);
    ExpectOneLineRefusal(a, "m.tcm");
  }
  EXPECT_EQ(ReadArtifactFile(dir.Join("missing.tcm")).status().code(), absl::StatusCode::kNotFound);
}

TEST(ArtifactTest, OtherVersionsAreRefusedByName) {
  auto model = ArtifactTestModel();
  auto bytes = SerializeArtifact(ArtifactTestInfo(), *model);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(ParseArtifact(RewriteArtifact(*bytes, "\"kind\":\"xgb\"", "\"kind\":\"xgb\"")).ok());
  ExpectOneLineRefusal(ParseArtifact(RewriteArtifact(*bytes, "\"artifact_version\":1", "\"artifact_version\":7")),
                       "artifact version 7");
  const std::string fv = absl::StrCat("\"feature_version\":", kFeatureVersion);
  ExpectOneLineRefusal(ParseArtifact(RewriteArtifact(*bytes, fv, absl::StrCat("\"feature_version\":", (kFeatureVersion + 1) % 10))),
                       "feature version");
  ExpectOneLineRefusal(ParseArtifact(RewriteArtifact(*bytes, "\"kind\":\"xgb\"", "\"kind\":\"zzz\"")),
                       "unknown cost model kind");
  // A header that says a feature version other than this build's, written by the serializer.
  ArtifactInfo older = ArtifactTestInfo();
  older.feature_version = kFeatureVersion + 5;
  auto older_bytes = SerializeArtifact(older, *model);
  ASSERT_TRUE(older_bytes.ok());
  ExpectOneLineRefusal(ParseArtifact(*older_bytes), "retrain it");
}

TEST(ArtifactTest, UntrainedModelWritesNoFile) {
  tune::test::TempDir dir;
  auto untrained = MakeXgbOfflineModel();
  EXPECT_FALSE(WriteArtifactFile(dir.Join("u.tcm"), ArtifactTestInfo(), *untrained).ok());
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace tune::costmodel
