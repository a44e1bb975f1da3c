// EnsembleModel: an offline cost model whose score is the mean of several member models' scores, each brought to a common scale.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "costmodel/offline_model.h"

namespace tune::costmodel {

/// What an ensemble records of one member.
struct EnsembleMemberInfo {
  std::string kind;        // the member's OfflineModel::kind() ("xgb", "lstm", "gnn"; never "ensemble")
  uint64_t seed = 0;       // the seed it was trained with
  std::string loss;        // its training loss ("pairwise", "lambdarank", "regression")
  std::string source;      // "trained" (by the ensemble's Train) or the .tcm file it was taken from
  int feature_version = 0;        // kFeatureVersion it was trained on
  int graph_feature_version = 0;  // kGraphFeatureVersion it was trained on
  /// The normalisation: the member's score s counts as (s - offset) / scale. scale is the
  /// mean, over the tasks it was fitted on, of the standard deviation of the member's scores
  /// among one task's configs (> 0); offset the mean of those per-task means.
  double scale = 1;
  double offset = 0;
};

/// An ensemble of trained offline models ("ensemble" kind). Score(x) is the mean over members
/// m of (s_m(x) - offset_m) / scale_m: each member's scores are standardised by its typical
/// spread within one task, so members of another kind or loss (whose raw scores live on other
/// scales) weigh the same.
///
/// Why a scale fixed at training rather than a z-score or rank per Score call: the search
/// compares scores of different calls (simulated annealing accepts a move by comparing a
/// chain's new score with its score from the previous call; the candidates kept are collected
/// across calls; PretrainedCostModel standardises with statistics of an earlier call), and a
/// per-call normalisation would give a config another score for every batch it is in (0 in a
/// batch of one). Within one call of one task's candidates, subtracting the call's mean does
/// not change the order: the only thing the normalisation decides is each member's weight,
/// 1 / (its spread within a task), which a per-task average estimates without depending on
/// the batch.
///
/// Online: FineTune fine-tunes every member that can (xgb) on the task's records and keeps the
/// others (lstm, gnn) as they are; the scales stay fixed. Not thread-safe.
class EnsembleModel final : public OfflineModel {
 public:
  std::string kind() const override { return "ensemble"; }
  /// The union of the members' needs, and the AST features the xgb members it trains read.
  InputNeeds needs() const override;
  /// True once it has members and their scales were fitted (Train or LoadPayload).
  bool trained() const override { return fitted_ && !members_.empty(); }

  /// Adds an already trained member (e.g. read from a .tcm); its scale is fitted by the next
  /// Train. InvalidArgument when `model` is null, untrained or itself an ensemble.
  absl::Status AddMember(std::unique_ptr<OfflineModel> model, EnsembleMemberInfo info);

  /// Trains options.members new xgb members (seeds options.seed, options.seed + 1, ...;
  /// losses from options.member_losses in turn, else options.loss), each early-stopped on its
  /// own draw of validation tasks from train + valid and trained on the rest
  /// (options.member_splits, the default; else all on `train`, early-stopped on `valid`),
  /// then fits every member's scale and offset on the groups of `train` and `valid`.
  /// Earlier trained members are replaced; members given with AddMember stay.
  /// InvalidArgument when it would have no member or a member's training fails (the message
  /// names the member); the ensemble is unchanged then.
  absl::Status Train(const std::vector<TrainGroup>& train, const std::vector<TrainGroup>& valid,
                     const TrainOptions& options) override;
  /// Fine-tunes a copy of every member that can and swaps them in together; Unimplemented
  /// when no member can; on another failure the ensemble is unchanged.
  absl::Status FineTune(const TrainGroup& group, const TrainOptions& options) override;
  std::vector<double> Score(const std::vector<const ModelInput*>& inputs) const override;
  /// Layout: 8-byte magic, u64 length + JSON meta (payload version, every member's info), then
  /// per member u64 length + its own payload.
  absl::StatusOr<std::string> SavePayload() const override;
  /// InvalidArgument with one line (naming the member) when the payload is not an ensemble's,
  /// is truncated, has no member, a member of unknown kind or of another feature version than
  /// this build, a non-positive scale, or member data its kind refuses. Unchanged then.
  absl::Status LoadPayload(const std::string& payload) override;

  size_t member_count() const { return members_.size(); }
  const OfflineModel& member(size_t i) const { return *members_[i].model; }
  const EnsembleMemberInfo& member_info(size_t i) const { return members_[i].info; }
  /// Each member's raw scores of `inputs` (members x inputs).
  std::vector<std::vector<double>> MemberScores(const std::vector<const ModelInput*>& inputs) const;

 private:
  struct Member {
    EnsembleMemberInfo info;
    std::unique_ptr<OfflineModel> model;
  };
  std::vector<Member> members_;
  bool fitted_ = false;
};

}  // namespace tune::costmodel
