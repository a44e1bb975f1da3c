// SearchStrategy::Create: the factory that maps strategy names to implementations.
#include "search/strategy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "search/bandit_strategy.h"
#include "search/bayes_opt_strategy.h"
#include "search/check.h"
#include "search/evolutionary_strategy.h"
#include "search/grid_strategy.h"
#include "search/random_strategy.h"
#include "search/sa_strategy.h"

namespace tune::search {

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
