// "auto": the default search strategy, the one that did best across recorded spaces.
#pragma once

namespace tune::search {

class StrategyRegistry;

/// "auto" names the strategy a user gets without choosing: AutoStrategyChoice(), picked by
/// replaying every strategy on the development spaces (three recorded Kernel Tuner spaces:
/// convolution, GEMM, pnpoly) and checked on sixteen held-out recorded spaces, by the mean
/// methodology score P over budgets 25-200 and spaces, subject to never being below random search
/// on any of them (docs/BENCHMARKS.md, "Search strategies"). SearchStrategy::Create("auto", ...)
/// returns that strategy itself, so records name the strategy that proposed them.
class AutoStrategy {
 public:
  /// The registered name auto stands for.
  static const char* Choice();
  /// Registers "auto" with `registry`; it reads the option groups of its choice (registered
  /// by that strategy, so "auto" lists no keys of its own).
  static void Register(StrategyRegistry& registry);
};

}  // namespace tune::search
