// The conv2d template's blocked-layout register tiles that read their input values as
// embedded-broadcast FMA operands (fold_broadcast) and accumulate in the output across the
// outer reduction loop (order 3): random configs against the reference, the space's bounds,
// the FMAs the LLVM back end emits, and its fallback on CPUs without AVX-512.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/conv2d_template.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::test {
namespace {

using codegen::Conv2dTemplate;
using codegen::Workload;
using ::testing::HasSubstr;
using ::testing::Not;

// The host can run embedded-broadcast FMAs (AVX-512 with its 32 vector registers).
bool FoldHostHasAvx512() { return codegen::HostCpuLimits().vector_registers >= 32; }

// `count` distinct random valid configs of `tmpl` with fold_broadcast `fold` and, where
// `order3_acc_tile` is given, order 3 with that acc_tile; fewer only when the space has no more.
std::vector<search::Config> FoldDrawConfigs(const Conv2dTemplate& tmpl, int count, int64_t fold,
                                            std::optional<int64_t> order3_acc_tile, std::mt19937_64& rng) {
  const bool order3 = order3_acc_tile.has_value();
  const search::ConfigSpace& space = tmpl.space();
  std::vector<search::Config> out;
  for (int tries = 0; tries < 50000 && static_cast<int>(out.size()) < count; ++tries) {
    search::Config c = space.Draw(rng);
    c[space.KnobIndex("layout")] = OptionWithValue(space, "layout", 1);
    c[space.KnobIndex("fold_broadcast")] = OptionWithValue(space, "fold_broadcast", fold);
    if (order3) {
      c[space.KnobIndex("order")] = OptionWithValue(space, "order", 3);
      c[space.KnobIndex("acc_tile")] = OptionWithValue(space, "acc_tile", *order3_acc_tile);
    }
    c = space.Canonical(c);
    if (!space.IsValid(c) || space.GetInt(c, "fold_broadcast") != fold ||
        (order3 && (space.GetInt(c, "order") != 3 || space.GetInt(c, "acc_tile") != *order3_acc_tile))) {
      continue;
    }
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

// The optimized LLVM IR of `config` compiled for the host.
std::string FoldKernelIr(const Conv2dTemplate& tmpl, const search::Config& config) {
  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(config, "fold_ir");
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return "";
  codegen::CodegenOptions options;
  options.keep_ir = true;
  absl::StatusOr<codegen::CompiledKernel> k = codegen::CompileForHost(*f, options);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? k->ir : "";
}

// Random configs with the input values as broadcast operands, half of them in order 3 (the
// tiles accumulating in the output across input-channel blocks, epilogue after the last),
// on NCHWc workloads of 16 and 8 channels per block, a blocked NCHW one, bias and ReLU,
// partial column and channel tiles, stride 2, dilation, a batch of 2; fresh random inputs
// each. Order 3 without folding too, and order 3 with the accumulator tile (each tile's
// partial sums loaded from the output, kept in registers over a block of input channels,
// stored back), folded and not.
TEST(CpuConvFoldBroadcastTest, RandomConfigsMatchReference) {
  if (!FoldHostHasAvx512()) GTEST_SKIP() << "no AVX-512 on this host";
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    std::string shape;
    bool bias, relu;
  } cases[] = {{"1,64,7,9,64,3,3,1,1,nchw16c", true, true},
               {"2,32,9,11,48,3,3,2,1,nchw16c", true, false},
               {"1,32,8,13,48,3,3,1,2,2,nchw8c", false, true},
               {"1,24,9,10,40,3,3,1,1", true, true}};
  codegen::runtime::SetNumThreads(2);
  int runs = 0, failures = 0;
  for (const auto& tc : cases) {
    const Workload w = ConvWorkloadForTest(tc.shape, tc.bias, tc.relu);
    const Conv2dTemplate tmpl(w);
    std::vector<search::Config> configs = FoldDrawConfigs(tmpl, 2, 1, std::nullopt, rng);
    for (int64_t acc_tile : {0, 1}) {
      for (const search::Config& c : FoldDrawConfigs(tmpl, 2, 1, acc_tile, rng)) configs.push_back(c);
      for (const search::Config& c : FoldDrawConfigs(tmpl, 2, 0, acc_tile, rng)) configs.push_back(c);
    }
    ASSERT_EQ(configs.size(), 10u) << tc.shape;
    const CompiledConfigs compiled = CompileConfigs(tmpl, configs, "fold_conv_");
    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string context = absl::StrCat(w.Key(), " ", tmpl.space().ToJson(configs[i]));
      ASSERT_TRUE(compiled.kernels[i].ok()) << compiled.kernels[i].status() << "\n" << context;
      auto loaded = codegen::LoadedKernel::Load(*compiled.kernels[i]);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
      ++runs;
      if (!why.empty() && ++failures <= 2) ADD_FAILURE() << why << "\n" << context << "\n" << compiled.texts[i];
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0) << "of " << runs;
}

// oneDNN's 7 x 4-vector tile of 512x7x7 (28 accumulators and 4 weight vectors fill the 32
// registers) is valid only with the input values as memory operands, in order 3 with or
// without the accumulator tile; order 3 needs the blocked layout; an NCHW convolution's blocks
// fold only as single vectors; a CPU
// of 16 registers has no fold_broadcast option.
TEST(CpuConvFoldBroadcastTest, SpaceBounds) {
  const Workload w = ConvWorkloadForTest("1,512,7,7,512,3,3,1,1,nchw16c", false, false);
  const Conv2dTemplate tmpl(w, codegen::CpuLimitsOf("+avx512f,+avx512vl,+avx2,+fma"));
  const search::ConfigSpace& space = tmpl.space();
  const std::string tile =
      R"("tile_oc": [1, 8, 64], "tile_oh": [1, 7], "tile_ow": [1, 1, 7], "tile_ic": [32, 16], "vector_axis": [1],
         "unroll": [1], "pack_weight": [1], "parallel": [0], "layout": [1], "prepack": [1], "in_block": [1])";
  auto config = [&](const std::string& knobs) {
    absl::StatusOr<search::Config> c = space.FromJson("{" + tile + ", " + knobs + "}");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : search::Config{};
  };
  const search::Config folded = config(R"("order": [3], "acc_tile": [0], "fold_broadcast": [1])");
  EXPECT_TRUE(space.IsValid(folded)) << space.WhyInvalid(folded);
  EXPECT_THAT(space.WhyInvalid(config(R"("order": [3], "acc_tile": [0], "fold_broadcast": [0])")),
              HasSubstr("register_tile"));
  // Recorded before the knob: a config without it reads as fold_broadcast 0.
  EXPECT_THAT(space.WhyInvalid(config(R"("order": [0], "acc_tile": [1])")), HasSubstr("register_tile"));
  const search::Config tiled = config(R"("order": [3], "acc_tile": [1], "fold_broadcast": [1])");
  EXPECT_TRUE(space.IsValid(tiled)) << space.WhyInvalid(tiled);

  // An NCHW convolution's blocked layout folds only blocks of one vector (here 16 channels).
  const Conv2dTemplate nchw(ConvWorkloadForTest("1,64,14,14,64,3,3,1,1", false, false),
                            codegen::CpuLimitsOf("+avx512f,+avx512vl,+avx2,+fma"));
  auto blocked = [&](int ob) {
    absl::StatusOr<search::Config> c = nchw.space().FromJson(absl::StrCat(
        R"({"tile_oc": [1, )", 64 / ob, ", ", ob, R"(], "tile_oh": [14, 1], "tile_ow": [2, 1, 7], "tile_ic": [4, 16],
            "vector_axis": [1], "pack_weight": [1], "unroll": [1], "parallel": [0], "layout": [1], "prepack": [1],
            "in_block": [1], "order": [0],
            "acc_tile": [1], "fold_broadcast": [1]})"));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : search::Config{};
  };
  EXPECT_TRUE(nchw.space().IsValid(blocked(16))) << nchw.space().WhyInvalid(blocked(16));
  EXPECT_THAT(nchw.space().WhyInvalid(blocked(32)), HasSubstr("fold_broadcast_vectors"));

  const Conv2dTemplate avx2(ConvWorkloadForTest("1,64,7,7,64,3,3,1,1,nchw8c", false, false),
                            codegen::CpuLimitsOf("+avx2,+fma"));
  EXPECT_EQ(avx2.space().knobs()[avx2.space().KnobIndex("fold_broadcast")].options.size(), 1u);
}

// With fold_broadcast the host's FMAs read the input values as {1to16} memory operands (and
// none with it off); compiled for a CPU without AVX-512 the same config is plain vector code
// that still computes the convolution.
TEST(CpuConvFoldBroadcastTest, EmbeddedBroadcastsOnlyWhereAsked) {
  if (!FoldHostHasAvx512()) GTEST_SKIP() << "no AVX-512 on this host";
  const Workload w = ConvWorkloadForTest("1,32,7,7,64,3,3,1,1,nchw16c", true, true);
  const Conv2dTemplate tmpl(w);
  const search::ConfigSpace& space = tmpl.space();
  auto config = [&](int fold, int ob) {
    absl::StatusOr<search::Config> c = space.FromJson(absl::StrCat(
        R"({"tile_oc": [1, )", 64 / ob, ", ", ob, R"(], "tile_oh": [1, 7], "tile_ow": [1, 1, 7], "tile_ic": [2, 16], "vector_axis": [1],
            "unroll": [1], "pack_weight": [1], "parallel": [0], "layout": [1], "prepack": [1], "in_block": [1],
            "order": [3], "acc_tile": [0], "fold_broadcast": [)",
        fold, "]}"));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : search::Config{};
  };
  EXPECT_THAT(FoldKernelIr(tmpl, config(1, 64)), HasSubstr("vfmadd231ps $2{1to16}, $1, $0"));
  EXPECT_THAT(FoldKernelIr(tmpl, config(1, 32)), HasSubstr("vfmadd231ps $2{1to16}, $1, $0"));
  EXPECT_THAT(FoldKernelIr(tmpl, config(0, 32)), Not(HasSubstr("1to16")));

  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(config(1, 64), "fold_haswell");
  ASSERT_TRUE(f.ok()) << f.status();
  codegen::CodegenOptions options;
  options.keep_ir = true;
  absl::StatusOr<codegen::CompiledKernel> k = codegen::CompileForCpu(*f, "haswell", "", options);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->ir, Not(HasSubstr("1to")));
  auto loaded = codegen::LoadedKernel::Load(*k);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::mt19937_64 rng(std::random_device{}());
  EXPECT_EQ(RunFencedAgainstReference((*loaded)->fn(), w, rng), "");
}

}  // namespace
}  // namespace tune::test
