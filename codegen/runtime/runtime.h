// The runtime that generated kernels call: a thread pool for parallel loops, aligned memory.
#pragma once

#include <cstdint>

namespace tune::codegen::runtime {

/// Worker count for parallel loops (>= 1). Call before running kernels; the pool is created
/// lazily in the calling process, so a forked child gets its own.
void SetNumThreads(int threads);
int NumThreads();

}  // namespace tune::codegen::runtime

extern "C" {
/// Runs body(i, closure) for i in [0, n), split in contiguous chunks over the pool; returns
/// when all are done. Called from generated code; nested calls run serially.
void tune_rt_parallel_for(int64_t n, void (*body)(int64_t, void*), void* closure);
/// 64-byte aligned scratch memory for packed / padded buffers; never returns null (aborts).
/// Blocks freed on a thread are kept (up to 8 blocks, 1 GiB) and handed out again for the
/// same size, so a kernel's per-call scratch costs no fresh pages after its first call.
void* tune_rt_alloc(int64_t bytes);
/// Frees a block of tune_rt_alloc (on any thread); null is ignored.
void tune_rt_free(void* ptr);
}
