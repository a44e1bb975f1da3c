// Tests of LocalRunner with plain C++ fake kernels that are right, wrong, crash, hang or exit.
#include "measure/local_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/subprocess.h"

namespace tune::measure {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kM = 17, kN = 33, kK = 65;

codegen::Workload SmallMatmul() {
  codegen::Workload workload;
  workload.op = codegen::OpKind::kMatmul;
  workload.m = kM;
  workload.n = kN;
  workload.k = kK;
  return workload;
}

// out[M,N] = a[M,K] * b[K,N], naively.
void Matmul(float* const* args) {
  const float* a = args[0];
  const float* b = args[1];
  float* out = args[2];
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < kK; ++p) acc += a[i * kK + p] * b[p * kN + j];
      out[i * kN + j] = acc;
    }
  }
}

void Garbage(float* const* args) {
  for (int64_t i = 0; i < kM * kN; ++i) args[2][i] = 42.0f;
}

void WritesNothing(float* const*) {}

void Segfault(float* const*) {
  volatile int* null = nullptr;
  *null = 1;
}

void Aborts(float* const*) { ::abort(); }

void Hangs(float* const*) {
  volatile bool spin = true;
  while (spin) {
  }
}

void ExitsWithCode(float* const*) { _exit(7); }

void Throws(float* const*) { throw std::runtime_error("kernel threw"); }

// Closes every descriptor but stdio (the result pipe among them), then spins.
void ClosesPipeAndHangs(float* const*) {
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
  Hangs(nullptr);
}

void ClosesPipeAndExits(float* const*) {
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
  _exit(0);
}

// Right on its first call, wrong afterwards (stands in for a racy kernel). The counter lives
// in the child process that calls it, so each measurement starts from zero.
int racy_calls = 0;
void RightOnceThenWrong(float* const* args) {
  if (racy_calls++ == 0) {
    Matmul(args);
  } else {
    Garbage(args);
  }
}

// Accumulates into the output instead of overwriting it: right only while out starts at 0.
void Accumulates(float* const* args) {
  float* out = args[2];
  for (int64_t i = 0; i < kM * kN; ++i) {
    if (std::isnan(out[i])) out[i] = 0;
  }
  const float* a = args[0];
  const float* b = args[1];
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      for (int64_t p = 0; p < kK; ++p) out[i * kN + j] += a[i * kK + p] * b[p * kN + j];
    }
  }
}

// A matmul whose first call in a process is slow (it stands in for a kernel that packs its
// weight or touches fresh scratch memory on its first call) and its later calls fast; and one
// whose every call is slow.
int cold_calls = 0;
void SlowFirstCall(float* const* args) {
  if (cold_calls++ == 0) ::usleep(100 * 1000);
  Matmul(args);
}
void SlowEveryCall(float* const* args) {
  ::usleep(30 * 1000);
  Matmul(args);
}

// Matmuls that append their letter to the file at call_log_path on each call (the child
// inherits the path), so a test can read the order in which a child called its kernels.
std::string call_log_path;
void LogCall(char letter) {
  FILE* f = std::fopen(call_log_path.c_str(), "a");
  if (f == nullptr) return;
  std::fputc(letter, f);
  std::fclose(f);
}
void LoggedA(float* const* args) {
  LogCall('A');
  Matmul(args);
}
void LoggedB(float* const* args) {
  LogCall('B');
  Matmul(args);
}

absl::StatusOr<codegen::KernelFn> FakeLoader(const codegen::CompiledKernel& kernel) {
  static const std::map<std::string, codegen::KernelFn> kFakes = {
      {"matmul", Matmul},
      {"garbage", Garbage},
      {"writes_nothing", WritesNothing},
      {"segfault", Segfault},
      {"aborts", Aborts},
      {"hangs", Hangs},
      {"exits_with_code", ExitsWithCode},
      {"throws", Throws},
      {"closes_pipe_and_hangs", ClosesPipeAndHangs},
      {"closes_pipe_and_exits", ClosesPipeAndExits},
      {"right_once_then_wrong", RightOnceThenWrong},
      {"accumulates", Accumulates},
      {"slow_first_call", SlowFirstCall},
      {"slow_every_call", SlowEveryCall},
      {"logged_a", LoggedA},
      {"logged_b", LoggedB},
  };
  auto it = kFakes.find(kernel.symbol);
  if (it == kFakes.end()) return absl::NotFoundError("no such fake kernel: " + kernel.symbol);
  return it->second;
}

// Every child of this process has been reaped.
BuildResult Build(const std::string& symbol) {
  BuildResult build;
  build.kernel.symbol = symbol;
  build.build_s = 0.25;
  return build;
}

class LocalRunnerTest : public ::testing::Test {
 protected:
  LocalRunnerTest() : task_(TaskData::Create(SmallMatmul(), 7)) {
    options_.protocol.warmup = 1;
    options_.protocol.repeats = 3;
    options_.protocol.min_repeat_ms = 2;
    options_.protocol.timeout_s = 1;
  }

  MeasureResult RunOne(const std::string& symbol) {
    LocalRunner runner(options_, FakeLoader);
    std::vector<MeasureResult> results = runner.Run(task_, {Build(symbol)});
    EXPECT_EQ(results.size(), 1u);
    return results.empty() ? MeasureResult{} : results[0];
  }

  // Runs `symbol` and expects `status` with a message containing `needle`; a record that is
  // not ok has no samples.
  MeasureResult RunExpecting(const std::string& symbol, MeasureStatus status, const std::string& needle) {
    MeasureResult result = RunOne(symbol);
    EXPECT_EQ(result.status, status) << symbol << ": " << result.message;
    EXPECT_THAT(result.message, HasSubstr(needle)) << symbol;
    if (status != MeasureStatus::kOk) EXPECT_TRUE(result.costs_s.empty()) << symbol;
    return result;
  }

  TaskData task_;
  LocalRunnerOptions options_;
};

TEST_F(LocalRunnerTest, CorrectKernelIsTimed) {
  MeasureResult result = RunOne("matmul");
  ASSERT_EQ(result.status, MeasureStatus::kOk) << result.message;
  EXPECT_TRUE(result.message.empty());
  ASSERT_EQ(result.costs_s.size(), 3u);
  for (double cost : result.costs_s) EXPECT_GT(cost, 0);
  EXPECT_GE(result.number, 1);
  EXPECT_LE(result.number, LocalRunner::kMaxNumber);
  EXPECT_DOUBLE_EQ(result.build_s, 0.25);
  EXPECT_GT(result.wall_s, 0);
}

TEST_F(LocalRunnerTest, ZeroMinRepeatTimeUsesOneCallPerSample) {
  options_.protocol.min_repeat_ms = 0;
  options_.protocol.repeats = 4;
  MeasureResult result = RunOne("matmul");
  ASSERT_EQ(result.status, MeasureStatus::kOk) << result.message;
  EXPECT_EQ(result.number, 1);
  EXPECT_EQ(result.costs_s.size(), 4u);
}

TEST_F(LocalRunnerTest, CorrectKernelWithCacheFlushAndThreads) {
  options_.protocol.flush_cache = true;
  options_.protocol.timeout_s = 10;
  options_.threads = 2;
  MeasureResult result = RunOne("matmul");
  ASSERT_EQ(result.status, MeasureStatus::kOk) << result.message;
  EXPECT_EQ(result.costs_s.size(), 3u);
}

// The cutoff judges a warm call: a kernel slow only on its first (cold) call is timed in full,
// one slow on every call keeps its warm call as its only sample.
TEST_F(LocalRunnerTest, CutoffJudgesAWarmCallNotTheColdFirstOne) {
  options_.protocol.cutoff_s = 0.02;
  options_.protocol.timeout_s = 10;
  MeasureResult cold = RunOne("slow_first_call");
  ASSERT_EQ(cold.status, MeasureStatus::kOk) << cold.message;
  EXPECT_EQ(cold.costs_s.size(), 3u) << cold.message;
  EXPECT_THAT(cold.message, ::testing::Not(HasSubstr("cut off")));
  for (double cost : cold.costs_s) EXPECT_LT(cost, 0.02);

  MeasureResult slow = RunOne("slow_every_call");
  ASSERT_EQ(slow.status, MeasureStatus::kOk) << slow.message;
  ASSERT_EQ(slow.costs_s.size(), 1u);
  EXPECT_EQ(slow.number, 1);
  EXPECT_GE(slow.costs_s[0], 0.03);
  EXPECT_THAT(slow.message, HasSubstr("timing cut off after a warm call ("));
  EXPECT_THAT(slow.message, HasSubstr(" s > 0.02 s; the first call "));
}

// Each planted failure becomes its own record, with the reason in its message.
TEST_F(LocalRunnerTest, FailuresBecomeRecordsThatSayWhy) {
  const struct {
    const char* symbol;
    MeasureStatus status;
    const char* needle;
  } kCases[] = {
      {"garbage", MeasureStatus::kWrongResult, "output differs from reference: "},
      {"writes_nothing", MeasureStatus::kWrongResult, "output differs from reference: "},
      // The output is checked again after timing.
      {"right_once_then_wrong", MeasureStatus::kWrongResult, "after repeated calls"},
      {"accumulates", MeasureStatus::kWrongResult, "after repeated calls"},
      {"segfault", MeasureStatus::kRuntimeError, "kernel crashed: SIGSEGV (signal 11"},
      {"aborts", MeasureStatus::kRuntimeError, "kernel crashed: SIGABRT"},
      {"exits_with_code", MeasureStatus::kRuntimeError, "exited with code 7"},
      {"closes_pipe_and_exits", MeasureStatus::kRuntimeError, "without a result"},
      {"no_such_kernel", MeasureStatus::kCompileError, "no such fake kernel: no_such_kernel"},
  };
  for (const auto& c : kCases) RunExpecting(c.symbol, c.status, c.needle);
}

TEST_F(LocalRunnerTest, HangIsTimeout) {
  MeasureResult result = RunOne("hangs");
  EXPECT_EQ(result.status, MeasureStatus::kTimeout);
  EXPECT_EQ(result.message, "kernel did not finish within 1s");
  EXPECT_GE(result.wall_s, 1.0);  // the child had its whole timeout (wall_s covers fork to reap)
  test::ExpectNoChildren();             // and was killed and reaped
}

TEST_F(LocalRunnerTest, ClosedPipeThenHangIsTimeout) {
  MeasureResult result = RunOne("closes_pipe_and_hangs");
  EXPECT_EQ(result.status, MeasureStatus::kTimeout);
  EXPECT_EQ(result.message, "kernel did not finish within 1s");
  test::ExpectNoChildren();
}

TEST_F(LocalRunnerTest, FailedBuildPassesThroughWithoutRunning) {
  BuildResult build = Build("segfault");  // would crash if it ran
  build.status = MeasureStatus::kCompileError;
  build.message = "llvm says no";
  BuildResult invalid = Build("hangs");  // would time out if it ran
  invalid.status = MeasureStatus::kInvalidConfig;
  invalid.message = "tile does not divide";
  LocalRunner runner(options_, FakeLoader);
  std::vector<MeasureResult> results = runner.Run(task_, {build, invalid});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, MeasureStatus::kCompileError);
  EXPECT_EQ(results[0].message, "llvm says no");
  EXPECT_DOUBLE_EQ(results[0].build_s, 0.25);
  EXPECT_EQ(results[0].wall_s, 0);
  EXPECT_EQ(results[1].status, MeasureStatus::kInvalidConfig);
  EXPECT_EQ(results[1].message, "tile does not divide");
}

TEST_F(LocalRunnerTest, MixedBatchKeepsOrderAndGoesOn) {
  BuildResult failed = Build("matmul");
  failed.status = MeasureStatus::kCompileError;
  failed.message = "bad";
  const std::vector<BuildResult> builds = {Build("matmul"),  Build("segfault"),
                                           Build("matmul"),  failed,
                                           Build("hangs"),   Build("garbage"),
                                           Build("matmul")};
  LocalRunner runner(options_, FakeLoader);
  std::vector<MeasureResult> results = runner.Run(task_, builds);
  ASSERT_EQ(results.size(), builds.size());
  EXPECT_EQ(results[0].status, MeasureStatus::kOk) << results[0].message;
  EXPECT_EQ(results[1].status, MeasureStatus::kRuntimeError);
  EXPECT_EQ(results[2].status, MeasureStatus::kOk) << results[2].message;
  EXPECT_EQ(results[2].costs_s.size(), 3u);
  EXPECT_EQ(results[3].status, MeasureStatus::kCompileError);
  EXPECT_EQ(results[4].status, MeasureStatus::kTimeout);
  EXPECT_EQ(results[5].status, MeasureStatus::kWrongResult);
  EXPECT_EQ(results[6].status, MeasureStatus::kOk) << results[6].message;
  for (const MeasureResult& result : results) {
    EXPECT_EQ(result.ok(), result.message.empty()) << result.message;
  }
  test::ExpectNoChildren();  // every child was reaped: no zombies are left behind
}

TEST_F(LocalRunnerTest, MismatchedTaskDataIsRuntimeError) {
  task_.inputs.pop_back();
  RunExpecting("matmul", MeasureStatus::kRuntimeError, "bad task data");
}

TEST_F(LocalRunnerTest, DefaultLoaderRejectsBadObjectCode) {
  LocalRunner runner(options_);
  BuildResult build;
  build.kernel.symbol = "tune_kernel";
  build.kernel.object_code = "this is not an ELF object";
  std::vector<MeasureResult> results = runner.Run(task_, {build});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, MeasureStatus::kCompileError) << results[0].message;
}

}  // namespace
}  // namespace tune::measure

namespace tune::measure {
namespace {

// protocol.interleave: the ok kernels of a batch share one child.
class InterleavedRunnerTest : public LocalRunnerTest {
 protected:
  InterleavedRunnerTest() { options_.protocol.interleave = true; }

  std::vector<MeasureResult> RunBatch(const std::vector<std::string>& symbols) {
    std::vector<BuildResult> builds;
    for (const std::string& symbol : symbols) builds.push_back(Build(symbol));
    LocalRunner runner(options_, FakeLoader);
    std::vector<MeasureResult> results = runner.Run(task_, builds);
    EXPECT_EQ(results.size(), builds.size());
    return results;
  }
};

// Kernels that fail their check are measured again alone (so the failure is theirs); the others
// are timed in the shared child, the group's wall time split among them.
TEST_F(InterleavedRunnerTest, OneChildTimesTheGoodAndSaysWhyTheOthersFailed) {
  const std::vector<MeasureResult> results =
      RunBatch({"matmul", "garbage", "matmul", "right_once_then_wrong", "no_such_kernel", "matmul"});
  ASSERT_EQ(results.size(), 6u);
  for (size_t i : {0, 2, 5}) {
    EXPECT_EQ(results[i].status, MeasureStatus::kOk) << i << ": " << results[i].message;
    EXPECT_EQ(results[i].costs_s.size(), 3u) << i;
    EXPECT_DOUBLE_EQ(results[i].build_s, 0.25);
  }
  EXPECT_EQ(results[1].status, MeasureStatus::kWrongResult);
  EXPECT_THAT(results[1].message, HasSubstr("output differs from reference: "));
  EXPECT_EQ(results[3].status, MeasureStatus::kWrongResult);
  EXPECT_THAT(results[3].message, HasSubstr("after repeated calls"));
  EXPECT_EQ(results[4].status, MeasureStatus::kCompileError);
  for (const MeasureResult& r : results) EXPECT_GT(r.wall_s, 0);
  EXPECT_EQ(results[2].wall_s, results[0].wall_s);
  EXPECT_EQ(results[5].wall_s, results[0].wall_s);
  EXPECT_NE(results[1].wall_s, results[0].wall_s);  // alone
  test::ExpectNoChildren();
}

// After each kernel's check and calibration, the samples go round: the call log switches
// between the kernels every sample, where one child per kernel calls A throughout, then B.
TEST_F(InterleavedRunnerTest, SamplesAlternateBetweenTheKernels) {
  char path[] = "/tmp/tune-interleave-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  call_log_path = path;
  options_.protocol.min_repeat_ms = 0;  // one call per sample
  options_.protocol.repeats = 4;
  const std::vector<MeasureResult> results = RunBatch({"logged_a", "logged_b"});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok() && results[1].ok()) << results[0].message << results[1].message;
  std::string log;
  if (FILE* f = std::fopen(path, "r")) {
    for (int c; (c = std::fgetc(f)) != EOF;) log.push_back(static_cast<char>(c));
    std::fclose(f);
  }
  ::unlink(path);
  // Check, warm-up and calibration of each (AAA BBB), then rounds of an untimed and a timed
  // call each, the order rotated every round: AA BB, BB AA, AA BB, BB AA.
  EXPECT_EQ(log, "AAABBBAABBBBAAAABBBBAA");
}

// A child that crashes or hangs gives nothing: each kernel of its group is measured again
// alone, and the failure lands on the kernel that caused it.
TEST_F(InterleavedRunnerTest, FailedChildMeasuresEachKernelAlone) {
  std::vector<MeasureResult> results = RunBatch({"matmul", "segfault", "matmul"});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].status, MeasureStatus::kOk) << results[0].message;
  EXPECT_EQ(results[1].status, MeasureStatus::kRuntimeError);
  EXPECT_THAT(results[1].message, HasSubstr("kernel crashed: SIGSEGV"));
  EXPECT_EQ(results[2].status, MeasureStatus::kOk) << results[2].message;
  EXPECT_NE(results[0].wall_s, results[2].wall_s);  // each in a child of its own
  results = RunBatch({"throws", "matmul"});  // the group's child reports the exception for both
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, MeasureStatus::kRuntimeError);
  EXPECT_EQ(results[0].message, "kernel process threw: kernel threw");
  EXPECT_EQ(results[1].status, MeasureStatus::kOk) << results[1].message;
  results = RunBatch({"matmul", "hangs"});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, MeasureStatus::kOk) << results[0].message;
  EXPECT_EQ(results[1].status, MeasureStatus::kTimeout);
  EXPECT_EQ(results[1].message, "kernel did not finish within 1s");
  test::ExpectNoChildren();
}

}  // namespace
}  // namespace tune::measure
