// BanditStrategy implementation: arm creation, per-slot floor/AUC/UCB choice, dedupe and credit.
#include "search/bandit_strategy.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  constexpr auto kGroup = &StrategyOptions::bandit;
  registry.Register({"bandit",
                     [](const ConfigSpace* space, const StrategyOptions& options)
                         -> absl::StatusOr<std::unique_ptr<SearchStrategy>> {
                       return Create(space, options);
                     },
                     {std::move(arms),
                      RealOptionKey("bandit_floor", kGroup, &BanditOptions::floor, 0, 1),
                      RealOptionKey("bandit_failure_penalty", kGroup,
                                    &BanditOptions::failure_penalty, 0, kMaxRealOption),
                      RealOptionKey("bandit_exploration", kGroup, &BanditOptions::exploration, 0,
                                    kMaxRealOption),
                      IntOptionKey("bandit_window", kGroup, &BanditOptions::window, 1,
                                   kMaxCountOption)}});
}

absl::StatusOr<std::unique_ptr<BanditStrategy>> BanditStrategy::Create(
    const ConfigSpace* space, const StrategyOptions& options) {
  return Create(space, options, StrategyRegistry::Global());
}

absl::StatusOr<std::unique_ptr<BanditStrategy>> BanditStrategy::Create(
    const ConfigSpace* space, const StrategyOptions& options, const StrategyRegistry& registry) {
  TUNE_CHECK(space != nullptr) << "BanditStrategy needs a space";
  const BanditOptions& bandit = options.bandit;
  if (bandit.arms.empty()) {
    return absl::InvalidArgumentError("bandit strategy needs at least one arm");
  }
  if (!(bandit.floor >= 0 && bandit.floor <= 1) || !(bandit.failure_penalty >= 0) ||
      !(bandit.exploration >= 0) || bandit.window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bandit options out of range: floor ", bandit.floor, ", failure_penalty ",
        bandit.failure_penalty, ", exploration ", bandit.exploration, ", window ", bandit.window));
  }
  std::vector<Arm> arms;
  for (size_t i = 0; i < options.bandit.arms.size(); ++i) {
    const std::string& name = options.bandit.arms[i];
    if (name == "bandit") {
      return absl::InvalidArgumentError("a bandit cannot be an arm of a bandit");
    }
    StrategyOptions arm_options = options;
    arm_options.seed = Mix(options.seed ^ Mix(i + 1));
    const StrategyEntry* entry = registry.Find(name);
    if (entry == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("bandit arm ", i, ": unknown search strategy '",
                                                     name, "' (known: ",
                                                     absl::StrJoin(registry.Names(), ", "), ")"));
    }
    absl::StatusOr<std::unique_ptr<SearchStrategy>> strategy = entry->create(space, arm_options);
    if (!strategy.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bandit arm ", i, ": ", strategy.status().message()));
    }
    Arm arm;
    arm.strategy = std::move(*strategy);
    arm.stats.name = name;
    arms.push_back(std::move(arm));
  }
  return std::unique_ptr<BanditStrategy>(new BanditStrategy(space, bandit, std::move(arms)));
}

BanditStrategy::BanditStrategy(const ConfigSpace* space, const BanditOptions& options,
                               std::vector<Arm> arms)
    : space_(space),
      options_(options),
      arms_(std::move(arms)),
      best_cost_(std::numeric_limits<double>::infinity()) {}

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
  // The exploration floor: the active arm furthest below its share of all slots so far.
  int active = 0;
  double slots = 1.0;  // all slots so far, this one included
  for (size_t a = 0; a < arms_.size(); ++a) {
    slots += arms_[a].stats.proposed + extra[a];
    if (!arms_[a].stats.exhausted) ++active;
  }
  if (active == 0) return -1;
  const double floor = options_.floor / active * slots;
  int starved = -1;
  double starved_gap = 0.0;
  for (size_t a = 0; a < arms_.size(); ++a) {
    if (arms_[a].stats.exhausted) continue;
    const double gap = floor - (arms_[a].stats.proposed + extra[a]);
    if (gap > 0 && (starved < 0 || gap > starved_gap)) {
      starved = static_cast<int>(a);
      starved_gap = gap;
    }
  }
  if (starved >= 0) return starved;

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
      for (size_t i = 0; i < arm.rewards.size(); ++i) auc += (i + 1.0) * arm.rewards[i];
      if (h > 0) auc /= h * (h + 1.0) / 2.0;
      score = auc + options_.exploration * std::sqrt(2.0 * std::log(total) / n);
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
    double reward = 0.0;
    bool improved = false;
    if (!ok) {
      reward = -options_.failure_penalty;
    } else if (std::isfinite(best_cost_) && r.cost < best_cost_) {
      improved = true;
      const double gain = std::log(best_cost_ / r.cost);
      if (r.cost > 0 && std::isfinite(gain)) {
        gain_scale_ = gain_scale_ > 0 ? (1 - kScaleWeight) * gain_scale_ + kScaleWeight * gain : gain;
        reward = gain / (gain + gain_scale_);
      } else {
        reward = 1.0;  // costs that are not positive times: no ratio, full credit
      }
    }
    if (ok && r.cost < best_cost_) best_cost_ = r.cost;
    auto owner = proposer_.find(r.config);
    if (owner == proposer_.end()) continue;
    Arm& arm = arms_[owner->second];
    arm.pending -= 1;
    arm.stats.measured += 1;
    arm.stats.improvements += improved ? 1 : 0;
    arm.stats.failures += ok ? 0 : 1;
    arm.stats.reward_sum += reward;
    arm.rewards.push_back(reward);
    if (static_cast<int>(arm.rewards.size()) > options_.window) arm.rewards.pop_front();
    proposer_.erase(owner);
  }
  for (Arm& arm : arms_) arm.strategy->Update(results);
}

}  // namespace tune::search
