// Naive reference kernels for every workload, and the tolerance check against them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ir/workload.h"

namespace tune::measure {

/// Computes `workload`'s output with plain loops, accumulating in double, into `*out`
/// (resized to Output().NumElements()). `inputs` are in Workload::Inputs() order, each
/// exactly that tensor's size; a size mismatch or an invalid workload is a bug and aborts.
/// Written to be obviously correct, not fast, though cache-friendly enough that a 1024^3
/// matmul finishes in about a second. Thread-safe; keeps no state.
void ComputeReference(const codegen::Workload& workload,
                      const std::vector<std::vector<float>>& inputs, std::vector<float>* out);

/// True when every |got[i] - want[i]| <= atol + rtol * |want[i]| (numpy.allclose) and no
/// value is NaN; infinities match only an equal infinity. On failure, when `why` is not
/// null, it receives the first mismatching index with both values and how many of the `n`
/// elements differ.
bool AllClose(const float* got, const float* want, int64_t n, double rtol, double atol,
              std::string* why);

}  // namespace tune::measure
