// HostBuilder: kernels for this CPU through LLVM (object code linked later by ORC LLJIT).
#pragma once

#include "codegen/cpu/llvm_codegen.h"
#include "measure/builder.h"

namespace tune::measure {

/// Host kernels: the lowered function is compiled by codegen::CompileForHost.
class HostBuilder final : public Builder {
 public:
  explicit HostBuilder(codegen::CodegenOptions options = {}, int threads = 1)
      : Builder(threads), options_(options) {}

 protected:
  /// LLVM cannot be cancelled: the deadline is ignored.
  BuildResult Compile(const codegen::LoweredFunc& func, const BuildDeadline& deadline) const override;

 private:
  codegen::CodegenOptions options_;
};

}  // namespace tune::measure
