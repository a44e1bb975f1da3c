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
#include <functional>
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

// One kernel in a measuring child: its own copies of the inputs and its output, its calls, its
// record. The steps run in order: Load, (tune_rt_prepacked_reset once for the whole child)
// CheckFirstCall, Calibrate, Sample per repeat, Finish; a step that settles the record (load
// failure, wrong output, timing cut off) makes live() false and the later steps are skipped.
class KernelUnderTest {
 public:
  KernelUnderTest(const TaskData& task, const MeasureProtocol& protocol) : task_(task), protocol_(protocol) {}

  void Load(const BuildResult& build, const LocalRunner::KernelLoader& loader) {
    absl::StatusOr<codegen::KernelFn> loaded = loader(build.kernel);
    if (!loaded.ok()) return Settle(MeasureStatus::kCompileError, absl::StrCat("loading kernel failed: ", loaded.status().ToString()));
    if (*loaded == nullptr) return Settle(MeasureStatus::kCompileError, "loading kernel failed: null function pointer");
    fn_ = *loaded;
    for (const std::vector<float>& input : task_.inputs) {
      buffers_.push_back(AllocateAligned(input.size()));
      std::copy(input.begin(), input.end(), buffers_.back().get());
      args_.push_back(buffers_.back().get());
    }
    buffers_.push_back(AllocateAligned(task_.reference.size()));
    out_ = buffers_.back().get();
    std::fill(out_, out_ + task_.reference.size(), std::numeric_limits<float>::quiet_NaN());
    args_.push_back(out_);
    live_ = true;
  }

  // The first call, checked against the reference; with protocol.cutoff_s, a slow one ends the
  // timing. The first call runs cold (it packs a prepack kernel's weight, faults in the
  // runtime's scratch buffers and the code): the cutoff judges the second call, which is the
  // first warm-up call, timed.
  void CheckFirstCall() {
    if (!live_) return;
    const int64_t packs_before = codegen::runtime::PrepackedPacks();
    const Clock::time_point start = Clock::now();
    fn_(args_.data());
    const double first_s = std::chrono::duration<double>(Clock::now() - start).count();
    packs_first_ = codegen::runtime::PrepackedPacks() - packs_before;
    std::string why;
    if (!AllClose(out_, task_.reference.data(), static_cast<int64_t>(task_.reference.size()), protocol_.rtol,
                  protocol_.atol, &why)) {
      return Settle(MeasureStatus::kWrongResult, absl::StrCat("output differs from reference: ", why));
    }
    if (protocol_.cutoff_s > 0) {
      const int64_t packs_warm = codegen::runtime::PrepackedPacks();
      const double warm_s = Time(1);
      packs_timed_ += codegen::runtime::PrepackedPacks() - packs_warm;
      warmups_done_ = 1;
      if (warm_s > protocol_.cutoff_s) {
        report_.costs_s.push_back(warm_s);
        report_.number = 1;
        return Settle(MeasureStatus::kOk, CutOffMessage(first_s, warm_s, protocol_.cutoff_s));
      }
    }
  }

  // The warm-up calls (less the one the cutoff timed), then `number` doubled until a sample
  // lasts min_repeat_ms.
  void Calibrate() {
    if (!live_) return;
    const int64_t packs_before = codegen::runtime::PrepackedPacks();
    for (int i = warmups_done_; i < protocol_.warmup; ++i) fn_(args_.data());
    const double min_repeat_s = std::max(0.0, protocol_.min_repeat_ms) / 1e3;
    while (number_ < LocalRunner::kMaxNumber && Time(number_) < min_repeat_s) number_ *= 2;
    packs_timed_ += codegen::runtime::PrepackedPacks() - packs_before;
  }

  // One timed sample of `number` calls, after `untimed` calls that are not counted and then
  // `before_timing` (the cache flush, if any).
  void Sample(int untimed, const std::function<void()>& before_timing) {
    if (!live_) return;
    const int64_t packs_before = codegen::runtime::PrepackedPacks();
    for (int i = 0; i < untimed; ++i) fn_(args_.data());
    before_timing();
    report_.costs_s.push_back(Time(number_) / number_);
    packs_timed_ += codegen::runtime::PrepackedPacks() - packs_before;
  }

  // The output checked again after the timed calls; the note on packed weights.
  MeasureResult Finish() {
    if (!live_) return std::move(report_);
    live_ = false;
    report_.number = number_;
    std::string why;
    if (!AllClose(out_, task_.reference.data(), static_cast<int64_t>(task_.reference.size()), protocol_.rtol,
                  protocol_.atol, &why)) {
      report_.costs_s.clear();
      report_.status = MeasureStatus::kWrongResult;
      report_.message = absl::StrCat("output differs from reference after repeated calls: ", why);
      return std::move(report_);
    }
    report_.status = MeasureStatus::kOk;
    // A kernel that packs its constant weight once (prepack) did so in the first, checked call.
    if (packs_first_ > 0 && packs_timed_ == 0) {
      report_.message = LocalRunner::kPackedOnceNote;
    } else if (packs_timed_ > 0) {
      report_.message = absl::StrCat("weights packed again ", packs_timed_, " times during the timed calls");
    }
    return std::move(report_);
  }

  bool live() const { return live_; }

 private:
  double Time(int calls) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i) fn_(args_.data());
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  void Settle(MeasureStatus status, std::string message) {
    live_ = false;
    report_.status = status;
    report_.message = std::move(message);
  }

  const TaskData& task_;
  const MeasureProtocol& protocol_;
  codegen::KernelFn fn_ = nullptr;
  std::vector<AlignedFloats> buffers_;
  std::vector<float*> args_;
  float* out_ = nullptr;
  bool live_ = false;
  int number_ = 1;
  int warmups_done_ = 0;  // warm-up calls CheckFirstCall made (the one the cutoff timed)
  int64_t packs_first_ = 0;
  int64_t packs_timed_ = 0;
  MeasureResult report_;
};

// Loads, checks and times the kernels of `builds` (in the child), one after the other or, with
// protocol.interleave, sample by sample in rotating order; `progress` is called after each
// step that may take a while (the parent's deadline restarts on it). The results' build_s and
// wall_s are left to the parent.
std::vector<MeasureResult> MeasureInChild(const TaskData& task, const std::vector<const BuildResult*>& builds,
                                          const LocalRunnerOptions& options, const LocalRunner::KernelLoader& loader,
                                          const std::function<void()>& progress) {
  const MeasureProtocol& protocol = options.protocol;
  codegen::runtime::SetNumThreads(std::max(1, options.threads));
  std::vector<std::unique_ptr<KernelUnderTest>> kernels;
  for (const BuildResult* build : builds) {
    kernels.push_back(std::make_unique<KernelUnderTest>(task, protocol));
    kernels.back()->Load(*build, loader);
    if (builds.size() > 1) progress();
  }
  // New inputs at addresses a kernel of this process may have packed before (a fork of a
  // process that ran kernels): each kernel's first call below must pack them afresh.
  tune_rt_prepacked_reset();
  std::unique_ptr<char[]> flush;
  if (protocol.flush_cache) flush.reset(new char[LocalRunner::kFlushBytes]);
  int round = 0;
  auto flush_caches = [&] {
    if (!flush) return;
    std::memset(flush.get(), round + 1, LocalRunner::kFlushBytes);
    asm volatile("" : : "r"(flush.get()) : "memory");  // the writes must happen
  };
  const int repeats = std::max(1, protocol.repeats);  // an ok record always has a sample
  const bool interleaved = protocol.interleave && kernels.size() > 1;
  for (auto& k : kernels) {
    k->CheckFirstCall();
    k->Calibrate();
    if (!interleaved) {
      for (round = 0; round < repeats; ++round) k->Sample(0, flush_caches);
    }
    progress();
  }
  if (interleaved) {
    // The other kernels ran since this one's last sample: one untimed call brings its data
    // back into the caches (and its scratch buffers back into the runtime's cache), before
    // the flush where the protocol wants the caches cold.
    for (round = 0; round < repeats; ++round) {
      for (size_t j = 0; j < kernels.size(); ++j) {
        KernelUnderTest& k = *kernels[(j + round) % kernels.size()];
        if (!k.live()) continue;
        k.Sample(1, flush_caches);
        progress();
      }
    }
  }
  std::vector<MeasureResult> results;
  for (auto& k : kernels) results.push_back(k->Finish());
  return results;
}

// The child's results; an exception becomes a runtime_error result for each build (the kernels
// of a group are then measured again one child each, as any that failed).
std::vector<MeasureResult> MeasureGuarded(const TaskData& task, const std::vector<const BuildResult*>& builds,
                                          const LocalRunnerOptions& options, const LocalRunner::KernelLoader& loader,
                                          const std::function<void()>& progress) {
  std::string error;
  try {
    return MeasureInChild(task, builds, options, loader, progress);
  } catch (const std::exception& e) {
    error = absl::StrCat("kernel process threw: ", e.what());
  } catch (...) {
    error = "kernel process threw a non-standard exception";
  }
  std::vector<MeasureResult> results(builds.size());
  for (MeasureResult& r : results) r.message = error;
  return results;
}

// The first byte of a child's message: a step done (the deadline starts again) or the results.
constexpr char kProgressTag = 'p';
constexpr char kResultsTag = 'r';

// Bytes one kernel holds in a measuring child: its inputs, a packed copy of each (prepacked
// weights, bounded by the input's size up to padding) and its output.
size_t KernelBytes(const TaskData& task) {
  size_t floats = task.reference.size();
  for (const std::vector<float>& input : task.inputs) floats += 2 * input.size();
  return floats * sizeof(float);
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
  std::vector<MeasureResult> results(builds.size());
  const std::string task_error = CheckTask(task);
  std::vector<size_t> runnable;
  for (size_t i = 0; i < builds.size(); ++i) {
    MeasureResult& result = results[i];
    result.build_s = builds[i].build_s;
    if (builds[i].status != MeasureStatus::kOk) {
      result.status = builds[i].status;
      result.message = builds[i].message;
    } else if (!task_error.empty()) {
      result.status = MeasureStatus::kRuntimeError;
      result.message = absl::StrCat("bad task data: ", task_error);
    } else {
      runnable.push_back(i);
    }
  }
  // Interleaved: groups of kernels whose buffers fit kInterleaveMaxBytes, in one child each.
  size_t group = 1;
  if (options_.protocol.interleave) {
    group = std::clamp<size_t>(kInterleaveMaxBytes / std::max<size_t>(KernelBytes(task), 1), 1, kMaxInterleaved);
  }
  for (size_t first = 0; first < runnable.size(); first += group) {
    std::vector<const BuildResult*> members;
    for (size_t j = first; j < std::min(runnable.size(), first + group); ++j) members.push_back(&builds[runnable[j]]);
    std::vector<MeasureResult> measured = RunInChild(task, members);
    // A kernel of a group that failed, or whose group's child gave no usable result, is measured
    // again alone: another kernel of its child may have crashed it or written over its buffers,
    // and a failure must be its own.
    for (size_t j = 0; members.size() > 1 && j < members.size(); ++j) {
      if (!measured[j].ok()) measured[j] = RunInChild(task, {members[j]}).at(0);
    }
    for (size_t j = 0; j < members.size(); ++j) results[runnable[first + j]] = std::move(measured[j]);
  }
  for (size_t i = 0; i < builds.size(); ++i) {
    spdlog::debug("local runner: {} {} {}", builds[i].kernel.symbol, StatusName(results[i].status), results[i].message);
  }
  return results;
}

std::vector<MeasureResult> LocalRunner::RunInChild(const TaskData& task,
                                                   const std::vector<const BuildResult*>& builds) const {
  const Clock::time_point start = Clock::now();
  const double timeout_s = std::max(0.0, options_.protocol.timeout_s);
  auto deadline_from = [&](Clock::time_point t) {
    return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  };
  Clock::time_point deadline = deadline_from(start);
  std::vector<MeasureResult> results;
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start([&](ChildProcess::Channel& channel) {
    auto progress = [&] { channel.Send(std::string(1, kProgressTag)); };
    MessageWriter writer;
    writer.Put(kResultsTag).Put(static_cast<uint32_t>(builds.size()));
    for (const MeasureResult& r : MeasureGuarded(task, builds, options_, loader_, progress)) writer.PutResult(r);
    channel.Send(writer.bytes());
    return 0;
  });
  if (!child.ok()) {
    results.resize(builds.size());
    for (MeasureResult& r : results) r.message = std::string(child.status().message());
  } else {
    std::string payload;
    ChildProcess::Read read;
    // Each step the child reports done gives it another timeout_s: a group of kernels is not
    // held to one kernel's limit, and a hang still ends within timeout_s of the last step.
    while ((read = (*child)->Next(deadline, &payload)) == ChildProcess::Read::kMessage &&
           payload.size() == 1 && payload[0] == kProgressTag) {
      deadline = deadline_from(Clock::now());
    }
    ChildExit exit;
    if (read == ChildProcess::Read::kMessage) {
      // The child sends its results right before it exits: allow a grace period past the
      // deadline for the exit itself. A child that then stalls in _exit (and is killed) still
      // measured the kernels.
      exit = (*child)->Wait(std::max(deadline, Clock::now() + std::chrono::seconds(1)));
    } else if (read == ChildProcess::Read::kEnd) {
      exit = (*child)->Wait(deadline);
    } else {
      exit = (*child)->Kill();
    }
    MessageReader reader(payload);
    char tag = 0;
    uint32_t count = 0;
    bool usable = read == ChildProcess::Read::kMessage && exit.kind != ChildExit::Kind::kSignaled &&
                  (exit.kind != ChildExit::Kind::kExited || exit.Clean()) && reader.Get(&tag) &&
                  tag == kResultsTag && reader.Get(&count) && count == builds.size();
    results.resize(builds.size());
    for (size_t i = 0; usable && i < results.size(); ++i) usable = reader.GetResult(&results[i]);
    usable = usable && reader.Done();
    if (!usable) {
      for (MeasureResult& r : results) r = LostResult(read, **child, exit, timeout_s);
    }
  }
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].build_s = builds[i]->build_s;
    results[i].wall_s = wall_s / static_cast<double>(results.size());
  }
  return results;
}

}  // namespace tune::measure
