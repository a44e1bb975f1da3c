// BayesOptStrategy implementation: candidates, GP fit, acquisitions, kriging-believer batches.
#include "search/bayes_opt_strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "base/check.h"
#include "search/bo_feasibility.h"
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

// log Phi(z), with the asymptotic tail far below the mean so it never underflows.
double LogNormalCdf(double z) {
  if (z > -6.0) return std::log(std::max(NormalCdf(z), 1e-300));
  return -0.5 * z * z - kLogSqrt2Pi - std::log(-z);
}

double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

double SquaredDistance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t k = 0; k < a.size(); ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return s;
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
      RealOptionKey("bo_feasibility_weight", kGroup, &O::feasibility_weight, 0, kMaxRealOption),
      RealOptionKey("bo_min_feasibility", kGroup, &O::min_feasibility, 0, 1),
      IntOptionKey("bo_climb_starts", kGroup, &O::climb_starts, 0, kMaxPoolOption),
      IntOptionKey("bo_ard", kGroup, &O::ard, 0, 1),
      IntOptionKey("bo_log_values", kGroup, &O::log_values, 0, 1),
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
  TUNE_CHECK(options_.feasibility_weight >= 0 && options_.climb_starts >= 0)
      << "negative bo_feasibility_weight or bo_climb_starts";
  for (const Knob& knob : space_->knobs()) {
    KnobEncoding e;
    e.offset = encoded_dimension_;
    const size_t n = knob.options.size();
    e.categorical = knob.kind == Knob::Kind::kChoice && !knob.labels.empty() && n > 1;
    if (e.categorical) {
      e.width = static_cast<int>(n);
    } else {
      e.coordinate.assign(n, 0.5);
      bool positive = knob.kind == Knob::Kind::kChoice && options_.log_values != 0;
      for (const auto& option : knob.options) positive = positive && option.size() == 1 && option[0] > 0;
      if (positive && n > 1) {
        double lo = kInf, hi = -kInf;
        for (const auto& option : knob.options) {
          lo = std::min(lo, std::log2(static_cast<double>(option[0])));
          hi = std::max(hi, std::log2(static_cast<double>(option[0])));
        }
        for (size_t o = 0; o < n; ++o) {
          const double v = std::log2(static_cast<double>(knob.options[o][0]));
          e.coordinate[o] = hi > lo ? (v - lo) / (hi - lo) : 0.5;
        }
      } else if (n > 1) {
        for (size_t o = 0; o < n; ++o) e.coordinate[o] = static_cast<double>(o) / (n - 1);
      }
    }
    encoded_dimension_ += e.width;
    encoding_.push_back(std::move(e));
  }
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

std::vector<double> BayesOptStrategy::Encode(const Config& config) const {
  TUNE_CHECK(config.size() == encoding_.size()) << "config of " << config.size() << " knobs";
  std::vector<double> point(encoded_dimension_, 0.0);
  for (size_t k = 0; k < encoding_.size(); ++k) {
    const KnobEncoding& e = encoding_[k];
    if (e.categorical) {
      TUNE_CHECK(config[k] >= 0 && config[k] < e.width) << "option " << config[k];
      point[e.offset + config[k]] = std::sqrt(0.5);
    } else {
      point[e.offset] = e.coordinate.at(config[k]);
    }
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

std::vector<Config> BayesOptStrategy::DesignPicks(int count, const std::vector<Config>& candidates,
                                                  std::unordered_set<Config, ConfigHash>& taken) {
  std::vector<Config> out;
  if (count <= 0) return out;
  if (design_targets_.empty() && design_next_ == 0) {
    // Latin hypercube over the knobs: stratum perm[i] of each knob for point i.
    const int n = std::max(options_.initial_samples, 1);
    const auto& knobs = space_->knobs();
    design_targets_.assign(n, std::vector<double>(encoded_dimension_, 0.0));
    std::vector<int> perm(n);
    for (size_t k = 0; k < knobs.size(); ++k) {
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[UniformBelow(rng_, i + 1)]);
      const KnobEncoding& e = encoding_[k];
      for (int i = 0; i < n; ++i) {
        const double u = (perm[i] + Uniform01(rng_)) / n;
        if (e.categorical) {
          const int option = std::min(static_cast<int>(u * e.width), e.width - 1);
          design_targets_[i][e.offset + option] = std::sqrt(0.5);
        } else {
          // The coordinate range of the knob's options (all of [0,1] unless it has one option).
          const auto [lo, hi] = std::minmax_element(e.coordinate.begin(), e.coordinate.end());
          design_targets_[i][e.offset] = *lo + u * (*hi - *lo);
        }
      }
    }
  }
  // Where to look for the nearest config: every valid config of a small space, else the
  // candidates.
  auto nearest = [&](const std::vector<double>& target) -> std::optional<Config> {
    std::optional<Config> best;
    double best_d = kInf;
    auto consider = [&](const Config& c) {
      if (seen_.count(c) != 0 || taken.count(c) != 0) return;
      const double d = SquaredDistance(Encode(c), target);
      if (d < best_d) {
        best_d = d;
        best = c;
      }
    };
    if (valid_pool_.has_value()) {
      for (uint64_t index : *valid_pool_) consider(space_->FromIndex(index));
    } else {
      for (const Config& c : candidates) consider(c);
    }
    return best;
  };
  size_t next_random = 0;
  while (static_cast<int>(out.size()) < count) {
    std::optional<Config> pick;
    if (design_next_ < design_targets_.size()) {
      pick = nearest(design_targets_[design_next_++]);
    } else {
      for (; next_random < candidates.size() && !pick.has_value(); ++next_random) {
        if (taken.count(candidates[next_random]) == 0) pick = candidates[next_random];
      }
      if (!pick.has_value()) break;
    }
    if (!pick.has_value()) continue;
    taken.insert(*pick);
    out.push_back(std::move(*pick));
  }
  return out;
}

std::vector<Config> BayesOptStrategy::Propose(int batch) {
  std::vector<Config> out;
  if (batch <= 0) return out;
  std::vector<Config> candidates = Candidates();
  if (candidates.empty()) return out;

  const int known = static_cast<int>(observations_.size() + pending_.size());
  size_t ok_count = 0;
  for (const Observation& o : observations_) ok_count += o.ok ? 1 : 0;
  const int design_slots =
      ok_count == 0 ? batch : std::clamp(options_.initial_samples - known, 0, batch);
  std::unordered_set<Config, ConfigHash> design_taken;
  const std::vector<Config> design = DesignPicks(design_slots, candidates, design_taken);
  out = design;
  if (static_cast<int>(out.size()) < batch && ok_count > 0) {
    // Regression training set: ok results only, the best half by log cost plus the most
    // recent of the rest.
    std::vector<size_t> train;
    for (size_t i = 0; i < observations_.size(); ++i) {
      if (observations_[i].ok) train.push_back(i);
    }
    if (train.size() > static_cast<size_t>(kMaxTrainingPoints)) {
      std::vector<size_t> by_target = train;
      std::stable_sort(by_target.begin(), by_target.end(), [&](size_t a, size_t b) {
        return observations_[a].log_cost < observations_[b].log_cost;
      });
      std::vector<bool> chosen(observations_.size(), false);
      for (int i = 0; i < kMaxTrainingPoints / 2; ++i) chosen[by_target[i]] = true;
      int count = kMaxTrainingPoints / 2;
      for (size_t r = train.size(); r-- > 0 && count < kMaxTrainingPoints;) {
        if (!chosen[train[r]]) {
          chosen[train[r]] = true;
          ++count;
        }
      }
      std::vector<size_t> kept;
      for (size_t i : train) {
        if (chosen[i]) kept.push_back(i);
      }
      train = std::move(kept);
    }
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    double incumbent = kInf;
    for (size_t i : train) {
      x.push_back(observations_[i].point);
      y.push_back(observations_[i].log_cost);
      incumbent = std::min(incumbent, observations_[i].log_cost);
    }
    GaussianProcessOptions gp_options;
    gp_options.ard = options_.ard != 0;
    for (size_t k = 0; k < encoding_.size(); ++k) {
      for (int w = 0; w < encoding_[k].width; ++w) gp_options.dimension_groups.push_back(static_cast<int>(k));
    }
    GaussianProcess gp(gp_options);
    gp.Fit(x, y);

    // Feasibility over the latest results, ok or not.
    FeasibilityModelOptions feasibility_options;
    feasibility_options.gp.dimension_groups = gp_options.dimension_groups;
    feasibility_options.gp.ard = gp_options.ard;
    FeasibilityModel feasibility(feasibility_options);
    if (options_.feasibility_weight > 0) {
      const size_t from = observations_.size() > static_cast<size_t>(kMaxFeasibilityPoints)
                              ? observations_.size() - kMaxFeasibilityPoints
                              : 0;
      std::vector<std::vector<double>> fx;
      std::vector<bool> fy;
      for (size_t i = from; i < observations_.size(); ++i) {
        fx.push_back(observations_[i].point);
        fy.push_back(observations_[i].ok);
      }
      feasibility.Fit(fx, fy);
    }
    const bool use_feasibility = feasibility.has_failures() && options_.feasibility_weight > 0;
    // log P(feasible) of each point (all 0 while no result has failed).
    auto log_feasible = [&](const std::vector<std::vector<double>>& pts) {
      std::vector<double> out(pts.size(), 0.0);
      if (!use_feasibility) return out;
      const std::vector<double> p = feasibility.PredictAll(pts);
      for (size_t i = 0; i < pts.size(); ++i) out[i] = std::log(p[i]);
      return out;
    };

    const double xi = options_.xi * gp.target_scale();
    const double kappa = options_.kappa;
    const double scale = gp.target_scale();
    const double log_min_p = std::log(std::max(options_.min_feasibility, 1e-300));
    auto acquisition_value = [&](Acquisition acquisition, double mu, double variance,
                                 double log_p) {
      log_p *= options_.feasibility_weight;
      const double sigma = std::sqrt(std::max(variance, 0.0));
      switch (acquisition) {
        case Acquisition::kExpectedImprovement:
          return LogExpectedImprovement(incumbent - xi - mu, sigma) + log_p;
        case Acquisition::kProbabilityOfImprovement:
          return LogNormalCdf((incumbent - xi - mu) / std::max(sigma, 1e-12)) + log_p;
        case Acquisition::kUpperConfidenceBound:
          return kappa * sigma - mu + scale * log_p;
      }
      return 0.0;
    };

    // Hill-climbing of each active acquisition from its best candidates and the best
    // measured configs; the end points become candidates.
    std::unordered_set<Config, ConfigHash> candidate_set(candidates.begin(), candidates.end());
    std::vector<Config> extras;
    if (options_.climb_starts > 0) {
      std::vector<std::vector<double>> cand_points;
      cand_points.reserve(candidates.size());
      for (const Config& c : candidates) cand_points.push_back(Encode(c));
      GaussianProcess::Posterior base = gp.PredictAll(cand_points);
      const std::vector<double> cand_log_p = log_feasible(cand_points);
      std::vector<size_t> best_measured;
      for (size_t i : train) best_measured.push_back(i);
      std::stable_sort(best_measured.begin(), best_measured.end(), [&](size_t a, size_t b) {
        return observations_[a].log_cost < observations_[b].log_cost;
      });
      best_measured.resize(std::min<size_t>(best_measured.size(), 2));
      const auto& knobs = space_->knobs();
      for (const AcquisitionState& state : portfolio_) {
        if (!state.active) continue;
        const Acquisition acquisition = state.acquisition;
        std::vector<std::pair<double, size_t>> ranked;
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (design_taken.count(candidates[i]) != 0 || cand_log_p[i] < log_min_p) continue;
          ranked.push_back({acquisition_value(acquisition, base.mean()[i], base.variance()[i],
                                              cand_log_p[i]),
                            i});
        }
        const size_t starts = std::min<size_t>(options_.climb_starts, ranked.size());
        std::partial_sort(ranked.begin(), ranked.begin() + starts, ranked.end(),
                          [](const auto& a, const auto& b) {
                            return a.first > b.first || (a.first == b.first && a.second < b.second);
                          });
        std::vector<std::pair<Config, double>> start_points;
        for (size_t r = 0; r < starts; ++r) {
          start_points.push_back({candidates[ranked[r].second], ranked[r].first});
        }
        for (size_t i : best_measured) start_points.push_back({observations_[i].config, -kInf});
        for (auto& [current, current_score] : start_points) {
          for (int step = 0; step < kMaxClimbSteps; ++step) {
            std::vector<Config> moves;
            std::unordered_set<Config, ConfigHash> move_set;
            auto add_move = [&](Config c) {
              if (seen_.count(c) != 0 || design_taken.count(c) != 0 || move_set.count(c) != 0) {
                return;
              }
              if (!space_->IsValid(c)) return;
              move_set.insert(c);
              moves.push_back(std::move(c));
            };
            for (Config& n : space_->Neighbours(current)) add_move(std::move(n));
            for (int m = 0; m < kClimbMutations; ++m) {
              Config c = current;
              for (int j = 0; j < 2; ++j) {
                const size_t k = UniformBelow(rng_, knobs.size());
                c[k] = static_cast<int32_t>(UniformBelow(rng_, knobs[k].options.size()));
              }
              add_move(space_->Canonical(std::move(c)));
            }
            if (moves.empty()) break;
            std::vector<std::vector<double>> move_points;
            for (const Config& c : moves) move_points.push_back(Encode(c));
            GaussianProcess::Posterior post = gp.PredictAll(move_points);
            const std::vector<double> move_log_p = log_feasible(move_points);
            size_t best = moves.size();
            double best_score = current_score;
            for (size_t i = 0; i < moves.size(); ++i) {
              if (move_log_p[i] < log_min_p) continue;
              const double v = acquisition_value(acquisition, post.mean()[i], post.variance()[i],
                                                 move_log_p[i]);
              if (v > best_score) {
                best_score = v;
                best = i;
              }
            }
            if (best == moves.size()) break;
            current = moves[best];
            current_score = best_score;
          }
          if (seen_.count(current) == 0 && candidate_set.count(current) == 0) {
            candidate_set.insert(current);
            extras.push_back(current);
          }
        }
      }
      for (Config& c : extras) candidates.push_back(std::move(c));
    }

    // Points to condition on first (pending, design picks), then the selectable candidates.
    std::vector<std::vector<double>> points;
    const size_t pending_from =
        pending_.size() > static_cast<size_t>(kMaxBelievedPending)
            ? pending_.size() - kMaxBelievedPending
            : 0;
    for (size_t i = pending_from; i < pending_.size(); ++i) points.push_back(Encode(pending_[i]));
    for (const Config& c : design) points.push_back(Encode(c));
    const size_t first_candidate = points.size();
    for (const Config& c : candidates) points.push_back(Encode(c));
    GaussianProcess::Posterior posterior = gp.PredictAll(points);
    for (size_t i = 0; i < first_candidate; ++i) posterior.Believe(i);
    const std::vector<double> log_p = log_feasible(points);

    std::vector<bool> taken(points.size(), false);
    for (size_t i = 0; i < first_candidate; ++i) taken[i] = true;
    for (size_t i = first_candidate; i < points.size(); ++i) {
      if (design_taken.count(candidates[i - first_candidate]) != 0) taken[i] = true;
    }
    auto score = [&](Acquisition acquisition, size_t i) {
      return acquisition_value(acquisition, posterior.mean()[i], posterior.variance()[i], log_p[i]);
    };
    // Candidates below min_feasibility are chosen only when no other is left.
    auto favourite = [&](Acquisition acquisition) {
      size_t best = points.size();
      double best_score = -kInf;
      bool best_feasible = false;
      for (size_t i = first_candidate; i < points.size(); ++i) {
        if (taken[i]) continue;
        const bool feasible = log_p[i] >= log_min_p;
        if (best_feasible && !feasible) continue;
        if (feasible && !best_feasible) {
          best = points.size();
          best_feasible = true;
        }
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
      observations_.push_back({r.config, Encode(r.config), log_cost, ok});
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
