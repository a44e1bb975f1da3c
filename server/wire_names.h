// Names of the wire protocol's job and worker states, shared by the daemon and the CLI.
#pragma once

#include <string>

#include "tune/v1/tune.pb.h"

namespace tune::server {

/// "queued", "running", "done", "cancelled", "failed" ("?" for an unset state): what `tune
/// jobs` prints and the jobs table stores.
const char* JobStateName(v1::JobState state);

/// True for done, cancelled and failed.
bool IsFinished(v1::JobState state);
/// The state JobStateName gives `name`; JOB_STATE_UNSPECIFIED for any other text.
v1::JobState JobStateFromName(const std::string& name);

/// "idle", "busy", "quarantined", "expired" ("?" for an unset state).
const char* WorkerStateName(v1::WorkerState state);

}  // namespace tune::server
