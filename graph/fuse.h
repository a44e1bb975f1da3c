// The importer's graph rewrites after shape inference: BatchNormalization folded into Conv,
// Conv/Gemm/MatMul with their epilogues bound to tuned nodes, dead nodes and tensors removed.
#pragma once

#include "absl/status/status.h"
#include "graph/graph.h"

namespace tune::graph {

/// Folds every inference-form BatchNormalization whose input is the only use of a Conv's
/// output (constant weight, constant or absent bias, constant BN parameters) into that conv:
/// new constant weight and bias tensors named "<conv>/bn_folded_weight" and
/// "<conv>/bn_folded_bias", fused = {"Conv", "BatchNormalization"}. Other BatchNormalizations
/// stay built-in nodes. Errors are InvalidArgument without a file prefix.
absl::Status FoldBatchNorms(Graph& graph);

/// Binds Conv (2-D), Gemm and MatMul nodes, with a following bias Add (MatMul) and
/// Relu or Clip(0, 6), to "tune.Task" nodes (graph.h); asymmetric conv pads become a "Pad"
/// node before the conv. InvalidArgument "node 'X' (Conv): only 2-D convolutions with
/// constant weights are tuned" for a conv tune cannot tune.
absl::Status BindTunedNodes(Graph& graph);

/// Drops nodes none of whose outputs reach a graph output, and tensors no node, input or
/// output names.
void RemoveDeadNodes(Graph& graph);

}  // namespace tune::graph
