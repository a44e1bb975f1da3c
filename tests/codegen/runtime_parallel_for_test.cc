// tune_rt_parallel_for, the kernel runtime's thread pool: every index once, in the documented
// contiguous chunks, back to back and from several threads, across fork() and thread-count
// changes, with its busy-wait and sleep hand-offs (a lost wake-up hangs these tests).
#include <sys/syscall.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codegen/runtime/runtime.h"
#include "gtest/gtest.h"

namespace tune::test {
namespace {

namespace rt = codegen::runtime;

/// Restores the runtime's settings at the end of a test.
class PoolSettingsGuard {
 public:
  PoolSettingsGuard() : threads_(rt::NumThreads()), spin_us_(rt::SpinMicros()) {}
  ~PoolSettingsGuard() {
    rt::SetNumThreads(threads_);
    rt::SetSpinMicros(spin_us_);
  }

 private:
  int threads_, spin_us_;
};

/// A fresh seed, shown with any failure.
uint64_t FreshPoolSeed() { return (uint64_t{std::random_device{}()} << 32) | std::random_device{}(); }

/// Each index's visit count and the thread that visited it last.
struct PoolVisits {
  std::vector<std::atomic<int>> count;
  std::vector<std::atomic<std::thread::id>> owner;
  explicit PoolVisits(int64_t n) : count(static_cast<size_t>(n)), owner(static_cast<size_t>(n)) {}
};

void PoolVisitIndex(int64_t i, void* closure) {
  auto* v = static_cast<PoolVisits*>(closure);
  v->count[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  v->owner[static_cast<size_t>(i)].store(std::this_thread::get_id(), std::memory_order_relaxed);
}

/// PoolVisitIndex after a few microseconds of work of its own.
void PoolVisitIndexSlowly(int64_t i, void* closure) {
  volatile int sink = 0;
  for (int k = 0; k < 2000; ++k) sink = k;
  PoolVisitIndex(i, closure);
}

/// Runs one loop of n indices and checks it: every index once; with `threads` > 1, chunk t is
/// [n*t/T, n*(t+1)/T), run by one thread, the caller's for chunk 0; the others each on a
/// worker of its own or on the caller (a chunk whose worker had not started it).
/// Resets `v` for the next loop. Returns false (after reporting) on a failure.
bool RunAndCheckPoolLoop(PoolVisits& v, int64_t n, int threads) {
  tune_rt_parallel_for(n, PoolVisitIndex, &v);
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    const int c = v.count[static_cast<size_t>(i)].exchange(0);
    if (c != 1) {
      ADD_FAILURE() << "index " << i << " of " << n << " ran " << c << " times (" << threads << " threads)";
      ok = false;
    }
  }
  if (!ok || n < 2 || threads < 2) return ok;
  std::vector<std::thread::id> chunk_owner;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (begin == end) continue;
    const std::thread::id owner = v.owner[static_cast<size_t>(begin)].load();
    for (int64_t i = begin; i < end; ++i) {
      if (v.owner[static_cast<size_t>(i)].load() != owner) {
        ADD_FAILURE() << "chunk " << t << " [" << begin << ", " << end << ") of " << n << " ran on several threads";
        return false;
      }
    }
    for (const std::thread::id& other : chunk_owner) {
      if (other == owner && owner != std::this_thread::get_id()) {
        ADD_FAILURE() << "chunk " << t << " of " << n << " ran on the thread of another chunk (" << threads
                      << " threads)";
        return false;
      }
    }
    if (t == 0 && owner != std::this_thread::get_id()) {
      ADD_FAILURE() << "chunk 0 of " << n << " did not run on the calling thread";
      return false;
    }
    chunk_owner.push_back(owner);
  }
  return true;
}

constexpr int64_t kPoolMaxN = 257;

TEST(RuntimeParallelForTest, BackToBackLoopsRunEveryIndexOnceInTheirChunks) {
  PoolSettingsGuard guard;
  const uint64_t seed = FreshPoolSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  PoolVisits v(kPoolMaxN);
  // The default busy-wait (loops meet spinning threads), none (every hand-off sleeps) and
  // short ones (a thread gives up spinning about when the next loop comes).
  for (int spin_us : {rt::kDefaultSpinMicros, 0, 2}) {
    for (int threads : {2, 3}) {
      rt::SetSpinMicros(spin_us);
      rt::SetNumThreads(threads);
      for (int r = 0; r < 20000; ++r) {
        const int64_t n = std::uniform_int_distribution<int64_t>(0, kPoolMaxN)(rng);
        ASSERT_TRUE(RunAndCheckPoolLoop(v, n, threads)) << "loop " << r << ", spin " << spin_us << " us";
      }
    }
  }
}

/// A short loop body: adds i + 1 to the sum; the first and last index (the caller's chunk and
/// the last worker's) first do some busy work of their own, and some indices yield.
struct RacingPoolBody {
  std::atomic<int64_t>* sum;
  int64_t n;
  int yield_every;      // 0: never
  int first_work;       // busy-loop steps of index 0
  int last_work;        // busy-loop steps of index n - 1
};

void BusyPoolSteps(int steps) {
  volatile int sink = 0;
  for (int k = 0; k < steps; ++k) sink = k;
}

void RacingPoolIndex(int64_t i, void* closure) {
  auto* b = static_cast<RacingPoolBody*>(closure);
  if (i == 0) BusyPoolSteps(b->first_work);
  if (i == b->n - 1) BusyPoolSteps(b->last_work);
  if (b->yield_every > 0 && i % b->yield_every == 0) std::this_thread::yield();
  b->sum->fetch_add(i + 1, std::memory_order_relaxed);
}

TEST(RuntimeParallelForTest, ManySmallLoopsWithRacingHandOffsAllFinish) {
  // A lost wake-up leaves a worker asleep with its chunk not run, or the caller asleep after
  // the last chunk: this test then never ends. Spin budgets of 0-3 us drawn per loop, chunks
  // that end 0-3 us apart, bodies that sometimes yield and 0-3 us of the caller's own work
  // between loops sweep each hand-off's decision to sleep across the moment its notification
  // is sent, on both sides (a worker waiting for a loop, the caller for its end).
  PoolSettingsGuard guard;
  const uint64_t seed = FreshPoolSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  rt::SetNumThreads(2);
  std::atomic<int64_t> sum{0};
  std::uniform_int_distribution<int> steps(0, 3000);
  int64_t expected = 0;
  for (int r = 0; r < 100000; ++r) {
    rt::SetSpinMicros(std::uniform_int_distribution<int>(0, 3)(rng));
    const int64_t n = std::uniform_int_distribution<int64_t>(2, 4)(rng);
    RacingPoolBody b{&sum, n, std::uniform_int_distribution<int>(0, 7)(rng), steps(rng), steps(rng)};
    tune_rt_parallel_for(n, RacingPoolIndex, &b);
    expected += n * (n + 1) / 2;
    BusyPoolSteps(steps(rng));
  }
  EXPECT_EQ(sum.load(), expected);
}

TEST(RuntimeParallelForTest, TwoThreadsCallingAtOnceBothRunEveryIndexOnce) {
  // One of two concurrent callers gets the pool, the other runs its loop serially; meanwhile
  // the thread count changes too (a new pool, the one in use kept until its loop ends).
  PoolSettingsGuard guard;
  const uint64_t seed = FreshPoolSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rt::SetNumThreads(2);
  std::atomic<int> failures{0};
  auto caller = [&](uint64_t stream, bool change_threads) {
    std::mt19937_64 rng(seed + stream);
    PoolVisits v(kPoolMaxN);
    for (int r = 0; r < 20000; ++r) {
      if (change_threads && r % 100 == 0) rt::SetNumThreads(std::uniform_int_distribution<int>(2, 3)(rng));
      const int64_t n = std::uniform_int_distribution<int64_t>(0, kPoolMaxN)(rng);
      tune_rt_parallel_for(n, PoolVisitIndex, &v);
      for (int64_t i = 0; i < n; ++i) {
        if (v.count[static_cast<size_t>(i)].exchange(0) != 1) failures.fetch_add(1);
      }
    }
  };
  std::thread a(caller, 1, false), b(caller, 2, true);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0) << "indices that did not run exactly once";
}

TEST(RuntimeParallelForTest, ThreadCountChangesBetweenLoopsTakeEffect) {
  PoolSettingsGuard guard;
  const uint64_t seed = FreshPoolSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  PoolVisits v(kPoolMaxN);
  for (int r = 0; r < 3000; ++r) {
    const int threads = std::uniform_int_distribution<int>(1, 4)(rng);
    rt::SetNumThreads(threads);
    const int64_t n = std::uniform_int_distribution<int64_t>(0, kPoolMaxN)(rng);
    ASSERT_TRUE(RunAndCheckPoolLoop(v, n, threads)) << "loop " << r;
  }
}

/// A loop run inside another loop's body: each inner index records whether it ran on the
/// thread of the outer index that started it.
struct NestedPoolLoop {
  std::atomic<int> inner_visits{0};
  std::atomic<int> elsewhere{0};  // inner indices run on another thread
};

void NestedPoolInner(int64_t, void* closure) {
  auto* ctx = static_cast<std::pair<NestedPoolLoop*, std::thread::id>*>(closure);
  if (std::this_thread::get_id() != ctx->second) ctx->first->elsewhere.fetch_add(1);
  ctx->first->inner_visits.fetch_add(1);
}

void NestedPoolOuter(int64_t, void* closure) {
  std::pair<NestedPoolLoop*, std::thread::id> ctx{static_cast<NestedPoolLoop*>(closure), std::this_thread::get_id()};
  tune_rt_parallel_for(16, NestedPoolInner, &ctx);
}

TEST(RuntimeParallelForTest, NestedLoopsRunSeriallyOnTheirThread) {
  PoolSettingsGuard guard;
  rt::SetNumThreads(2);
  for (int r = 0; r < 100; ++r) {
    NestedPoolLoop loop;
    tune_rt_parallel_for(8, NestedPoolOuter, &loop);
    ASSERT_EQ(loop.inner_visits.load(), 8 * 16);
    ASSERT_EQ(loop.elsewhere.load(), 0);
  }
}

TEST(RuntimeParallelForTest, AForkedChildRunsLoopsOnAPoolOfItsOwn) {
  PoolSettingsGuard guard;
  rt::SetNumThreads(2);
  PoolVisits v(kPoolMaxN);
  ASSERT_TRUE(RunAndCheckPoolLoop(v, 64, 2));  // the parent's pool exists and has run
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's workers do not exist here: loops handed to them would all run on the caller
    // (which takes the chunks no worker starts).
    std::mt19937_64 rng(FreshPoolSeed());
    // (Each index does some work, so that the worker, started in the child, takes part before
    // the caller is done with its own chunk in some loops.)
    int bad = 0, on_two_threads = 0;
    for (int r = 0; r < 2000; ++r) {
      const int64_t n = std::uniform_int_distribution<int64_t>(2, kPoolMaxN)(rng);
      tune_rt_parallel_for(n, PoolVisitIndexSlowly, &v);
      bool two_threads = false;
      for (int64_t i = 0; i < n; ++i) {
        if (v.count[static_cast<size_t>(i)].exchange(0) != 1) ++bad;
        if (v.owner[static_cast<size_t>(i)].load() != std::this_thread::get_id()) two_threads = true;
      }
      on_two_threads += two_threads;
    }
    _exit(bad == 0 && on_two_threads > 0 ? 0 : 1);  // the child's loops are parallel too
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's loops missed indices or ran on one thread";
  EXPECT_TRUE(RunAndCheckPoolLoop(v, 64, 2));  // the parent's pool is unharmed
}

/// States ('R', 'S', ...) of this process's pool workers (threads named tune-rt-worker).
std::vector<char> PoolWorkerStates() {
  std::vector<char> states;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "tune-rt-worker") continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size()) states.push_back(line[paren + 2]);
  }
  return states;
}

TEST(RuntimeParallelForTest, AnIdlePoolsWorkersGoToSleep) {
  // Workers spin for a bounded time only: after the last loop they all end up asleep. A
  // worker that spun on forever would keep this test waiting.
  PoolSettingsGuard guard;
  // 2 threads: a pool with more threads than the process has CPUs never spins.
  rt::SetSpinMicros(rt::kDefaultSpinMicros);
  rt::SetNumThreads(2);
  PoolVisits v(kPoolMaxN);
  for (int r = 0; r < 1000; ++r) ASSERT_TRUE(RunAndCheckPoolLoop(v, 64, 2));
  // The caller runs a chunk whose worker has not started, so the loops may all be over before
  // the worker thread has even run (and named itself): it counts once it is there and asleep.
  // A worker never named tune-rt-worker keeps this test waiting, and ctest's timeout fails it.
  for (;;) {
    const std::vector<char> states = PoolWorkerStates();
    bool asleep = states.size() == 1;
    for (char s : states) asleep = asleep && s == 'S';
    if (asleep) break;
    EXPECT_LE(states.size(), 1u) << "more tune-rt-worker threads than the pool has workers";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}


/// What the late-worker test's signal handler shares with the test: it holds a pool worker in
/// the handler (as a descheduled or sleeping thread would be) until released.
std::atomic<bool> g_late_worker_entered{false};
std::atomic<bool> g_late_worker_release{false};

void HoldLateWorker(int) {
  g_late_worker_entered.store(true);
  while (!g_late_worker_release.load()) sched_yield();
}

/// The thread ids of this process's pool workers (threads named tune-rt-worker).
std::vector<pid_t> PoolWorkerTids() {
  std::vector<pid_t> tids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "tune-rt-worker") tids.push_back(static_cast<pid_t>(std::stoi(task.path().filename().string())));
  }
  return tids;
}

TEST(RuntimeParallelForTest, TheCallerRunsTheChunkOfAWorkerThatHasNotStarted) {
  // The pool's one worker is held in a signal handler (as a thread without a CPU would be): the
  // caller, done with chunk 0, runs chunk 1 itself and returns, rather than waiting for the
  // worker. (Were it to wait, a watchdog lets the worker go after a while, and chunk 1 then
  // runs on the worker: the check below fails rather than the test hanging.) The worker, let
  // go, finds its chunk taken, and the pool then runs loops on both threads again.
  PoolSettingsGuard guard;
  rt::SetSpinMicros(rt::kDefaultSpinMicros);
  rt::SetNumThreads(2);
  PoolVisits v(kPoolMaxN);
  ASSERT_TRUE(RunAndCheckPoolLoop(v, 64, 2));  // the pool exists
  // (Its worker names itself once it runs: the caller may have run that first loop alone.)
  std::vector<pid_t> workers;
  while ((workers = PoolWorkerTids()).empty()) std::this_thread::yield();
  ASSERT_EQ(workers.size(), 1u);
  struct sigaction hold = {}, previous = {};
  hold.sa_handler = HoldLateWorker;
  sigemptyset(&hold.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &hold, &previous), 0);
  g_late_worker_entered = false;
  g_late_worker_release = false;
  ASSERT_EQ(syscall(SYS_tgkill, getpid(), workers[0], SIGUSR2), 0);
  while (!g_late_worker_entered.load()) std::this_thread::yield();
  std::atomic<bool> loop_returned{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 300 && !loop_returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    g_late_worker_release = true;
  });
  std::mt19937_64 rng(FreshPoolSeed());
  const int64_t n = std::uniform_int_distribution<int64_t>(2, kPoolMaxN)(rng);
  tune_rt_parallel_for(n, PoolVisitIndex, &v);
  const bool released_before = g_late_worker_release.load();
  loop_returned = true;
  watchdog.join();
  EXPECT_FALSE(released_before) << "the loop waited for the held worker";
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(v.count[static_cast<size_t>(i)].exchange(0), 1) << "index " << i << " of " << n;
    EXPECT_EQ(v.owner[static_cast<size_t>(i)].load(), std::this_thread::get_id()) << "index " << i << " of " << n;
  }
  ASSERT_EQ(sigaction(SIGUSR2, &previous, nullptr), 0);
  // Both threads take part again: some loop runs a chunk on the worker.
  bool worker_ran = false;
  for (int r = 0; r < 20000 && !worker_ran; ++r) {
    tune_rt_parallel_for(64, PoolVisitIndexSlowly, &v);
    for (int64_t i = 0; i < 64; ++i) {
      EXPECT_EQ(v.count[static_cast<size_t>(i)].exchange(0), 1);
      worker_ran = worker_ran || v.owner[static_cast<size_t>(i)].load() != std::this_thread::get_id();
    }
  }
  EXPECT_TRUE(worker_ran);
}

}  // namespace
}  // namespace tune::test
