// Config transfer: a new task's search starts from the best configs of the same task at other
// thread counts of the same machine, then of the most similar tasks already recorded on the same
// target with the same template, mapped into the new shape's space.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "dataset/record_database.h"
#include "measure/task_factory.h"
#include "search/space.h"

namespace tune::tuner {

/// How far apart two workloads are for config transfer: the sum over their shape fields (batch,
/// M, N, K; or batch, channels, height, width, output channels, kernel, stride, padding,
/// dilation, groups) of |log2(a / b)|, plus 1 where the operators differ (dense and matmul share
/// a template). 0: the same shape. Epilogues (bias, relu) do not count.
double WorkloadDistance(const codegen::Workload& a, const codegen::Workload& b);

/// `config_json`, a config of another task's space of the same template (ConfigSpace::ToJson),
/// mapped into `space`: each split knob takes the option whose inner factors (all but the
/// outermost, which follows from the extent) are nearest in log2 scale, each choice knob the
/// same value or else the nearest one, a knob the text lacks option 0. Where that breaks a
/// constraint, the valid config nearest to it by changing one knob to one of its next-nearest
/// options; where no one change will do, up to three such changes, each mending the first
/// broken constraint. NotFound when there is none; InvalidArgument when the text is not a JSON
/// object.
absl::StatusOr<search::Config> MapConfig(const std::string& config_json, const search::ConfigSpace& space);

struct ConfigTransferOptions {
  /// Configs seeded at most, parallel forms included.
  int max_configs = 4;
  /// Configs taken from any one source task at most (the rest come from the next most similar);
  /// a config and its parallel form count as one.
  int per_task = 2;
  /// Source tasks considered at most: the nearest of those with ok records on the target. The
  /// tasks table is read one row at a time and only these are kept, so a new task's memory does
  /// not grow with the database (a daemon running job after job, each a new task, grew by the
  /// whole table's worth in every allocator arena).
  int candidates = 64;
};

/// What TransferConfigs found.
struct TransferSeeds {
  /// Valid distinct configs of the new task's space, most similar task first, each task's
  /// fastest first.
  std::vector<search::Config> configs;
  /// The workload keys of the tasks they came from, in that order (one per task used).
  std::vector<std::string> sources;
};

/// First, the best ok configs of task `task_id` itself on the targets that differ from
/// `target_id` only in their thread count (the same machine at 1, 2, ... threads; source label
/// "WORKLOAD_KEY at tN"), each followed, where it is serial and `tmpl` uses several threads,
/// by its parallel form (Template::ParallelFormOf) unless that is `tmpl`'s default or seeded
/// already. Then the best ok configs (not the untuned default schedule's) recorded
/// on `target_id` for the tasks other than `task_id` whose template
/// (made by `factory` for their workload) has the name and version of `tmpl`, most similar
/// (WorkloadDistance to `workload`; ties: the older task) first, among the
/// `options.candidates` most similar tasks with ok records on `target_id`, mapped into
/// `tmpl`'s space (MapConfig); configs that do not map are skipped.
absl::StatusOr<TransferSeeds> TransferConfigs(const dataset::RecordDatabase& db, int64_t target_id, int64_t task_id,
                                              const codegen::Workload& workload, const codegen::Template& tmpl,
                                              const measure::TaskFactory& factory,
                                              const ConfigTransferOptions& options = {});

/// The fastest config (an ok record, not the untuned default schedule's) recorded on `target_id`
/// for each other task whose workload differs from `workload` only in its epilogue (bias, relu:
/// WorkloadDistance 0) and whose template has `tmpl`'s name and version, mapped into `tmpl`'s
/// space (MapConfig), at most `max_configs`, distinct, oldest such task first. A model's
/// conv+bias+relu and conv+bias are tasks of their own, searched side by side, and each search
/// may miss the kernel the other found: the tuner measures these beside a task's finalists.
absl::StatusOr<std::vector<search::Config>> SiblingConfigs(const dataset::RecordDatabase& db, int64_t target_id,
                                                           int64_t task_id, const codegen::Workload& workload,
                                                           const codegen::Template& tmpl,
                                                           const measure::TaskFactory& factory, int max_configs);

}  // namespace tune::tuner
