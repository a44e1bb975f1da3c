// The kernel runtime: a small fork-safe thread pool for parallel loops, aligned scratch memory and
// the process's buffers of weights packed once. The same text is the runtime of exported kernel
// libraries (exporter/library_files.cc embeds it at build time), so this file includes only
// standard and POSIX headers besides its own, and compiles as C++17.
#include "codegen/runtime/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// The worker count before any SetNumThreads: 1 in tune's processes; an exported library
// defines the threads its kernels were tuned with.
#ifndef TUNE_RT_DEFAULT_THREADS
#define TUNE_RT_DEFAULT_THREADS 1
#endif

namespace {

/// Aborts with `what` on stderr: out of memory, or a misuse of the prepacked-weight calls.
[[noreturn]] void Fatal(const char* what) {
  std::fprintf(stderr, "tune runtime: %s\n", what);
  std::abort();
}

}  // namespace

namespace tune::codegen::runtime {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_in_parallel = false;  // nested parallel loops run serially

std::atomic<int> g_spin_us{kDefaultSpinMicros};

/// One step of a busy-wait: tells the core that this is a spin loop (on x86 `pause`, which
/// lets a sibling hyperthread run and avoids the memory-order flush at the loop's exit).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Busy-waits until ready() holds or `spin_us` microseconds have passed; returns ready().
/// Every 32 steps (a fraction of a microsecond) it also reads the clock and yields the CPU to
/// any other thread waiting for it: on a loaded machine the thread this one waits for often
/// waits for this very CPU, and a spin that kept it would cost the whole budget per hand-off
/// (at 2 threads with another process busy on one of 2 cores: 106 us per empty loop with
/// `pause` alone, 4.5 us yielding, 5-70 us sleeping at once). On an idle CPU sched_yield
/// returns at once.
template <class Ready>
bool SpinUntil(const Ready& ready, int spin_us) {
  if (spin_us <= 0) return ready();
  const Clock::time_point deadline = Clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int k = 0; k < 32; ++k) {
      if (ready()) return true;
      CpuRelax();
    }
    if (Clock::now() >= deadline) return ready();
    sched_yield();
  }
}

/// CPUs this process may run on (its affinity mask).
int UsableCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::thread::hardware_concurrency());
}

/// Workers wait for a job; a job is split into one contiguous chunk per participant (the
/// caller takes chunk 0). The pool belongs to the process that created it: after fork() a
/// child sees a different pid and builds its own.
///
/// Hand-off: the caller publishes a job by bumping `generation_`; a worker that waits for it
/// first busy-waits on that counter for up to SpinMicros(), then sleeps on `cv_`. The caller
/// waits for the end of its job (`done_` chunks finished) the same way, sleeping on
/// `done_cv_`. Back-to-back jobs so cost no system call and no scheduler wake-up.
/// No lost wake-up: a sleeper registers itself (`sleepers_`, `caller_sleeping_`) under `mu_`
/// and then re-checks its condition, and the other side changes the condition and then reads
/// the registration, all sequentially consistent: either the sleeper sees the change and does
/// not sleep, or the other side sees the registration, takes `mu_` (which the sleeper holds
/// until it is waiting on the condition variable) and notifies.
///
/// Claims: a chunk runs on the thread that claims it first (`claimed_[t]` set to the job's
/// generation). Worker t claims chunk t; the caller, after chunk 0, claims every chunk whose
/// worker has not started it, so a worker that is late (asleep, or waiting for a CPU another
/// process holds) costs the job its chunk's time on the caller rather than the worker's
/// wake-up or time slice. The caller returns once every chunk is done, without waiting for
/// late workers: one that wakes afterwards finds its chunk claimed (its claim for an older
/// generation fails) and waits again. A worker reads the job's fields only after claiming a
/// chunk of it, and the caller rewrites them only after all chunks are done, so it never reads
/// the next job's fields as this one's.
class ThreadPool {
 public:
  explicit ThreadPool(int threads)
      : threads_(threads), may_spin_(threads <= UsableCpus()), claimed_(static_cast<size_t>(threads)) {
    for (auto& c : claimed_) c.value.store(0, std::memory_order_relaxed);
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
  }
  ~ThreadPool() {
    stop_.store(true, std::memory_order_seq_cst);
    {
      std::lock_guard<std::mutex> lock(mu_);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  /// Runs the job on the pool; false (nothing run) when another caller holds the pool.
  bool TryRun(int64_t n, void (*body)(int64_t, void*), void* closure) {
    std::unique_lock<std::mutex> caller(caller_mu_, std::try_to_lock);
    if (!caller.owns_lock()) return false;
    Run(n, body, closure);
    return true;
  }

 private:
  /// Busy-wait budget of this pool's threads: none when the pool has more threads than the
  /// process has CPUs (a spinning thread would take the CPU from one that has work).
  int SpinBudget() const { return may_spin_ ? g_spin_us.load(std::memory_order_relaxed) : 0; }

  void Run(int64_t n, void (*body)(int64_t, void*), void* closure) {
    // The previous job is over (all its chunks done): no worker reads these now.
    n_ = n;
    body_ = body;
    closure_ = closure;
    done_.store(0, std::memory_order_relaxed);
    const uint64_t generation = generation_.fetch_add(1, std::memory_order_seq_cst) + 1;  // publishes the fields
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // Once this thread holds mu_, every registered sleeper waits on cv_. Notified after
      // unlocking, so that a woken worker does not block on mu_ again.
      {
        std::lock_guard<std::mutex> lock(mu_);
      }
      cv_.notify_all();
    }
    claimed_[0].value.store(generation, std::memory_order_relaxed);
    RunChunk(0);
    // The chunks no worker has started yet.
    for (int t = 1; t < threads_; ++t) {
      if (Claim(t, generation)) RunChunk(t);
    }
    auto done = [this] { return done_.load(std::memory_order_seq_cst) == threads_; };
    if (!SpinUntil(done, SpinBudget())) {
      std::unique_lock<std::mutex> lock(mu_);
      caller_sleeping_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lock, done);
      caller_sleeping_.store(false, std::memory_order_relaxed);
    }
  }

  /// Claims chunk t of the job of `generation` for the calling thread: false when another
  /// thread has, or that job is over (a later one's claims count as taken).
  bool Claim(int t, uint64_t generation) {
    std::atomic<uint64_t>& c = claimed_[static_cast<size_t>(t)].value;
    uint64_t seen = c.load(std::memory_order_acquire);
    while (seen < generation) {
      if (c.compare_exchange_weak(seen, generation, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    }
    return false;
  }

  /// Runs chunk t of the current job (claimed by this thread) and counts it done.
  void RunChunk(int t) {
    int64_t begin = n_ * t / threads_, end = n_ * (t + 1) / threads_;
    for (int64_t i = begin; i < end; ++i) body_(i, closure_);
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == threads_ &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      // The pool outlives this call: its destructor joins the workers first.
      {
        std::lock_guard<std::mutex> lock(mu_);
      }
      done_cv_.notify_one();
    }
  }

  void WorkerLoop(int t) {
    t_in_parallel = true;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tune-rt-worker");
#endif
    uint64_t seen = 0;
    auto ready = [&] {
      return generation_.load(std::memory_order_seq_cst) != seen || stop_.load(std::memory_order_seq_cst);
    };
    for (;;) {
      if (!SpinUntil(ready, SpinBudget())) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lock, ready);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      // The job's fields are read only once its chunk is this thread's (the caller may have
      // run it, and even published the next job, meanwhile).
      if (Claim(t, seen)) RunChunk(t);
    }
  }

  const int threads_;
  const bool may_spin_;
  std::mutex caller_mu_;  // one job at a time; other callers run their loop serially
  std::vector<std::thread> workers_;
  std::mutex mu_;  // held by a sleeper from its registration until it waits; taken to notify
  std::condition_variable cv_, done_cv_;
  // The job: written by the caller before it bumps generation_, read by the workers after.
  int64_t n_ = 0;
  void (*body_)(int64_t, void*) = nullptr;
  void* closure_ = nullptr;
  // What waiting workers poll, on a cache line of its own, apart from what they write.
  alignas(64) std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<int> done_{0};  // chunks of the current job finished
  std::atomic<int> sleepers_{0};          // workers registered to sleep on cv_
  std::atomic<bool> caller_sleeping_{false};  // the caller registered to sleep on done_cv_
  // claimed_[t]: the generation of the last job whose chunk t a thread claimed (each on a cache
  // line of its own: the caller and worker t both write it).
  struct alignas(64) ClaimSlot {
    std::atomic<uint64_t> value;
  };
  std::vector<ClaimSlot> claimed_;
};

std::mutex g_pool_mu;
pid_t g_pool_pid = 0;

/// The process's pool (leaked on purpose: never joined at exit). Shared: a caller holds its
/// pool for the whole loop, so one rebuilt for a new thread count meanwhile does not free it.
std::shared_ptr<ThreadPool>& PoolSlot() {
  static auto* slot = new std::shared_ptr<ThreadPool>();
  return *slot;
}

std::shared_ptr<ThreadPool> Pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  std::shared_ptr<ThreadPool>& pool = PoolSlot();
  const int want = NumThreads();
  if (pool == nullptr || g_pool_pid != getpid() || pool->threads() != want) {
    // A forked child's copy of the parent's pool has no threads: never destroyed (joined).
    if (pool != nullptr && g_pool_pid != getpid()) new std::shared_ptr<ThreadPool>(std::move(pool));
    pool = std::make_shared<ThreadPool>(want);
    g_pool_pid = getpid();
  }
  return pool;
}

std::atomic<int> g_threads{TUNE_RT_DEFAULT_THREADS};

}  // namespace

void SetNumThreads(int threads) { g_threads = threads < 1 ? 1 : threads; }
int NumThreads() { return g_threads.load(); }
void SetSpinMicros(int micros) { g_spin_us = micros < 0 ? 0 : micros; }
int SpinMicros() { return g_spin_us.load(); }

}  // namespace tune::codegen::runtime

extern "C" void tune_rt_parallel_for(int64_t n, void (*body)(int64_t, void*), void* closure) {
  using namespace tune::codegen::runtime;
  if (n <= 0) return;
  if (t_in_parallel || NumThreads() == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) body(i, closure);
    return;
  }
  t_in_parallel = true;
  if (!Pool()->TryRun(n, body, closure)) {
    for (int64_t i = 0; i < n; ++i) body(i, closure);
  }
  t_in_parallel = false;
}

namespace {

/// Scratch blocks freed by kernels on this thread, kept for the next call: a kernel that packs
/// or pads allocates the same sizes on every call, and fresh pages from the system would cost
/// it page faults and zeroing each time (megabytes for a packed GEMM operand). Each block has a
/// 64-byte header holding its size. Thread-local: no lock, and a forked child owns its copy.
class ScratchCache {
 public:
  static constexpr size_t kHeader = 64;
  static constexpr size_t kMaxBlocks = 8;
  static constexpr size_t kMaxBytes = size_t{1} << 30;

  ~ScratchCache() {
    for (char* block : blocks_) std::free(block);
  }
  void* Alloc(size_t size) {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (SizeOf(blocks_[i]) != size) continue;
      char* block = blocks_[i];
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
      bytes_ -= size;
      return block + kHeader;
    }
    char* block = static_cast<char*>(std::aligned_alloc(64, kHeader + size));
    if (block == nullptr) Fatal("out of memory allocating kernel scratch");
    std::memcpy(block, &size, sizeof size);
    return block + kHeader;
  }
  void Free(void* ptr) {
    char* block = static_cast<char*>(ptr) - kHeader;
    const size_t size = SizeOf(block);
    // Keep the newest blocks; the oldest go back to the system first.
    blocks_.push_back(block);
    bytes_ += size;
    while (blocks_.size() > kMaxBlocks || bytes_ > kMaxBytes) {
      bytes_ -= SizeOf(blocks_.front());
      std::free(blocks_.front());
      blocks_.erase(blocks_.begin());
    }
  }

 private:
  static size_t SizeOf(const char* block) {
    size_t size;
    std::memcpy(&size, block, sizeof size);
    return size;
  }
  std::vector<char*> blocks_;
  size_t bytes_ = 0;
};

thread_local ScratchCache t_scratch;

}  // namespace

extern "C" void* tune_rt_alloc(int64_t bytes) {
  const size_t size = (static_cast<size_t>(bytes < 64 ? 64 : bytes) + 63) / 64 * 64;
  return t_scratch.Alloc(size);
}

extern "C" void tune_rt_free(void* ptr) {
  if (ptr != nullptr) t_scratch.Free(ptr);
}

namespace {

/// The buffers of tune_rt_prepacked. Entries are few (a model's layers at most), so a linear
/// search does: the weight address is compared first, the kernel id text only on a match.
class PrepackedCache {
 public:
  static constexpr size_t kMaxEntries = 64;
  static constexpr size_t kMaxBytes = size_t{1} << 30;

  void* Acquire(const char* kernel_id, const void* weight, int64_t bytes, int* fresh) {
    const size_t size = (static_cast<size_t>(bytes < 64 ? 64 : bytes) + 63) / 64 * 64;
    std::unique_lock<std::mutex> lock(mu_);
    if (pid_ != getpid()) {
      // A forked child: the parent's buffers are the child's copies, none of them in use here.
      for (Entry& e : entries_) std::free(e.data);
      entries_.clear();
      bytes_ = 0;
      pid_ = getpid();
    }
    for (Entry& e : entries_) {
      if (e.stale || e.weight != weight || e.bytes != size || e.id != kernel_id) continue;
      ++e.users;
      e.last_use = ++clock_;
      char* data = e.data;
      // The entry cannot go away while this call holds it (users > 0).
      filled_.wait(lock, [&] { return Find(data)->filled; });
      *fresh = 0;
      return data;
    }
    // Make room: the least recently used entries no kernel holds go first.
    for (;;) {
      size_t live = 0;
      Entry* oldest = nullptr;
      for (Entry& e : entries_) {
        if (e.stale) continue;
        ++live;
        if (e.users == 0 && (oldest == nullptr || e.last_use < oldest->last_use)) oldest = &e;
      }
      if ((live < kMaxEntries && bytes_ + size <= kMaxBytes) || oldest == nullptr) break;
      Erase(oldest->data);
    }
    char* data = static_cast<char*>(std::aligned_alloc(64, size));
    if (data == nullptr) Fatal("out of memory allocating a packed weight");
    entries_.push_back(Entry{kernel_id, weight, size, data, 1, false, false, ++clock_});
    bytes_ += size;
    ++packs_;
    *fresh = 1;
    return data;
  }

  void Release(void* buffer) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* e = Find(static_cast<char*>(buffer));
    if (e == nullptr || e->users <= 0) Fatal("release of a packed weight buffer not in use");
    --e->users;
    if (!e->filled) {
      e->filled = true;
      filled_.notify_all();
    }
    if (e->stale && e->users == 0) Erase(e->data);
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = entries_.size(); i-- > 0;) {
      if (entries_[i].users == 0) {
        Erase(entries_[i].data);
      } else if (!entries_[i].stale) {
        entries_[i].stale = true;
        bytes_ -= entries_[i].bytes;
      }
    }
  }

  int64_t packs() {
    std::lock_guard<std::mutex> lock(mu_);
    return packs_;
  }

 private:
  struct Entry {
    std::string id;
    const void* weight;
    size_t bytes;
    char* data;
    int users;        // calls between tune_rt_prepacked and their release
    bool filled;      // the fresh call has released it
    bool stale;       // reset while in use: freed at the last release, never found again
    uint64_t last_use;
  };
  Entry* Find(const char* data) {
    for (Entry& e : entries_) {
      if (e.data == data) return &e;
    }
    return nullptr;
  }
  void Erase(char* data) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].data != data) continue;
      if (!entries_[i].stale) bytes_ -= entries_[i].bytes;
      std::free(data);
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }

  std::mutex mu_;
  std::condition_variable filled_;
  std::vector<Entry> entries_;
  size_t bytes_ = 0;  // of the entries that are not stale
  uint64_t clock_ = 0;
  int64_t packs_ = 0;
  pid_t pid_ = getpid();
};

PrepackedCache& Prepacked() {
  static PrepackedCache* cache = new PrepackedCache();  // leaked: kernels may run during exit
  return *cache;
}

}  // namespace

int64_t tune::codegen::runtime::PrepackedPacks() { return Prepacked().packs(); }

extern "C" void* tune_rt_prepacked(const char* kernel_id, const void* weight, int64_t bytes, int* fresh) {
  return Prepacked().Acquire(kernel_id, weight, bytes, fresh);
}

extern "C" void tune_rt_prepacked_release(void* buffer) { Prepacked().Release(buffer); }

extern "C" void tune_rt_prepacked_reset(void) { Prepacked().Reset(); }
