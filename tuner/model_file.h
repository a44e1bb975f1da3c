// Models: built-in zoo names or JSON model files, turned into tuning tasks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tuner/tuner.h"
#include "tuner/zoo.h"

namespace tune::tuner {

/// Reads a JSON model file:
///   {"name": "my-net", "layers": [{"name": "conv1", "op": "conv2d",
///     "shape": "1,3,224,224,64,7,7,2,3", "bias": true, "relu": true, "count": 1}, ...]}
/// `shape` uses the syntax of Workload::Parse; a layer may give "key" (a Workload::Key(), for
/// shapes that syntax cannot say: unequal strides, pads or dilations per axis) instead of "op"
/// and "shape"; "relu6": true is the Clip(0, 6) epilogue. InvalidArgument (naming the file and the
/// offending layer) for malformed JSON, a field of the wrong type ("name" not a string, say),
/// unknown ops, bad shapes, counts outside 1..1000000, or counts of one workload that add up
/// beyond an int; NotFound when the file cannot be read.
absl::StatusOr<ZooModel> LoadModelFile(const std::string& path);

/// The same for a model file's contents; `path` names it in messages and gives the default
/// model name. Never throws or aborts, whatever `text` holds.
absl::StatusOr<ZooModel> ParseModelJson(const std::string& text, const std::string& path);

/// `model` is a zoo name, or else a path to a model file or an ONNX model (IsOnnxModel).
/// Identical workloads are merged (counts added). `inputs` are --input NAME=SHAPE texts for an
/// ONNX model's inputs; InvalidArgument when given for another model. An ONNX import failure
/// is InvalidArgument (or NotFound) with one line naming the file. With `layout_block` (the
/// vector lanes LayoutBlock gives) > 0 the model's activations are NCHWc: an ONNX model's graph
/// is planned so (graph::PlanBlockedLayout), and a layer list (zoo, model file) has its conv
/// layers turned into their NCHWc workloads by the same rule (BlockLayers: each conv in the
/// block graph::ConvLayoutBlock gives it); 0 keeps NCHW.
absl::StatusOr<ZooModel> LoadModel(const std::string& model, const std::vector<std::string>& inputs = {},
                                   int64_t layout_block = 0);

/// The vector lanes an activation layout `layout` for `target` (as --target spells it, or a
/// target's kind: "llvm", "cuda", "cuda:N") blocks channels by: 0 for "nchw"; for "nchwc" this
/// CPU's vector lanes, the conv2d template's vector width (16 with AVX-512, 8 with AVX2), from
/// which graph::ConvLayoutBlock picks each conv's block (the lanes, or half of them where the
/// lanes do not divide its channels). InvalidArgument for any other name, and for "nchwc" on a
/// CUDA target (the channel-blocked convolutions have no CUDA kernels). What `tune MODEL`,
/// `tune tasks`, `tune run` and `tune export` plan with.
absl::StatusOr<int64_t> LayoutBlock(const std::string& layout, const std::string& target);

/// `model` with every conv2d layer that has an NCHWc form for `lanes` vector lanes turned into
/// it, in the block graph::ConvLayoutBlock(workload, lanes) gives (groups 1 or depthwise; the
/// largest of lanes and lanes / 2 dividing C and OC), as the graph plan blocks it; other layers
/// unchanged.
ZooModel BlockLayers(ZooModel model, int64_t lanes);

/// True when `path` names an ONNX model: it ends in ".onnx", or it is a file whose first bytes
/// look like one (graph::LooksLikeOnnx).
bool IsOnnxModel(const std::string& path);

/// The tasks of the ONNX model at `path` (graph::ImportOnnx with `inputs` as --input texts):
/// one layer per distinct workload (named after its first node, with its node count), and
/// the summary line "PATH: N tuned nodes in M tasks; not tuned (built-in kernels): ...".
/// InvalidArgument when the model has no node tune can tune. With `layout_block` c > 0 the
/// tasks are those of the graph planned in NCHWc (graph::PlanBlockedLayout), the workloads
/// `tune run --layout nchwc` looks up.
absl::StatusOr<ZooModel> LoadOnnxModel(const std::string& path, const std::vector<std::string>& inputs = {},
                                       int64_t layout_block = 0);

/// `model` in the model-file format ParseModelJson reads back to the same workloads and
/// counts ("relu6" for relu6 layers; "key" where "shape" cannot say the workload).
std::string ModelToJson(const ZooModel& model);

/// One task per distinct layer.
std::vector<TuneTask> ExtractTasks(const ZooModel& model);

}  // namespace tune::tuner
