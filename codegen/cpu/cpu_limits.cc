// CpuLimits from a feature list or from the host CPU.
#include "codegen/cpu/cpu_limits.h"

#include <string_view>

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Host.h"

namespace tune::codegen {
namespace {

/// True when `features` enables `name`: an item "name" or "+name" of the comma list.
bool HasFeature(std::string_view features, std::string_view name) {
  while (!features.empty()) {
    const size_t comma = features.find(',');
    std::string_view item = features.substr(0, comma);
    features = comma == std::string_view::npos ? std::string_view() : features.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty() && item.front() == '+') item.remove_prefix(1);
    if (item == name) return true;
  }
  return false;
}

}  // namespace

CpuLimits CpuLimitsOf(const std::string& features) {
  if (HasFeature(features, "avx512f")) return CpuLimits{16, 32, "avx512"};
  if (HasFeature(features, "avx2") || HasFeature(features, "avx")) return CpuLimits{8, 16, "avx2"};
  return CpuLimits{4, 16, "sse"};
}

CpuLimits HostCpuLimits() {
  static const CpuLimits host = [] {
    llvm::StringMap<bool> features;
    std::string list;
    if (llvm::sys::getHostCPUFeatures(features)) {
      for (const char* name : {"avx512f", "avx2", "avx"}) {
        auto it = features.find(name);
        if (it != features.end() && it->second) list += std::string(list.empty() ? "" : ",") + name;
      }
    }
    return CpuLimitsOf(list);
  }();
  return host;
}

}  // namespace tune::codegen
