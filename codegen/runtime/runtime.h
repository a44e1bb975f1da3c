// The runtime that generated kernels call: a thread pool for parallel loops, aligned memory,
// and buffers of weights packed once per process.
#pragma once

#include <cstdint>

namespace tune::codegen::runtime {

/// Worker count for parallel loops (>= 1; before any call, 1, or TUNE_RT_DEFAULT_THREADS where
/// runtime.cc is compiled with it, as in an exported library). Call before running kernels;
/// the pool is created lazily in the calling process, so a forked child gets its own.
void SetNumThreads(int threads);
int NumThreads();

/// How long a thread of the pool busy-waits before it sleeps, in microseconds: a worker for
/// the next parallel loop, the caller for the end of its loop. Loops that come back to back
/// (a kernel's parallel loops, calls of a kernel being timed) so skip the sleep and wake-up
/// (a system call and a scheduler wake-up each: microseconds a loop). A loop that comes later
/// pays them as before, after each waiting thread spun this long (yielding its CPU to any
/// other thread that wants it); the threads never spin where the pool has more threads than
/// the process has CPUs. 0: sleep at once. Takes effect at each thread's next wait;
/// thread-safe.
void SetSpinMicros(int micros);
int SpinMicros();
/// The default: several times what a sleep and wake-up cost (measured 5-10 us at 2 threads
/// on a loaded 2-core VM), so a loop that comes later than this pays a wake-up that is small
/// beside the gap before it, and short enough that an idle pool gives its CPUs back at once
/// (OpenMP runtimes spin far longer: GOMP_SPINCOUNT 300k pauses, KMP_BLOCKTIME 200 ms).
inline constexpr int kDefaultSpinMicros = 50;

/// How many times tune_rt_prepacked has handed out a buffer to be filled (fresh) in this
/// process: a caller compares two readings to know whether kernels packed a weight in between.
int64_t PrepackedPacks();

}  // namespace tune::codegen::runtime

extern "C" {
/// Runs body(i, closure) for i in [0, n), split in contiguous chunks over the pool (chunk t
/// of T threads is [n*t/T, n*(t+1)/T), chunk 0 on the calling thread, chunk t on worker t, or
/// on the calling thread where worker t has not started it by the time the caller is done
/// with the chunks before it: a late worker, asleep or without a CPU, never holds the loop
/// up); returns when all are done. Called from generated code; nested calls run serially, and so does a call made while
/// another thread's loop holds the pool.
void tune_rt_parallel_for(int64_t n, void (*body)(int64_t, void*), void* closure);
/// 64-byte aligned scratch memory for packed / padded buffers; never returns null (aborts).
/// Blocks freed on a thread are kept (up to 8 blocks, 1 GiB) and handed out again for the
/// same size, so a kernel's per-call scratch costs no fresh pages after its first call.
void* tune_rt_alloc(int64_t bytes);
/// Frees a block of tune_rt_alloc (on any thread); null is ignored.
void tune_rt_free(void* ptr);

/// The buffer of `bytes` (64-byte aligned) holding the weight at `weight` as the kernel
/// `kernel_id` (a NUL-terminated text naming the kernel and its packing exactly) packs it:
/// one per (kernel_id text, weight address, bytes), kept across calls for the life of the
/// process. *fresh is set to 1 when the caller must fill it (the first call for that key, or
/// after tune_rt_prepacked_reset), else 0: then its contents are what the filling call wrote.
/// Thread-safe: a call that finds the buffer being filled by another thread waits until that
/// thread's tune_rt_prepacked_release. Every call must be paired with one release once the
/// kernel is done with the buffer (and, when fresh, has filled it). At most 64 buffers and
/// 1 GiB are kept; beyond that the least recently used ones that no kernel holds are freed
/// (and packed again when asked for again). A forked child starts with none.
void* tune_rt_prepacked(const char* kernel_id, const void* weight, int64_t bytes, int* fresh);
/// Ends the use of a buffer of tune_rt_prepacked; when that call was fresh, the buffer is
/// now filled and waiting callers go on.
void tune_rt_prepacked_release(void* buffer);
/// Forgets every packed buffer (those in use are freed at their release): the next call of
/// tune_rt_prepacked for any key is fresh. Call it whenever a weight that kernels may have
/// packed gets new contents at the same address.
void tune_rt_prepacked_reset(void);
}
