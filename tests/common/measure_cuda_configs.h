// Workloads and random configs of the CUDA templates, for tests that check their kernels.
#pragma once

#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "codegen/ir/workload.h"
#include "gtest/gtest.h"
#include "search/space.h"

namespace tune::test {

/// `shape` parsed as a workload of `op` (Workload::Parse), with the bias and relu epilogue as
/// given; a test failure (and a default workload) when it does not parse.
inline codegen::Workload ParseWorkload(codegen::OpKind op, const std::string& shape, bool bias = false,
                                       bool relu = false) {
  absl::StatusOr<codegen::Workload> w = codegen::Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return codegen::Workload{};
  w->bias = bias;
  w->relu = relu;
  return *w;
}

/// Which sampled configs a test keeps; empty keeps all.
using ConfigFilter = std::function<bool(const search::Config&)>;

/// `configs` followed by random valid configs of `space` (ConfigSpace::Sample with `rng`) for
/// which `keep` holds, until there are `size`, making at most `max_draws` draws; the caller
/// checks the size. A failing Sample is a test failure and ends the drawing.
inline std::vector<search::Config> DrawWhere(const search::ConfigSpace& space, std::mt19937_64& rng, size_t size,
                                             const ConfigFilter& keep, std::vector<search::Config> configs = {},
                                             int max_draws = 100000) {
  for (int draw = 0; draw < max_draws && configs.size() < size; ++draw) {
    absl::StatusOr<search::Config> c = space.Sample(rng);
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      break;
    }
    if (!keep || keep(*c)) configs.push_back(*std::move(c));
  }
  return configs;
}

}  // namespace tune::test
