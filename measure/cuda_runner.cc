// CudaRunner: a worker ChildProcess measures CUDA builds; the parent reads their results with deadlines.
#include "measure/cuda_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/nvrtc.h"
#include "measure/child_message.h"
#include "measure/child_process.h"
#include "measure/cuda_reference.h"
#include "measure/device_lock.h"
#include "measure/reference.h"

namespace tune::measure {
namespace {

using Clock = std::chrono::steady_clock;
using codegen::CudaDevice;
using codegen::DeviceBuffer;
using codegen::Dim3;

constexpr int kFatalExit = 2;   // the device could not be set up (after a kFatal message)
constexpr int kStickyExit = 3;  // after the result of a build that lost the context
constexpr double kSetupAllowanceS = 120;  // device open, upload and the reference kernel
constexpr double kExitGraceS = 10;        // for a worker's exit after its last message
// How long a worker waits for its GPU's lock (DeviceLock) before it gives up on the device:
// another process measuring on the same GPU holds it for one build at a time.
constexpr double kLockWaitS = 600;
constexpr int kMaxNumber = 1 << 16;
constexpr uint32_t kNanPattern = 0x7fc00000u;

// Messages from the worker: a kind (i32), then its payload.
// kStarted: the worker holds the GPU's lock and runs build i now (its timeout starts).
constexpr int32_t kResult = 1, kReference = 2, kFatal = 3, kStarted = 4;

// ---- The worker (child) ------------------------------------------------------------------

// Sends one message of `kind` to the parent.
void Send(ChildProcess::Channel& channel, int32_t kind, const MessageWriter& payload) {
  channel.Send(MessageWriter().Put(kind).bytes() + payload.bytes());
}

struct Worker {
  Worker(const TaskData& task, const CudaRunnerOptions& options, ChildProcess::Channel& channel)
      : task(task), options(options), channel(channel) {}

  const TaskData& task;
  const CudaRunnerOptions& options;
  ChildProcess::Channel& channel;
  std::unique_ptr<CudaDevice> device;
  std::optional<DeviceLock> lock;  // the GPU's, held while kernels run
  std::vector<DeviceBuffer> buffers;  // inputs, then the output
  std::vector<float> reference;
  std::unique_ptr<DeviceBuffer> flush;
  int64_t out_size = 0;

  [[noreturn]] void Fatal(const std::string& why) {
    Send(channel, kFatal, MessageWriter().PutString(why));
    ::_exit(kFatalExit);
  }

  void Setup(const std::vector<float>* known_reference) {
    auto dev = CudaDevice::Open(options.device);
    if (!dev.ok()) Fatal(absl::StrCat("cannot open CUDA device ", options.device, ": ", dev.status().ToString()));
    device = std::move(*dev);
    auto opened = DeviceLock::Open(DeviceLock::PathFor(device->info().pci_bus_id));
    if (!opened.ok()) Fatal(std::string(opened.status().message()));
    lock.emplace(std::move(*opened));
    if (auto st = lock->Acquire(kLockWaitS); !st.ok()) Fatal(std::string(st.message()));
    DeviceLockRelease unlock(*lock);
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
    Send(channel, kReference, MessageWriter().PutFloats(reference));
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

  // Measures build `index`; sets *sticky when the context is lost. Loads its module first, then
  // takes the GPU's lock (and says so: kStarted) for everything that runs on the device.
  MeasureResult Measure(const BuildResult& build, uint64_t index, bool* sticky) {
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
    if (auto st = lock->Acquire(kLockWaitS); !st.ok()) Fatal(std::string(st.message()));
    DeviceLockRelease unlock(*lock);
    Send(channel, kStarted, MessageWriter().Put(index));
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
    // The first launch runs cold (the module's code loaded, fresh memory touched): the cutoff
    // judges the second, the first warm-up launch, timed.
    const double first_s = *first / 1e3;
    int warmups_done = 0;
    if (p.cutoff_s > 0) {
      auto warm = launch_n(1);
      if (!warm.ok()) return fail(MeasureStatus::kRuntimeError, "warm-up", warm.status());
      warmups_done = 1;
      const double warm_s = *warm / 1e3;
      if (warm_s > p.cutoff_s) {
        r.status = MeasureStatus::kOk;
        r.costs_s = {warm_s};
        r.number = 1;
        r.message = CutOffMessage(first_s, warm_s, p.cutoff_s);
        return r;
      }
    }
    for (int i = warmups_done; i < p.warmup; ++i) {
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

// The worker's body: sets up the device, then measures builds[order[...]] one by one and
// sends a result per build; exits kStickyExit after a build that lost the context.
int WorkerMain(ChildProcess::Channel& channel, const TaskData& task, const std::vector<BuildResult>& builds,
               const std::vector<size_t>& order, const std::vector<float>* known_reference,
               const CudaRunnerOptions& options) {
  Worker w(task, options, channel);
  w.Setup(known_reference);
  for (size_t i : order) {
    bool sticky = false;
    const MeasureResult r = w.Measure(builds[i], static_cast<uint64_t>(i), &sticky);
    Send(channel, kResult, MessageWriter().Put(static_cast<uint64_t>(i)).PutResult(r));
    if (sticky) return kStickyExit;
  }
  return 0;
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

RunnerFactory CudaRunner::Factory(int device) {
  return [device](const MeasureProtocol& protocol) -> std::unique_ptr<Runner> {
    return std::make_unique<CudaRunner>(CudaRunnerOptions{protocol, device});
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
  const double timeout_s = options_.protocol.timeout_s;
  while (!pending.empty()) {
    // The reference computed by an earlier child of this batch or an earlier batch of the task.
    const std::vector<float>* known = task.device_reference.empty() ? nullptr : &task.device_reference;
    const std::vector<size_t> order(pending.begin(), pending.end());
    Clock::time_point build_start = Clock::now();
    absl::StatusOr<std::unique_ptr<ChildProcess>> worker = ChildProcess::Start(
        [&](ChildProcess::Channel& channel) { return WorkerMain(channel, task, builds, order, known, options_); });
    if (!worker.ok()) {
      for (size_t i : pending) results[i].message = std::string(worker.status().message());
      break;
    }
    ChildProcess& child = **worker;
    const size_t pending_before = pending.size();
    // Until a build has started (its kStarted), the worker may be waiting for the GPU's lock.
    Clock::time_point deadline = build_start + Seconds(kSetupAllowanceS + kLockWaitS + timeout_s);
    ChildProcess::Read read = ChildProcess::Read::kMessage;
    bool fatal = false, garbage = false;
    std::string fatal_message;
    while (!pending.empty() && !fatal && !garbage) {
      std::string payload;
      read = child.Next(deadline, &payload);
      if (read != ChildProcess::Read::kMessage) break;
      MessageReader reader(payload);
      int32_t kind = 0;
      uint64_t index = 0;
      MeasureResult r;
      std::vector<float> reference;
      if (reader.Get(&kind) && kind == kFatal && reader.GetString(&fatal_message) && reader.Done()) {
        fatal = true;
      } else if (kind == kReference && reader.GetFloats(&reference) && reader.Done()) {
        task.device_reference = std::move(reference);
      } else if (kind == kStarted && reader.Get(&index) && reader.Done() && index == pending.front()) {
        deadline = Clock::now() + Seconds(timeout_s);
        continue;  // the build's time so far (loading, waiting for the lock) stays in its wall_s
      } else if (kind == kResult && reader.Get(&index) && reader.GetResult(&r) && reader.Done() &&
                 index == pending.front()) {
        r.build_s = builds[index].build_s;
        r.wall_s = std::chrono::duration<double>(Clock::now() - build_start).count();
        results[index] = std::move(r);
        pending.pop_front();
      } else {
        garbage = true;  // a worker that broke the protocol is treated like a dead one
      }
      build_start = Clock::now();
      deadline = build_start + Seconds(kLockWaitS + timeout_s);
    }
    if (fatal) {  // the device is unusable for every build
      child.Wait(Clock::now() + Seconds(kExitGraceS));
      for (size_t i : pending) results[i].message = fatal_message;
      break;
    }
    if (pending.empty()) {
      child.Wait(Clock::now() + Seconds(kExitGraceS));
      break;
    }
    // The worker gave no result for the build it was on: a timeout, a crash, garbage, or the
    // exit after a sticky error it did report (then the next worker starts on the next build).
    const ChildExit exit = read == ChildProcess::Read::kEnd ? child.Wait(deadline) : child.Kill();
    if (read == ChildProcess::Read::kEnd && exit.kind == ChildExit::Kind::kExited && exit.code == kStickyExit &&
        pending.size() < pending_before) {
      continue;
    }
    const size_t lost = pending.front();
    pending.pop_front();
    results[lost] = LostResult(read, child, exit, timeout_s);
    results[lost].build_s = builds[lost].build_s;
    results[lost].wall_s = std::chrono::duration<double>(Clock::now() - build_start).count();
  }
  return results;
}

absl::StatusOr<codegen::CudaDeviceInfo> CudaRunner::Probe(int device) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> probe = ChildProcess::Start([device](ChildProcess::Channel& channel) {
    absl::StatusOr<std::unique_ptr<CudaDevice>> dev = CudaDevice::Open(device);
    if (!dev.ok()) {
      Send(channel, kFatal, MessageWriter().PutString(std::string(dev.status().message())));
      return kFatalExit;
    }
    const codegen::CudaDeviceInfo& i = (*dev)->info();
    MessageWriter payload;
    payload.PutString(i.name);
    for (int64_t v : {int64_t{i.sm_count}, int64_t{i.cc_major}, int64_t{i.cc_minor}, int64_t{i.driver_version},
                      i.total_memory, int64_t{i.max_threads_per_block}, i.max_shared_per_block_optin,
                      int64_t{i.regs_per_block}, i.l2_bytes, int64_t{i.clock_khz}}) {
      payload.Put(v);
    }
    payload.PutString(i.pci_bus_id);
    Send(channel, kResult, payload);
    return 0;
  });
  if (!probe.ok()) return probe.status();
  std::string payload;
  const ChildProcess::Read read = (*probe)->Next(Clock::now() + Seconds(kSetupAllowanceS), &payload);
  if (read == ChildProcess::Read::kMessage) {
    (*probe)->Wait(Clock::now() + Seconds(kExitGraceS));
  } else {
    (*probe)->Kill();
  }
  if (read != ChildProcess::Read::kMessage) return absl::UnavailableError("the CUDA probe process gave no answer");
  MessageReader reader(payload);
  int32_t kind = 0;
  std::string error;
  if (reader.Get(&kind) && kind == kFatal && reader.GetString(&error)) return absl::UnavailableError(error);
  codegen::CudaDeviceInfo info;
  int64_t v[10];
  if (kind != kResult || !reader.GetString(&info.name)) return absl::InternalError("malformed probe answer");
  for (int64_t& x : v) {
    if (!reader.Get(&x)) return absl::InternalError("malformed probe answer");
  }
  if (!reader.GetString(&info.pci_bus_id)) return absl::InternalError("malformed probe answer");
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
