// The model-level NCHWc plan: activations stay channel-blocked between a model's convolutions,
// with layout transforms only where the layout or the channel block changes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "codegen/ir/workload.h"
#include "graph/graph.h"

namespace tune::graph {

/// Op types of the layout transform nodes the plan inserts (built-in kernels, CPU only):
///  "tune.ToBlocked": x[N,C,H,W] -> y[N,C/c,H,W,c], channel ch at y[..][ch/c][..][..][ch%c],
///                    c its int attribute "block";
///  "tune.ToNchw":    its inverse, y[N,C/c,H,W,c] -> x[N,C,H,W], c its attribute "block";
///  "tune.Reblock":   x[N,C/a,H,W,a] -> y[N,C/b,H,W,b], the same channels in blocks of b, a and
///                    b its int attributes "from" and "to" (both dividing C).
inline constexpr char kToBlockedOp[] = "tune.ToBlocked";
inline constexpr char kToNchwOp[] = "tune.ToNchw";
inline constexpr char kReblockOp[] = "tune.Reblock";

/// True when `workload` is an NCHW conv2d that has an NCHWc form with channel block `block`
/// (> 0): groups 1 or depthwise (groups == C == OC), and `block` dividing C and OC. The test of
/// one block; which block a conv gets is ConvLayoutBlock's.
bool BlockableConv(const codegen::Workload& workload, int64_t block);

/// `workload` with layout_block = `block`; only for BlockableConv workloads.
codegen::Workload BlockedConv(const codegen::Workload& workload, int64_t block);

/// The channel blocks of an NCHWc plan for `lanes` float32 vector lanes, largest first: lanes,
/// and lanes / 2 when that is a whole number of at least 4 (16 and 8 with AVX-512, 8 and 4
/// with AVX2, 4 with SSE).
std::vector<int64_t> LayoutBlocks(int64_t lanes);

/// The one rule for a conv's NCHWc block, for `lanes` vector lanes: the largest of
/// LayoutBlocks(lanes) for which BlockableConv holds (it divides both C and OC; a depthwise
/// conv has C == OC), or 0 when none does (the conv stays NCHW). The graph plan
/// (PlanBlockedLayout) and layer lists (zoo models, model files: tuner::BlockLayers) both
/// decide with it, so what `tune MODEL --layout nchwc` tunes is what `tune run` looks up.
/// 24 channels with 16 lanes: 8; 64: 16; 3: 0.
int64_t ConvLayoutBlock(const codegen::Workload& workload, int64_t lanes);

/// Rewrites `graph` so its activations stay in NCHWc between convolutions, each conv in the
/// block ConvLayoutBlock(its workload, `lanes`) gives it (`lanes` > 0). One pass in topological
/// order, keeping for each NCHW float activation its blocked twins "<name>/nchw<c>c" (one per
/// block c some node reads it in) once they exist:
///  - a tuned conv2d with a block c becomes its NCHWc workload: it reads its input's twin of
///    block c and writes a twin of block c of its old output. A missing input twin is made by
///    a "tune.Reblock" from the twin the input's producer writes, or by a "tune.ToBlocked"
///    from the NCHW tensor when its producer writes NCHW; once per tensor and block;
///  - a layout-agnostic float op (Relu, Clip with scalar bounds, the other unary float ops of
///    the built-in kernels; Add, Sub, Mul, Div whose inputs are same-shape activations, not
///    broadcasts) whose every activation input has a twin runs on twins of one block and makes
///    a twin of that block: the largest block every input already has a twin of, else the
///    largest of the inputs' blocks (the producer's, for each), the others re-blocked to it;
///  - every other reader, and the graph outputs, get the NCHW tensor back, under its old name,
///    from one "tune.ToNchw" node per tensor (from its producer's twin), inserted before its
///    first such reader;
/// then RemoveDeadNodes drops what nothing reads. The graph's inputs and outputs keep their
/// names and shapes, and the nodes stay in a topological order. InvalidArgument for `lanes`
/// outside 1..1024 (the graph is then unchanged).
absl::Status PlanBlockedLayout(Graph& graph, int64_t lanes);

}  // namespace tune::graph
