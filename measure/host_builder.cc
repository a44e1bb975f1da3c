// HostBuilder: LLVM compilation of a lowered function, failures turned into statuses.
#include "measure/host_builder.h"

namespace tune::measure {

BuildResult HostBuilder::Compile(const codegen::LoweredFunc& func, const BuildDeadline&) const {
  BuildResult out;
  auto kernel = codegen::CompileForHost(func, options_);
  if (!kernel.ok()) {
    out.status = MeasureStatus::kCompileError;
    out.message = std::string(kernel.status().message());
    return out;
  }
  out.kernel = std::move(*kernel);
  return out;
}

}  // namespace tune::measure
