// Retrainer: the daemon's offline cost model per target, retrained in the background as records accumulate.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/offline_model.h"
#include "dataset/record_database.h"
#include "tuner/tuner.h"

namespace tune::tuner {

/// One retraining, as the daemon logs it.
struct RetrainEvent {
  std::string target_key;
  int64_t records = 0;   // records of the target in the database when the training started
  int groups = 0;        // tasks (ranking groups) trained on
  int64_t configs = 0;   // configs trained on
  double seconds = 0;    // loading, featurizing and training [s]
  std::string error;     // why the model was not replaced; "" when it was
};

struct RetrainerOptions {
  std::string db_path;         // the daemon's record database (opened read-only, on a connection of its own)
  int64_t every = 0;           // retrain a target after this many new records since its last training (> 0)
  std::string kind = "xgb";    // costmodel::CreateOfflineModel's name
  double poll_s = 1;           // how often the record counts are looked at [s]
  int max_per_task = 0;        // records per task trained on, the newest ones (0: all)
  uint64_t seed = 0;           // TrainOptions::seed
  int threads = 1;             // TrainOptions::threads
  /// A fresh untrained model; default costmodel::CreateOfflineModel(kind).
  std::function<absl::StatusOr<std::unique_ptr<costmodel::OfflineModel>>()> make_model;
  /// The groups of every task of a target; default tuner::LoadGroups.
  std::function<absl::StatusOr<std::vector<costmodel::TrainGroup>>(const dataset::RecordDatabase&, int64_t target_id,
                                                                   costmodel::InputNeeds needs, int max_per_task)>
      load_groups;
  /// Called after every training attempt (on the background thread, or CheckNow's caller).
  std::function<void(const RetrainEvent&)> on_retrain;
};

/// A model handed to one job: its own copy (jobs run on threads of their own) and a note for
/// the run record, e.g. "the daemon's xgb model of llvm/... (trained on 512 records at
/// 2026-11-27T03:40:00Z)".
struct RetrainedModel {
  std::shared_ptr<const costmodel::OfflineModel> model;
  std::string note;
};

/// Keeps one offline model per target of a record database: a background thread counts each
/// target's records every poll_s and retrains the target's model (from scratch, on every task's
/// records, tuner::LoadGroups) once `every` records were committed since its last training (the
/// first time: once the target has `every` records). Training never blocks anyone: the
/// previous model serves until the new one is ready. Failures (too few distinct latencies, a
/// database error) are reported to on_retrain and retried after the next `every` records;
/// they never end the thread. Thread-safe.
class Retrainer {
 public:
  /// Starts the background thread. InvalidArgument when `every` < 1 or db_path is empty.
  static absl::StatusOr<std::unique_ptr<Retrainer>> Start(RetrainerOptions options);
  /// A retrainer without a thread: only CheckNow trains (tests, tools).
  static absl::StatusOr<std::unique_ptr<Retrainer>> Manual(RetrainerOptions options);
  /// Stops the thread (a training in progress is finished first).
  ~Retrainer();
  Retrainer(const Retrainer&) = delete;
  Retrainer& operator=(const Retrainer&) = delete;

  /// A private copy of the latest model of `target_key`; nullopt before its first training.
  std::optional<RetrainedModel> Latest(const std::string& target_key) const;
  /// Looks at every target now, on the caller's thread, and retrains those due. Returns the
  /// number of models replaced. Serialized with the background thread.
  int CheckNow();
  /// Models replaced so far, over all targets.
  int64_t retrains() const;

 private:
  explicit Retrainer(RetrainerOptions options);
  void Loop();
  /// Trains target `target_id` (`key`) on its records; the event says how it went.
  RetrainEvent Train(const dataset::RecordDatabase& db, int64_t target_id, const std::string& key, int64_t records);

  struct Stored {
    std::string kind;
    std::string payload;  // SavePayload
    std::string note;
  };

  RetrainerOptions options_;
  std::mutex check_mu_;                              // one CheckNow at a time
  std::unique_ptr<dataset::RecordDatabase> db_;      // guarded by check_mu_
  std::map<int64_t, int64_t> trained_at_;            // target id -> its record count at the last attempt; check_mu_
  mutable std::mutex mu_;                            // guards what follows
  std::map<std::string, Stored> models_;             // by target key
  int64_t retrains_ = 0;
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

/// What a daemon's job starts from: when `options` has no pretrained model of its own (no
/// artifact came with the job), its strategy ranks with a cost model, and `retrainer` (may be
/// null) has a model of `target_key`, a copy of it, with its note for the run record. True
/// when one was given.
bool UseLatestModel(const Retrainer* retrainer, const std::string& target_key, TuneOptions* options);

}  // namespace tune::tuner
