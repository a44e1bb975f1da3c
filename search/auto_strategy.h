// "auto": the default search strategy, the one that did best across recorded spaces.
#pragma once

#include <string>

namespace tune::search {

class StrategyRegistry;

/// "auto" names the strategy a user gets without choosing: Choice(), picked by a sweep that
/// replays every strategy and its options on the development spaces (three recorded Kernel Tuner
/// spaces: convolution, GEMM, pnpoly), checked on held-out recorded spaces, by the mean
/// methodology score P over budgets 25-200 and spaces, subject to never being below random search
/// on any of them (docs/BENCHMARKS.md, "Search strategies"). SearchStrategy::Create("auto", ...)
/// returns that strategy itself, so records name the strategy that proposed them.
///
/// Choice() ranks candidates with its own model (a Gaussian process) and no cost model. Where
/// the user asks for a cost model (a pretrained file, the daemon's target-wide model, or an
/// explicit --cost-model), auto is ChoiceWithModel() instead, which ranks with it (Resolve()).
class AutoStrategy {
 public:
  /// The registered name auto stands for: the best across spaces without a cost model.
  static const char* Choice();
  /// What auto stands for where a cost model is asked for: the bandit over sa (which ranks with
  /// the model) and Choice().
  static const char* ChoiceWithModel();
  /// `strategy` with "auto" replaced by Choice() or, when `with_model`, ChoiceWithModel(); other
  /// names are returned as they are.
  static std::string Resolve(const std::string& strategy, bool with_model);
  /// Registers "auto" with `registry`; it reads the option groups of its choice (registered
  /// by that strategy, so "auto" lists no keys of its own).
  static void Register(StrategyRegistry& registry);
};

}  // namespace tune::search
