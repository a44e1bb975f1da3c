// GridStrategy implementation: an index cursor over the space plus a visited set.
#include "search/grid_strategy.h"

#include <memory>
#include <utility>

#include "base/check.h"
#include "search/strategy_registry.h"

namespace tune::search {

void GridStrategy::Register(StrategyRegistry& registry) {
  registry.Register({"grid",
                     [](const ConfigSpace* space, const StrategyOptions& /*options*/) {
                       return std::unique_ptr<SearchStrategy>(new GridStrategy(space));
                     },
                     {}});
}

GridStrategy::GridStrategy(const ConfigSpace* space) : space_(space) {
  TUNE_CHECK(space_ != nullptr) << "GridStrategy needs a space";
}

std::vector<Config> GridStrategy::Propose(int batch) {
  std::vector<Config> out;
  const uint64_t size = space_->Size();
  while (static_cast<int>(out.size()) < batch && next_index_ < size) {
    Config config = space_->FromIndex(next_index_++);
    if (!space_->IsValid(config)) continue;
    if (!visited_.insert(config).second) continue;
    out.push_back(std::move(config));
  }
  return out;
}

void GridStrategy::Update(const std::vector<MeasuredConfig>& results) {
  for (const MeasuredConfig& r : results) visited_.insert(r.config);
}

}  // namespace tune::search
