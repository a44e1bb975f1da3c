// WorkerAgent: `tune worker` — registers a device with a daemon and keeps it registered.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::server {

struct WorkerAgentOptions {
  std::string server = "127.0.0.1:7117";
  std::string token;
  std::string tls_ca_pem;   // "" = plaintext
  std::string target = "llvm";  // "llvm" or "cuda[:N]" ("cuda:all": see PerDeviceAgents)
  std::string name;         // "" = host name + target
  int threads = 0;          // kernel threads on the CPU target; 0 = all cores
  int build_threads = 0;    // threads compiling a batch's kernels; 0 = all cores
  double max_backoff_s = 10;
  double stop_grace_s = 10;  // after a stop request: time to finish the batch in hand and get its Ack
};

/// Runs until `should_stop` returns true (polled at least every 100 ms). Each time the
/// daemon cannot be reached, or forgets the worker (expiry, restart), the agent registers
/// again, waiting 0.2 s, 0.4 s, ... up to max_backoff_s between tries. `on_event` gets one
/// line per state change ("registered as worker 3 ...", "daemon unreachable ...").
/// Returns OK after a requested stop; an error only for what retrying cannot fix: a bad
/// target, a wrong token, a protocol mismatch or a rejected registration.
///
/// A stop ends the agent within about stop_grace_s plus a few seconds of RPC deadlines,
/// whatever it is doing: idle or waiting for a batch, it leaves at once; measuring, it
/// finishes the batch if that takes less than stop_grace_s and returns its results, else it
/// abandons the batch (gives it back unmeasured, Release) — the measurement may still run on a
/// thread of its own, so the caller should end the process soon after; waiting for Acks, it
/// waits up to stop_grace_s (the results were delivered either way). It then tells the daemon
/// it leaves (Leave, with a deadline). `on_event` says which of these happened.
absl::Status RunWorkerAgent(const WorkerAgentOptions& options, const std::function<bool()>& should_stop,
                            const std::function<void(const std::string&)>& on_event);

/// The agents `options` stands for on a host with `device_count` CUDA devices and `cores` CPU
/// cores: for "cuda:all" one per GPU (target "cuda:I"; named NAME/cuda:I, or HOST/cuda:I by
/// default; each compiling on its share of the cores, at least one), else `options` alone.
/// Unavailable when "cuda:all" finds no device. Pure: touches no device. `tune worker
/// --target cuda:all` runs each of them as a `tune worker` process of its own (server/cli.cc):
/// an agent forks its measuring children, and a fork while another agent's thread compiles
/// can leave the child holding a lock it never gets back (hung until its deadline).
absl::StatusOr<std::vector<WorkerAgentOptions>> PerDeviceAgents(const WorkerAgentOptions& options, int device_count,
                                                                int cores);

}  // namespace tune::server
