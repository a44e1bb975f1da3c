// The model-level NCHWc plan: activations stay channel-blocked between a model's convolutions,
// with layout transforms only where the layout changes.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "codegen/ir/workload.h"
#include "graph/graph.h"

namespace tune::graph {

/// Op types of the layout transform nodes the plan inserts (built-in kernels, CPU only), each
/// with an int attribute "block" (the channel block c):
///  "tune.ToBlocked": x[N,C,H,W] -> y[N,C/c,H,W,c], channel ch at y[..][ch/c][..][..][ch%c];
///  "tune.ToNchw":    its inverse, y[N,C/c,H,W,c] -> x[N,C,H,W].
inline constexpr char kToBlockedOp[] = "tune.ToBlocked";
inline constexpr char kToNchwOp[] = "tune.ToNchw";

/// True when `workload` is an NCHW conv2d that has an NCHWc form with channel block `block`
/// (> 0): groups 1 or depthwise (groups == C == OC), and `block` dividing C and OC. The one
/// eligibility rule of the graph plan and of layer lists (zoo models, model files).
bool BlockableConv(const codegen::Workload& workload, int64_t block);

/// `workload` with layout_block = `block`; only for BlockableConv workloads.
codegen::Workload BlockedConv(const codegen::Workload& workload, int64_t block);

/// Rewrites `graph` so its activations stay in NCHWc (channel blocks of `block`, > 0) between
/// convolutions. One pass in topological order, keeping for each NCHW float activation
/// (4-D, C divisible by `block`) its blocked twin "<name>/nchw<block>c" once one exists:
///  - a tuned conv2d (BlockableConv) becomes its NCHWc workload: it reads its input's twin (a
///    "tune.ToBlocked" node makes it when there is none yet) and writes the twin of its old
///    output;
///  - a layout-agnostic float op (Relu, Clip with scalar bounds, the other unary float ops of
///    the built-in kernels; Add, Sub, Mul, Div whose inputs are same-shape activations, not
///    broadcasts) whose every activation input has a twin runs on the twins and makes a twin;
///  - every other reader, and the graph outputs, get the NCHW tensor back, under its old name,
///    from one "tune.ToNchw" node per tensor, inserted before its first such reader;
/// then RemoveDeadNodes drops what nothing reads. The graph's inputs and outputs keep their
/// names and shapes, and the nodes stay in a topological order. InvalidArgument for a block
/// outside 1..1024 (the graph is then unchanged).
absl::Status PlanBlockedLayout(Graph& graph, int64_t block);

}  // namespace tune::graph
