// Tests of the CUDA GEMM template on extents with few divisors: tiles with tails (a partial
// last block or K tile) compute the reference in the GPU interpreter with no access out of
// bounds, compile with NVRTC, and a kernel with a guard taken out is caught.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/gpu_interpreter.h"
#include "tests/common/measure_cuda_configs.h"
#include "tests/common/nvrtc_compile.h"
#include "tests/common/test_seed.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using test::ParseWorkload;

// The shapes of the tail tests: odd and prime extents, the epilogue on some.
std::vector<Workload> TailShapes() {
  return {ParseWorkload(OpKind::kMatmul, "37,29,41"), ParseWorkload(OpKind::kDense, "3,100,129", true, true),
          ParseWorkload(OpKind::kBatchMatmul, "2,13,17,11"),
          ParseWorkload(OpKind::kConv2d, "1,13,17,19,7,3,3,1,1", true, true)};
}

// True when a split knob of the GEMM tiles covers more than its extent.
bool TailsHasTail(const search::ConfigSpace& space, const search::Config& c) {
  for (const char* name : {"tile_m", "tile_n", "tile_k"}) {
    if (search::PaddedExtent(space.Get(c, name)) != space.knobs()[space.KnobIndex(name)].extent) return true;
  }
  return false;
}

// Random inputs in [-1, 1) for workload `w` (never zero: a missing term shows).
std::vector<std::vector<float>> TailsInputs(const Workload& w, uint64_t stream) {
  std::mt19937_64 rng = test::TestRng(stream);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<std::vector<float>> inputs;
  for (const TensorSpec& spec : w.Inputs()) {
    std::vector<float> v(static_cast<size_t>(spec.NumElements()));
    for (float& x : v) {
      do x = value(rng);
      while (x == 0.0f);
    }
    inputs.push_back(std::move(v));
  }
  return inputs;
}

// The output of `w` on `in`, computed directly (double sums, then the epilogue).
std::vector<float> TailsReference(const Workload& w, const std::vector<std::vector<float>>& in) {
  auto epilogue = [&](double v, int64_t channel) {
    if (w.bias) v += in[2][channel];
    if (w.relu) v = std::max(v, 0.0);
    return static_cast<float>(v);
  };
  std::vector<float> out(static_cast<size_t>(w.Output().NumElements()));
  if (w.op == OpKind::kConv2d) {
    const int64_t oh_n = w.out_h(), ow_n = w.out_w();
    const int64_t c_per = w.in_c / w.groups, oc_per = w.out_c / w.groups;
    for (int64_t b = 0; b < w.batch; ++b) {
      for (int64_t oc = 0; oc < w.out_c; ++oc) {
        const int64_t c0 = oc / oc_per * c_per;
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          for (int64_t ow = 0; ow < ow_n; ++ow) {
            double sum = 0;
            for (int64_t c = c0; c < c0 + c_per; ++c) {
              for (int64_t kh = 0; kh < w.kernel_h; ++kh) {
                for (int64_t kw = 0; kw < w.kernel_w; ++kw) {
                  const int64_t ih = oh * w.stride_h + kh * w.dilation_h - w.pad_h;
                  const int64_t iw = ow * w.stride_w + kw * w.dilation_w - w.pad_w;
                  if (ih < 0 || ih >= w.in_h || iw < 0 || iw >= w.in_w) continue;
                  sum += double{in[0][((b * w.in_c + c) * w.in_h + ih) * w.in_w + iw]} *
                         in[1][((oc * c_per + c - c0) * w.kernel_h + kh) * w.kernel_w + kw];
                }
              }
            }
            out[((b * w.out_c + oc) * oh_n + oh) * ow_n + ow] = epilogue(sum, oc);
          }
        }
      }
    }
    return out;
  }
  const int64_t batches = w.op == OpKind::kBatchMatmul ? w.batch : 1;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < w.m; ++i) {
      for (int64_t j = 0; j < w.n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < w.k; ++k) {
          const float a = in[0][(b * w.m + i) * w.k + k];
          const float x = w.op == OpKind::kDense ? in[1][j * w.k + k] : in[1][(b * w.k + k) * w.n + j];
          sum += double{a} * x;
        }
        out[(b * w.m + i) * w.n + j] = epilogue(sum, j);
      }
    }
  }
  return out;
}

// 24 random valid configs per shape, at least 16 of them with tails (implicit GEMM for conv2d:
// the direct variant has none), the same on every call.
std::vector<search::Config> TailsConfigs(const Template& t, uint64_t stream) {
  const search::ConfigSpace& space = t.space();
  const bool conv = t.workload().op == OpKind::kConv2d;
  std::mt19937_64 rng = test::TestRng(stream);
  auto gemm = [&](const search::Config& c) { return !conv || space.GetInt(c, "variant") == 0; };
  std::vector<search::Config> configs = test::DrawWhere(
      space, rng, 16, [&](const search::Config& c) { return gemm(c) && TailsHasTail(space, c); }, {}, 20000);
  return test::DrawWhere(space, rng, 24, gemm, std::move(configs), 20000);
}

// Random valid configs with tails of every shape (split-K, K slices, the cp.async pipelines
// with tails along M or N, double buffering, vector loads and interleaved tiles among them)
// compute the reference, with no out-of-bounds access, unwritten read or race; so does each
// shape's default config.
TEST(CudaGemmTailsTest, RandomConfigsWithTailsMatchTheReference) {
  uint64_t stream = 10;
  int tails = 0, splits = 0, pipelined = 0, wide = 0, pipelined_tails = 0;
  for (const Workload& w : TailShapes()) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    const search::ConfigSpace& space = (*t)->space();
    const std::vector<std::vector<float>> inputs = TailsInputs(w, stream);
    const std::vector<float> reference = TailsReference(w, inputs);
    std::vector<search::Config> configs = TailsConfigs(**t, stream++);
    EXPECT_EQ(configs.size(), 24u) << w.Key();
    const search::Config def = (*t)->DefaultConfig();
    ASSERT_TRUE(space.IsValid(def)) << w.Key();
    configs.push_back(def);
    for (const search::Config& c : configs) {
      tails += TailsHasTail(space, c);
      splits += space.GetInt(c, "k_split") > 1;
      pipelined += space.GetInt(c, "cp_async") > 0;
      pipelined_tails += space.GetInt(c, "cp_async") > 0 && TailsHasTail(space, c);
      wide += space.GetInt(c, "vector") > 1;
      absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "k");
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(test::RunAgainstReference(*f, inputs, reference), "") << w.Key() << " " << space.ToJson(c);
    }
  }
  EXPECT_GE(tails, 64);
  EXPECT_GT(splits, 0);
  EXPECT_GT(pipelined, 0);
  EXPECT_GT(pipelined_tails, 0);  // clamped asynchronous copies past M or N
  EXPECT_GT(wide, 0);
}

// Every third of the same configs (8 per shape, 6 of them with tails), three depthwise configs
// with tails of each of two shapes, and the defaults of the ViT attention product (12 x 197 x
// 197 x 64, which had no valid config before tails), of prime extents and of a classifier row,
// compile with NVRTC for sm_90.
TEST(CudaGemmTailsTest, ConfigsWithTailsCompileForSm90) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  std::vector<test::CudaSource> jobs;
  uint64_t stream = 10;
  for (const Workload& w : TailShapes()) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    const std::vector<search::Config> configs = TailsConfigs(**t, stream++);
    for (size_t i = 0; i < configs.size(); i += 3) {
      const search::Config& c = configs[i];
      absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "tails"));
      ASSERT_TRUE(k.ok()) << k.status();
      jobs.push_back({w.Key() + " " + (*t)->space().ToJson(c), k->source});
    }
  }
  // Depthwise: three configs with tails of each of two shapes.
  std::mt19937_64 rng = test::TestRng(30);
  for (const Workload& w : {ParseWorkload(OpKind::kConv2d, "1,37,7,7,37,5,5,1,2,1,37", true, true),
                            ParseWorkload(OpKind::kConv2d, "1,144,55,55,144,3,3,2,1,1,144")}) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    const search::ConfigSpace& space = (*t)->space();
    for (const search::Config& c : test::DrawWhere(space, rng, 3, [&](const search::Config& c) {
           return search::PaddedExtent(space.Get(c, "tile_c")) != w.out_c ||
                  search::PaddedExtent(space.Get(c, "tile_w")) != w.out_w();
         })) {
      absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(c, "tails_dw"));
      ASSERT_TRUE(k.ok()) << k.status();
      jobs.push_back({w.Key() + " " + space.ToJson(c), k->source});
    }
  }
  for (const Workload& w : {ParseWorkload(OpKind::kBatchMatmul, "12,197,197,64"),
                            ParseWorkload(OpKind::kMatmul, "97,89,101"),
                            ParseWorkload(OpKind::kDense, "1,1000,2048", true)}) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<search::Config> def = (*t)->ValidDefaultConfig();
    ASSERT_TRUE(def.ok()) << def.status();
    EXPECT_TRUE(TailsHasTail((*t)->space(), *def)) << w.Key();
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(*def, "tails_default"));
    ASSERT_TRUE(k.ok()) << k.status();
    jobs.push_back({w.Key() + " default", k->source});
  }
  test::ExpectAllCompileForSm90(jobs);
}

// The default of a shape whose extents have few divisors is the 16 x 16 kernel with padded
// tiles (ceil-divided grid); the 12 x 197 x 197 x 64 attention product has one at all.
TEST(CudaGemmTailsTest, DefaultsOfOddShapesPadTheirTiles) {
  auto vit = CreateTemplate(ParseWorkload(OpKind::kBatchMatmul, "12,197,197,64"), Backend::kCuda);
  ASSERT_TRUE(vit.ok());
  const search::ConfigSpace& space = (*vit)->space();
  const search::Config def = (*vit)->DefaultConfig();
  ASSERT_TRUE(space.IsValid(def));
  EXPECT_EQ(space.Get(def, "tile_m"), (std::vector<int64_t>{13, 16, 1}));
  EXPECT_EQ(space.Get(def, "tile_n"), (std::vector<int64_t>{13, 16, 1}));
  absl::StatusOr<CudaKernel> k = GenerateCuda(*(*vit)->Lower(def, "vit"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->grid, (std::array<int64_t, 3>{13, 13, 12}));
  EXPECT_THAT(k->source, HasSubstr(" < 197)"));
  // A prime extent (no divisor but 1 and itself) still gets 16 x 16 threads.
  auto prime = CreateTemplate(ParseWorkload(OpKind::kMatmul, "97,89,101"), Backend::kCuda);
  ASSERT_TRUE(prime.ok());
  const search::Config p = (*prime)->DefaultConfig();
  ASSERT_TRUE((*prime)->space().IsValid(p));
  EXPECT_EQ((*prime)->space().Get(p, "tile_m")[1] * (*prime)->space().Get(p, "tile_n")[1], 256);
}

// A tail config keeps 128-bit loads for the runs wholly inside the matrix (1000 is a multiple
// of 4) and goes lane by lane, guarded, only at the edge; the output stores likewise.
TEST(CudaGemmTailsTest, RunsInsideTheMatrixKeepWideAccesses) {
  auto t = CreateTemplate(ParseWorkload(OpKind::kMatmul, "1000,1000,1000"), Backend::kCuda);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<search::Config> c = (*t)->space().FromJson(
      R"({"tile_m":[8,16,8],"tile_n":[8,16,8],"tile_k":[63,16],"vector":[4],"double_buffer":[1],"pad":[4],"unroll_k":[1],"interleave":[1],"k_slices":[1]})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*t)->space().IsValid(*c)) << (*t)->space().WhyInvalid(*c);
  absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(*c, "k"));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("*reinterpret_cast<const float4*>(a + "));
  EXPECT_THAT(k->source, HasSubstr("*reinterpret_cast<const float4*>(b + "));
  EXPECT_THAT(k->source, HasSubstr("*reinterpret_cast<float4*>(out + "));
  EXPECT_THAT(k->source, HasSubstr(" < 1000)"));
  EXPECT_THAT(k->source, HasSubstr(" ? a["));
  // The same tiles on 1024 have no tail, and no guard.
  auto even = CreateTemplate(ParseWorkload(OpKind::kMatmul, "1024,1024,1024"), Backend::kCuda);
  absl::StatusOr<search::Config> e = (*even)->space().FromJson(
      R"({"tile_m":[8,16,8],"tile_n":[8,16,8],"tile_k":[64,16],"vector":[4],"double_buffer":[1],"pad":[4],"unroll_k":[1],"interleave":[1],"k_slices":[1]})");
  ASSERT_TRUE(e.ok());
  absl::StatusOr<CudaKernel> ke = GenerateCuda(*(*even)->Lower(*e, "k"));
  ASSERT_TRUE(ke.ok());
  EXPECT_THAT(ke->source, ::testing::Not(HasSubstr(" < 1024)")));
  EXPECT_THAT(ke->source, ::testing::Not(HasSubstr("if (")));
}

// The depthwise template with tails (channels, rows and columns past the output): random
// valid configs of three shapes with odd extents, 20 each, at least 12 with tails, and the
// defaults compute the reference with no out-of-bounds access.
TEST(CudaGemmTailsTest, DepthwiseConfigsWithTailsMatchTheReference) {
  uint64_t stream = 20;
  int tails = 0;
  for (const Workload& w : {ParseWorkload(OpKind::kConv2d, "1,13,17,19,13,3,3,1,1,1,13", true, true),
                            ParseWorkload(OpKind::kConv2d, "2,6,9,11,6,3,3,2,1,1,6", true, false),
                            ParseWorkload(OpKind::kConv2d, "1,37,7,7,37,5,5,1,2,1,37")}) {
    auto t = CreateTemplate(w, Backend::kCuda);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ((*t)->name(), "cuda_depthwise_conv2d");
    const search::ConfigSpace& space = (*t)->space();
    std::mt19937_64 rng = test::TestRng(stream);
    auto has_tail = [&](const search::Config& c) {
      for (const char* name : {"tile_c", "tile_h", "tile_w"}) {
        if (search::PaddedExtent(space.Get(c, name)) != space.knobs()[space.KnobIndex(name)].extent) return true;
      }
      return false;
    };
    std::vector<search::Config> configs = test::DrawWhere(space, rng, 12, has_tail, {}, 20000);
    configs = test::DrawWhere(space, rng, 20, nullptr, std::move(configs), 20000);
    EXPECT_EQ(configs.size(), 20u) << w.Key();
    configs.push_back((*t)->DefaultConfig());
    const std::vector<std::vector<float>> inputs = TailsInputs(w, stream++);
    const std::vector<float> reference = TailsReference(w, inputs);
    for (const search::Config& c : configs) {
      ASSERT_TRUE(space.IsValid(c)) << space.ToJson(c);
      tails += has_tail(c);
      absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "dw");
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(test::RunAgainstReference(*f, inputs, reference), "") << w.Key() << " " << space.ToJson(c);
    }
  }
  EXPECT_GE(tails, 36);
}

// Takes the tail guards out of a GEMM kernel: selects that zero a global load become the load
// (`loads`), ifs around output stores become their body (`stores`).
struct TailsUnguard : IRMutator {
  bool loads = false, stores = false;
  const BufferNode* out = nullptr;
  Expr MutateExpr(const Expr& e) override {
    if (loads && e->kind == ExprKind::kSelect) {
      auto* s = static_cast<const SelectNode*>(e.get());
      if (s->true_value->kind == ExprKind::kLoad &&
          static_cast<const LoadNode*>(s->true_value.get())->buffer->scope == BufferScope::kArg) {
        return MutateExpr(s->true_value);
      }
    }
    return IRMutator::MutateExpr(e);
  }
  Stmt MutateStmt(const Stmt& s) override {
    if (stores && s->kind == StmtKind::kIf && StoresOut(s)) {
      return MutateStmt(static_cast<const IfNode*>(s.get())->then_case);
    }
    return IRMutator::MutateStmt(s);
  }
  bool StoresOut(const Stmt& s) const {
    struct Find : IRVisitor {
      const BufferNode* out;
      bool found = false;
      void VisitStmt(const Stmt& x) override {
        if (x->kind == StmtKind::kStore && static_cast<const StoreNode*>(x.get())->buffer.get() == out) found = true;
        IRVisitor::VisitStmt(x);
      }
    } find;
    find.out = out;
    find.VisitStmt(s);
    return find.found;
  }
};

// Without its load guards a tail config reads past A and B; without its store guards it writes
// past the output: the interpreter reports both (and the guarded kernel is clean).
TEST(CudaGemmTailsTest, AMissingGuardIsCaught) {
  const Workload w = ParseWorkload(OpKind::kMatmul, "37,29,41");
  auto t = CreateTemplate(w, Backend::kCuda);
  ASSERT_TRUE(t.ok());
  // Tails along M, N and K: 3 x 16 rows, 2 x 16 columns, 3 x 16 of K.
  absl::StatusOr<search::Config> c = (*t)->space().FromJson(
      R"({"tile_m":[3,8,2],"tile_n":[2,8,2],"tile_k":[3,16],"vector":[2],"double_buffer":[0],"pad":[0],"unroll_k":[0],"interleave":[0],"k_slices":[1]})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*t)->space().IsValid(*c)) << (*t)->space().WhyInvalid(*c);
  absl::StatusOr<LoweredFunc> f = (*t)->Lower(*c, "k");
  ASSERT_TRUE(f.ok());
  const std::vector<std::vector<float>> inputs = TailsInputs(w, 3);
  const std::vector<float> reference = TailsReference(w, inputs);
  EXPECT_EQ(test::RunAgainstReference(*f, inputs, reference), "");
  for (bool loads : {true, false}) {
    TailsUnguard unguard;
    unguard.loads = loads, unguard.stores = !loads;
    unguard.out = f->args.back().get();
    LoweredFunc broken = *f;
    broken.body = unguard.MutateStmt(f->body);
    const std::string why = test::RunAgainstReference(broken, inputs, reference);
    EXPECT_THAT(why, HasSubstr(loads ? "read of " : "write of out")) << "loads " << loads;
    EXPECT_THAT(why, HasSubstr("out of bounds")) << "loads " << loads;
  }
}

}  // namespace
}  // namespace tune::codegen
