// Builder: instantiates a template config, lowers it and compiles it for one kind of device.
#pragma once

#include <string>
#include <vector>

#include "codegen/ir/ir.h"
#include "codegen/ir/template.h"
#include "measure/runner.h"
#include "search/space.h"

namespace tune::measure {

/// Turns configs into BuildResults. An invalid config becomes kInvalidConfig and a failure
/// of lowering or code generation kCompileError; nothing here runs generated code.
/// Implementations (HostBuilder: LLVM for this CPU; CudaBuilder: NVRTC for a GPU) differ only
/// in how a lowered function is compiled; TaskFactory picks one per target kind. Thread-safe.
class Builder {
 public:
  explicit Builder(int threads) : threads_(threads < 1 ? 1 : threads) {}
  virtual ~Builder() = default;

  BuildResult Build(const codegen::Template& tmpl, const search::Config& config) const;
  /// Builds every config, up to `threads` at a time; results in input order.
  std::vector<BuildResult> BuildAll(const codegen::Template& tmpl,
                                    const std::vector<search::Config>& configs) const;

  /// The exported symbol of a config's kernel: stable, derived from the template and index.
  static std::string KernelName(const codegen::Template& tmpl, const search::Config& config);

 protected:
  /// Compiles a lowered function. `status` kInvalidConfig when the function cannot be
  /// expressed for the device, kCompileError when the compiler fails; `build_s` is set by Build.
  virtual BuildResult Compile(const codegen::LoweredFunc& func) const = 0;

 private:
  int threads_;
};

}  // namespace tune::measure
