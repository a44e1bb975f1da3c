// BanditStrategy implementation: arm creation, per-slot AUC/UCB choice, dedupe and credit.
#include "search/bandit_strategy.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "search/strategy_registry.h"

namespace tune::search {
namespace {

// splitmix64 finalizer: decorrelated per-arm seeds from one seed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void BanditStrategy::Register(StrategyRegistry& registry) {
  StrategyOptionKey arms = {
      "bandit_arms", [](StrategyOptions& o, const std::string& v) {
        std::vector<std::string> names = absl::StrSplit(v, ',', absl::SkipEmpty());
        if (names.empty()) {
          return BadOptionValue("bandit_arms", v, "a comma-separated list of strategies");
        }
        for (const std::string& name : names) {
          if (name == "bandit") return BadOptionValue("bandit_arms", v, "strategies other than bandit");
        }
        o.bandit.arms = std::move(names);
        return absl::OkStatus();
      }};
  registry.Register({"bandit",
                     [](const ConfigSpace* space, const StrategyOptions& options)
                         -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
                       return Create(space, options);
                     },
                     {std::move(arms)}});
}

absl::StatusOr<std::unique_ptr<BanditStrategy>> BanditStrategy::Create(
    const ConfigSpace* space, const StrategyOptions& options) {
  TUNE_CHECK(space != nullptr) << "BanditStrategy needs a space";
  if (options.bandit.arms.empty()) {
    return absl::InvalidArgumentError("bandit strategy needs at least one arm");
  }
  std::vector<Arm> arms;
  for (size_t i = 0; i < options.bandit.arms.size(); ++i) {
    const std::string& name = options.bandit.arms[i];
    if (name == "bandit") {
      return absl::InvalidArgumentError("a bandit cannot be an arm of a bandit");
    }
    StrategyOptions arm_options = options;
    arm_options.seed = Mix(options.seed ^ Mix(i + 1));
    absl::StatusOr<std::unique_ptr<SearchStrategy>> strategy =
        SearchStrategy::Create(name, space, arm_options);
    if (!strategy.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bandit arm ", i, ": ", strategy.status().message()));
    }
    Arm arm;
    arm.strategy = std::move(*strategy);
    arm.stats.name = name;
    arms.push_back(std::move(arm));
  }
  return std::unique_ptr<BanditStrategy>(new BanditStrategy(space, std::move(arms)));
}

BanditStrategy::BanditStrategy(const ConfigSpace* space, std::vector<Arm> arms)
    : space_(space), arms_(std::move(arms)), best_cost_(std::numeric_limits<double>::infinity()) {}

void BanditStrategy::SetCostModel(CostModel* model) {
  SearchStrategy::SetCostModel(model);
  for (Arm& arm : arms_) arm.strategy->SetCostModel(model);
}

std::vector<BanditStrategy::ArmStats> BanditStrategy::arm_stats() const {
  std::vector<ArmStats> out;
  for (const Arm& arm : arms_) out.push_back(arm.stats);
  return out;
}

int BanditStrategy::PickArm(const std::vector<int>& extra) const {
  double total = 0.0;
  for (size_t a = 0; a < arms_.size(); ++a) {
    if (!arms_[a].stats.exhausted) total += arms_[a].stats.measured + arms_[a].pending + extra[a];
  }
  int pick = -1;
  double pick_score = 0.0;
  for (size_t a = 0; a < arms_.size(); ++a) {
    const Arm& arm = arms_[a];
    if (arm.stats.exhausted) continue;
    const double n = arm.stats.measured + arm.pending + extra[a];
    double score;
    if (n == 0) {
      score = std::numeric_limits<double>::infinity();
    } else {
      double auc = 0.0;
      const double h = static_cast<double>(arm.rewards.size());
      for (size_t i = 0; i < arm.rewards.size(); ++i) auc += arm.rewards[i] ? (i + 1.0) : 0.0;
      if (h > 0) auc /= h * (h + 1.0) / 2.0;
      score = auc + kExploration * std::sqrt(2.0 * std::log(total) / n);
    }
    if (pick < 0 || score > pick_score) {
      pick = static_cast<int>(a);
      pick_score = score;
    }
  }
  return pick;
}

std::vector<Config> BanditStrategy::Propose(int batch) {
  std::vector<Config> out;
  if (batch <= 0) return out;
  while (static_cast<int>(out.size()) < batch) {
    // Assign the missing slots to arms, one at a time.
    std::vector<int> share(arms_.size(), 0);
    bool any = false;
    for (int slot = static_cast<int>(out.size()); slot < batch; ++slot) {
      const int a = PickArm(share);
      if (a < 0) break;
      share[a] += 1;
      any = true;
    }
    if (!any) break;  // every arm is exhausted
    for (size_t a = 0; a < arms_.size(); ++a) {
      if (share[a] == 0) continue;
      Arm& arm = arms_[a];
      std::vector<Config> got = arm.strategy->Propose(share[a]);
      if (static_cast<int>(got.size()) < share[a]) arm.stats.exhausted = true;
      for (Config& c : got) {
        if (static_cast<int>(out.size()) >= batch) break;
        if (seen_.count(c) != 0 || !space_->IsValid(c)) continue;  // another arm's, or a bug
        seen_.insert(c);
        proposer_[c] = static_cast<int>(a);
        arm.pending += 1;
        arm.stats.proposed += 1;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

void BanditStrategy::Update(const std::vector<MeasuredConfig>& results) {
  for (const MeasuredConfig& r : results) {
    seen_.insert(r.config);
    const bool ok = r.ok && std::isfinite(r.cost);
    const bool improved = ok && std::isfinite(best_cost_) && r.cost < best_cost_;
    if (ok && r.cost < best_cost_) best_cost_ = r.cost;
    auto owner = proposer_.find(r.config);
    if (owner == proposer_.end()) continue;
    Arm& arm = arms_[owner->second];
    arm.pending -= 1;
    arm.stats.measured += 1;
    arm.stats.improvements += improved ? 1 : 0;
    arm.rewards.push_back(improved);
    if (static_cast<int>(arm.rewards.size()) > kWindow) arm.rewards.pop_front();
    proposer_.erase(owner);
  }
  for (Arm& arm : arms_) arm.strategy->Update(results);
}

}  // namespace tune::search
