// SearchStrategy::Create: the factory that maps strategy names to implementations.
#include "search/strategy.h"

#include <functional>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "search/bandit_strategy.h"
#include "search/bayes_opt_strategy.h"
#include "search/check.h"
#include "search/evolutionary_strategy.h"
#include "search/grid_strategy.h"
#include "search/random_strategy.h"
#include "search/sa_strategy.h"

namespace tune::search {
namespace {

/// One settable field: its name and a setter that parses, range-checks and assigns.
struct OptionField {
  const char* name;
  std::function<absl::Status(StrategyOptions&, const std::string&)> set;
};

absl::Status BadValue(const std::string& key, const std::string& value, const std::string& want) {
  return absl::InvalidArgumentError(
      absl::StrCat("strategy option ", key, "=", value, ": expected ", want));
}

OptionField IntField(const char* name, int StrategyOptions::*field, int lo, int hi) {
  return {name, [=](StrategyOptions& o, const std::string& v) {
            int x;
            if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
              return BadValue(name, v, absl::StrCat("an integer in [", lo, ", ", hi, "]"));
            }
            o.*field = x;
            return absl::OkStatus();
          }};
}

OptionField RealField(const char* name, double StrategyOptions::*field, double lo, double hi) {
  return {name, [=](StrategyOptions& o, const std::string& v) {
            double x;
            if (!absl::SimpleAtod(v, &x) || !(x >= lo && x <= hi)) {
              return BadValue(name, v, absl::StrCat("a number in [", lo, ", ", hi, "]"));
            }
            o.*field = x;
            return absl::OkStatus();
          }};
}

const std::vector<OptionField>& OptionFields() {
  constexpr int kBig = 1 << 30;
  constexpr double kHuge = 1e9;
  static const std::vector<OptionField> fields = {
      {"seed",
       [](StrategyOptions& o, const std::string& v) {
         uint64_t x;
         if (!absl::SimpleAtoi(v, &x)) return BadValue("seed", v, "an unsigned integer");
         o.seed = x;
         return absl::OkStatus();
       }},
      IntField("bo_initial_samples", &StrategyOptions::bo_initial_samples, 1, kBig),
      IntField("bo_candidates", &StrategyOptions::bo_candidates, 1, kBig),
      RealField("bo_xi", &StrategyOptions::bo_xi, 0, kHuge),
      RealField("bo_kappa", &StrategyOptions::bo_kappa, 0, kHuge),
      {"bandit_arms",
       [](StrategyOptions& o, const std::string& v) {
         std::vector<std::string> arms = absl::StrSplit(v, ',', absl::SkipEmpty());
         if (arms.empty()) return BadValue("bandit_arms", v, "a comma-separated list of strategies");
         for (const std::string& a : arms) {
           if (a == "bandit") return BadValue("bandit_arms", v, "strategies other than bandit");
         }
         o.bandit_arms = std::move(arms);
         return absl::OkStatus();
       }},
      RealField("eps_greedy", &StrategyOptions::eps_greedy, 0, 1),
      RealField("eps_stalled", &StrategyOptions::eps_stalled, 0, 1),
      IntField("explore_after", &StrategyOptions::explore_after, 1, kBig),
      RealField("measured_share", &StrategyOptions::measured_share, 0, 1),
      IntField("diversity_min_distance", &StrategyOptions::diversity_min_distance, 1, kBig),
      IntField("sa_chains", &StrategyOptions::sa_chains, 1, kBig),
      IntField("sa_steps", &StrategyOptions::sa_steps, 0, kBig),
      IntField("sa_early_stop", &StrategyOptions::sa_early_stop, 1, kBig),
      IntField("evo_population", &StrategyOptions::evo_population, 2, kBig),
      IntField("evo_generations", &StrategyOptions::evo_generations, 0, kBig),
      RealField("evo_crossover_prob", &StrategyOptions::evo_crossover_prob, 0, 1),
      RealField("evo_mutation_prob", &StrategyOptions::evo_mutation_prob, 0, 1),
  };
  return fields;
}

}  // namespace

absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key, const std::string& value) {
  for (const OptionField& f : OptionFields()) {
    if (key == f.name) return f.set(options, value);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown strategy option '", key, "' (known: ",
                                                 absl::StrJoin(StrategyOptionNames(), ", "), ")"));
}

absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key_equals_value) {
  const size_t eq = key_equals_value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy option '", key_equals_value, "': expected KEY=VALUE"));
  }
  return SetStrategyOption(options, key_equals_value.substr(0, eq), key_equals_value.substr(eq + 1));
}

std::vector<std::string> StrategyOptionNames() {
  std::vector<std::string> names;
  for (const OptionField& f : OptionFields()) names.push_back(f.name);
  return names;
}

absl::StatusOr<std::unique_ptr<SearchStrategy>> SearchStrategy::Create(
    const std::string& name, const ConfigSpace* space, const StrategyOptions& options) {
  TUNE_CHECK(space != nullptr) << "SearchStrategy::Create(\"" << name << "\") without a space";
  if (name == "random") return std::make_unique<RandomStrategy>(space, options);
  if (name == "grid") return std::make_unique<GridStrategy>(space, options);
  if (name == "bo_ei" || name == "bo_pi" || name == "bo_ucb" || name == "bo_multi" ||
      name == "bo") {
    using Mode = BayesOptStrategy::Mode;
    const Mode mode = name == "bo_ei"    ? Mode::kExpectedImprovement
                      : name == "bo_pi"  ? Mode::kProbabilityOfImprovement
                      : name == "bo_ucb" ? Mode::kUpperConfidenceBound
                                         : Mode::kMulti;
    return std::make_unique<BayesOptStrategy>(space, options, mode);
  }
  if (name == "bandit") return BanditStrategy::Create(space, options);
  if (name == "sa") return std::make_unique<SaStrategy>(space, options);
  if (name == "evolutionary") return std::make_unique<EvolutionaryStrategy>(space, options);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown search strategy '", name, "' (known: random, grid, sa, evolutionary",
                   ", bo, bo_ei, bo_pi, bo_ucb, bo_multi, bandit)"));
}

}  // namespace tune::search
