// The layout copies (tune.ToBlocked, tune.ToNchw, tune.Reblock: one kernel) split over the thread
// pool: every channel of every pixel lands where its layout puts it, at 1, 2 and 3 threads, on
// odd shapes large enough that a channel group is split in several parallel runs of pixels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
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

constexpr int64_t kLayoutCopyGuard = 64;

/// The node copying blocks of `from` to blocks of `to` (1: NCHW): tune.Reblock when `reblock`,
/// else tune.ToBlocked or tune.ToNchw (one of the blocks must then be 1).
graph::Node LayoutCopyNode(int64_t from, int64_t to, bool reblock) {
  graph::Node node;
  node.name = "copy";
  if (reblock) {
    node.op = graph::kReblockOp;
    node.attributes["from"] = from;
    node.attributes["to"] = to;
  } else {
    node.op = from == 1 ? graph::kToBlockedOp : graph::kToNchwOp;
    node.attributes["block"] = from == 1 ? to : from;
  }
  return node;
}

/// x[n, c, hw] in blocks of `block` by the layout's definition (graph/layout.h): channel ch of
/// pixel p at [ch / block][p][ch % block] of its image, NCHW for a block of 1.
int64_t LayoutCopyAt(int64_t c, int64_t hw, int64_t block, int64_t i, int64_t ch, int64_t p) {
  return ((i * (c / block) + ch / block) * hw + p) * block + ch % block;
}

TEST(LayoutCopyTest, EveryPairOfBlocksAgreesWithTheLayoutAtOneTwoAndThreeThreads) {
  LayoutCopyThreads restore;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> images(1, 2), multiple(1, 3), large(20, 75), small(1, 6);
  const std::vector<int64_t> blocks = {1, 4, 8, 16};
  for (int64_t from : blocks) {
    for (int64_t to : blocks) {
      // A large odd image (several runs of pixels per group, tiles ending off the run) and a
      // small one (copied on one thread); channels a multiple of both blocks, as the ops require.
      for (bool big : {true, false}) {
        const int64_t n = images(rng), c = std::lcm(from, to) * multiple(rng);
        const int64_t h = (big ? large(rng) : small(rng)) | 1, w = (big ? large(rng) : small(rng)) | 1, hw = h * w;
        const std::vector<float> x = RandomValues(n * c * hw, rng);
        std::vector<float> want(x.size(), NAN);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t p = 0; p < hw; ++p) want[LayoutCopyAt(c, hw, to, i, ch, p)] = x[LayoutCopyAt(c, hw, from, i, ch, p)];
          }
        }
        auto shape = [&](int64_t block, bool five_d) {
          return five_d ? std::vector<int64_t>{n, c / block, h, w, block} : std::vector<int64_t>{n, c, h, w};
        };
        // Reblock reads and writes 5-D tensors, also for a block of 1; ToBlocked and ToNchw the
        // NCHW side as 4-D.
        for (bool reblock : {true, false}) {
          if (!reblock && from != 1 && to != 1) continue;
          const bool from_5d = reblock || from != 1, to_5d = reblock || to != 1 || from == 1;
          graph::Tensor xt = FloatTensor("x", shape(from, from_5d)), yt = FloatTensor("y", shape(to, to_5d));
          const graph::Node node = LayoutCopyNode(from, to, reblock);
          SCOPED_TRACE(testing::Message() << "seed " << seed << ": " << node.op << " " << n << "x" << c << "x" << h << "x"
                                          << w << " blocks " << from << " -> " << to);
          for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(testing::Message() << threads << " threads");
            codegen::runtime::SetNumThreads(threads);
            auto kernel = executor::CreateBuiltinKernel(node, {&xt}, {&yt}, 13);
            ASSERT_TRUE(kernel.ok()) << kernel.status();
            // Past the output, a guard of floats the copy must leave alone (a tile or run
            // overshooting the last group writes there).
            std::vector<float> y(x.size() + kLayoutCopyGuard, NAN);
            std::fill(y.begin() + x.size(), y.end(), 12345.0f);
            const void* in[] = {x.data()};
            void* out[] = {y.data()};
            (*kernel)->Run(in, out);
            ASSERT_EQ(LayoutCopyFirstMismatch(y, want), -1) << "first wrong float of " << x.size();
            for (int64_t i = 0; i < kLayoutCopyGuard; ++i) {
              ASSERT_EQ(y[x.size() + i], 12345.0f) << "written " << i << " floats past the output";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tune::test
