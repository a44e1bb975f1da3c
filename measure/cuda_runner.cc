// CudaRunner: a forked worker measures CUDA builds; the parent reads results with deadlines.
#include "measure/cuda_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/nvrtc.h"
#include "measure/cuda_reference.h"
#include "measure/reference.h"

namespace tune::measure {
namespace {

using Clock = std::chrono::steady_clock;
using codegen::CudaDevice;
using codegen::DeviceBuffer;
using codegen::Dim3;

constexpr uint32_t kMagic = 0x41444354;  // "TCDA"
constexpr int32_t kResult = 1, kReference = 2, kFatal = 3;
constexpr int kStickyExit = 3;
constexpr double kSetupAllowanceS = 120;  // device open, upload and the reference kernel
constexpr int kMaxNumber = 1 << 16;
constexpr uint32_t kNanPattern = 0x7fc00000u;

// ---- Wire format: magic u32, kind i32, payload length u64, payload ---------------------------

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutString(std::string* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}
template <typename T>
bool Get(const std::string& in, size_t* pos, T* v) {
  if (in.size() - *pos < sizeof(T)) return false;
  std::memcpy(v, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}
bool GetString(const std::string& in, size_t* pos, std::string* s) {
  uint64_t n;
  if (!Get(in, pos, &n) || in.size() - *pos < n) return false;
  s->assign(in.data() + *pos, n);
  *pos += n;
  return true;
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void Send(int fd, int32_t kind, const std::string& payload) {
  std::string msg;
  Put(&msg, kMagic);
  Put(&msg, kind);
  Put<uint64_t>(&msg, payload.size());
  msg += payload;
  if (!WriteAll(fd, msg)) ::_exit(4);  // the parent is gone
}

// ---- The worker (child) ------------------------------------------------------------------

struct Worker {
  const TaskData& task;
  const CudaRunnerOptions& options;
  int fd;
  std::unique_ptr<CudaDevice> device;
  std::vector<DeviceBuffer> buffers;  // inputs, then the output
  std::vector<float> reference;
  std::unique_ptr<DeviceBuffer> flush;
  int64_t out_size = 0;

  [[noreturn]] void Fatal(const std::string& why) {
    Send(fd, kFatal, why);
    ::_exit(2);
  }

  void Setup(const std::vector<float>* known_reference) {
    auto dev = CudaDevice::Open(options.device);
    if (!dev.ok()) Fatal(absl::StrCat("cannot open CUDA device ", options.device, ": ", dev.status().ToString()));
    device = std::move(*dev);
    for (const std::vector<float>& input : task.inputs) {
      auto b = device->Alloc(static_cast<int64_t>(input.size() * sizeof(float)));
      if (!b.ok()) Fatal("allocating an input: " + b.status().ToString());
      if (auto st = b->CopyFromHost(input.data()); !st.ok()) Fatal("uploading an input: " + st.ToString());
      buffers.push_back(std::move(*b));
    }
    out_size = task.workload.Output().NumElements();
    auto out = device->Alloc(out_size * static_cast<int64_t>(sizeof(float)));
    if (!out.ok()) Fatal("allocating the output: " + out.status().ToString());
    buffers.push_back(std::move(*out));
    if (options.protocol.flush_cache) {
      auto f = device->Alloc(std::max<int64_t>(2 * device->info().l2_bytes, int64_t{1} << 20));
      if (!f.ok()) Fatal("allocating the cache-flush buffer: " + f.status().ToString());
      flush = std::make_unique<DeviceBuffer>(std::move(*f));
    }
    if (known_reference != nullptr) {
      reference = *known_reference;
      return;
    }
    // The reference output, from the naive kernel on this device.
    CudaReferenceKernel ref = MakeCudaReference(task.workload);
    auto compiled = codegen::CompileCuda(ref.source, device->info().Arch());
    if (!compiled.ok()) Fatal("compiling the reference kernel: " + compiled.status().ToString());
    auto module = device->LoadModule(compiled->cubin);
    if (!module.ok()) Fatal("loading the reference kernel: " + module.status().ToString());
    auto fn = module->GetFunction(ref.name);
    if (!fn.ok()) Fatal(fn.status().ToString());
    std::vector<void*> args = Args();
    absl::Status st = device->Launch(*fn, Dims(ref.grid), Dims(ref.block), 0, args);
    if (st.ok()) st = device->Synchronize();
    if (!st.ok()) Fatal("running the reference kernel: " + st.ToString());
    reference.resize(out_size);
    if (auto c = buffers.back().CopyToHost(reference.data()); !c.ok()) Fatal("reading the reference: " + c.ToString());
    std::string payload;
    Put<uint64_t>(&payload, reference.size());
    payload.append(reinterpret_cast<const char*>(reference.data()), reference.size() * sizeof(float));
    Send(fd, kReference, payload);
  }

  static Dim3 Dims(const std::array<int64_t, 3>& d) {
    return Dim3{static_cast<uint32_t>(d[0]), static_cast<uint32_t>(d[1]), static_cast<uint32_t>(d[2])};
  }

  // Kernel parameters: one device pointer per buffer, then one per scratch buffer of the
  // kernel. The pointers live in `ptrs_`.
  std::vector<void*> Args(const std::vector<DeviceBuffer>& scratch = {}) {
    ptrs_.clear();
    for (const DeviceBuffer& b : buffers) ptrs_.push_back(b.ptr());
    for (const DeviceBuffer& b : scratch) ptrs_.push_back(b.ptr());
    std::vector<void*> args;
    for (uint64_t& p : ptrs_) args.push_back(&p);
    return args;
  }
  std::vector<uint64_t> ptrs_;

  // Compares the device output with the reference; empty when close.
  std::string Check() {
    std::vector<float> got(out_size);
    if (auto st = buffers.back().CopyToHost(got.data()); !st.ok()) return "reading the output: " + st.ToString();
    std::string why;
    if (!AllClose(got.data(), reference.data(), out_size, options.protocol.rtol, options.protocol.atol, &why)) {
      return why.empty() ? std::string("mismatch") : why;
    }
    return "";
  }

  // Measures one build; sets *sticky when the context is lost.
  MeasureResult Measure(const BuildResult& build, bool* sticky) {
    MeasureResult r;
    const codegen::CompiledKernel& k = build.kernel;
    const MeasureProtocol& p = options.protocol;
    auto fail = [&](MeasureStatus status, const std::string& what, const absl::Status& st) {
      r.status = status;
      r.message = what + ": " + st.ToString();
      *sticky = codegen::IsStickyCudaError(st);
      return r;
    };
    auto module = device->LoadModule(k.object_code);
    if (!module.ok()) return fail(MeasureStatus::kCompileError, "loading the cubin", module.status());
    auto fn = module->GetFunction(k.symbol);
    if (!fn.ok()) return fail(MeasureStatus::kCompileError, "finding the kernel", fn.status());
    // The kernel's scratch memory, allocated for this build and kept across all its launches
    // (a kernel that leaves its counters dirty fails the check after the repeated launches).
    std::vector<DeviceBuffer> scratch;
    for (const codegen::CudaScratch& sc : k.launch.scratch) {
      auto b = device->Alloc(std::max<int64_t>(sc.bytes, 4));
      if (!b.ok()) return fail(MeasureStatus::kRuntimeError, "allocating scratch memory", b.status());
      if (auto st = b->Fill32(sc.zero_init ? 0u : kNanPattern); !st.ok()) {
        return fail(MeasureStatus::kRuntimeError, "initializing scratch memory", st);
      }
      scratch.push_back(std::move(*b));
    }
    std::vector<void*> args = Args(scratch);
    const Dim3 grid = Dims(k.launch.grid), block = Dims(k.launch.block);
    auto launch_n = [&](int n) {
      return device->TimeMs([&]() -> absl::Status {
        for (int i = 0; i < n; ++i) {
          if (auto st = device->Launch(*fn, grid, block, k.launch.shared_bytes, args); !st.ok()) return st;
        }
        return absl::OkStatus();
      });
    };
    if (auto st = buffers.back().Fill32(kNanPattern); !st.ok()) return fail(MeasureStatus::kRuntimeError, "poisoning the output", st);
    auto first = launch_n(1);
    if (first.ok()) {
      if (auto st = device->Synchronize(); !st.ok()) first = st;
    }
    if (!first.ok()) return fail(MeasureStatus::kRuntimeError, "first launch", first.status());
    if (std::string why = Check(); !why.empty()) {
      r.status = MeasureStatus::kWrongResult;
      r.message = "output differs from reference: " + why;
      return r;
    }
    const double first_s = *first / 1e3;
    if (p.cutoff_s > 0 && first_s > p.cutoff_s) {
      r.status = MeasureStatus::kOk;
      r.costs_s = {first_s};
      r.number = 1;
      r.message = absl::StrCat("timing cut off after the first call (", first_s, " s > ", p.cutoff_s, " s)");
      return r;
    }
    for (int i = 0; i < p.warmup; ++i) {
      if (auto w = launch_n(1); !w.ok()) return fail(MeasureStatus::kRuntimeError, "warm-up", w.status());
    }
    int number = 1;
    while (number < kMaxNumber) {
      auto t = launch_n(number);
      if (!t.ok()) return fail(MeasureStatus::kRuntimeError, "timing", t.status());
      if (*t >= p.min_repeat_ms) break;
      number *= 2;
    }
    for (int rep = 0; rep < std::max(1, p.repeats); ++rep) {
      if (flush) {
        if (auto st = flush->Fill32(static_cast<uint32_t>(rep + 1)); !st.ok()) {
          return fail(MeasureStatus::kRuntimeError, "flushing the cache", st);
        }
      }
      auto t = launch_n(number);
      if (!t.ok()) return fail(MeasureStatus::kRuntimeError, "timing", t.status());
      r.costs_s.push_back(*t / 1e3 / number);
    }
    r.number = number;
    // One more launch on a poisoned output: what the repeated launches leave behind (scratch
    // memory, counters) must not change what a launch computes.
    if (auto st = buffers.back().Fill32(kNanPattern); !st.ok()) {
      return fail(MeasureStatus::kRuntimeError, "poisoning the output", st);
    }
    auto last = launch_n(1);
    if (last.ok()) {
      if (auto st = device->Synchronize(); !st.ok()) last = st;
    }
    if (!last.ok()) return fail(MeasureStatus::kRuntimeError, "last launch", last.status());
    if (std::string why = Check(); !why.empty()) {
      r.costs_s.clear();
      r.status = MeasureStatus::kWrongResult;
      r.message = "output differs from reference after repeated launches: " + why;
      return r;
    }
    r.status = MeasureStatus::kOk;
    return r;
  }
};

[[noreturn]] void WorkerMain(int fd, pid_t parent, const TaskData& task, const std::vector<BuildResult>& builds,
                             const std::vector<size_t>& order, const std::vector<float>* known_reference,
                             const CudaRunnerOptions& options) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(5);
  ::signal(SIGINT, SIG_IGN);  // the parent decides on Ctrl-C; see LocalRunner's IsolateChild
  ::signal(SIGTERM, SIG_IGN);
  Worker w{task, options, fd};
  w.Setup(known_reference);
  for (size_t i : order) {
    bool sticky = false;
    MeasureResult r = w.Measure(builds[i], &sticky);
    std::string payload;
    Put<int32_t>(&payload, static_cast<int32_t>(i));
    Put<int32_t>(&payload, static_cast<int32_t>(r.status));
    Put<int32_t>(&payload, r.number);
    PutString(&payload, r.message);
    Put<uint64_t>(&payload, r.costs_s.size());
    for (double c : r.costs_s) Put(&payload, c);
    Send(fd, kResult, payload);
    if (sticky) ::_exit(kStickyExit);
  }
  ::_exit(0);
}

// ---- The parent ----------------------------------------------------------------------------

// Reads whole messages from the worker's pipe.
class MessageReader {
 public:
  explicit MessageReader(int fd) : fd_(fd) {}
  enum Outcome { kMessage, kEof, kTimedOut, kError };
  Outcome Next(Clock::time_point deadline, int32_t* kind, std::string* payload) {
    while (true) {
      if (buf_.size() >= 16) {
        uint32_t magic;
        uint64_t len;
        std::memcpy(&magic, buf_.data(), 4);
        std::memcpy(kind, buf_.data() + 4, 4);
        std::memcpy(&len, buf_.data() + 8, 8);
        if (magic != kMagic) return kError;
        if (buf_.size() >= 16 + len) {
          payload->assign(buf_.data() + 16, len);
          buf_.erase(0, 16 + len);
          return kMessage;
        }
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return kTimedOut;
      pollfd pfd{fd_, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return kError;
      if (ready == 0) continue;
      char chunk[1 << 16];
      const ssize_t n = ::read(fd_, chunk, sizeof(chunk));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return kError;
      if (n == 0) return kEof;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buf_;
};

std::string ExitText(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(wstatus));
    return absl::StrCat("killed by SIG", abbrev != nullptr ? abbrev : "?");
  }
  if (WIFEXITED(wstatus)) return absl::StrCat("exit code ", WEXITSTATUS(wstatus));
  return "ended";
}

}  // namespace

RunnerFactory CudaRunner::Factory(int device) {
  return [device](const MeasureProtocol& protocol) -> std::unique_ptr<Runner> {
    CudaRunnerOptions o;
    o.protocol = protocol;
    o.device = device;
    return std::make_unique<CudaRunner>(o);
  };
}

std::vector<MeasureResult> CudaRunner::Run(const TaskData& task, const std::vector<BuildResult>& builds) {
  std::vector<MeasureResult> results(builds.size());
  std::deque<size_t> pending;
  for (size_t i = 0; i < builds.size(); ++i) {
    results[i].build_s = builds[i].build_s;
    if (builds[i].status != MeasureStatus::kOk) {
      results[i].status = builds[i].status;
      results[i].message = builds[i].message;
    } else if (!builds[i].kernel.cuda) {
      results[i].status = MeasureStatus::kRuntimeError;
      results[i].message = "not a CUDA build (the CUDA runner measures cubins only)";
    } else {
      pending.push_back(i);
    }
  }
  const std::string key = task.workload.Key();
  const double timeout_s = options_.protocol.timeout_s;
  while (!pending.empty()) {
    int fds[2];
    if (::pipe(fds) != 0) {
      for (size_t i : pending) results[i].message = absl::StrCat("pipe: ", std::strerror(errno));
      break;
    }
    auto it = references_.find(key);
    const std::vector<float>* known = it == references_.end() ? nullptr : &it->second;
    std::vector<size_t> order(pending.begin(), pending.end());
    const pid_t parent = ::getpid();
    const Clock::time_point started = Clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      WorkerMain(fds[1], parent, task, builds, order, known, options_);
    }
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      for (size_t i : pending) results[i].message = absl::StrCat("fork: ", std::strerror(errno));
      break;
    }
    MessageReader reader(fds[0]);
    Clock::time_point deadline = started + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(kSetupAllowanceS + timeout_s));
    Clock::time_point build_start = started;
    std::string fatal;
    bool killed = false;
    while (!pending.empty()) {
      int32_t kind;
      std::string payload;
      MessageReader::Outcome o = reader.Next(deadline, &kind, &payload);
      if (o == MessageReader::kTimedOut) {
        ::kill(pid, SIGKILL);
        killed = true;
        MeasureResult& r = results[pending.front()];
        r.status = MeasureStatus::kTimeout;
        r.message = absl::StrCat("kernel did not finish within ", timeout_s, "s");
        r.wall_s = std::chrono::duration<double>(Clock::now() - build_start).count();
        pending.pop_front();
        break;
      }
      if (o != MessageReader::kMessage) break;
      size_t pos = 0;
      if (kind == kFatal) {
        fatal = payload;
        break;
      }
      if (kind == kReference) {
        uint64_t n;
        if (Get(payload, &pos, &n) && payload.size() - pos == n * sizeof(float)) {
          std::vector<float>& ref = references_[key];
          ref.resize(n);
          std::memcpy(ref.data(), payload.data() + pos, n * sizeof(float));
        }
      } else if (kind == kResult) {
        int32_t index, status, number;
        uint64_t count;
        MeasureResult r;
        if (!Get(payload, &pos, &index) || !Get(payload, &pos, &status) || !Get(payload, &pos, &number) ||
            !GetString(payload, &pos, &r.message) || !Get(payload, &pos, &count) || index < 0 ||
            static_cast<size_t>(index) >= builds.size() || pending.empty() ||
            pending.front() != static_cast<size_t>(index)) {
          break;  // garbage: treat like a dead worker
        }
        for (uint64_t c = 0; c < count; ++c) {
          double v;
          if (!Get(payload, &pos, &v)) break;
          r.costs_s.push_back(v);
        }
        r.status = static_cast<MeasureStatus>(status);
        r.number = number;
        r.build_s = builds[index].build_s;
        r.wall_s = std::chrono::duration<double>(Clock::now() - build_start).count();
        results[index] = std::move(r);
        pending.pop_front();
      }
      build_start = Clock::now();
      deadline = build_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    }
    ::close(fds[0]);
    int wstatus = 0;
    if (!killed && !pending.empty()) ::kill(pid, SIGKILL);  // a worker that broke the protocol
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!fatal.empty()) {  // the device is unusable for every build
      for (size_t i : pending) {
        results[i].status = MeasureStatus::kRuntimeError;
        results[i].message = fatal;
      }
      break;
    }
    const bool reported_sticky = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kStickyExit;
    if (!killed && !reported_sticky && !pending.empty()) {  // died without reporting the build it was on
      MeasureResult& r = results[pending.front()];
      r.status = MeasureStatus::kRuntimeError;
      r.message = "kernel process died: " + ExitText(wstatus);
      pending.pop_front();
    }
  }
  return results;
}

absl::StatusOr<codegen::CudaDeviceInfo> CudaRunner::Probe(int device) {
  int fds[2];
  if (::pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    auto dev = CudaDevice::Open(device);
    std::string payload;
    if (!dev.ok()) {
      Send(fds[1], kFatal, dev.status().ToString());
      ::_exit(2);
    }
    const codegen::CudaDeviceInfo& i = (*dev)->info();
    PutString(&payload, i.name);
    for (int64_t v : {int64_t{i.sm_count}, int64_t{i.cc_major}, int64_t{i.cc_minor}, int64_t{i.driver_version},
                      i.total_memory, int64_t{i.max_threads_per_block}, i.max_shared_per_block_optin,
                      int64_t{i.regs_per_block}, i.l2_bytes, int64_t{i.clock_khz}}) {
      Put(&payload, v);
    }
    Send(fds[1], kResult, payload);
    ::_exit(0);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  MessageReader reader(fds[0]);
  int32_t kind = 0;
  std::string payload;
  auto outcome = reader.Next(Clock::now() + std::chrono::seconds(120), &kind, &payload);
  ::close(fds[0]);
  if (outcome == MessageReader::kTimedOut) ::kill(pid, SIGKILL);
  int wstatus;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (outcome != MessageReader::kMessage) return absl::UnavailableError("the CUDA probe process gave no answer");
  if (kind == kFatal) return absl::UnavailableError(payload);
  codegen::CudaDeviceInfo info;
  size_t pos = 0;
  int64_t v[10];
  if (!GetString(payload, &pos, &info.name)) return absl::InternalError("malformed probe answer");
  for (int64_t& x : v) {
    if (!Get(payload, &pos, &x)) return absl::InternalError("malformed probe answer");
  }
  info.ordinal = device;
  info.sm_count = static_cast<int>(v[0]);
  info.cc_major = static_cast<int>(v[1]);
  info.cc_minor = static_cast<int>(v[2]);
  info.driver_version = static_cast<int>(v[3]);
  info.total_memory = v[4];
  info.max_threads_per_block = static_cast<int>(v[5]);
  info.max_shared_per_block_optin = v[6];
  info.regs_per_block = static_cast<int>(v[7]);
  info.l2_bytes = v[8];
  info.clock_khz = static_cast<int>(v[9]);
  return info;
}

}  // namespace tune::measure
