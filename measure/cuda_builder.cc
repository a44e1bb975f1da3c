// CudaBuilder: CUDA C generation and NVRTC compilation, failures turned into statuses.
#include "measure/cuda_builder.h"

#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/nvrtc.h"

namespace tune::measure {

BuildResult CudaBuilder::Compile(const codegen::LoweredFunc& func) const {
  BuildResult out;
  auto generated = codegen::GenerateCuda(func);
  if (!generated.ok()) {
    out.status = MeasureStatus::kInvalidConfig;
    out.message = std::string(generated.status().message());
    return out;
  }
  auto compiled = codegen::CompileCuda(generated->source, arch_);
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
