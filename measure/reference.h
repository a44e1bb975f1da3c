// Naive reference kernels for every workload, and the tolerance check against them.
#pragma once

#include <cstdint>
#include <functional>
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

/// Asked now and then by a long computation (from its own thread); true abandons it. Null
/// never stops. Called about every million multiply-adds, so it must be cheap (an atomic load).
using StopFn = std::function<bool()>;

/// ComputeReference that gives up within a few milliseconds of `should_stop` turning true:
/// false then, with `*out` emptied; true with the whole output otherwise.
bool ComputeReference(const codegen::Workload& workload, const std::vector<std::vector<float>>& inputs,
                      std::vector<float>* out, const StopFn& should_stop);

/// Calls `should_stop` once per `kWork` units of work reported to Tick; sticky once true.
class StopPoll {
 public:
  static constexpr int64_t kWork = int64_t{1} << 20;
  explicit StopPoll(const StopFn& should_stop) : should_stop_(should_stop) {}
  /// Counts `work` more units done; true once stopping was asked for.
  bool Tick(int64_t work) {
    if (stopped_ || !should_stop_) return stopped_;
    done_ += work;
    if (done_ < kWork) return false;
    done_ = 0;
    stopped_ = should_stop_();
    return stopped_;
  }
  bool stopped() const { return stopped_; }

 private:
  const StopFn& should_stop_;
  int64_t done_ = 0;
  bool stopped_ = false;
};

/// True when every |got[i] - want[i]| <= atol + rtol * |want[i]| (numpy.allclose) and no
/// value is NaN; infinities match only an equal infinity. On failure, when `why` is not
/// null, it receives the first mismatching index with both values and how many of the `n`
/// elements differ.
bool AllClose(const float* got, const float* want, int64_t n, double rtol, double atol,
              std::string* why);

}  // namespace tune::measure
