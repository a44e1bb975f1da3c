// The CostModel interface: scores configs of one space; implementations live in costmodel/.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "search/space.h"

namespace tune::search {

/// Predicts a score per config (higher = expected faster). Implementations featurize configs
/// however they like (the tuner's adapter lowers each config to its loop AST; replay spaces
/// use knob values). Not thread-safe.
///
/// Who trains it: the driver of the search (the tuning loop, the replay loop) calls Fit with
/// every result measured so far after each batch is committed, then the strategy's Update.
/// Strategies only call Predict.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// True once Fit has succeeded at least once; before that Predict returns zeros.
  virtual bool trained() const = 0;
  /// Trains on measured configs; `costs` are seconds (+inf for failures), same length.
  virtual absl::Status Fit(const std::vector<Config>& configs, const std::vector<double>& costs) = 0;
  /// One score per config; when `variance` is not null it receives one non-negative value
  /// per config (0 where the model has no uncertainty estimate).
  virtual std::vector<double> Predict(const std::vector<Config>& configs,
                                      std::vector<double>* variance = nullptr) = 0;
  /// A versioned, self-describing artifact (bytes) that Load restores exactly: the same
  /// predictions after Load as before Save.
  virtual absl::StatusOr<std::string> Save() const = 0;
  /// InvalidArgument for bytes that are not an artifact of this model kind or version.
  virtual absl::Status Load(const std::string& artifact) = 0;
};

}  // namespace tune::search
