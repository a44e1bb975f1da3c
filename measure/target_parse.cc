// Target::Parse and Target::CudaGpu: targets that need the measuring side (a GPU probe).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/cuda/nvrtc.h"
#include "measure/cuda_runner.h"
#include "measure/target.h"

namespace tune::measure {
namespace {

// The device name as one line without '|', so it can sit inside a key.
std::string KeySafe(const std::string& text) {
  std::vector<std::string> words = absl::StrSplit(text, absl::ByAnyChar(" \t\r\n|"), absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

}  // namespace

absl::StatusOr<Target> Target::CudaGpu(int ordinal) {
  if (!codegen::NvrtcAvailable()) {
    return absl::UnavailableError("this build has no NVRTC, so it cannot generate CUDA kernels");
  }
  auto info = CudaRunner::Probe(ordinal);
  if (!info.ok()) return info.status();
  Target target;
  target.kind = "cuda";
  target.device = ordinal;
  target.device_model = KeySafe(info->name);
  target.cpu = info->Arch();
  target.features = absl::StrCat(info->sm_count, "sm");
  target.toolkit = absl::StrCat("nvrtc-", codegen::NvrtcVersion(), ",driver-", info->driver_version / 1000, ".",
                                (info->driver_version % 1000) / 10);
  target.threads = 1;
  target.max_threads_per_block = info->max_threads_per_block;
  target.max_shared_per_block = info->max_shared_per_block_optin;
  target.registers_per_block = info->regs_per_block;
  target.multiprocessors = info->sm_count;
  target.l2_bytes = info->l2_bytes;
  target.memory_bytes = info->total_memory;
  return target;
}

absl::StatusOr<Target> Target::Parse(const std::string& text, int threads) {
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("target threads must be >= 1, got ", threads));
  }
  const std::string name(absl::StripAsciiWhitespace(text));
  if (name == "llvm") return HostCpu(threads);
  if (name == "cuda") return CudaGpu(0);
  if (absl::StartsWith(name, "cuda:")) {
    int ordinal;
    if (!absl::SimpleAtoi(name.substr(5), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad target '", text, "': expected cuda:N with N >= 0"));
    }
    return CudaGpu(ordinal);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target '", text, "': known targets are 'llvm' (host CPU) and 'cuda[:N]' (NVIDIA GPU)"));
}

}  // namespace tune::measure
