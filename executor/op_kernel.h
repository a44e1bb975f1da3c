// OpKernel: one graph node's computation, prepared once for its tensors' shapes, run many times.
#pragma once

namespace tune::executor {

/// A node's kernel bound to the dtypes and static shapes of its tensors (everything that can
/// be computed from them, such as broadcast strides or a transposed constant weight, is
/// computed when it is created). Implementations: the built-in CPU kernels (builtin_ops.h).
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  /// Computes the node's outputs. `inputs[i]` is the data of the node's i-th input (nullptr
  /// for an absent optional input), `outputs[i]` that of its i-th output: row-major, of the
  /// dtypes and shapes the kernel was created for; outputs never alias inputs. Allocates
  /// nothing; may run its loops on the runtime thread pool. Not to be called concurrently.
  virtual void Run(const void* const* inputs, void* const* outputs) const = 0;
};

}  // namespace tune::executor
