// OfflineModel: a cost model trained offline on many tasks' records (xgb, lstm, gnn), by name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "costmodel/program_graph.h"
#include "search/space.h"

namespace tune::costmodel {

/// What a model reads of one config's lowered kernel.
struct ModelInput {
  std::vector<float> ast;  // ExtractFeatures (kNumFeatures floats); empty when the model does not need it
  ProgramGraph graph;      // ExtractProgramGraph; empty (0 nodes) when the model does not need it
};

/// Which parts of ModelInput a model kind reads.
struct InputNeeds {
  bool ast = false;
  bool graph = false;
};

/// `config` of `tmpl` lowered and featurized as `needs` says. InvalidArgument when the config
/// does not lower (invalid in the space).
absl::StatusOr<ModelInput> MakeModelInput(const codegen::Template& tmpl, const search::Config& config,
                                          InputNeeds needs);

/// One task's measured configs: the unit of ranking (a model is judged on the order it gives
/// the configs of one task, never across tasks).
struct TrainGroup {
  std::string name;                  // the task (its workload label or key)
  int64_t task_id = 0;               // in the database it came from; 0 when none
  double weight = 1;                 // the task's count in its network(s), for top-k scores
  std::vector<ModelInput> inputs;    // one per config
  std::vector<double> latencies_s;   // one per config: the median time [s]; +inf: failed
};

/// Progress of a training job, after every epoch (lstm, gnn) or block of rounds (xgb).
struct TrainProgress {
  int epoch = 0, max_epochs = 0;  // 1-based epoch / round just finished, and the limit
  double train_loss = 0;          // mean training loss of the epoch (model-specific units)
  double valid_score = 0;         // ValidationObjective on the validation groups
  double best_valid_score = 0;    // the best so far (the model kept is the best one)
  int best_epoch = 0;
  double elapsed_s = 0;
  int member = 0, members = 0;    // ensemble: the member being trained (1-based) and how many; 0 otherwise
};

/// lstm, gnn: the parts a minibatch is split into when TrainOptions::minibatch_parts is 0.
inline constexpr int kDefaultMinibatchParts = 4;

/// The settings of a training job. Zero means the model kind's default.
struct TrainOptions {
  uint64_t seed = 0;      // everything random (init, shuffles, bootstrap) draws from it: same seed, same model
  int threads = 1;        // threads: XGBoost's; lstm/gnn: of a minibatch's parts and of scoring
  /// lstm, gnn: the parts a minibatch's loss and gradients are computed in (whole chunks of one
  /// task's configs, summed in order; the threads run parts side by side). 0:
  /// kDefaultMinibatchParts. The model depends on it (the order of float additions), not on
  /// `threads`.
  int minibatch_parts = 0;
  /// The parts a training uses: minibatch_parts, or kDefaultMinibatchParts for 0.
  int MinibatchParts() const { return minibatch_parts > 0 ? minibatch_parts : kDefaultMinibatchParts; }
  int max_epochs = 0;     // epochs (lstm, gnn) or boosting rounds (xgb)
  int patience = 0;       // stop when the validation score has not improved for this many epochs / round blocks
  double learning_rate = 0;
  int hidden = 0;         // hidden width (lstm, gnn)
  /// The ranking loss: "pairwise" (RankNet: every pair of one task's configs whose latencies
  /// differ weighs the same; xgb: rank:pairwise) or "lambdarank" (each pair weighted by how
  /// much swapping the two would change the task's NDCG under the current scores, with gain
  /// best latency / latency, so the pairs at the top of the ranking count most; xgb:
  /// rank:ndcg) or "regression" (xgb only: reg:squarederror on the per-task normalised
  /// throughput, best latency / latency, failures 0: TenSet's label). Empty means "pairwise".
  std::string loss;
  /// xgb: the share of rows (subsample) and of feature columns per tree (colsample_bytree)
  /// each tree is grown on; 0 means 1 (no subsampling).
  double subsample = 0;
  double colsample = 0;
  /// ensemble: xgb members trained with seeds seed, seed+1, ... (-1: 5 when the ensemble has
  /// no member yet, else 0).
  int members = -1;
  /// ensemble: the losses of the trained members, taken in turn (member i: member_losses[i %
  /// size]); empty: `loss` for every member.
  std::vector<std::string> member_losses;
  /// ensemble: each trained member early-stops on its own draw of the validation tasks from
  /// train + valid (as many as `valid` holds), seeded by its seed, and trains on the rest;
  /// false: every member trains on `train` and early-stops on `valid` (then only the losses
  /// and subsampling make xgb members differ: XGBoost 1.7's rank:pairwise pair sampling does
  /// not depend on the seed).
  bool member_splits = true;
  /// Only for online fine-tuning: at most this many epochs over the task's own records.
  int fine_tune_epochs = 0;
  std::function<void(const TrainProgress&)> progress;
};

/// A cost model trained on records of many tasks and applied to configs of any task of the same
/// target family. Scores: higher = predicted faster; only their order within a task matters.
/// Not thread-safe.
class OfflineModel {
 public:
  virtual ~OfflineModel() = default;
  /// "xgb", "lstm", "gnn" or "ensemble": the name CreateOfflineModel takes.
  virtual std::string kind() const = 0;
  virtual InputNeeds needs() const = 0;
  virtual bool trained() const = 0;
  /// Trains from scratch on `train`; `valid` (may be empty: then a share of `train`'s groups
  /// is held back by the model itself) picks the epoch/round kept (early stopping).
  /// Deterministic for options.seed. InvalidArgument when `train` has no group with two
  /// configs of different latency.
  virtual absl::Status Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>& valid,
                             const TrainOptions& options) = 0;
  /// Keeps learning from one task's own measurements (online tuning), starting from the
  /// current parameters. Models that cannot do it return Unimplemented and stay unchanged.
  virtual absl::Status FineTune(const TrainGroup& group, const TrainOptions& options) {
    return absl::UnimplementedError(kind() + " models do not fine-tune");
  }
  /// One score per input (0 for all before training).
  virtual std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const = 0;
  /// The parameters as bytes that LoadPayload restores exactly (same scores).
  virtual absl::StatusOr<std::string> SavePayload() const = 0;
  /// InvalidArgument when `payload` is not this kind's; the model is unchanged then.
  virtual absl::Status LoadPayload(const std::string& payload) = 0;
};

/// The kinds CreateOfflineModel knows: "xgb", "lstm", "gnn", "ensemble" (costmodel/ensemble_model.h).
std::vector<std::string> OfflineModelKinds();
/// A fresh, untrained model of `kind`; InvalidArgument naming the kinds otherwise.
absl::StatusOr<std::unique_ptr<OfflineModel>> CreateOfflineModel(const std::string& kind);

/// The factory of the "xgb" kind (costmodel/xgb_offline.cc). The "lstm" and "gnn" kinds live in
/// a module loaded on first use (libtune_torch.so, costmodel/torch_models.cc, built when
/// TUNE_WITH_TORCH), so that processes that never train or apply them do not pay LibTorch's
/// start-up (about a second): CreateOfflineModel looks for it in $TUNE_TORCH_MODULE, beside
/// the executable, in ../lib from it, then in the build tree; Unimplemented with one line
/// when it is not there.
std::unique_ptr<OfflineModel> MakeXgbOfflineModel();

/// The ranking metrics of item "splits and metrics" over groups: TenSet's top-k scores
/// treating every group as one network task of its weight (`networks` empty), or per network.
struct EvalMetrics {
  double top1 = 0, top5 = 0;   // mean over networks (or over groups when no networks are given)
  double pairwise = 0;         // mean pairwise accuracy over groups with a defined value
  double kendall = 0;          // mean Kendall tau-b over groups with a defined value
  double spearman = 0;
  int groups = 0;              // groups scored
  int64_t configs = 0;
};

/// Scores every group with `model` and computes EvalMetrics: top-k per group is
/// best latency / best latency among the k top-ranked (TenSet's score of a one-task network),
/// averaged over groups.
EvalMetrics EvaluateGroups(const OfflineModel& model, const std::vector<TrainGroup>& groups);

/// The number early stopping maximizes: mean pairwise accuracy plus top-1 (both in [0, 1]), / 2.
double ValidationObjective(const EvalMetrics& m);

}  // namespace tune::costmodel
