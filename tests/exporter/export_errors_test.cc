// `tune export` refusals: one line on stderr, exit 2, nothing written; --force replaces whole.
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"
#include "tests/exporter/export_test_helpers.h"

namespace tune::exporter_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ExportErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::WriteFileBytes(dir_.Join("model.json"), kMixModel);
    std::mt19937_64 rng = test::TestRng(9);
    target_ = CpuTarget("x86-64", "", std::uniform_int_distribution<int>(1, 8)(rng));
    AddTarget(dir_.Join("t.db"), target_);
  }

  /// `tune export args...` must fail with exit 2, one line on stderr naming every one of
  /// `mentions`, nothing on stdout, and the directory's tree unchanged.
  void ExpectRefused(const std::vector<std::string>& args, const std::vector<std::string>& mentions) {
    const std::vector<std::string> before = TreeOf(dir_.path());
    std::vector<std::string> full = {"export"};
    full.insert(full.end(), args.begin(), args.end());
    test::ProcessResult r = RunTune(dir_.path(), full);
    ASSERT_TRUE(r.exited) << r;
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
    EXPECT_THAT(r.err, StartsWith("tune: ")) << r;
    for (const std::string& m : mentions) EXPECT_THAT(r.err, HasSubstr(m)) << r;
    EXPECT_EQ(TreeOf(dir_.path()), before) << "a refused export must not write anything";
  }

  test::TempDir dir_;
  measure::Target target_;
};

TEST_F(ExportErrorsTest, UnknownModel) {
  ExpectRefused({"--db", "t.db", "--model", "no-such-model", "--target-key", target_.Key(), "--out", "lib"},
                {"no-such-model"});
}

TEST_F(ExportErrorsTest, TargetNotInTheDatabase) {
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", "llvm|nope", "--out", "lib"},
                {"no target 'llvm|nope'", target_.Key()});
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", "999", "--out", "lib"}, {"999"});
  // This CPU was never tuned into t.db.
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target", "llvm", "--threads", "3", "--out", "lib"},
                {"no records for", "--threads 3"});
}

TEST_F(ExportErrorsTest, MissingOrAbsentDatabase) {
  ExpectRefused({"--model", "model.json", "--target-key", target_.Key(), "--out", "lib"}, {"--db"});
  ExpectRefused({"--db", "absent.db", "--model", "model.json", "--target-key", target_.Key(), "--out", "lib"},
                {"absent.db"});
}

TEST_F(ExportErrorsTest, BadFlags) {
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target", "llvm", "--target-key", target_.Key(), "--out",
                 "lib"},
                {"--target"});
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target", "tpu", "--out", "lib"}, {"tpu"});
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", target_.Key()}, {"--out"});
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", target_.Key(), "--out", "no/such/parent"},
                {"no/such/parent"});
}

TEST_F(ExportErrorsTest, NonEmptyOutNeedsForceAndIsThenReplacedWhole) {
  std::filesystem::create_directory(dir_.Join("lib"));
  test::WriteFileBytes(dir_.Join("lib/keep.txt"), "mine");
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", target_.Key(), "--out", "lib"},
                {"--force"});
  EXPECT_EQ(test::ReadFileBytes(dir_.Join("lib/keep.txt")), "mine");

  // A refused --force export (no such target) leaves the old directory as it was.
  ExpectRefused({"--db", "t.db", "--model", "model.json", "--target-key", "llvm|nope", "--out", "lib", "--force"},
                {"llvm|nope"});

  test::ProcessResult r = RunTune(dir_.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                                target_.Key(), "--out", "lib", "--force"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("lib/keep.txt")));
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("lib/manifest.json")));
  // Nothing else is left beside it (no temporary or moved-aside directory).
  std::vector<std::string> top = dir_.List();
  top.erase(std::remove_if(top.begin(), top.end(), [](const std::string& n) { return n.rfind("t.db-", 0) == 0; }),
            top.end());  // SQLite's -wal/-shm files
  EXPECT_EQ(top, (std::vector<std::string>{"lib", "model.json", "t.db"}));

  // An empty directory needs no --force.
  std::filesystem::create_directory(dir_.Join("empty"));
  test::ProcessResult e = RunTune(dir_.path(), {"export", "--db", "t.db", "--model", "model.json", "--target-key",
                                                target_.Key(), "--out", "empty"});
  ASSERT_TRUE(e.exited && e.exit_code == 0) << e;
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("empty/tune_kernels.h")));
}

}  // namespace
}  // namespace tune::exporter_test
