// SaStrategy: simulated annealing over the cost model's predictions (AutoTVM style).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/model_guided_strategy.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::search {

/// Model-guided search by parallel simulated annealing, as AutoTVM's SimulatedAnnealing-
/// Optimizer does it.
///
/// Until a cost model is set and trained, Propose returns uniformly random valid unseen
/// configs (the same as RandomStrategy). After that, each Propose (model slots, see
/// ModelGuidedStrategy for the random share):
///   1. starts `sa_chains` Markov chains: the first round(sa_chains * measured_share) at the
///      best measured configs (fewer while fewer are measured), the others where they stopped
///      in the previous Propose (persistent chains), or at random valid configs the first time;
///   2. runs up to `sa_steps` steps: each chain moves to a random valid config one knob away
///      (half the moves step that knob's option to an adjacent one, half pick any other
///      option), all moves are scored in one Predict call, and a move is accepted by the
///      Metropolis rule exp(delta / (scale * T)), where delta is the change of the predicted
///      score, scale the median |delta| of the first step (scores are normalised by it) and the
///      temperature T falls linearly from 1 to 0. It stops early when the best unseen configs
///      have not changed for `sa_early_stop` steps;
///   3. keeps the best unseen configs visited by any chain (4 per model slot, at least 64)
///      and picks the batch from them with SelectDiverse (search/diversity.h).
/// Deterministic for a seed, the same Update history and a deterministic model.
class SaStrategy : public ModelGuidedStrategy {
 public:
  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  SaStrategy(const ConfigSpace* space, const StrategyOptions& options);

  std::string name() const override { return "sa"; }

 private:
  // Runs the chains; returns the best unseen configs met, best first.
  std::vector<Config> Candidates(size_t capacity) override;
  // One random valid single-knob move from `from` into `to`; false when none was found.
  bool Move(const Config& from, Config& to);

  std::vector<Config> chains_;  // chain states where the last Propose left them
};

}  // namespace tune::search
