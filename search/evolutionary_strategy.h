// EvolutionaryStrategy: evolutionary search ranked by the cost model (Ansor style).
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

/// The genetic operators of EvolutionaryStrategy; the share of the batch it fills and how much
/// of the first population comes from measured configs are in ModelGuidedOptions. Keys for
/// SetStrategyOption in brackets.
struct EvolutionaryOptions {
  /// [evo_population] Distinct configs per generation; a count >= 2.
  int population = 256;
  /// [evo_generations] Generations bred per Propose; a count >= 0, where 0 only scores the
  /// first population.
  int generations = 8;
  /// [evo_crossover_prob] Chance that a child is a crossover of two parents (else a mutation
  /// of one); a probability in [0, 1].
  double crossover_prob = 0.3;
  /// [evo_mutation_prob] Chance that a crossover child is mutated as well; a probability in
  /// [0, 1].
  double mutation_prob = 0.5;
};

/// Model-guided evolutionary search, as Ansor's EvolutionarySearch does it.
///
/// Until a cost model is set and trained, Propose returns uniformly random valid unseen
/// configs (the same as RandomStrategy). After that, each Propose (model slots, see
/// ModelGuidedStrategy for the random share; settings: EvolutionaryOptions and
/// ModelGuidedOptions):
///   1. builds a population of `population` distinct valid configs: the best measured
///      ones (at most round(population * measured_share)), then random valid samples that
///      were not reported as failed (no generation breeds from, or makes, a known failure:
///      mutations and crossovers producing one are retried like invalid ones);
///   2. runs `generations` generations. Fitness is the model's predicted score. The
///      best 1/16 of a generation (at least one) pass on unchanged; every other child gets
///      a parent by rank selection (the i-th best of N is drawn with weight N - i). With
///      probability `crossover_prob` it is a crossover of that parent and a second
///      one (each knob's option from either parent; an invalid child is redrawn with a new
///      mix up to 4 times, then the crossover is dropped), then mutated with probability
///      `mutation_prob`; otherwise it is a mutation of the parent (one knob set to a
///      random other option, retried while invalid). Children repeating a member of the new
///      generation are discarded;
///   3. keeps the best unseen configs of all generations (4 per model slot, at least 64)
///      and picks the batch from them with SelectDiverse (search/diversity.h).
/// Deterministic for a seed, the same Update history and a deterministic model.
class EvolutionaryStrategy : public ModelGuidedStrategy {
 public:
  /// Registers "evolutionary" with `registry`; it reads StrategyOptions::model_guided and
  /// ::evolutionary.
  static void Register(StrategyRegistry& registry);

  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  EvolutionaryStrategy(const ConfigSpace* space, uint64_t seed, const ModelGuidedOptions& guide,
                       const EvolutionaryOptions& options);

  std::string name() const override { return "evolutionary"; }

 private:
  // Runs the generations; returns the best unseen configs met, best first.
  std::vector<Config> Candidates(size_t capacity) override;
  // Sets one random knob of `config` to another option so it stays valid and not a known
  // failure; false (and `config` unchanged) when a few tries found no such change.
  bool Mutate(Config& config);
  // A valid knob-wise mix of `a` and `b`, not a known failure, that differs from both; false
  // when none was found.
  bool Crossover(const Config& a, const Config& b, Config& child);

  EvolutionaryOptions evo_;
};

}  // namespace tune::search
