// ReplayTask: replayed measurements as MeasureResults, and the trace of one replayed search.
#include "measure/replay_task.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tune::measure {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

double ReplayTrace::BestAt(int b) const {
  if (b <= 0 || best_ms.empty()) return kInf;
  return best_ms[std::min(static_cast<size_t>(b), best_ms.size()) - 1];
}

ReplayTask::ReplayTask(const ReplaySpace* space) : space_(space) {
  const KernelTunerCache& c = space_->cache();
  keys_.workload_key = absl::StrCat("replay|", c.kernel_name, "|", c.path);
  keys_.op = "replay";
  nlohmann::json j;
  j["kernel"] = c.kernel_name;
  j["device"] = c.device_name;
  j["params"] = c.param_names;
  keys_.shape_json = j.dump();
}

std::vector<MeasureResult> ReplayTask::Measure(const std::vector<search::Config>& configs,
                                               const MeasureProtocol& protocol) {
  std::vector<MeasureResult> out(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    MeasureResult& r = out[i];
    const KernelTunerCache::Entry* e = space_->Find(configs[i]);
    if (e == nullptr) {
      r.status = MeasureStatus::kInvalidConfig;
      r.message = "not in the recorded space";
      continue;
    }
    search::MeasuredConfig m = space_->Measure(configs[i]);
    if (e->ok) {
      r.status = MeasureStatus::kOk;
      r.costs_s = {m.cost};
      r.number = 1;
    } else {
      r.status = e->failure.find("Compil") != std::string::npos ? MeasureStatus::kCompileError
                                                                 : MeasureStatus::kRuntimeError;
      r.message = e->failure.empty() ? "recorded failure" : e->failure;
      ++trace_.failures;
    }
    const double best = trace_.best_ms.empty() ? kInf : trace_.best_ms.back();
    trace_.best_ms.push_back(e->ok ? std::min(best, e->time_ms) : best);
    trace_.evaluations.push_back(std::move(m));
  }
  return out;
}

Target ReplayTarget(const KernelTunerCache& cache) {
  Target t;
  t.kind = "replay";
  t.device_model = cache.device_name.empty() ? "unknown" : cache.device_name;
  t.toolkit = "kernel_tuner-cache";
  return t;
}

}  // namespace tune::measure
