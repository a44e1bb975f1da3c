// ModelGuidedStrategy: the bookkeeping shared by strategies that rank candidates with a
// cost model (sa, evolutionary): the random share, stall-driven exploration, what was seen.
#pragma once

#include <cstdint>
#include <random>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/random_strategy.h"
#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

struct StrategyOptionKey;

/// How a model-guided strategy (search/model_guided_strategy.h) splits each batch between the
/// cost model's picks and uniformly random configs, and how it spreads the model's picks.
/// Both strategies propose uniformly random configs only until the cost model is trained.
/// Each field's key for SetStrategyOption (search/strategy.h) is given in brackets.
struct ModelGuidedOptions {
  /// [eps_greedy] Share of proposals, once the model is trained, that are uniformly random
  /// valid unseen configs; a fraction in [0, 1]. Carried across calls (0.05 with batches of 8
  /// gives one random config every two or three batches) so small batches neither lose nor
  /// overspend it.
  double eps_greedy = 0.05;
  /// [eps_stalled] The random share while stalled, i.e. after `explore_after` results in a row
  /// that did not improve the best cost by more than 1%; a fraction in [0, 1].
  double eps_stalled = 0.5;
  /// [explore_after] Results (a count, >= 1) without such an improvement after which the
  /// search counts as stalled.
  int explore_after = 16;
  /// [stalled_local] Share of the random slots, while stalled, that go to the neighbours of
  /// the best measured configs instead: a valid unseen config with one knob changed (the knob
  /// and its new option drawn uniformly) from one of the kLocalParents best; a fraction in
  /// [0, 1]. Where the model favours a family the best config is not in, the online model
  /// learns only from what the model picked and uniform draws rarely land near the best;
  /// these measure the best configs' own neighbourhood, whatever the model thinks of it.
  double stalled_local = 0.5;
  /// [measured_share] Share of SA chains / of the initial population started at the best
  /// measured configs (the rest: SA's persisted chain states, then random samples); a
  /// fraction in [0, 1].
  double measured_share = 0.25;
  /// [diversity_min_distance] Configs the model picks for one batch differ pairwise in at
  /// least this many knobs while candidates allow (search/diversity.h: SelectDiverse); a knob
  /// count >= 1, where 1 turns the rule off.
  int diversity_min_distance = 2;
  /// [failure_threshold] A config the model picks whose estimated chance of failing (see
  /// ModelGuidedStrategy: per-knob failure counts of the measured configs) exceeds this is
  /// not proposed; a probability in [0, 1], where 1 turns the estimate off.
  double failure_threshold = 0.5;
};

/// Base of the model-guided strategies. Until a cost model is set and trained, Propose
/// returns uniformly random valid unseen configs (the same as RandomStrategy). After that a
/// share of each batch comes from the subclass's Candidates (best first), thinned with
/// SelectDiverse (search/diversity.h), and the rest are uniformly random valid unseen
/// configs, as are the slots the candidates cannot fill, so small spaces are exhausted
/// exactly once.
///
/// Settings: ModelGuidedOptions. The random share is `eps_greedy`, carried across calls so
/// small batches neither lose nor overspend it. When the last `explore_after` reported results
/// did not improve on the best cost measured so far by more than 1%, the model is exploiting a
/// plateau: the share rises to `eps_stalled` until a result improves the best again (any
/// result counts), and a share `stalled_local` of those slots measures neighbours of the best
/// measured configs (Neighbours) rather than uniform draws.
///
/// Failures teach the search directly, besides through the model. Once at least two
/// reported results failed and one was ok, a naive-Bayes estimate of a config's chance of
/// failing is kept from the measured configs: with F failed and O ok results, f(k, v) / o(k, v)
/// of them with option v of knob k and V_k options of knob k,
///   odds(fail) = F / O * prod over knobs k of [(f(k, c_k) + 1) / (F + V_k)] /
///                                            [(o(k, c_k) + 1) / (O + V_k)].
/// The model's candidates whose chance exceeds `failure_threshold` and whose odds of failing
/// are at least kFailureEvidence times the overall odds F / O (so the knobs, not a high base
/// rate of scattered failures, point at failing) are dropped before
/// SelectDiverse, and the model slots they leave go to random valid unseen configs that pass
/// the same test (64 draws per slot at most; the uniformly random fill after that takes any).
/// The subclasses never start, move or breed from a config reported as failed (KnownFailure).
class ModelGuidedStrategy : public SearchStrategy {
 public:
  std::vector<Config> Propose(int batch) final;
  void Update(const std::vector<MeasuredConfig>& results) final;

 protected:
  /// `space` is not owned and must outlive the strategy; `seed` seeds rng_, and `random_salt`
  /// separates the random helper's stream (seed ^ random_salt) from it. Aborts on out-of-range
  /// options.
  ModelGuidedStrategy(const ConfigSpace* space, uint64_t seed, const ModelGuidedOptions& options,
                      uint64_t random_salt);

  /// The keys of ModelGuidedOptions (eps_greedy, eps_stalled, explore_after, stalled_local,
  /// measured_share, diversity_min_distance, failure_threshold), for the subclasses'
  /// registrations.
  static std::vector<StrategyOptionKey> OptionKeys();

  /// Up to `capacity` valid configs never proposed nor reported, best first by the model.
  virtual std::vector<Config> Candidates(size_t capacity) = 0;

  /// The model's scores, NaN mapped to -infinity.
  std::vector<double> Score(const std::vector<Config>& configs);
  /// Up to `count` valid configs never proposed nor reported (nor in `taken`), each one knob
  /// away from one of the kLocalParents best measured configs (see stalled_local); fewer when
  /// a bounded number of draws finds no more.
  std::vector<Config> Neighbours(size_t count, const std::unordered_set<Config, ConfigHash>& taken);
  /// Up to `count` distinct measured configs, lowest cost first.
  std::vector<Config> BestMeasured(size_t count) const;
  /// The measured configs that start `count` SA chains or population members: the best
  /// round(count * measured_share) (fewer while fewer are measured), lowest cost first.
  std::vector<Config> MeasuredStarts(size_t count) const;
  /// Proposed or reported before.
  bool Seen(const Config& config) const { return visited_.count(config) != 0; }
  /// Reported as failed (not ok, or no finite cost).
  bool KnownFailure(const Config& config) const { return failed_set_.count(config) != 0; }
  /// The estimated chance in [0, 1] that `config` fails (see the class comment); 0 until two
  /// failed and one ok result were reported.
  double FailureChance(const Config& config) const;
  double Uniform01();
  /// True while the random share is raised to eps_stalled.
  bool stalled() const { return stall_ >= options_.explore_after; }

  const ConfigSpace* space_;
  ModelGuidedOptions options_;
  std::mt19937_64 rng_;
  std::vector<size_t> mutable_knobs_;  // knobs with at least two options

 private:
  RandomStrategy random_;  // the random share and fill; told about every proposal
  std::unordered_set<Config, ConfigHash> visited_;   // proposed or reported
  std::vector<std::pair<double, Config>> measured_;  // valid ok results: cost, config
  // Per knob and option: how many valid reported configs with it failed / were ok.
  std::vector<std::vector<int>> knob_failed_;
  std::vector<std::vector<int>> knob_ok_;
  int failed_count_ = 0;  // valid reported configs that failed
  int ok_count_ = 0;      // valid reported configs that were ok
  std::unordered_set<Config, ConfigHash> failed_set_;  // configs reported as failed
  double random_credit_ = 0;  // random share owed, carried across calls
  double local_credit_ = 0;   // the stalled random share's neighbours owed, carried across calls
  double best_cost_;          // best ok cost reported so far (+inf: none)
  int stall_ = 0;             // results reported since best_cost_ last improved
};

}  // namespace tune::search
