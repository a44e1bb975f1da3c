// The fixed seed of tests' random draws, so that a failing test fails the same way again.
#pragma once

#include <cstdint>
#include <random>

namespace tune::test {

/// The seed tests use where any seed would do (tuning runs, sampled configs, random inputs).
inline constexpr uint64_t kTestSeed = 1;

/// A generator seeded with kTestSeed + `stream`: distinct streams give independent draws
/// within one test.
inline std::mt19937_64 TestRng(uint64_t stream = 0) { return std::mt19937_64(kTestSeed + stream); }

}  // namespace tune::test
