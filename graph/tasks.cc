// The tuning tasks of a graph and the one-line summary of what is left to built-in kernels.
#include "graph/tasks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tune::graph {

GraphTasks ExtractGraphTasks(const Graph& graph) {
  GraphTasks out;
  std::map<std::string, size_t> by_key;
  for (const Node& node : graph.nodes) {
    if (node.task.has_value()) {
      ++out.tuned_nodes;
      const std::string key = node.task->workload.Key();
      auto it = by_key.find(key);
      if (it != by_key.end()) {
        ++out.tasks[it->second].count;
        continue;
      }
      by_key[key] = out.tasks.size();
      out.tasks.push_back({node.name, node.task->workload, 1});
      continue;
    }
    if (node.op == "Constant" || node.op == "Identity" || node.op == "Dropout") continue;
    if (out.untuned_ops[node.op]++ == 0) out.untuned_order.push_back(node.op);
  }
  return out;
}

std::string UntunedSummary(const GraphTasks& tasks) {
  if (tasks.untuned_ops.empty()) return "";
  std::vector<std::string> order = tasks.untuned_order;
  for (const auto& [op, count] : tasks.untuned_ops) {
    if (std::find(order.begin(), order.end(), op) == order.end()) order.push_back(op);
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return tasks.untuned_ops.at(a) > tasks.untuned_ops.at(b);
  });
  std::string line = "not tuned (built-in kernels): ";
  for (size_t i = 0; i < order.size(); ++i) {
    absl::StrAppend(&line, i ? ", " : "", order[i], " x", tasks.untuned_ops.at(order[i]));
  }
  return line;
}

}  // namespace tune::graph
