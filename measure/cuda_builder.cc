// CudaBuilder: CUDA C generation and NVRTC compilation, failures turned into statuses.
#include "measure/cuda_builder.h"

#include <mutex>

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"
#include "spdlog/spdlog.h"

namespace tune::measure {
namespace {

/// Says once per process that build deadlines are not kept, when a build has one and the
/// loaded NVRTC cannot cancel.
void WarnIfDeadlinesCannotBeKept(const BuildDeadline& deadline) {
  if (deadline.timeout_s <= 0 || !codegen::NvrtcAvailable()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    if (codegen::NvrtcCanCancel()) return;
    spdlog::warn("NVRTC {} cannot cancel a compile (nvrtcSetFlowCallback needs CUDA 12.8 or later): CUDA builds "
                 "run without the build timeout",
                 codegen::NvrtcVersion());
  });
}

}  // namespace

BuildResult CudaBuilder::Compile(const codegen::LoweredFunc& func, const BuildDeadline& deadline) const {
  WarnIfDeadlinesCannotBeKept(deadline);
  BuildResult out;
  auto generated = codegen::GenerateCuda(func);
  if (!generated.ok()) {
    out.status = MeasureStatus::kInvalidConfig;
    out.message = std::string(generated.status().message());
    return out;
  }
  auto compiled = codegen::CompileCuda(generated->source, arch_, {}, deadline.at);
  if (absl::IsDeadlineExceeded(compiled.status())) {
    out.status = MeasureStatus::kTimeout;
    out.message = BuildTimedOutMessage(deadline.timeout_s);
    return out;
  }
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

}  // namespace tune::measure
