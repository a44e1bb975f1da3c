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
  // Workers per GPU: one compiles its batch while another measures; the GPU's lock
  // (measure/device_lock.h) keeps their measurements apart. 0 = the default: kDefaultGpuSlots
  // on a cuda target, 1 on the CPU (whose measurements would share the cores compiling).
  int slots = 0;
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

/// Workers per GPU when `slots` is 0. With one, a GPU idles while its worker compiles a batch
/// (NVRTC: a second or more per kernel, a straggler 10-40 s) and the daemon searches the next;
/// measured on a 2-GPU H200 host, one worker kept its GPU measuring 29% of a resnet-18 job.
inline constexpr int kDefaultGpuSlots = 2;

/// The agents `options` stands for on a host with `device_count` CUDA devices and `cores` CPU
/// cores: one per GPU and slot -- for "cuda:all" every GPU (target "cuda:I"), else the one
/// target; named NAME/cuda:I (NAME defaults to the host name), with "/S" for slot S (1-based)
/// when there are several, each compiling on its GPU's share of the cores (at least one; the
/// slots of a GPU share it, since they take turns compiling and measuring). One slot of a
/// named GPU, or the CPU, is `options` itself. Unavailable when "cuda:all" finds no
/// device; InvalidArgument for several slots on the CPU target. Pure: touches no device.
/// `tune worker` runs several as a `tune worker` process each (server/cli.cc): an agent forks
/// its measuring children, and a fork while another agent's thread compiles can leave the
/// child holding a lock it never gets back (hung until its deadline).
absl::StatusOr<std::vector<WorkerAgentOptions>> PerDeviceAgents(const WorkerAgentOptions& options, int device_count,
                                                                int cores);

}  // namespace tune::server
