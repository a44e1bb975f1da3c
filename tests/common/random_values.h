// Fresh random test inputs: floats drawn uniformly from [-1, 1).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tune::test {

inline std::vector<float> RandomValues(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace tune::test
