// The SearchStrategy interface: proposes batches of configs and learns from their results.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "search/cost_model.h"
#include "search/space.h"

namespace tune::search {

/// The outcome of one measured config as a strategy sees it. `cost` is seconds per call
/// (lower is better); a failed measurement has ok = false and cost = +infinity.
struct MeasuredConfig {
  Config config;
  double cost = std::numeric_limits<double>::infinity();
  bool ok = false;
};

struct StrategyOptions;  // every strategy's settings: search/strategy.h

/// Proposes configs to measure. One instance serves one task's space and is not
/// thread-safe. The space must outlive the strategy.
class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;

  /// Creates the strategy registered as `name` (StrategyRegistry::Global: "random", "grid",
  /// "sa", "evolutionary", "bo", "bo_ei", "bo_pi", "bo_ucb", "bo_multi", "bandit", "auto") from its
  /// groups of `options`. `space` must not be null; it is not owned and must outlive the
  /// result. InvalidArgument for an unknown name (the message lists the registered names) or
  /// options that make no strategy (a bandit's arms).
  static absl::StatusOr<std::unique_ptr<SearchStrategy>> Create(const std::string& name,
                                                               const ConfigSpace* space,
                                                               const StrategyOptions& options);

  virtual std::string name() const = 0;
  /// Up to `batch` valid configs that were never proposed nor reported before. Fewer (or
  /// none) means the strategy has exhausted the space or could not find new valid points.
  virtual std::vector<Config> Propose(int batch) = 0;
  /// Reports measured results (proposed by this strategy or loaded from a record database on
  /// resume); reported configs are never proposed again.
  virtual void Update(const std::vector<MeasuredConfig>& results) = 0;
  /// Gives the strategy a cost model to rank candidates with; not owned, may be null.
  virtual void SetCostModel(CostModel* model) { cost_model_ = model; }

 protected:
  CostModel* cost_model_ = nullptr;
};

}  // namespace tune::search
