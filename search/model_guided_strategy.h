// ModelGuidedStrategy: the bookkeeping shared by strategies that rank candidates with a
// cost model (sa, evolutionary): the random share, stall-driven exploration, what was seen.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/random_strategy.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::search {

/// Base of the model-guided strategies. Until a cost model is set and trained, Propose
/// returns uniformly random valid unseen configs (the same as RandomStrategy). After that a
/// share of each batch comes from the subclass's Candidates (best first), thinned with
/// SelectDiverse (search/diversity.h), and the rest are uniformly random valid unseen
/// configs, as are the slots the candidates cannot fill, so small spaces are exhausted
/// exactly once.
///
/// The random share is `eps_greedy`, carried across calls so small batches neither lose nor
/// overspend it. When the last `explore_after` reported results did not improve on the best
/// cost measured so far by more than 1%, the model is exploiting a plateau: the share rises
/// to `eps_stalled` until a result improves the best again (any result counts).
class ModelGuidedStrategy : public SearchStrategy {
 public:
  std::vector<Config> Propose(int batch) final;
  void Update(const std::vector<MeasuredConfig>& results) final;

 protected:
  /// `random_salt` separates the random helper's stream from the subclass's.
  ModelGuidedStrategy(const ConfigSpace* space, const StrategyOptions& options, uint64_t random_salt);

  /// Up to `capacity` valid configs never proposed nor reported, best first by the model.
  virtual std::vector<Config> Candidates(size_t capacity) = 0;

  /// The model's scores, NaN mapped to -infinity.
  std::vector<double> Score(const std::vector<Config>& configs);
  /// Up to `count` distinct measured configs, lowest cost first.
  std::vector<Config> BestMeasured(size_t count) const;
  /// Proposed or reported before.
  bool Seen(const Config& config) const { return visited_.count(config) != 0; }
  double Uniform01();
  /// True while the random share is raised to eps_stalled.
  bool stalled() const { return stall_ >= options_.explore_after; }

  const ConfigSpace* space_;
  StrategyOptions options_;
  std::mt19937_64 rng_;
  std::vector<size_t> mutable_knobs_;  // knobs with at least two options

 private:
  RandomStrategy random_;  // the random share and fill; told about every proposal
  std::unordered_set<Config, ConfigHash> visited_;   // proposed or reported
  std::vector<std::pair<double, Config>> measured_;  // valid ok results: cost, config
  double random_credit_ = 0;  // random share owed, carried across calls
  double best_cost_;          // best ok cost reported so far (+inf: none)
  int stall_ = 0;             // results reported since best_cost_ last improved
};

}  // namespace tune::search
