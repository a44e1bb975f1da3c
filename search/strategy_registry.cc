// StrategyRegistry implementation: the built-in strategies and the typed option-key setters.
#include "search/strategy_registry.h"

#include <cstdint>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "search/auto_strategy.h"
#include "search/bandit_strategy.h"
#include "search/bayes_opt_strategy.h"
#include "base/check.h"
#include "search/evolutionary_strategy.h"
#include "search/grid_strategy.h"
#include "search/random_strategy.h"
#include "search/sa_strategy.h"

namespace tune::search {
namespace {

const StrategyOptionKey& SeedKey() {
  static const StrategyOptionKey key = {
      "seed", [](StrategyOptions& o, const std::string& v) {
        uint64_t x;
        if (!absl::SimpleAtoi(v, &x)) return BadOptionValue("seed", v, "an unsigned integer");
        o.seed = x;
        return absl::OkStatus();
      }};
  return key;
}

}  // namespace

const StrategyRegistry& StrategyRegistry::Global() {
  // Filled here rather than by static initializers in each strategy's .cc: tune_search is a
  // static library, and the linker drops the object files (and their initializers) that
  // nothing refers to.
  static const StrategyRegistry* const registry = [] {
    auto* r = new StrategyRegistry;
    RandomStrategy::Register(*r);
    GridStrategy::Register(*r);
    SaStrategy::Register(*r);
    EvolutionaryStrategy::Register(*r);
    BayesOptStrategy::Register(*r);
    BanditStrategy::Register(*r);
    AutoStrategy::Register(*r);
    return r;
  }();
  return *registry;
}

void StrategyRegistry::Register(StrategyEntry entry) {
  TUNE_CHECK(!entry.name.empty() && entry.create) << "incomplete strategy entry '" << entry.name << "'";
  TUNE_CHECK(Find(entry.name) == nullptr) << "strategy '" << entry.name << "' registered twice";
  entries_.push_back(std::move(entry));
}

const StrategyEntry* StrategyRegistry::Find(const std::string& name) const {
  for (const StrategyEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> StrategyRegistry::Names() const {
  std::vector<std::string> names;
  for (const StrategyEntry& e : entries_) names.push_back(e.name);
  return names;
}

const StrategyOptionKey* StrategyRegistry::FindOption(const std::string& key) const {
  if (key == SeedKey().name) return &SeedKey();
  for (const StrategyEntry& e : entries_) {
    for (const StrategyOptionKey& k : e.option_keys) {
      if (k.name == key) return &k;
    }
  }
  return nullptr;
}

std::vector<std::string> StrategyRegistry::OptionNames() const {
  std::vector<std::string> names = {SeedKey().name};
  for (const StrategyEntry& e : entries_) {
    for (const StrategyOptionKey& k : e.option_keys) {
      if (FindOption(k.name) == &k) names.push_back(k.name);  // the first of a shared key
    }
  }
  return names;
}

absl::Status BadOptionValue(const std::string& key, const std::string& value,
                            const std::string& want) {
  return absl::InvalidArgumentError(
      absl::StrCat("strategy option ", key, "=", value, ": expected ", want));
}

StrategyOptionKey IntOptionKey(const std::string& name,
                               std::function<int&(StrategyOptions&)> field, int lo, int hi) {
  return {name, [=](StrategyOptions& o, const std::string& v) {
            int x;
            if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
              return BadOptionValue(name, v, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
            }
            field(o) = x;
            return absl::OkStatus();
          }};
}

StrategyOptionKey RealOptionKey(const std::string& name,
                                std::function<double&(StrategyOptions&)> field, double lo,
                                double hi) {
  return {name, [=](StrategyOptions& o, const std::string& v) {
            double x;
            if (!absl::SimpleAtod(v, &x) || !(x >= lo && x <= hi)) {
              return BadOptionValue(name, v, absl::StrCat("a number in [", lo, ", ", hi, "]"));
            }
            field(o) = x;
            return absl::OkStatus();
          }};
}

}  // namespace tune::search
