// ExecutionPlan: a graph made ready to run once: kernels loaded, memory planned, pointers bound.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/backend.h"
#include "executor/memory_plan.h"
#include "executor/task_kernels.h"
#include "graph/graph.h"

namespace tune::executor {

/// A graph input or output as the caller passes it: row-major data of `dtype` and `shape`.
struct TensorDesc {
  std::string name;
  graph::DType dtype = graph::DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t NumElements() const;
  int64_t Bytes() const;
};

/// One buffer of the arena: a graph input or a tensor a step writes (views share their
/// source's buffer and are not listed), where it lies and when it is live.
struct PlannedBuffer {
  std::string name;    // the tensor that owns the buffer
  int64_t offset = 0;  // bytes from the arena's start
  int64_t bytes = 0;   // the tensor's size (unrounded)
  int first = 0;       // BufferLifetime: written by step `first` (0 for graph inputs) ...
  int last = 0;        // ... last read by step `last` (steps() for graph outputs)
};

/// The plan's memory, bytes.
struct MemoryStats {
  int64_t arena_bytes = 0;     // the one arena every buffer lies in
  int64_t tensor_bytes = 0;    // the sum of the buffers' sizes (64-byte rounded): no reuse
  int64_t constant_bytes = 0;  // constants the steps read, left in the graph's storage
  int views = 0;               // view nodes (Reshape, Flatten, ...) sharing their input's buffer
};

/// What one step of a plan runs, for profiles: the graph node, its op, and for a tuned
/// kernel its workload's label (empty for a built-in).
struct StepInfo {
  std::string node;
  std::string op;
  std::string workload;
};

/// A model prepared for repeated runs on one backend. Create makes every kernel (built-in
/// kernels first, so an op without one fails before anything is compiled; then the tuned
/// kernels, one per distinct (workload, config)), plans the memory (every graph input and
/// intermediate tensor gets an offset in one arena from its live interval, greedy best-fit by
/// size; view nodes share their input's buffer: no kernel writes in place, so the input stays
/// valid for its other readers), and binds every step's pointers. Constants stay in the
/// graph's storage (one a tuned kernel reads is copied once into 64-byte aligned memory when it
/// is not aligned). Nodes whose outputs are all constants (folded at import) do not run.
/// Run allocates nothing. Not thread-safe: one Run at a time.
class ExecutionPlan {
 public:
  /// InvalidArgument/Unimplemented naming the node for a node without a kernel or whose
  /// tensors do not fit it; `choices` must cover every tuned workload of `graph`
  /// (ChooseTaskKernels); errors of compiling a tuned kernel as the backend returns them.
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Create(graph::Graph graph,
                                                               std::shared_ptr<const Backend> backend,
                                                               const std::vector<TaskKernelChoice>& choices);
  ~ExecutionPlan();

  /// The graph's inputs and outputs in the graph's order.
  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }

  /// Runs the model: `inputs[i]` holds inputs()[i]'s bytes (host memory), `outputs[i]` gets
  /// outputs()[i]'s. InvalidArgument when the counts differ from inputs()/outputs() or a
  /// pointer is null. Allocates nothing (generated kernels may take their scratch buffers).
  absl::Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs);
  /// Run, timing each step: `step_seconds` gets steps() entries, step i's wall time in seconds
  /// (on a device backend each step is synchronized before it is timed, so the run is slower).
  absl::Status RunProfiled(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                           std::vector<double>* step_seconds);

  const MemoryStats& memory() const { return memory_; }
  /// The arena's buffers, in the order they were given to PlanMemory.
  const std::vector<PlannedBuffer>& buffers() const { return buffers_; }
  /// Steps (kernel calls) per Run.
  int steps() const;
  /// The node step `step` (0 <= step < steps()) runs.
  const StepInfo& step_info(int step) const;
  /// Distinct tuned kernels compiled and loaded.
  int task_kernels() const { return static_cast<int>(task_kernels_.size()); }
  const graph::Graph& graph() const { return graph_; }

 private:
  struct Step;
  ExecutionPlan() = default;
  absl::Status RunSteps(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                        std::vector<double>* step_seconds);

  graph::Graph graph_;
  std::shared_ptr<const Backend> backend_;
  std::shared_ptr<void> arena_;
  std::vector<std::shared_ptr<void>> aligned_constants_;
  std::vector<std::unique_ptr<OpKernel>> op_kernels_;
  std::vector<std::unique_ptr<TaskKernel>> task_kernels_;
  std::vector<Step> steps_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::vector<void*> input_ptrs_, output_ptrs_;
  std::vector<PlannedBuffer> buffers_;
  MemoryStats memory_;
};

}  // namespace tune::executor
