// StrategyRegistry: search strategies by name, each with its factory and the option keys it reads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "search/space.h"
#include "search/strategy.h"

namespace tune::search {

/// One StrategyOptions field addressed by text (`--strategy-option KEY=VALUE`).
struct StrategyOptionKey {
  /// The key, e.g. "sa_chains".
  std::string name;
  /// Parses `value`, checks its range and assigns the field; InvalidArgument naming the key,
  /// the value and what was expected otherwise, with `options` unchanged.
  std::function<absl::Status(StrategyOptions& options, const std::string& value)> set;
};

/// Makes a strategy for `space` (not null, not owned, outlives the result) from the groups of
/// `options` it reads; InvalidArgument where those make no strategy.
using StrategyFactory = std::function<absl::StatusOr<std::unique_ptr<SearchStrategy>>(
    const ConfigSpace* space, const StrategyOptions& options)>;

/// A registered strategy.
struct StrategyEntry {
  /// The name SearchStrategy::Create takes.
  std::string name;
  StrategyFactory create;
  /// The keys of the fields it reads, besides "seed" (which every strategy may read). Two
  /// strategies that read the same field list the same key, made by one function (the
  /// model-guided keys of "sa" and "evolutionary").
  std::vector<StrategyOptionKey> option_keys;
};

/// The table behind SearchStrategy::Create, SetStrategyOption and StrategyOptionNames. Each
/// strategy class registers itself (a static Register(StrategyRegistry&)) with a factory and
/// the keys it reads.
class StrategyRegistry {
 public:
  /// The built-in strategies, registered on first use in this order: random, grid, sa,
  /// evolutionary, bo, bo_ei, bo_pi, bo_ucb, bo_multi, bandit, auto (search/auto_strategy.h). Never changes afterwards, so
  /// any thread may read it.
  static const StrategyRegistry& Global();

  /// Adds `entry`; aborts when its name is taken or empty or it has no factory.
  void Register(StrategyEntry entry);
  /// The strategy registered as `name`, or null. The pointer lives as long as the registry
  /// and is invalidated by Register.
  const StrategyEntry* Find(const std::string& name) const;
  /// Registered names, in registration order.
  std::vector<std::string> Names() const;
  /// The setter of `key`: "seed" or a key some registered strategy reads; null when none does.
  const StrategyOptionKey* FindOption(const std::string& key) const;
  /// "seed", then every strategy's keys in registration order, each once.
  std::vector<std::string> OptionNames() const;

 private:
  std::vector<StrategyEntry> entries_;
};

/// Largest accepted value of a count option, and magnitude limit of a real-valued one.
inline constexpr int kMaxCountOption = 1 << 30;
/// Largest accepted value of a count option that sizes a pool of configs held at once (SA
/// chains, an evolutionary population, BO's acquisition candidates): a request cannot make a
/// strategy allocate more than this many configs per round.
inline constexpr int kMaxPoolOption = 1 << 16;
inline constexpr double kMaxRealOption = 1e9;

/// A key for the integer field `field` returns, accepting integers in [lo, hi].
StrategyOptionKey IntOptionKey(const std::string& name,
                               std::function<int&(StrategyOptions&)> field, int lo, int hi);
/// A key for the real-valued field `field` returns, accepting numbers in [lo, hi] (not NaN).
StrategyOptionKey RealOptionKey(const std::string& name,
                                std::function<double&(StrategyOptions&)> field, double lo,
                                double hi);

/// The same for the field `(options.*group).*field`, e.g. (&StrategyOptions::sa,
/// &SaOptions::chains).
template <typename Group>
StrategyOptionKey IntOptionKey(const std::string& name, Group StrategyOptions::*group,
                               int Group::*field, int lo, int hi) {
  return IntOptionKey(
      name, [group, field](StrategyOptions& o) -> int& { return (o.*group).*field; }, lo, hi);
}

template <typename Group>
StrategyOptionKey RealOptionKey(const std::string& name, Group StrategyOptions::*group,
                                double Group::*field, double lo, double hi) {
  return RealOptionKey(
      name, [group, field](StrategyOptions& o) -> double& { return (o.*group).*field; }, lo, hi);
}

/// InvalidArgument "strategy option KEY=VALUE: expected WANT", for custom setters.
absl::Status BadOptionValue(const std::string& key, const std::string& value,
                            const std::string& want);

}  // namespace tune::search
