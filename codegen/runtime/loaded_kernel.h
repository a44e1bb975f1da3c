// LoadedKernel: a CompiledKernel for the host CPU linked into this process by ORC LLJIT.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "codegen/ir/kernel.h"

namespace tune::codegen {

/// A CompiledKernel linked into this process by an ORC LLJIT instance. The function pointer
/// is valid while the LoadedKernel lives. Loading is thread-safe; calling the kernel from
/// several threads at once is safe (kernels keep no state).
class LoadedKernel {
 public:
  ~LoadedKernel();
  /// Links `kernel` into a fresh JIT dylib; Internal with LLVM's message on failure.
  static absl::StatusOr<std::unique_ptr<LoadedKernel>> Load(const CompiledKernel& kernel);
  KernelFn fn() const { return fn_; }

 private:
  struct Impl;
  LoadedKernel() = default;
  std::unique_ptr<Impl> impl_;
  KernelFn fn_ = nullptr;
};

}  // namespace tune::codegen
