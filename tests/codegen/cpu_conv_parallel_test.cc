// The CPU conv2d's parallel loops: the fused batch x OC-block x OH-block loop (parallel 2) and
// the outer one (1), both layouts, with tails, on 3 and 2 threads against the reference; the
// fused loop's packed-weight indices kept free of divisions; and the thread count's constraint
// on the parallel loop's block count.
#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/codegen/parallel_balance_check.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::test {
namespace {

using codegen::Conv2dTemplate;
using codegen::OpKind;
using codegen::Workload;

/// The iterations of the parallel loop of `c` (0 for a serial config): the batch times the
/// outermost block loop's count (parallel 1) or times both outer OC and OH block counts (2).
int64_t ParallelConvIterations(const search::ConfigSpace& space, const Workload& w, const search::Config& c) {
  const int64_t parallel = space.GetInt(c, "parallel");
  const int64_t oc0 = space.Get(c, "tile_oc")[0], oh0 = space.Get(c, "tile_oh")[0];
  const int64_t first = space.GetInt(c, "order") == 2 ? oh0 : oc0;
  return parallel == 0 ? 0 : w.batch * (parallel == 2 ? oc0 * oh0 : first);
}

/// `count` distinct random valid configs of `tmpl` with `parallel` and `layout` set, drawn from
/// `rng`, with more parallel iterations than 3 threads (so the pool's chunks differ in size);
/// half of them (the odd ones) without the accumulator tile, so the output itself is zeroed and
/// accumulated: an output block that two threads both computed comes out doubled.
std::vector<search::Config> ParallelConvConfigs(const Conv2dTemplate& tmpl, int64_t parallel, int64_t layout, int count,
                                                std::mt19937_64& rng) {
  const search::ConfigSpace& space = tmpl.space();
  std::vector<search::Config> out;
  for (int tries = 0; tries < 50000 && static_cast<int>(out.size()) < count; ++tries) {
    search::Config c = space.Draw(rng);
    c[space.KnobIndex("parallel")] = OptionWithValue(space, "parallel", parallel);
    c[space.KnobIndex("layout")] = OptionWithValue(space, "layout", layout);
    c[space.KnobIndex("acc_tile")] = OptionWithValue(space, "acc_tile", out.size() % 2 ? 0 : 1);
    // A weight packed once would be kept across the runs on fresh inputs (at a reused address).
    c[space.KnobIndex("prepack")] = OptionWithValue(space, "prepack", 0);
    c = space.Canonical(c);
    if (!space.IsValid(c) || space.GetInt(c, "parallel") != parallel || space.GetInt(c, "layout") != layout) continue;
    if (ParallelConvIterations(space, tmpl.workload(), c) < 4) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  EXPECT_EQ(static_cast<int>(out.size()), count) << "too few parallel configs of " << tmpl.workload().Key();
  return out;
}

/// Whether any split knob of `c` has a tail (a padded extent above its extent).
bool ParallelConvHasTail(const search::ConfigSpace& space, const search::Config& c) {
  for (size_t i = 0; i < c.size(); ++i) {
    const search::Knob& knob = space.knobs()[i];
    if (knob.kind == search::Knob::Kind::kSplit && search::PaddedExtent(knob.options[c[i]]) != knob.extent) return true;
  }
  return false;
}

// Random configs with the parallel options in both layouts, tails in OC, OH, OW and IC, a batch
// of 2, a strided 1x1 and a depthwise convolution, on 3 threads (uneven chunks of the fused loop)
// and 2: every output element computed once, none missing, nothing written past a buffer.
TEST(CpuConvParallelTest, FusedAndOuterParallelLoopsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    std::string shape;  // N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]]
    bool bias, relu;
  } cases[] = {{"1,13,17,19,20,3,3,1,1", true, true},
               {"2,5,9,11,9,3,3,1,2,2", false, true},
               {"1,24,14,14,40,1,1,2,0", true, false},
               {"1,12,13,11,12,3,3,1,1,1,12", true, true}};
  int failures = 0, tails = 0, runs = 0;
  for (const auto& tc : cases) {
    const Workload w = ConvWorkloadForTest(tc.shape, tc.bias, tc.relu);
    const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx2,+fma"));
    const search::ConfigSpace& space = tmpl.space();
    for (int64_t layout : {0, 1}) {
      for (int64_t parallel : {2, 1}) {
        const std::vector<search::Config> configs = ParallelConvConfigs(tmpl, parallel, layout, 2, rng);
        const CompiledConfigs compiled =
            CompileConfigs(tmpl, configs, absl::StrCat("conv_par", parallel, "_l", layout, "_"));
        for (size_t i = 0; i < configs.size(); ++i) {
          const std::string context = absl::StrCat(w.Key(), " ", space.ToJson(configs[i]));
          ASSERT_TRUE(compiled.kernels[i].ok()) << compiled.kernels[i].status() << "\n" << context;
          tails += ParallelConvHasTail(space, configs[i]);
          if (parallel == 2) {
            // The convolution's own loop is the fused one (n.oc0.oh0 or n.oh0.oc0).
            EXPECT_THAT(compiled.texts[i], ::testing::ContainsRegex("for \\(n\\.o[ch]0\\.o[ch]0 = ")) << context;
          }
          absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded =
              codegen::LoadedKernel::Load(*compiled.kernels[i]);
          ASSERT_TRUE(loaded.ok()) << loaded.status();
          for (int threads : {3, 2}) {
            codegen::runtime::SetNumThreads(threads);
            const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
            ++runs;
            if (!why.empty() && ++failures <= 3) ADD_FAILURE() << why << " on " << threads << " threads\n" << context;
          }
        }
      }
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0) << "of " << runs << " runs";
  EXPECT_GE(tails, 6) << "too few configs with a tail";
}

// The fused loop's block indices are oc0 = f / OH0 and oh0 = f % OH0: the packed weight's
// indices built on them still simplify, so the register tile reads a block's weight as
// contiguous vectors (a division by the channel block left in the index would make each weight
// vector a gather).
TEST(CpuConvParallelTest, FusedLoopIndicesSimplify) {
  const Workload w = ConvWorkloadForTest("1,64,56,56,64,3,3,1,1", false, false);
  const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx2,+avx512f,+fma"));
  for (const char* layout : {"0", "1"}) {
    absl::StatusOr<search::Config> c = tmpl.space().FromJson(absl::StrCat(
        R"({"tile_oc":[2,2,16],"tile_oh":[14,4],"tile_ow":[4,1,14],"tile_ic":[4,16],"order":[0],)",
        R"("vector_axis":[1],"unroll":[1],"pack_weight":[1],"acc_tile":[1],"parallel":[2],"prepack":[1],"layout":[)",
        layout, "]}"));
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(*c, "fused_conv");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = codegen::Print(*f);
    EXPECT_THAT(text, ::testing::HasSubstr("for (n.oc0.oh0 = 0; n.oc0.oh0 < 28; ++n.oc0.oh0)")) << text;
    for (const char* left : {")/16", ") % 16", ")/2,", ") % 2,"}) {
      EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr(left))) << layout << " " << left << "\n" << text;
    }
  }
}

// With the target's thread count known, the parallel loop's iteration count divides among the
// threads or is at least 8 per thread; one thread or unknown (0) leaves the space as it was.
TEST(CpuConvParallelTest, ThreadCountBoundsTheParallelBlockCount) {
  const Workload w = ConvWorkloadForTest("1,64,56,56,64,3,3,1,1", false, false);
  codegen::CpuLimits cpu = codegen::CpuLimitsOf("+avx2,+avx512f,+fma");
  const Conv2dTemplate any(w, cpu);
  cpu.threads = 1;
  const Conv2dTemplate one(w, cpu);
  cpu.threads = 2;
  const Conv2dTemplate two(w, cpu);
  cpu.threads = 3;
  const Conv2dTemplate three(w, cpu);
  const search::ConfigSpace& space = any.space();
  ExpectParallelBalance(space, one.space(), two.space(), three.space(),
                        [&](const search::Config& c) { return ParallelConvIterations(space, w, c); });
  // One block of all 64 channels (or two of 48, the second with a tail, on 3 threads): the outer
  // loop leaves a thread idle; fused with the 56 rows it shares out.
  for (const char* oc : {"[1,4,16]", "[2,1,48]"}) {
    absl::StatusOr<search::Config> few = space.FromJson(absl::StrCat(
        R"({"tile_oc":)", oc, R"(,"tile_oh":[56,1],"tile_ow":[14,1,4],"tile_ic":[4,16],"order":[0],)",
        R"("vector_axis":[1],"unroll":[1],"pack_weight":[1],"acc_tile":[1],"parallel":[1],"prepack":[1],"layout":[1]})"));
    ASSERT_TRUE(few.ok()) << few.status();
    EXPECT_TRUE(any.space().IsValid(*few)) << oc;
    EXPECT_TRUE(one.space().IsValid(*few)) << oc;
    EXPECT_FALSE(three.space().IsValid(*few)) << oc;
    EXPECT_EQ(two.space().IsValid(*few), std::string(oc) != "[1,4,16]") << oc;
    (*few)[space.KnobIndex("parallel")] = OptionWithValue(space, "parallel", 2);
    EXPECT_TRUE(two.space().IsValid(*few)) << oc;
    EXPECT_TRUE(three.space().IsValid(*few)) << oc;
  }
}

}  // namespace
}  // namespace tune::test
