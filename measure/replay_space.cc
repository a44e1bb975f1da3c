// ReplaySpace: the knobs of a recorded cache, look-ups of its entries, and its sorted times.
#include "measure/replay_space.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace tune::measure {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

search::Config ToConfig(const std::vector<int>& value_index) {
  return search::Config(value_index.begin(), value_index.end());
}

}  // namespace

ReplaySpace::ReplaySpace(KernelTunerCache cache) : cache_(std::move(cache)) {
  for (size_t p = 0; p < cache_.param_names.size(); ++p) {
    space_.AddChoice(cache_.param_names[p], cache_.param_values[p]);
  }
  space_.AddConstraint("recorded", [this](const search::Config& config) { return Find(config) != nullptr; });
}

absl::StatusOr<std::unique_ptr<ReplaySpace>> ReplaySpace::Create(KernelTunerCache cache) {
  if (cache.param_names.empty() || cache.param_names.size() != cache.param_values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(cache.path, ": the cache has no parameters"));
  }
  if (!std::isfinite(cache.BestTimeMs())) {
    return absl::InvalidArgumentError(
        absl::StrCat(cache.path, ": no successful configuration among ", cache.entries.size(), " recorded"));
  }
  std::unique_ptr<ReplaySpace> r(new ReplaySpace(std::move(cache)));
  if (r->space_.Size() >= (uint64_t{1} << 63)) {
    return absl::InvalidArgumentError(absl::StrCat(r->cache_.path, ": the space has 2^63 or more points"));
  }
  const auto& entries = r->cache_.entries;
  r->entry_of_index_.reserve(entries.size());
  r->sorted_times_ms_.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    r->entry_of_index_.emplace(r->space_.ToIndex(ToConfig(entries[i].value_index)), static_cast<uint32_t>(i));
    r->sorted_times_ms_.push_back(entries[i].ok ? entries[i].time_ms : kInf);
    if (!entries[i].ok) ++r->failed_;
  }
  std::sort(r->sorted_times_ms_.begin(), r->sorted_times_ms_.end());
  return r;
}

const KernelTunerCache::Entry* ReplaySpace::Find(const search::Config& config) const {
  const auto& knobs = space_.knobs();
  if (config.size() != knobs.size()) return nullptr;
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (config[k] < 0 || static_cast<size_t>(config[k]) >= knobs[k].options.size()) return nullptr;
  }
  auto it = entry_of_index_.find(space_.ToIndex(config));
  return it == entry_of_index_.end() ? nullptr : &cache_.entries[it->second];
}

search::MeasuredConfig ReplaySpace::Measure(const search::Config& config) const {
  const KernelTunerCache::Entry* e = Find(config);
  TUNE_CHECK(e != nullptr) << "replay of an unrecorded config [" << absl::StrJoin(config, ",") << "]";
  search::MeasuredConfig m;
  m.config = config;
  m.ok = e->ok;
  m.cost = e->ok ? e->time_ms / 1000.0 : kInf;
  return m;
}

}  // namespace tune::measure
