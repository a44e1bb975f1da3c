// Tests of `tune tasks`: the --json output reads back to the same tasks, the table, bad models.
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tuner/model_file.h"

namespace tune {
namespace {

using ::testing::HasSubstr;

const std::string kTasksTune = std::string(TUNE_BIN_DIR) + "/tune";

test::ProcessResult RunTasksCommand(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {kTasksTune, "tasks"});
  return test::RunProcess(args, dir.path());
}

// Workload key -> count over a model's layers.
std::map<std::string, int> TasksCountsByKey(const tuner::ZooModel& m) {
  std::map<std::string, int> counts;
  for (const auto& l : m.layers) counts[l.workload.Key()] += l.count;
  return counts;
}

// A model file of `n` random conv2d, dense and batch_matmul layers with random counts; some
// layers repeat an earlier shape, which the loader merges. Returns the sum of the counts.
int WriteRandomTasksModel(const std::string& path, std::mt19937& rng, int n) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::string> layers;
  std::vector<std::string> bodies;
  int total = 0;
  for (int i = 0; i < n; ++i) {
    std::string body;
    if (!bodies.empty() && pick(0, 4) == 0) {
      body = bodies[pick(0, static_cast<int>(bodies.size()) - 1)];  // a repeated workload
    } else {
      switch (pick(0, 2)) {
        case 0: {
          const int k = 2 * pick(0, 2) + 1;
          body = "\"op\": \"conv2d\", \"shape\": \"1," + std::to_string(pick(1, 64)) + "," +
                 std::to_string(pick(7, 56)) + "," + std::to_string(pick(7, 56)) + "," + std::to_string(pick(1, 64)) +
                 "," + std::to_string(k) + "," + std::to_string(k) + "," + std::to_string(pick(1, 2)) + "," +
                 std::to_string(k / 2) + "\", \"bias\": " + (pick(0, 1) ? "true" : "false") +
                 ", \"relu\": " + (pick(0, 1) ? "true" : "false");
          break;
        }
        case 1:
          body = "\"op\": \"dense\", \"shape\": \"" + std::to_string(pick(1, 128)) + "," +
                 std::to_string(pick(1, 512)) + "," + std::to_string(pick(1, 512)) + "\", \"bias\": true";
          break;
        default:
          body = "\"op\": \"batch_matmul\", \"shape\": \"" + std::to_string(pick(1, 16)) + "," +
                 std::to_string(pick(1, 128)) + "," + std::to_string(pick(1, 128)) + "," +
                 std::to_string(pick(1, 128)) + "\"";
      }
      bodies.push_back(body);
    }
    const int count = pick(1, 24);
    total += count;
    layers.push_back("{\"name\": \"layer" + std::to_string(i) + "\", " + body + ", \"count\": " +
                     std::to_string(count) + "}");
  }
  std::string text = "{\"name\": \"random-net\", \"layers\": [";
  for (size_t i = 0; i < layers.size(); ++i) text += (i ? ",\n" : "\n") + layers[i];
  text += "]}\n";
  test::WriteFileBytes(path, text);
  return total;
}

TEST(TasksCliTest, JsonOutputReadsBackToTheSameTasksAndCounts) {
  ASSERT_TRUE(std::filesystem::exists(kTasksTune)) << kTasksTune << " is not built";
  test::TempDir dir;
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 3; ++round) {
    const std::string path = dir.Join("net" + std::to_string(round) + ".json");
    const int total = WriteRandomTasksModel(path, rng, std::uniform_int_distribution<int>(3, 14)(rng));
    auto expected = tuner::LoadModel(path);
    ASSERT_TRUE(expected.ok()) << expected.status();

    test::ProcessResult r = RunTasksCommand(dir, {path, "--json"});
    ASSERT_TRUE(r.exited) << r;
    ASSERT_EQ(r.exit_code, 0) << r;
    auto back = tuner::ParseModelJson(r.out, "stdout");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << r.out;
    EXPECT_EQ(back->name, "random-net");
    ASSERT_EQ(back->layers.size(), expected->layers.size()) << r.out;
    for (size_t i = 0; i < back->layers.size(); ++i) {
      EXPECT_EQ(back->layers[i].workload.Key(), expected->layers[i].workload.Key()) << i;
      EXPECT_EQ(back->layers[i].count, expected->layers[i].count) << i;
      EXPECT_EQ(back->layers[i].name, expected->layers[i].name) << i;
    }
    EXPECT_EQ(TasksCountsByKey(*back), TasksCountsByKey(*expected));
    int back_total = 0;
    for (const auto& l : back->layers) back_total += l.count;
    EXPECT_EQ(back_total, total);
  }
}

TEST(TasksCliTest, ZooModelJsonMatchesTheZooAndTheTableListsEveryTask) {
  test::TempDir dir;
  auto zoo = tuner::LoadModel("resnet-18");
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  test::ProcessResult r = RunTasksCommand(dir, {"resnet-18", "--json"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  auto back = tuner::ParseModelJson(r.out, "stdout");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(TasksCountsByKey(*back), TasksCountsByKey(*zoo));

  test::ProcessResult t = RunTasksCommand(dir, {"resnet-18"});
  ASSERT_TRUE(t.exited && t.exit_code == 0) << t;
  EXPECT_THAT(t.out, HasSubstr("resnet-18: " + std::to_string(zoo->layers.size()) + " tasks"));
  for (const auto& l : zoo->layers) EXPECT_THAT(t.out, HasSubstr(l.workload.Label())) << t.out;
}

// --layout nchwc lists the NCHWc workloads `tune MODEL --layout nchwc` tunes: the same layers,
// the convolutions with channels in blocks of the vector width; a bad value is refused.
TEST(TasksCliTest, NchwcLayoutListsTheBlockedConvolutions) {
  test::TempDir dir;
  test::ProcessResult plain = RunTasksCommand(dir, {"resnet-18", "--json"});
  test::ProcessResult blocked = RunTasksCommand(dir, {"resnet-18", "--json", "--layout", "nchwc"});
  ASSERT_TRUE(plain.exited && plain.exit_code == 0) << plain;
  ASSERT_TRUE(blocked.exited && blocked.exit_code == 0) << blocked;
  auto a = tuner::ParseModelJson(plain.out, "stdout");
  auto b = tuner::ParseModelJson(blocked.out, "stdout");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_EQ(a->layers.size(), b->layers.size());
  int blocked_convs = 0;
  for (size_t i = 0; i < a->layers.size(); ++i) {
    codegen::Workload w = b->layers[i].workload;
    blocked_convs += w.layout_block > 0;
    w.layout_block = 0;
    EXPECT_EQ(w.Key(), a->layers[i].workload.Key());
    EXPECT_EQ(b->layers[i].count, a->layers[i].count);
  }
  EXPECT_GE(blocked_convs, 10);  // every conv but the 3-channel stem
  test::ProcessResult table = RunTasksCommand(dir, {"resnet-18", "--layout", "nchwc"});
  ASSERT_TRUE(table.exited && table.exit_code == 0) << table;
  EXPECT_THAT(table.out, ::testing::ContainsRegex("oc64 nchw(8|16)c"));
  test::ProcessResult bad = RunTasksCommand(dir, {"resnet-18", "--layout", "nhwc"});
  ASSERT_TRUE(bad.exited) << bad;
  EXPECT_EQ(bad.exit_code, 2) << bad;
}

TEST(TasksCliTest, BadModelIsOneLineAndExitTwo) {
  test::TempDir dir;
  std::mt19937 rng(std::random_device{}());
  const std::string missing = dir.Join("missing" + std::to_string(rng() % 100000) + ".json");
  const std::string bad = dir.Join("bad.json");
  test::WriteFileBytes(bad, "{\"name\": \"x\", \"layers\": [{\"op\": \"conv9d\", \"shape\": \"1,2\"}]}");
  for (const std::string& model : {missing, bad, std::string("no-such-zoo-model")}) {
    test::ProcessResult r = RunTasksCommand(dir, {model, "--json"});
    ASSERT_TRUE(r.exited) << r;
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
  }
}

}  // namespace
}  // namespace tune
