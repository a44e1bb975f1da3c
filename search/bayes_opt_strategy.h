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

/// The initial design, candidate pool, model and acquisition parameters of BayesOptStrategy.
/// Keys for SetStrategyOption in brackets.
struct BayesOptOptions {
  /// [bo_initial_samples] Configs reported or pending before the Gaussian process guides
  /// proposals; they form a Latin hypercube design (see BayesOptStrategy). A count >= 1.
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
  /// [bo_feasibility_weight] Weight w of log P(feasible) in every acquisition (0: failures
  /// are ignored by the acquisition, 1: EI * P and PI * P as in constrained BO); >= 0.
  double feasibility_weight = 1.0;
  /// [bo_min_feasibility] Candidates whose P(feasible) is below this are proposed only when
  /// no other candidate is left (and hill-climbing never steps onto them); in [0, 1].
  double min_feasibility = 1e-3;
  /// [bo_climb_starts] Candidates (the best by acquisition) each acquisition hill-climbs
  /// from per Propose, besides the two best measured configs; 0 turns the climb off.
  int climb_starts = 4;
  /// [bo_ard] 1: one GP length scale per knob (automatic relevance determination), 0: one
  /// isotropic length scale.
  int ard = 1;
  /// [bo_log_values] 1: a numeric choice knob whose values are all positive is encoded by
  /// log2 of its value scaled to [0,1]; 0: by its option index scaled to [0,1].
  int log_values = 0;
};

/// Bayesian optimisation ("bo_ei", "bo_pi", "bo_ucb", "bo_multi"; "bo" = "bo_multi").
///
/// Encoding (Encode): each knob maps to coordinates in [0,1]. A numeric knob (a split knob,
/// or a choice knob without labels) is one coordinate that keeps its order: option index /
/// (options - 1), or with BayesOptOptions::log_values and all values positive, (log2 value
/// - log2 min) / (log2 max - log2 min); 0.5 for a knob with one option. A categorical knob (a
/// choice knob with labels, e.g. a loop order) is one-hot: one coordinate per option, 1/sqrt(2)
/// at the chosen option and 0 elsewhere, so any two options are at distance 1 and none is
/// "between" two others.
///
/// Model: a GaussianProcess (Matérn 5/2) fitted on the ok results only, target log(cost),
/// hyperparameters by marginal likelihood: an isotropic grid, then (BayesOptOptions::ard)
/// one length scale per knob by coordinate search (the one-hot coordinates of a knob share
/// theirs). At most kMaxTrainingPoints ok results are used: the half with the lowest log
/// cost plus the most recent of the rest. Failures never enter the regression; a separate
/// FeasibilityModel (a least-squares GP classifier: a GP with the same encoding, kernel,
/// ARD and knob groups regressed on +1 for ok and -1 for failed, through a probit link;
/// fitted on the latest kMaxFeasibilityPoints results, only while
/// feasibility_weight > 0) gives P(feasible) for each candidate, and every acquisition adds w * log P(feasible) (w =
/// feasibility_weight; skipped while no result has failed). Candidates with P(feasible) <
/// min_feasibility are left out of every selection while any other candidate is left.
///
/// Settings: BayesOptOptions.
///
/// Initial design: until `initial_samples` configs have been reported or are pending (and
/// while no result is ok), slots are filled from a Latin hypercube of `initial_samples`
/// points over the knobs (each knob's range cut into that many strata, one point per
/// stratum, strata paired by random permutations; a categorical knob's stratum picks its
/// option), each mapped to the nearest (in the encoding) valid unseen config: over all
/// valid configs for a space of at most kPoolLimit points, else over the random
/// candidates. Further design slots (all results failed) take random candidates.
///
/// Propose(batch): candidates are `candidates` random valid unseen configs (all of them
/// when fewer remain; spaces of at most kPoolLimit points are enumerated once so they are
/// exhausted exactly), plus neighbours of the 5 best configs, neighbours of neighbours of the
/// best one, `candidates / 8` random one- or two-knob mutations of the 10 best, and, when
/// a trained cost model is set, the 10% best-scored of another `candidates` random
/// configs (the cost model is used for nothing else). Then each active acquisition
/// hill-climbs from its `climb_starts` best candidates and from the two best measured
/// configs: at each step it scores the valid unseen neighbours (ConfigSpace::Neighbours)
/// and kClimbMutations random two-knob moves, and moves to the best if it beats the current
/// point, for at most kMaxClimbSteps steps; the end points join the candidates. The
/// slots are filled greedily: each maximizes its acquisition over the candidates left, then
/// the chosen point is "believed" (kriging believer: added as an observation at its
/// predicted mean, which leaves the means unchanged and shrinks the variance around it), so
/// a batch does not collapse onto one spot. Configs proposed earlier but not yet reported
/// (the last kMaxBelievedPending) and the batch's design picks are believed the same way
/// before selection. Cost: O(n^3) per hyperparameter candidate for the fit (18 on the grid,
/// about 3 per knob and sweep for ARD), O(m n^2) for the posterior of m candidates, O(m n)
/// per believed point.
///
/// Acquisitions (minimizing the target; mu, sigma the posterior mean and deviation; best the
/// lowest ok target; xi and kappa of BayesOptOptions in units of the targets' standard
/// deviation s; P = P(feasible), w = feasibility_weight): EI: log E[max(best - xi - f, 0)] +
/// w log P (log EI with its asymptotic form far in the tail so it never underflows to ties),
/// PI: log P(f < best - xi) + w log P, UCB: -(mu - kappa * sigma) + w * s * log P (the
/// lower confidence bound, penalised by log P in units of s).
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
  static constexpr int kMaxFeasibilityPoints = 512;
  static constexpr int kMaxClimbSteps = 16;
  static constexpr int kClimbMutations = 8;
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
  /// The model's coordinates of `config` (indices in range), as described above; its size is
  /// encoded_dimension().
  std::vector<double> Encode(const Config& config) const;
  /// Number of coordinates of the encoding.
  int encoded_dimension() const { return encoded_dimension_; }
  /// Short name of an acquisition: "ei", "pi", "ucb".
  static const char* AcquisitionName(Acquisition acquisition);

 private:
  struct Observation {
    Config config;
    std::vector<double> point;
    double log_cost = 0.0;  // meaningful when ok
    bool ok = false;
  };

  // How one knob is encoded: `width` coordinates from `offset`; a numeric knob has one
  // coordinate, `coordinate[option]`; a categorical knob is one-hot.
  struct KnobEncoding {
    int offset = 0;
    int width = 1;
    bool categorical = false;
    std::vector<double> coordinate;
  };
  bool InRange(const Config& config) const;
  // Up to `count` random valid configs not in seen_ nor `exclude`, appended to `out` (and
  // inserted into `exclude`).
  void SampleUnseen(int count, std::unordered_set<Config, ConfigHash>& exclude,
                    std::vector<Config>& out);
  std::vector<Config> Candidates();
  void AddIfNew(const Config& config, std::unordered_set<Config, ConfigHash>& taken,
                std::vector<Config>& out) const;
  // Design picks for `count` slots (Latin hypercube targets, then random candidates), none
  // in `taken`; each pick is inserted into `taken`.
  std::vector<Config> DesignPicks(int count, const std::vector<Config>& candidates,
                                  std::unordered_set<Config, ConfigHash>& taken);
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
  std::vector<KnobEncoding> encoding_;
  int encoded_dimension_ = 0;
  std::vector<std::vector<double>> design_targets_;  // Latin hypercube points, encoded
  size_t design_next_ = 0;
};

}  // namespace tune::search
