// RandomStrategy: proposes uniformly random valid configs, each at most once.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "search/search_strategy.h"
#include "search/space.h"

namespace tune::search {

class StrategyRegistry;

/// Uniform random search without repetition. Spaces of at most kPoolLimit points are
/// enumerated once into a seeded shuffle of their valid points, so they are exhausted
/// exactly; larger spaces are sampled by rejection and Propose returns fewer configs after
/// kMaxRejects consecutive draws that were invalid or already visited. Ignores the cost model.
/// Reads no option but the seed.
class RandomStrategy : public SearchStrategy {
 public:
  static constexpr uint64_t kPoolLimit = uint64_t{1} << 16;
  static constexpr int kMaxRejects = 100000;

  /// Registers "random" with `registry`; it reads only StrategyOptions::seed.
  static void Register(StrategyRegistry& registry);

  /// `space` is not owned and must outlive the strategy; `seed` orders the draws.
  RandomStrategy(const ConfigSpace* space, uint64_t seed);

  std::string name() const override { return "random"; }
  std::vector<Config> Propose(int batch) override;
  void Update(const std::vector<MeasuredConfig>& results) override;

 private:
  void BuildPool();

  const ConfigSpace* space_;
  std::mt19937_64 rng_;
  std::unordered_set<Config, ConfigHash> visited_;
  bool use_pool_;
  bool pool_built_ = false;
  std::vector<uint64_t> pool_;  // shuffled valid indices; consumed from the back
};

}  // namespace tune::search
