// Target: the host CPU as seen through LLVM and /proc/cpuinfo, its stable key and JSON.
#include "measure/target.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Host.h"
#include "nlohmann/json.hpp"

namespace tune::measure {
namespace {

// CPU features that change which kernels are fast (vector width, FMA, matrix units). The
// rest of LLVM's long list is left out so that keys stay short and readable.
constexpr const char* kRelevantFeatures[] = {
    "sse4.2",     "avx",        "avx2",       "fma",      "f16c",     "avx512f",  "avx512bw",
    "avx512vl",   "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile", "neon",   "sve",
};

// Collapses runs of whitespace and removes '|' so the name can sit inside a key.
std::string CleanName(const std::string& text) {
  std::string replaced = absl::StrReplaceAll(text, {{"|", "/"}});
  std::vector<std::string> words =
      absl::StrSplit(replaced, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

// The first "model name" line of /proc/cpuinfo ("Model"/"Hardware" on some ARM kernels).
std::string ReadCpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string fallback;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key(absl::StripAsciiWhitespace(line.substr(0, colon)));
    const std::string value = CleanName(line.substr(colon + 1));
    if (value.empty()) continue;
    if (key == "model name") return value;
    if (fallback.empty() && (key == "Model" || key == "Hardware")) fallback = value;
  }
  return fallback.empty() ? "unknown" : fallback;
}

std::string HostFeatures() {
  llvm::StringMap<bool> host_features;
  if (!llvm::sys::getHostCPUFeatures(host_features)) return "";
  std::vector<std::string> enabled;
  for (const char* name : kRelevantFeatures) {
    auto it = host_features.find(name);
    if (it != host_features.end() && it->second) enabled.push_back(absl::StrCat("+", name));
  }
  std::sort(enabled.begin(), enabled.end());
  return absl::StrJoin(enabled, ",");
}

}  // namespace

std::string Target::Key() const {
  // Features without their '+' signs: "+avx2,+fma" -> "avx2,fma".
  const std::string bare_features = absl::StrReplaceAll(features, {{"+", ""}});
  return absl::StrCat(kind, "|", cpu, "|", device_model, "|", bare_features, "|", toolkit, "|t",
                      threads);
}

std::string Target::ToJson() const {
  nlohmann::json j = {
      {"kind", kind},         {"device_model", device_model}, {"cpu", cpu},
      {"features", features}, {"toolkit", toolkit},           {"threads", threads},
      {"key", Key()},
  };
  if (kind == "cuda") {
    j["device"] = device;
    j["max_threads_per_block"] = max_threads_per_block;
    j["max_shared_per_block"] = max_shared_per_block;
    j["registers_per_block"] = registers_per_block;
    j["multiprocessors"] = multiprocessors;
    j["l2_bytes"] = l2_bytes;
  }
  return j.dump();
}

absl::StatusOr<Target> Target::FromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("target description is not a JSON object");
  Target t;
  try {
    t.kind = j.at("kind").get<std::string>();
    t.device_model = j.at("device_model").get<std::string>();
    t.cpu = j.at("cpu").get<std::string>();
    t.features = j.at("features").get<std::string>();
    t.toolkit = j.at("toolkit").get<std::string>();
    t.threads = j.at("threads").get<int>();
    if (t.kind == "cuda") {
      t.device = j.at("device").get<int>();
      t.max_threads_per_block = j.at("max_threads_per_block").get<int64_t>();
      t.max_shared_per_block = j.at("max_shared_per_block").get<int64_t>();
      t.registers_per_block = j.at("registers_per_block").get<int64_t>();
      t.multiprocessors = j.at("multiprocessors").get<int64_t>();
      t.l2_bytes = j.at("l2_bytes").get<int64_t>();
    }
    if (t.Key() != j.at("key").get<std::string>())
      return absl::InvalidArgumentError("target description: key does not match its fields");
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(std::string("target description: ") + e.what());
  }
  if (t.kind != "llvm" && t.kind != "cuda") return absl::InvalidArgumentError("target kind must be llvm or cuda");
  return t;
}

Target Target::HostCpu(int threads) {
  Target target;
  target.kind = "llvm";
  target.device_model = ReadCpuModelName();
  target.cpu = CleanName(llvm::sys::getHostCPUName().str());
  if (target.cpu.empty()) target.cpu = "generic";
  target.features = HostFeatures();
  target.toolkit = absl::StrCat("llvm-", LLVM_VERSION_STRING);
  target.threads = std::max(1, threads);
  return target;
}

}  // namespace tune::measure
