// The kernel runtime: a small fork-safe thread pool for parallel loops, aligned scratch memory and
// the process's buffers of weights packed once.
#include "codegen/runtime/runtime.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
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
    TUNE_CHECK_MSG(data != nullptr, "out of memory allocating a packed weight");
    entries_.push_back(Entry{kernel_id, weight, size, data, 1, false, false, ++clock_});
    bytes_ += size;
    ++packs_;
    *fresh = 1;
    return data;
  }

  void Release(void* buffer) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* e = Find(static_cast<char*>(buffer));
    TUNE_CHECK_MSG(e != nullptr && e->users > 0, "release of a packed weight buffer not in use");
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
