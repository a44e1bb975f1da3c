// StrategyOptions: every strategy's settings in one value, and their text form (KEY=VALUE).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "search/bandit_strategy.h"
#include "search/bayes_opt_strategy.h"
#include "search/evolutionary_strategy.h"
#include "search/model_guided_strategy.h"
#include "search/sa_strategy.h"
#include "search/search_strategy.h"

namespace tune::search {

/// Every strategy's settings, one struct per strategy (each declared and documented in that
/// strategy's header), plus the seed they all share. A default-constructed value holds every
/// strategy's defaults; `StrategyOptions{seed}` sets only the seed. A strategy reads only its
/// own groups (StrategyRegistry lists which keys each one reads); a bandit hands the whole
/// value to its arms.
struct StrategyOptions {
  /// [seed] Seeds every random draw of the strategy (and, derived from it, those of its helpers
  /// and bandit arms): the same seed and the same Update history give the same proposals.
  uint64_t seed = 0;
  /// "sa" and "evolutionary": the random share and the spread of the model's picks.
  ModelGuidedOptions model_guided;
  /// "sa": the annealing schedule.
  SaOptions sa;
  /// "evolutionary": population and genetic operators.
  EvolutionaryOptions evolutionary;
  /// "bo", "bo_ei", "bo_pi", "bo_ucb", "bo_multi": initial design, candidates, acquisitions.
  BayesOptOptions bo;
  /// "bandit": the arms.
  BanditOptions bandit;
};

/// Sets one field of `options` from text, as given by `--strategy-option KEY=VALUE`: KEY is the
/// key in brackets in the field's comment (eps_greedy, sa_chains, bo_kappa, bandit_arms as a
/// comma-separated list, ...; StrategyOptionNames lists them). The strategy is not known here,
/// so any registered strategy's key is accepted; a strategy ignores the keys it does not read
/// (a bandit passes them on to its arms). InvalidArgument for a key no registered strategy
/// reads (the message lists the known keys), a value that does not parse or is out of the
/// field's range; `options` is unchanged then.
absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key, const std::string& value);
/// Parses "KEY=VALUE" and calls SetStrategyOption.
absl::Status SetStrategyOption(StrategyOptions& options, const std::string& key_equals_value);
/// The keys SetStrategyOption knows: "seed", then each registered strategy's keys in
/// registration order (StrategyRegistry::OptionNames).
std::vector<std::string> StrategyOptionNames();

}  // namespace tune::search
