// BayesOptStrategy implementation: candidates, GP fit, acquisitions, kriging-believer batches.
#include "search/bayes_opt_strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "base/check.h"
#include "search/gaussian_process.h"
#include "search/strategy_registry.h"

namespace tune::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLogSqrt2Pi = 0.91893853320467274178;

// Normal CDF and the log of the expected improvement E[max(imp - Z s, 0)] = s (z Phi(z) +
// phi(z)), z = imp / s. Far in the lower tail z Phi(z) + phi(z) ~ phi(z) / z^2, used there
// so that candidates never tie at an underflowed zero.
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double LogExpectedImprovement(double improvement, double sigma) {
  sigma = std::max(sigma, 1e-12);
  const double z = improvement / sigma;
  if (z > -6.0) {
    const double phi = std::exp(-0.5 * z * z - kLogSqrt2Pi);
    const double value = z * NormalCdf(z) + phi;
    if (value > 0) return std::log(sigma) + std::log(value);
  }
  return std::log(sigma) - 0.5 * z * z - kLogSqrt2Pi - 2.0 * std::log(std::abs(z));
}

}  // namespace

const char* BayesOptStrategy::AcquisitionName(Acquisition acquisition) {
  switch (acquisition) {
    case Acquisition::kExpectedImprovement: return "ei";
    case Acquisition::kProbabilityOfImprovement: return "pi";
    case Acquisition::kUpperConfidenceBound: return "ucb";
  }
  return "?";
}

void BayesOptStrategy::Register(StrategyRegistry& registry) {
  using O = BayesOptOptions;
  constexpr auto kGroup = &StrategyOptions::bo;
  const std::vector<StrategyOptionKey> keys = {
      IntOptionKey("bo_initial_samples", kGroup, &O::initial_samples, 1, kMaxCountOption),
      IntOptionKey("bo_candidates", kGroup, &O::candidates, 1, kMaxPoolOption),
      RealOptionKey("bo_xi", kGroup, &O::xi, 0, kMaxRealOption),
      RealOptionKey("bo_kappa", kGroup, &O::kappa, 0, kMaxRealOption),
  };
  const std::pair<const char*, Mode> names[] = {
      {"bo", Mode::kMulti},
      {"bo_ei", Mode::kExpectedImprovement},
      {"bo_pi", Mode::kProbabilityOfImprovement},
      {"bo_ucb", Mode::kUpperConfidenceBound},
      {"bo_multi", Mode::kMulti},
  };
  for (const auto& [name, mode] : names) {
    registry.Register({name,
                       [mode](const ConfigSpace* space, const StrategyOptions& options) {
                         return std::unique_ptr<SearchStrategy>(
                             new BayesOptStrategy(space, options.seed, options.bo, mode));
                       },
                       keys});
  }
}

BayesOptStrategy::BayesOptStrategy(const ConfigSpace* space, uint64_t seed,
                                   const BayesOptOptions& options, Mode mode)
    : space_(space),
      options_(options),
      mode_(mode),
      rng_(seed),
      best_log_cost_(kInf),
      worst_log_cost_(-kInf) {
  TUNE_CHECK(space_ != nullptr) << "BayesOptStrategy needs a space";
  TUNE_CHECK(options_.candidates > 0) << "bo_candidates must be positive";
  TUNE_CHECK(options_.xi >= 0 && options_.kappa >= 0) << "negative bo_xi or bo_kappa";
  auto add = [this](Acquisition acquisition) {
    AcquisitionState state;
    state.acquisition = acquisition;
    portfolio_.push_back(std::move(state));
  };
  switch (mode_) {
    case Mode::kExpectedImprovement: add(Acquisition::kExpectedImprovement); break;
    case Mode::kProbabilityOfImprovement: add(Acquisition::kProbabilityOfImprovement); break;
    case Mode::kUpperConfidenceBound: add(Acquisition::kUpperConfidenceBound); break;
    case Mode::kMulti:
      add(Acquisition::kExpectedImprovement);
      add(Acquisition::kProbabilityOfImprovement);
      add(Acquisition::kUpperConfidenceBound);
      break;
  }
}

std::string BayesOptStrategy::name() const {
  switch (mode_) {
    case Mode::kExpectedImprovement: return "bo_ei";
    case Mode::kProbabilityOfImprovement: return "bo_pi";
    case Mode::kUpperConfidenceBound: return "bo_ucb";
    case Mode::kMulti: return "bo_multi";
  }
  return "bo";
}

bool BayesOptStrategy::InRange(const Config& config) const {
  const auto& knobs = space_->knobs();
  if (config.size() != knobs.size()) return false;
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (config[k] < 0 || static_cast<size_t>(config[k]) >= knobs[k].options.size()) return false;
  }
  return true;
}

std::vector<double> BayesOptStrategy::ToPoint(const Config& config) const {
  const auto& knobs = space_->knobs();
  std::vector<double> point(knobs.size());
  for (size_t k = 0; k < knobs.size(); ++k) {
    const size_t n = knobs[k].options.size();
    point[k] = n <= 1 ? 0.5 : static_cast<double>(config[k]) / static_cast<double>(n - 1);
  }
  return point;
}

void BayesOptStrategy::AddIfNew(const Config& config,
                                std::unordered_set<Config, ConfigHash>& taken,
                                std::vector<Config>& out) const {
  if (seen_.count(config) != 0 || taken.count(config) != 0) return;
  if (!space_->IsValid(config)) return;
  taken.insert(config);
  out.push_back(config);
}

void BayesOptStrategy::SampleUnseen(int count, std::unordered_set<Config, ConfigHash>& exclude,
                                    std::vector<Config>& out) {
  if (count <= 0) return;
  if (!valid_pool_.has_value() && space_->Size() <= kPoolLimit) {
    std::vector<uint64_t> pool;
    for (uint64_t i = 0; i < space_->Size(); ++i) {
      if (space_->IsValid(space_->FromIndex(i))) pool.push_back(i);
    }
    valid_pool_ = std::move(pool);
  }
  if (valid_pool_.has_value()) {
    // Partial Fisher-Yates over the unseen valid points, so the picks are in random order.
    std::vector<uint64_t> unseen;
    std::vector<Config> configs;
    for (uint64_t index : *valid_pool_) {
      Config c = space_->FromIndex(index);
      if (seen_.count(c) == 0 && exclude.count(c) == 0) unseen.push_back(index);
    }
    const size_t take = std::min<size_t>(count, unseen.size());
    for (size_t i = 0; i < take; ++i) {
      std::swap(unseen[i], unseen[i + UniformBelow(rng_, unseen.size() - i)]);
      Config c = space_->FromIndex(unseen[i]);
      exclude.insert(c);
      out.push_back(std::move(c));
    }
    return;
  }
  const int64_t max_draws = std::max<int64_t>(100000, int64_t{50} * count);
  int added = 0;
  for (int64_t draw = 0; draw < max_draws && added < count; ++draw) {
    Config c = space_->Draw(rng_);
    if (seen_.count(c) != 0 || exclude.count(c) != 0 || !space_->IsValid(c)) continue;
    exclude.insert(c);
    out.push_back(c);
    ++added;
  }
}

std::vector<Config> BayesOptStrategy::Candidates() {
  std::unordered_set<Config, ConfigHash> taken;
  std::vector<Config> out;
  SampleUnseen(options_.candidates, taken, out);

  // Local refinement around the best measured configs.
  std::vector<size_t> ranked;
  for (size_t i = 0; i < observations_.size(); ++i) {
    if (observations_[i].ok) ranked.push_back(i);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    return observations_[a].log_cost < observations_[b].log_cost;
  });
  for (size_t r = 0; r < std::min<size_t>(5, ranked.size()); ++r) {
    for (const Config& n : space_->Neighbours(observations_[ranked[r]].config)) {
      AddIfNew(n, taken, out);
    }
  }
  if (!ranked.empty()) {
    for (const Config& n : space_->Neighbours(observations_[ranked[0]].config)) {
      for (const Config& nn : space_->Neighbours(n)) AddIfNew(nn, taken, out);
    }
    const size_t parents = std::min<size_t>(10, ranked.size());
    const auto& knobs = space_->knobs();
    for (int m = 0; m < options_.candidates / 8; ++m) {
      Config c = observations_[ranked[UniformBelow(rng_, parents)]].config;
      const int changes = 1 + static_cast<int>(UniformBelow(rng_, 2));
      for (int j = 0; j < changes; ++j) {
        const size_t k = UniformBelow(rng_, knobs.size());
        c[k] = static_cast<int32_t>(UniformBelow(rng_, knobs[k].options.size()));
      }
      AddIfNew(space_->Canonical(std::move(c)), taken, out);
    }
  }

  // The cost model, when trained, nominates its favourites among more random configs.
  if (cost_model_ != nullptr && cost_model_->trained()) {
    std::vector<Config> extra;
    SampleUnseen(options_.candidates, taken, extra);
    if (!extra.empty()) {
      std::vector<double> scores = cost_model_->Predict(extra);
      TUNE_CHECK(scores.size() == extra.size())
          << "cost model returned " << scores.size() << " scores for " << extra.size();
      std::vector<size_t> order(extra.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return scores[a] > scores[b]; });
      const size_t keep = std::max<size_t>(1, extra.size() / 10);
      for (size_t i = 0; i < keep; ++i) out.push_back(std::move(extra[order[i]]));
    }
  }
  return out;
}

double BayesOptStrategy::FailurePenalty() const {
  if (!std::isfinite(best_log_cost_)) return 0.0;
  return worst_log_cost_ + std::max(0.5 * (worst_log_cost_ - best_log_cost_), 0.1);
}

int BayesOptStrategy::ActiveCount() const {
  int n = 0;
  for (const AcquisitionState& a : portfolio_) n += a.active ? 1 : 0;
  return n;
}

int BayesOptStrategy::NextScheduledAcquisition() {
  // Smooth weighted round-robin: deterministic, proportional to the weights over time.
  double total = 0.0;
  int pick = -1;
  for (size_t a = 0; a < portfolio_.size(); ++a) {
    AcquisitionState& s = portfolio_[a];
    if (!s.active) continue;
    const double weight = 1.0 + s.improvements;
    total += weight;
    s.schedule_credit += weight;
    if (pick < 0 || s.schedule_credit > portfolio_[pick].schedule_credit) {
      pick = static_cast<int>(a);
    }
  }
  TUNE_CHECK(pick >= 0) << "no active acquisition";
  portfolio_[pick].schedule_credit -= total;
  return pick;
}

std::vector<Config> BayesOptStrategy::Propose(int batch) {
  std::vector<Config> out;
  if (batch <= 0) return out;
  std::vector<Config> candidates = Candidates();
  if (candidates.empty()) return out;

  const int known = static_cast<int>(observations_.size() + pending_.size());
  const int random_slots = observations_.empty()
                               ? batch
                               : std::clamp(options_.initial_samples - known, 0, batch);
  // Random candidates come first in `candidates`, already in random order.
  const size_t random_take = std::min<size_t>(random_slots, candidates.size());
  for (size_t i = 0; i < random_take; ++i) out.push_back(candidates[i]);
  if (static_cast<int>(out.size()) < batch && random_take < candidates.size()) {
    // Training set: the best half by target plus the most recent of the rest.
    const double penalty = FailurePenalty();
    std::vector<double> targets(observations_.size());
    for (size_t i = 0; i < observations_.size(); ++i) {
      targets[i] = observations_[i].ok ? observations_[i].log_cost : penalty;
    }
    std::vector<size_t> train(observations_.size());
    std::iota(train.begin(), train.end(), 0);
    if (train.size() > static_cast<size_t>(kMaxTrainingPoints)) {
      std::vector<size_t> by_target = train;
      std::stable_sort(by_target.begin(), by_target.end(),
                       [&](size_t a, size_t b) { return targets[a] < targets[b]; });
      std::vector<bool> chosen(observations_.size(), false);
      for (int i = 0; i < kMaxTrainingPoints / 2; ++i) chosen[by_target[i]] = true;
      int count = kMaxTrainingPoints / 2;
      for (size_t i = observations_.size(); i-- > 0 && count < kMaxTrainingPoints;) {
        if (!chosen[i]) {
          chosen[i] = true;
          ++count;
        }
      }
      train.clear();
      for (size_t i = 0; i < observations_.size(); ++i) {
        if (chosen[i]) train.push_back(i);
      }
    }
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    double incumbent = kInf;
    for (size_t i : train) {
      x.push_back(observations_[i].point);
      y.push_back(targets[i]);
      incumbent = std::min(incumbent, targets[i]);
    }
    GaussianProcess gp;
    gp.Fit(x, y);

    // Points to condition on first (pending, random picks), then the selectable candidates.
    std::vector<std::vector<double>> points;
    const size_t pending_from =
        pending_.size() > static_cast<size_t>(kMaxBelievedPending)
            ? pending_.size() - kMaxBelievedPending
            : 0;
    for (size_t i = pending_from; i < pending_.size(); ++i) points.push_back(ToPoint(pending_[i]));
    const size_t first_candidate = points.size();
    for (const Config& c : candidates) points.push_back(ToPoint(c));
    GaussianProcess::Posterior posterior = gp.PredictAll(points);
    for (size_t i = 0; i < first_candidate + random_take; ++i) posterior.Believe(i);

    std::vector<bool> taken(points.size(), false);
    for (size_t i = 0; i < first_candidate + random_take; ++i) taken[i] = true;
    const double xi = options_.xi * gp.target_scale();
    const double kappa = options_.kappa;
    auto score = [&](Acquisition acquisition, size_t i) {
      const double mu = posterior.mean()[i];
      const double sigma = std::sqrt(posterior.variance()[i]);
      switch (acquisition) {
        case Acquisition::kExpectedImprovement:
          return LogExpectedImprovement(incumbent - xi - mu, sigma);
        case Acquisition::kProbabilityOfImprovement:
          return (incumbent - xi - mu) / std::max(sigma, 1e-12);
        case Acquisition::kUpperConfidenceBound:
          return kappa * sigma - mu;
      }
      return 0.0;
    };
    auto favourite = [&](Acquisition acquisition) {
      size_t best = points.size();
      double best_score = -kInf;
      for (size_t i = first_candidate; i < points.size(); ++i) {
        if (taken[i]) continue;
        const double s = score(acquisition, i);
        if (best == points.size() || s > best_score) {
          best = i;
          best_score = s;
        }
      }
      return best;
    };

    while (static_cast<int>(out.size()) < batch) {
      const int owner = portfolio_.size() == 1 ? 0 : NextScheduledAcquisition();
      const size_t chosen = favourite(portfolio_[owner].acquisition);
      if (chosen == points.size()) break;
      if (ActiveCount() > 1) {
        std::vector<size_t> agreeing;
        for (size_t a = 0; a < portfolio_.size(); ++a) {
          if (!portfolio_[a].active) continue;
          if (static_cast<int>(a) == owner || favourite(portfolio_[a].acquisition) == chosen) {
            agreeing.push_back(a);
          }
        }
        for (size_t a = 0; a < portfolio_.size(); ++a) {
          AcquisitionState& s = portfolio_[a];
          if (!s.active) continue;
          const bool agreed =
              agreeing.size() >= 2 &&
              std::find(agreeing.begin(), agreeing.end(), a) != agreeing.end();
          s.agreements += agreed ? 1 : 0;
          s.recent_agreements.push_back(agreed);
          if (static_cast<int>(s.recent_agreements.size()) > kAgreementWindow) {
            s.recent_agreements.pop_front();
          }
        }
      }
      taken[chosen] = true;
      posterior.Believe(chosen);
      const Config& config = candidates[chosen - first_candidate];
      portfolio_[owner].proposed += 1;
      proposer_[config] = owner;
      out.push_back(config);
    }
    if (mode_ == Mode::kMulti) ReviewAgreements();
  }
  for (const Config& c : out) {
    seen_.insert(c);
    pending_.push_back(c);
  }
  return out;
}

void BayesOptStrategy::ReviewAgreements() {
  std::vector<size_t> redundant;
  for (size_t a = 0; a < portfolio_.size(); ++a) {
    const AcquisitionState& s = portfolio_[a];
    if (!s.active) continue;
    const int n = static_cast<int>(std::count(s.recent_agreements.begin(),
                                              s.recent_agreements.end(), true));
    if (n >= kAgreementLimit) redundant.push_back(a);
  }
  if (redundant.size() < 2) return;
  // Keep the best by quality (unmeasured counts as neutral: compared by improvements, then
  // by portfolio order).
  size_t keep = redundant[0];
  auto better = [&](size_t a, size_t b) {
    const AcquisitionState& sa = portfolio_[a];
    const AcquisitionState& sb = portfolio_[b];
    const bool qa = sa.quality_weight > 0;
    const bool qb = sb.quality_weight > 0;
    if (qa && qb && sa.quality() != sb.quality()) return sa.quality() < sb.quality();
    if (qa != qb) return qa;
    return sa.improvements > sb.improvements;
  };
  for (size_t a : redundant) {
    if (better(a, keep)) keep = a;
  }
  for (size_t a : redundant) {
    if (a != keep) portfolio_[a].active = false;
  }
  for (AcquisitionState& s : portfolio_) s.recent_agreements.clear();
}

void BayesOptStrategy::ReviewQuality() {
  if (ActiveCount() < 2) return;
  double sum = 0.0;
  int n = 0;
  auto rated = [](const AcquisitionState& s) {
    return s.active && s.measured >= kMinQualitySamples && s.quality_weight > 0;
  };
  for (const AcquisitionState& s : portfolio_) {
    if (rated(s)) {
      sum += s.quality();
      ++n;
    }
  }
  if (n < 2) return;
  const double mean = sum / n;
  int worst = -1;
  for (size_t a = 0; a < portfolio_.size(); ++a) {
    AcquisitionState& s = portfolio_[a];
    if (!rated(s)) continue;
    if (s.quality() > mean + kQualityMargin) s.strikes += 1;
    if (s.strikes >= kStrikeLimit &&
        (worst < 0 || s.strikes > portfolio_[worst].strikes ||
         (s.strikes == portfolio_[worst].strikes && s.quality() > portfolio_[worst].quality()))) {
      worst = static_cast<int>(a);
    }
  }
  if (worst >= 0) {
    portfolio_[worst].active = false;
    for (AcquisitionState& s : portfolio_) s.strikes = 0;
  }
}

void BayesOptStrategy::Update(const std::vector<MeasuredConfig>& results) {
  std::unordered_set<Config, ConfigHash> reported;
  for (const MeasuredConfig& r : results) {
    seen_.insert(r.config);
    reported.insert(r.config);
    if (!InRange(r.config)) continue;  // not of this space: nothing to learn from
    const bool ok = r.ok && std::isfinite(r.cost);
    const double log_cost = ok ? std::log(std::max(r.cost, 1e-300)) : 0.0;
    const bool improved = ok && std::isfinite(best_log_cost_) && log_cost < best_log_cost_;
    if (ok) {
      best_log_cost_ = std::min(best_log_cost_, log_cost);
      worst_log_cost_ = std::max(worst_log_cost_, log_cost);
    }
    auto it = observation_index_.find(r.config);
    if (it == observation_index_.end()) {
      observation_index_.emplace(r.config, observations_.size());
      observations_.push_back({r.config, ToPoint(r.config), log_cost, ok});
    } else {
      observations_[it->second].log_cost = log_cost;
      observations_[it->second].ok = ok;
    }
    auto owner = proposer_.find(r.config);
    if (owner != proposer_.end()) {
      AcquisitionState& s = portfolio_[owner->second];
      s.measured += 1;
      s.improvements += improved ? 1 : 0;
      if (ok || std::isfinite(worst_log_cost_)) {
        const double quality = ok ? log_cost : worst_log_cost_;
        s.quality_sum = kQualityDiscount * s.quality_sum + quality;
        s.quality_weight = kQualityDiscount * s.quality_weight + 1.0;
      }
      proposer_.erase(owner);
    }
  }
  std::erase_if(pending_, [&](const Config& c) { return reported.count(c) != 0; });
  if (mode_ == Mode::kMulti) ReviewQuality();
}

}  // namespace tune::search
