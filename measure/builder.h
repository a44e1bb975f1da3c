// Builder: instantiates a template config, lowers it and compiles it for one kind of device.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "codegen/ir/ir.h"
#include "codegen/ir/template.h"
#include "measure/runner.h"
#include "search/space.h"

namespace tune::measure {

/// How long one kernel's build may take, counted from the start of its Build.
struct BuildDeadline {
  double timeout_s = 0;  // 0 = none
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::time_point::max();  // max() = none
};

/// Turns configs into BuildResults. An invalid config becomes kInvalidConfig and a failure
/// of lowering or code generation kCompileError; nothing here runs generated code.
/// Implementations (HostBuilder: LLVM for this CPU; CudaBuilder: NVRTC for a GPU) differ only
/// in how a lowered function is compiled; TaskFactory picks one per target kind. Thread-safe.
class Builder {
 public:
  explicit Builder(int threads) : threads_(threads < 1 ? 1 : threads) {}
  virtual ~Builder() = default;

  /// `timeout_s` > 0: a build still running after that many seconds is cancelled where the
  /// compiler can be (CudaBuilder) and becomes kTimeout with BuildTimedOutMessage; 0 = none.
  BuildResult Build(const codegen::Template& tmpl, const search::Config& config, double timeout_s = 0) const;
  /// Builds every config, up to `threads` at a time; results in input order. `timeout_s` as
  /// for Build, for each kernel from the start of its own build (not of the batch).
  std::vector<BuildResult> BuildAll(const codegen::Template& tmpl, const std::vector<search::Config>& configs,
                                    double timeout_s = 0) const;

  /// The exported symbol of a config's kernel: stable, derived from the template and index.
  static std::string KernelName(const codegen::Template& tmpl, const search::Config& config);

 protected:
  /// Compiles a lowered function. `status` kInvalidConfig when the function cannot be
  /// expressed for the device, kCompileError when the compiler fails, kTimeout with
  /// BuildTimedOutMessage(deadline.timeout_s) when it cancelled the compile at `deadline`
  /// (implementations whose compiler cannot be cancelled ignore it); `build_s` is set by Build.
  virtual BuildResult Compile(const codegen::LoweredFunc& func, const BuildDeadline& deadline) const = 0;

 private:
  int threads_;
};

}  // namespace tune::measure
