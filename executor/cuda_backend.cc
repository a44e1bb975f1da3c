// The CUDA backend: NVRTC-compiled tuned kernels and built-in kernels, device memory, one lock.
#include "executor/cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/runtime/cuda_driver.h"
#include "executor/cuda_ops.h"
#include "measure/cuda_builder.h"
#include "measure/task_factory.h"

namespace tune::executor {

using codegen::CudaDevice;
using codegen::CudaFunction;
using codegen::CudaModule;
using codegen::DeviceBuffer;

namespace {

codegen::Dim3 Dims(const std::array<int64_t, 3>& d) {
  return codegen::Dim3{static_cast<uint32_t>(d[0]), static_cast<uint32_t>(d[1]), static_cast<uint32_t>(d[2])};
}

// Copies to and from any device address (DeviceBuffer copies only from a buffer's start),
// resolved from the driver CudaDevice has loaded. They need the device's context current on
// the calling thread, which every CudaDevice call leaves so.
using MemcpyHtoD = int (*)(unsigned long long dst, const void* src, size_t bytes);
using MemcpyDtoH = int (*)(void* dst, unsigned long long src, size_t bytes);

// The device name as one line without '|' (as Target::CudaGpu writes it).
std::string KeySafe(const std::string& text) {
  std::vector<std::string> words = absl::StrSplit(text, absl::ByAnyChar(" \t\r\n|"), absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

// Target::CudaGpu's fields from a device this process has opened: its probe runs in a forked
// child, which cannot use the driver once this process has initialized it.
measure::Target TargetOf(const codegen::CudaDeviceInfo& info) {
  measure::Target target;
  target.kind = "cuda";
  target.device = info.ordinal;
  target.device_model = KeySafe(info.name);
  target.cpu = info.Arch();
  target.features = absl::StrCat(info.sm_count, "sm");
  target.toolkit = absl::StrCat("nvrtc-", codegen::NvrtcVersion(), ",driver-", info.driver_version / 1000, ".",
                                (info.driver_version % 1000) / 10);
  target.threads = 1;
  target.max_threads_per_block = info.max_threads_per_block;
  target.max_shared_per_block = info.max_shared_per_block_optin;
  target.registers_per_block = info.regs_per_block;
  target.multiprocessors = info.sm_count;
  target.l2_bytes = info.l2_bytes;
  target.memory_bytes = info.total_memory;
  return target;
}

std::mutex& DriverMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
bool driver_opened = false;                           // guarded by DriverMutex()
std::map<int, measure::Target>* probed_targets = nullptr;  // guarded by DriverMutex()

}  // namespace

/// One built-in kernel: its source, and once compiled its function (and the module that holds it).
struct CudaOpEntry {
  CudaOpSource source;
  std::shared_ptr<const CudaModule> module;
  std::optional<CudaFunction> function;
  absl::Status failed;  // why it could not be compiled, once tried
};

struct CudaBackendState {
  std::mutex mu;  // guards everything below but `arch`
  std::string arch;
  std::unique_ptr<CudaDevice> device;
  MemcpyHtoD htod = nullptr;
  MemcpyDtoH dtoh = nullptr;
  absl::Status error;  // the first failure since the last Synchronize
  std::vector<std::shared_ptr<CudaOpEntry>> pending;  // built-in kernels not compiled yet
  std::mutex compile_mu;  // one built-in program compile at a time; guards `programs`
  std::map<std::string, std::shared_ptr<const CudaModule>> programs;  // by program text

  void FailLocked(const absl::Status& st) {
    if (error.ok() && !st.ok()) error = st;
  }
  void Fail(const absl::Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    FailLocked(st);
  }

  absl::Status CompilePending() {
    std::lock_guard<std::mutex> compile_lock(compile_mu);
    std::vector<std::shared_ptr<CudaOpEntry>> todo;
    {
      std::lock_guard<std::mutex> lock(mu);
      todo.swap(pending);
    }
    if (todo.empty()) return absl::OkStatus();
    std::vector<CudaOpSource> sources;
    for (const auto& e : todo) sources.push_back(e->source);
    const std::string program = CudaOpProgram(sources);
    absl::Status st;
    std::shared_ptr<const CudaModule> module;
    if (auto it = programs.find(program); it != programs.end()) {
      module = it->second;
    } else {
      auto compiled = codegen::CompileCuda(program, arch);
      if (!compiled.ok()) {
        st = absl::InternalError(absl::StrCat("compiling the built-in GPU kernels: ", compiled.status().message()));
      } else {
        std::lock_guard<std::mutex> lock(mu);
        auto loaded = device->LoadModule(compiled->cubin);
        if (!loaded.ok()) {
          st = loaded.status();
        } else {
          module = std::make_shared<const CudaModule>(*std::move(loaded));
          programs[program] = module;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& e : todo) {
      if (!st.ok()) {
        e->failed = st;
        continue;
      }
      auto fn = module->GetFunction(e->source.name);
      if (!fn.ok()) {
        e->failed = fn.status();
        st = fn.status();
        continue;
      }
      e->module = module;
      e->function = *fn;
    }
    return st;
  }
};

namespace {

class CudaOpKernel final : public OpKernel {
 public:
  CudaOpKernel(std::shared_ptr<CudaBackendState> state, std::shared_ptr<CudaOpEntry> entry)
      : state_(std::move(state)), entry_(std::move(entry)), ptrs_(entry_->source.params), args_(ptrs_.size()) {
    for (size_t i = 0; i < ptrs_.size(); ++i) args_[i] = &ptrs_[i];
  }

  void Run(const void* const* inputs, void* const* outputs) const override {
    const CudaOpSource& src = entry_->source;
    if (src.grid[0] == 0) return;  // an empty output
    bool compile = false;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      compile = !entry_->function.has_value() && entry_->failed.ok();
    }
    if (compile) {
      if (absl::Status st = state_->CompilePending(); !st.ok()) state_->Fail(st);
    }
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!entry_->function.has_value()) {
      state_->FailLocked(entry_->failed.ok() ? absl::InternalError("a built-in GPU kernel was not compiled") : entry_->failed);
      return;
    }
    // Parameters: the node's inputs, then its outputs (CudaOpSource's order).
    const size_t n_in = inputs_of_node_;
    for (size_t i = 0; i < ptrs_.size(); ++i) {
      const void* p = i < n_in ? inputs[i] : outputs[i - n_in];
      ptrs_[i] = reinterpret_cast<uint64_t>(p);
    }
    state_->FailLocked(state_->device->Launch(*entry_->function, Dims(src.grid), Dims(src.block), 0, args_));
  }

  size_t inputs_of_node_ = 0;

 private:
  std::shared_ptr<CudaBackendState> state_;
  std::shared_ptr<CudaOpEntry> entry_;
  mutable std::vector<uint64_t> ptrs_;
  std::vector<void*> args_;
};

class CudaTaskKernel final : public TaskKernel {
 public:
  CudaTaskKernel(std::shared_ptr<CudaBackendState> state, CudaModule module, CudaFunction function,
                 codegen::CudaLaunch launch, size_t tensors, std::vector<DeviceBuffer> scratch)
      : state_(std::move(state)),
        module_(std::move(module)),
        function_(std::move(function)),
        launch_(std::move(launch)),
        tensors_(tensors),
        scratch_(std::move(scratch)),
        ptrs_(tensors + scratch_.size()),
        args_(ptrs_.size()) {
    for (size_t i = 0; i < ptrs_.size(); ++i) args_[i] = &ptrs_[i];
    for (size_t i = 0; i < scratch_.size(); ++i) ptrs_[tensors_ + i] = scratch_[i].ptr();
  }
  ~CudaTaskKernel() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    scratch_.clear();
  }

  void Run(float* const* args) const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (size_t i = 0; i < tensors_; ++i) ptrs_[i] = reinterpret_cast<uint64_t>(args[i]);
    state_->FailLocked(
        state_->device->Launch(function_, Dims(launch_.grid), Dims(launch_.block), launch_.shared_bytes, args_));
  }

 private:
  std::shared_ptr<CudaBackendState> state_;
  CudaModule module_;
  CudaFunction function_;
  codegen::CudaLaunch launch_;
  size_t tensors_;
  std::vector<DeviceBuffer> scratch_;
  mutable std::vector<uint64_t> ptrs_;
  std::vector<void*> args_;
};

}  // namespace

absl::StatusOr<int> CudaOrdinal(const std::string& target) {
  const std::string name(absl::StripAsciiWhitespace(target));
  if (name == "cuda") return 0;
  int ordinal = -1;
  if (name.rfind("cuda:", 0) == 0 && absl::SimpleAtoi(name.substr(5), &ordinal) && ordinal >= 0) return ordinal;
  return absl::InvalidArgumentError(absl::StrCat("bad target '", target, "': expected cuda or cuda:N with N >= 0"));
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int ordinal) {
  if (!codegen::NvrtcAvailable()) {
    return absl::UnavailableError("this build has no NVRTC, so it cannot generate CUDA kernels");
  }
  std::lock_guard<std::mutex> driver_lock(DriverMutex());
  if (probed_targets == nullptr) probed_targets = new std::map<int, measure::Target>;
  // The canonical target (Target::CudaGpu, probed in a child) while this process has not
  // opened the driver yet; afterwards the same fields from the opened device.
  std::optional<measure::Target> target;
  if (auto it = probed_targets->find(ordinal); it != probed_targets->end()) {
    target = it->second;
  } else if (!driver_opened) {
    auto probed = measure::Target::CudaGpu(ordinal);
    if (probed.ok()) {
      target = *probed;
      (*probed_targets)[ordinal] = *probed;
    }
  }
  // Without a probed target (the probe fails in a process that initialized the driver
  // itself), the device opened here describes itself.
  auto device = CudaDevice::Open(ordinal);
  if (!device.ok()) return device.status();
  driver_opened = true;
  if (!target.has_value()) {
    target = TargetOf((*device)->info());
    (*probed_targets)[ordinal] = *target;
  }
  auto state = std::make_shared<CudaBackendState>();
  state->arch = (*device)->info().Arch();
  state->device = *std::move(device);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib != nullptr) {
    state->htod = reinterpret_cast<MemcpyHtoD>(dlsym(lib, "cuMemcpyHtoD_v2"));
    state->dtoh = reinterpret_cast<MemcpyDtoH>(dlsym(lib, "cuMemcpyDtoH_v2"));
  }
  if (state->htod == nullptr || state->dtoh == nullptr) {
    return absl::UnavailableError("the CUDA driver has no cuMemcpyHtoD_v2 / cuMemcpyDtoH_v2");
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(*std::move(target), std::move(state)));
}

CudaBackend::CudaBackend(measure::Target target, std::shared_ptr<CudaBackendState> state)
    : target_(std::move(target)), state_(std::move(state)) {}

CudaBackend::~CudaBackend() = default;

const measure::Target& CudaBackend::target() const { return target_; }

absl::StatusOr<std::unique_ptr<codegen::Template>> CudaBackend::MakeTemplate(const codegen::Workload& workload) const {
  return measure::TaskFactory::MakeTemplateFor(target_, workload);
}

absl::StatusOr<std::unique_ptr<TaskKernel>> CudaBackend::LoadTaskKernel(const codegen::Template& tmpl,
                                                                        const search::Config& config) const {
  measure::CudaBuilder builder(state_->arch, 1);
  measure::BuildResult built = builder.Build(tmpl, config);
  if (built.status == measure::MeasureStatus::kInvalidConfig) {
    return absl::InvalidArgumentError(absl::StrCat(tmpl.workload().Label(), ": ", built.message));
  }
  if (built.status != measure::MeasureStatus::kOk) {
    return absl::InternalError(absl::StrCat(tmpl.workload().Label(), ": ", built.message));
  }
  const codegen::CompiledKernel& k = built.kernel;
  std::lock_guard<std::mutex> lock(state_->mu);
  auto module = state_->device->LoadModule(k.object_code);
  if (!module.ok()) return absl::InternalError(absl::StrCat(tmpl.workload().Label(), ": ", module.status().message()));
  auto fn = module->GetFunction(k.symbol);
  if (!fn.ok()) return absl::InternalError(absl::StrCat(tmpl.workload().Label(), ": ", fn.status().message()));
  std::vector<DeviceBuffer> scratch;
  for (const codegen::CudaScratch& sc : k.launch.scratch) {
    auto b = state_->device->Alloc(std::max<int64_t>((sc.bytes + 3) / 4 * 4, 4));
    if (!b.ok()) return b.status();
    if (absl::Status st = b->Fill32(0); !st.ok()) return st;
    scratch.push_back(*std::move(b));
  }
  const size_t tensors = tmpl.workload().Inputs().size() + 1;
  return std::unique_ptr<TaskKernel>(std::make_unique<CudaTaskKernel>(state_, *std::move(module), *std::move(fn),
                                                                      k.launch, tensors, std::move(scratch)));
}

absl::StatusOr<std::unique_ptr<OpKernel>> CudaBackend::CreateOpKernel(const graph::Node& node,
                                                                      const std::vector<const graph::Tensor*>& inputs,
                                                                      const std::vector<const graph::Tensor*>& outputs,
                                                                      int64_t opset) const {
  auto source = MakeCudaOpSource(node, inputs, outputs, opset);
  if (!source.ok()) return source.status();
  auto entry = std::make_shared<CudaOpEntry>();
  entry->source = *std::move(source);
  if (entry->source.grid[0] > 0) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->pending.push_back(entry);
  }
  auto kernel = std::make_unique<CudaOpKernel>(state_, entry);
  kernel->inputs_of_node_ = inputs.size();
  return std::unique_ptr<OpKernel>(std::move(kernel));
}

absl::StatusOr<std::shared_ptr<void>> CudaBackend::Allocate(int64_t bytes) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto buffer = state_->device->Alloc((std::max<int64_t>(bytes, 1) + 255) / 256 * 256);
  if (!buffer.ok()) return buffer.status();
  void* p = reinterpret_cast<void*>(buffer->ptr());
  auto owned = std::make_shared<DeviceBuffer>(*std::move(buffer));
  return std::shared_ptr<void>(p, [owned, state = state_](void*) mutable {
    std::lock_guard<std::mutex> lock(state->mu);
    owned.reset();
  });
}

void CudaBackend::CopyToDevice(void* device_dst, const void* host_src, int64_t bytes) const {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  // Synchronize makes the context current on this thread (and surfaces earlier faults).
  if (absl::Status st = state_->device->Synchronize(); !st.ok()) return state_->FailLocked(st);
  if (int rc = state_->htod(reinterpret_cast<unsigned long long>(device_dst), host_src, static_cast<size_t>(bytes)); rc != 0) {
    state_->FailLocked(absl::InternalError(absl::StrCat("cuMemcpyHtoD_v2 of ", bytes, " bytes failed (CUresult ", rc, ")")));
  }
}

void CudaBackend::CopyToHost(void* host_dst, const void* device_src, int64_t bytes) const {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (absl::Status st = state_->device->Synchronize(); !st.ok()) return state_->FailLocked(st);
  if (int rc = state_->dtoh(host_dst, reinterpret_cast<unsigned long long>(device_src), static_cast<size_t>(bytes)); rc != 0) {
    state_->FailLocked(absl::InternalError(absl::StrCat("cuMemcpyDtoH_v2 of ", bytes, " bytes failed (CUresult ", rc, ")")));
  }
}

absl::Status CudaBackend::CompileOpKernels() const { return state_->CompilePending(); }

absl::Status CudaBackend::Synchronize() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->FailLocked(state_->device->Synchronize());
  absl::Status st = state_->error;
  state_->error = absl::OkStatus();
  return st;
}

}  // namespace tune::executor
