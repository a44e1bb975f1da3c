// Mutator: stacked byte-level and token-level mutations of corpus entries, seeded per input.
#include "tests/fuzz/mutator.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace tune::fuzz {
namespace {

// Boundary values as JSON number text.
const char* const kNumbers[] = {"0",          "-0",         "1",          "-1",         "2147483647",
                                "2147483648", "-2147483649", "4294967296", "9223372036854775807",
                                "9223372036854775808",       "-9223372036854775809", "18446744073709551616",
                                "1e400",      "-1e400",     "1e-400",     "1e308",      "0.0",
                                "1e6",        "1000000000", "99999999999", "3.5",       "-2.5e10",
                                "NaN",        "Infinity",   "-Infinity",  "00",         "1e",
                                "0x10"};
// Boundary values as protobuf varints (and 32/64-bit fixed).
const uint64_t kVarints[] = {0,          1,          2,          127,        128,
                             255,        0x7fffffff, 0x80000000, 0xffffffff, uint64_t{1} << 32,
                             uint64_t{0x7fffffffffffffff}, uint64_t{0x8000000000000000}, ~uint64_t{0}};
const char kInterestingBytes[] = {0, '\xff', '\x7f', '\x80', '"', '\\', '{', '}', '[', ']', ',', ':',
                                  '0', '9', '-', 'e', '.', ' ', '\n', '\x1b', '\x01', '\x08', '\x12', '\x1a'};

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

template <typename T, size_t N>
const T& Pick(const T (&items)[N], std::mt19937_64& rng) {
  return items[rng() % N];
}

size_t Below(std::mt19937_64& rng, size_t n) { return n == 0 ? 0 : rng() % n; }

}  // namespace

Mutator::Mutator(std::vector<std::string> corpus, std::vector<std::string> dictionary, size_t max_size, bool binary,
                 std::string (*structured)(const std::string&, uint64_t))
    : corpus_(std::move(corpus)),
      dictionary_(std::move(dictionary)),
      max_size_(max_size),
      binary_(binary),
      structured_(structured) {
  if (corpus_.empty()) corpus_.push_back("");
}

std::string Mutator::Generate(uint64_t seed, uint64_t index) const {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL ^ (index + 1) * 0xbf58476d1ce4e5b9ULL);
  std::string s = corpus_[Below(rng, corpus_.size())];
  if (structured_ != nullptr && rng() % 2 == 0) {
    // Structure-aware edits, stacked; one in four also gets a byte-level mutation.
    for (int i = 1 + static_cast<int>(rng() % 4); i-- > 0;) s = structured_(s, rng());
    if (rng() % 4 == 0) MutateOnce(s, rng);
    if (s.size() > max_size_) s.resize(max_size_);
    return s;
  }
  const int depth = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < depth; ++i) MutateOnce(s, rng);
  if (s.size() > max_size_) s.resize(max_size_);
  return s;
}

void Mutator::MutateOnce(std::string& s, std::mt19937_64& rng) const {
  const size_t n = s.size();
  switch (rng() % 12) {
    case 0:  // flip one bit
      if (n > 0) s[Below(rng, n)] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 1:  // one random byte
      if (n > 0) s[Below(rng, n)] = static_cast<char>(rng());
      break;
    case 2:  // one interesting byte
      if (n > 0) s[Below(rng, n)] = Pick(kInterestingBytes, rng);
      break;
    case 3: {  // insert random bytes
      std::string bytes(1 + rng() % 8, '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      s.insert(Below(rng, n + 1), bytes);
      break;
    }
    case 4: {  // delete a range
      if (n == 0) break;
      size_t at = Below(rng, n);
      size_t len = 1 + Below(rng, std::min<size_t>(rng() % 4 == 0 ? n / 4 + 1 : 16, n - at));
      s.erase(at, len);
      break;
    }
    case 5: {  // copy a range elsewhere (repeats structure: layers, records, entries)
      if (n == 0) break;
      size_t from = Below(rng, n), len = 1 + Below(rng, std::min<size_t>(256, n - from));
      s.insert(Below(rng, n + 1), s.substr(from, len));
      break;
    }
    case 6: {  // splice: this entry's head with another entry's tail
      const std::string& other = corpus_[Below(rng, corpus_.size())];
      size_t cut = Below(rng, n + 1), from = Below(rng, other.size() + 1);
      s = s.substr(0, cut) + other.substr(from);
      break;
    }
    case 7:
    case 8: {  // a dictionary token inserted, or in place of a range
      if (dictionary_.empty()) break;
      const std::string& token = dictionary_[Below(rng, dictionary_.size())];
      size_t at = Below(rng, n + 1);
      if (rng() % 2 && at < n) s.erase(at, 1 + Below(rng, std::min<size_t>(8, n - at)));
      s.insert(at, token);
      break;
    }
    case 9:
    case 10: {  // a number replaced by a boundary value
      if (binary_) {
        std::string v = rng() % 4 == 0 ? std::string(reinterpret_cast<const char*>(&kVarints[rng() % 13]), 8)
                                       : Varint(Pick(kVarints, rng));
        size_t at = Below(rng, n + 1);
        // Replace the varint that starts here (its continuation bytes included).
        size_t end = at;
        while (end < n && (static_cast<unsigned char>(s[end]) & 0x80)) ++end;
        if (end < n) ++end;
        s.replace(at, end - at, v);
      } else {
        // The digit run at or after a random position, else an insertion.
        size_t at = Below(rng, n + 1);
        while (at < n && !std::isdigit(static_cast<unsigned char>(s[at]))) ++at;
        size_t end = at;
        while (end < n && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.' || s[end] == 'e' ||
                           s[end] == 'E' || s[end] == '+' || s[end] == '-')) {
          ++end;
        }
        s.replace(at, end - at, Pick(kNumbers, rng));
      }
      break;
    }
    default:  // truncate
      if (n > 0) s.resize(Below(rng, n));
      break;
  }
}

}  // namespace tune::fuzz
