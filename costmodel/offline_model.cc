// The OfflineModel registry, model inputs from lowered configs, and group-wise evaluation.
#include "costmodel/offline_model.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_join.h"
#include "costmodel/ensemble_model.h"
#include "costmodel/features.h"
#include "costmodel/ranking_metrics.h"

namespace tune::costmodel {

absl::StatusOr<ModelInput> MakeModelInput(const codegen::Template& tmpl, const search::Config& config,
                                          InputNeeds needs) {
  auto func = tmpl.Lower(config, "k");
  if (!func.ok()) return absl::InvalidArgumentError(std::string(func.status().message()));
  ModelInput in;
  if (needs.ast) in.ast = ExtractFeatures(*func);
  if (needs.graph) in.graph = ExtractProgramGraph(*func);
  return in;
}

namespace {

#ifdef TUNE_WITH_TORCH
using MakeTorchModelFn = OfflineModel* (*)(const char*);

/// Where the LibTorch module may be, in the order tried.
std::vector<std::string> TorchModuleCandidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("TUNE_TORCH_MODULE"); env && *env) paths.push_back(env);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    paths.push_back(dir + "/libtune_torch.so");
    paths.push_back(dir + "/../lib/libtune_torch.so");
  }
#ifdef TUNE_TORCH_MODULE_PATH
  paths.push_back(TUNE_TORCH_MODULE_PATH);
#endif
  return paths;
}

/// Loads the module once per process (never unloaded: its models' code lives in it). Its
/// OpenMP runtime starts with OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise:
/// spinning workers slowed these models' small operations 3-6x on machines whose cores are busy.
absl::StatusOr<MakeTorchModelFn> TorchFactory() {
  static std::once_flag once;
  static MakeTorchModelFn fn = nullptr;
  static std::string error;
  std::call_once(once, [] {
    setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
    std::string tried;
    for (const std::string& path : TorchModuleCandidates()) {
      if (access(path.c_str(), R_OK) != 0) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        error = std::string("cannot load ") + path + ": " + dlerror();
        return;
      }
      fn = reinterpret_cast<MakeTorchModelFn>(dlsym(handle, "tune_torch_make_model"));
      if (!fn) error = path + " has no tune_torch_make_model";
      return;
    }
    error = "the LibTorch module libtune_torch.so was not found (tried " + tried + "; set TUNE_TORCH_MODULE)";
  });
  if (!fn) return absl::UnimplementedError(error);
  return fn;
}

absl::StatusOr<std::unique_ptr<OfflineModel>> MakeTorchModel(const std::string& kind) {
  auto factory = TorchFactory();
  if (!factory.ok()) return absl::UnimplementedError("the " + kind + " cost model needs LibTorch: " +
                                                     std::string(factory.status().message()));
  std::unique_ptr<OfflineModel> model((*factory)(kind.c_str()));
  if (!model) return absl::InternalError("the LibTorch module does not make " + kind + " models");
  return model;
}
#endif

}  // namespace

std::vector<std::string> OfflineModelKinds() { return {"xgb", "lstm", "gnn", "ensemble"}; }

absl::StatusOr<std::unique_ptr<OfflineModel>> CreateOfflineModel(const std::string& kind) {
  if (kind == "xgb") return MakeXgbOfflineModel();
  if (kind == "ensemble") return std::unique_ptr<OfflineModel>(std::make_unique<EnsembleModel>());
#ifdef TUNE_WITH_TORCH
  if (kind == "lstm" || kind == "gnn") return MakeTorchModel(kind);
#else
  if (kind == "lstm" || kind == "gnn")
    return absl::UnimplementedError("the " + kind + " cost model needs LibTorch; this tune was built with TUNE_WITH_TORCH=OFF");
#endif
  return absl::InvalidArgumentError("unknown cost model kind '" + kind + "' (" +
                                    absl::StrJoin(OfflineModelKinds(), ", ") + ")");
}

EvalMetrics EvaluateGroups(const OfflineModel& model, const std::vector<TrainGroup>& groups) {
  EvalMetrics m;
  double top1 = 0, top5 = 0, pair = 0, tau = 0, rho = 0;
  int n_top = 0, n_pair = 0, n_tau = 0, n_rho = 0;
  for (const TrainGroup& g : groups) {
    if (g.inputs.empty()) continue;
    std::vector<const ModelInput*> in;
    in.reserve(g.inputs.size());
    for (const ModelInput& x : g.inputs) in.push_back(&x);
    RankedTask t;
    t.latencies_s = g.latencies_s;
    t.scores = model.Score(in);
    for (double& s : t.scores)
      if (!std::isfinite(s)) s = -1e30;
    ++m.groups;
    m.configs += static_cast<int64_t>(g.inputs.size());
    const double best = BestLatency(t);
    if (std::isfinite(best)) {
      const double l1 = TopKLatency(t, 1), l5 = TopKLatency(t, 5);
      top1 += std::isfinite(l1) ? best / l1 : 0;
      top5 += std::isfinite(l5) ? best / l5 : 0;
      ++n_top;
    }
    if (auto p = PairwiseAccuracy(t)) pair += *p, ++n_pair;
    if (auto k = KendallTau(t)) tau += *k, ++n_tau;
    if (auto s = SpearmanRho(t)) rho += *s, ++n_rho;
  }
  m.top1 = n_top ? top1 / n_top : 0;
  m.top5 = n_top ? top5 / n_top : 0;
  m.pairwise = n_pair ? pair / n_pair : 0;
  m.kendall = n_tau ? tau / n_tau : 0;
  m.spearman = n_rho ? rho / n_rho : 0;
  return m;
}

double ValidationObjective(const EvalMetrics& m) { return (m.pairwise + m.top1) / 2; }

}  // namespace tune::costmodel
