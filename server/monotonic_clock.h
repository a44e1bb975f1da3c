// MonotonicSeconds: the daemon's clock for leases, worker liveness and job timing.
#pragma once

#include <chrono>

namespace tune::server {

/// Seconds on the steady clock (an arbitrary origin; only differences mean anything).
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace tune::server
