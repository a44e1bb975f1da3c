// SaStrategy implementation: persistent parallel annealing chains ranked by the cost model.
#include "search/sa_strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "base/check.h"
#include "search/diversity.h"
#include "search/strategy_registry.h"

namespace tune::search {
namespace {

constexpr int kMoveTries = 8;       // invalid single-knob moves tried before staying put
constexpr int kSampleTries = 1000;  // rejection draws per random chain start

}  // namespace

void SaStrategy::Register(StrategyRegistry& registry) {
  std::vector<StrategyOptionKey> keys = OptionKeys();
  constexpr auto kGroup = &StrategyOptions::sa;
  keys.push_back(IntOptionKey("sa_chains", kGroup, &SaOptions::chains, 1, kMaxPoolOption));
  keys.push_back(IntOptionKey("sa_steps", kGroup, &SaOptions::steps, 0, kMaxCountOption));
  keys.push_back(IntOptionKey("sa_early_stop", kGroup, &SaOptions::early_stop, 1, kMaxCountOption));
  registry.Register({"sa",
                     [](const ConfigSpace* space, const StrategyOptions& options) {
                       return std::unique_ptr<SearchStrategy>(
                           new SaStrategy(space, options.seed, options.model_guided, options.sa));
                     },
                     std::move(keys)});
}

SaStrategy::SaStrategy(const ConfigSpace* space, uint64_t seed, const ModelGuidedOptions& guide,
                       const SaOptions& options)
    : ModelGuidedStrategy(space, seed, guide, 0x5a5a5a5a5a5a5a5aull), sa_(options) {
  TUNE_CHECK(sa_.chains >= 1) << "sa_chains " << sa_.chains;
  TUNE_CHECK(sa_.steps >= 0) << "sa_steps " << sa_.steps;
  TUNE_CHECK(sa_.early_stop >= 1) << "sa_early_stop " << sa_.early_stop;
}

bool SaStrategy::Move(const Config& from, Config& to) {
  if (mutable_knobs_.empty()) return false;
  for (int attempt = 0; attempt < kMoveTries; ++attempt) {
    to = from;
    const size_t k = mutable_knobs_[UniformBelow(rng_, mutable_knobs_.size())];
    const int32_t n = static_cast<int32_t>(space_->knobs()[k].options.size());
    const uint64_t kind = UniformBelow(rng_, 4);
    int32_t value;
    if (kind < 2) {  // an adjacent option, reflected at the ends
      value = from[k] + (kind == 0 ? -1 : 1);
      if (value < 0 || value >= n) value = 2 * from[k] - value;
    } else {  // any other option
      value = static_cast<int32_t>(UniformBelow(rng_, static_cast<uint64_t>(n - 1)));
      if (value >= from[k]) ++value;
    }
    to[k] = value;
    to = space_->Canonical(std::move(to));  // a variant's knobs reset when it is left
    if (to != from && space_->IsValid(to) && !KnownFailure(to)) return true;
  }
  to = from;
  return false;
}

std::vector<Config> SaStrategy::Candidates(size_t capacity) {
  const size_t chains = static_cast<size_t>(sa_.chains);
  std::vector<Config> states = MeasuredStarts(chains);
  size_t sampled_starts = 0;  // set when sampling fails: only that many starts to cycle
  while (states.size() < chains) {
    const size_t slot = states.size();
    if (slot < chains_.size() && !KnownFailure(chains_[slot])) {
      states.push_back(chains_[slot]);  // a chain that stopped on a since-failed config restarts
      continue;
    }
    if (sampled_starts == 0) {
      absl::StatusOr<Config> sample = space_->Sample(rng_, kSampleTries);
      if (sample.ok() && KnownFailure(*sample) && states.size() + 1 < chains) {
        sample = space_->Sample(rng_, kSampleTries);  // one more draw away from a failure
      }
      if (sample.ok()) {
        states.push_back(*std::move(sample));
        continue;
      }
      if (states.empty()) return {};
      sampled_starts = slot;  // a nearly all-invalid space: cycle the starts we have
    }
    Config copy = states[slot % sampled_starts];
    states.push_back(std::move(copy));
  }

  TopCandidates top(capacity);
  auto offer = [&](const Config& c, double score) {
    return !Seen(c) && top.Offer(c, score);
  };
  std::vector<double> scores = Score(states);
  for (size_t i = 0; i < states.size(); ++i) offer(states[i], scores[i]);

  const int steps = sa_.steps;
  std::vector<Config> moved(states.size());
  double scale = 1;
  int last_change = 0;
  for (int step = 0; step < steps && step - last_change < sa_.early_stop; ++step) {
    const double temperature = 1.0 - static_cast<double>(step + 1) / steps;
    for (size_t i = 0; i < states.size(); ++i) Move(states[i], moved[i]);
    std::vector<double> next = Score(moved);
    if (step == 0) {
      // Normalise score changes by the median size of one move's change (the median, so a
      // few moves into failing configs with extreme scores do not flatten the rest).
      std::vector<double> changes;
      for (size_t i = 0; i < states.size(); ++i) {
        const double d = std::fabs(next[i] - scores[i]);
        if (std::isfinite(d) && d > 0) changes.push_back(d);
      }
      if (!changes.empty()) {
        std::nth_element(changes.begin(), changes.begin() + changes.size() / 2, changes.end());
        scale = changes[changes.size() / 2];
      }
    }
    for (size_t i = 0; i < states.size(); ++i) {
      if (offer(moved[i], next[i])) last_change = step;
      bool accept;
      if (next[i] >= scores[i]) {
        accept = true;
      } else if (temperature <= 0 || !std::isfinite(next[i] - scores[i])) {
        accept = false;
      } else {
        accept = Uniform01() < std::exp((next[i] - scores[i]) / (scale * temperature));
      }
      if (accept) {
        std::swap(states[i], moved[i]);
        scores[i] = next[i];
      }
    }
  }
  chains_ = std::move(states);
  return top.Sorted();
}

}  // namespace tune::search
