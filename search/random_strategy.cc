// RandomStrategy implementation: seeded shuffle for small spaces, rejection for large ones.
#include "search/random_strategy.h"

#include <memory>
#include <utility>

#include "base/check.h"
#include "search/strategy_registry.h"

namespace tune::search {

void RandomStrategy::Register(StrategyRegistry& registry) {
  registry.Register({"random",
                     [](const ConfigSpace* space, const StrategyOptions& options) {
                       return std::unique_ptr<SearchStrategy>(new RandomStrategy(space, options.seed));
                     },
                     {}});
}

RandomStrategy::RandomStrategy(const ConfigSpace* space, uint64_t seed)
    : space_(space),
      rng_(seed),
      use_pool_(space != nullptr && space->Size() <= kPoolLimit) {
  TUNE_CHECK(space_ != nullptr) << "RandomStrategy needs a space";
}

void RandomStrategy::BuildPool() {
  pool_built_ = true;
  const uint64_t size = space_->Size();
  for (uint64_t i = 0; i < size; ++i) {
    if (space_->IsValid(space_->FromIndex(i))) pool_.push_back(i);
  }
  // Fisher-Yates with the portable draw, so a seed gives the same order everywhere.
  for (size_t i = pool_.size(); i > 1; --i) {
    std::swap(pool_[i - 1], pool_[UniformBelow(rng_, i)]);
  }
}

std::vector<Config> RandomStrategy::Propose(int batch) {
  std::vector<Config> out;
  if (batch <= 0) return out;
  if (use_pool_) {
    if (!pool_built_) BuildPool();
    while (static_cast<int>(out.size()) < batch && !pool_.empty()) {
      Config config = space_->FromIndex(pool_.back());
      pool_.pop_back();
      if (visited_.insert(config).second) out.push_back(std::move(config));
    }
    return out;
  }
  int rejects = 0;
  while (static_cast<int>(out.size()) < batch && rejects < kMaxRejects) {
    Config config = space_->Draw(rng_);
    if (visited_.count(config) != 0 || !space_->IsValid(config)) {
      ++rejects;
      continue;
    }
    visited_.insert(config);
    out.push_back(config);
    rejects = 0;
  }
  return out;
}

void RandomStrategy::Update(const std::vector<MeasuredConfig>& results) {
  for (const MeasuredConfig& r : results) visited_.insert(r.config);
}

}  // namespace tune::search
