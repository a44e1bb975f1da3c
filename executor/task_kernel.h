// TaskKernel: a tuned node's generated kernel (a Workload under one config), loaded and callable.
#pragma once

namespace tune::executor {

/// A compiled and loaded kernel of one (workload, config). Its arguments follow the kernel ABI
/// (codegen/ir/kernel.h): one fp32 buffer per Workload::Inputs() entry, then the output, each
/// 64-byte aligned and of exactly the workload's element count.
class TaskKernel {
 public:
  virtual ~TaskKernel() = default;
  /// Runs the kernel on `args` (inputs in Workload::Inputs() order, then the output). Safe to
  /// call from one thread at a time per plan; allocates only what the generated code does
  /// (its packed or padded scratch buffers).
  virtual void Run(float* const* args) const = 0;
};

}  // namespace tune::executor
