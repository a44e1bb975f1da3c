// The NCHWc layout copies (tune.ToBlocked, tune.ToNchw) split over the thread pool: every
// channel of every pixel lands where NCHWc puts it, at 1, 2 and 3 threads, on odd shapes large
// enough that a channel block is split in several parallel runs of pixels.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/runtime/runtime.h"
#include "executor/builtin_ops.h"
#include "graph/layout.h"
#include "gtest/gtest.h"
#include "tests/common/random_values.h"
#include "tests/executor/default_plan_run.h"

namespace tune::test {
namespace {

/// The first index where `got` differs from `want` (NaN never equal), or -1.
int64_t LayoutCopyFirstMismatch(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(got[i] == want[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

/// Restores the runtime's thread count when the test ends.
class LayoutCopyThreads {
 public:
  LayoutCopyThreads() : saved_(codegen::runtime::NumThreads()) {}
  ~LayoutCopyThreads() { codegen::runtime::SetNumThreads(saved_); }

 private:
  int saved_;
};

TEST(LayoutCopyTest, ToBlockedAndToNchwAgreeWithTheLayoutAtOneTwoAndThreeThreads) {
  LayoutCopyThreads restore;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> images(1, 2), blocks_of(1, 3), side(20, 75), pick(0, 4);
  const std::vector<int64_t> block_sizes = {3, 4, 8, 16, 16};
  for (int round = 0; round < 6; ++round) {
    const int64_t block = block_sizes[pick(rng)];
    // Odd extents: runs of pixels end off the 4-pixel tiles and off the rows.
    const int64_t n = images(rng), cb = blocks_of(rng), h = side(rng) | 1, w = side(rng) | 1;
    const int64_t c = cb * block, hw = h * w;
    SCOPED_TRACE(testing::Message() << "seed " << seed << ": " << n << "x" << c << "x" << h << "x" << w << " block "
                                    << block);
    graph::Tensor nchw = FloatTensor("x", {n, c, h, w}), blocked = FloatTensor("y", {n, cb, h, w, block});
    const auto [to, back] = LayoutCopyNodes(block);
    const std::vector<float> x = RandomValues(n * c * hw, rng);
    // The blocked form by its definition (graph/layout.h): channel ch at y[..][ch/c][..][..][ch%c].
    std::vector<float> want(x.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < hw; ++p) want[((i * cb + ch / block) * hw + p) * block + ch % block] = x[(i * c + ch) * hw + p];
      }
    }
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << threads << " threads");
      codegen::runtime::SetNumThreads(threads);
      auto to_kernel = executor::CreateBuiltinKernel(to, {&nchw}, {&blocked}, 13);
      ASSERT_TRUE(to_kernel.ok()) << to_kernel.status();
      auto back_kernel = executor::CreateBuiltinKernel(back, {&blocked}, {&nchw}, 13);
      ASSERT_TRUE(back_kernel.ok()) << back_kernel.status();
      std::vector<float> y(x.size(), NAN), z(x.size(), NAN);
      const void* in[] = {x.data()};
      void* out[] = {y.data()};
      (*to_kernel)->Run(in, out);
      ASSERT_EQ(LayoutCopyFirstMismatch(y, want), -1) << "ToBlocked: first wrong float of " << y.size();
      const void* in2[] = {y.data()};
      void* out2[] = {z.data()};
      (*back_kernel)->Run(in2, out2);
      ASSERT_EQ(LayoutCopyFirstMismatch(z, x), -1) << "ToNchw: first wrong float of " << z.size();
    }
  }
}

}  // namespace
}  // namespace tune::test
