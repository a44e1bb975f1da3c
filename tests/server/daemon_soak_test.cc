// A short soak of a real `tune serve` under simulated workers (build/bin/daemon_load --soak-pid):
// its descriptors, threads and memory must not grow; and the soak's verdict on made-up series.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"
#include "tests/server/serve_helper.h"

namespace tune::test {
namespace {

std::string SoakLoadBinary() { return std::string(TUNE_BIN_DIR) + "/daemon_load"; }

bool SoakLoadBuilt() {
  struct stat st {};
  return ::stat(SoakLoadBinary().c_str(), &st) == 0;
}

/// One row of a soak's TSV (daemon_load's SampleTsv columns).
struct SoakRow {
  double t_s = 0, rss_mib = 0;
  int fds = 0, threads = 0;
  unsigned long long committed = 0, jobs_ended = 0;
  double results_per_s = 0, dispatch_p99_ms = 0;
};

std::string SoakTsv(const std::vector<SoakRow>& rows) {
  std::string out = "t_s\trss_mib\tfds\tthreads\tcommitted\tjobs_ended\tresults_per_s\tdispatch_p99_ms\n";
  char line[256];
  for (const SoakRow& r : rows) {
    std::snprintf(line, sizeof line, "%.2f\t%.2f\t%d\t%d\t%llu\t%llu\t%.1f\t%.3f\n", r.t_s, r.rss_mib, r.fds,
                  r.threads, r.committed, r.jobs_ended, r.results_per_s, r.dispatch_p99_ms);
    out += line;
  }
  return out;
}

std::vector<SoakRow> ParseSoakTsv(const std::string& text) {
  std::vector<SoakRow> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    SoakRow r;
    if (f >> r.t_s >> r.rss_mib >> r.fds >> r.threads >> r.committed >> r.jobs_ended >> r.results_per_s >>
        r.dispatch_p99_ms)
      rows.push_back(r);
  }
  return rows;
}

/// A made-up soak of `seconds` sampled every `every` s: a daemon at 120 MiB, 40 fds and 60
/// threads with noise (RSS +-1.5 MiB, a descriptor and a few threads coming and going), 30k
/// results/s; `shape` then changes each row as a test wants.
std::vector<SoakRow> MadeUpSoak(std::mt19937& rng, double seconds, double every,
                                const std::function<void(SoakRow&)>& shape) {
  std::uniform_real_distribution<double> rss_noise(-1.5, 1.5), rate(25000, 35000);
  std::uniform_int_distribution<int> fd_noise(0, 2), thread_noise(0, 4);
  std::vector<SoakRow> rows;
  unsigned long long committed = 0;
  for (double t = 0; t <= seconds + 1e-9; t += every) {
    SoakRow r;
    r.t_s = t;
    r.results_per_s = t > 0 ? rate(rng) : 0;
    committed += static_cast<unsigned long long>(r.results_per_s * every);
    r.committed = committed;
    r.jobs_ended = static_cast<unsigned long long>(t / 7);
    r.rss_mib = 120 + rss_noise(rng);
    r.fds = 40 + fd_noise(rng);
    r.threads = 60 + thread_noise(rng);
    r.dispatch_p99_ms = 3 + rss_noise(rng);
    shape(r);
    rows.push_back(r);
  }
  return rows;
}

/// daemon_load --judge on `rows` with `flags`; the process's result.
ProcessResult JudgeMadeUpSoak(const TempDir& dir, const std::vector<SoakRow>& rows,
                              const std::vector<std::string>& flags) {
  WriteFileBytes(dir.Join("made_up.tsv"), SoakTsv(rows));
  std::vector<std::string> argv = {SoakLoadBinary(), "--judge", dir.Join("made_up.tsv")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunProcess(argv, dir.path(), 60);
}

/// A 36 s soak of a fresh daemon (sampled every second, the first 12 s the warm-up) under
/// `workers` simulated workers and `jobs` jobs of `job_trials` trials, each resubmitted as it
/// ends, RSS growth tolerated up to `rss_slack_mib`; daemon_load's result, and its samples in
/// `rows`.
ProcessResult SoakARealDaemon(const TempDir& dir, int workers, int jobs, int job_trials, int rss_slack_mib,
                              std::vector<SoakRow>* rows, const std::vector<std::string>& more_flags = {}) {
  Subprocess serve;
  const std::string port = StartServe(serve, dir, "serve", "127.0.0.1:0", {"--db", dir.Join("soak.db")});
  if (port.empty()) {
    ADD_FAILURE() << ReadFileBytes(dir.Join("serve.err"));
    return {};
  }
  std::vector<std::string> argv = {SoakLoadBinary(), "--server", "127.0.0.1:" + port, "--workers",
                                   std::to_string(workers), "--jobs", std::to_string(jobs), "--soak-pid",
                                   std::to_string(serve.pid()), "--seconds", "36", "--sample-every", "1", "--warmup",
                                   "12", "--job-trials", std::to_string(job_trials), "--rss-slack-mib",
                                   std::to_string(rss_slack_mib), "--samples", dir.Join("samples.tsv")};
  argv.insert(argv.end(), more_flags.begin(), more_flags.end());
  ProcessResult r = RunProcess(argv, dir.path(), 180);
  serve.Kill(SIGTERM);
  serve.Wait();
  r.err += "\n--- daemon ---\n" + ReadFileBytes(dir.Join("serve.err"));
  *rows = ParseSoakTsv(ReadFileBytes(dir.Join("samples.tsv")));
  return r;
}

// 16 simulated workers and 4 jobs of 5000 trials each (a hundred or so end and are
// resubmitted in the run). daemon_load's exit status is the verdict (SoakLimits: fds and
// threads at most 8 above the first third's most, RSS at most 24 MiB above it: some runs grew
// 8-9 MiB between the thirds, not yet explained (jobs this long hold a growing in-memory
// history), so this test is for descriptors, threads and gross growth; the next one is the
// fine RSS check).
TEST(DaemonSoak, ThirtySixSecondsOfLoadGrowNoDescriptorsThreadsOrMemory) {
  if (!SoakLoadBuilt()) GTEST_SKIP() << SoakLoadBinary() << " is not built (TUNE_BUILD_BENCH=OFF)";
  TempDir dir;
  std::vector<SoakRow> rows;
  const ProcessResult r = SoakARealDaemon(dir, 16, 4, 5000, 24, &rows);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r;
  // The samples are the daemon's: a sample a second, the load went on throughout and jobs
  // ended and were resubmitted.
  ASSERT_GE(rows.size(), 30u) << r;
  EXPECT_GE(rows.back().t_s, 36);
  EXPECT_GT(rows.back().committed, rows[rows.size() / 2].committed);
  EXPECT_GT(rows[rows.size() / 2].committed, rows.front().committed);
  EXPECT_GE(rows.back().jobs_ended, 4u) << r;
  for (const SoakRow& row : rows) {
    EXPECT_GT(row.rss_mib, 1);
    EXPECT_GE(row.fds, 3);  // at least its listening socket and the database
    EXPECT_GE(row.threads, 2);
  }
}

// Jobs ending by the hundred (16 jobs of 100 trials; 700 to 4000 end in the run, as fast as the
// machine lets them). A daemon that kept every ended job's thread unjoined until it stopped kept
// each one's stack mapped, some 25-40 KiB of RSS per job; the growth is judged per job ended
// (at most 8 KiB each, or 8 MiB in all), since how many end in 36 s varies fourfold with the
// machine's load. Jobs whose config transfer read the whole tasks table, and whose database
// connections each churned SQLite's default 2 MiB page cache through malloc's arenas, grew
// 5-12 KiB per job; bounded, RSS stays flat.
TEST(DaemonSoak, HundredsOfShortJobsGrowNoMemory) {
  if (!SoakLoadBuilt()) GTEST_SKIP() << SoakLoadBinary() << " is not built (TUNE_BUILD_BENCH=OFF)";
  TempDir dir;
  std::vector<SoakRow> rows;
  // 16 jobs starting and ending all the time each hold a thread, a heartbeat thread and two
  // database connections (up to 6 descriptors) for part of a second, so a sample's counts swing
  // by dozens; a leak of one per job would still pass these slacks within a hundred jobs.
  const ProcessResult r = SoakARealDaemon(dir, 16, 16, 100, 8, &rows,
                                          {"--rss-kib-per-job", "8", "--fd-slack", "40", "--thread-slack", "32"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r;
  ASSERT_FALSE(rows.empty()) << r;
  EXPECT_GE(rows.back().jobs_ended, 200u) << r;
}

class DaemonSoakVerdict : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SoakLoadBuilt()) GTEST_SKIP() << SoakLoadBinary() << " is not built (TUNE_BUILD_BENCH=OFF)";
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }
  TempDir dir_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(DaemonSoakVerdict, FlatNoisySeriesPass) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // An hour sampled every 10 s, and a CI-sized 36 s sampled every second.
  for (auto [seconds, every, warmup] : {std::tuple{3600.0, 10.0, "300"}, std::tuple{36.0, 1.0, "10"}}) {
    const ProcessResult r = JudgeMadeUpSoak(dir_, MadeUpSoak(rng_, seconds, every, [](SoakRow&) {}), {"--warmup", warmup});
    EXPECT_EQ(r.exit_code, 0) << r;
    EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r;
  }
}

TEST_F(DaemonSoakVerdict, DescriptorsGrowingByOneASecondFail) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const ProcessResult r = JudgeMadeUpSoak(
      dir_, MadeUpSoak(rng_, 36, 1, [](SoakRow& row) { row.fds += static_cast<int>(row.t_s); }), {"--warmup", "10"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.out.find("verdict: FAIL (fds grew)"), std::string::npos) << r;
}

TEST_F(DaemonSoakVerdict, ThreadsGrowingSlowlyOverAnHourFail) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // One more thread every two minutes: +30 in an hour.
  const ProcessResult r = JudgeMadeUpSoak(
      dir_, MadeUpSoak(rng_, 3600, 10, [](SoakRow& row) { row.threads += static_cast<int>(row.t_s / 120); }),
      {"--warmup", "300"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_NE(r.out.find("verdict: FAIL (threads grew)"), std::string::npos) << r;
}

TEST_F(DaemonSoakVerdict, RssRisingDuringTheWarmupThenFlatPasses) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // From 70 MiB to 120 MiB over the first 200 s (caches and arenas filling), flat after.
  auto warming = [](SoakRow& row) { row.rss_mib -= 50 * std::max(0.0, 1 - row.t_s / 200); };
  const ProcessResult r = JudgeMadeUpSoak(dir_, MadeUpSoak(rng_, 3600, 10, warming), {"--warmup", "300"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r;
  // Judged from the start, the same series fails: the warm-up is what makes it pass.
  const ProcessResult early = JudgeMadeUpSoak(dir_, MadeUpSoak(rng_, 600, 10, warming), {"--warmup", "0"});
  EXPECT_EQ(early.exit_code, 1) << early;
  EXPECT_NE(early.out.find("verdict: FAIL (RSS grew)"), std::string::npos) << early;
}

TEST_F(DaemonSoakVerdict, SteadyRssGrowthFails) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // 30 MiB an hour (25% of 120 MiB): past the 5%/h, whether over an hour or over 36 s at
  // the rate a per-job leak shows in CI (1 MiB/s).
  const ProcessResult hour = JudgeMadeUpSoak(
      dir_, MadeUpSoak(rng_, 3600, 10, [](SoakRow& row) { row.rss_mib += 30 * row.t_s / 3600; }), {"--warmup", "300"});
  EXPECT_EQ(hour.exit_code, 1) << hour;
  EXPECT_NE(hour.out.find("verdict: FAIL (RSS grew)"), std::string::npos) << hour;
  const ProcessResult ci = JudgeMadeUpSoak(
      dir_, MadeUpSoak(rng_, 36, 1, [](SoakRow& row) { row.rss_mib += row.t_s; }), {"--warmup", "10"});
  EXPECT_EQ(ci.exit_code, 1) << ci;
  EXPECT_NE(ci.out.find("verdict: FAIL (RSS grew)"), std::string::npos) << ci;
}

TEST_F(DaemonSoakVerdict, RssJudgedPerJobEnded) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  // 100 jobs end a second; RSS grows by `kib` per job ended, 24 s after a 10 s warm-up: some
  // 1600 jobs between the thirds' middles.
  auto per_job = [&](double kib) {
    return MadeUpSoak(rng_, 36, 1, [kib](SoakRow& row) {
      row.jobs_ended = static_cast<unsigned long long>(row.t_s * 100);
      row.rss_mib += kib * static_cast<double>(row.jobs_ended) / 1024;
    });
  };
  const std::vector<std::string> flags = {"--warmup", "10", "--rss-kib-per-job", "16"};
  const ProcessResult small = JudgeMadeUpSoak(dir_, per_job(6), flags);
  EXPECT_EQ(small.exit_code, 0) << small;
  EXPECT_NE(small.out.find("RSS per job:"), std::string::npos) << small;
  const ProcessResult leak = JudgeMadeUpSoak(dir_, per_job(30), flags);
  EXPECT_EQ(leak.exit_code, 1) << leak;
  EXPECT_NE(leak.out.find("verdict: FAIL (RSS grew)"), std::string::npos) << leak;
  // Without the per-job tolerance the small growth (some 9 MiB) fails the 8 MiB constant.
  const ProcessResult constant = JudgeMadeUpSoak(dir_, per_job(6), {"--warmup", "10"});
  EXPECT_EQ(constant.exit_code, 1) << constant;
}

TEST_F(DaemonSoakVerdict, ALoadThatStopsOrTooFewSamplesFail) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  unsigned long long stalled_at = 0;
  const ProcessResult stopped = JudgeMadeUpSoak(dir_, MadeUpSoak(rng_, 36, 1, [&](SoakRow& row) {
                                                  if (row.t_s <= 20) stalled_at = row.committed;
                                                  else row.committed = stalled_at, row.results_per_s = 0;
                                                }),
                                                {"--warmup", "10"});
  EXPECT_EQ(stopped.exit_code, 1) << stopped;
  EXPECT_NE(stopped.out.find("verdict: FAIL (the load stopped)"), std::string::npos) << stopped;
  const ProcessResult few = JudgeMadeUpSoak(dir_, MadeUpSoak(rng_, 12, 1, [](SoakRow&) {}), {"--warmup", "11"});
  EXPECT_EQ(few.exit_code, 1) << few;
  EXPECT_NE(few.out.find("2 samples after the 11 s warm-up"), std::string::npos) << few;
}

}  // namespace
}  // namespace tune::test
