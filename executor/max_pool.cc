#include "executor/max_pool.h"

#include <algorithm>
#include <limits>

namespace tune::executor {

void MaxPoolPlane(const float* x, float* y, const PoolWindow& g, float* row) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  const int64_t w = g.w;
  // Output columns whose whole window lies inside the input: q in [q_lo, q_hi).
  const int64_t q_lo = std::clamp<int64_t>((g.pl + g.sw - 1) / g.sw, 0, g.ow);
  const int64_t last = (g.kw - 1) * g.dw;  // the window's last column, from its first
  const int64_t q_hi = std::clamp<int64_t>(w - 1 - last + g.pl < 0 ? 0 : (w - 1 - last + g.pl) / g.sw + 1, q_lo, g.ow);
  for (int64_t p = 0; p < g.oh; ++p) {
    float* yr = y + p * g.ow;
    const int64_t h0 = p * g.sh - g.pt;
    bool any = false;
    for (int64_t r = 0; r < g.kh; ++r) {
      const int64_t ih = h0 + r * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      const float* xr = x + ih * w;
      if (!any) {
        std::copy(xr, xr + w, row);
        any = true;
      } else {
        for (int64_t i = 0; i < w; ++i) row[i] = row[i] < xr[i] ? xr[i] : row[i];
      }
    }
    if (!any) {
      std::fill(yr, yr + g.ow, kLowest);
      continue;
    }
    auto edge = [&](int64_t q) {
      const int64_t w0 = q * g.sw - g.pl;
      float m = kLowest;
      for (int64_t s = 0; s < g.kw; ++s) {
        const int64_t iw = w0 + s * g.dw;
        if (iw >= 0 && iw < w) m = m < row[iw] ? row[iw] : m;
      }
      return m;
    };
    for (int64_t q = 0; q < q_lo; ++q) yr[q] = edge(q);
    if (g.kw == 3 && g.dw == 1) {
      for (int64_t q = q_lo; q < q_hi; ++q) {
        const float* c = row + (q * g.sw - g.pl);
        const float a = c[0] < c[1] ? c[1] : c[0];
        yr[q] = a < c[2] ? c[2] : a;
      }
    } else {
      for (int64_t q = q_lo; q < q_hi; ++q) {
        const float* c = row + (q * g.sw - g.pl);
        float m = c[0];
        for (int64_t s = 1; s < g.kw; ++s) m = m < c[s * g.dw] ? c[s * g.dw] : m;
        yr[q] = m;
      }
    }
    for (int64_t q = q_hi; q < g.ow; ++q) yr[q] = edge(q);
  }
}

}  // namespace tune::executor
