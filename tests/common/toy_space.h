// Toy search spaces and synthetic costs over them, shared by the search strategy tests.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "search/space.h"
#include "search/strategy.h"

namespace tune::test {

/// 6 * 4 * 3 = 72 points: tile_m (12 split in 2), tile_n (8 split in 2), unroll {0, 4, 16};
/// the 27 whose inner tile product is at most 8 are valid. Small enough that strategies
/// enumerate it, so it is exhausted exactly.
inline search::ConfigSpace ConstrainedSpace() {
  search::ConfigSpace space;
  space.AddSplit("tile_m", 12, 2);
  space.AddSplit("tile_n", 8, 2);
  space.AddChoice("unroll", {0, 4, 16});
  space.AddConstraint("inner_le_8", [](const search::Config& c) {
    // tile_m inner factors by index: 12 6 4 3 2 1; tile_n: 8 4 2 1.
    static const int kM[] = {12, 6, 4, 3, 2, 1};
    static const int kN[] = {8, 4, 2, 1};
    return kM[c[0]] * kN[c[1]] <= 8;
  });
  return space;
}

/// Seconds for a ConstrainedSpace config: 1 ms * (1 + tile_m + 2 tile_n + unroll) in option
/// indices, so the first config in index order is the fastest.
inline double LinearCost(const search::Config& c) { return 1e-3 * (1 + c[0] + 2 * c[1] + c[2]); }

/// Every valid config of `space`, by enumeration (small spaces only).
inline std::set<search::Config> AllValid(const search::ConfigSpace& space) {
  std::set<search::Config> out;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    search::Config c = space.FromIndex(i);
    if (space.IsValid(c)) out.insert(c);
  }
  return out;
}

/// The lowest ok cost `measure` gives any valid config of `space`, by enumeration (+inf when
/// none is ok).
inline double BestCost(const search::ConfigSpace& space,
                       const std::function<search::MeasuredConfig(const search::Config&)>& measure) {
  double best = INFINITY;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    search::Config c = space.FromIndex(i);
    if (!space.IsValid(c)) continue;
    const search::MeasuredConfig r = measure(c);
    if (r.ok) best = std::min(best, r.cost);
  }
  return best;
}

/// 10^5 points, above the strategies' enumeration limit (sampled by rejection): knobs a..e
/// with options 0..9; a + b <= 12 holds for 79% of them. `with_fixed_knob` appends a knob
/// "fixed" with a single option (it exercises Bayesian optimisation's 0.5 coordinate).
inline search::ConfigSpace BowlSpace(bool with_fixed_knob = false) {
  search::ConfigSpace space;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    space.AddChoice(name, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  if (with_fixed_knob) space.AddChoice("fixed", {1});
  space.AddConstraint("a_plus_b_le_12", [](const search::Config& c) { return c[0] + c[1] <= 12; });
  return space;
}

/// A BowlSpace measurement: a quadratic bowl in log cost over knobs a..e whose unconstrained
/// minimum (a, b near 7) violates the constraint, so the best valid point lies on its
/// boundary. Configs with c >= 8 and e >= 8 fail at run time (ok = false, cost +inf).
inline search::MeasuredConfig Bowl(const search::Config& c) {
  static const double kCentre[] = {7.3, 6.6, 2.2, 5.6, 4.1};
  static const double kWeight[] = {1.0, 0.7, 1.5, 0.5, 1.2};
  if (c[2] >= 8 && c[4] >= 8) return {c, INFINITY, false};
  double q = 0;
  for (int k = 0; k < 5; ++k) {
    const double d = (c[k] - kCentre[k]) / 9.0;
    q += kWeight[k] * d * d;
  }
  return {c, 1e-3 * std::exp(8.0 * q), true};
}

/// Bowl with cosine ripples: local minima around the basin, for search-quality comparisons.
inline search::MeasuredConfig RuggedBowl(const search::Config& c) {
  search::MeasuredConfig r = Bowl(c);
  if (!r.ok) return r;
  double ripple = 0;
  for (int k = 0; k < 5; ++k) ripple += std::cos(2.1 * c[k] + k);
  r.cost *= std::exp(0.15 * ripple);
  return r;
}

}  // namespace tune::test
