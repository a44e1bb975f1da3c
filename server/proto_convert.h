// Translations between the tune.v1 wire messages and the server's and tuner's domain types.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/lease_queue.h"
#include "server/worker_registry.h"
#include "tuner/tuner.h"
#include "tuner/tuning_flags.h"
#include "tuner/zoo.h"
#include "tune/v1/tune.pb.h"

namespace tune::server {

v1::WorkerState ToProto(WorkerState state);
/// A registry entry as `tune workers` lists it; `now` is on the registry's clock.
v1::WorkerInfo ToProto(const WorkerEntry& entry, double now);
/// The worker a Register request describes.
WorkerDesc WorkerDescOf(const v1::RegisterRequest& request);

/// A leased batch as sent to its worker; `deadline_s` is the lease time.
v1::Batch ToProto(uint64_t batch_id, const BatchSpec& spec, double deadline_s);
/// Most samples one result may carry.
inline constexpr int kMaxResultSamples = 100000;
/// The results a worker returned, in the batch's config order, once each is possible:
/// InvalidArgument ("invalid result I of batch B: ...") for an index that is not its
/// position, an unknown status, a time (sample, build or wall) that is negative, NaN or
/// infinite, more than kMaxResultSamples samples, a calls-per-sample count past int, or an ok
/// result without samples or with 0 calls per sample.
absl::StatusOr<std::vector<BatchResult>> BatchResultsOf(const v1::Results& results);

/// The model a job request names: a zoo model, or the model file it carries. NotFound for an
/// unknown zoo name, InvalidArgument for a bad model file or none.
absl::StatusOr<tuner::ZooModel> ModelOf(const v1::SubmitJobRequest& request);
/// Limits of a job request's strategy options and measurement protocol (the command line's).
inline constexpr int kMaxStrategyOptions = 256;
inline constexpr int kMaxProtocolCalls = 1000;        // warm-up calls, repeats
inline constexpr double kMaxProtocolSeconds = 1e8;    // timeout, cutoff, min repeat time
/// OK when every number of a job request is in range: trials 1..kMaxTrials, total_trials
/// 0..kMaxTotalTrials, batch 0..kMaxBatch (0 = default), and the protocol's fields (finite,
/// within the limits above); InvalidArgument naming the field, its range and its value.
absl::Status CheckJobRanges(const v1::SubmitJobRequest& request);

/// OK when every field of a measurement protocol is within the ranges above (the daemon checks
/// a job's protocol at submit, a worker checks each batch's); InvalidArgument naming the field.
absl::Status CheckProtocolRanges(const measure::MeasureProtocol& protocol);
/// The tuner options a job request asks for (unset fields keep the defaults), checked by
/// CheckJobRanges and as tuner::ToTuneOptions checks them; InvalidArgument for an
/// unreadable protocol, or a cost_model_artifact that is not a .tcm this build reads or is of
/// another target family than the request's target (tuner::UsePretrained).
absl::StatusOr<tuner::TuneOptions> TuneOptionsOf(const v1::SubmitJobRequest& request);
/// Writes `flags` into a job request (the protocol as MeasureProtocol JSON; a --cost-model
/// FILE.tcm as the file's bytes in cost_model_artifact, cost_model "auto"); the errors are
/// tuner::ToTuneOptions's.
absl::Status SetTuningFlags(const tuner::TuningFlags& flags, v1::SubmitJobRequest* request);

}  // namespace tune::server
