// TaskFactory: the kinds of target a task can be made for, registered by name.
#include "measure/task_factory.h"

#include "codegen/templates.h"

#include <algorithm>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/cuda/cuda_codegen.h"
#include "measure/cuda_builder.h"
#include "measure/cuda_runner.h"
#include "measure/host_builder.h"
#include "measure/kernel_task.h"
#include "measure/local_runner.h"
#include "measure/replay_task.h"

namespace tune::measure {
namespace {

int HostCores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

/// What differs between kernel kinds.
struct KernelKind {
  /// The template of a workload for the target.
  std::function<absl::StatusOr<std::unique_ptr<codegen::Template>>(const codegen::Workload&, const Target&)> tmpl;
  std::function<std::unique_ptr<Builder>(const Target&, int threads)> builder;
  std::function<RunnerFactory(const Target&)> runners;
  int default_build_threads = 2;
  /// The readable source of a lowered kernel.
  std::function<absl::StatusOr<std::string>(const codegen::LoweredFunc&)> source;
  /// Whether task data carries the naive host reference (false: the runner computes its own).
  bool host_reference = true;
};

class KernelTaskFactory final : public TaskFactory {
 public:
  KernelTaskFactory(Target target, KernelKind kind, TaskFactoryOptions options)
      : TaskFactory(std::move(target)),
        kind_(std::move(kind)),
        measurer_(std::move(options.measurer)),
        should_stop_(std::move(options.should_stop)) {
    if (measurer_ == nullptr) {
      int threads = options.build_threads > 0 ? options.build_threads : kind_.default_build_threads;
      RunnerFactory runners = options.runners ? std::move(options.runners) : kind_.runners(this->target());
      measurer_ = std::make_shared<LocalMeasurer>(kind_.builder(this->target(), threads), std::move(runners));
    }
  }

  absl::StatusOr<std::unique_ptr<Task>> Make(const TaskSpec& spec) const override {
    auto tmpl = MakeTemplate(spec.workload);
    if (!tmpl.ok()) return tmpl.status();
    auto def = (*tmpl)->ValidDefaultConfig();
    if (!def.ok()) return def.status();
    return std::unique_ptr<Task>(std::make_unique<KernelTask>(std::move(*tmpl), *std::move(def), measurer_,
                                                              spec.data_seed, kind_.host_reference, should_stop_));
  }
  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload& workload) const override {
    return kind_.tmpl(workload, target());
  }
  absl::StatusOr<std::string> KernelSource(const codegen::Workload& workload, const std::string& config) const override {
    auto tmpl = MakeTemplate(workload);
    if (!tmpl.ok()) return tmpl.status();
    auto cfg = (*tmpl)->space().FromJson(config);
    if (!cfg.ok()) return cfg.status();
    auto func = (*tmpl)->Lower(*cfg, "best");
    if (!func.ok()) return func.status();
    return kind_.source(*func);
  }

 private:
  KernelKind kind_;
  std::shared_ptr<KernelMeasurer> measurer_;
  std::function<bool()> should_stop_;
};

class ReplayTaskFactory final : public TaskFactory {
 public:
  ReplayTaskFactory(Target target, std::shared_ptr<const ReplaySpace> space)
      : TaskFactory(std::move(target)), space_(std::move(space)) {}

  absl::StatusOr<std::unique_ptr<Task>> Make(const TaskSpec&) const override {
    return std::unique_ptr<Task>(std::make_unique<ReplayTask>(space_.get()));
  }
  absl::StatusOr<std::unique_ptr<codegen::Template>> MakeTemplate(const codegen::Workload&) const override {
    return absl::UnimplementedError("a recorded space has no templates");
  }
  absl::StatusOr<std::string> KernelSource(const codegen::Workload&, const std::string&) const override {
    return absl::UnimplementedError("a recorded space has no kernels");
  }

 private:
  std::shared_ptr<const ReplaySpace> space_;
};

KernelKind LlvmKind() {
  KernelKind k;
  k.tmpl = [](const codegen::Workload& w, const Target& target) {
    // Register tiles for the target's CPU (a worker's, a recorded one's), not this host's, and
    // parallel loops for its thread count.
    codegen::CpuLimits cpu = target.features.empty() ? codegen::HostCpuLimits() : codegen::CpuLimitsOf(target.features);
    cpu.threads = target.threads;
    return codegen::CreateTemplate(w, codegen::Backend::kLlvm, {}, cpu);
  };
  k.builder = [](const Target&, int threads) -> std::unique_ptr<Builder> {
    return std::make_unique<HostBuilder>(codegen::CodegenOptions{}, threads);
  };
  k.runners = [](const Target& target) { return LocalRunner::Factory(target.threads); };
  k.source = [](const codegen::LoweredFunc& func) -> absl::StatusOr<std::string> { return codegen::Print(func); };
  return k;
}

KernelKind CudaKind() {
  KernelKind k;
  k.tmpl = [](const codegen::Workload& w, const Target& target) {
    codegen::GpuLimits limits;
    if (target.max_threads_per_block > 0) limits.max_threads_per_block = target.max_threads_per_block;
    if (target.max_shared_per_block > 0) limits.max_shared_bytes_per_block = target.max_shared_per_block;
    if (target.registers_per_block > 0) limits.max_registers_per_block = target.registers_per_block;
    if (target.multiprocessors > 0) limits.multiprocessors = target.multiprocessors;
    return codegen::CreateTemplate(w, codegen::Backend::kCuda, limits);
  };
  k.builder = [](const Target& target, int threads) -> std::unique_ptr<Builder> {
    return std::make_unique<CudaBuilder>(target.cpu, threads);
  };
  k.runners = [](const Target& target) { return CudaRunner::Factory(target.device); };
  k.source = [](const codegen::LoweredFunc& func) -> absl::StatusOr<std::string> {
    auto kernel = codegen::GenerateCuda(func);
    if (!kernel.ok()) return kernel.status();
    return kernel->source;
  };
  k.default_build_threads = HostCores();
  k.host_reference = false;
  return k;
}

using Creator = std::function<absl::StatusOr<std::unique_ptr<TaskFactory>>(const Target&, TaskFactoryOptions)>;

Creator KernelCreator(KernelKind (*kind)()) {
  return [kind](const Target& target, TaskFactoryOptions options) -> absl::StatusOr<std::unique_ptr<TaskFactory>> {
    return std::unique_ptr<TaskFactory>(std::make_unique<KernelTaskFactory>(target, kind(), std::move(options)));
  };
}

/// The registry: kind -> creator, in registration order.
const std::vector<std::pair<std::string, Creator>>& Registry() {
  static const auto* registry = new std::vector<std::pair<std::string, Creator>>{
      {"llvm", KernelCreator(LlvmKind)},
      {"cuda", KernelCreator(CudaKind)},
      {"replay",
       [](const Target& target, TaskFactoryOptions options) -> absl::StatusOr<std::unique_ptr<TaskFactory>> {
         if (options.replay == nullptr) return absl::InvalidArgumentError("a replay target needs its recorded space");
         return std::unique_ptr<TaskFactory>(std::make_unique<ReplayTaskFactory>(target, std::move(options.replay)));
       }},
  };
  return *registry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TaskFactory>> TaskFactory::Create(const Target& target, TaskFactoryOptions options) {
  for (const auto& [kind, create] : Registry()) {
    if (kind == target.kind) return create(target, std::move(options));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target kind '", target.kind, "' (", absl::StrJoin(Kinds(), ", "), ")"));
}

absl::StatusOr<std::unique_ptr<codegen::Template>> TaskFactory::MakeTemplateFor(const Target& target,
                                                                                const codegen::Workload& workload) {
  if (target.kind == "llvm") return LlvmKind().tmpl(workload, target);
  if (target.kind == "cuda") return CudaKind().tmpl(workload, target);
  if (target.kind == "replay") return absl::UnimplementedError("a recorded space has no templates");
  return absl::InvalidArgumentError(
      absl::StrCat("unknown target kind '", target.kind, "' (", absl::StrJoin(Kinds(), ", "), ")"));
}

std::vector<std::string> TaskFactory::Kinds() {
  std::vector<std::string> out;
  for (const auto& entry : Registry()) out.push_back(entry.first);
  return out;
}

}  // namespace tune::measure
