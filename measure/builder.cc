// Builder: the checks and lowering every builder shares, and building batches on several threads.
#include "measure/builder.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace tune::measure {

std::string Builder::KernelName(const codegen::Template& tmpl, const search::Config& config) {
  return "tune_" + tmpl.name() + "_" + std::to_string(tmpl.space().ToIndex(config));
}

BuildResult Builder::Build(const codegen::Template& tmpl, const search::Config& config, double timeout_s) const {
  auto start = std::chrono::steady_clock::now();
  BuildDeadline deadline;
  if (timeout_s > 0) {
    deadline.timeout_s = timeout_s;
    deadline.at = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
  }
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
  out = Compile(*func, deadline);
  return finish();
}

std::vector<BuildResult> Builder::BuildAll(const codegen::Template& tmpl, const std::vector<search::Config>& configs,
                                           double timeout_s) const {
  std::vector<BuildResult> out(configs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < configs.size(); i = next++) out[i] = Build(tmpl, configs[i], timeout_s);
  };
  int n = static_cast<int>(std::min<size_t>(threads_, configs.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace tune::measure
