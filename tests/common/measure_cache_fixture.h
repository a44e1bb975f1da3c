// Kernel Tuner cache files for tests: written plain or gzip-compressed into a private directory.
#pragma once

#include <zlib.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace tune::test {

/// The published Kernel Tuner caches shared with the project (../shared/data/kernel_tuner).
inline const std::string kDataDir = std::string(TUNE_SOURCE_DIR) + "/../shared/data/kernel_tuner";

/// `bytes` as one gzip member (what `gzip` writes), compressed in memory; a test failure when
/// zlib fails.
inline std::string Gzip(const std::string& bytes) {
  std::string out(compressBound(static_cast<uLong>(bytes.size())) + 64, '\0');
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// A fresh directory for cache files, removed with the fixture.
class CacheFileFixture : public ::testing::Test {
 protected:
  /// Writes `bytes` as file `name` in the directory; its path.
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = dir_.Join(name);
    WriteFileBytes(path, bytes);
    return path;
  }

  TempDir dir_;
};

}  // namespace tune::test
