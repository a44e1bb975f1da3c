// The kernel runtime: a small fork-safe thread pool for parallel loops and aligned scratch memory.
#include "codegen/runtime/runtime.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/check.h"

namespace tune::codegen::runtime {
namespace {

thread_local bool t_in_parallel = false;  // nested parallel loops run serially

/// Workers wait for a job; a job is split into one contiguous chunk per participant (the
/// caller takes chunk 0). The pool belongs to the process that created it: after fork() a
/// child sees a different pid and builds its own.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : threads_(threads) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
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
  void Run(int64_t n, void (*body)(int64_t, void*), void* closure) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      n_ = n;
      body_ = body;
      closure_ = closure;
      pending_ = threads_ - 1;
      ++generation_;
    }
    cv_.notify_all();
    RunChunk(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
  }

  void RunChunk(int t) {
    int64_t begin = n_ * t / threads_, end = n_ * (t + 1) / threads_;
    for (int64_t i = begin; i < end; ++i) body_(i, closure_);
  }
  void WorkerLoop(int t) {
    t_in_parallel = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      RunChunk(t);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  int threads_;
  std::mutex caller_mu_;  // one job at a time; other callers run their loop serially
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int pending_ = 0;
  int64_t n_ = 0;
  void (*body_)(int64_t, void*) = nullptr;
  void* closure_ = nullptr;
};

std::atomic<int> g_threads{1};
std::mutex g_pool_mu;
ThreadPool* g_pool = nullptr;  // leaked on purpose: never joined at exit or after fork
pid_t g_pool_pid = 0;

ThreadPool* Pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  int want = g_threads.load();
  if (g_pool == nullptr || g_pool_pid != getpid() || g_pool->threads() != want) {
    if (g_pool != nullptr && g_pool_pid == getpid()) delete g_pool;
    g_pool = new ThreadPool(want);
    g_pool_pid = getpid();
  }
  return g_pool;
}

}  // namespace

void SetNumThreads(int threads) { g_threads = threads < 1 ? 1 : threads; }
int NumThreads() { return g_threads.load(); }

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
    TUNE_CHECK_MSG(block != nullptr, "out of memory allocating kernel scratch");
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
