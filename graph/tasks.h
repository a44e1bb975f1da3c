// The tuning tasks of a Graph: distinct workloads with counts, and the ops left to built-ins.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/ir/workload.h"
#include "graph/graph.h"

namespace tune::graph {

/// One distinct workload of a graph: the first node (in graph order) that has it and how
/// many nodes share it.
struct GraphTask {
  std::string name;
  codegen::Workload workload;
  int count = 1;
};

struct GraphTasks {
  std::vector<GraphTask> tasks;             // in order of first appearance
  std::map<std::string, int> untuned_ops;   // ONNX op type -> nodes run by built-in kernels
  /// The keys of untuned_ops in order of first appearance in the graph (UntunedSummary lists
  /// ops by count, ties in this order; empty: the map's order).
  std::vector<std::string> untuned_order;
  /// How many nodes are tuned ("tune.Task"), the sum of the tasks' counts.
  int tuned_nodes = 0;
};

/// The tasks of `graph` (its "tune.Task" nodes, merged by Workload::Key()).
GraphTasks ExtractGraphTasks(const Graph& graph);

/// One line listing the untuned ops with counts (most frequent first), e.g.
/// "not tuned (built-in kernels): Add x8, MaxPool x1, GlobalAveragePool x1, Flatten x1";
/// empty when there are none.
std::string UntunedSummary(const GraphTasks& tasks);

}  // namespace tune::graph
