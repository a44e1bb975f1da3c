// The CostModel interface: scores configs of one space; implementations live in costmodel/.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "search/space.h"

namespace tune::search {

/// Predicts a score per config (higher = expected faster). Implementations featurize configs
/// however they like (the tuner's adapter lowers each config to its loop AST). Not
/// thread-safe.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Trains on measured configs; `costs` are seconds (+inf for failures), same length.
  virtual absl::Status Fit(const std::vector<Config>& configs, const std::vector<double>& costs) = 0;
  /// One score per config; when `variance` is not null it receives one non-negative value
  /// per config (0 where the model has no uncertainty estimate).
  virtual std::vector<double> Predict(const std::vector<Config>& configs,
                                      std::vector<double>* variance = nullptr) = 0;
};

}  // namespace tune::search
