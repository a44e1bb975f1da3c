// ConfigSpace implementation: knob enumeration, indexing, validity, sampling and JSON form.
#include "search/space.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "base/check.h"

namespace tune::search {
namespace {

// Divisors of n (n >= 1) in ascending order.
std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> small;
  std::vector<int64_t> large;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// Appends to `out` every ordered factorization of `remaining` into `parts_left` divisor
// factors following `prefix`, in lexicographic order of the factor lists.
void EnumerateSplits(int64_t remaining, int parts_left, int64_t max_inner,
                     std::vector<int64_t>& prefix, std::vector<std::vector<int64_t>>& out) {
  if (parts_left == 1) {
    if (max_inner > 0 && remaining > max_inner) return;
    prefix.push_back(remaining);
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  for (int64_t d : Divisors(remaining)) {
    prefix.push_back(d);
    EnumerateSplits(remaining / d, parts_left - 1, max_inner, prefix, out);
    prefix.pop_back();
  }
}

// Appends to `out` every split of `extent` with tails (ConfigSpace::AddSplit, kAllowed): inner
// factors (after the outermost) drawn from `candidates`, innermost within max_inner, padded
// extent at most 1.5 x extent; the outermost factor is ceil(extent / inner product). The
// innermost factor is drawn from `innermost` instead (candidates plus the caller's extra values).
void EnumerateTailSplits(int64_t extent, int inner_left, int64_t inner, int64_t max_inner,
                         const std::vector<int64_t>& candidates, const std::vector<int64_t>& innermost,
                         std::vector<int64_t>& inner_factors, std::vector<std::vector<int64_t>>& out) {
  if (inner_left == 0) {
    const int64_t outer = (extent + inner - 1) / inner;
    if (2 * outer * inner > 3 * extent) return;
    std::vector<int64_t> option = {outer};
    option.insert(option.end(), inner_factors.begin(), inner_factors.end());
    out.push_back(std::move(option));
    return;
  }
  for (int64_t f : inner_left == 1 ? innermost : candidates) {
    if (inner * f > extent + extent / 2) break;  // candidates ascend; the padded bound fails too
    if (inner_left == 1 && max_inner > 0 && f > max_inner) break;
    inner_factors.push_back(f);
    EnumerateTailSplits(extent, inner_left - 1, inner * f, max_inner, candidates, innermost, inner_factors, out);
    inner_factors.pop_back();
  }
}

std::string FormatValues(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) absl::StrAppend(&text, i ? "," : "", values[i]);
  return text + "]";
}

}  // namespace

size_t ConfigHash::operator()(const Config& c) const {
  // splitmix64-style mixing of each index into the running state.
  uint64_t h = 0x9e3779b97f4a7c15ull ^ c.size();
  for (int32_t v : c) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(v)) + 0x9e3779b97f4a7c15ull + (h << 6) +
         (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return static_cast<size_t>(h);
}

uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  TUNE_CHECK(n > 0) << "UniformBelow needs a non-empty range";
  // Reject the top partial block so every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % n;
}

int64_t PaddedExtent(const std::vector<int64_t>& factors) {
  int64_t p = 1;
  for (int64_t f : factors) p *= f;
  return p;
}

int ConfigSpace::AddSplit(const std::string& name, int64_t extent, int parts,
                          int64_t max_inner, SplitTails tails, const std::vector<int64_t>& innermost_values) {
  TUNE_CHECK(extent >= 1) << "split '" << name << "' of extent " << extent;
  TUNE_CHECK(parts >= 1) << "split '" << name << "' into " << parts << " parts";
  TUNE_CHECK(max_inner >= 0) << "split '" << name << "' max_inner " << max_inner;
  TUNE_CHECK(innermost_values.empty() || (tails == SplitTails::kAllowed && parts > 1))
      << "split '" << name << "': innermost values need tails and at least two parts";
  for (const Knob& k : knobs_) TUNE_CHECK(k.name != name) << "duplicate knob '" << name << "'";
  Knob knob;
  knob.name = name;
  knob.kind = Knob::Kind::kSplit;
  knob.extent = extent;
  std::vector<int64_t> prefix;
  EnumerateSplits(extent, parts, max_inner, prefix, knob.options);
  if (tails == SplitTails::kAllowed && parts > 1) {
    // The splits with a tail join the divisor splits in one lexicographic order of the factor
    // lists, as the divisor splits alone are: strategies that step to a neighbouring option
    // (sa, the GP's index coordinate) see tile sizes in order.
    std::vector<int64_t> candidates = Divisors(extent);
    for (int64_t p = 2; p < extent + extent / 2; p *= 2) candidates.push_back(p);
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    std::vector<int64_t> innermost = candidates;
    for (int64_t v : innermost_values) {
      if (v >= 1 && v <= extent) innermost.push_back(v);
    }
    std::sort(innermost.begin(), innermost.end());
    innermost.erase(std::unique(innermost.begin(), innermost.end()), innermost.end());
    std::vector<std::vector<int64_t>> with_tails;
    std::vector<int64_t> inner_factors;
    EnumerateTailSplits(extent, parts - 1, 1, max_inner, candidates, innermost, inner_factors, with_tails);
    for (auto& option : with_tails) {
      // Exact splits with an extra innermost value (6 of 1026, say) are divisor splits already.
      if (PaddedExtent(option) != extent) knob.options.push_back(std::move(option));
    }
    std::sort(knob.options.begin(), knob.options.end());
  }
  // The innermost factor 1 always satisfies max_inner >= 1, so options is never empty.
  TUNE_CHECK(!knob.options.empty()) << "split '" << name << "' has no options";
  knobs_.push_back(std::move(knob));
  return static_cast<int>(knobs_.size()) - 1;
}

int ConfigSpace::AddChoice(const std::string& name, std::vector<int64_t> values,
                           std::vector<std::string> labels) {
  TUNE_CHECK(!values.empty()) << "choice '" << name << "' has no values";
  TUNE_CHECK(labels.empty() || labels.size() == values.size())
      << "choice '" << name << "' has " << labels.size() << " labels for " << values.size()
      << " values";
  for (const Knob& k : knobs_) TUNE_CHECK(k.name != name) << "duplicate knob '" << name << "'";
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      TUNE_CHECK(values[i] != values[j])
          << "choice '" << name << "' repeats value " << values[i];
    }
  }
  Knob knob;
  knob.name = name;
  knob.kind = Knob::Kind::kChoice;
  knob.options.reserve(values.size());
  for (int64_t v : values) knob.options.push_back({v});
  knob.labels = std::move(labels);
  knobs_.push_back(std::move(knob));
  return static_cast<int>(knobs_.size()) - 1;
}

void ConfigSpace::AddConstraint(const std::string& name,
                                std::function<bool(const Config&)> holds) {
  TUNE_CHECK(holds != nullptr) << "constraint '" << name << "' has no predicate";
  constraints_.push_back(Constraint{name, std::move(holds)});
}

void ConfigSpace::AddCondition(const std::string& knob, const std::string& when,
                               const std::vector<int64_t>& values) {
  Condition cond{KnobIndex(knob), KnobIndex(when), {}};
  TUNE_CHECK(cond.knob != cond.when) << "knob '" << knob << "' conditioned on itself";
  TUNE_CHECK(knobs_[cond.when].kind == Knob::Kind::kChoice) << "condition on split knob '" << when << "'";
  for (const Condition& c : conditions_) {
    TUNE_CHECK(c.knob != cond.when) << "condition on knob '" << when << "', itself conditional";
    TUNE_CHECK(c.knob != cond.knob) << "knob '" << knob << "' has two conditions";
  }
  for (const std::vector<int64_t>& option : knobs_[cond.when].options) {
    cond.active.push_back(std::find(values.begin(), values.end(), option[0]) != values.end());
  }
  const int k = cond.knob, w = cond.when;
  std::vector<bool> active = cond.active;
  conditions_.push_back(std::move(cond));
  AddConstraint(knob + "_pinned", [k, w, active](const Config& c) { return active[c[w]] || c[k] == 0; });
}

void ConfigSpace::AllowMissing(const std::string& name) { knobs_[KnobIndex(name)].may_be_missing = true; }

int ConfigSpace::KnobIndex(const std::string& name) const {
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (knobs_[i].name == name) return static_cast<int>(i);
  }
  TUNE_CHECK(false) << "unknown knob '" << name << "'";
  return -1;
}

uint64_t ConfigSpace::Size() const {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t size = 1;
  for (const Knob& k : knobs_) {
    const uint64_t n = k.options.size();
    if (size > kMax / n) return kMax;
    size *= n;
  }
  return size;
}

Config ConfigSpace::FromIndex(uint64_t index) const {
  TUNE_CHECK(index < Size()) << "index " << index << " out of a space of " << Size();
  Config config(knobs_.size());
  for (size_t i = knobs_.size(); i-- > 0;) {
    const uint64_t n = knobs_[i].options.size();
    config[i] = static_cast<int32_t>(index % n);
    index /= n;
  }
  return config;
}

uint64_t ConfigSpace::ToIndex(const Config& config) const {
  TUNE_CHECK(config.size() == knobs_.size())
      << "config has " << config.size() << " knobs, space has " << knobs_.size();
  uint64_t index = 0;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const uint64_t n = knobs_[i].options.size();
    TUNE_CHECK(config[i] >= 0 && static_cast<uint64_t>(config[i]) < n)
        << "knob '" << knobs_[i].name << "' index " << config[i] << " of " << n;
    index = index * n + static_cast<uint64_t>(config[i]);
  }
  return index;
}

bool ConfigSpace::IsValid(const Config& config) const { return WhyInvalid(config).empty(); }

std::string ConfigSpace::WhyInvalid(const Config& config) const {
  if (config.size() != knobs_.size()) return "range";
  for (size_t i = 0; i < knobs_.size(); ++i) {
    if (config[i] < 0 || static_cast<size_t>(config[i]) >= knobs_[i].options.size()) {
      return "range";
    }
  }
  for (const Constraint& c : constraints_) {
    if (!c.holds(config)) return c.name;
  }
  return "";
}

Config ConfigSpace::Canonical(Config config) const {
  TUNE_CHECK(config.size() == knobs_.size())
      << "config has " << config.size() << " knobs, space has " << knobs_.size();
  for (const Condition& c : conditions_) {
    if (!c.active[config[c.when]]) config[c.knob] = 0;
  }
  return config;
}

Config ConfigSpace::Draw(std::mt19937_64& rng) const {
  Config config(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) {
    config[i] = static_cast<int32_t>(UniformBelow(rng, knobs_[i].options.size()));
  }
  return conditions_.empty() ? config : Canonical(std::move(config));
}

absl::StatusOr<Config> ConfigSpace::Sample(std::mt19937_64& rng, int max_tries) const {
  for (int attempt = 0; attempt < max_tries; ++attempt) {
    Config config = Draw(rng);
    if (IsValid(config)) return config;
  }
  return absl::NotFoundError(
      absl::StrCat("no valid config in ", max_tries, " random draws"));
}

std::vector<Config> ConfigSpace::Neighbours(const Config& config) const {
  TUNE_CHECK(config.size() == knobs_.size())
      << "config has " << config.size() << " knobs, space has " << knobs_.size();
  std::vector<Config> out;
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const int32_t n = static_cast<int32_t>(knobs_[i].options.size());
    TUNE_CHECK(config[i] >= 0 && config[i] < n)
        << "knob '" << knobs_[i].name << "' index " << config[i] << " of " << n;
    for (int32_t step : {-1, 1}) {
      const int32_t next = config[i] + step;
      if (next < 0 || next >= n) continue;
      Config neighbour = config;
      neighbour[i] = next;
      neighbour = Canonical(std::move(neighbour));
      if (neighbour == config || !IsValid(neighbour)) continue;
      if (std::find(out.begin(), out.end(), neighbour) == out.end()) out.push_back(std::move(neighbour));
    }
  }
  return out;
}

const std::vector<int64_t>& ConfigSpace::Get(const Config& config,
                                             const std::string& name) const {
  const int k = KnobIndex(name);
  TUNE_CHECK(static_cast<size_t>(k) < config.size())
      << "config has " << config.size() << " knobs, asked for '" << name << "'";
  const Knob& knob = knobs_[k];
  TUNE_CHECK(config[k] >= 0 && static_cast<size_t>(config[k]) < knob.options.size())
      << "knob '" << name << "' index " << config[k] << " of " << knob.options.size();
  return knob.options[config[k]];
}

int64_t ConfigSpace::GetInt(const Config& config, const std::string& name) const {
  const std::vector<int64_t>& option = Get(config, name);
  TUNE_CHECK(knobs_[KnobIndex(name)].kind == Knob::Kind::kChoice)
      << "GetInt on split knob '" << name << "'; use Get";
  return option.front();
}

std::string ConfigSpace::ToJson(const Config& config) const {
  TUNE_CHECK(config.size() == knobs_.size())
      << "config has " << config.size() << " knobs, space has " << knobs_.size();
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (size_t i = 0; i < knobs_.size(); ++i) {
    TUNE_CHECK(config[i] >= 0 && static_cast<size_t>(config[i]) < knobs_[i].options.size())
        << "knob '" << knobs_[i].name << "' index " << config[i];
    json[knobs_[i].name] = knobs_[i].options[config[i]];
  }
  return json.dump();
}

absl::StatusOr<Config> ConfigSpace::FromJson(const std::string& text) const {
  nlohmann::json json = nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("config is not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("config JSON is not an object");
  for (const auto& [key, value] : json.items()) {
    const bool known = std::any_of(knobs_.begin(), knobs_.end(),
                                   [&key = key](const Knob& k) { return k.name == key; });
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown knob '", key, "'"));
  }
  Config config(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const Knob& knob = knobs_[i];
    auto it = json.find(knob.name);
    if (it == json.end() && knob.may_be_missing) {
      config[i] = 0;
      continue;
    }
    if (it == json.end()) {
      return absl::InvalidArgumentError(absl::StrCat("knob '", knob.name, "' is missing"));
    }
    // A choice may also be written as a bare integer.
    std::vector<int64_t> values;
    const nlohmann::json& value = *it;
    if (value.is_number_integer()) {
      values.push_back(value.get<int64_t>());
    } else if (value.is_array()) {
      for (const nlohmann::json& v : value) {
        if (!v.is_number_integer()) {
          return absl::InvalidArgumentError(
              absl::StrCat("knob '", knob.name, "' has a non-integer value ", v.dump()));
        }
        values.push_back(v.get<int64_t>());
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("knob '", knob.name, "' is not an integer list: ", value.dump()));
    }
    auto option = std::find(knob.options.begin(), knob.options.end(), values);
    if (option == knob.options.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", FormatValues(values), " is not an option of knob '", knob.name, "'"));
    }
    config[i] = static_cast<int32_t>(option - knob.options.begin());
  }
  return config;
}

}  // namespace tune::search
