// RewriteArtifact: a .tcm artifact's bytes with one string replaced and the checksum redone, so
// that a test can change what a field means and still get past the container's checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace tune::test {

/// FNV-1a over the first `n` bytes of `s` (the artifact's checksum).
inline uint64_t ArtifactFnv(const std::string& s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 1099511628211ull;
  }
  return h;
}

/// `bytes` with the first `from` replaced by `to` (same length) and the trailing 8-byte
/// checksum redone; `from` must occur.
inline std::string RewriteArtifact(std::string bytes, const std::string& from, const std::string& to) {
  EXPECT_EQ(from.size(), to.size());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return bytes;
  bytes.replace(at, from.size(), to);
  const uint64_t sum = ArtifactFnv(bytes, bytes.size() - 8);
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  return bytes;
}

}  // namespace tune::test
