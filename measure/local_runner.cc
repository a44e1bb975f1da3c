// LocalRunner: a ChildProcess per candidate checks and times the kernel and sends its result back.
#include "measure/local_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "measure/child_message.h"
#include "measure/child_process.h"
#include "measure/reference.h"
#include "spdlog/spdlog.h"

namespace tune::measure {
namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(float* ptr) const { std::free(ptr); }
};
using AlignedFloats = std::unique_ptr<float, FreeDeleter>;

AlignedFloats AllocateAligned(size_t count) {
  size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  bytes = (bytes + 63) / 64 * 64;
  void* ptr = std::aligned_alloc(64, bytes);
  if (ptr == nullptr) {
    std::fputs("local runner child: out of memory\n", stderr);
    _exit(2);
  }
  return AlignedFloats(static_cast<float*>(ptr));
}

// Loads, checks and times the kernel (in the child); the result's build_s and wall_s are
// left to the parent.
MeasureResult MeasureInChild(const TaskData& task, const BuildResult& build, const LocalRunnerOptions& options,
                             const LocalRunner::KernelLoader& loader) {
  const MeasureProtocol& protocol = options.protocol;
  MeasureResult report;
  codegen::runtime::SetNumThreads(std::max(1, options.threads));

  absl::StatusOr<codegen::KernelFn> loaded = loader(build.kernel);
  if (!loaded.ok()) {
    report.status = MeasureStatus::kCompileError;
    report.message = absl::StrCat("loading kernel failed: ", loaded.status().ToString());
    return report;
  }
  if (*loaded == nullptr) {
    report.status = MeasureStatus::kCompileError;
    report.message = "loading kernel failed: null function pointer";
    return report;
  }
  const codegen::KernelFn fn = *loaded;

  std::vector<AlignedFloats> buffers;
  std::vector<float*> args;
  for (const std::vector<float>& input : task.inputs) {
    buffers.push_back(AllocateAligned(input.size()));
    std::copy(input.begin(), input.end(), buffers.back().get());
    args.push_back(buffers.back().get());
  }
  const int64_t out_size = static_cast<int64_t>(task.reference.size());
  buffers.push_back(AllocateAligned(task.reference.size()));
  float* out = buffers.back().get();
  std::fill(out, out + out_size, std::numeric_limits<float>::quiet_NaN());
  args.push_back(out);
  float* const* argv = args.data();
  // New inputs at addresses a kernel of this process may have packed before (a fork of a
  // process that ran kernels): the first call below must pack them afresh.
  tune_rt_prepacked_reset();
  const int64_t packs_before = codegen::runtime::PrepackedPacks();

  const Clock::time_point first_start = Clock::now();
  fn(argv);
  const int64_t packs_first = codegen::runtime::PrepackedPacks() - packs_before;
  const double first_s = std::chrono::duration<double>(Clock::now() - first_start).count();
  std::string why;
  if (!AllClose(out, task.reference.data(), out_size, protocol.rtol, protocol.atol, &why)) {
    report.status = MeasureStatus::kWrongResult;
    report.message = absl::StrCat("output differs from reference: ", why);
    return report;
  }
  if (protocol.cutoff_s > 0 && first_s > protocol.cutoff_s) {
    report.costs_s.push_back(first_s);
    report.number = 1;
    report.status = MeasureStatus::kOk;
    report.message = absl::StrCat("timing cut off after the first call (", first_s, " s > ", protocol.cutoff_s, " s)");
    return report;
  }

  for (int i = 0; i < protocol.warmup; ++i) fn(argv);

  auto sample = [&](int number) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < number; ++i) fn(argv);
    return std::chrono::duration<double>(Clock::now() - start).count();
  };

  const double min_repeat_s = std::max(0.0, protocol.min_repeat_ms) / 1e3;
  int number = 1;
  while (number < LocalRunner::kMaxNumber && sample(number) < min_repeat_s) number *= 2;

  std::unique_ptr<char[]> flush;
  if (protocol.flush_cache) flush.reset(new char[LocalRunner::kFlushBytes]);
  const int repeats = std::max(1, protocol.repeats);  // an ok record always has a sample
  for (int r = 0; r < repeats; ++r) {
    if (flush) {
      std::memset(flush.get(), r + 1, LocalRunner::kFlushBytes);
      asm volatile("" : : "r"(flush.get()) : "memory");  // the writes must happen
    }
    report.costs_s.push_back(sample(number) / number);
  }
  report.number = number;

  if (!AllClose(out, task.reference.data(), out_size, protocol.rtol, protocol.atol, &why)) {
    report.costs_s.clear();
    report.status = MeasureStatus::kWrongResult;
    report.message = absl::StrCat("output differs from reference after repeated calls: ", why);
    return report;
  }
  report.status = MeasureStatus::kOk;
  // A kernel that packs its constant weight once (prepack) did so in the first, checked call.
  const int64_t packs_timed = codegen::runtime::PrepackedPacks() - packs_before - packs_first;
  if (packs_first > 0 && packs_timed == 0) {
    report.message = LocalRunner::kPackedOnceNote;
  } else if (packs_timed > 0) {
    report.message = absl::StrCat("weights packed again ", packs_timed, " times during the timed calls");
  }
  return report;
}

// The child's result; an exception becomes a runtime_error result.
MeasureResult MeasureGuarded(const TaskData& task, const BuildResult& build, const LocalRunnerOptions& options,
                             const LocalRunner::KernelLoader& loader) {
  MeasureResult report;
  try {
    report = MeasureInChild(task, build, options, loader);
  } catch (const std::exception& e) {
    report = MeasureResult{};
    report.message = absl::StrCat("kernel process threw: ", e.what());
  } catch (...) {
    report = MeasureResult{};
    report.message = "kernel process threw a non-standard exception";
  }
  return report;
}

// Empty when `task` is self-consistent; otherwise what is wrong with it.
std::string CheckTask(const TaskData& task) {
  const std::vector<codegen::TensorSpec> inputs = task.workload.Inputs();
  if (inputs.size() != task.inputs.size()) {
    return absl::StrCat("task has ", task.inputs.size(), " inputs, workload wants ",
                        inputs.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int64_t>(task.inputs[i].size()) != inputs[i].NumElements()) {
      return absl::StrCat("task input ", inputs[i].name, " has ", task.inputs[i].size(),
                          " elements, workload wants ", inputs[i].NumElements());
    }
  }
  if (static_cast<int64_t>(task.reference.size()) != task.workload.Output().NumElements()) {
    return absl::StrCat("task reference has ", task.reference.size(),
                        " elements, workload wants ", task.workload.Output().NumElements());
  }
  return "";
}

}  // namespace

RunnerFactory LocalRunner::Factory(int threads) {
  return [threads](const MeasureProtocol& protocol) -> std::unique_ptr<Runner> {
    return std::make_unique<LocalRunner>(LocalRunnerOptions{protocol, threads});
  };
}

LocalRunner::LocalRunner(LocalRunnerOptions options, KernelLoader loader)
    : options_(std::move(options)),
      loader_(loader ? std::move(loader) : DefaultLoader()) {}

LocalRunner::KernelLoader LocalRunner::DefaultLoader() {
  return [](const codegen::CompiledKernel& kernel) -> absl::StatusOr<codegen::KernelFn> {
    absl::StatusOr<std::unique_ptr<codegen::LoadedKernel>> loaded =
        codegen::LoadedKernel::Load(kernel);
    if (!loaded.ok()) return loaded.status();
    // Kept alive for the rest of the (child) process, which ends with _exit.
    return (*loaded).release()->fn();
  };
}

std::vector<MeasureResult> LocalRunner::Run(const TaskData& task,
                                            const std::vector<BuildResult>& builds) {
  std::vector<MeasureResult> results;
  results.reserve(builds.size());
  const std::string task_error = CheckTask(task);
  for (const BuildResult& build : builds) {
    MeasureResult result;
    result.build_s = build.build_s;
    if (build.status != MeasureStatus::kOk) {
      result.status = build.status;
      result.message = build.message;
    } else if (!task_error.empty()) {
      result.status = MeasureStatus::kRuntimeError;
      result.message = absl::StrCat("bad task data: ", task_error);
    } else {
      result = RunOne(task, build);
    }
    spdlog::debug("local runner: {} {} {}", build.kernel.symbol, StatusName(result.status),
                  result.message);
    results.push_back(std::move(result));
  }
  return results;
}

MeasureResult LocalRunner::RunOne(const TaskData& task, const BuildResult& build) const {
  const Clock::time_point start = Clock::now();
  const double timeout_s = std::max(0.0, options_.protocol.timeout_s);
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  MeasureResult result;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start([&](ChildProcess::Channel& channel) {
    channel.Send(MessageWriter().PutResult(MeasureGuarded(task, build, options_, loader_)).bytes());
    return 0;
  });
  if (!child.ok()) {
    result.message = std::string(child.status().message());
  } else {
    std::string payload;
    const ChildProcess::Read read = (*child)->Next(deadline, &payload);
    ChildExit exit;
    if (read == ChildProcess::Read::kMessage) {
      // The child sends its result right before it exits: allow a grace period past the
      // deadline for the exit itself. A child that then stalls in _exit (and is killed) still
      // measured the kernel.
      exit = (*child)->Wait(std::max(deadline, Clock::now() + std::chrono::seconds(1)));
    } else if (read == ChildProcess::Read::kEnd) {
      exit = (*child)->Wait(deadline);
    } else {
      exit = (*child)->Kill();
    }
    MessageReader reader(payload);
    const bool usable = read == ChildProcess::Read::kMessage && exit.kind != ChildExit::Kind::kSignaled &&
                        (exit.kind != ChildExit::Kind::kExited || exit.Clean()) && reader.GetResult(&result) &&
                        reader.Done();
    if (!usable) result = LostResult(read, **child, exit, timeout_s);
  }
  result.build_s = build.build_s;
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace tune::measure
