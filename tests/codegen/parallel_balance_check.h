// ExpectParallelBalance: the thread-balance rule of a CPU template's parallel loop, on random
// configs (shared by the GEMM and conv2d parallel tests).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "search/space.h"

namespace tune::test {

/// Draws 3000 configs from `any` (the template's space with the thread count unknown) and
/// checks the spaces of the same template made for 1, 2 and 3 threads: one thread keeps every
/// config; 2 and 3 keep a parallel config (knob `parallel` > 0) exactly when its parallel
/// loop's iteration count, `iterations(config)`, is at least the thread count and divides among
/// the threads or gives at least 8 per thread. Every `parallel` option 0, 1, 2 is drawn, and 2
/// threads both keep and reject some parallel configs.
inline void ExpectParallelBalance(const search::ConfigSpace& any, const search::ConfigSpace& one,
                                  const search::ConfigSpace& two, const search::ConfigSpace& three,
                                  const std::function<int64_t(const search::Config&)>& iterations) {
  ASSERT_EQ(any.Size(), two.Size());  // a constraint: the same knobs and options
  std::mt19937_64 rng(std::random_device{}());
  std::set<int64_t> seen_parallel;
  int rejected_by_two = 0, kept_by_two = 0;
  for (int i = 0; i < 3000; ++i) {
    absl::StatusOr<search::Config> c = any.Sample(rng);
    ASSERT_TRUE(c.ok()) << c.status();
    const int64_t parallel = any.GetInt(*c, "parallel");
    seen_parallel.insert(parallel);
    const int64_t blocks = iterations(*c);
    auto even = [&](int64_t t) { return blocks >= t && (blocks % t == 0 || blocks >= 8 * t); };
    const std::string context = absl::StrCat(any.ToJson(*c), " blocks ", blocks);
    EXPECT_TRUE(one.IsValid(*c)) << context;
    EXPECT_TRUE(any.IsValid(*c)) << context;
    EXPECT_EQ(two.IsValid(*c), parallel == 0 || even(2)) << context;
    EXPECT_EQ(three.IsValid(*c), parallel == 0 || even(3)) << context;
    if (parallel != 0) (two.IsValid(*c) ? kept_by_two : rejected_by_two)++;
  }
  EXPECT_EQ(seen_parallel, (std::set<int64_t>{0, 1, 2}));
  EXPECT_GT(rejected_by_two, 0);
  EXPECT_GT(kept_by_two, 0);
}

}  // namespace tune::test
