// NVRTC compilation of CUDA C to cubin, and the parser of ptxas's verbose resource report.
#include "codegen/cuda/nvrtc.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#ifdef TUNE_HAVE_NVRTC
#include <dlfcn.h>
#include <nvrtc.h>
#endif

namespace tune::codegen {
namespace {

/// The number before `unit` in a clause such as "4096 bytes smem" (unit "bytes smem"), or -1.
int64_t NumberBefore(absl::string_view clause, absl::string_view unit) {
  clause = absl::StripAsciiWhitespace(clause);
  if (!absl::ConsumeSuffix(&clause, unit)) return -1;
  int64_t value;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(clause), &value)) return -1;
  return value;
}

/// The text between the first pair of single quotes after `prefix` in `line`, or empty.
std::string QuotedAfter(absl::string_view line, absl::string_view prefix) {
  size_t at = line.find(prefix);
  if (at == absl::string_view::npos) return {};
  absl::string_view rest = line.substr(at + prefix.size());
  size_t open = rest.find('\'');
  if (open == absl::string_view::npos) return {};
  size_t close = rest.find('\'', open + 1);
  if (close == absl::string_view::npos) return {};
  return std::string(rest.substr(open + 1, close - open - 1));
}

#ifdef TUNE_HAVE_NVRTC

/// The longest log a Status message carries: the first errors are the useful ones, and a
/// template gone wrong can print megabytes. CompiledCuda::log is never cut.
constexpr size_t kMaxLogInStatus = 8192;

/// The name a source gets in NVRTC's messages ("tune_kernel.cu(3): error: ...").
constexpr const char* kSourceName = "tune_kernel.cu";

std::string LogForStatus(absl::string_view log) {
  if (log.size() <= kMaxLogInStatus) return std::string(log);
  return absl::StrCat(log.substr(0, kMaxLogInStatus), "\n... (", log.size() - kMaxLogInStatus,
                      " more bytes of log)");
}

/// True for "sm_" followed by digits and at most one feature suffix ("a" or "f"): the real
/// architectures, which are the only ones that give SASS.
bool IsRealArch(absl::string_view arch) {
  if (!absl::ConsumePrefix(&arch, "sm_")) return false;
  if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) arch.remove_suffix(1);
  return !arch.empty() && std::all_of(arch.begin(), arch.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

CudaResources MaxOver(const std::map<std::string, CudaResources>& kernels) {
  CudaResources out;
  for (const auto& [name, r] : kernels) {
    out.registers = std::max(out.registers, r.registers);
    out.shared_bytes = std::max(out.shared_bytes, r.shared_bytes);
    out.spill_store_bytes = std::max(out.spill_store_bytes, r.spill_store_bytes);
    out.spill_load_bytes = std::max(out.spill_load_bytes, r.spill_load_bytes);
    out.stack_bytes = std::max(out.stack_bytes, r.stack_bytes);
  }
  return out;
}

/// Owns one nvrtcProgram.
struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    if (*p != nullptr) nvrtcDestroyProgram(p);
    delete p;
  }
};
using ProgramPtr = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);  // the size counts the terminating NUL
  return std::string(absl::StripAsciiWhitespace(log));
}

absl::Status NvrtcError(nvrtcResult result, absl::string_view doing) {
  return absl::InternalError(absl::StrCat("NVRTC ", doing, ": ", nvrtcGetErrorString(result)));
}

/// nvrtcSetFlowCallback's type. The function came with CUDA 12.8, and a libnvrtc.so.12 of an
/// earlier 12.x has the same soname without it, so it is looked up at run time rather than
/// called by name (a direct call would leave the binary unable to load, or to resolve it, there).
using SetFlowCallbackFn = nvrtcResult (*)(nvrtcProgram, int (*)(void*, void*), void*);

/// The loaded NVRTC's nvrtcSetFlowCallback, or null when it has none. Looked up once.
SetFlowCallbackFn FindSetFlowCallback() {
  static const SetFlowCallbackFn fn = [] {
    void* symbol = dlsym(RTLD_DEFAULT, "nvrtcSetFlowCallback");
    if (symbol == nullptr) {
      // Not in the global scope (NVRTC loaded by a library opened with RTLD_LOCAL): ask the
      // library that holds nvrtcVersion itself.
      Dl_info info;
      if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
        if (void* lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) {
          symbol = dlsym(lib, "nvrtcSetFlowCallback");
          dlclose(lib);  // drops the reference RTLD_NOLOAD took; the library stays loaded
        }
      }
    }
    return reinterpret_cast<SetFlowCallbackFn>(symbol);
  }();
  return fn;
}

/// The flow callback's payload: when the compile has to stop, and whether the callback said so.
struct FlowDeadline {
  std::chrono::steady_clock::time_point at;
  std::atomic<bool> cancelled{false};
};

/// NVRTC's flow callback: 1 (cancel) from the first call at or after the deadline on, 0 before.
/// Thread-safe and consistent once it has said 1, as NVRTC requires; calls no NVRTC function.
int CancelPastDeadline(void* payload, void* /*reserved*/) {
  auto* deadline = static_cast<FlowDeadline*>(payload);
  if (deadline->cancelled.load(std::memory_order_relaxed)) return 1;
  if (std::chrono::steady_clock::now() < deadline->at) return 0;
  deadline->cancelled.store(true, std::memory_order_relaxed);
  return 1;
}

#endif  // TUNE_HAVE_NVRTC

}  // namespace

std::map<std::string, CudaResources> ParsePtxasReport(absl::string_view log) {
  std::map<std::string, CudaResources> kernels;
  std::string entry;       // the entry function whose "Used ..." line comes next
  std::string properties;  // the function whose "N bytes stack frame, ..." line comes next
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StartsWith(line, "ptxas")) continue;
    if (absl::StrContains(line, "Compiling entry function")) {
      entry = QuotedAfter(line, "Compiling entry function");
      if (!entry.empty()) kernels[entry];
      continue;
    }
    if (size_t at = line.find("Function properties for "); at != absl::string_view::npos) {
      properties = std::string(
          absl::StripAsciiWhitespace(line.substr(at + absl::string_view("Function properties for ").size())));
      continue;
    }
    if (absl::StrContains(line, "bytes stack frame")) {
      auto it = kernels.find(properties);  // device functions' blocks are skipped
      if (it == kernels.end()) continue;
      // "ptxas         .     128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
      absl::string_view body = line.substr(line.find('.') + 1);
      for (absl::string_view clause : absl::StrSplit(body, ',')) {
        if (int64_t v = NumberBefore(clause, "bytes stack frame"); v >= 0) it->second.stack_bytes = v;
        if (int64_t v = NumberBefore(clause, "bytes spill stores"); v >= 0) it->second.spill_store_bytes = v;
        if (int64_t v = NumberBefore(clause, "bytes spill loads"); v >= 0) it->second.spill_load_bytes = v;
      }
      continue;
    }
    if (size_t at = line.find(": Used "); at != absl::string_view::npos) {
      auto it = kernels.find(entry);
      if (it == kernels.end()) continue;
      // "ptxas info    : Used 40 registers, used 1 barriers, 128 bytes cumulative stack size,
      //  400 bytes smem" (smem only when nonzero)
      CudaResources& r = it->second;
      r.shared_bytes = 0;
      for (absl::string_view clause : absl::StrSplit(line.substr(at + 2), ',')) {
        clause = absl::StripAsciiWhitespace(clause);
        if (absl::ConsumePrefix(&clause, "Used ")) {
          if (int64_t v = NumberBefore(clause, "registers"); v >= 0) r.registers = static_cast<int>(v);
        }
        if (int64_t v = NumberBefore(clause, "bytes smem"); v >= 0) r.shared_bytes = v;
        if (int64_t v = NumberBefore(clause, "bytes cumulative stack size"); v >= 0) r.stack_bytes = v;
      }
      continue;
    }
  }
  return kernels;
}

#ifdef TUNE_HAVE_NVRTC

bool NvrtcAvailable() { return true; }

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return {};
  return absl::StrCat(major, ".", minor);
}

bool NvrtcCanCancel() { return FindSetFlowCallback() != nullptr; }

absl::StatusOr<CompiledCuda> CompileCuda(const std::string& source, const std::string& arch,
                                         const std::vector<std::string>& extra_options,
                                         std::chrono::steady_clock::time_point deadline) {
  if (!IsRealArch(arch)) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA arch '", arch,
                                                   "' is not a real architecture such as sm_90 or sm_90a; ",
                                                   "a cubin needs one (compute_XX would give PTX only)"));
  }
  auto program = ProgramPtr(new nvrtcProgram(nullptr));
  if (nvrtcResult r = nvrtcCreateProgram(program.get(), source.c_str(), kSourceName, 0, nullptr, nullptr);
      r != NVRTC_SUCCESS) {
    return NvrtcError(r, "creating a program");
  }

  // NVRTC takes no -O3: device code optimization (--dopt) is on by default, and ptxas gets
  // -O3 (also its default) explicitly so the level is stated rather than assumed. -v makes
  // ptxas append its per-kernel resource report to the program log.
  // --no-cache: where a driver is installed, NVRTC 12.9+ serves a compile it has seen before
  // (same source and options, in this process or an earlier one) from the driver's compute
  // cache without running ptxas, so the log has no resource report and the resources would
  // be unknown. A tuner rarely compiles the same kernel twice, and needs the report each time.
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "--ptxas-options=-O3",
                                      "--ptxas-options=-v", "--no-cache"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());

  // The payload outlives the compile, the only call that invokes the callback.
  FlowDeadline flow;
  flow.at = deadline;
  if (deadline != std::chrono::steady_clock::time_point::max()) {
    // Without the callback (NVRTC before 12.8) the compile runs to its end; the caller knows
    // from NvrtcCanCancel. A registration NVRTC refuses is treated the same way.
    if (SetFlowCallbackFn set_flow_callback = FindSetFlowCallback(); set_flow_callback != nullptr) {
      set_flow_callback(*program, &CancelPastDeadline, &flow);
    }
  }
  const auto started = std::chrono::steady_clock::now();
  nvrtcResult compiled =
      nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (compiled != NVRTC_SUCCESS && flow.cancelled.load()) {
    const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return absl::DeadlineExceededError(absl::StrCat("CUDA compilation for ", arch,
                                                    " cancelled at its deadline, after ", ran_s, " s (",
                                                    nvrtcGetErrorString(compiled), ")"));
  }
  std::string log = ProgramLog(*program);
  if (compiled == NVRTC_ERROR_COMPILATION || compiled == NVRTC_ERROR_INVALID_OPTION) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA compilation for ", arch, " failed (", nvrtcGetErrorString(compiled),
                     ", options: ", absl::StrJoin(options, " "), "):\n", LogForStatus(log)));
  }
  if (compiled != NVRTC_SUCCESS) {
    return absl::InternalError(absl::StrCat("NVRTC compiling for ", arch, ": ", nvrtcGetErrorString(compiled),
                                            "\n", LogForStatus(log)));
  }

  size_t cubin_size = 0;
  if (nvrtcResult r = nvrtcGetCUBINSize(*program, &cubin_size); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "getting the cubin size");
  }
  if (cubin_size == 0) {
    return absl::InternalError(absl::StrCat("NVRTC produced no cubin for ", arch));
  }
  CompiledCuda out;
  out.cubin.resize(cubin_size);
  if (nvrtcResult r = nvrtcGetCUBIN(*program, out.cubin.data()); r != NVRTC_SUCCESS) {
    return NvrtcError(r, "getting the cubin");
  }
  out.log = std::move(log);
  out.kernels = ParsePtxasReport(out.log);
  out.resources = MaxOver(out.kernels);
  return out;
}

#else  // !TUNE_HAVE_NVRTC

bool NvrtcAvailable() { return false; }

bool NvrtcCanCancel() { return false; }

std::string NvrtcVersion() { return {}; }

absl::StatusOr<CompiledCuda> CompileCuda(const std::string& source, const std::string& arch,
                                         const std::vector<std::string>& extra_options,
                                         std::chrono::steady_clock::time_point deadline) {
  return absl::UnimplementedError(
      "this build has no CUDA compiler (configure with the CUDA toolkit and TUNE_WITH_CUDA=ON)");
}

#endif  // TUNE_HAVE_NVRTC

}  // namespace tune::codegen
