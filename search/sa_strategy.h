// SaStrategy: simulated annealing over the cost model's predictions (AutoTVM style).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/model_guided_strategy.h"
#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

class StrategyRegistry;

/// The annealing schedule of SaStrategy; the share of the batch it fills and where chains
/// start come from ModelGuidedOptions. Keys for SetStrategyOption in brackets.
struct SaOptions {
  /// [sa_chains] Parallel Markov chains per Propose; a count >= 1.
  int chains = 128;
  /// [sa_steps] Annealing steps per Propose (the temperature falls linearly from 1 to 0 over
  /// them); a count >= 0, where 0 only scores the chain starts.
  int steps = 200;
  /// [sa_early_stop] Steps without a new top candidate after which a Propose stops early; a
  /// count >= 1.
  int early_stop = 50;
};

/// Model-guided search by parallel simulated annealing, as AutoTVM's SimulatedAnnealing-
/// Optimizer does it.
///
/// Until a cost model is set and trained, Propose returns uniformly random valid unseen
/// configs (the same as RandomStrategy). After that, each Propose (model slots, see
/// ModelGuidedStrategy for the random share; settings: SaOptions and ModelGuidedOptions):
///   1. starts `chains` Markov chains: the first round(chains * measured_share) at the
///      best measured configs (fewer while fewer are measured), the others where they stopped
///      in the previous Propose (persistent chains; one stopped on a config since reported
///      as failed restarts), or at random valid configs the first time;
///   2. runs up to `steps` steps: each chain moves to a random valid config one knob away,
///      never onto a config reported as failed
///      (half the moves step that knob's option to an adjacent one, half pick any other
///      option), all moves are scored in one Predict call, and a move is accepted by the
///      Metropolis rule exp(delta / (scale * T)), where delta is the change of the predicted
///      score, scale the median |delta| of the first step (scores are normalised by it) and the
///      temperature T falls linearly from 1 to 0. It stops early when the best unseen configs
///      have not changed for `early_stop` steps;
///   3. keeps the best unseen configs visited by any chain (4 per model slot, at least 64)
///      and picks the batch from them with SelectDiverse (search/diversity.h).
/// Deterministic for a seed, the same Update history and a deterministic model.
class SaStrategy : public ModelGuidedStrategy {
 public:
  /// Registers "sa" with `registry`; it reads StrategyOptions::model_guided and ::sa.
  static void Register(StrategyRegistry& registry);

  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  SaStrategy(const ConfigSpace* space, uint64_t seed, const ModelGuidedOptions& guide,
             const SaOptions& options);

  std::string name() const override { return "sa"; }

 private:
  // Runs the chains; returns the best unseen configs met, best first.
  std::vector<Config> Candidates(size_t capacity) override;
  // One random valid single-knob move from `from` into `to`, never onto a config reported as
  // failed; false when none was found.
  bool Move(const Config& from, Config& to);

  SaOptions sa_;
  std::vector<Config> chains_;  // chain states where the last Propose left them
};

}  // namespace tune::search
