// Tests of `tune plot`: the SVG files gnuplot makes, the speed-up bars, a missing gnuplot.
#include "tuner/plot.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "codegen/ir/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_seed.h"

namespace tune {
namespace plot_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kPlotTuneBin = std::string(TUNE_BIN_DIR) + "/tune";

test::ProcessResult RunPlotTune(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kPlotTuneBin);
  return test::RunProcess(args, dir.path());
}

void TuneMatmul(const test::TempDir& dir, const std::string& shape, int trials, const std::string& strategy) {
  test::ProcessResult r =
      RunPlotTune(dir, {"op", "matmul", "--shape", shape, "--target", "llvm", "--trials", std::to_string(trials),
                        "--db", "a.db", "--repeats", "1", "--min-repeat-ms", "1", "--strategy", strategy, "--resume",
                        "--no-start-configs"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool HasGnuplot() {
  return std::filesystem::exists("/usr/bin/gnuplot") || tuner::FindProgram("gnuplot").ok();
}

TEST(PlotTest, DrawsATuningCurvePerTaskAndTheSpeedupBars) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed (scripts/setup installs it)";
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(31);
  const std::string shapes[] = {"16,16,16", "32,16,8", "8,32,16", "32,32,32"};
  const std::string first = shapes[rng() % 4];
  std::string second = shapes[rng() % 4];
  while (second == first) second = shapes[rng() % 4];
  TuneMatmul(dir, first, 4, "random");
  TuneMatmul(dir, first, 8, "sa");  // the same task, resumed with another strategy
  TuneMatmul(dir, second, 3, "random");

  test::ProcessResult r = RunPlotTune(dir, {"plot", "--db", "a.db", "--out", "plots"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  const std::string curve1 = "plots/task-1-matmul-target-1.svg", curve2 = "plots/task-2-matmul-target-1.svg";
  for (const std::string& file : {curve1, curve2, std::string("plots/speedup.svg"),
                                  std::string("plots/task-1-matmul-target-1.gp"), std::string("plots/speedup.dat")}) {
    EXPECT_THAT(r.out, HasSubstr(file + "\n")) << "the list of files written";
    ASSERT_TRUE(std::filesystem::exists(dir.Join(file))) << file;
  }
  const std::string svg1 = test::ReadFileBytes(dir.Join(curve1));
  EXPECT_THAT(svg1, StartsWith("<?xml"));
  EXPECT_THAT(svg1, HasSubstr("<svg"));
  // The title: the task's label, its id and the target's kind and CPU.
  EXPECT_THAT(svg1, HasSubstr(codegen::Workload::Parse(codegen::OpKind::kMatmul, first)->Label() + " (task 1) on llvm|"));
  EXPECT_THAT(svg1, HasSubstr("<text>random</text>"));
  EXPECT_THAT(svg1, HasSubstr("<text>sa</text>"));
  EXPECT_THAT(svg1, HasSubstr("<text>default</text>"));
  // One plot (with its path) per strategy, and the default's line.
  EXPECT_EQ(Occurrences(svg1, "<g id=\"gnuplot_plot_"), 3);
  const std::string svg2 = test::ReadFileBytes(dir.Join(curve2));
  // The second task started from the first one's best configs (config transfer): its own curve.
  EXPECT_EQ(Occurrences(svg2, "<g id=\"gnuplot_plot_"), 3);
  EXPECT_THAT(svg2, HasSubstr("<text>transfer</text>"));
  EXPECT_THAT(svg2, Not(HasSubstr("<text>sa</text>")));

  // One bar per task with a default record, and the key's sample.
  const std::string speedup = test::ReadFileBytes(dir.Join("plots/speedup.svg"));
  EXPECT_THAT(speedup, StartsWith("<?xml"));
  EXPECT_THAT(speedup, HasSubstr("speed-up of the best record over the default schedule"));
  EXPECT_EQ(Occurrences(speedup, "<polygon"), 2 + 1);

  // A vendor bar where a time was recorded (the first task; the target key, which holds commas,
  // quoted): one more bar and one more key sample.
  auto db = dataset::RecordDatabase::OpenReadOnly(dir.Join("a.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string target = (*db->get()->Targets())[0].key;
  const std::string task = (*db->get()->Tasks())[0].workload_key;
  ASSERT_NE(target.find(','), std::string::npos);
  test::WriteFileBytes(dir.Join("vendor.csv"), "workload_key,target_key,vendor,seconds\n" + task + ",\"" + target +
                                                   "\",openblas,1e-6\n");
  r = RunPlotTune(dir, {"plot", "--db", "a.db", "--out", "plots2", "--vendor", "vendor.csv"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  const std::string with_vendor = test::ReadFileBytes(dir.Join("plots2/speedup.svg"));
  EXPECT_THAT(with_vendor, HasSubstr("<text>openblas</text>"));
  EXPECT_EQ(Occurrences(with_vendor, "<polygon"), 2 + 1 + 1 + 1);

  // One task only, as PNG.
  r = RunPlotTune(dir, {"plot", "--db", "a.db", "--task", "2", "--out", "plots3", "--format", "png"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_THAT(test::ReadFileBytes(dir.Join("plots3/task-2-matmul-target-1.png")), StartsWith("\x89PNG"));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("plots3/task-1-matmul-target-1.png")));
}

TEST(PlotTest, WithoutGnuplotTheDataAndScriptsAreWrittenAndItSaysSo) {
  test::TempDir dir;
  TuneMatmul(dir, "16,8,16", 3, "random");
  test::ProcessResult r =
      test::RunProcess({"/usr/bin/env", "PATH=" + dir.Join("no-bin"), kPlotTuneBin, "plot", "--db", "a.db", "--out", "p"},
                       dir.path());
  ASSERT_TRUE(r.exited) << r;
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r;
  EXPECT_THAT(r.err, StartsWith("tune: gnuplot not found (apt install gnuplot-nox)")) << r;
  for (const char* file : {"p/task-1-matmul-target-1.dat", "p/task-1-matmul-target-1.gp", "p/speedup.dat",
                           "p/speedup.gp"}) {
    EXPECT_TRUE(std::filesystem::exists(dir.Join(file))) << file;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Join("p/task-1-matmul-target-1.svg")));
}

TEST(PlotTest, QuotesTitlesAndFileNames) {
  std::mt19937_64 rng = test::TestRng(32);
  const std::string specials = "'\"\\@^_{}&~\n\t|,/ ";
  for (int i = 0; i < 50; ++i) {
    std::string text;
    for (int c = 0; c < 12; ++c) text += rng() % 2 ? specials[rng() % specials.size()] : static_cast<char>('a' + rng() % 26);
    const std::string quoted = tuner::GnuplotQuote(text);
    ASSERT_GE(quoted.size(), 2u);
    EXPECT_EQ(quoted.front(), '\'');
    EXPECT_EQ(quoted.back(), '\'');
    // Inside: quotes come in pairs, no line breaks (a script line stays one line).
    const std::string inner = quoted.substr(1, quoted.size() - 2);
    EXPECT_EQ(inner.find('\n'), std::string::npos);
    EXPECT_EQ(std::regex_replace(inner, std::regex("''"), "").find('\''), std::string::npos) << quoted;
    const std::string name = tuner::SanitizeFileName(text);
    EXPECT_TRUE(std::regex_match(name, std::regex("[A-Za-z0-9._-]+"))) << name;
    EXPECT_NE(name[0], '.');
  }
  EXPECT_EQ(tuner::GnuplotQuote("it's"), "'it''s'");
}

TEST(PlotTest, ReadsVendorCsvAndRefusesABadRow) {
  test::TempDir dir;
  std::mt19937_64 rng = test::TestRng(33);
  const double seconds = 1e-6 * (1 + rng() % 1000);
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", seconds);
  test::WriteFileBytes(dir.Join("v.csv"), std::string("workload_key,target_key,vendor,seconds\n\n") +
                                              "matmul/m8_n8_k8/none/float32,\"llvm|x|a,b|\"\"q\"\"\",onednn," + text + "\n");
  auto rows = tuner::ReadVendorCsv(dir.Join("v.csv"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].target_key, "llvm|x|a,b|\"q\"");
  EXPECT_EQ((*rows)[0].vendor, "onednn");
  EXPECT_EQ((*rows)[0].seconds, seconds);
  test::WriteFileBytes(dir.Join("bad.csv"), "a,b,c,1e-6\na,b,c,-1\n");
  auto bad = tuner::ReadVendorCsv(dir.Join("bad.csv"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), StartsWith(dir.Join("bad.csv") + ":2: "));
}

}  // namespace
}  // namespace plot_test
}  // namespace tune
