// Configuration spaces: knobs, their options, constraints, and the Config value type.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::search {

/// A point in a ConfigSpace: for each knob (in declaration order) the index of the chosen
/// option. Two configs of one space are equal iff all indices are equal.
using Config = std::vector<int32_t>;

struct ConfigHash {
  size_t operator()(const Config& c) const;
};

/// Uniform integer in [0, n) for n > 0, drawn from `rng` by rejection. Unlike
/// std::uniform_int_distribution it gives the same sequence on every standard library, so a
/// seed reproduces a run anywhere.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n);

/// One tunable parameter with a finite, ordered list of options. Every option is a list of
/// integers: a split knob's option is its factors (outermost first; product = extent, or with
/// tails at least extent, see SplitTails), a choice knob's option is a single value. `labels`,
/// when not empty, names each option for printing (e.g. a loop order "mo,no,ko,mi,ni").
struct Knob {
  enum class Kind { kSplit, kChoice };
  std::string name;
  Kind kind = Kind::kChoice;
  /// A split knob's extent (the loop it splits); 0 for a choice knob.
  int64_t extent = 0;
  std::vector<std::vector<int64_t>> options;
  std::vector<std::string> labels;
  /// FromJson takes option 0 when the text lacks this knob (see ConfigSpace::AllowMissing).
  bool may_be_missing = false;
};

/// Whether a split knob's factors must divide its extent (ConfigSpace::AddSplit).
enum class SplitTails { kNone, kAllowed };

/// Padded extent of a split option: factors[0] * ... * factors.back() (>= the knob's extent;
/// equal unless the option has a tail).
int64_t PaddedExtent(const std::vector<int64_t>& factors);

/// A named predicate over configs; a config is valid iff all constraints hold.
struct Constraint {
  std::string name;
  std::function<bool(const Config&)> holds;
};

/// The cartesian product of knobs, restricted by constraints. Not thread-safe for mutation;
/// const methods are safe to call concurrently once built.
class ConfigSpace {
 public:
  /// Adds a split of `extent` into `parts` factors, outermost first. `max_inner` (0 = no bound)
  /// bounds the innermost factor. Returns the knob index.
  /// - SplitTails::kNone: every factor a divisor, product = extent.
  /// - SplitTails::kAllowed: the inner factors (all but the outermost) are divisors of `extent`
  ///   or powers of two, in any combination whose padded extent outer * inner (outer =
  ///   ceil(extent / inner), inner = their product) is at most 1.5 x extent; the last tile is then
  ///   partial and the kernel must mask the indices >= extent (a tail). Options whose product is
  ///   exactly `extent` are the divisor splits of kNone, so a prime or odd extent gets about as
  ///   many options as a power of two. Either way the options are in lexicographic order.
  /// `innermost_values` (kAllowed only) are also offered as the innermost factor, with a tail
  /// where they do not divide: register-tile sizes such as 6 or 24 that are neither divisors
  /// nor powers of two. Values above max_inner or above the extent are ignored.
  int AddSplit(const std::string& name, int64_t extent, int parts, int64_t max_inner = 0,
               SplitTails tails = SplitTails::kNone, const std::vector<int64_t>& innermost_values = {});
  /// Adds a knob choosing one of `values` (non-empty). Returns the knob index.
  int AddChoice(const std::string& name, std::vector<int64_t> values,
                std::vector<std::string> labels = {});
  /// Adds a constraint; `holds` must be pure (same answer for the same config).
  void AddConstraint(const std::string& name, std::function<bool(const Config&)> holds);
  /// Makes knob `knob` matter only where choice knob `when` has one of `values` (the knobs of
  /// one variant of a kernel): elsewhere it is pinned to option 0 by a constraint named
  /// "<knob>_pinned", so the space holds each meaningful point once. Draw, Sample, Canonical
  /// and Neighbours put pinned knobs at option 0 themselves, so pinning costs random draws
  /// no rejections. Both knobs must exist; `when` must not itself be conditional.
  void AddCondition(const std::string& knob, const std::string& when, const std::vector<int64_t>& values);
  /// Lets FromJson take option 0 of knob `name` when the text lacks it: a knob added after
  /// configs were recorded, whose option 0 means what those configs meant.
  void AllowMissing(const std::string& name);

  const std::vector<Knob>& knobs() const { return knobs_; }
  /// Index of the knob called `name`; aborts when absent (a template bug).
  int KnobIndex(const std::string& name) const;

  /// Number of points of the unconstrained product (saturates at UINT64_MAX).
  uint64_t Size() const;
  /// Mixed-radix bijection between [0, Size()) and configs; the first knob varies slowest.
  Config FromIndex(uint64_t index) const;
  uint64_t ToIndex(const Config& config) const;

  /// True iff every index is in range and every constraint holds.
  bool IsValid(const Config& config) const;
  /// Name of the first failing constraint, or "" when valid ("range" when an index is bad).
  std::string WhyInvalid(const Config& config) const;

  /// `config` with every knob that does not matter there (AddCondition) at option 0; a valid
  /// config is its own canonical form. Indices must be in range.
  Config Canonical(Config config) const;
  /// A random point of the unconstrained product: each knob uniform over its options (one
  /// draw from `rng` per knob, in knob order), then made Canonical. Not necessarily valid.
  Config Draw(std::mt19937_64& rng) const;
  /// A random valid config: Draw()s until one is valid; NotFound after `max_tries` invalid
  /// draws. Uniform over the valid configs when the space has no conditions; with them,
  /// uniform over each variant's knobs, the variants drawn in proportion to their options.
  absl::StatusOr<Config> Sample(std::mt19937_64& rng, int max_tries = 10000) const;
  /// Valid configs that differ from `config` in exactly one knob, by one step of that knob's
  /// option order (both directions), in knob order, each made Canonical (so a step of a
  /// variant knob also resets the knobs that stop mattering); no repeats, never `config`.
  std::vector<Config> Neighbours(const Config& config) const;

  /// The chosen option of knob `name` (factors of a split, or a one-element list).
  const std::vector<int64_t>& Get(const Config& config, const std::string& name) const;
  /// The single value of choice knob `name`.
  int64_t GetInt(const Config& config, const std::string& name) const;

  /// Stable text form: {"knob": [values...], ...} in knob order (values, not indices, so
  /// the text stays readable and survives reordering of options).
  std::string ToJson(const Config& config) const;
  /// Parses ToJson's output; InvalidArgument when a knob is missing (unless AllowMissing) or a
  /// value is not an option of this space.
  absl::StatusOr<Config> FromJson(const std::string& text) const;

 private:
  /// Knob `knob` matters only where knob `when` is at an option with active[option] true.
  struct Condition {
    int knob, when;
    std::vector<bool> active;
  };
  std::vector<Knob> knobs_;
  std::vector<Constraint> constraints_;
  std::vector<Condition> conditions_;
};

}  // namespace tune::search
