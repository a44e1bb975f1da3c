// Dataset collection: N diverse measured configs per task of a list of models, resumably.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataset/record_database.h"
#include "measure/task.h"
#include "measure/task_factory.h"
#include "tuner/tuner.h"
#include "tuner/zoo.h"

namespace tune::tuner {

/// What `tune dataset collect` asks for.
struct CollectOptions {
  static constexpr int kMaxPerTask = 100000;

  int per_task = 0;            // records wanted per task and target, 1..kMaxPerTask
  /// The share of `per_task` drawn uniformly at random from the space (strategy "random"); the
  /// rest is proposed by `guided_strategy` so that good regions are represented. In [0, 1].
  double random_share = 0.7;
  std::string guided_strategy = "sa";
  /// The tuning loop's settings (seed, batch, threads, protocol, cost model, command). Budget,
  /// strategy, resume and finalists are set per phase by CollectDataset.
  TuneOptions tune;
};

/// The distinct tasks of `models` (zoo names, model files, ONNX files, as LoadModel reads
/// them), in order of first appearance; a workload that several models share is one task
/// (named after its first model and layer, counts added). The first model that cannot be
/// loaded is its LoadModel error. `layout_block` > 0 gives the models' convolutions their NCHWc
/// workloads (LoadModel's `layout_block`, from LayoutBlock).
absl::StatusOr<std::vector<TuneTask>> CollectTasks(const std::vector<std::string>& models,
                                                   const std::vector<std::string>& inputs = {},
                                                   int64_t layout_block = 0);

/// What a task's records on a target are, as collection counts them: the distinct configs
/// measured as search trials (the untuned default schedule and re-measured finalists of tuning
/// runs are not trials), with how many were proposed at random.
struct RecordCount {
  int records = 0;   // distinct configs measured
  int random = 0;    // of those, proposed by the "random" strategy
  int ok = 0;
  int failed = 0;
  double best_s = 0;  // fastest ok median; +inf when none
};

/// Counts `task`'s records on the target `target_key` in `db` (all zero when the task or the
/// target is not in it yet).
absl::StatusOr<RecordCount> CountRecords(const dataset::RecordDatabase& db, const measure::Task& task,
                                         const std::string& target_key);

/// One task after collection.
struct CollectedTask {
  TuneTask task;
  int before = 0;        // records it had before this invocation
  int measured_now = 0;  // records this invocation added
  RecordCount after;     // its records now
  bool already = false;  // it had `per_task` records already: nothing was measured
  std::string skipped;   // another live run held its lease: what Tuner said
};

/// Progress of a collection, after every committed batch. Called on the calling thread.
struct CollectProgress {
  int task_index = 0, task_count = 0;
  const TuneTask* task = nullptr;
  int64_t done = 0, total = 0;  // records measured so far by this invocation / to measure in all
  double elapsed_s = 0;
  double rate = 0;   // records per second so far
  double eta_s = 0;  // the rest at that rate; 0 when unknown
};
using CollectProgressFn = std::function<void(const CollectProgress&)>;

/// Measures every task of `tasks` (made by `factory`, one measure::Task each, same order as
/// `infos`) until it has options.per_task records on the factory's target: first the missing
/// random share, then the rest proposed by the guided strategy with its cost model, each phase
/// one tuner::Tuner run with a budget of exactly the missing count (resume on: configs already
/// recorded are never measured again). The untuned default schedule is not measured and no
/// finalists are re-measured: every record is one distinct config. A task with enough records
/// is reported through `say` ("task K: N records already") and not touched. Errors are the
/// tuning loop's (database, strategy contract); failing kernels are records.
absl::StatusOr<std::vector<CollectedTask>> CollectDataset(dataset::RecordDatabase* db, measure::TaskFactory& factory,
                                                          const std::vector<TuneTask>& infos,
                                                          const std::vector<measure::Task*>& tasks,
                                                          const CollectOptions& options,
                                                          CollectProgressFn progress = nullptr,
                                                          std::function<void(const std::string&)> say = nullptr);

}  // namespace tune::tuner
