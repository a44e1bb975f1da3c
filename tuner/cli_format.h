// Number formats shared by the command line's tables and progress lines.
#pragma once

#include <string>

namespace tune::tuner {

/// "42s", "3m07s", "2h05m"; "-" when not finite.
std::string FormatSeconds(double s);
/// Seconds as milliseconds with 4 decimals ("0.1234"); "-" when not finite.
std::string Ms(double s);
/// GFLOP/s of `flops` done in `s` seconds with 1 decimal; "-" when s is not finite or <= 0.
std::string Gflops(double flops, double s);

}  // namespace tune::tuner
