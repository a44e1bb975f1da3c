// Names of the wire protocol's job and worker states.
#include "server/wire_names.h"

namespace tune::server {

const char* JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_QUEUED: return "queued";
    case v1::JOB_RUNNING: return "running";
    case v1::JOB_DONE: return "done";
    case v1::JOB_CANCELLED: return "cancelled";
    case v1::JOB_FAILED: return "failed";
    default: return "?";
  }
}

v1::JobState JobStateFromName(const std::string& name) {
  for (v1::JobState s : {v1::JOB_QUEUED, v1::JOB_RUNNING, v1::JOB_DONE, v1::JOB_CANCELLED, v1::JOB_FAILED}) {
    if (name == JobStateName(s)) return s;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

bool IsFinished(v1::JobState state) {
  return state == v1::JOB_DONE || state == v1::JOB_CANCELLED || state == v1::JOB_FAILED;
}

const char* WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_IDLE: return "idle";
    case v1::WORKER_BUSY: return "busy";
    case v1::WORKER_QUARANTINED: return "quarantined";
    case v1::WORKER_EXPIRED: return "expired";
    case v1::WORKER_GONE: return "gone";
    default: return "?";
  }
}

}  // namespace tune::server
