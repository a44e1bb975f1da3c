// What the NCHWc conv2d tests share: random valid configs of a space compiled, checked for the
// copies they must not make, and run against the reference, with what they covered counted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::test {

/// What CheckRandomNchwcConfigs ran: wrong kernels, and the configs with a partial tile of
/// channel blocks, a partial column tile, and the parallel options seen.
struct NchwcRunStats {
  int failures = 0, block_tails = 0, column_tails = 0;
  std::set<int64_t> parallel_seen;
};

/// Draws `count` distinct valid configs of `tmpl` (the template of the NCHWc workload `w`),
/// compiles them (kernel names `prefix` + index), expects no kernel text to hold any of
/// `absent` (the copies an NCHWc kernel must not make), and runs each once on fresh random
/// inputs against the reference; the first two wrong kernels are reported in full.
inline void CheckRandomNchwcConfigs(const codegen::Conv2dTemplate& tmpl, const codegen::Workload& w, int count,
                                    const std::vector<std::string>& absent, const std::string& prefix,
                                    std::mt19937_64& rng, NchwcRunStats* stats) {
  const search::ConfigSpace& space = tmpl.space();
  std::vector<search::Config> configs;
  for (int draw = 0; draw < 200000 && static_cast<int>(configs.size()) < count; ++draw) {
    search::Config c = space.Canonical(space.Draw(rng));
    if (!space.IsValid(c) || std::find(configs.begin(), configs.end(), c) != configs.end()) continue;
    configs.push_back(c);
  }
  ASSERT_EQ(static_cast<int>(configs.size()), count) << w.Key();
  const CompiledConfigs compiled = CompileConfigs(tmpl, configs, prefix);
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string context = absl::StrCat(w.Key(), " ", space.ToJson(configs[i]));
    const std::vector<int64_t> oc = space.Get(configs[i], "tile_oc"), ow = space.Get(configs[i], "tile_ow");
    stats->block_tails += (w.out_c / w.layout_block) % (oc[1] * oc[2] / w.layout_block) != 0;
    stats->column_tails += w.out_w() % ow[2] != 0;
    stats->parallel_seen.insert(space.GetInt(configs[i], "parallel"));
    for (const std::string& copy : absent) {
      EXPECT_THAT(compiled.texts[i], ::testing::Not(::testing::HasSubstr(copy))) << context;
    }
    ASSERT_TRUE(compiled.kernels[i].ok()) << compiled.kernels[i].status() << "\n" << context;
    absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded = codegen::LoadedKernel::Load(*compiled.kernels[i]);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
    if (!why.empty() && ++stats->failures <= 2) ADD_FAILURE() << why << "\n" << context << "\n" << compiled.texts[i];
  }
}

/// No wrong kernel, and the draws covered partial block and column tiles and two parallel
/// options.
inline void ExpectNchwcCoverage(const NchwcRunStats& stats) {
  EXPECT_EQ(stats.failures, 0);
  EXPECT_GE(stats.block_tails, 2) << "too few configs with a partial tile of channel blocks";
  EXPECT_GE(stats.column_tails, 4) << "too few configs with a partial column tile";
  EXPECT_GE(stats.parallel_seen.size(), 2u);
}

}  // namespace tune::test
