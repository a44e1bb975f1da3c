// Target::Parse and Target::CudaGpu: targets that need the measuring side (a GPU probe).
#include <algorithm>
#include <chrono>
#include <memory>
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
#include "codegen/runtime/cuda_driver.h"
#include "measure/child_process.h"
#include "measure/cuda_runner.h"
#include "measure/target.h"

namespace tune::measure {
namespace {

/// How long the device count probe may take to answer, and then to exit, seconds.
constexpr int kCountDeadlineS = 60;

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

bool Target::IsAllGpus(const std::string& text) { return absl::StripAsciiWhitespace(text) == "cuda:all"; }

absl::StatusOr<std::vector<std::string>> Target::PerDeviceTargets(const std::string& text, int device_count) {
  if (!IsAllGpus(text)) return std::vector<std::string>{text};
  if (device_count <= 0) {
    return absl::UnavailableError("cuda:all: this host has no CUDA device (the driver loads but finds none)");
  }
  std::vector<std::string> out;
  for (int i = 0; i < device_count; ++i) out.push_back(absl::StrCat("cuda:", i));
  return out;
}

absl::StatusOr<int> Target::CudaDeviceCount() {
  if (!codegen::NvrtcAvailable()) {
    return absl::UnavailableError("this build has no NVRTC, so it cannot generate CUDA kernels");
  }
  // The driver is loaded only in the child: its answer is "N" or "!reason".
  absl::StatusOr<std::unique_ptr<ChildProcess>> probe = ChildProcess::Start([](ChildProcess::Channel& channel) {
    absl::StatusOr<int> count = codegen::CudaDeviceCount();
    channel.Send(count.ok() ? absl::StrCat(*count) : absl::StrCat("!", count.status().message()));
    return 0;
  });
  if (!probe.ok()) return probe.status();
  std::string answer;
  const auto now = std::chrono::steady_clock::now();
  const ChildProcess::Read read = (*probe)->Next(now + std::chrono::seconds(kCountDeadlineS), &answer);
  if (read == ChildProcess::Read::kMessage) {
    (*probe)->Wait(std::chrono::steady_clock::now() + std::chrono::seconds(kCountDeadlineS));
  } else {
    (*probe)->Kill();
  }
  if (read != ChildProcess::Read::kMessage) return absl::UnavailableError("the CUDA device count probe gave no answer");
  if (!answer.empty() && answer[0] == '!') return absl::UnavailableError(answer.substr(1));
  int count = 0;
  if (!absl::SimpleAtoi(answer, &count) || count < 0) {
    return absl::InternalError("malformed answer from the CUDA device count probe");
  }
  return count;
}

absl::StatusOr<Target> Target::Parse(const std::string& text, int threads) {
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("target threads must be >= 1, got ", threads));
  }
  const std::string name(absl::StripAsciiWhitespace(text));
  if (name == "llvm") return HostCpu(threads);
  if (name == "cuda") return CudaGpu(0);
  if (IsAllGpus(name)) {
    return absl::InvalidArgumentError(
        "target 'cuda:all' names every GPU of the host: only `tune worker` takes it (one worker per GPU); "
        "give cuda:N here");
  }
  if (absl::StartsWith(name, "cuda:")) {
    int ordinal;
    if (!absl::SimpleAtoi(name.substr(5), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad target '", text, "': expected cuda:N with N >= 0 (or cuda:all for tune worker)"));
    }
    return CudaGpu(ordinal);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target '", text, "': known targets are 'llvm' (host CPU) and 'cuda[:N]' (NVIDIA GPU)"));
}

}  // namespace tune::measure
