// Split tails on the CPU: GEMM and conv2d configs whose factors do not divide their extents,
// compiled by LLVM and run against a naive reference; guards, and divisor nests left unchanged.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/cpu/llvm_codegen.h"
#include "codegen/ir/ir.h"
#include "codegen/ir/kernel.h"
#include "codegen/ir/schedule.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "search/space.h"
#include "tests/common/cpu_kernel_check.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::FencedArray;
using test::RandomValues;
using test::ReferenceOutput;

constexpr uint64_t kTailSeed = 20261127;

/// True iff some split knob of `config` has a tail (its padded extent exceeds its extent).
bool HasTail(const search::ConfigSpace& space, const search::Config& config) {
  for (size_t i = 0; i < space.knobs().size(); ++i) {
    const search::Knob& knob = space.knobs()[i];
    if (knob.kind == search::Knob::Kind::kSplit && search::PaddedExtent(knob.options[config[i]]) != knob.extent) {
      return true;
    }
  }
  return false;
}

struct TailCase {
  std::string label;
  OpKind op;
  std::string shape;  // Workload::Parse syntax
  bool bias, relu;
  int configs;  // distinct random valid configs
};
void PrintTo(const TailCase& c, std::ostream* os) { *os << c.label; }

std::vector<TailCase> TailCases() {
  return {
      {"matmul_97x89x101_bias_relu", OpKind::kMatmul, "97,89,101", true, true, 30},
      {"dense_3x100x129", OpKind::kDense, "3,100,129", false, false, 30},
      {"batch_matmul_2x13x29x31_bias", OpKind::kBatchMatmul, "2,13,29,31", true, false, 30},
      // N,C,H,W,OC,KH,KW[,stride[,pad]]
      {"conv_13x17x19_oc7_k3_bias_relu", OpKind::kConv2d, "1,13,17,19,7,3,3", true, true, 30},
      {"conv_13x17x19_oc7_k3_s2_p1", OpKind::kConv2d, "1,13,17,19,7,3,3,2,1", false, false, 30},
  };
}

class CpuTailsTest : public ::testing::TestWithParam<TailCase> {
 protected:
  static void SetUpTestSuite() { runtime::SetNumThreads(2); }
  static void TearDownTestSuite() { runtime::SetNumThreads(1); }
};

TEST_P(CpuTailsTest, RandomConfigsWithTailsMatchReference) {
  const TailCase& c = GetParam();
  absl::StatusOr<Workload> parsed = Workload::Parse(c.op, c.shape);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Workload w = *parsed;
  w.bias = c.bias;
  w.relu = c.relu;
  absl::StatusOr<std::unique_ptr<Template>> tmpl_or = CreateTemplate(w);
  ASSERT_TRUE(tmpl_or.ok()) << tmpl_or.status();
  const Template& tmpl = **tmpl_or;
  const search::ConfigSpace& space = tmpl.space();

  // Distinct valid configs from a fixed seed, and the default on top.
  std::mt19937_64 rng(kTailSeed);
  std::vector<search::Config> configs = {tmpl.DefaultConfig()};
  std::set<uint64_t> seen = {space.ToIndex(configs[0])};
  for (int draw = 0; draw < 100 * c.configs && static_cast<int>(configs.size()) <= c.configs; ++draw) {
    absl::StatusOr<search::Config> config = space.Sample(rng);
    ASSERT_TRUE(config.ok()) << config.status();
    if (seen.insert(space.ToIndex(*config)).second) configs.push_back(*config);
  }
  ASSERT_EQ(static_cast<int>(configs.size()), c.configs + 1);

  // The sample must have tails, and among them every option of every choice knob.
  int with_tail = 0;
  std::vector<std::set<int32_t>> tail_choices(space.knobs().size());
  for (const search::Config& config : configs) {
    if (!HasTail(space, config)) continue;
    ++with_tail;
    for (size_t i = 0; i < config.size(); ++i) tail_choices[i].insert(config[i]);
  }
  EXPECT_GE(with_tail, c.configs / 2) << "too few configs with a tail";
  for (size_t i = 0; i < space.knobs().size(); ++i) {
    const search::Knob& knob = space.knobs()[i];
    if (knob.kind != search::Knob::Kind::kChoice) continue;
    EXPECT_EQ(tail_choices[i].size(), knob.options.size()) << "not every option of " << knob.name << " drawn with a tail";
  }

  const test::CompiledConfigs compiled_configs = test::CompileConfigs(tmpl, configs, "tail_kernel_");
  const auto& compiled = compiled_configs.kernels;
  const auto& texts = compiled_configs.texts;

  int failures = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string context = absl::StrCat(w.Key(), " config #", i, " ", space.ToJson(configs[i]));
    if (!compiled[i].ok()) {
      ++failures;
      ADD_FAILURE() << "compile failed: " << compiled[i].status() << "\n" << context;
      continue;
    }
    absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(*compiled[i]);
    if (!loaded.ok()) {
      ++failures;
      ADD_FAILURE() << "load failed: " << loaded.status() << "\n" << context;
      continue;
    }
    // Fresh random inputs per config, in fenced arrays; the output starts as NaN.
    std::mt19937_64 data_rng(kTailSeed + 1000 + i);
    const std::string why = test::RunFencedAgainstReference((*loaded)->fn(), w, data_rng);
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << why << "\n" << context << (failures <= 2 ? "\n" + texts[i] : std::string());
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << configs.size() << " configs failed";
}

INSTANTIATE_TEST_SUITE_P(Workloads, CpuTailsTest, ::testing::ValuesIn(TailCases()),
                         [](const ::testing::TestParamInfo<TailCase>& info) { return info.param.label; });

// ---------------------------------------------------------------------------------------------
// Stages built by hand
// ---------------------------------------------------------------------------------------------

/// A GEMM-like stage out[m,n] = relu(sum_k a[m,k] * b[k,n]) split into m0,n0,m1,k0,k1,m2,n2,
/// n2 vectorized, m2 and k1 unrolled, m0 parallel. `acc_tile` 1: accumulated in a local tile
/// attached at m1; 2: the same tile with k0 moved outside it (m0,n0,k0,m1,k1,m2,n2), the
/// partial sums kept in the output between k0 iterations.
LoweredFunc TailGemmStage(int64_t m, int64_t n, int64_t k, const std::vector<int64_t>& fm,
                          const std::vector<int64_t>& fn, const std::vector<int64_t>& fk, search::SplitTails tails,
                          int acc_tile) {
  Buffer a = MakeBuffer("a", {m, k}, BufferScope::kArg, 0);
  Buffer b = MakeBuffer("b", {k, n}, BufferScope::kArg, 1);
  Buffer out = MakeBuffer("out", {m, n}, BufferScope::kArg, 2);
  IterVar vm = MakeIterVar("m", m), vn = MakeIterVar("n", n), vk = MakeIterVar("k", k);
  Stage st(out, {vm, vn}, {vk}, Load(a, {vm.var, vk.var}) * Load(b, {vk.var, vn.var}));
  Expr acc = MakeVar("acc");
  st.SetEpilogue(acc, Max(acc, FloatImm(0.0)));
  auto lm = st.SplitFactors(st.axis(0), fm, tails);
  auto ln = st.SplitFactors(st.axis(1), fn, tails);
  auto lk = st.SplitFactors(st.reduce_axis(0), fk, tails);
  if (acc_tile == 2) {
    st.Reorder({lm[0], ln[0], lk[0], lm[1], lk[1], lm[2], ln[1]});
  } else {
    st.Reorder({lm[0], ln[0], lm[1], lk[0], lk[1], lm[2], ln[1]});
  }
  st.Vectorize(ln[1]);
  st.Unroll(lm[2]);
  st.Unroll(lk[1]);
  if (acc_tile) st.CacheWrite(lm[1]);
  st.Parallel(lm[0]);
  Schedule sched;
  sched.name = "tail_gemm";
  sched.args = {a, b, out};
  sched.stages.push_back(std::move(st));
  return sched.Lower();
}

// Factors that divide their extents lower to the same nest whether tails are allowed or not,
// and that nest has no guard.
TEST(CpuTailsStageTest, DivisorSplitsLowerAsWithoutTails) {
  for (int acc_tile : {0, 1, 2}) {
    for (const auto& [fm, fk] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{2, 3, 4}, {6, 2}}, {{1, 24, 1}, {1, 12}}, {{24, 1, 1}, {12, 1}}}) {
      const std::string none = Print(TailGemmStage(24, 16, 12, fm, {2, 8}, fk, search::SplitTails::kNone, acc_tile));
      const std::string allowed =
          Print(TailGemmStage(24, 16, 12, fm, {2, 8}, fk, search::SplitTails::kAllowed, acc_tile));
      EXPECT_EQ(none, allowed);
      EXPECT_THAT(allowed, Not(HasSubstr("if (")));
    }
  }
}

// `text` with the "if (" of each line whose condition names kh or kw (a convolution's skip of
// the taps on the zero border) removed.
std::string WithoutBorderSkips(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (std::string& line : lines) {
    const size_t at = line.find("if (");
    if (at != std::string::npos && (line.find(" kh") != std::string::npos || line.find(" kw") != std::string::npos)) {
      line.erase(at, 4);
    }
  }
  return absl::StrJoin(lines, "\n");
}

// Divisor configs of the templates keep guard-free nests (their golden texts live in
// printer_test.cc); configs with a tail have guards.
TEST(CpuTailsStageTest, TemplateDivisorConfigsHaveNoGuards) {
  for (const auto& [op, shape] : std::vector<std::pair<OpKind, std::string>>{
           {OpKind::kMatmul, "96,64,48"}, {OpKind::kConv2d, "1,16,14,14,32,3,3,1,1"}}) {
    absl::StatusOr<Workload> w = Workload::Parse(op, shape);
    ASSERT_TRUE(w.ok()) << w.status();
    absl::StatusOr<std::unique_ptr<Template>> tmpl = CreateTemplate(*w);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    std::mt19937_64 rng(kTailSeed + 7);
    int divisor = 0, tail = 0;
    for (int i = 0; i < 4000 && (divisor < 20 || tail < 20); ++i) {
      absl::StatusOr<search::Config> c = space.Sample(rng);
      ASSERT_TRUE(c.ok()) << c.status();
      absl::StatusOr<LoweredFunc> f = (*tmpl)->Lower(*c, "k");
      ASSERT_TRUE(f.ok()) << f.status();
      std::string text = Print(*f);
      // The guard of a weight packed once (prepack) is no tail guard.
      for (size_t at; (at = text.find("if (weight.packed.fresh == 1)")) != std::string::npos;) text.erase(at, 4);
      // Nor is a conv's skip of the taps on its padded input's border (Stage::SkipWhereFalse):
      // its condition is over kh or kw, which no tail guard of these templates names.
      text = WithoutBorderSkips(text);
      if (HasTail(space, *c)) {
        ++tail;
        EXPECT_THAT(text, HasSubstr("if (")) << space.ToJson(*c);
      } else {
        ++divisor;
        EXPECT_THAT(text, Not(HasSubstr("if ("))) << space.ToJson(*c);
      }
    }
    EXPECT_GE(divisor, 20);
    EXPECT_GE(tail, 20);
  }
}

// out[i] = a[i] * 2 over 10 elements in vectors of 4: a serial outer loop is partitioned into
// the two full tiles without a guard and the partial tile (its index fixed, its lanes
// guarded); a parallel one keeps its three iterations and is versioned inside.
TEST(CpuTailsStageTest, ElementwiseTailGolden) {
  for (bool parallel : {false, true}) {
    Buffer a = MakeBuffer("a", {10}, BufferScope::kArg, 0);
    Buffer out = MakeBuffer("out", {10}, BufferScope::kArg, 1);
    IterVar i = MakeIterVar("i", 10);
    Stage st(out, {i}, Load(a, {i.var}) * FloatImm(2.0));
    auto l = st.SplitFactors(st.axis(0), {3, 4}, search::SplitTails::kAllowed);
    EXPECT_EQ(st.extent(l[0]), 3);
    st.Vectorize(l[1]);
    if (parallel) st.Parallel(l[0]);
    const std::string expected = parallel ? R"IR(// parallel
for (i0 = 0; i0 < 3; ++i0) {
  if (i0 < 2) {
    // vectorized
    for (i1 = 0; i1 < 4; ++i1) {
      out[i0*4 + i1] = a[i0*4 + i1]*2f;
    }
  }
  if (2 <= i0) {
    // vectorized
    for (i1 = 0; i1 < 4; ++i1) {
      if (8 + i1 < 10) {
        out[8 + i1] = a[8 + i1]*2f;
      }
    }
  }
}
)IR"
                                          : R"IR(for (i0 = 0; i0 < 2; ++i0) {
  // vectorized
  for (i1 = 0; i1 < 4; ++i1) {
    out[i0*4 + i1] = a[i0*4 + i1]*2f;
  }
}
// vectorized
for (i1 = 0; i1 < 4; ++i1) {
  if (8 + i1 < 10) {
    out[8 + i1] = a[8 + i1]*2f;
  }
}
)IR";
    EXPECT_EQ(Print(st.Lower()), expected) << Print(st.Lower());
  }
}

// Stage::SkipWhereFalse on out[i] = sum over k of pad[i + k] * w[k] (pad: the input with a zero
// border of 1): each conjunct wraps the rest of the accumulation in the loop that binds its
// last var; one whose var is vectorized is left out (an If there would make the loop serial);
// the zeroing of the output is never skipped.
TEST(CpuTailsStageTest, SkipWhereFalsePlacesEachConjunctWhereItsVarsAreBound) {
  Buffer pad = MakeBuffer("pad", {10}, BufferScope::kArg, 0);
  Buffer w = MakeBuffer("w", {3}, BufferScope::kArg, 1);
  Buffer out = MakeBuffer("out", {8}, BufferScope::kArg, 2);
  IterVar i = MakeIterVar("i", 8), k = MakeIterVar("k", 3);
  Expr x = i.var + k.var;
  Expr inside = (Expr(1) <= x) && (x < Expr(9));
  {
    Stage st(out, {i}, {k}, Load(pad, {x}) * Load(w, {k.var}));
    st.SkipWhereFalse({i.var < Expr(6), inside});
    EXPECT_EQ(Print(st.Lower()), R"IR(for (i = 0; i < 8; ++i) {
  out[i] = 0f;
}
for (i = 0; i < 8; ++i) {
  if (i < 6) {
    for (k = 0; k < 3; ++k) {
      if (1 <= i + k && i + k < 9) {
        out[i] = out[i] + pad[i + k]*w[k];
      }
    }
  }
}
)IR") << Print(st.Lower());
  }
  {
    Stage st(out, {i}, {k}, Load(pad, {x}) * Load(w, {k.var}));
    auto l = st.SplitFactors(st.axis(0), {2, 4});
    st.Reorder({l[0], st.reduce_axis(0), l[1]});
    st.Vectorize(l[1]);
    st.SkipWhereFalse({inside});
    EXPECT_THAT(Print(st.Lower()), Not(HasSubstr("if ("))) << Print(st.Lower());
  }
  {
    // A tail on i (8 = 3 x 3 - 1): the partial copy, its outer index fixed, skips too.
    Stage st(out, {i}, {k}, Load(pad, {x}) * Load(w, {k.var}));
    st.SplitFactors(st.axis(0), {3, 3}, search::SplitTails::kAllowed);
    st.SkipWhereFalse({inside});
    const std::string text = Print(st.Lower());
    EXPECT_THAT(text, HasSubstr("if (1 <= i0*3 + i1 + k && i0*3 + i1 + k < 9)")) << text;
    EXPECT_THAT(text, HasSubstr("if (1 <= 6 + i1 + k && 6 + i1 + k < 9)")) << text;
  }
}

class CpuTailsGuardTest : public ::testing::Test {
 protected:
  void SetUp() override { runtime::SetNumThreads(2); }
  void TearDown() override { runtime::SetNumThreads(1); }
};

// Every access of a tailed split stays in bounds and the results are exact: a GEMM-like stage
// with tails on M, N and K (13 x 11 x 7 tiled by 4 x 4 x 2), with and without the accumulator
// tile, and with the tile inside the outer reduction loop (its partial sums loaded from and
// stored to the output, zeroed first, the ReLU applied after the last: on partial sums it
// would change them), each array fenced so that a missing guard reads or writes past it (a
// crash, a changed sentinel or a wrong sum); the output starts as NaN.
TEST_F(CpuTailsGuardTest, TailedGemmStageStaysInBounds) {
  const int64_t m = 13, n = 11, k = 7;
  for (int acc_tile : {0, 1, 2}) {
    LoweredFunc f = TailGemmStage(m, n, k, {2, 2, 4}, {3, 4}, {4, 2}, search::SplitTails::kAllowed, acc_tile);
    const std::string text = Print(f);
    EXPECT_THAT(text, HasSubstr("if (")) << text;
    absl::StatusOr<CompiledKernel> compiled = CompileForHost(f, CodegenOptions{});
    ASSERT_TRUE(compiled.ok()) << compiled.status() << "\n" << text;
    absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(*compiled);
    ASSERT_TRUE(loaded.ok()) << loaded.status();

    std::mt19937_64 rng(kTailSeed + 1 + acc_tile);
    FencedArray a(m * k), b(k * n), out(m * n);
    const std::vector<float> av = RandomValues(m * k, rng), bv = RandomValues(k * n, rng);
    std::memcpy(a.data(), av.data(), av.size() * 4);
    std::memcpy(b.data(), bv.data(), bv.size() * 4);
    for (int64_t i = 0; i < m * n; ++i) out.data()[i] = std::nanf("");
    std::vector<float*> args = {a.data(), b.data(), out.data()};
    (*loaded)->fn()(args.data());

    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t r = 0; r < k; ++r) want += static_cast<double>(av[i * k + r]) * bv[r * n + j];
        want = std::max(want, 0.0);
        EXPECT_NEAR(out.data()[i * n + j], want, 1e-5) << "out[" << i << "," << j << "] acc_tile " << acc_tile;
      }
    }
    EXPECT_TRUE(a.Intact() && b.Intact() && out.Intact()) << "wrote past a buffer";
  }
}

}  // namespace
}  // namespace tune::codegen
