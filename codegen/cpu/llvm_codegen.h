// The LLVM backend: lowers a LoweredFunc to LLVM IR, optimizes it and emits host object code.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/kernel.h"

namespace tune::codegen {

struct CodegenOptions {
  int opt_level = 3;     // 0..3, LLVM's default pipelines
  bool keep_ir = false;  // fill CompiledKernel::ir with the optimized module text
};

/// Lowers `func` for the host CPU (its exact CPU name and features). Vectorized loops become
/// LLVM vector IR (contiguous loads/stores, broadcasts, gathers/scatters), unrolled loops are
/// emitted once per iteration, parallel loops are outlined and run on the runtime pool.
/// Thread-safe (each call has its own LLVM context). Internal with LLVM's message when the
/// module fails verification or code generation.
absl::StatusOr<CompiledKernel> CompileForHost(const LoweredFunc& func,
                                              const CodegenOptions& options = {});

/// Lowers `func` as CompileForHost does, but for the CPU `cpu` (an LLVM CPU name such as
/// "skylake-avx512" or "x86-64") of the host's architecture, with `features` ("+avx2,-avx512f";
/// comma-separated, each signed; empty: the CPU's own) on top of the CPU's defaults, so that
/// the object code runs on that CPU rather than on this one (e.g. kernels tuned on another
/// machine). InvalidArgument naming the CPU or feature when LLVM does not know it for the
/// host's architecture (no cross-architecture compiles); otherwise as CompileForHost.
absl::StatusOr<CompiledKernel> CompileForCpu(const LoweredFunc& func, const std::string& cpu,
                                             const std::string& features,
                                             const CodegenOptions& options = {});

/// The host CPU as LLVM names it (e.g. "znver3") and its enabled features ("+avx2,+fma,...").
std::string HostCpuName();

}  // namespace tune::codegen
