// KernelTunerCache: a brute-forced GPU search space recorded by Kernel Tuner (cache format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::measure {

/// A fully measured space. Every configuration is a choice of one value per parameter; the
/// cache maps the configurations that satisfy the space's constraints to a time (ms) or a
/// failure. Configurations absent from the cache are infeasible, not unmeasured.
struct KernelTunerCache {
  /// Times at or above this (ms; 1e15 ms is 31,700 years) are failure markers, not
  /// measurements: older Kernel Tuner caches record a failed configuration as time 1e20 (or
  /// the largest double) instead of a failure string. Such an entry is loaded as failed with
  /// failure "FailureMarkerTime(<time> ms)".
  static constexpr double kFailureMarkerMs = 1e15;

  struct Entry {
    std::vector<int> value_index;  // per parameter, index into param_values[p]
    bool ok = false;               // false: a failure string, or a time >= kFailureMarkerMs
    double time_ms = 0;            // mean kernel time when ok
    std::vector<double> times_ms;  // the individual runs when recorded
    std::string failure;           // the failure string when not ok
  };
  std::string device_name, kernel_name, path;
  std::vector<std::string> param_names;            // tune_params_keys order
  std::vector<std::vector<int64_t>> param_values;  // allowed values per parameter
  std::vector<Entry> entries;
  std::unordered_map<std::string, size_t> by_key;  // Key(value_index) -> entry index

  /// Reads a .json or .json.gz cache file. InvalidArgument naming the file and the problem for
  /// malformed or truncated files (bad gzip, bad JSON, missing fields, keys that don't match
  /// the parameters, values outside tune_params, numbers beyond the double range, times that
  /// are not positive milliseconds) and for JSON text longer than `max_text_bytes` (a file
  /// that big, or a gzip file that inflates beyond it: inflating stops there); NotFound when
  /// it cannot be read.
  static absl::StatusOr<KernelTunerCache> Load(const std::string& path, size_t max_text_bytes);
  /// Load with DefaultMaxTextBytes().
  static absl::StatusOr<KernelTunerCache> Load(const std::string& path);
  /// The same for a file's bytes (gzip or plain JSON); `path` names it in messages.
  static absl::StatusOr<KernelTunerCache> Parse(const std::string& bytes, const std::string& path,
                                                size_t max_text_bytes);
  /// The longest JSON text this machine parses: 1/16 of its physical memory (the parsed
  /// document takes about 16 times its text), at least 64 MiB and at most 4 GiB.
  static size_t DefaultMaxTextBytes();
  /// "v0,v1,..." of the parameter values (Kernel Tuner's key format).
  std::string Key(const std::vector<int>& value_index) const;
  /// The entry of a configuration, or null when it is infeasible (absent).
  const Entry* Find(const std::vector<int>& value_index) const;
  /// Fastest ok time (ms).
  double BestTimeMs() const;
};

}  // namespace tune::measure
