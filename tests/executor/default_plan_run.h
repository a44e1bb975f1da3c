// What the executor's layout tests share: float tensors, the layout copy nodes, and a graph run
// on the CPU with every task's default schedule (the outputs they compare).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/backend.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/graph.h"
#include "graph/layout.h"
#include "gtest/gtest.h"

namespace tune::test {

/// A float32 tensor named `name` of `shape`.
inline graph::Tensor FloatTensor(const std::string& name, std::vector<int64_t> shape) {
  graph::Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  return t;
}

/// The layout copies in channel blocks of `block`: first tune.ToBlocked, then tune.ToNchw.
inline std::pair<graph::Node, graph::Node> LayoutCopyNodes(int64_t block) {
  graph::Node to;
  to.name = "to";
  to.op = graph::kToBlockedOp;
  to.attributes["block"] = block;
  graph::Node back = to;
  back.op = graph::kToNchwOp;
  return {to, back};
}

/// The graph's outputs on `inputs` (one vector per graph input, in order) with default
/// schedules on the CPU at `threads` threads; empty after a failure, which is reported.
inline std::vector<std::vector<float>> RunDefaultPlan(const graph::Graph& g,
                                                      const std::vector<std::vector<float>>& inputs, int threads) {
  auto backend = executor::CreateBackend("llvm", threads);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  std::shared_ptr<const executor::Backend> shared = *std::move(backend);
  auto choices = executor::ChooseTaskKernels(g, *shared, nullptr);
  EXPECT_TRUE(choices.ok()) << choices.status();
  if (!choices.ok()) return {};
  auto plan = executor::ExecutionPlan::Create(g, shared, *choices);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  std::vector<std::vector<float>> outputs;
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const auto& v : inputs) in.push_back(v.data());
  for (const executor::TensorDesc& d : (*plan)->outputs()) outputs.emplace_back(d.NumElements(), NAN);
  for (auto& v : outputs) out.push_back(v.data());
  EXPECT_TRUE((*plan)->Run(in, out).ok());
  return outputs;
}

}  // namespace tune::test
