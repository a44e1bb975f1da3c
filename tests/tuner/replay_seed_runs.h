// Replay test support: one strategy run over many seeds on a recorded space, and its summary.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "search/cost_model.h"
#include "tuner/replay.h"

namespace tune::tuner {

/// One strategy under test. `cost_model` is a CreateReplayCostModel name ("xgb") or "" for
/// none. Batches of 10 by default: XGBoost-driven strategies are refitted every 10
/// evaluations (as a tuner measuring batches does), the Gaussian-process strategies select a
/// batch by kriging believer.
struct ReplayStrategyCase {
  std::string strategy;
  std::string cost_model;
  int batch = 10;
  /// Required lead over random search: mean fraction of optimum over the seeds >=
  /// E[f_random(budget)] + margin.
  double margin = 0.0;
};

/// A printable test-name suffix: the strategy name.
inline std::string ReplayCaseName(const ::testing::TestParamInfo<ReplayStrategyCase>& info) {
  return info.param.strategy;
}

/// Fractions of optimum at `budget` of seeds 0..seeds-1, each an independent run with its own
/// strategy and cost model, spread over `threads` threads (the space is immutable and shared).
/// Adds a test failure and returns nothing when a run fails or stops before the budget.
inline std::vector<double> RunReplaySeeds(const ReplaySpace& space, const ReplayStrategyCase& c, int budget,
                                          int seeds, int threads = 2) {
  std::vector<double> fraction(seeds, 0.0);
  std::vector<std::string> errors(seeds);
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int s = next++; s < seeds; s = next++) {
      ReplayOptions o;
      o.strategy = c.strategy;
      o.budget = budget;
      o.batch = c.batch;
      o.seed = static_cast<uint64_t>(s);
      std::unique_ptr<search::CostModel> model;
      if (!c.cost_model.empty()) {
        auto m = CreateReplayCostModel(c.cost_model, space, o.seed);
        if (!m.ok()) {
          errors[s] = m.status().ToString();
          continue;
        }
        model = std::move(*m);
        o.cost_model = model.get();
      }
      auto trace = RunReplay(space, o);
      if (!trace.ok()) {
        errors[s] = trace.status().ToString();
        continue;
      }
      if (trace->evaluations.size() != static_cast<size_t>(budget)) {
        errors[s] = "stopped after " + std::to_string(trace->evaluations.size()) + " evaluations";
        continue;
      }
      fraction[s] = FractionOfOptimum(space.optimum_ms(), trace->BestAt(budget));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (int s = 0; s < seeds; ++s) {
    EXPECT_EQ(errors[s], "") << c.strategy << ", seed " << s;
    if (!errors[s].empty()) return {};
  }
  return fraction;
}

/// Mean and sample standard deviation of `v` (sd 0 for fewer than two values).
struct ReplaySeedSummary {
  double mean = 0, sd = 0, worst = 0;
};
inline ReplaySeedSummary SummarizeReplaySeeds(const std::vector<double>& v) {
  ReplaySeedSummary s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0.0;
  s.worst = *std::min_element(v.begin(), v.end());
  return s;
}

}  // namespace tune::tuner
