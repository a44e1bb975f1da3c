// Number formats shared by the command line's tables and progress lines.
#include "tuner/cli_format.h"

#include <cmath>
#include <cstdio>

namespace tune::tuner {

std::string FormatSeconds(double s) {
  if (!std::isfinite(s)) return "-";
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  }
  return buf;
}
std::string Ms(double s) {
  if (!std::isfinite(s)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", s * 1e3);
  return buf;
}
std::string Gflops(double flops, double s) {
  if (!std::isfinite(s) || s <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", flops / s / 1e9);
  return buf;
}

}  // namespace tune::tuner
