// Templates: per-operator maps from (workload, config) to a scheduled kernel, with their spaces.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/schedule.h"
#include "codegen/ir/workload.h"
#include "search/space.h"

namespace tune::codegen {

/// Which code generator a template's kernels are for: the host CPU through LLVM, or an
/// NVIDIA GPU through CUDA C and NVRTC.
enum class Backend { kLlvm, kCuda };

/// A kernel's argument buffers, in argument order: the two operands (for conv2d the data and
/// the weight), the bias (null without one) and the output; `args()` lists the non-null ones
/// for Schedule::args.
struct ArgBuffers {
  Buffer input0, input1, bias, out;
  std::vector<Buffer> args() const;
};

/// The workload's fused epilogue on an output value `v`: + bias[channel] where `bias` is set,
/// then ReLU where the workload has it.
Expr ApplyEpilogue(const Workload& workload, Expr v, const Buffer& bias, const Expr& channel);

/// A kernel template bound to one workload. It owns the configuration space of that workload
/// (knob extents depend on the shapes) and instantiates any valid config into a schedule.
/// Const methods are thread-safe.
class Template {
 public:
  virtual ~Template() = default;

  /// "gemm" or "conv2d" ("cuda_gemm", ... on the GPU); with version() it forms the template
  /// part of a task key.
  virtual std::string name() const = 0;
  /// Bumped whenever the meaning of a config or the generated code changes, so records of
  /// older versions are never mixed with new ones.
  virtual int version() const = 0;
  const Workload& workload() const { return workload_; }
  const search::ConfigSpace& space() const { return space_; }

  /// The untuned baseline: plain loops in the definition's order, scalar code, one thread.
  /// Empty when this workload's space has no such config (a shape the template cannot tile,
  /// e.g. a prime extent on the GPU): use ValidDefaultConfig where that must be an error.
  virtual search::Config DefaultConfig() const = 0;
  /// DefaultConfig() when it is a valid config of space(); otherwise InvalidArgument as one
  /// line naming the workload, the template and the constraints that rule the shape out, e.g.
  /// "batch_matmul b12_m197_n197_k64: no valid configuration of the cuda_gemm template for
  /// this shape (constraint 'threads' rules out every configuration tried)".
  absl::StatusOr<search::Config> ValidDefaultConfig() const;
  /// `config` (a config of space()) with its loops shared out among the target's threads as
  /// DefaultConfig() shares the default's, where `config` runs every loop on the calling thread,
  /// the template knows of more than one thread and that form is valid; otherwise `config`
  /// itself (so always, here: templates without a parallel knob). How config transfer offers a
  /// serial config recorded at one thread count in parallel at another.
  virtual search::Config ParallelFormOf(const search::Config& config) const { return config; }
  /// Start points of a search: a few valid configs that the template's own analysis of the
  /// workload and the target expects to be fast (register tiles that fill the ISA's vector
  /// registers, loop orders that keep the reused operand in cache), none equal to
  /// DefaultConfig(). Derived from the shape and the target alone, never from records; a
  /// tuner measures them first where a task has no records of its own. Empty by default.
  virtual std::vector<search::Config> StartConfigs() const { return {}; }

  /// The scheduled kernel for `config`; InvalidArgument naming the failed constraint when
  /// the config is not valid in space().
  absl::StatusOr<Schedule> Instantiate(const search::Config& config) const;
  /// Instantiate() then Schedule::Lower(); the kernel is called `name`.
  absl::StatusOr<LoweredFunc> Lower(const search::Config& config, const std::string& name) const;

 protected:
  explicit Template(Workload workload) : workload_(std::move(workload)) {}
  /// Builds the schedule of a config already known to be valid.
  virtual Schedule Build(const search::Config& config) const = 0;
  /// The config choosing, for each named knob, the option equal to the given values; knobs
  /// not named keep option 0. Empty when a value is not an option.
  search::Config ConfigOf(const std::vector<std::pair<std::string, std::vector<int64_t>>>& values) const;
  /// The option of split knob `knob` with inner factor `inner` and outer factor `outer`, or
  /// where none has that outer factor (a tail: the inner levels may not exceed the extent),
  /// the one of the fewest outer iterations; empty when no option has that inner factor.
  std::vector<int64_t> SplitOption(const std::string& knob, int64_t outer, int64_t inner) const;
  /// For StartConfigs: ConfigOf(values), made canonical and put in its ParallelFormOf, appended
  /// to `out` where it is valid, not DefaultConfig() and not in `out` already.
  void AddStartConfig(const std::vector<std::pair<std::string, std::vector<int64_t>>>& values,
                      std::vector<search::Config>* out) const;

  /// Where `threads` > 1 and `config` runs every loop on the calling thread (knob "parallel"
  /// 0): `config` with "parallel" set to the first of `parallel_options` that the space keeps;
  /// otherwise (one thread, a parallel or empty config, or none kept) `config` itself. How a
  /// CPU template's default, and ParallelFormOf, use the target's threads when it knows more
  /// than one (its space then keeps only balanced parallel loops).
  search::Config ParallelDefault(search::Config config, int threads,
                                 const std::vector<int64_t>& parallel_options) const;

  /// The workload's argument buffers (Workload::Inputs(), then Workload::Output()).
  ArgBuffers MakeArgBuffers() const;

  /// The valid config with the highest `score` (first in index order on ties), skipping those
  /// it returns nullopt for: how GPU templates pick a default close to a textbook kernel.
  /// Knobs named in `held` stay at option 0 (another variant's knobs, say). Empty when there
  /// is none. Walks the space of the other knobs: for up to a few million points.
  search::Config BestScoring(const std::function<std::optional<int64_t>(const search::Config&)>& score,
                             const std::vector<std::string>& held = {}) const;

  Workload workload_;
  search::ConfigSpace space_;
};

}  // namespace tune::codegen
