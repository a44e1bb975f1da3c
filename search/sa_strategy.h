// SaStrategy: simulated annealing over the cost model's predictions (AutoTVM style).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/random_strategy.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::search {

/// Model-guided search by parallel simulated annealing, as AutoTVM's SimulatedAnnealing-
/// Optimizer does it.
///
/// Until a cost model is set and trained, Propose returns uniformly random valid unseen
/// configs (the same as RandomStrategy). After that, each Propose:
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
/// A share `eps_greedy` of the proposals (carried across calls) are uniformly random valid
/// unseen configs, as are the slots the annealing cannot fill, so small spaces are exhausted
/// exactly once. Deterministic for a seed, the same Update history and a deterministic model.
class SaStrategy : public SearchStrategy {
 public:
  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  SaStrategy(const ConfigSpace* space, const StrategyOptions& options);

  std::string name() const override { return "sa"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;

 private:
  // Runs the chains; returns the best unseen configs met, best first.
  std::vector<Config> Anneal(size_t capacity);
  // One random valid single-knob move from `from` into `to`; false when none was found.
  bool Move(const Config& from, Config& to);
  // The model's scores, NaN mapped to -infinity.
  std::vector<double> Score(const std::vector<Config>& configs);
  // Up to `count` distinct measured configs, lowest cost first.
  std::vector<Config> BestMeasured(size_t count) const;
  double Uniform01();

  const ConfigSpace* space_;
  StrategyOptions options_;
  std::mt19937_64 rng_;
  RandomStrategy random_;              // the random share and fill; told about every proposal
  std::vector<size_t> mutable_knobs_;  // knobs with at least two options
  std::unordered_set<Config, ConfigHash> visited_;   // proposed or reported
  std::vector<std::pair<double, Config>> measured_;  // ok results: cost, config
  std::vector<Config> chains_;  // chain states where the last Propose left them
  double random_credit_ = 0;    // eps_greedy share owed, carried across calls
};

}  // namespace tune::search
