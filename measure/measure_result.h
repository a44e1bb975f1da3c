// MeasureResult and MeasureProtocol: what one measurement of one candidate produced, and how.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::measure {

enum class MeasureStatus {
  kOk,
  kInvalidConfig,  // rejected by the space's constraints or the template
  kCompileError,   // lowering, verification or code generation failed
  kRuntimeError,   // the kernel crashed (signal) or its process failed
  kTimeout,        // the kernel did not finish within the protocol's timeout, or its build
                   // within build_timeout_s (message "build timed out after N s")
  kWrongResult,    // the output differs from the reference
};

/// "ok", "invalid_config", "compile_error", "runtime_error", "timeout", "wrong_result".
std::string StatusName(MeasureStatus status);
absl::StatusOr<MeasureStatus> ParseStatusName(const std::string& name);

/// How a kernel is timed. One sample = `number` back-to-back calls, `number` grown until a
/// sample lasts at least `min_repeat_ms`; `repeats` samples are kept after `warmup` calls.
/// With `flush_cache`, a buffer larger than the last-level cache is written before each
/// sample (and that time is not counted).
struct MeasureProtocol {
  int warmup = 1;
  int repeats = 5;
  double min_repeat_ms = 20.0;
  bool flush_cache = false;
  double timeout_s = 10.0;  // whole child process: load + check + timing (interleaved: per step)
  double rtol = 1e-3;       // relative tolerance of the correctness check
  double atol = 1e-4;       // absolute tolerance of the correctness check
  /// When > 0: a kernel whose first warm call (the call after the checked first one, which
  /// runs cold: it packs a prepack kernel's weight, touches fresh scratch memory, loads the
  /// code) takes longer than this many seconds is not timed further; its record keeps that
  /// call as its only sample (number = 1) and says so in its message (CutOffMessage). Saves
  /// the budget on candidates far slower than the best known. The timed call is the first
  /// of the `warmup` calls.
  double cutoff_s = 0;
  /// When > 0: a kernel whose build (code generation and compilation) is still running after
  /// this many seconds is cancelled and recorded as kTimeout with the message "build timed out
  /// after N s" (BuildTimedOutMessage). CUDA builds only (NVRTC cancels; LLVM builds cannot be
  /// cancelled and ignore it). 0 = none. The default, 15 s, is TVM LocalBuilder's: NVRTC
  /// builds of the CUDA templates take about a second, and the rare one that runs for 25-40 s
  /// would hold back its whole batch.
  double build_timeout_s = kDefaultBuildTimeoutS;
  static constexpr double kDefaultBuildTimeoutS = 15.0;
  /// When set, a batch's kernels are timed in one process with their samples interleaved
  /// (round r times every kernel once, in an order rotated by r), so that a host whose speed
  /// drifts over seconds slows them alike and their medians rank them fairly; each sample is
  /// then preceded by one untimed call of its kernel (then the flush, with flush_cache), as
  /// the kernels evict each other from the caches. timeout_s then holds for each step (a
  /// kernel's load, check and calibration; a sample). LocalRunner only (a CUDA batch already runs in one
  /// worker process). The tuner's finalists are always measured this way.
  bool interleave = false;

  std::string ToJson() const;
  static absl::StatusOr<MeasureProtocol> FromJson(const std::string& text);
};

/// "build timed out after N s": the message of a build cancelled at `timeout_s`.
std::string BuildTimedOutMessage(double timeout_s);

/// "timing cut off after a warm call (W s > C s; the first call F s)": the note of an ok
/// record whose timing MeasureProtocol::cutoff_s ended.
std::string CutOffMessage(double first_s, double warm_s, double cutoff_s);

/// The outcome of measuring one candidate.
struct MeasureResult {
  MeasureStatus status = MeasureStatus::kRuntimeError;
  std::string message;           // what went wrong; when ok, empty or a note (timing cut off)
  std::vector<double> costs_s;   // per-call seconds of each sample (raw, in order)
  int number = 0;                // calls per sample
  double build_s = 0;            // seconds spent generating and compiling the kernel
  double wall_s = 0;             // seconds the whole measurement took

  bool ok() const { return status == MeasureStatus::kOk; }
  /// Median / mean of costs_s; +infinity when not ok or empty.
  double Median() const;
  double Mean() const;
};

}  // namespace tune::measure
