// Builder: instantiates a template config, lowers it and compiles it to host object code.
#pragma once

#include <string>
#include <vector>

#include "codegen/llvm_codegen.h"
#include "codegen/template.h"
#include "measure/runner.h"
#include "search/space.h"

namespace tune::measure {

/// Turns configs into BuildResults. An invalid config becomes kInvalidConfig and a failure
/// of lowering, LLVM code generation or NVRTC kCompileError; nothing here runs generated
/// code. Thread-safe.
class Builder {
 public:
  /// Host kernels through LLVM.
  explicit Builder(codegen::CodegenOptions options = {}, int threads = 1)
      : options_(options), threads_(threads < 1 ? 1 : threads) {}
  /// CUDA kernels (templates created for Backend::kCuda): CUDA C compiled by NVRTC to a cubin
  /// for `arch` ("sm_90"); the CUDA source is kept in CompiledKernel::ir.
  static Builder ForCuda(std::string arch, int threads) {
    Builder b({}, threads);
    b.cuda_arch_ = std::move(arch);
    return b;
  }

  BuildResult Build(const codegen::Template& tmpl, const search::Config& config) const;
  /// Builds every config, up to `threads` at a time; results in input order.
  std::vector<BuildResult> BuildAll(const codegen::Template& tmpl,
                                    const std::vector<search::Config>& configs) const;

  /// The exported symbol of a config's kernel: stable, derived from the template and index.
  static std::string KernelName(const codegen::Template& tmpl, const search::Config& config);

 private:
  BuildResult BuildCuda(const codegen::LoweredFunc& func) const;

  codegen::CodegenOptions options_;
  int threads_;
  std::string cuda_arch_;  // empty: host kernels
};

}  // namespace tune::measure
