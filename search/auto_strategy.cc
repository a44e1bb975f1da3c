// AutoStrategy: "auto" creates the strategy chosen as the default.
#include "search/auto_strategy.h"

#include <memory>

#include "search/search_strategy.h"
#include "search/strategy_registry.h"

namespace tune::search {

const char* AutoStrategy::Choice() { return "bo_ucb"; }

const char* AutoStrategy::ChoiceWithModel() { return "bandit"; }

std::string AutoStrategy::Resolve(const std::string& strategy, bool with_model) {
  if (strategy != "auto") return strategy;
  return with_model ? ChoiceWithModel() : Choice();
}

void AutoStrategy::Register(StrategyRegistry& registry) {
  registry.Register({"auto",
                     [](const ConfigSpace* space, const StrategyOptions& options)
                         -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
                       return SearchStrategy::Create(Choice(), space, options);
                     },
                     {}});
}

}  // namespace tune::search
