// The lowered loop nest as a sequence and a graph of feature vectors, for the LSTM and GNN cost models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ir/ir.h"

namespace tune::costmodel {

/// Bumped whenever the meaning, order or number of node features, the node order or the edge
/// kinds change; artifacts of the sequence and graph models record it and refuse another.
inline constexpr int kGraphFeatureVersion = 4;  // 2: the GPU launch fields of blockIdx loops;
                                                 // 3: statements' warp transactions; 4: the
                                                 // busiest SM's share on blockIdx loops

/// What a node of the program graph stands for.
enum class NodeKind : int8_t {
  kLoop = 0,       // a For loop of the lowered program
  kStatement = 1,  // a store (buffer write) with the loads of its value
  kBuffer = 2,     // a buffer (argument, heap scratch, local tile, shared memory)
};

/// Edge kinds of the program graph (directed; the GNN passes messages along both directions).
enum class EdgeKind : int8_t {
  kNests = 0,   // loop -> the loop or statement directly inside it
  kNext = 1,    // a loop or statement -> the next sibling in program order
  kReads = 2,   // buffer -> a statement that loads from it
  kWrites = 3,  // statement -> the buffer it stores to
};
inline constexpr int kNumEdgeKinds = 4;

/// Floats per node (see program_graph.cc for the fields and their units).
inline constexpr int kNodeFeatures = 78;

/// A lowered program as nodes with fixed-length feature rows, an order for sequence models
/// and typed edges for graph models. Nodes are numbered in program order (pre-order of the
/// loop nest: a loop before what it contains), buffers after every loop and statement.
struct ProgramGraph {
  int num_nodes = 0;
  std::vector<NodeKind> kinds;       // num_nodes
  std::vector<float> features;       // num_nodes * kNodeFeatures, row-major, finite
  /// The nodes a sequence model reads, in program order: every loop and statement (buffers
  /// are described inside the statements' rows). Never empty for a kernel with a store.
  std::vector<int32_t> sequence;
  std::vector<int32_t> edge_src, edge_dst;  // one entry per edge
  std::vector<EdgeKind> edge_kinds;
};

/// The graph of `func`. Pure and thread-safe. A kernel without loops or stores gives one
/// all-zero statement node, so every graph has a non-empty sequence. Programs with more than
/// kMaxGraphNodes loops and statements keep the first kMaxGraphNodes in program order.
inline constexpr int kMaxGraphNodes = 256;
ProgramGraph ExtractProgramGraph(const codegen::LoweredFunc& func);

/// One name per node feature (kNodeFeatures), for documentation and debugging.
const std::vector<std::string>& NodeFeatureNames();

}  // namespace tune::costmodel
