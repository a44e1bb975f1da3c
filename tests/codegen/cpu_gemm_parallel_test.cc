// The CPU GEMM's parallel loops and tails: the fused M x N block loop (parallel 2) and the outer
// one (1) on 2 and 3 threads against the reference, the index simplification that keeps the
// fused loop's packed loads contiguous, the register tile kept unrolled in a shorter last
// block, and the thread count's constraint on the parallel loop's block count.
#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/cpu/gemm_template.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/simplify.h"
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

using codegen::GemmTemplate;
using codegen::OpKind;
using codegen::Workload;

Workload ParallelGemmWorkload(OpKind op, const std::string& shape) {
  absl::StatusOr<Workload> w = Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

/// `count` distinct random valid configs of `tmpl` with `parallel` set to `parallel`, drawn from
/// `rng`; half of them (the odd ones) without the accumulator tile, so the output itself is
/// zeroed and accumulated: a block that two threads both computed comes out doubled.
std::vector<search::Config> ParallelGemmConfigs(const codegen::Template& tmpl, int64_t parallel, int count,
                                                std::mt19937_64& rng) {
  const search::ConfigSpace& space = tmpl.space();
  std::vector<search::Config> out;
  for (int tries = 0; tries < 20000 && static_cast<int>(out.size()) < count; ++tries) {
    search::Config c = space.Draw(rng);
    c[space.KnobIndex("parallel")] = OptionWithValue(space, "parallel", parallel);
    c[space.KnobIndex("acc_tile")] = OptionWithValue(space, "acc_tile", out.size() % 2 ? 0 : 1);
    // A weight packed once would be kept across the runs on fresh inputs (at a reused address).
    if (tmpl.workload().op == OpKind::kDense) c[space.KnobIndex("prepack")] = OptionWithValue(space, "prepack", 0);
    c = space.Canonical(c);
    if (!space.IsValid(c) || space.GetInt(c, "parallel") != parallel) continue;
    // More blocks than threads, so that the chunks of the pool differ in size.
    if (space.Get(c, "tile_m")[0] * space.Get(c, "tile_n")[0] < 4) continue;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  EXPECT_EQ(static_cast<int>(out.size()), count) << "too few parallel configs of " << tmpl.workload().Key();
  return out;
}

// Random configs with the parallel options, tails in M, N and K, on 3 threads (uneven chunks of
// the fused loop) and 2: every output element computed once, none missing.
TEST(CpuGemmParallelTest, FusedAndOuterParallelLoopsMatchReference) {
  std::mt19937_64 rng(std::random_device{}());
  const struct {
    OpKind op;
    std::string shape;
    bool bias;
  } cases[] = {{OpKind::kMatmul, "97,89,101", true}, {OpKind::kDense, "45,70,33", false}};
  int failures = 0;
  for (const auto& tc : cases) {
    Workload w = ParallelGemmWorkload(tc.op, tc.shape);
    w.bias = tc.bias;
    const GemmTemplate tmpl(w, codegen::CpuLimitsOf("+avx2,+fma"));
    for (int64_t parallel : {2, 1}) {
      const std::vector<search::Config> configs = ParallelGemmConfigs(tmpl, parallel, 6, rng);
      const CompiledConfigs compiled = CompileConfigs(tmpl, configs, absl::StrCat("par", parallel, "_"));
      for (size_t i = 0; i < configs.size(); ++i) {
        const std::string context = absl::StrCat(w.Key(), " ", tmpl.space().ToJson(configs[i]));
        ASSERT_TRUE(compiled.kernels[i].ok()) << compiled.kernels[i].status() << "\n" << context;
        absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded = codegen::LoadedKernel::Load(*compiled.kernels[i]);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        for (int threads : {3, 2}) {
          codegen::runtime::SetNumThreads(threads);
          const std::string why = RunFencedAgainstReference((*loaded)->fn(), w, rng);
          if (!why.empty() && ++failures <= 3) ADD_FAILURE() << why << " on " << threads << " threads\n" << context;
        }
      }
    }
  }
  codegen::runtime::SetNumThreads(1);
  EXPECT_EQ(failures, 0);
}

// The fused loop's block indices are m0 = f / N0 and n0 = f % N0: the packed operands' indices
// built on them still simplify, so the register tile reads B's panel as contiguous vectors (a
// division left in the index would make every B vector a gather: 6x slower).
TEST(CpuGemmParallelTest, FusedLoopIndicesSimplify) {
  const Workload w = ParallelGemmWorkload(OpKind::kMatmul, "1024,1024,1024");
  const GemmTemplate tmpl(w, codegen::CpuLimitsOf("+avx2,+avx512f,+fma"));
  absl::StatusOr<search::Config> c = tmpl.space().FromJson(
      R"({"tile_m":[3,64,6],"tile_n":[64,1,16],"tile_k":[16,64],"order":[0],"vectorize":[1],"unroll_m":[1],)"
      R"("unroll_k":[0],"pack_b":[1],"acc_tile":[1],"pack_a":[1],"parallel":[2]})");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(*c, "fused");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = codegen::Print(*f);
  EXPECT_THAT(text, ::testing::HasSubstr("parallel"));
  EXPECT_THAT(text, ::testing::HasSubstr("m00.n0"));
  for (const char* left : {")/16", ") % 16", ")/6", ") % 6"}) {
    EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr(left))) << text;
  }

  // The rule itself: (f/64*384 + m*6 + r) / 6 = f/64*64 + m and % 6 = r for r < 6; not where
  // the atom may be negative ((f - 1) / 64 at f = 0).
  const codegen::Expr fv = codegen::MakeVar("f"), mv = codegen::MakeVar("m"), rv = codegen::MakeVar("r");
  const std::unordered_map<const codegen::VarNode*, int64_t> extents = {
      {codegen::AsVar(fv), 192}, {codegen::AsVar(mv), 64}, {codegen::AsVar(rv), 6}};
  const codegen::Expr sum = fv / codegen::Expr(int64_t{64}) * codegen::Expr(int64_t{384}) +
                            mv * codegen::Expr(int64_t{6}) + rv;
  const codegen::Expr six = codegen::Expr(int64_t{6});
  EXPECT_EQ(codegen::Print(codegen::SimplifyDivMod(sum / six, extents)), codegen::Print(fv / codegen::Expr(int64_t{64}) * codegen::Expr(int64_t{64}) + mv));
  EXPECT_EQ(codegen::Print(codegen::SimplifyDivMod(sum % six, extents)), "r");
  const codegen::Expr negative = (fv - codegen::Expr(int64_t{1})) / codegen::Expr(int64_t{64}) * codegen::Expr(int64_t{6}) + rv;
  EXPECT_EQ(codegen::Print(codegen::SimplifyDivMod(negative / six, extents)), codegen::Print(negative / six));
}

/// The lines of `text`.
std::vector<std::string> ParallelGemmLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// M = 1024 in 3 blocks of 64 register tiles of 6 rows: the last block holds 42 2/3 tiles. Only
// the last tile (rows 1020..1023) runs the guarded register tile; the 42 full tiles of that
// block keep the unrolled, unguarded one (before, the whole block ran guarded rows in a serial
// loop inside the K loop: a quarter of the GEMM at a fraction of the speed).
TEST(CpuGemmParallelTest, OnlyTheLastRegisterTileOfAShortBlockIsGuarded) {
  const Workload w = ParallelGemmWorkload(OpKind::kMatmul, "1024,1024,1024");
  const GemmTemplate tmpl(w, codegen::CpuLimitsOf("+avx2,+avx512f,+fma"));
  for (int parallel : {0, 1, 2}) {
    absl::StatusOr<search::Config> c = tmpl.space().FromJson(absl::StrCat(
        R"({"tile_m":[3,64,6],"tile_n":[64,1,16],"tile_k":[16,64],"order":[0],"vectorize":[1],"unroll_m":[1],)",
        R"("unroll_k":[0],"pack_b":[1],"acc_tile":[1],"pack_a":[1],"parallel":[)", parallel, "]}"));
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(*c, "short_block");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = codegen::Print(*f);
    const std::vector<std::string> lines = ParallelGemmLines(text);
    int serial_tiles = 0;
    for (size_t i = 1; i + 1 < lines.size(); ++i) {
      if (lines[i].find("for (m1 = 0; m1 < 6; ++m1)") == std::string::npos) continue;
      if (lines[i - 1].find("// unrolled") != std::string::npos) continue;
      ++serial_tiles;
      // A register tile run row by row guards its rows ...
      EXPECT_THAT(lines[i + 1], ::testing::HasSubstr("*6 + m1 < 1024)")) << "parallel " << parallel << "\n" << text;
      // ... and lies in the copy for the last (partial) tile, 170 = ceil(1024 / 6) - 1.
      std::string branch;
      for (size_t j = i; j-- > 0 && branch.empty();) {
        if (lines[j].find("< 170)") != std::string::npos || lines[j].find("170 <=") != std::string::npos) {
          branch = lines[j];
        }
      }
      EXPECT_THAT(branch, ::testing::HasSubstr("170 <=")) << "parallel " << parallel << " line " << i << "\n" << text;
    }
    EXPECT_GT(serial_tiles, 0) << text;
  }
}

// With the target's thread count known, the parallel loop's block count divides among the
// threads or is at least 8 per thread; one thread or unknown (0) leaves the space as it was.
TEST(CpuGemmParallelTest, ThreadCountBoundsTheParallelBlockCount) {
  const Workload w = ParallelGemmWorkload(OpKind::kMatmul, "1024,1024,1024");
  codegen::CpuLimits cpu = codegen::CpuLimitsOf("+avx2,+fma");
  const GemmTemplate any(w, cpu);
  cpu.threads = 1;
  const GemmTemplate one(w, cpu);
  cpu.threads = 2;
  const GemmTemplate two(w, cpu);
  cpu.threads = 3;
  const GemmTemplate three(w, cpu);
  const search::ConfigSpace& space = any.space();
  ExpectParallelBalance(space, one.space(), two.space(), three.space(), [&](const search::Config& c) {
    const int64_t m0 = space.Get(c, "tile_m")[0], n0 = space.Get(c, "tile_n")[0];
    const int64_t outer = space.GetInt(c, "order") == 1 ? n0 : m0;
    return space.GetInt(c, "parallel") == 2 ? m0 * n0 : outer;
  });
  // The 3-block split of the issue: 3 M blocks on 2 threads is out, 3 x 64 fused blocks are in.
  absl::StatusOr<search::Config> three_blocks = space.FromJson(
      R"({"tile_m":[3,64,6],"tile_n":[64,1,16],"tile_k":[16,64],"order":[0],"vectorize":[1],"unroll_m":[1],)"
      R"("unroll_k":[0],"pack_b":[1],"acc_tile":[1],"pack_a":[1],"parallel":[1]})");
  ASSERT_TRUE(three_blocks.ok()) << three_blocks.status();
  EXPECT_TRUE(any.space().IsValid(*three_blocks));
  EXPECT_FALSE(two.space().IsValid(*three_blocks));
  (*three_blocks)[space.KnobIndex("parallel")] = OptionWithValue(space, "parallel", 2);
  EXPECT_TRUE(two.space().IsValid(*three_blocks));
}

}  // namespace
}  // namespace tune::test
