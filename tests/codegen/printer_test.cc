// Golden-text tests of the loop-AST printer, and unit tests of IR folding and index helpers.
#include <string>
#include <unordered_map>

#include "codegen/ir/ir.h"
#include "codegen/ir/schedule.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "codegen/ir/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/golden.h"

namespace tune::codegen {
namespace {

// The config of `tmpl` written as JSON; aborts the test when it does not parse.
search::Config ConfigFromJson(const Template& tmpl, const std::string& json) {
  absl::StatusOr<search::Config> c = tmpl.space().FromJson(json);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : search::Config();
}

// A golden text written as a raw literal that starts on its own line.
std::unique_ptr<Template> MakeTemplate(OpKind op, const std::string& shape, bool bias, bool relu) {
  absl::StatusOr<Workload> w = Workload::Parse(op, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  w->bias = bias;
  w->relu = relu;
  absl::StatusOr<std::unique_ptr<Template>> t = CreateTemplate(*w);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Golden kernels
// ---------------------------------------------------------------------------------------------

// C[4,8] = sum_k A[4,6] * B[6,8]; n split by 4, order m, n.o, k, n.i; n.i vectorized, k
// unrolled, accumulation in a local tile attached at n.o.
TEST(PrinterGoldenTest, HandBuiltMatmulStage) {
  Buffer a = MakeBuffer("A", {4, 6}, BufferScope::kArg, 0);
  Buffer b = MakeBuffer("B", {6, 8}, BufferScope::kArg, 1);
  Buffer c = MakeBuffer("C", {4, 8}, BufferScope::kArg, 2);
  IterVar m = MakeIterVar("m", 4), n = MakeIterVar("n", 8), k = MakeIterVar("k", 6);
  Stage st(c, {m, n}, {k}, Load(a, {m.var, k.var}) * Load(b, {k.var, n.var}));
  auto [no, ni] = st.Split(st.axis(1), 4);
  EXPECT_EQ(st.loop_name(no), "n.o");
  EXPECT_EQ(st.extent(no), 2);
  EXPECT_EQ(st.loop_name(ni), "n.i");
  EXPECT_EQ(st.extent(ni), 4);
  st.Reorder({st.axis(0), no, st.reduce_axis(0), ni});
  st.Vectorize(ni);
  st.Unroll(st.reduce_axis(0));
  st.CacheWrite(no);
  Schedule sched;
  sched.name = "mm";
  sched.args = {a, b, c};
  sched.stages.push_back(st);

  const std::string expected = test::Golden(R"IR(
void mm(float A[4][6], float B[6][8], float C[4][8]) {
  for (m = 0; m < 4; ++m) {
    for (n.o = 0; n.o < 2; ++n.o) {
      local float C.local[4];
      // vectorized
      for (n.i = 0; n.i < 4; ++n.i) {
        C.local[n.i] = 0f;
      }
      // unrolled
      for (k = 0; k < 6; ++k) {
        // vectorized
        for (n.i = 0; n.i < 4; ++n.i) {
          C.local[n.i] = C.local[n.i] + A[m, k]*B[k, n.o*4 + n.i];
        }
      }
      // vectorized
      for (n.i = 0; n.i < 4; ++n.i) {
        C[m, n.o*4 + n.i] = C.local[n.i];
      }
    }
  }
}
)IR");
  std::string got = Print(sched.Lower());
  EXPECT_EQ(got, expected) << "actual:\n" << got;
}

// A reduction without cache_write (zero-init, accumulate and epilogue nests over the output)
// whose two spatial loops are fused into one parallel loop: the fused index is taken apart
// with / and %, which stay because the fused extent 6 is not below the divisor 3.
TEST(PrinterGoldenTest, HandBuiltFusedParallelReductionWithEpilogue) {
  Buffer a = MakeBuffer("A", {2, 3, 4}, BufferScope::kArg, 0);
  Buffer c = MakeBuffer("C", {2, 3}, BufferScope::kArg, 1);
  IterVar i = MakeIterVar("i", 2), j = MakeIterVar("j", 3), k = MakeIterVar("k", 4);
  Stage st(c, {i, j}, {k}, Load(a, {i.var, j.var, k.var}));
  Expr acc = MakeVar("acc");
  st.SetEpilogue(acc, Max(acc * FloatImm(0.5), FloatImm(0.0)));
  int fused = st.Fuse(st.axis(0), st.axis(1));
  EXPECT_EQ(st.loop_name(fused), "i.j");
  EXPECT_EQ(st.extent(fused), 6);
  st.Parallel(fused);
  Schedule sched;
  sched.name = "rowsum";
  sched.args = {a, c};
  sched.stages.push_back(st);

  const std::string expected = test::Golden(R"IR(
void rowsum(float A[2][3][4], float C[2][3]) {
  // parallel
  for (i.j = 0; i.j < 6; ++i.j) {
    C[i.j/3, i.j % 3] = 0f;
  }
  // parallel
  for (i.j = 0; i.j < 6; ++i.j) {
    for (k = 0; k < 4; ++k) {
      C[i.j/3, i.j % 3] = C[i.j/3, i.j % 3] + A[i.j/3, i.j % 3, k];
    }
  }
  // parallel
  for (i.j = 0; i.j < 6; ++i.j) {
    C[i.j/3, i.j % 3] = max(C[i.j/3, i.j % 3]*0.5f, 0f);
  }
}
)IR");
  std::string got = Print(sched.Lower());
  EXPECT_EQ(got, expected) << "actual:\n" << got;
}

// The untuned GEMM baseline: plain loops, the accumulator tile of one element, epilogue
// (bias + relu) applied when writing back.
TEST(PrinterGoldenTest, GemmDefaultConfigWithBiasRelu) {
  auto tmpl = MakeTemplate(OpKind::kMatmul, "4,8,6", /*bias=*/true, /*relu=*/true);
  ASSERT_NE(tmpl, nullptr);
  absl::StatusOr<LoweredFunc> f = tmpl->Lower(tmpl->DefaultConfig(), "gemm_default");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string expected = test::Golden(R"IR(
void gemm_default(float a[4][6], float b[6][8], float bias[8], float out[4][8]) {
  for (m0 = 0; m0 < 4; ++m0) {
    for (n0 = 0; n0 < 8; ++n0) {
      for (m1 = 0; m1 < 1; ++m1) {
        for (n1 = 0; n1 < 1; ++n1) {
          local float out.local[1][1];
          for (m2 = 0; m2 < 1; ++m2) {
            for (n2 = 0; n2 < 1; ++n2) {
              out.local[m2, n2] = 0f;
            }
          }
          for (k0 = 0; k0 < 6; ++k0) {
            for (k1 = 0; k1 < 1; ++k1) {
              for (m2 = 0; m2 < 1; ++m2) {
                for (n2 = 0; n2 < 1; ++n2) {
                  out.local[m2, n2] = out.local[m2, n2] + a[m0 + (m1 + m2), k0 + k1]*b[k0 + k1, n0 + (n1 + n2)];
                }
              }
            }
          }
          for (m2 = 0; m2 < 1; ++m2) {
            for (n2 = 0; n2 < 1; ++n2) {
              out[m0 + (m1 + m2), n0 + (n1 + n2)] = max(out.local[m2, n2] + bias[n0 + (n1 + n2)], 0f);
            }
          }
        }
      }
    }
  }
}
)IR");
  std::string got = Print(*f);
  EXPECT_EQ(got, expected) << "actual:\n" << got;
}

// A conv2d config with a padding stage, a packed weight and a vectorized oc tile.
TEST(PrinterGoldenTest, Conv2dPaddedAndPacked) {
  auto tmpl = MakeTemplate(OpKind::kConv2d, "1,2,4,4,4,3,3,1,1", /*bias=*/false, /*relu=*/false);
  ASSERT_NE(tmpl, nullptr);
  search::Config config = ConfigFromJson(
      *tmpl,
      R"({"tile_oc": [1, 2, 2], "tile_oh": [4, 1], "tile_ow": [2, 1, 2], "tile_ic": [1, 2],
          "order": [0], "vector_axis": [1], "unroll": [0], "pack_weight": [1],
          "acc_tile": [1], "parallel": [0]})");
  ASSERT_TRUE(tmpl->space().IsValid(config)) << tmpl->space().WhyInvalid(config);
  absl::StatusOr<LoweredFunc> f = tmpl->Lower(config, "conv");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string expected = test::Golden(R"IR(
void conv(float data[1][2][4][4], float weight[4][2][3][3], float out[1][4][4][4]) {
  heap float data.pad[1][2][6][6];
  heap float weight.packed[2][2][3][3][2];
  for (pn = 0; pn < 1; ++pn) {
    for (pc = 0; pc < 2; ++pc) {
      for (ph = 0; ph < 6; ++ph) {
        for (pw = 0; pw < 6; ++pw) {
          data.pad[pn, pc, ph, pw] = (1 <= ph && ph < 5 && 1 <= pw && pw < 5 ? data[pn, pc, min(max(ph - 1, 0), 3), min(max(pw - 1, 0), 3)] : 0f);
        }
      }
    }
  }
  for (po = 0; po < 2; ++po) {
    for (pi = 0; pi < 2; ++pi) {
      for (pkh = 0; pkh < 3; ++pkh) {
        for (pkw = 0; pkw < 3; ++pkw) {
          for (pb = 0; pb < 2; ++pb) {
            weight.packed[po, pi, pkh, pkw, pb] = weight[po*2 + pb, pi, pkh, pkw];
          }
        }
      }
    }
  }
  for (n = 0; n < 1; ++n) {
    for (oc0 = 0; oc0 < 1; ++oc0) {
      for (oh0 = 0; oh0 < 4; ++oh0) {
        for (ow0 = 0; ow0 < 2; ++ow0) {
          for (oc1 = 0; oc1 < 2; ++oc1) {
            for (oh1 = 0; oh1 < 1; ++oh1) {
              for (ow1 = 0; ow1 < 1; ++ow1) {
                local float out.local[2][2];
                for (ow2 = 0; ow2 < 2; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 2; ++oc2) {
                    out.local[ow2, oc2] = 0f;
                  }
                }
                for (ic0 = 0; ic0 < 1; ++ic0) {
                  for (kh = 0; kh < 3; ++kh) {
                    if (1 <= oh0 + oh1 + kh && oh0 + oh1 + kh < 5) {
                      for (kw = 0; kw < 3; ++kw) {
                        for (ic1 = 0; ic1 < 2; ++ic1) {
                          for (ow2 = 0; ow2 < 2; ++ow2) {
                            // vectorized
                            for (oc2 = 0; oc2 < 2; ++oc2) {
                              out.local[ow2, oc2] = out.local[ow2, oc2] + data.pad[n, ic0*2 + ic1, oh0 + oh1 + kh, ow0*2 + (ow1*2 + ow2) + kw]*weight.packed[oc0*2 + oc1, ic0*2 + ic1, kh, kw, oc2];
                            }
                          }
                        }
                      }
                    }
                  }
                }
                for (ow2 = 0; ow2 < 2; ++ow2) {
                  // vectorized
                  for (oc2 = 0; oc2 < 2; ++oc2) {
                    out[n, oc0*4 + (oc1*2 + oc2), oh0 + oh1, ow0*2 + (ow1*2 + ow2)] = out.local[ow2, oc2];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}
)IR");
  std::string got = Print(*f);
  EXPECT_EQ(got, expected) << "actual:\n" << got;
}

// ---------------------------------------------------------------------------------------------
// IR pieces
// ---------------------------------------------------------------------------------------------

TEST(IRFoldTest, FoldsConstantsAndIdentities) {
  EXPECT_EQ(Print(Expr(2) + Expr(3)), "5");
  EXPECT_EQ(Print(Expr(7) - Expr(9)), "-2");
  EXPECT_EQ(Print(Expr(6) * Expr(7)), "42");
  // Div/Mod of constants are floor division and modulo.
  EXPECT_EQ(Print(Expr(7) / Expr(2)), "3");
  EXPECT_EQ(Print(Expr(-7) / Expr(2)), "-4");
  EXPECT_EQ(Print(Expr(-7) % Expr(2)), "1");
  EXPECT_EQ(Print(Min(Expr(4), Expr(-1))), "-1");
  EXPECT_EQ(Print(Expr(3) < Expr(4)), "1");

  Expr x = MakeVar("x");
  // Identities return the very same node.
  EXPECT_EQ((x * Expr(1)).get(), x.get());
  EXPECT_EQ((Expr(1) * x).get(), x.get());
  EXPECT_EQ((x + Expr(0)).get(), x.get());
  EXPECT_EQ((Expr(0) + x).get(), x.get());
  EXPECT_EQ((x - Expr(0)).get(), x.get());
  EXPECT_EQ((x / Expr(1)).get(), x.get());
  EXPECT_EQ(Print(x * Expr(0)), "0");
  EXPECT_EQ(Print(x % Expr(1)), "0");
  EXPECT_EQ(Print(x), "x");
  // Non-trivial expressions are kept, printed with the parentheses their tree needs.
  Expr y = MakeVar("y");
  EXPECT_EQ(Print((x + y) * Expr(4)), "(x + y)*4");
  EXPECT_EQ(Print(x - (y + Expr(1))), "x - (y + 1)");
  EXPECT_EQ(Print(x * Expr(4) + y), "x*4 + y");
  // A float addition of +0.0f is dropped too.
  Expr f = FloatImm(1.5);
  EXPECT_EQ(Print(f), "1.5f");
  EXPECT_EQ((f + FloatImm(0.0)).get(), f.get());
  // A select on a constant condition folds to its branch.
  EXPECT_EQ(Select(Expr(1), x, y).get(), x.get());
  EXPECT_EQ(Select(Expr(0), x, y).get(), y.get());
}

TEST(IRSubstituteTest, ReplacesVariablesAndFolds) {
  Expr x = MakeVar("x"), y = MakeVar("y"), other_x = MakeVar("x");
  Expr e = x * Expr(4) + y;
  EXPECT_EQ(Print(Substitute(e, {{AsVar(x), Expr(2)}})), "8 + y");
  EXPECT_EQ(Print(Substitute(e, {{AsVar(x), Expr(2)}, {AsVar(y), Expr(1)}})), "9");
  EXPECT_EQ(Print(Substitute(e, {{AsVar(y), x}})), "x*4 + x");
  // Identity is the node, not the name: a different var called "x" is left alone.
  Expr same = Substitute(e, {{AsVar(other_x), Expr(5)}});
  EXPECT_EQ(same.get(), e.get());
  // Statements: the store's indices and value are rewritten.
  Buffer buf = MakeBuffer("buf", {8}, BufferScope::kArg, 0);
  Stmt s = Store(buf, {x + y}, Load(buf, {x}));
  EXPECT_EQ(Print(Substitute(s, {{AsVar(x), Expr(3)}})), "buf[3 + y] = buf[3];\n");
  EXPECT_TRUE(UsesVar(e, AsVar(x)));
  EXPECT_FALSE(UsesVar(e, AsVar(other_x)));
}

TEST(IRLinearCoefficientTest, AffineExpressions) {
  Expr x = MakeVar("x"), y = MakeVar("y"), z = MakeVar("z");
  int64_t c = -1;
  Expr e = x * Expr(3) + y * Expr(2) - x;
  ASSERT_TRUE(LinearCoefficient(e, AsVar(x), &c));
  EXPECT_EQ(c, 2);
  ASSERT_TRUE(LinearCoefficient(e, AsVar(y), &c));
  EXPECT_EQ(c, 2);
  ASSERT_TRUE(LinearCoefficient(e, AsVar(z), &c));
  EXPECT_EQ(c, 0);
  ASSERT_TRUE(LinearCoefficient(Expr(5) * (x + Expr(1)), AsVar(x), &c));
  EXPECT_EQ(c, 5);
  ASSERT_TRUE(LinearCoefficient(x, AsVar(x), &c));
  EXPECT_EQ(c, 1);
  // The var's own / and % are not affine, nor is a product of two vars.
  EXPECT_FALSE(LinearCoefficient(x / Expr(4), AsVar(x), &c));
  EXPECT_FALSE(LinearCoefficient(x % Expr(4) + y, AsVar(x), &c));
  EXPECT_FALSE(LinearCoefficient(x * y, AsVar(x), &c));
  // ... but they do not matter for a var that does not appear in them.
  ASSERT_TRUE(LinearCoefficient(x / Expr(4) + y * Expr(7), AsVar(y), &c));
  EXPECT_EQ(c, 7);
}

TEST(IRSimplifyDivModTest, SplitsKnownRanges) {
  Expr x = MakeVar("x"), y = MakeVar("y");
  Expr e = x * Expr(32) + y;
  std::unordered_map<const VarNode*, int64_t> extents = {{AsVar(x), 4}, {AsVar(y), 32}};
  Expr div = SimplifyDivMod(e / Expr(32), extents);
  Expr mod = SimplifyDivMod(e % Expr(32), extents);
  EXPECT_EQ(div.get(), x.get()) << Print(div);
  EXPECT_EQ(mod.get(), y.get()) << Print(mod);
  // A multiple of the divisor splits off: (x*64 + y) / 32 -> x*2.
  EXPECT_EQ(Print(SimplifyDivMod((x * Expr(64) + y) / Expr(32), extents)), "x*2");
  EXPECT_EQ(Print(SimplifyDivMod((x * Expr(64) + y) % Expr(32), extents)), "y");
  // A var below the divisor alone: y / 32 -> 0, y % 32 -> y.
  EXPECT_EQ(Print(SimplifyDivMod(y / Expr(32), extents)), "0");
  EXPECT_EQ(SimplifyDivMod(y % Expr(32), extents).get(), y.get());

  // y in [0, 33) may reach 32: nothing may be simplified.
  std::unordered_map<const VarNode*, int64_t> wide = {{AsVar(x), 4}, {AsVar(y), 33}};
  EXPECT_EQ(Print(SimplifyDivMod(e / Expr(32), wide)), "(x*32 + y)/32");
  EXPECT_EQ(Print(SimplifyDivMod(e % Expr(32), wide)), "(x*32 + y) % 32");
  // Nor when y's range is unknown.
  std::unordered_map<const VarNode*, int64_t> only_x = {{AsVar(x), 4}};
  EXPECT_EQ(Print(SimplifyDivMod(e / Expr(32), only_x)), "(x*32 + y)/32");
  // A constant offset moves the remainder's range: (x*32 + y + 1) with y < 32 may reach 32.
  EXPECT_EQ(Print(SimplifyDivMod((e + Expr(1)) / Expr(32), extents)), "(x*32 + y + 1)/32");
  std::unordered_map<const VarNode*, int64_t> narrow = {{AsVar(x), 4}, {AsVar(y), 31}};
  EXPECT_EQ(SimplifyDivMod((e + Expr(1)) / Expr(32), narrow).get(), x.get());
  EXPECT_EQ(Print(SimplifyDivMod((e + Expr(1)) % Expr(32), narrow)), "y + 1");
}

TEST(IRSimplifyDivModTest, AppliesInsideStatements) {
  Expr x = MakeVar("x"), y = MakeVar("y");
  Buffer buf = MakeBuffer("buf", {4, 32}, BufferScope::kArg, 0);
  Expr flat = x * Expr(32) + y;
  Stmt s = For(x, 4, ForKind::kSerial,
               For(y, 32, ForKind::kSerial, Store(buf, {flat / Expr(32), flat % Expr(32)}, FloatImm(1))));
  Stmt simplified = SimplifyDivMod(s, {{AsVar(x), 4}, {AsVar(y), 32}});
  EXPECT_EQ(Print(simplified),
            "for (x = 0; x < 4; ++x) {\n"
            "  for (y = 0; y < 32; ++y) {\n"
            "    buf[x, y] = 1f;\n"
            "  }\n"
            "}\n");
}

TEST(IRFlattenIndexTest, RowMajor) {
  Expr i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  EXPECT_EQ(Print(FlattenIndex({2, 3, 4}, {i, j, k})), "(i*3 + j)*4 + k");
  EXPECT_EQ(Print(FlattenIndex({5}, {i})), "i");
  EXPECT_EQ(Print(FlattenIndex({2, 3, 4}, {Expr(1), Expr(2), Expr(3)})), "23");
  int64_t c;
  ASSERT_TRUE(LinearCoefficient(FlattenIndex({2, 3, 4}, {i, j, k}), AsVar(i), &c));
  EXPECT_EQ(c, 12);
  ASSERT_TRUE(LinearCoefficient(FlattenIndex({2, 3, 4}, {i, j, k}), AsVar(j), &c));
  EXPECT_EQ(c, 4);
}

TEST(IRPrintTest, AllocateAndLoopKinds) {
  Expr i = MakeVar("i");
  Buffer tmp = MakeBuffer("tmp", {2, 3}, BufferScope::kHeap);
  Buffer out = MakeBuffer("out", {3}, BufferScope::kArg, 0);
  Stmt s = Allocate(tmp, For(i, 3, ForKind::kUnrolled, Store(out, {i}, Load(tmp, {Expr(1), i}))));
  EXPECT_EQ(Print(s),
            "heap float tmp[2][3];\n"
            "// unrolled\n"
            "for (i = 0; i < 3; ++i) {\n"
            "  out[i] = tmp[1, i];\n"
            "}\n");
  EXPECT_EQ(ForKindName(ForKind::kParallel), "parallel");
  EXPECT_EQ(ForKindName(ForKind::kVectorized), "vectorized");
}

using StageDeathTest = ::testing::Test;

TEST_F(StageDeathTest, SplitByNonDivisorDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Buffer c = MakeBuffer("C", {6}, BufferScope::kArg, 0);
  IterVar i = MakeIterVar("i", 6);
  Stage st(c, {i}, FloatImm(1));
  EXPECT_DEATH(st.Split(st.axis(0), 4), "split factor 4 does not divide 6");
  // A divisor is fine.
  auto [o, in] = st.Split(st.axis(0), 3);
  EXPECT_EQ(st.extent(o), 2);
  EXPECT_EQ(st.extent(in), 3);
}

}  // namespace
}  // namespace tune::codegen
