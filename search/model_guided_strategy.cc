// ModelGuidedStrategy implementation: random share, stall tracking, seen and measured configs.
#include "search/model_guided_strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/status/statusor.h"
#include "base/check.h"
#include "search/diversity.h"
#include "search/strategy_registry.h"

namespace tune::search {
namespace {

constexpr size_t kCandidatesPerSlot = 4;
constexpr size_t kMinCandidates = 64;
/// A result improves on the best (ending a stall) only by more than this share: smaller
/// gains are measurement noise on a plateau.
constexpr double kMinGain = 0.01;
/// Random draws per model slot when screening random configs for likely failures.
constexpr size_t kScreenDrawsPerSlot = 64;
/// How many times the overall odds of failing a candidate's knobs must make its own odds
/// before the failure screen drops it.
constexpr double kFailureEvidence = 3.0;
/// Rejection draws per random valid config.
constexpr int kSampleTries = 100;
/// The best measured configs whose neighbours the stalled search measures (stalled_local).
constexpr size_t kLocalParents = 3;
/// Draws per neighbour slot (a parent, a knob, an option) before the slot goes to random.
constexpr size_t kNeighbourDrawsPerSlot = 64;

}  // namespace

std::vector<StrategyOptionKey> ModelGuidedStrategy::OptionKeys() {
  using O = ModelGuidedOptions;
  constexpr auto kGroup = &StrategyOptions::model_guided;
  return {
      RealOptionKey("eps_greedy", kGroup, &O::eps_greedy, 0, 1),
      RealOptionKey("eps_stalled", kGroup, &O::eps_stalled, 0, 1),
      IntOptionKey("explore_after", kGroup, &O::explore_after, 1, kMaxCountOption),
      RealOptionKey("stalled_local", kGroup, &O::stalled_local, 0, 1),
      RealOptionKey("measured_share", kGroup, &O::measured_share, 0, 1),
      IntOptionKey("diversity_min_distance", kGroup, &O::diversity_min_distance, 1, kMaxCountOption),
      RealOptionKey("failure_threshold", kGroup, &O::failure_threshold, 0, 1),
  };
}

ModelGuidedStrategy::ModelGuidedStrategy(const ConfigSpace* space, uint64_t seed,
                                         const ModelGuidedOptions& options, uint64_t random_salt)
    : space_(space),
      options_(options),
      rng_(seed),
      random_(space, seed ^ random_salt),  // its own stream, same seed -> same run
      best_cost_(std::numeric_limits<double>::infinity()) {
  TUNE_CHECK(space_ != nullptr) << "a model-guided strategy needs a space";
  TUNE_CHECK(options.eps_greedy >= 0 && options.eps_greedy <= 1)
      << "eps_greedy " << options.eps_greedy;
  TUNE_CHECK(options.eps_stalled >= 0 && options.eps_stalled <= 1)
      << "eps_stalled " << options.eps_stalled;
  TUNE_CHECK(options.explore_after >= 1) << "explore_after " << options.explore_after;
  TUNE_CHECK(options.stalled_local >= 0 && options.stalled_local <= 1)
      << "stalled_local " << options.stalled_local;
  TUNE_CHECK(options.measured_share >= 0 && options.measured_share <= 1)
      << "measured_share " << options.measured_share;
  TUNE_CHECK(options.failure_threshold >= 0 && options.failure_threshold <= 1)
      << "failure_threshold " << options.failure_threshold;
  for (size_t k = 0; k < space_->knobs().size(); ++k) {
    if (space_->knobs()[k].options.size() > 1) mutable_knobs_.push_back(k);
    knob_failed_.emplace_back(space_->knobs()[k].options.size(), 0);
    knob_ok_.emplace_back(space_->knobs()[k].options.size(), 0);
  }
}

double ModelGuidedStrategy::Uniform01() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // portable, unlike <random>'s
}

std::vector<double> ModelGuidedStrategy::Score(const std::vector<Config>& configs) {
  std::vector<double> scores = cost_model_->Predict(configs);
  TUNE_CHECK(scores.size() == configs.size())
      << "cost model gave " << scores.size() << " scores for " << configs.size() << " configs";
  for (double& s : scores) {
    if (std::isnan(s)) s = -std::numeric_limits<double>::infinity();
  }
  return scores;
}

std::vector<Config> ModelGuidedStrategy::BestMeasured(size_t count) const {
  std::vector<size_t> order(measured_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return measured_[a].first < measured_[b].first; });
  std::vector<Config> out;
  std::unordered_set<Config, ConfigHash> taken;
  for (size_t i : order) {
    if (out.size() >= count) break;
    if (taken.insert(measured_[i].second).second) out.push_back(measured_[i].second);
  }
  return out;
}

std::vector<Config> ModelGuidedStrategy::Neighbours(size_t count,
                                                    const std::unordered_set<Config, ConfigHash>& taken) {
  std::vector<Config> out;
  const std::vector<Config> parents = BestMeasured(kLocalParents);
  if (count == 0 || parents.empty() || mutable_knobs_.empty()) return out;
  std::unordered_set<Config, ConfigHash> picked;
  for (size_t draw = 0; out.size() < count && draw < kNeighbourDrawsPerSlot * count; ++draw) {
    Config c = parents[rng_() % parents.size()];
    const size_t knob = mutable_knobs_[rng_() % mutable_knobs_.size()];
    const size_t options = space_->knobs()[knob].options.size();
    const int option = static_cast<int>(rng_() % (options - 1));
    c[knob] = option >= c[knob] ? option + 1 : option;  // any option but the parent's
    c = space_->Canonical(std::move(c));  // a knob of an inactive condition changes nothing
    if (!space_->IsValid(c) || Seen(c) || taken.count(c) != 0 || !picked.insert(c).second) continue;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Config> ModelGuidedStrategy::MeasuredStarts(size_t count) const {
  return BestMeasured(
      std::min<size_t>(count, static_cast<size_t>(std::lround(options_.measured_share * count))));
}

double ModelGuidedStrategy::FailureChance(const Config& config) const {
  if (failed_count_ < 2 || ok_count_ < 1) return 0.0;
  const double f = failed_count_;
  const double o = ok_count_;
  double log_odds = std::log(f / o);
  for (size_t k : mutable_knobs_) {
    const double v = static_cast<double>(knob_ok_[k].size());
    log_odds += std::log((knob_failed_[k][config[k]] + 1.0) / (f + v)) -
                std::log((knob_ok_[k][config[k]] + 1.0) / (o + v));
  }
  return 1.0 / (1.0 + std::exp(-log_odds));
}

std::vector<Config> ModelGuidedStrategy::Propose(int batch) {
  std::vector<Config> out;
  if (batch <= 0) return out;
  int model_slots = 0, local_slots = 0;
  if (cost_model_ != nullptr && cost_model_->trained()) {
    random_credit_ += (stalled() ? options_.eps_stalled : options_.eps_greedy) * batch;
    const int random_slots = std::min(batch, static_cast<int>(std::floor(random_credit_)));
    random_credit_ -= random_slots;
    model_slots = batch - random_slots;
    if (stalled()) {
      local_credit_ += options_.stalled_local * random_slots;
      local_slots = std::min(random_slots, static_cast<int>(std::floor(local_credit_)));
      local_credit_ -= local_slots;
    }
  }
  if (model_slots > 0) {
    const size_t capacity =
        std::max(kMinCandidates, kCandidatesPerSlot * static_cast<size_t>(model_slots));
    std::vector<Config> candidates = Candidates(capacity);
    const bool judge = options_.failure_threshold < 1 && failed_count_ >= 2 && ok_count_ >= 1;
    // A candidate is dropped only when its knobs, not the space's overall failure rate, make
    // failing likely: its chance exceeds the threshold and is at least kFailureEvidence times
    // the overall odds (where failures are scattered with no knob to blame -- half the space
    // failing at random -- the estimate sits at the base rate and drops nothing).
    const double base_odds = static_cast<double>(failed_count_) / static_cast<double>(ok_count_);
    auto likely_fails = [&](const Config& c) {
      const double p = FailureChance(c);
      return p > options_.failure_threshold && p / (1.0 - p) >= kFailureEvidence * base_odds;
    };
    if (judge) {
      candidates.erase(std::remove_if(candidates.begin(), candidates.end(), likely_fails),
                       candidates.end());
    }
    out = SelectDiverse(candidates, model_slots, options_.diversity_min_distance);
    if (judge) {
      // Slots the model's judged candidates leave: random valid unseen configs outside
      // mostly failing neighbourhoods, as far as a bounded number of draws finds them.
      std::unordered_set<Config, ConfigHash> picked(out.begin(), out.end());
      for (size_t tries = 0; static_cast<int>(out.size()) < model_slots &&
                             tries < kScreenDrawsPerSlot * static_cast<size_t>(model_slots);
           ++tries) {
        absl::StatusOr<Config> sample = space_->Sample(rng_, kSampleTries);
        if (!sample.ok()) break;
        if (Seen(*sample) || picked.count(*sample) != 0 || likely_fails(*sample)) continue;
        picked.insert(*sample);
        out.push_back(*std::move(sample));
      }
    }
  }
  if (local_slots > 0) {
    const std::unordered_set<Config, ConfigHash> picked(out.begin(), out.end());
    for (Config& c : Neighbours(static_cast<size_t>(local_slots), picked)) out.push_back(std::move(c));
  }
  if (!out.empty()) {
    std::vector<MeasuredConfig> taken;
    for (const Config& c : out) {
      visited_.insert(c);
      taken.push_back({c});
    }
    random_.Update(taken);  // never to be proposed as a random config too
  }
  for (Config& c : random_.Propose(batch - static_cast<int>(out.size()))) {
    visited_.insert(c);
    out.push_back(std::move(c));
  }
  return out;
}

void ModelGuidedStrategy::Update(const std::vector<MeasuredConfig>& results) {
  for (const MeasuredConfig& r : results) {
    visited_.insert(r.config);
    const bool ok = r.ok && std::isfinite(r.cost);
    if (ok && r.cost < best_cost_ * (1 - kMinGain)) {
      stall_ = 0;
    } else {
      ++stall_;
    }
    if (ok) best_cost_ = std::min(best_cost_, r.cost);
    // Only valid configs can start a chain or join a population (a record database may
    // hold stale ones).
    if (ok && space_->IsValid(r.config)) measured_.emplace_back(r.cost, r.config);
    if (space_->IsValid(r.config)) {
      std::vector<std::vector<int>>& counts = ok ? knob_ok_ : knob_failed_;
      for (size_t k = 0; k < r.config.size() && k < counts.size(); ++k) counts[k][r.config[k]] += 1;
      (ok ? ok_count_ : failed_count_) += 1;
    }
    if (!ok) failed_set_.insert(r.config);
  }
  random_.Update(results);
}

}  // namespace tune::search
