// The built-in MaxPool's inner kernel: one NCHW plane, rows first, vector-friendly.
#pragma once

#include <cstdint>

namespace tune::executor {

/// The window of a 2-D pooling over one plane: input h x w, output oh x ow, kernel kh x kw,
/// strides sh, sw, dilations dh, dw, leading pads pt (rows) and pl (columns). Padding is
/// ignored: a window takes the maximum of its taps inside the input.
struct PoolWindow {
  int64_t h = 0, w = 0, oh = 0, ow = 0, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
};

/// y[p][q] = max over r < kh, s < kw of x[p*sh - pt + r*dh][q*sw - pl + s*dw] for the taps
/// inside the input; -infinity for a window with none. For each output row the window's input
/// rows are first reduced column by column into `row` (w floats of scratch: contiguous loads
/// the compiler vectorizes), then each output takes the maximum of its kw columns of `row`,
/// interior outputs without bounds checks. Equals the plain per-output loop exactly (max is
/// exact and order-free; NaN inputs aside).
void MaxPoolPlane(const float* x, float* y, const PoolWindow& g, float* row);

}  // namespace tune::executor
