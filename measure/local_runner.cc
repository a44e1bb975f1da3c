// LocalRunner: fork a child per candidate, check and time the kernel there, report over a pipe.
#include "measure/local_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "measure/reference.h"
#include "spdlog/spdlog.h"

namespace tune::measure {
namespace {

using Clock = std::chrono::steady_clock;

// Wire format of the child's report: magic, payload length, then the payload
// (status i32, number i32, message length u32, message bytes, cost count u32, costs f64).
constexpr uint32_t kMagic = 0x524e5554;             // "TUNR", little-endian
constexpr uint32_t kMaxPayload = uint32_t{1} << 26;  // anything larger is garbage
constexpr size_t kHeaderBytes = 8;

struct ChildReport {
  MeasureStatus status = MeasureStatus::kRuntimeError;
  int32_t number = 0;
  std::string message;
  std::vector<double> costs_s;
};

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
bool Get(const std::string& in, size_t* pos, T* value) {
  if (in.size() - *pos < sizeof(T)) return false;
  std::memcpy(value, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

std::string Encode(const ChildReport& report) {
  std::string payload;
  Put(&payload, static_cast<int32_t>(report.status));
  Put(&payload, report.number);
  Put(&payload, static_cast<uint32_t>(report.message.size()));
  payload.append(report.message);
  Put(&payload, static_cast<uint32_t>(report.costs_s.size()));
  for (double cost : report.costs_s) Put(&payload, cost);
  std::string out;
  Put(&out, kMagic);
  Put(&out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

// Bytes of a complete report, 0 while the header is incomplete, SIZE_MAX for a bad header.
size_t ReportBytes(const std::string& in) {
  if (in.size() < kHeaderBytes) return 0;
  size_t pos = 0;
  uint32_t magic = 0, length = 0;
  Get(in, &pos, &magic);
  Get(in, &pos, &length);
  if (magic != kMagic || length > kMaxPayload) return std::numeric_limits<size_t>::max();
  return kHeaderBytes + length;
}

bool Decode(const std::string& in, ChildReport* report) {
  const size_t total = ReportBytes(in);
  if (total == 0 || total == std::numeric_limits<size_t>::max() || in.size() != total) {
    return false;
  }
  size_t pos = kHeaderBytes;
  int32_t status = 0;
  uint32_t message_size = 0, cost_count = 0;
  if (!Get(in, &pos, &status) || !Get(in, &pos, &report->number)) return false;
  if (status < static_cast<int32_t>(MeasureStatus::kOk) ||
      status > static_cast<int32_t>(MeasureStatus::kWrongResult)) {
    return false;
  }
  report->status = static_cast<MeasureStatus>(status);
  if (!Get(in, &pos, &message_size) || in.size() - pos < message_size) return false;
  report->message.assign(in, pos, message_size);
  pos += message_size;
  if (!Get(in, &pos, &cost_count) || (in.size() - pos) / sizeof(double) < cost_count) {
    return false;
  }
  report->costs_s.resize(cost_count);
  for (double& cost : report->costs_s) Get(in, &pos, &cost);
  return pos == in.size();
}

// ---------------------------------------------------------------------------------------
// Child side.

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

// Writes all of `bytes`, retrying on EINTR and partial writes; false if the parent is gone.
bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void Report(int fd, const ChildReport& report) {
  const bool sent = WriteAll(fd, Encode(report));
  ::close(fd);
  _exit(sent ? 0 : 3);
}

// Makes the child die plainly on a crash and never outlive the parent.
void IsolateChild(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) _exit(4);  // the parent died before prctl took effect
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGPIPE, SIGXCPU}) {
    ::signal(sig, SIG_DFL);
  }
  // Ctrl-C reaches the whole process group: the parent decides (it stops after this
  // measurement), so the candidate is not recorded as crashed by the user's keystroke. The
  // child still dies with the parent (PDEATHSIG) or at its timeout (SIGKILL).
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // crashing candidates are expected; no core files
}

ChildReport MeasureInChild(const TaskData& task, const BuildResult& build,
                           const LocalRunnerOptions& options,
                           const LocalRunner::KernelLoader& loader) {
  const MeasureProtocol& protocol = options.protocol;
  ChildReport report;
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

  const Clock::time_point first_start = Clock::now();
  fn(argv);
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
  return report;
}

[[noreturn]] void ChildMain(int fd, pid_t parent, const TaskData& task, const BuildResult& build,
                            const LocalRunnerOptions& options,
                            const LocalRunner::KernelLoader& loader) {
  IsolateChild(parent);
  ChildReport report;
  try {
    report = MeasureInChild(task, build, options, loader);
  } catch (const std::exception& e) {
    report = ChildReport{};
    report.message = absl::StrCat("kernel process threw: ", e.what());
  } catch (...) {
    report = ChildReport{};
    report.message = "kernel process threw a non-standard exception";
  }
  Report(fd, report);
}

// ---------------------------------------------------------------------------------------
// Parent side.

enum class ReadOutcome { kComplete, kEof, kTimedOut, kError };

// Reads the child's report until it is complete, the pipe closes, or `deadline` passes.
ReadOutcome ReadReport(int fd, Clock::time_point deadline, std::string* bytes,
                       std::string* error) {
  char chunk[1 << 16];
  while (true) {
    const size_t want = ReportBytes(*bytes);
    if (want == std::numeric_limits<size_t>::max()) {
      *error = "malformed result header from kernel process";
      return ReadOutcome::kError;
    }
    if (want != 0 && bytes->size() >= want) return ReadOutcome::kComplete;

    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return ReadOutcome::kTimedOut;
    const int64_t left_ms =
        std::chrono::ceil<std::chrono::milliseconds>(left).count();
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      *error = absl::StrCat("poll: ", std::strerror(errno));
      return ReadOutcome::kError;
    }
    if (ready == 0) continue;  // re-check the deadline
    const size_t cap = want != 0 ? want - bytes->size() : kHeaderBytes - bytes->size();
    const ssize_t n = ::read(fd, chunk, std::min(sizeof(chunk), std::max<size_t>(cap, 1)));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *error = absl::StrCat("read: ", std::strerror(errno));
      return ReadOutcome::kError;
    }
    if (n == 0) return ReadOutcome::kEof;
    bytes->append(chunk, static_cast<size_t>(n));
  }
}

// waitpid with a deadline. Returns true with *wstatus set once reaped; false if the deadline
// passed (the child is still running) or the child cannot be waited for (*gone set).
bool WaitUntil(pid_t pid, Clock::time_point deadline, int* wstatus, bool* gone) {
  auto nap = std::chrono::microseconds(50);
  while (true) {
    const pid_t r = ::waitpid(pid, wstatus, WNOHANG);
    if (r == pid) return true;
    if (r < 0) {
      if (errno == EINTR) continue;
      *gone = true;  // ECHILD: reaped elsewhere (e.g. SIGCHLD ignored)
      return false;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
  }
}

// Kills and reaps the child unconditionally.
void KillAndReap(pid_t pid, int* wstatus) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, wstatus, 0) < 0 && errno == EINTR) {
  }
}

std::string SignalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* description = strsignal(sig);
  return absl::StrCat(abbrev != nullptr ? absl::StrCat("SIG", abbrev) : "unknown signal",
                      " (signal ", sig, description != nullptr ? ": " : "",
                      description != nullptr ? description : "", ")");
}

std::string TimeoutText(double timeout_s) {
  return absl::StrFormat("kernel did not finish within %gs", timeout_s);
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
    LocalRunnerOptions o;
    o.protocol = protocol;
    o.threads = threads;
    return std::make_unique<LocalRunner>(o);
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
  MeasureResult result;
  result.build_s = build.build_s;
  result.status = MeasureStatus::kRuntimeError;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.message = absl::StrCat("pipe: ", std::strerror(errno));
    return result;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const Clock::time_point start = Clock::now();
  const double timeout_s = std::max(0.0, options_.protocol.timeout_s);
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    result.message = absl::StrCat("fork: ", std::strerror(err));
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ChildMain(fds[1], parent, task, build, options_, loader_);
  }
  ::close(fds[1]);

  std::string bytes, read_error;
  const ReadOutcome outcome = ReadReport(fds[0], deadline, &bytes, &read_error);
  ::close(fds[0]);

  int wstatus = 0;
  bool reaped = false, gone = false, killed = false;
  if (outcome == ReadOutcome::kTimedOut || outcome == ReadOutcome::kError) {
    KillAndReap(pid, &wstatus);
    reaped = killed = true;
  } else {
    // The child sends its report right before _exit; after a complete one, allow a grace
    // period past the deadline for the exit itself.
    const Clock::time_point wait_deadline =
        outcome == ReadOutcome::kComplete ? std::max(deadline, Clock::now() + std::chrono::seconds(1))
                                          : deadline;
    reaped = WaitUntil(pid, wait_deadline, &wstatus, &gone);
    if (!reaped && !gone) {
      KillAndReap(pid, &wstatus);
      reaped = killed = true;
    }
  }
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();

  ChildReport report;
  const bool complete = outcome == ReadOutcome::kComplete && Decode(bytes, &report);
  const bool exited_ok = reaped && !killed && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  if (complete && (exited_ok || gone || killed)) {
    // A full report is the measurement; a child that then stalled in _exit is not the
    // kernel's fault.
    result.status = report.status;
    result.message = std::move(report.message);
    result.costs_s = std::move(report.costs_s);
    result.number = report.number;
    return result;
  }
  if (outcome == ReadOutcome::kTimedOut || (killed && outcome == ReadOutcome::kEof)) {
    result.status = MeasureStatus::kTimeout;
    result.message = TimeoutText(timeout_s);
    return result;
  }
  if (outcome == ReadOutcome::kError) {
    result.message = read_error;
    return result;
  }
  if (reaped && WIFSIGNALED(wstatus)) {
    result.message = absl::StrCat("kernel crashed: ", SignalText(WTERMSIG(wstatus)));
  } else if (reaped && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
    result.message = absl::StrCat("kernel process exited with code ", WEXITSTATUS(wstatus),
                                  " without a result");
  } else if (outcome == ReadOutcome::kComplete) {
    result.message = "malformed result from kernel process";
  } else if (bytes.empty()) {
    result.message = "kernel process exited without a result";
  } else {
    result.message = absl::StrCat("kernel process sent an incomplete result (", bytes.size(),
                                  " bytes)");
  }
  return result;
}

}  // namespace tune::measure
