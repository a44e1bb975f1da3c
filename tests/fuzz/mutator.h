// Mutator: the seeded input generator of the fuzz harness (byte edits, splices, dictionary tokens).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tune::fuzz {

/// Makes input number `index` of a run from its corpus: a corpus entry with 1 to 8 stacked
/// mutations (bit flips, random and interesting bytes, inserted and deleted ranges, a range
/// copied elsewhere, a splice with another entry, dictionary tokens, numbers replaced by
/// boundary values as JSON text or protobuf varints, truncation). Input `index` depends only
/// on (seed, index, corpus, dictionary), so a run can be resumed at any index.
class Mutator {
 public:
  /// `structured`: the target's structure-aware mutation (FuzzTarget::mutate) or nullptr.
  Mutator(std::vector<std::string> corpus, std::vector<std::string> dictionary, size_t max_size, bool binary,
          std::string (*structured)(const std::string&, uint64_t) = nullptr);

  std::string Generate(uint64_t seed, uint64_t index) const;

 private:
  void MutateOnce(std::string& s, std::mt19937_64& rng) const;

  std::vector<std::string> corpus_;
  std::vector<std::string> dictionary_;
  size_t max_size_;
  bool binary_;
  std::string (*structured_)(const std::string&, uint64_t);
};

}  // namespace tune::fuzz
