// Runs a graph on the CPU with every task's default schedule: the outputs the layout tests compare.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/graph.h"
#include "gtest/gtest.h"

namespace tune::test {

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
