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
/// of lowering or LLVM code generation kCompileError; nothing here runs generated code.
/// Thread-safe.
class Builder {
 public:
  explicit Builder(codegen::CodegenOptions options = {}, int threads = 1)
      : options_(options), threads_(threads < 1 ? 1 : threads) {}

  BuildResult Build(const codegen::Template& tmpl, const search::Config& config) const;
  /// Builds every config, up to `threads` at a time; results in input order.
  std::vector<BuildResult> BuildAll(const codegen::Template& tmpl,
                                    const std::vector<search::Config>& configs) const;

  /// The exported symbol of a config's kernel: stable, derived from the template and index.
  static std::string KernelName(const codegen::Template& tmpl, const search::Config& config);

 private:
  codegen::CodegenOptions options_;
  int threads_;
};

}  // namespace tune::measure
