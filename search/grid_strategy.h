// GridStrategy: walks the space in index order, proposing each valid config once.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

class StrategyRegistry;

/// Exhaustive search: indices 0..Size()-1 in order (first knob slowest), skipping invalid
/// configs and those already proposed or reported. Deterministic; ignores the seed and the
/// cost model.
class GridStrategy : public SearchStrategy {
 public:
  /// Registers "grid" with `registry`; it reads no option.
  static void Register(StrategyRegistry& registry);

  /// `space` is not owned and must outlive the strategy.
  explicit GridStrategy(const ConfigSpace* space);

  std::string name() const override { return "grid"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;

 private:
  const ConfigSpace* space_;
  uint64_t next_index_ = 0;
  std::unordered_set<Config, ConfigHash> visited_;
};

}  // namespace tune::search
