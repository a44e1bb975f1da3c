// MeasureResult and MeasureProtocol: status names, protocol JSON and sample statistics.
#include "measure/measure_result.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tune::measure {
namespace {

struct StatusNameEntry {
  MeasureStatus status;
  const char* name;
};

constexpr StatusNameEntry kStatusNames[] = {
    {MeasureStatus::kOk, "ok"},
    {MeasureStatus::kInvalidConfig, "invalid_config"},
    {MeasureStatus::kCompileError, "compile_error"},
    {MeasureStatus::kRuntimeError, "runtime_error"},
    {MeasureStatus::kTimeout, "timeout"},
    {MeasureStatus::kWrongResult, "wrong_result"},
};

// Reads `key` from `object` into `out` when present; a value of the wrong type is an error.
template <typename T>
absl::Status ReadField(const nlohmann::json& object, const char* key, T& out) {
  auto it = object.find(key);
  if (it == object.end()) return absl::OkStatus();
  const nlohmann::json& value = *it;
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measure protocol: '", key, "' must be a boolean"));
    }
    out = value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!value.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measure protocol: '", key, "' must be an integer"));
    }
    const int64_t v = value.get<int64_t>();
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measure protocol: '", key, "' is out of range"));
    }
    out = static_cast<T>(v);
  } else {
    if (!value.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measure protocol: '", key, "' must be a number"));
    }
    out = value.get<double>();
  }
  return absl::OkStatus();
}

}  // namespace

std::string StatusName(MeasureStatus status) {
  for (const auto& entry : kStatusNames) {
    if (entry.status == status) return entry.name;
  }
  return "unknown";
}

absl::StatusOr<MeasureStatus> ParseStatusName(const std::string& name) {
  for (const auto& entry : kStatusNames) {
    if (name == entry.name) return entry.status;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown measure status '", name,
      "': expected ok, invalid_config, compile_error, runtime_error, timeout or wrong_result"));
}

std::string BuildTimedOutMessage(double timeout_s) { return absl::StrCat("build timed out after ", timeout_s, " s"); }

std::string CutOffMessage(double first_s, double warm_s, double cutoff_s) {
  return absl::StrCat("timing cut off after a warm call (", warm_s, " s > ", cutoff_s, " s; the first call ", first_s,
                      " s)");
}

std::string MeasureProtocol::ToJson() const {
  nlohmann::json j = {
      {"warmup", warmup},       {"repeats", repeats},     {"min_repeat_ms", min_repeat_ms},
      {"flush_cache", flush_cache}, {"timeout_s", timeout_s}, {"rtol", rtol},
      {"atol", atol},           {"cutoff_s", cutoff_s},   {"build_timeout_s", build_timeout_s},
  };
  if (interleave) j["interleave"] = true;  // absent when off: records of before it read the same
  return j.dump();
}

absl::StatusOr<MeasureProtocol> MeasureProtocol::FromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("measure protocol: not valid JSON");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("measure protocol: expected a JSON object");
  }
  MeasureProtocol p;  // fields absent from the JSON keep their defaults
  for (absl::Status s : {ReadField(j, "warmup", p.warmup), ReadField(j, "repeats", p.repeats),
                         ReadField(j, "min_repeat_ms", p.min_repeat_ms),
                         ReadField(j, "flush_cache", p.flush_cache),
                         ReadField(j, "timeout_s", p.timeout_s), ReadField(j, "rtol", p.rtol),
                         ReadField(j, "atol", p.atol), ReadField(j, "cutoff_s", p.cutoff_s),
                         ReadField(j, "build_timeout_s", p.build_timeout_s),
                         ReadField(j, "interleave", p.interleave)}) {
    if (!s.ok()) return s;
  }
  if (p.warmup < 0) return absl::InvalidArgumentError("measure protocol: warmup must be >= 0");
  if (p.repeats < 1) return absl::InvalidArgumentError("measure protocol: repeats must be >= 1");
  if (!(p.min_repeat_ms >= 0)) {
    return absl::InvalidArgumentError("measure protocol: min_repeat_ms must be >= 0");
  }
  if (!(p.cutoff_s >= 0)) {
    return absl::InvalidArgumentError("measure protocol: cutoff_s must be >= 0");
  }
  if (!(p.build_timeout_s >= 0) || !std::isfinite(p.build_timeout_s)) {
    return absl::InvalidArgumentError("measure protocol: build_timeout_s must be a finite number >= 0 (0 = none)");
  }
  if (!(p.timeout_s > 0)) {
    return absl::InvalidArgumentError("measure protocol: timeout_s must be > 0");
  }
  if (!(p.rtol >= 0) || !(p.atol >= 0)) {
    return absl::InvalidArgumentError("measure protocol: rtol and atol must be >= 0");
  }
  return p;
}

double MeasureResult::Median() const {
  if (!ok() || costs_s.empty()) return std::numeric_limits<double>::infinity();
  std::vector<double> sorted = costs_s;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  if (n % 2 == 1) return sorted[n / 2];
  return 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

double MeasureResult::Mean() const {
  if (!ok() || costs_s.empty()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs_s.begin(), costs_s.end(), 0.0) /
         static_cast<double>(costs_s.size());
}

}  // namespace tune::measure
