// KernelTunerCache::Load: reads and validates a Kernel Tuner cache file (.json or .json.gz).
#include "measure/kernel_tuner_cache.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace tune::measure {
namespace {

using nlohmann::json;

constexpr size_t kMiB = size_t{1} << 20;
// A parsed JSON document takes about this many times its text's bytes.
constexpr size_t kParsedPerTextByte = 16;

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

// "larger than 1434 MiB, this machine's limit (1/16 of its 22.9 GiB of memory)".
std::string TooLarge(size_t max_text_bytes) {
  const size_t mem = PhysicalMemoryBytes();
  std::string why = absl::StrCat("larger than ", max_text_bytes / kMiB, " MiB");
  if (max_text_bytes == KernelTunerCache::DefaultMaxTextBytes() && mem > 0) {
    char gib[32];
    std::snprintf(gib, sizeof(gib), "%.1f", static_cast<double>(mem) / (1024.0 * kMiB));
    absl::StrAppend(&why, ", this machine's limit (1/", kParsedPerTextByte, " of its ", gib,
                    " GiB of memory: a parsed cache takes about ", kParsedPerTextByte, " times its text)");
  } else {
    absl::StrAppend(&why, ", the limit");
  }
  return why;
}

// One line, at most `max` characters: error messages quote keys and parser text.
std::string Quote(const std::string& text, size_t max = 80) {
  std::string s = text.size() > max ? text.substr(0, max) + "..." : text;
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

absl::Status Invalid(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", Quote(problem, 400)));
}

bool HasGzipMagic(const std::string& bytes, size_t at = 0) {
  return bytes.size() >= at + 2 && static_cast<unsigned char>(bytes[at]) == 0x1f &&
         static_cast<unsigned char>(bytes[at + 1]) == 0x8b;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

absl::StatusOr<std::string> ReadBytes(const std::string& path, size_t max_text_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": is a directory, not a cache file"));
  }
  // A compressed file is never longer than its text, so neither kind may exceed the limit.
  if (auto size = std::filesystem::file_size(path, ec); !ec && size > max_text_bytes) {
    return Invalid(path, absl::StrCat("file ", TooLarge(max_text_bytes)));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat(path, ": read error"));
  return out.str();
}

// Inflates every gzip member of `bytes` (gzip allows concatenated members); checks the CRC and
// length trailers and reports a stream that stops early as truncated.
absl::StatusOr<std::string> Gunzip(const std::string& path, const std::string& bytes, size_t max_text_bytes) {
  if (bytes.size() > std::numeric_limits<uInt>::max()) return Invalid(path, "compressed file larger than 4 GiB");
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return absl::InternalError("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  out.reserve(std::min(max_text_bytes, bytes.size() * 8));
  std::string chunk(size_t{1} << 18, '\0');
  absl::Status status;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = static_cast<uInt>(chunk.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = chunk.size() - zs.avail_out;
    if (produced > max_text_bytes - out.size()) {
      status = Invalid(path, absl::StrCat("decompressed data ", TooLarge(max_text_bytes)));
      break;
    }
    out.append(chunk.data(), produced);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      size_t at = bytes.size() - zs.avail_in;
      if (!HasGzipMagic(bytes, at)) {
        status = Invalid(path, absl::StrCat("corrupt gzip file: ", zs.avail_in,
                                            " bytes of trailing garbage after the compressed data"));
        break;
      }
      inflateReset(&zs);  // the next member
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {  // no progress possible with output space left: input ran out
      status = Invalid(path, absl::StrCat("truncated gzip file: the compressed data ends after ", bytes.size(),
                                          " bytes, before the end of the stream"));
    } else {
      status = Invalid(path, absl::StrCat("corrupt gzip file: ", zs.msg != nullptr ? zs.msg : "inflate error ",
                                          zs.msg != nullptr ? "" : std::to_string(rc)));
    }
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

std::string TypeName(const json& v) { return v.type_name(); }

// The parameter value in Kernel Tuner's key spelling (Python's str() of an int).
std::string ValueText(int64_t v) { return std::to_string(v); }

absl::StatusOr<int64_t> IntValue(const std::string& path, const json& v, const std::string& what) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Invalid(path, absl::StrCat(what, " is out of the 64-bit integer range"));
    }
    return v.get<int64_t>();
  }
  return Invalid(path, absl::StrCat(what, " is ", TypeName(v), " ", Quote(v.dump(), 40),
                                    ", expected an integer (only integer parameters are supported)"));
}

absl::StatusOr<KernelTunerCache> FromJson(const std::string& path, const json& doc) {
  KernelTunerCache cache;
  cache.path = path;
  if (!doc.is_object()) return Invalid(path, absl::StrCat("top level is ", TypeName(doc), ", expected an object"));
  for (const char* field : {"tune_params_keys", "tune_params", "cache"}) {
    if (!doc.contains(field)) return Invalid(path, absl::StrCat("missing field '", field, "'"));
  }
  for (const char* field : {"device_name", "kernel_name"}) {
    auto it = doc.find(field);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_string()) return Invalid(path, absl::StrCat("'", field, "' is ", TypeName(*it), ", expected a string"));
    (field[0] == 'd' ? cache.device_name : cache.kernel_name) = it->get<std::string>();
  }

  // Parameters, in key order, and their allowed values.
  const json& keys = doc["tune_params_keys"];
  if (!keys.is_array() || keys.empty()) return Invalid(path, "'tune_params_keys' must be a non-empty array of names");
  std::unordered_set<std::string> names;
  for (const json& k : keys) {
    if (!k.is_string()) return Invalid(path, absl::StrCat("'tune_params_keys' holds ", TypeName(k), ", expected names"));
    std::string name = k.get<std::string>();
    if (!names.insert(name).second) return Invalid(path, absl::StrCat("'tune_params_keys' lists '", name, "' twice"));
    cache.param_names.push_back(std::move(name));
  }
  const json& params = doc["tune_params"];
  if (!params.is_object()) return Invalid(path, absl::StrCat("'tune_params' is ", TypeName(params), ", expected an object"));
  for (const auto& [name, values] : params.items()) {
    if (names.count(name) == 0) {
      return Invalid(path, absl::StrCat("'tune_params' has parameter '", name, "' that 'tune_params_keys' lacks"));
    }
  }
  const size_t np = cache.param_names.size();
  std::vector<std::unordered_map<std::string, int>> index_of(np);  // value text -> option index
  for (size_t p = 0; p < np; ++p) {
    const std::string& name = cache.param_names[p];
    auto it = params.find(name);
    if (it == params.end()) return Invalid(path, absl::StrCat("'tune_params' lacks parameter '", name, "'"));
    if (!it->is_array() || it->empty()) {
      return Invalid(path, absl::StrCat("'tune_params.", name, "' must be a non-empty array of values"));
    }
    std::vector<int64_t> values;
    for (const json& v : *it) {
      auto value = IntValue(path, v, absl::StrCat("a value of 'tune_params.", name, "'"));
      if (!value.ok()) return value.status();
      if (!index_of[p].emplace(ValueText(*value), static_cast<int>(values.size())).second) {
        return Invalid(path, absl::StrCat("'tune_params.", name, "' lists ", *value, " twice"));
      }
      values.push_back(*value);
    }
    cache.param_values.push_back(std::move(values));
  }

  // Records.
  const json& records = doc["cache"];
  if (!records.is_object()) return Invalid(path, absl::StrCat("'cache' is ", TypeName(records), ", expected an object"));
  cache.entries.reserve(records.size());
  cache.by_key.reserve(records.size());
  for (const auto& [key, record] : records.items()) {
    const std::string where = absl::StrCat("cache entry '", Quote(key), "'");
    std::vector<std::string> parts = absl::StrSplit(key, ',');
    if (parts.size() != np) {
      return Invalid(path, absl::StrCat(where, " has ", parts.size(), " values, expected ", np,
                                        " (one per 'tune_params_keys')"));
    }
    KernelTunerCache::Entry e;
    e.value_index.resize(np);
    for (size_t p = 0; p < np; ++p) {
      auto it = index_of[p].find(parts[p]);
      if (it == index_of[p].end()) {
        return Invalid(path, absl::StrCat(where, ": value '", Quote(parts[p], 40), "' of parameter '",
                                          cache.param_names[p], "' is not in tune_params"));
      }
      e.value_index[p] = it->second;
    }
    if (!record.is_object()) return Invalid(path, absl::StrCat(where, " is ", TypeName(record), ", expected an object"));
    for (size_t p = 0; p < np; ++p) {
      const std::string& name = cache.param_names[p];
      auto it = record.find(name);
      if (it == record.end()) return Invalid(path, absl::StrCat(where, " lacks parameter '", name, "'"));
      auto value = IntValue(path, *it, absl::StrCat(where, ": parameter '", name, "'"));
      if (!value.ok()) return value.status();
      const int64_t expected = cache.param_values[p][e.value_index[p]];
      if (*value != expected) {
        return Invalid(path, absl::StrCat(where, " has ", name, "=", *value, " but its key says ", expected));
      }
    }
    auto time = record.find("time");
    if (time == record.end()) return Invalid(path, absl::StrCat(where, " has no 'time'"));
    if (time->is_string()) {
      e.ok = false;
      e.failure = time->get<std::string>();
    } else if (time->is_number() && !time->is_boolean()) {
      e.ok = true;
      e.time_ms = time->get<double>();
      if (!std::isfinite(e.time_ms) || e.time_ms <= 0) {
        return Invalid(path, absl::StrCat(where, " has time ", e.time_ms, " ms, expected a positive number"));
      }
      if (e.time_ms >= KernelTunerCache::kFailureMarkerMs) {
        // Kernel Tuner's older caches (and tools that imitate them) mark a failed
        // configuration with a huge time such as 1e20 instead of a failure string.
        e.ok = false;
        e.failure = absl::StrCat("FailureMarkerTime(", e.time_ms, " ms)");
        e.time_ms = 0;
      }
    } else {
      return Invalid(path, absl::StrCat(where, ": 'time' is ", TypeName(*time),
                                        ", expected milliseconds or a failure string"));
    }
    if (auto times = record.find("times"); times != record.end() && !times->is_null()) {
      if (!times->is_array()) {
        return Invalid(path, absl::StrCat(where, ": 'times' is ", TypeName(*times), ", expected an array"));
      }
      for (const json& t : *times) {
        if (!t.is_number() || t.is_boolean()) {
          return Invalid(path, absl::StrCat(where, ": 'times' holds ", TypeName(t), ", expected milliseconds"));
        }
        const double ms = t.get<double>();
        if (!std::isfinite(ms) || ms < 0) {
          return Invalid(path, absl::StrCat(where, ": 'times' holds ", ms, ", expected non-negative milliseconds"));
        }
        e.times_ms.push_back(ms);
      }
    }
    // The key must be the canonical spelling, so two keys can never name one configuration.
    std::string canonical = cache.Key(e.value_index);
    if (canonical != key) {
      return Invalid(path, absl::StrCat(where, " is not spelled as Kernel Tuner writes it ('", Quote(canonical), "')"));
    }
    cache.by_key.emplace(std::move(canonical), cache.entries.size());
    cache.entries.push_back(std::move(e));
  }
  return cache;
}

}  // namespace

size_t KernelTunerCache::DefaultMaxTextBytes() {
  constexpr size_t kMin = 64 * kMiB, kMax = size_t{4} << 30;
  const size_t mem = PhysicalMemoryBytes();
  if (mem == 0) return kMin;
  return std::clamp(mem / kParsedPerTextByte, kMin, kMax);
}

absl::StatusOr<KernelTunerCache> KernelTunerCache::Load(const std::string& path) {
  return Load(path, DefaultMaxTextBytes());
}

absl::StatusOr<KernelTunerCache> KernelTunerCache::Load(const std::string& path, size_t max_text_bytes) {
  auto bytes = ReadBytes(path, max_text_bytes);
  if (!bytes.ok()) return bytes.status();
  return Parse(*bytes, path, max_text_bytes);
}

absl::StatusOr<KernelTunerCache> KernelTunerCache::Parse(const std::string& bytes, const std::string& path,
                                                         size_t max_text_bytes) {
  std::string inflated;
  const std::string* text = &bytes;
  if (HasGzipMagic(bytes)) {
    auto gunzipped = Gunzip(path, bytes, max_text_bytes);
    if (!gunzipped.ok()) return gunzipped.status();
    inflated = std::move(*gunzipped);
    text = &inflated;
  } else if (EndsWith(path, ".gz")) {
    return Invalid(path, "not a gzip file (no gzip header), though its name ends in .gz");
  } else if (bytes.size() > max_text_bytes) {
    return Invalid(path, absl::StrCat("file ", TooLarge(max_text_bytes)));
  }
  json doc;
  try {
    doc = json::parse(*text);
  } catch (const json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..." or
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return Invalid(path, absl::StrCat("invalid JSON: ", what));
  }
  inflated.clear();
  inflated.shrink_to_fit();
  try {
    return FromJson(path, doc);
  } catch (const json::exception& e) {  // a field of an unexpected kind the checks missed
    return Invalid(path, absl::StrCat("malformed cache: ", e.what()));
  }
}

std::string KernelTunerCache::Key(const std::vector<int>& value_index) const {
  std::string key;
  for (size_t p = 0; p < value_index.size() && p < param_values.size(); ++p) {
    if (p) key += ',';
    key += ValueText(param_values[p][value_index[p]]);
  }
  return key;
}

const KernelTunerCache::Entry* KernelTunerCache::Find(const std::vector<int>& value_index) const {
  if (value_index.size() != param_values.size()) return nullptr;
  for (size_t p = 0; p < value_index.size(); ++p) {
    if (value_index[p] < 0 || static_cast<size_t>(value_index[p]) >= param_values[p].size()) return nullptr;
  }
  auto it = by_key.find(Key(value_index));
  return it == by_key.end() ? nullptr : &entries[it->second];
}

double KernelTunerCache::BestTimeMs() const {
  double best = std::numeric_limits<double>::infinity();
  for (const Entry& e : entries) {
    if (e.ok && e.time_ms < best) best = e.time_ms;
  }
  return best;
}

}  // namespace tune::measure
