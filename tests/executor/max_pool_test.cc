// MaxPoolPlane against the plain per-output loop on random windows and planes.
#include "executor/max_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "tests/common/random_values.h"

namespace tune::test {
namespace {

std::vector<float> MaxPoolByDefinition(const std::vector<float>& x, const executor::PoolWindow& g) {
  std::vector<float> y(g.oh * g.ow);
  for (int64_t p = 0; p < g.oh; ++p) {
    for (int64_t q = 0; q < g.ow; ++q) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < g.kh; ++r) {
        for (int64_t s = 0; s < g.kw; ++s) {
          const int64_t ih = p * g.sh - g.pt + r * g.dh, iw = q * g.sw - g.pl + s * g.dw;
          if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) m = std::max(m, x[ih * g.w + iw]);
        }
      }
      y[p * g.ow + q] = m;
    }
  }
  return y;
}

// The output extent with ceil or floor rounding (pads on both sides).
int64_t PoolExtent(int64_t in, int64_t pad_lead, int64_t pad_trail, int64_t k, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t span = in + pad_lead + pad_trail - (k - 1) * d - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad_lead) --out;
  return out;
}

TEST(MaxPoolPlaneTest, EqualsTheDefinitionOnRandomWindows) {
  std::mt19937_64 rng(std::random_device{}());
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    executor::PoolWindow g;
    // Every fourth trial is ResNet's 3x3 stride-2 pad-1 pool on an odd or even plane.
    const bool resnet = trial % 4 == 0;
    g.h = pick(1, 40);
    g.w = pick(1, 40);
    g.kh = resnet ? 3 : pick(1, 5);
    g.kw = resnet ? 3 : pick(1, 5);
    g.sh = resnet ? 2 : pick(1, 3);
    g.sw = resnet ? 2 : pick(1, 3);
    g.dh = resnet ? 1 : pick(1, 2);
    g.dw = resnet ? 1 : pick(1, 2);
    g.pt = std::min<int64_t>(pick(0, 2), g.kh - 1);
    g.pl = std::min<int64_t>(pick(0, 2), g.kw - 1);
    const int64_t pb = std::min<int64_t>(pick(0, 2), g.kh - 1), pr = std::min<int64_t>(pick(0, 2), g.kw - 1);
    const bool ceil_mode = pick(0, 1) == 1;
    g.oh = PoolExtent(g.h, g.pt, pb, g.kh, g.sh, g.dh, ceil_mode);
    g.ow = PoolExtent(g.w, g.pl, pr, g.kw, g.sw, g.dw, ceil_mode);
    if (g.oh < 1 || g.ow < 1) continue;
    const std::vector<float> x = RandomValues(g.h * g.w, rng);
    std::vector<float> y(g.oh * g.ow, 12345.0f), row(g.w);
    executor::MaxPoolPlane(x.data(), y.data(), g, row.data());
    const std::vector<float> want = MaxPoolByDefinition(x, g);
    ASSERT_EQ(y, want) << "h " << g.h << " w " << g.w << " k " << g.kh << "x" << g.kw << " s " << g.sh << "," << g.sw
                       << " d " << g.dh << "," << g.dw << " pads " << g.pt << "," << g.pl << "," << pb << "," << pr
                       << (ceil_mode ? " ceil" : "");
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace tune::test
