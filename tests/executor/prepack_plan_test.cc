// Execution plans and schedules that pack their weight once (prepack): kept only where the weight
// is a constant of the model; a dense whose weight another node computes packs it every call.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/fuse.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/graph/onnx_writer.h"

namespace tune::executor {
namespace {

namespace px = tune::test_onnx;

/// out[m][n] = sum_k x[m][k] * w[n][k].
std::vector<float> PrepackPlanDense(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k) {
  std::vector<float> out(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int t = 0; t < k; ++t) acc += static_cast<double>(x[i * k + t]) * w[j * k + t];
      out[i * n + j] = static_cast<float>(acc);
    }
  }
  return out;
}

bool PrepackPlanClose(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-4 + 1e-3 * std::fabs(want[i]))) return false;
  }
  return true;
}

// Two Gemms (transB) of one workload: one with a constant B, one whose B is a graph input. With
// a prepack schedule, the plan makes two kernels; across runs with new values of the input B,
// both outputs follow their weights.
TEST(PrepackPlanTest, ComputedWeightIsPackedEveryRun) {
  constexpr int kM = 4, kN = 24, kK = 40;
  std::mt19937_64 rng(20261127);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> constant(kN * kK);
  for (float& v : constant) v = value(rng);
  const std::string bytes = px::Model(
      {px::Node("Gemm", {"x", "w"}, {"y1"}, {px::AttrInt("transB", 1)}, "computed"),
       px::Node("Gemm", {"x", "c"}, {"y2"}, {px::AttrInt("transB", 1)}, "constant")},
      {px::Value("x", px::kFloat, {kM, kK}), px::Value("w", px::kFloat, {kN, kK})},
      {px::Value("y1", px::kFloat, {kM, kN}), px::Value("y2", px::kFloat, {kM, kN})},
      {px::TensorF32("c", {kN, kK}, constant)});
  auto g = graph::ImportOnnxBytes(bytes, "prepack.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::BindTunedNodes(*g).ok());
  auto backend = CreateBackend("llvm", 1);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::shared_ptr<const Backend> shared = std::move(*backend);
  auto choices = ChooseTaskKernels(*g, *shared, nullptr);
  ASSERT_TRUE(choices.ok()) << choices.status();
  ASSERT_EQ(choices->size(), 1u);
  TaskKernelChoice& choice = (*choices)[0];
  ASSERT_EQ(choice.workload.op, codegen::OpKind::kDense);
  auto tmpl = shared->MakeTemplate(choice.workload);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  nlohmann::json j = nlohmann::json::parse(choice.config_json);
  j["pack_b"] = {1};
  j["prepack"] = {1};
  auto config = (*tmpl)->space().FromJson(j.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ((*tmpl)->space().WhyInvalid(*config), "");
  choice.config_json = (*tmpl)->space().ToJson(*config);

  auto plan = ExecutionPlan::Create(*g, shared, *choices);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->task_kernels(), 2) << "one kernel per kind of weight";
  std::vector<float> x(kM * kK), w(kN * kK), y1(kM * kN), y2(kM * kN);
  for (int run = 0; run < 3; ++run) {
    for (float& v : x) v = value(rng);
    for (float& v : w) v = value(rng);
    ASSERT_TRUE((*plan)->Run({x.data(), w.data()}, {y1.data(), y2.data()}).ok());
    EXPECT_TRUE(PrepackPlanClose(y1, PrepackPlanDense(x, w, kM, kN, kK))) << "run " << run << ": the computed weight";
    EXPECT_TRUE(PrepackPlanClose(y2, PrepackPlanDense(x, constant, kM, kN, kK))) << "run " << run << ": the constant";
  }
}

}  // namespace
}  // namespace tune::executor
