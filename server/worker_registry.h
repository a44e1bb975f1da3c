// WorkerRegistry: the workers a daemon knows, their liveness and standing; no gRPC types.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::server {

/// kExpired: missed its heartbeats; kGone: said goodbye. Neither gets batches again (a worker
/// that comes back registers under a new id).
enum class WorkerState { kIdle, kBusy, kQuarantined, kExpired, kGone };

/// What a worker says about itself when it registers.
struct WorkerDesc {
  std::string name;
  std::string host;
  std::string target;      // as given to `tune worker`: "llvm", "cuda:0"
  std::string target_key;  // measure::Target::Key() of the device it measures
  std::string device;      // free text
  std::string target_json; // measure::Target::ToJson(): the device's limits for the templates
};

/// A registered worker as the daemon sees it. Times are seconds on the registry's clock.
struct WorkerEntry {
  uint64_t id = 0;
  WorkerDesc desc;
  WorkerState state = WorkerState::kIdle;
  double registered_at = 0;
  double last_seen = 0;
  uint64_t results = 0;    // results returned
  uint64_t batches = 0;    // batches completed
  uint32_t crashes = 0;    // batches lost to the worker dying or disconnecting, in a row
};

/// Thread-safe. Time is passed in by the caller (a monotonic clock in seconds) so that expiry
/// is testable without sleeping.
class WorkerRegistry {
 public:
  /// `expire_after_s`: a worker silent for longer is expired (its id then answers NotFound);
  /// `quarantine_after`: this many crashes in a row quarantine a worker.
  WorkerRegistry(double expire_after_s, uint32_t quarantine_after);

  /// Adds a worker and returns its id (ids start at 1 and are never reused). A worker with
  /// the name, host and target key of a quarantined one starts quarantined.
  /// InvalidArgument when the target or target key is empty.
  absl::StatusOr<uint64_t> Register(const WorkerDesc& desc, double now);

  /// Notes that worker `id` is alive. NotFound for an unknown, expired or gone id.
  absl::StatusOr<WorkerState> Touch(uint64_t id, double now);

  /// Marks workers silent for longer than the expiry as expired and returns their ids.
  std::vector<uint64_t> Expire(double now);

  /// Worker `id` said goodbye: it is gone (a quarantined one stays quarantined, so that it
  /// stays out if it registers again). NotFound for an unknown id.
  absl::Status Leave(uint64_t id, double now);

  /// Records that a batch leased to `id` ended: `crashed` = the worker died or disconnected
  /// holding it. Enough crashes in a row quarantine the worker. NotFound for an unknown id.
  absl::Status BatchEnded(uint64_t id, uint64_t results, bool crashed);

  /// Worker `id` as it stands; NotFound for an unknown id.
  absl::StatusOr<WorkerEntry> Get(uint64_t id) const;

  /// Whether worker `id` is live (idle or busy); false for an unknown id.
  bool IsLive(uint64_t id) const;

  /// Marks a live worker busy (holding a lease) or idle; quarantined and expired stay so.
  void SetBusy(uint64_t id, bool busy);

  /// A live worker's description with this target kind ("llvm", "cuda"), if any.
  std::optional<WorkerDesc> AnyLive(const std::string& kind) const;

  /// Every worker ever registered, by id.
  std::vector<WorkerEntry> List() const;

  /// Workers that are live (idle or busy), not quarantined or expired; with a `target_key`,
  /// only those measuring on that target.
  uint32_t LiveCount(const std::string& target_key = "") const;

 private:
  const double expire_after_s_;
  const uint32_t quarantine_after_;
  mutable std::mutex mu_;
  std::vector<WorkerEntry> workers_;  // index = id - 1
};

}  // namespace tune::server
