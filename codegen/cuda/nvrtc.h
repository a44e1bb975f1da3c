// CUDA C source to cubin for one exact GPU architecture with NVRTC, and the resources ptxas reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tune::codegen {

/// What ptxas allocated for one kernel, from its verbose report. -1 = unknown (not reported).
struct CudaResources {
  int registers = -1;              // 32-bit registers per thread
  int64_t shared_bytes = -1;       // static shared memory per block, bytes (dynamic not included)
  int64_t spill_store_bytes = -1;  // bytes stored to local memory by register spills, per thread
  int64_t spill_load_bytes = -1;   // bytes loaded back from those spills, per thread
  int64_t stack_bytes = -1;        // stack frame per thread, bytes, callees included
};

/// The product of a CUDA build: an ELF cubin (SASS for exactly the requested arch; it loads
/// on devices of that compute capability only) and what the compiler said.
struct CompiledCuda {
  std::string cubin;  // ELF bytes, as cuModuleLoadData takes them
  std::string log;    // the NVRTC log, trimmed: warnings and the ptxas report
  /// Per kernel (entry function) by its symbol name: the extern "C" name, else the mangled one.
  std::map<std::string, CudaResources> kernels;
  /// The one kernel's resources; with several kernels, the maximum of each field over them
  /// (what the most demanding kernel needs); all -1 when ptxas reported none.
  CudaResources resources;
};

/// Compiles `source` (one translation unit; kernels declared extern "C" __global__ keep their
/// names) for `arch`, a real architecture such as "sm_90" or "sm_90a" (never "compute_XX":
/// the result is SASS, not PTX), with full device optimization (ptxas -O3) and ptxas's
/// verbose resource report; NVRTC's cache of earlier compiles is bypassed, so ptxas runs and
/// reports every time. `extra_options` go to NVRTC as they are ("--use_fast_math",
/// "--maxrregcount=64", "-lineinfo", "-DTILE=16", ...).
/// InvalidArgument with the trimmed NVRTC log for a compile error, an unknown or unsupported
/// arch, or a bad option; Internal for NVRTC's own failures; Unimplemented when this build has
/// no NVRTC. Thread-safe: each call has its own NVRTC program, and NVRTC allows concurrent
/// calls on distinct programs.
/// `deadline`: when the compile is still running at that time NVRTC cancels it (its flow
/// callback, checked at points NVRTC chooses, so it ends soon after rather than exactly then)
/// and the result is DeadlineExceeded; time_point::max() = none. Where NVRTC cannot cancel
/// (NvrtcCanCancel false) the deadline is ignored and the compile runs to its end.
absl::StatusOr<CompiledCuda> CompileCuda(
    const std::string& source, const std::string& arch, const std::vector<std::string>& extra_options = {},
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

/// True when this build has NVRTC (TUNE_WITH_CUDA); CompileCuda is Unimplemented otherwise.
bool NvrtcAvailable();

/// True when the NVRTC library loaded at run time can cancel a compile (it has
/// nvrtcSetFlowCallback: CUDA 12.8 and later), so CompileCuda keeps a deadline. Looked up once.
bool NvrtcCanCancel();

/// NVRTC's version as "13.0"; empty without NVRTC.
std::string NvrtcVersion();

/// The per-kernel resources in a ptxas verbose report (`--ptxas-options=-v`), which NVRTC 13
/// appends to its log, one block per entry function:
///   ptxas info    : Compiling entry function 'saxpy' for 'sm_90'
///   ptxas info    : Function properties for saxpy
///   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
///   ptxas info    : Used 10 registers, used 0 barriers, 4096 bytes smem
/// A kernel without "N bytes smem" has none (shared_bytes 0); "N bytes cumulative stack size"
/// (stack of the kernel and its non-inlined callees), where printed, is the stack size.
/// Blocks of non-entry (device) functions are skipped. Lines it does not know are ignored.
std::map<std::string, CudaResources> ParsePtxasReport(absl::string_view log);

}  // namespace tune::codegen
