// The LLVM backend: lowers a LoweredFunc to LLVM IR, optimizes it and emits host object code.
#pragma once

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

/// The host CPU as LLVM names it (e.g. "znver3") and its enabled features ("+avx2,+fma,...").
std::string HostCpuName();

}  // namespace tune::codegen
