// Fuzz target: the Kernel Tuner cache loader (plain JSON and gzip) and replay over what it loads.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "measure/kernel_tuner_cache.h"
#include "measure/replay_space.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tuner/replay.h"

namespace tune::fuzz {
namespace {

// Inputs inflate to at most this much text: a fuzz input is never a real 16 MB cache.
constexpr size_t kMaxText = size_t{16} << 20;

std::string Deflate(const std::string& bytes) {
  std::string out(compressBound(static_cast<uLong>(bytes.size())) + 64, '\0');
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

[[noreturn]] void Defect(const std::string& what) {
  std::fprintf(stderr, "kernel_tuner_cache: %s\n", what.c_str());
  std::abort();
}

// A loaded cache as a replay space: every entry found and measured, the random baseline, and
// a short random-search replay through the tuning loop.
void Replay(measure::KernelTunerCache cache) {
  auto space = measure::ReplaySpace::Create(std::move(cache));
  if (!space.ok()) return;
  const measure::ReplaySpace& rs = **space;
  for (const auto& e : rs.cache().entries) {
    search::Config config(e.value_index.begin(), e.value_index.end());
    if (rs.Find(config) != &e) Defect("an entry is not found by its own config");
    auto m = rs.Measure(config);
    if (m.ok != e.ok) Defect("a replayed measurement disagrees with its entry");
  }
  for (int64_t draws : {int64_t{0}, int64_t{1}, int64_t{3}, static_cast<int64_t>(rs.recorded())}) {
    const double f = tuner::RandomBaselineFraction(rs.sorted_times_ms(), draws);
    if (!(f >= 0 && f <= 1 + 1e-9)) Defect("random baseline fraction out of [0, 1]");
  }
  tuner::ReplayOptions o;
  o.budget = 6;
  auto trace = tuner::RunReplay(rs, o);
  if (!trace.ok()) Defect("replay failed: " + std::string(trace.status().message()));
  if (trace->evaluations.size() > std::min<size_t>(6, rs.recorded())) Defect("replay evaluated past its budget");
  auto rows = tuner::SummarizeReplay(rs, {*trace}, tuner::ReplayCheckpoints(o.budget));
  (void)rows;
}

}  // namespace

int FuzzKernelTunerCache(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto cache = measure::KernelTunerCache::Parse(bytes, "fuzz.json", kMaxText);
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!gzip) {
    // The same text gzip-compressed loads the same.
    auto inflated = measure::KernelTunerCache::Parse(Deflate(bytes), "fuzz.json.gz", kMaxText);
    if (inflated.ok() != cache.ok()) {
      Defect("plain and gzip loads disagree: " +
             std::string(cache.ok() ? inflated.status().message() : cache.status().message()));
    }
    if (cache.ok() && inflated->entries.size() != cache->entries.size()) Defect("plain and gzip entries differ");
  }
  if (cache.ok()) Replay(std::move(*cache));
  return 0;
}

}  // namespace tune::fuzz
