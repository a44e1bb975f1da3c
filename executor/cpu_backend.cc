// The CPU backend: LLVM kernels linked into this process, built-in CPU kernels, host memory.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "codegen/runtime/loaded_kernel.h"
#include "codegen/runtime/runtime.h"
#include "codegen/templates.h"
#include "executor/backend.h"
#include "executor/builtin_ops.h"
#include "executor/cuda_backend.h"
#include "measure/host_builder.h"
#include "measure/task_factory.h"

namespace tune::executor {
namespace {

class LlvmTaskKernel final : public TaskKernel {
 public:
  explicit LlvmTaskKernel(std::unique_ptr<codegen::LoadedKernel> loaded) : loaded_(std::move(loaded)) {}
  void Run(float* const* args) const override { loaded_->fn()(args); }

 private:
  std::unique_ptr<codegen::LoadedKernel> loaded_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : target_(measure::Target::HostCpu(threads)) {}

  const measure::Target& target() const override { return target_; }

  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const override {
    // As the tuner makes it for this target (one copy: measure's llvm task kind): register
    // tiles for its CPU and parallel loops for its thread count, so the default schedule of an
    // untuned task uses the threads.
    return measure::TaskFactory::MakeTemplateFor(target_, workload);
  }

  absl::StatusOr<std::unique_ptr<TaskKernel>> LoadTaskKernel(const codegen::Template& tmpl,
                                                             const search::Config& config) const override {
    measure::HostBuilder builder;
    measure::BuildResult built = builder.Build(tmpl, config);
    if (built.status == measure::MeasureStatus::kInvalidConfig) {
      return absl::InvalidArgumentError(absl::StrCat(tmpl.workload().Label(), ": ", built.message));
    }
    if (built.status != measure::MeasureStatus::kOk) {
      return absl::InternalError(absl::StrCat(tmpl.workload().Label(), ": ", built.message));
    }
    auto loaded = codegen::LoadedKernel::Load(built.kernel);
    if (!loaded.ok()) return loaded.status();
    return std::unique_ptr<TaskKernel>(std::make_unique<LlvmTaskKernel>(*std::move(loaded)));
  }

  absl::StatusOr<std::unique_ptr<OpKernel>> CreateOpKernel(const graph::Node& node,
                                                           const std::vector<const graph::Tensor*>& inputs,
                                                           const std::vector<const graph::Tensor*>& outputs,
                                                           int64_t opset) const override {
    return CreateBuiltinKernel(node, inputs, outputs, opset);
  }

  absl::StatusOr<std::shared_ptr<void>> Allocate(int64_t bytes) const override {
    const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 64) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
    return std::shared_ptr<void>(p, std::free);
  }
  void CopyToDevice(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }

 private:
  measure::Target target_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& target, int threads) {
  if (target == "cuda" || target.rfind("cuda:", 0) == 0) {
    auto ordinal = CudaOrdinal(target);
    if (!ordinal.ok()) return ordinal.status();
    auto backend = CudaBackend::Create(*ordinal);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<Backend>(*std::move(backend));
  }
  if (target != "llvm") return absl::InvalidArgumentError("unknown target '" + target + "' (use --target llvm)");
  codegen::runtime::SetNumThreads(std::max(1, threads));
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(std::max(1, threads)));
}

}  // namespace tune::executor
