// ReplaySpace: a recorded Kernel Tuner space as a configuration space whose measurements are look-ups.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/kernel_tuner_cache.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::measure {

/// The search space of a recorded cache: one choice knob per Kernel Tuner parameter, in
/// `tune_params_keys` order, whose options are that parameter's values in `tune_params` order
/// (so a Config's indices are the cache's value indices), plus one constraint, "recorded", that
/// holds iff the configuration is in the cache. Unrecorded configurations violate the kernel's
/// own constraints: they are infeasible, never proposed and never evaluated. Recorded failures
/// (compile/runtime) are feasible: proposing one costs an evaluation and yields a failure.
///
/// Immutable once created; const methods are safe to call from several threads. Not copyable
/// or movable (the constraint refers to the object).
class ReplaySpace {
 public:
  /// InvalidArgument (naming the file) when the cache has no successful configuration or its
  /// space has 2^63 or more points.
  static absl::StatusOr<std::unique_ptr<ReplaySpace>> Create(KernelTunerCache cache);
  ReplaySpace(const ReplaySpace&) = delete;
  ReplaySpace& operator=(const ReplaySpace&) = delete;

  const search::ConfigSpace& space() const { return space_; }
  const KernelTunerCache& cache() const { return cache_; }
  /// The recorded entry of `config`, or null when it is infeasible (or out of range).
  const KernelTunerCache::Entry* Find(const search::Config& config) const;
  /// The replayed measurement of a recorded config: ok with cost = time_ms / 1000 (seconds),
  /// or ok = false with cost = +inf for a recorded failure. Aborts on an unrecorded config
  /// (callers check Find or space().IsValid first).
  search::MeasuredConfig Measure(const search::Config& config) const;

  /// Recorded configs (ok + failed): the population random search draws from.
  size_t recorded() const { return sorted_times_ms_.size(); }
  size_t failed() const { return failed_; }
  /// The fastest recorded time (ms), > 0.
  double optimum_ms() const { return sorted_times_ms_.front(); }
  /// Every recorded config's time (ms), ascending, failures as +inf at the end.
  const std::vector<double>& sorted_times_ms() const { return sorted_times_ms_; }

 private:
  explicit ReplaySpace(KernelTunerCache cache);

  KernelTunerCache cache_;
  search::ConfigSpace space_;
  std::unordered_map<uint64_t, uint32_t> entry_of_index_;  // ConfigSpace::ToIndex -> entry
  std::vector<double> sorted_times_ms_;
  size_t failed_ = 0;
};

}  // namespace tune::measure
