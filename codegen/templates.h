// CreateTemplate: the template of a workload for a back end (CPU templates, CUDA templates).
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"

namespace tune::codegen {

/// The template for `workload`'s operator on `backend`; InvalidArgument when the workload
/// is invalid or no template handles it. CUDA templates exclude configs beyond `limits`;
/// CPU templates size their register tiles for `cpu` (the host's when not given).
absl::StatusOr<std::unique_ptr<Template>> CreateTemplate(const Workload& workload, Backend backend = Backend::kLlvm,
                                                         const GpuLimits& limits = {},
                                                         const std::optional<CpuLimits>& cpu = std::nullopt);

}  // namespace tune::codegen
