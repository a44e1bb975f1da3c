// SearchStrategy::Create and the text form of StrategyOptions, both served by StrategyRegistry.
#include "search/strategy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "search/strategy_registry.h"

namespace tune::search {

absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key, const std::string& value) {
  const StrategyRegistry& registry = StrategyRegistry::Global();
  if (const StrategyOptionKey* k = registry.FindOption(key)) return k->set(options, value);
  return absl::InvalidArgumentError(absl::StrCat("unknown strategy option '", key, "' (known: ",
                                                 absl::StrJoin(registry.OptionNames(), ", "), ")"));
}

absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key_equals_value) {
  const size_t eq = key_equals_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy option '", key_equals_value, "': expected KEY=VALUE"));
  }
  return SetStrategyOption(options, key_equals_value.substr(0, eq), key_equals_value.substr(eq + 1));
}

std::vector<std::string> StrategyOptionNames() { return StrategyRegistry::Global().OptionNames(); }

absl::StatusOr<std::unique_ptr<SearchStrategy>> SearchStrategy::Create(
    const std::string& name, const ConfigSpace* space, const StrategyOptions& options) {
  TUNE_CHECK(space != nullptr) << "SearchStrategy::Create(\"" << name << "\") without a space";
  const StrategyRegistry& registry = StrategyRegistry::Global();
  if (const StrategyEntry* entry = registry.Find(name)) return entry->create(space, options);
  return absl::InvalidArgumentError(absl::StrCat("unknown search strategy '", name, "' (known: ",
                                                 absl::StrJoin(registry.Names(), ", "), ")"));
}

}  // namespace tune::search
