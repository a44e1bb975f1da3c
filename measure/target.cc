// Target: the host CPU as seen through LLVM and /proc/cpuinfo, its stable key and JSON.
#include "measure/target.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
    if (memory_bytes > 0) j["memory_bytes"] = memory_bytes;
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
      if (j.contains("memory_bytes")) t.memory_bytes = j.at("memory_bytes").get<int64_t>();  // newer descriptions
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

namespace {

using Wide = unsigned __int128;
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

int64_t Clamp(Wide v) { return v > static_cast<Wide>(kMaxBytes) ? kMaxBytes : static_cast<int64_t>(v); }
Wide Elements(const codegen::TensorSpec& t) { return static_cast<Wide>(t.NumElements()); }  // saturated
constexpr Wide kFloat = 4;
constexpr Wide kSplitWorkspace = Wide{64} << 20;  // the CUDA GEMM's split-K partial tiles, at most

}  // namespace

BufferBytes WorkloadBufferBytes(const codegen::Workload& w, const std::string& kind) {
  // Element counts are at most INT64_MAX each, so sums of a few of them fit 128 bits.
  const std::vector<codegen::TensorSpec> inputs = w.Inputs();
  Wide in = 0;
  for (const auto& t : inputs) in += Elements(t);
  const Wide out = Elements(w.Output());
  BufferBytes b;
  if (kind == "cuda") {
    // The host keeps the inputs (the reference is computed on the device); the runner's worker
    // stages them and reads the output back. The device holds inputs, output and reference.
    b.kept_host = Clamp(kFloat * in);
    b.peak_host = Clamp(kFloat * (2 * in + out));
    b.device = Clamp(kFloat * (in + 2 * out) + kSplitWorkspace);
    return b;
  }
  // The largest scratch copy a CPU template may make: a packed B (gemm), or a padded input
  // and a packed weight (conv2d). The naive reference's transposed weight (dense) is no larger.
  Wide scratch = inputs.size() > 1 ? Elements(inputs[1]) : 0;
  if (w.op == codegen::OpKind::kConv2d) {
    const Wide ph = static_cast<Wide>(w.in_h) + 2 * static_cast<Wide>(w.pad_h);
    const Wide pw = static_cast<Wide>(w.in_w) + 2 * static_cast<Wide>(w.pad_w);
    scratch += static_cast<Wide>(w.batch) * static_cast<Wide>(w.in_c) * ph * pw;
  }
  // Kept: inputs and reference. A measurement's child copies the inputs and owns an output.
  b.kept_host = Clamp(kFloat * (in + out));
  b.peak_host = Clamp(kFloat * (2 * in + 2 * out + scratch));
  return b;
}

int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return Clamp(static_cast<Wide>(pages) * static_cast<Wide>(page));
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

absl::Status CheckBuffersFit(const std::vector<codegen::Workload>& workloads, const Target& target,
                             int64_t host_memory) {
  std::vector<BufferBytes> need;
  Wide kept = 0;
  for (const auto& w : workloads) {
    need.push_back(WorkloadBufferBytes(w, target.kind));
    kept += static_cast<Wide>(need.back().kept_host);
  }
  const std::string host = "this machine allows ";
  if (host_memory > 0) {
    const int64_t allowed = host_memory / 2;
    const std::string limit = absl::StrCat(host, FormatBytes(allowed), " (half of its ", FormatBytes(host_memory), " memory)");
    for (size_t i = 0; i < workloads.size(); ++i) {
      if (need[i].peak_host > allowed) {
        return absl::InvalidArgumentError(
            absl::StrCat(workloads[i].Label(), " needs ", FormatBytes(need[i].peak_host), " of buffers; ", limit));
      }
    }
    // Every task keeps its data once measured; the one being measured adds its copies.
    for (size_t i = 0; i < workloads.size(); ++i) {
      const Wide total = kept - static_cast<Wide>(need[i].kept_host) + static_cast<Wide>(need[i].peak_host);
      if (total > static_cast<Wide>(allowed)) {
        return absl::InvalidArgumentError(absl::StrCat("the ", workloads.size(), " tasks need ", FormatBytes(Clamp(total)),
                                                       " of buffers together; ", limit));
      }
    }
  }
  if (target.kind == "cuda" && target.memory_bytes > 0) {
    const int64_t allowed = target.memory_bytes / 4 * 3;
    for (size_t i = 0; i < workloads.size(); ++i) {
      if (need[i].device > allowed) {
        return absl::InvalidArgumentError(absl::StrCat(
            workloads[i].Label(), " needs ", FormatBytes(need[i].device), " of device buffers; ", target.device_model,
            " allows ", FormatBytes(allowed), " (three quarters of its ", FormatBytes(target.memory_bytes), " memory)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tune::measure
