// The wire protocol's version and the names of its job and worker states (daemon and CLI).
#pragma once

#include <cstdint>
#include <string>

#include "tune/v1/tune.pb.h"

namespace tune::server {

/// The daemon's version, as Health reports it.
inline constexpr char kDaemonVersion[] = "0.1";
/// The Worker service's protocol version: a worker speaking another is refused at Register.
inline constexpr uint32_t kWireProtocol = 1;

/// "queued", "running", "done", "cancelled", "failed" ("?" for an unset state): what `tune
/// jobs` prints and the jobs table stores.
const char* JobStateName(v1::JobState state);

/// True for done, cancelled and failed.
bool IsFinished(v1::JobState state);
/// The state JobStateName gives `name`; JOB_STATE_UNSPECIFIED for any other text.
v1::JobState JobStateFromName(const std::string& name);

/// "idle", "busy", "quarantined", "expired", "gone" ("?" for an unset state).
const char* WorkerStateName(v1::WorkerState state);

}  // namespace tune::server
