// Creating search strategies for tests and running them against synthetic costs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tests/common/toy_space.h"

namespace tune::test {

/// Default StrategyOptions with the given seed.
inline search::StrategyOptions Seeded(uint64_t seed) {
  search::StrategyOptions options;
  options.seed = seed;
  return options;
}

/// SearchStrategy::Create(name, space, options); a failure fails the test and gives null.
inline std::unique_ptr<search::SearchStrategy> MakeStrategy(const std::string& name,
                                                            const search::ConfigSpace* space,
                                                            const search::StrategyOptions& options) {
  auto s = search::SearchStrategy::Create(name, space, options);
  EXPECT_TRUE(s.ok()) << name << ": " << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

/// The same with default options and `seed`.
inline std::unique_ptr<search::SearchStrategy> MakeStrategy(const std::string& name,
                                                            const search::ConfigSpace* space,
                                                            uint64_t seed = 0) {
  return MakeStrategy(name, space, Seeded(seed));
}

/// Proposes batches of `batch`, without reporting anything, until the strategy returns none
/// or `limit` batches have passed; every proposal in order. Checks each batch's size.
inline std::vector<search::Config> Drain(search::SearchStrategy& s, int batch, int limit = 1000) {
  std::vector<search::Config> all;
  for (int i = 0; i < limit; ++i) {
    std::vector<search::Config> got = s.Propose(batch);
    EXPECT_LE(static_cast<int>(got.size()), batch);
    if (got.empty()) break;
    all.insert(all.end(), got.begin(), got.end());
  }
  return all;
}

/// What Drive saw: every proposal in order and the best ok cost (+inf when none).
struct DriveResult {
  std::vector<search::Config> proposed;
  double best = INFINITY;
};

/// The tuning loop in miniature: Propose(min(batch, budget left)) -> `measure` each config ->
/// when `model` is not null, Fit it on every result of this call -> Update, until `budget`
/// configs were proposed or a batch comes back empty. `model`, when given, is set as the
/// strategy's cost model first (otherwise the strategy's model is left alone). Checks every
/// batch: no larger than asked, only valid configs, none proposed twice in this call.
inline DriveResult Drive(search::SearchStrategy& s, const search::ConfigSpace& space, int budget,
                         int batch,
                         const std::function<search::MeasuredConfig(const search::Config&)>& measure,
                         search::CostModel* model = nullptr) {
  DriveResult run;
  std::set<search::Config> seen;
  std::vector<search::Config> configs;
  std::vector<double> costs;
  if (model != nullptr) s.SetCostModel(model);
  int used = 0;
  while (used < budget) {
    const int want = std::min(batch, budget - used);
    std::vector<search::Config> got = s.Propose(want);
    EXPECT_LE(static_cast<int>(got.size()), want);
    if (got.empty()) break;
    std::vector<search::MeasuredConfig> results;
    for (const search::Config& c : got) {
      EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      EXPECT_TRUE(seen.insert(c).second) << "proposed twice: " << space.ToJson(c);
      results.push_back(measure(c));
      if (results.back().ok) run.best = std::min(run.best, results.back().cost);
      configs.push_back(c);
      costs.push_back(results.back().cost);
      run.proposed.push_back(c);
    }
    used += static_cast<int>(got.size());
    if (model != nullptr) EXPECT_TRUE(model->Fit(configs, costs).ok());
    s.Update(results);
  }
  return run;
}

/// A resume, then pipelined measuring. Reports `resumed` distinct valid configs drawn at random
/// (a fixed seed; knobs with one option stay 0) and measured by `measure`, as a record
/// database does on resume; then for `rounds` rounds asks for 1 + round % max_batch configs
/// and checks that exactly that many come, all valid, none reported before nor proposed twice.
/// The results of every `late_every`-th round are never reported (still being measured), so
/// proposals made meanwhile must be new too. Last, Propose(0) must give nothing.
inline void ExpectFreshProposalsAfterResume(
    search::SearchStrategy& s, const search::ConfigSpace& space,
    const std::function<search::MeasuredConfig(const search::Config&)>& measure, int resumed,
    int rounds, int max_batch, int late_every) {
  std::vector<search::MeasuredConfig> reports;
  std::set<search::Config> reported;
  std::mt19937_64 rng(5);
  const auto& knobs = space.knobs();
  while (static_cast<int>(reports.size()) < resumed) {
    search::Config c(knobs.size(), 0);
    for (size_t k = 0; k < knobs.size(); ++k) {
      if (knobs[k].options.size() > 1) {
        c[k] = static_cast<int32_t>(search::UniformBelow(rng, knobs[k].options.size()));
      }
    }
    if (!space.IsValid(c) || !reported.insert(c).second) continue;
    reports.push_back(measure(c));
  }
  s.Update(reports);
  std::set<search::Config> proposed;
  for (int round = 0; round < rounds; ++round) {
    const int batch = 1 + round % max_batch;
    std::vector<search::Config> got = s.Propose(batch);
    ASSERT_EQ(static_cast<int>(got.size()), batch) << "round " << round;
    std::vector<search::MeasuredConfig> results;
    for (const search::Config& c : got) {
      EXPECT_TRUE(space.IsValid(c)) << space.WhyInvalid(c);
      EXPECT_EQ(reported.count(c), 0u) << "reported config proposed";
      EXPECT_TRUE(proposed.insert(c).second) << "config proposed twice";
      results.push_back(measure(c));
    }
    if (round % late_every != late_every - 1) s.Update(results);
  }
  EXPECT_TRUE(s.Propose(0).empty());
}

/// Mean over `seeds` runs with seeds first_seed, first_seed + 1, ... of the best cost strategy
/// `name` finds in `budget` measurements in batches of `batch` (Drive, no cost model), divided
/// by `optimum`: 1 means the optimum every time.
inline double MeanBestRatio(const std::string& name, const search::ConfigSpace& space,
                            const std::function<search::MeasuredConfig(const search::Config&)>& measure,
                            double optimum, uint64_t first_seed, int seeds, int budget, int batch) {
  double sum = 0;
  for (int i = 0; i < seeds; ++i) {
    auto s = MakeStrategy(name, &space, first_seed + i);
    sum += Drive(*s, space, budget, batch, measure).best / optimum;
  }
  return sum / seeds;
}

/// The search-quality rule on RuggedBowl over `space` (a BowlSpace), at a budget of 50
/// evaluations in batches of 5 over 20 seeds: each strategy in `names` must have a mean excess
/// over the optimum (mean best/optimum - 1) of at most `share` of random search's (both under
/// seeds 0..19), while random search itself under seeds control_seed.. must not meet the rule.
/// Prints each strategy's ratio.
inline void ExpectBeatRandomOnRuggedBowl(const std::vector<std::string>& names,
                                         const search::ConfigSpace& space, uint64_t control_seed,
                                         double share) {
  const double optimum = BestCost(space, RuggedBowl);
  auto ratio = [&](const std::string& name, uint64_t first_seed) {
    return MeanBestRatio(name, space, RuggedBowl, optimum, first_seed, 20, 50, 5);
  };
  auto beats = [&](double strategy_ratio, double random_ratio) {
    return strategy_ratio - 1.0 <= share * (random_ratio - 1.0);
  };
  const double random = ratio("random", 0);
  const double random_control = ratio("random", control_seed);
  EXPECT_FALSE(beats(random_control, random)) << "random " << random << " vs random " << random_control;
  for (const std::string& name : names) {
    const double r = ratio(name, 0);
    std::printf("[ rugged bowl ] %-8s mean best/optimum %.4f (random %.4f, random control %.4f)\n",
                name.c_str(), r, random, random_control);
    EXPECT_TRUE(beats(r, random)) << name << " " << r << " vs random " << random;
  }
}

}  // namespace tune::test
