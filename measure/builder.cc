// Builder: template instantiation + LLVM compilation, with failures turned into statuses.
#include "measure/builder.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "codegen/cuda_codegen.h"
#include "codegen/nvrtc.h"

namespace tune::measure {

std::string Builder::KernelName(const codegen::Template& tmpl, const search::Config& config) {
  return "tune_" + tmpl.name() + "_" + std::to_string(tmpl.space().ToIndex(config));
}

BuildResult Builder::Build(const codegen::Template& tmpl, const search::Config& config) const {
  auto start = std::chrono::steady_clock::now();
  BuildResult out;
  auto finish = [&] {
    out.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  };
  std::string why = tmpl.space().WhyInvalid(config);
  if (!why.empty()) {
    out.status = MeasureStatus::kInvalidConfig;
    out.message = "config violates constraint '" + why + "'";
    return finish();
  }
  auto func = tmpl.Lower(config, KernelName(tmpl, config));
  if (!func.ok()) {
    out.status = MeasureStatus::kInvalidConfig;
    out.message = std::string(func.status().message());
    return finish();
  }
  if (!cuda_arch_.empty()) {
    BuildResult cuda = BuildCuda(*func);
    out.status = cuda.status;
    out.message = std::move(cuda.message);
    out.kernel = std::move(cuda.kernel);
    return finish();
  }
  auto kernel = codegen::CompileForHost(*func, options_);
  if (!kernel.ok()) {
    out.status = MeasureStatus::kCompileError;
    out.message = std::string(kernel.status().message());
    return finish();
  }
  out.kernel = std::move(*kernel);
  return finish();
}

BuildResult Builder::BuildCuda(const codegen::LoweredFunc& func) const {
  BuildResult out;
  auto generated = codegen::GenerateCuda(func);
  if (!generated.ok()) {
    out.status = MeasureStatus::kInvalidConfig;
    out.message = std::string(generated.status().message());
    return out;
  }
  auto compiled = codegen::CompileCuda(generated->source, cuda_arch_);
  if (!compiled.ok()) {
    out.status = MeasureStatus::kCompileError;
    out.message = std::string(compiled.status().message());
    return out;
  }
  out.kernel.symbol = generated->name;
  out.kernel.object_code = std::move(compiled->cubin);
  out.kernel.ir = std::move(generated->source);
  out.kernel.cuda = true;
  out.kernel.launch.grid = generated->grid;
  out.kernel.launch.block = generated->block;
  out.kernel.launch.shared_bytes = generated->shared_bytes;
  out.kernel.launch.scratch = generated->scratch;
  out.kernel.launch.registers = compiled->resources.registers;
  if (compiled->resources.spill_store_bytes >= 0) {
    out.kernel.launch.spill_bytes = compiled->resources.spill_store_bytes + compiled->resources.spill_load_bytes;
  }
  return out;
}

std::vector<BuildResult> Builder::BuildAll(const codegen::Template& tmpl,
                                           const std::vector<search::Config>& configs) const {
  std::vector<BuildResult> out(configs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < configs.size(); i = next++) out[i] = Build(tmpl, configs[i]);
  };
  int n = static_cast<int>(std::min<size_t>(threads_, configs.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace tune::measure
