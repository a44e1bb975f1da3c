// The OfflineModel registry, model inputs from lowered configs, and group-wise evaluation.
#include "costmodel/offline_model.h"

#include <cmath>

#include "absl/strings/str_join.h"
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

std::vector<std::string> OfflineModelKinds() { return {"xgb", "lstm", "gnn"}; }

absl::StatusOr<std::unique_ptr<OfflineModel>> CreateOfflineModel(const std::string& kind) {
  if (kind == "xgb") return MakeXgbOfflineModel();
#ifdef TUNE_WITH_TORCH
  if (kind == "lstm") return MakeLstmModel();
  if (kind == "gnn") return MakeGnnModel();
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
