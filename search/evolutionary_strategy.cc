// EvolutionaryStrategy implementation: rank selection, crossover and mutation under the model.
#include "search/evolutionary_strategy.h"

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

constexpr int kMutateTries = 8;     // invalid single-knob changes tried per mutation
constexpr int kCrossoverTries = 4;  // invalid or unchanged mixes tried per crossover
constexpr int kSampleTries = 1000;  // rejection draws per random population member
constexpr size_t kChildTriesPerMember = 4;
constexpr size_t kEliteDivisor = 16;

}  // namespace

void EvolutionaryStrategy::Register(StrategyRegistry& registry) {
  using O = EvolutionaryOptions;
  constexpr auto kGroup = &StrategyOptions::evolutionary;
  std::vector<StrategyOptionKey> keys = OptionKeys();
  keys.push_back(IntOptionKey("evo_population", kGroup, &O::population, 2, kMaxPoolOption));
  keys.push_back(IntOptionKey("evo_generations", kGroup, &O::generations, 0, kMaxCountOption));
  keys.push_back(RealOptionKey("evo_crossover_prob", kGroup, &O::crossover_prob, 0, 1));
  keys.push_back(RealOptionKey("evo_mutation_prob", kGroup, &O::mutation_prob, 0, 1));
  registry.Register({"evolutionary",
                     [](const ConfigSpace* space, const StrategyOptions& options) {
                       return std::unique_ptr<SearchStrategy>(new EvolutionaryStrategy(
                           space, options.seed, options.model_guided, options.evolutionary));
                     },
                     std::move(keys)});
}

EvolutionaryStrategy::EvolutionaryStrategy(const ConfigSpace* space, uint64_t seed,
                                           const ModelGuidedOptions& guide,
                                           const EvolutionaryOptions& options)
    : ModelGuidedStrategy(space, seed, guide, 0xa5a5a5a5a5a5a5a5ull), evo_(options) {
  TUNE_CHECK(evo_.population >= 2) << "evo_population " << evo_.population;
  TUNE_CHECK(evo_.generations >= 0) << "evo_generations " << evo_.generations;
  TUNE_CHECK(evo_.crossover_prob >= 0 && evo_.crossover_prob <= 1)
      << "evo_crossover_prob " << evo_.crossover_prob;
  TUNE_CHECK(evo_.mutation_prob >= 0 && evo_.mutation_prob <= 1)
      << "evo_mutation_prob " << evo_.mutation_prob;
}

bool EvolutionaryStrategy::Mutate(Config& config) {
  if (mutable_knobs_.empty()) return false;
  for (int attempt = 0; attempt < kMutateTries; ++attempt) {
    const size_t k = mutable_knobs_[UniformBelow(rng_, mutable_knobs_.size())];
    const uint64_t n = space_->knobs()[k].options.size();
    const int32_t old = config[k];
    int32_t value = static_cast<int32_t>(UniformBelow(rng_, n - 1));
    if (value >= old) ++value;
    Config mutated = config;
    mutated[k] = value;
    mutated = space_->Canonical(std::move(mutated));  // a variant's knobs reset when it is left
    if (mutated != config && space_->IsValid(mutated) && !KnownFailure(mutated)) {
      config = std::move(mutated);
      return true;
    }
  }
  return false;
}

bool EvolutionaryStrategy::Crossover(const Config& a, const Config& b, Config& child) {
  for (int attempt = 0; attempt < kCrossoverTries; ++attempt) {
    child = a;
    uint64_t bits = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (k % 64 == 0) bits = rng_();
      if ((bits >> (k % 64)) & 1) child[k] = b[k];
    }
    child = space_->Canonical(std::move(child));
    if (child != a && child != b && space_->IsValid(child) && !KnownFailure(child)) return true;
  }
  return false;
}

std::vector<Config> EvolutionaryStrategy::Candidates(size_t capacity) {
  const size_t size = static_cast<size_t>(evo_.population);
  std::vector<Config> population = MeasuredStarts(size);
  std::unordered_set<Config, ConfigHash> members(population.begin(), population.end());
  // Random members; duplicates are retried a bounded number of times (small spaces).
  for (size_t tries = 0; population.size() < size && tries < kChildTriesPerMember * size; ++tries) {
    absl::StatusOr<Config> sample = space_->Sample(rng_, kSampleTries);
    if (!sample.ok()) break;  // nearly all-invalid space: evolve what we have
    if (KnownFailure(*sample)) continue;  // never breed from a failed config
    if (members.insert(*sample).second) population.push_back(*std::move(sample));
  }
  if (population.empty()) return {};

  TopCandidates top(capacity);
  auto offer_all = [&](const std::vector<Config>& configs, const std::vector<double>& scores) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (!Seen(configs[i])) top.Offer(configs[i], scores[i]);
    }
  };
  std::vector<double> scores = Score(population);
  offer_all(population, scores);

  for (int generation = 0; generation < evo_.generations; ++generation) {
    const size_t n = population.size();
    std::vector<size_t> order(n);  // best first
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    // Rank selection: rank r (0 = best) has weight n - r; cumulative[r] = sum of weights <= r.
    std::vector<uint64_t> cumulative(n);
    uint64_t total = 0;
    for (size_t r = 0; r < n; ++r) cumulative[r] = total += n - r;
    auto select = [&]() -> const Config& {
      const uint64_t u = UniformBelow(rng_, total);
      const size_t r =
          std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
      return population[order[r]];
    };

    std::vector<Config> next;
    next.reserve(size);
    members.clear();
    const size_t elites = std::min(n, std::max<size_t>(1, size / kEliteDivisor));
    for (size_t r = 0; r < elites; ++r) {
      next.push_back(population[order[r]]);
      members.insert(population[order[r]]);
    }
    Config child;
    for (size_t tries = 0; next.size() < size && tries < kChildTriesPerMember * size; ++tries) {
      const Config& parent = select();
      bool crossed = false;
      if (n > 1 && Uniform01() < evo_.crossover_prob) {
        crossed = Crossover(parent, select(), child);
      }
      if (!crossed) child = parent;
      if (!crossed || Uniform01() < evo_.mutation_prob) {
        if (!Mutate(child) && !crossed) continue;
      }
      if (members.insert(child).second) next.push_back(child);
    }
    population = std::move(next);
    scores = Score(population);
    offer_all(population, scores);
  }
  return top.Sorted();
}

}  // namespace tune::search
