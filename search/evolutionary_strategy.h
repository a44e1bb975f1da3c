// EvolutionaryStrategy: evolutionary search ranked by the cost model (Ansor style).
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

/// Model-guided evolutionary search, as Ansor's EvolutionarySearch does it.
///
/// Until a cost model is set and trained, Propose returns uniformly random valid unseen
/// configs (the same as RandomStrategy). After that, each Propose:
///   1. builds a population of `evo_population` distinct valid configs: the best measured
///      ones (at most round(evo_population * measured_share)), then random valid samples;
///   2. runs `evo_generations` generations. Fitness is the model's predicted score. The
///      best 1/16 of a generation (at least one) pass on unchanged; every other child gets
///      a parent by rank selection (the i-th best of N is drawn with weight N - i). With
///      probability `evo_crossover_prob` it is a crossover of that parent and a second
///      one (each knob's option from either parent; an invalid child is redrawn with a new
///      mix up to 4 times, then the crossover is dropped), then mutated with probability
///      `evo_mutation_prob`; otherwise it is a mutation of the parent (one knob set to a
///      random other option, retried while invalid). Children repeating a member of the new
///      generation are discarded;
///   3. keeps the best unseen configs of all generations (4 per model slot, at least 64)
///      and picks the batch from them with SelectDiverse (search/diversity.h).
/// A share `eps_greedy` of the proposals (carried across calls) are uniformly random valid
/// unseen configs, as are the slots the evolution cannot fill, so small spaces are exhausted
/// exactly once. Deterministic for a seed, the same Update history and a deterministic model.
class EvolutionaryStrategy : public SearchStrategy {
 public:
  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  EvolutionaryStrategy(const ConfigSpace* space, const StrategyOptions& options);

  std::string name() const override { return "evolutionary"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;

 private:
  // Runs the generations; returns the best unseen configs met, best first.
  std::vector<Config> Evolve(size_t capacity);
  // Sets one random knob of `config` to another option so it stays valid; false (and
  // `config` unchanged) when a few tries found no valid change.
  bool Mutate(Config& config);
  // A valid knob-wise mix of `a` and `b` that differs from both; false when none was found.
  bool Crossover(const Config& a, const Config& b, Config& child);
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
  std::vector<std::pair<double, Config>> measured_;  // valid ok results: cost, config
  double random_credit_ = 0;                         // eps_greedy share owed, carried across calls
};

}  // namespace tune::search
