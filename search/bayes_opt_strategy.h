// BayesOptStrategy: Gaussian-process Bayesian optimisation on discrete, constrained spaces.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

class StrategyRegistry;

/// The initial design, candidate pool and acquisition parameters of BayesOptStrategy. Keys for
/// SetStrategyOption in brackets.
struct BayesOptOptions {
  /// [bo_initial_samples] Configs reported or pending before the Gaussian process guides
  /// proposals; until then proposals are uniformly random. A count >= 1.
  int initial_samples = 10;
  /// [bo_candidates] Random valid unseen configs scored by the acquisition per Propose
  /// (neighbours and mutations of the best measured configs are added to them); a count >= 1.
  int candidates = 2000;
  /// [bo_xi] EI/PI exploration margin, in standard deviations of the observed log costs;
  /// >= 0.
  double xi = 0.01;
  /// [bo_kappa] UCB exploration weight: UCB minimizes predicted log cost - kappa * its
  /// standard deviation; >= 0.
  double kappa = 2.0;
};

/// Bayesian optimisation ("bo_ei", "bo_pi", "bo_ucb", "bo_multi"; "bo" = "bo_multi").
///
/// Model: a GaussianProcess (Matérn 5/2, hyperparameters by marginal likelihood over a grid)
/// over knob option indices scaled to [0,1] (index / (options - 1); 0.5 for a knob with one
/// option). Target: log(cost) of ok results; a failure gets worst ok log cost + max(0.5 *
/// (worst - best), 0.1), so the model learns to steer away from failing regions (0 while no
/// result is ok). At most kMaxTrainingPoints observations are used: the half with the best
/// targets plus the most recent of the rest.
///
/// Settings: BayesOptOptions.
///
/// Propose(batch): candidates are `candidates` random valid unseen configs (all of them
/// when fewer remain; spaces of at most kPoolLimit points are enumerated once so they are
/// exhausted exactly), plus neighbours of the 5 best configs, neighbours of neighbours of the
/// best one, `candidates / 8` random one- or two-knob mutations of the 10 best, and, when
/// a trained cost model is set, the 10% best-scored of another `candidates` random
/// configs (the cost model is used for nothing else). While nothing has been reported, and
/// until `initial_samples` configs have been reported or are pending, slots are filled
/// with random candidates. The other slots are filled greedily: each maximizes its
/// acquisition over the candidates left, then the chosen point is "believed" (kriging
/// believer: added as an observation at its predicted mean, which leaves the means unchanged
/// and shrinks the variance around it), so a batch does not collapse onto one spot. Configs
/// proposed earlier but not yet reported (the last kMaxBelievedPending) and the batch's random
/// picks are believed the same way before selection. Cost: O(n^3) per hyperparameter
/// candidate for the fit (18 candidates), O(m n^2) for the posterior of m candidates, O(m n)
/// per believed point.
///
/// Acquisitions (minimizing the target; mu, sigma the posterior mean and deviation; best the
/// lowest ok target; xi and kappa of BayesOptOptions in units of the targets' standard
/// deviation): EI = E[max(best - xi - f, 0)] (ranked by log EI, with its asymptotic form far
/// in the tail so it never underflows to ties), PI = P(f < best - xi) (ranked by its z
/// score), UCB = lower confidence bound: minimize mu - kappa * sigma.
///
/// "bo_multi" runs a portfolio of EI, PI and UCB, after Willemsen et al.'s "advanced multi":
///  - Slots go to the active acquisitions by smooth weighted round-robin with weight
///    1 + (number of results that acquisition proposed which improved the best-so-far).
///  - Agreement: at every slot each active acquisition names its favourite candidate; all
///    acquisitions whose favourite equals the chosen point record an agreement when there
///    are at least two of them. After each Propose, if two or more acquisitions have at least
///    kAgreementLimit agreements in their last kAgreementWindow slots, only the one with the
///    best (lowest) quality among them stays active (ties: more improvements, then EI, PI,
///    UCB order); the others are dropped as redundant, and all windows restart.
///  - Quality: each acquisition keeps a discounted mean (factor kQualityDiscount per new
///    result) of the log cost of its measured proposals (a failure counts as the worst ok log
///    cost seen so far). After every Update, among active acquisitions with at least
///    kMinQualitySamples measured proposals, one whose quality is more than kQualityMargin
///    (log units, ~10% slower) above their mean gets a strike; the first to reach
///    kStrikeLimit strikes is dropped (ties: worse quality) and all strikes are reset.
///  - The last active acquisition is never dropped. portfolio() exposes this state.
/// Deterministic for a seed and a sequence of Update calls. Not thread-safe.
class BayesOptStrategy : public SearchStrategy {
 public:
  enum class Acquisition {
    kExpectedImprovement,
    kProbabilityOfImprovement,
    kUpperConfidenceBound,
  };
  /// Which acquisition(s) run: one of the three ("bo_ei", "bo_pi", "bo_ucb") or the
  /// portfolio of all three ("bo_multi").
  enum class Mode {
    kExpectedImprovement,
    kProbabilityOfImprovement,
    kUpperConfidenceBound,
    kMulti,
  };

  static constexpr uint64_t kPoolLimit = uint64_t{1} << 16;
  static constexpr int kMaxTrainingPoints = 256;
  static constexpr int kMaxBelievedPending = 64;
  static constexpr int kAgreementWindow = 10;
  static constexpr int kAgreementLimit = 7;
  static constexpr double kQualityDiscount = 0.7;
  static constexpr int kMinQualitySamples = 3;
  static constexpr double kQualityMargin = 0.1;
  static constexpr int kStrikeLimit = 3;

  /// State of one acquisition function of the portfolio (one entry unless kMulti).
  struct AcquisitionState {
    Acquisition acquisition = Acquisition::kExpectedImprovement;
    bool active = true;
    int proposed = 0;        // configs it chose (random initial-design slots excluded)
    int measured = 0;        // of those, results reported so far
    int improvements = 0;    // reported results that improved the best-so-far
    int agreements = 0;      // slots where another acquisition had the same favourite
    int strikes = 0;         // quality strikes since the last drop
    double quality_sum = 0.0;     // discounted sum of log costs
    double quality_weight = 0.0;  // discounted count
    double schedule_credit = 0.0; // smooth weighted round-robin state
    std::deque<bool> recent_agreements;
    double quality() const { return quality_sum / quality_weight; }
  };

  /// Registers "bo", "bo_ei", "bo_pi", "bo_ucb" and "bo_multi" with `registry`; they read
  /// StrategyOptions::bo.
  static void Register(StrategyRegistry& registry);

  /// `space` is not owned and must outlive the strategy. Aborts on out-of-range options.
  BayesOptStrategy(const ConfigSpace* space, uint64_t seed, const BayesOptOptions& options,
                   Mode mode);

  std::string name() const override;
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;

  const std::vector<AcquisitionState>& portfolio() const { return portfolio_; }
  /// Short name of an acquisition: "ei", "pi", "ucb".
  static const char* AcquisitionName(Acquisition acquisition);

 private:
  struct Observation {
    Config config;
    std::vector<double> point;
    double log_cost = 0.0;  // meaningful when ok
    bool ok = false;
  };

  std::vector<double> ToPoint(const Config& config) const;
  bool InRange(const Config& config) const;
  // Up to `count` random valid configs not in seen_ nor `exclude`, appended to `out` (and
  // inserted into `exclude`).
  void SampleUnseen(int count, std::unordered_set<Config, ConfigHash>& exclude,
                    std::vector<Config>& out);
  std::vector<Config> Candidates();
  void AddIfNew(const Config& config, std::unordered_set<Config, ConfigHash>& taken,
                std::vector<Config>& out) const;
  double FailurePenalty() const;
  int NextScheduledAcquisition();
  void ReviewAgreements();
  void ReviewQuality();
  int ActiveCount() const;

  const ConfigSpace* space_;
  BayesOptOptions options_;
  Mode mode_;
  std::mt19937_64 rng_;
  std::unordered_set<Config, ConfigHash> seen_;  // proposed or reported
  std::vector<Observation> observations_;        // in report order
  std::unordered_map<Config, size_t, ConfigHash> observation_index_;
  std::vector<Config> pending_;                  // proposed, not yet reported, oldest first
  std::unordered_map<Config, int, ConfigHash> proposer_;  // pending config -> portfolio index
  double best_log_cost_;
  double worst_log_cost_;
  std::vector<AcquisitionState> portfolio_;
  std::optional<std::vector<uint64_t>> valid_pool_;  // valid indices of a small space
};

}  // namespace tune::search
