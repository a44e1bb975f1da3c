// LocalRunner: measures CPU kernels on this host, each candidate in its own forked child process.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/kernel.h"
#include "measure/measure_result.h"
#include "measure/runner.h"

namespace tune::measure {

struct LocalRunnerOptions {
  MeasureProtocol protocol;
  int threads = 1;  // worker threads the kernel's parallel loops may use (>= 1)
};

/// Runs a local measurement of every ok build in a fresh ChildProcess (child_process.h: fork,
/// no exec, isolated): the child loads the kernel, checks one call against
/// TaskData::reference, times it per the protocol, re-checks the output after timing and
/// sends its result back over the pipe.
/// A kernel that crashes, hangs past protocol.timeout_s or computes a wrong result costs
/// only its own record; the parent process is never touched by kernel code.
///
/// With protocol.interleave, the ok builds of a batch share children instead (groups of up to
/// kMaxInterleaved): each kernel gets its own copies of the inputs, is checked and calibrated,
/// then the samples go round the group, so that host drift over seconds is shared by all. A
/// group's child is allowed timeout_s per step (a kernel's load; its check and calibration; one
/// sample); when it crashes, hangs or sends garbage, each of its kernels is measured again in
/// a child of its own, which pins the failure on the kernel that caused it; so is a kernel of
/// the group whose own result is not ok (another kernel may have written over its buffers). The
/// wall time of a group's child is split evenly among the results it gave (`wall_s`, else from
/// fork to reap of the kernel's own child).
///
/// Result fields: `costs_s` holds max(1, protocol.repeats) per-call seconds (elapsed / number,
/// steady_clock) of samples of `number` back-to-back calls, `number` doubled from 1 until
/// one sample lasts at least min_repeat_ms (capped at kMaxNumber). `build_s` is copied
/// from the build; `wall_s` covers fork to reap (a group's share, interleaved; zero for
/// builds that are not run).
/// Weights packed once (a kernel with prepack, see tune_rt_prepacked): the child forgets any
/// packs of its parent after writing the inputs, so the first (checked) call packs them and the
/// timed calls reuse the pack; an ok record then says so in `message` (kPackedOnceNote), or
/// says how often the timed calls packed again. Other ok records have an empty message.
///
/// Status mapping: build status != ok -> passed through, nothing run; loader failure ->
/// compile_error; output mismatch before or after timing -> wrong_result with AllClose's
/// explanation; killed by a signal -> runtime_error "kernel crashed: SIGSEGV (signal 11:
/// Segmentation fault)"; exit without a result -> runtime_error; no result within
/// timeout_s -> the child is SIGKILLed, timeout "kernel did not finish within Xs".
class LocalRunner : public Runner {
 public:
  /// Turns a CompiledKernel into a callable in the *child* process. Whatever the returned
  /// pointer needs must stay alive until the child exits (leaking is fine: it _exits).
  using KernelLoader =
      std::function<absl::StatusOr<codegen::KernelFn>(const codegen::CompiledKernel&)>;

  /// Upper bound on calls per sample while growing `number`.
  static constexpr int kMaxNumber = 1 << 24;
  /// Bytes written before each timed sample when protocol.flush_cache is set.
  static constexpr size_t kFlushBytes = size_t{64} << 20;
  /// protocol.interleave: at most this many kernels share a child, and together their copies
  /// of the inputs and outputs stay within kInterleaveMaxBytes (a larger batch is measured in
  /// several groups; a kernel over the limit alone).
  static constexpr size_t kMaxInterleaved = 16;
  static constexpr size_t kInterleaveMaxBytes = size_t{1} << 30;
  /// The message of an ok record whose kernel packed its weights in the first call only.
  static constexpr const char* kPackedOnceNote = "weights packed once, in the checked first call, outside the timed calls";

  /// `loader` empty means DefaultLoader().
  explicit LocalRunner(LocalRunnerOptions options, KernelLoader loader = nullptr);

  /// One result per build, in order; each ok build runs in its own child (or, interleaved, in
  /// its group's), one at a time.
  /// Thread-safe (no shared mutable state), but concurrent Runs disturb each other's
  /// timings. A parent with other threads forks a child holding only the calling thread;
  /// a loader that deadlocks on a lock copied mid-use surfaces as a timeout.
  std::vector<MeasureResult> Run(const TaskData& task,
                                 const std::vector<BuildResult>& builds) override;

  /// Runners with `threads` kernel threads, one per protocol.
  static RunnerFactory Factory(int threads);

  /// Links the object code with codegen::LoadedKernel::Load and leaks the LoadedKernel.
  static KernelLoader DefaultLoader();

  const LocalRunnerOptions& options() const { return options_; }

 private:
  // Measures `builds` in one child (one after the other, or interleaved per the protocol): a
  // result for each (LostResult's for all when the child gave no usable result).
  std::vector<MeasureResult> RunInChild(const TaskData& task, const std::vector<const BuildResult*>& builds) const;

  LocalRunnerOptions options_;
  KernelLoader loader_;
};

}  // namespace tune::measure
