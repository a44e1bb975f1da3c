// Models: built-in zoo names or JSON model files, turned into tuning tasks.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tuner/tuner.h"
#include "tuner/zoo.h"

namespace tune::tuner {

/// Reads a JSON model file:
///   {"name": "my-net", "layers": [{"name": "conv1", "op": "conv2d",
///     "shape": "1,3,224,224,64,7,7,2,3", "bias": true, "relu": true, "count": 1}, ...]}
/// `shape` uses the syntax of Workload::Parse. InvalidArgument (naming the file and the
/// offending layer) for malformed JSON, a field of the wrong type ("name" not a string, say),
/// unknown ops, bad shapes, counts outside 1..1000000, or counts of one workload that add up
/// beyond an int; NotFound when the file cannot be read.
absl::StatusOr<ZooModel> LoadModelFile(const std::string& path);

/// The same for a model file's contents; `path` names it in messages and gives the default
/// model name. Never throws or aborts, whatever `text` holds.
absl::StatusOr<ZooModel> ParseModelJson(const std::string& text, const std::string& path);

/// `model` is a zoo name, or else a path to a model file. Identical workloads are merged
/// (counts added).
absl::StatusOr<ZooModel> LoadModel(const std::string& model);

/// One task per distinct layer.
std::vector<TuneTask> ExtractTasks(const ZooModel& model);

}  // namespace tune::tuner
