// Tests of the LLVM backend: hand-built kernels JIT-compiled and run in this process.
#include "codegen/cpu/llvm_codegen.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codegen/ir/ir.h"
#include "codegen/ir/kernel.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

/// A 64-byte aligned fp32 array, as the kernel ABI requires.
class AlignedArray {
 public:
  explicit AlignedArray(int64_t n, float fill = 0.0f)
      : n_(n), data_(static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64))) {
    for (int64_t i = 0; i < n_; ++i) data_.get()[i] = fill;
  }
  float* data() const { return data_.get(); }
  float& operator[](int64_t i) const { return data_.get()[i]; }
  int64_t size() const { return n_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int64_t n_;
  std::unique_ptr<float, Free> data_;
};

AlignedArray RandomArray(int64_t n, uint64_t seed) {
  AlignedArray a(n);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 250.0f;
  return a;
}

/// Compiles `func` (keeping the optimized IR) and links it into this process.
struct Jitted {
  CompiledKernel compiled;
  std::unique_ptr<LoadedKernel> loaded;

  void Run(const std::vector<const AlignedArray*>& args) const {
    std::vector<float*> ptrs;
    for (const AlignedArray* a : args) ptrs.push_back(a->data());
    loaded->fn()(ptrs.data());
  }
};

Jitted Jit(const LoweredFunc& func) {
  Jitted out;
  CodegenOptions options;
  options.keep_ir = true;
  absl::StatusOr<CompiledKernel> compiled = CompileForHost(func, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status() << "\n" << Print(func);
  if (!compiled.ok()) return out;
  out.compiled = std::move(*compiled);
  EXPECT_EQ(out.compiled.symbol, func.name);
  EXPECT_FALSE(out.compiled.object_code.empty());
  absl::StatusOr<std::unique_ptr<LoadedKernel>> loaded = LoadedKernel::Load(out.compiled);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (loaded.ok()) out.loaded = std::move(*loaded);
  return out;
}

class LlvmCodegenTest : public ::testing::Test {
 protected:
  void SetUp() override { runtime::SetNumThreads(2); }
  void TearDown() override { runtime::SetNumThreads(1); }
};

// out[i] = a[i] * 2 + b[i] over one 16-lane vector.
TEST_F(LlvmCodegenTest, VectorizedContiguousLoop) {
  Buffer a = MakeBuffer("a", {16}, BufferScope::kArg, 0);
  Buffer b = MakeBuffer("b", {16}, BufferScope::kArg, 1);
  Buffer out = MakeBuffer("out", {16}, BufferScope::kArg, 2);
  Expr i = MakeVar("i");
  Stmt body = For(i, 16, ForKind::kVectorized,
                  Store(out, {i}, Load(a, {i}) * FloatImm(2.0) + Load(b, {i})));
  Jitted k = Jit(LoweredFunc{"vec_axpy", {a, b, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  EXPECT_THAT(k.compiled.ir, HasSubstr("<16 x float>"));

  AlignedArray av = RandomArray(16, 1), bv = RandomArray(16, 2), ov(16, std::nanf(""));
  k.Run({&av, &bv, &ov});
  for (int j = 0; j < 16; ++j) EXPECT_FLOAT_EQ(ov[j], av[j] * 2.0f + bv[j]) << "lane " << j;
}

// A vectorized loop whose load has stride 3 (a gather) and whose store has stride 2 (a
// scatter); the elements the scatter skips must keep their old value.
TEST_F(LlvmCodegenTest, VectorizedStridedGatherAndScatter) {
  Buffer a = MakeBuffer("a", {32}, BufferScope::kArg, 0);
  Buffer gathered = MakeBuffer("gathered", {8}, BufferScope::kArg, 1);
  Buffer scattered = MakeBuffer("scattered", {16}, BufferScope::kArg, 2);
  Expr i = MakeVar("i");
  Stmt body = For(i, 8, ForKind::kVectorized,
                  Seq({Store(gathered, {i}, Load(a, {i * Expr(3) + Expr(1)})),
                       Store(scattered, {i * Expr(2)}, Load(a, {i}) + FloatImm(1.0))}));
  Jitted k = Jit(LoweredFunc{"strided", {a, gathered, scattered}, body});
  ASSERT_NE(k.loaded, nullptr);
  EXPECT_THAT(k.compiled.ir, HasSubstr("<8 x float>"));

  AlignedArray av = RandomArray(32, 3), gv(8, std::nanf("")), sv(16, -123.0f);
  k.Run({&av, &gv, &sv});
  for (int j = 0; j < 8; ++j) EXPECT_EQ(gv[j], av[3 * j + 1]) << "gathered " << j;
  for (int j = 0; j < 16; ++j) {
    if (j % 2 == 0) {
      EXPECT_EQ(sv[j], av[j / 2] + 1.0f) << "scattered " << j;
    } else {
      EXPECT_EQ(sv[j], -123.0f) << "scatter wrote skipped element " << j;
    }
  }
}

// A loop marked vectorized whose store does not move with the loop var (a reduction into
// one element) cannot become vector code; it must fall back to a correct serial loop.
TEST_F(LlvmCodegenTest, VectorizedReductionFallsBackToSerial) {
  Buffer a = MakeBuffer("a", {8}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {1}, BufferScope::kArg, 1);
  Expr i = MakeVar("i");
  Stmt body = Seq({Store(out, {Expr(0)}, FloatImm(0.0)),
                   For(i, 8, ForKind::kVectorized,
                       Store(out, {Expr(0)}, Load(out, {Expr(0)}) + Load(a, {i})))});
  Jitted k = Jit(LoweredFunc{"vec_reduce", {a, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  AlignedArray av = RandomArray(8, 4), ov(1, std::nanf(""));
  k.Run({&av, &ov});
  float want = 0;
  for (int j = 0; j < 8; ++j) want += av[j];
  EXPECT_NEAR(ov[0], want, 1e-5);
}

// A parallel loop nested in a serial one: the outlined body must see the outer var and
// every buffer through its closure.
TEST_F(LlvmCodegenTest, ParallelLoopRunsOnThePool) {
  ASSERT_EQ(runtime::NumThreads(), 2);
  constexpr int64_t kT = 3, kR = 37, kC = 16;
  Buffer a = MakeBuffer("a", {kR, kC}, BufferScope::kArg, 0);
  Buffer scale = MakeBuffer("scale", {kT}, BufferScope::kArg, 1);
  Buffer out = MakeBuffer("out", {kT, kR, kC}, BufferScope::kArg, 2);
  Expr t = MakeVar("t"), r = MakeVar("r"), c = MakeVar("c");
  Stmt body = For(t, kT, ForKind::kSerial,
                  For(r, kR, ForKind::kParallel,
                      For(c, kC, ForKind::kSerial,
                          Store(out, {t, r, c}, Load(a, {r, c}) * Load(scale, {t}) + FloatImm(1.0)))));
  Jitted k = Jit(LoweredFunc{"par", {a, scale, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  EXPECT_THAT(k.compiled.ir, HasSubstr("tune_rt_parallel_for"));

  AlignedArray av = RandomArray(kR * kC, 5), sv = RandomArray(kT, 6), ov(kT * kR * kC, std::nanf(""));
  k.Run({&av, &sv, &ov});
  for (int64_t ti = 0; ti < kT; ++ti) {
    for (int64_t ri = 0; ri < kR; ++ri) {
      for (int64_t ci = 0; ci < kC; ++ci) {
        // The multiply-add may be fused (one rounding), so compare with a tolerance.
        float want = av[ri * kC + ci] * sv[ti] + 1.0f;
        ASSERT_NEAR(ov[(ti * kR + ri) * kC + ci], want, 1e-5) << "t=" << ti << " r=" << ri << " c=" << ci;
      }
    }
  }
}

// A serial loop has no runtime call: the parallel check above is not vacuous.
TEST_F(LlvmCodegenTest, SerialLoopHasNoParallelCall) {
  Buffer a = MakeBuffer("a", {64}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {64}, BufferScope::kArg, 1);
  Expr i = MakeVar("i");
  Stmt body = For(i, 64, ForKind::kSerial, Store(out, {i}, Load(a, {i}) + FloatImm(1.0)));
  Jitted k = Jit(LoweredFunc{"serial", {a, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  EXPECT_THAT(k.compiled.ir, Not(HasSubstr("tune_rt_parallel_for")));
  AlignedArray av = RandomArray(64, 7), ov(64, std::nanf(""));
  k.Run({&av, &ov});
  for (int j = 0; j < 64; ++j) EXPECT_EQ(ov[j], av[j] + 1.0f);
}

// An unrolled loop (inside a serial one) binds its var to each constant in turn; the
// reversed index catches a var bound to the wrong iteration.
TEST_F(LlvmCodegenTest, UnrolledLoop) {
  constexpr int64_t kRows = 3, kCols = 5;
  Buffer a = MakeBuffer("a", {kRows, kCols}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {kRows, kCols}, BufferScope::kArg, 1);
  Expr r = MakeVar("r"), j = MakeVar("j");
  Stmt body = For(r, kRows, ForKind::kSerial,
                  For(j, kCols, ForKind::kUnrolled,
                      Store(out, {r, j}, Load(a, {r, Expr(kCols - 1) - j}) * Load(a, {r, j}) +
                                             FloatImm(0.5))));
  Jitted k = Jit(LoweredFunc{"unrolled", {a, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  AlignedArray av = RandomArray(kRows * kCols, 8), ov(kRows * kCols, std::nanf(""));
  k.Run({&av, &ov});
  for (int64_t ri = 0; ri < kRows; ++ri) {
    for (int64_t ci = 0; ci < kCols; ++ci) {
      float want = av[ri * kCols + (kCols - 1 - ci)] * av[ri * kCols + ci] + 0.5f;
      EXPECT_NEAR(ov[ri * kCols + ci], want, 1e-5) << "r=" << ri << " j=" << ci;
    }
  }
}

// A heap scratch buffer (tune_rt_alloc / tune_rt_free) written by one loop and read in
// reverse by the next, plus a local (stack) buffer accumulating a sum.
TEST_F(LlvmCodegenTest, HeapAndLocalAllocate) {
  constexpr int64_t kN = 16;
  Buffer a = MakeBuffer("a", {kN}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {kN}, BufferScope::kArg, 1);
  Buffer total = MakeBuffer("total", {1}, BufferScope::kArg, 2);
  Buffer tmp = MakeBuffer("tmp", {kN}, BufferScope::kHeap);
  Buffer acc = MakeBuffer("acc", {1}, BufferScope::kLocal);
  Expr i = MakeVar("i"), j = MakeVar("j"), s = MakeVar("s");
  Stmt body = Allocate(
      tmp, Seq({For(i, kN, ForKind::kSerial, Store(tmp, {i}, Load(a, {i}) * Load(a, {i}))),
                For(j, kN, ForKind::kSerial,
                    Store(out, {j}, Load(tmp, {Expr(kN - 1) - j}) - Load(a, {j}))),
                Allocate(acc, Seq({Store(acc, {Expr(0)}, FloatImm(0.0)),
                                   For(s, kN, ForKind::kSerial,
                                       Store(acc, {Expr(0)}, Load(acc, {Expr(0)}) + Load(tmp, {s}))),
                                   Store(total, {Expr(0)}, Load(acc, {Expr(0)}))}))}));
  Jitted k = Jit(LoweredFunc{"scratch", {a, out, total}, body});
  ASSERT_NE(k.loaded, nullptr);
  EXPECT_THAT(k.compiled.ir, HasSubstr("tune_rt_alloc"));
  EXPECT_THAT(k.compiled.ir, HasSubstr("tune_rt_free"));

  AlignedArray av = RandomArray(kN, 9), ov(kN, std::nanf("")), tv(1, std::nanf(""));
  for (int rep = 0; rep < 3; ++rep) {  // scratch is fresh on every call
    k.Run({&av, &ov, &tv});
    float want_total = 0;
    for (int64_t x = 0; x < kN; ++x) {
      float rev = av[kN - 1 - x];
      EXPECT_NEAR(ov[x], rev * rev - av[x], 1e-5) << "x=" << x;
      want_total += av[x] * av[x];
    }
    EXPECT_NEAR(tv[0], want_total, 1e-4);
  }
}

// Scratch freed by a kernel is handed out again for the same size (no fresh pages per call),
// aligned, never to two holders at once, and the cache stays bounded.
TEST(RuntimeScratchTest, FreedBlocksAreReusedForTheSameSize) {
  constexpr int64_t kBig = 4 << 20;
  void* first = tune_rt_alloc(kBig);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  std::memset(first, 1, kBig);
  tune_rt_free(first);
  void* again = tune_rt_alloc(kBig);
  EXPECT_EQ(again, first) << "a freed block of the same size is reused";
  void* other = tune_rt_alloc(kBig);
  EXPECT_NE(other, again) << "a block in use is never handed out twice";
  void* small = tune_rt_alloc(100);
  EXPECT_NE(small, again);
  EXPECT_NE(small, other);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  tune_rt_free(other);
  tune_rt_free(again);
  tune_rt_free(small);
  tune_rt_free(nullptr);
  // Twenty blocks of distinct sizes freed: only the newest few are kept, the first is gone.
  std::vector<void*> many;
  for (int i = 0; i < 20; ++i) many.push_back(tune_rt_alloc(1024 * (i + 1)));
  for (void* p : many) tune_rt_free(p);
  void* newest = tune_rt_alloc(1024 * 20);
  EXPECT_EQ(newest, many.back());
  tune_rt_free(newest);
}

// kernel.h promises that a kernel may be called from several threads at once. With a
// parallel loop inside, each call enters the runtime pool; a caller that finds the pool busy
// runs its loop serially, so every call completes with the right result.
TEST_F(LlvmCodegenTest, ConcurrentCallsOfAParallelKernel) {
  constexpr int64_t kN = 256;
  Buffer a = MakeBuffer("a", {kN}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {kN}, BufferScope::kArg, 1);
  Buffer tmp = MakeBuffer("tmp", {kN}, BufferScope::kHeap);
  Expr i = MakeVar("i"), j = MakeVar("j");
  Stmt body = Allocate(tmp, Seq({For(i, kN, ForKind::kParallel, Store(tmp, {i}, Load(a, {i}) + FloatImm(2.0))),
                                 For(j, kN, ForKind::kParallel, Store(out, {j}, Load(tmp, {j}) * FloatImm(3.0)))}));
  Jitted k = Jit(LoweredFunc{"par_scratch", {a, out}, body});
  ASSERT_NE(k.loaded, nullptr);
  std::vector<AlignedArray> ins, outs;
  for (int t = 0; t < 4; ++t) {
    ins.push_back(RandomArray(kN, 100 + t));
    outs.emplace_back(kN, std::nanf(""));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] {
    for (int rep = 0; rep < 20; ++rep) k.Run({&ins[t], &outs[t]});
  });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    for (int64_t x = 0; x < kN; ++x) {
      ASSERT_NEAR(outs[t][x], (ins[t][x] + 2.0f) * 3.0f, 1e-5) << "thread " << t << " x=" << x;
    }
  }
}

TEST(LlvmCodegenHostTest, HostCpuNameIsKnown) { EXPECT_FALSE(HostCpuName().empty()); }

}  // namespace
}  // namespace tune::codegen
