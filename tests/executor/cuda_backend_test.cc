// The CUDA backend: target parsing, refusal without a GPU, and on a GPU whole models through an
// ExecutionPlan (tuned kernels on default schedules, built-in GPU kernels) against the CPU backend.
#include "executor/cuda_backend.h"
#include "tests/executor/cuda_test_helper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "executor/execution_plan.h"
#include "executor/task_kernels.h"
#include "graph/onnx_import.h"

namespace tune::executor {
namespace {

TEST(CudaBackendTest, OrdinalOfTarget) {
  EXPECT_EQ(*CudaOrdinal("cuda"), 0);
  std::mt19937 rng(7);
  const int n = 1 + static_cast<int>(rng() % 7);
  EXPECT_EQ(*CudaOrdinal("cuda:" + std::to_string(n)), n);
  EXPECT_TRUE(absl::IsInvalidArgument(CudaOrdinal("cuda:").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CudaOrdinal("cuda:-1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CudaOrdinal("cuda:x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CudaOrdinal("llvm").status()));
}

TEST(CudaBackendTest, NoDeviceIsUnavailableNotACrash) {
  auto backend = CudaBackend::Create(0);
  if (backend.ok()) {
    EXPECT_EQ((*backend)->target().kind, "cuda");
    EXPECT_EQ((*backend)->target().device, 0);
    EXPECT_EQ((*backend)->target().cpu.rfind("sm_", 0), 0u) << (*backend)->target().cpu;
    return;
  }
  EXPECT_TRUE(absl::IsUnavailable(backend.status()) || absl::IsNotFound(backend.status())) << backend.status();
}

/// A plan of `graph` on `backend` with each tuned node's default schedule.
std::unique_ptr<ExecutionPlan> CudaModelPlan(const graph::Graph& graph, std::shared_ptr<const Backend> backend) {
  auto choices = ChooseTaskKernels(graph, *backend, nullptr);
  EXPECT_TRUE(choices.ok()) << choices.status();
  if (!choices.ok()) return nullptr;
  auto plan = ExecutionPlan::Create(graph, std::move(backend), *choices);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : nullptr;
}

TEST(CudaBackendGpuTest, ModelsMatchTheCpuBackend) {
  std::string why;
  std::shared_ptr<CudaBackend> gpu = SharedCudaBackend(&why);
  if (gpu == nullptr) GTEST_SKIP() << "no CUDA device: " << why;
  auto cpu = CreateBackend("llvm", 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::shared_ptr<const Backend> cpu_backend = *std::move(cpu);
  std::mt19937 rng(5151);
  for (const std::string file : {"resnet18.onnx", "mobilenet_v2.onnx", "encoder.onnx"}) {
    SCOPED_TRACE(file);
    auto graph = graph::ImportOnnx(std::string(TUNE_ONNX_DIR) + "/" + file);
    ASSERT_TRUE(graph.ok()) << graph.status();
    std::unique_ptr<ExecutionPlan> on_cpu = CudaModelPlan(*graph, cpu_backend);
    std::unique_ptr<ExecutionPlan> on_gpu = CudaModelPlan(*graph, gpu);
    ASSERT_TRUE(on_cpu && on_gpu);
    ASSERT_TRUE(gpu->CompileOpKernels().ok());
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<const void*> in_ptrs;
    for (const TensorDesc& d : on_cpu->inputs()) {
      std::vector<uint8_t> bytes(d.Bytes());
      for (int64_t i = 0; i < d.NumElements(); ++i) {
        if (d.dtype == graph::DType::kFloat32) {
          float v = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng) * (rng() % 2 ? 1.0f : -1.0f);
          std::memcpy(bytes.data() + 4 * i, &v, 4);
        } else if (d.dtype == graph::DType::kInt64) {
          const int64_t v = 1 + static_cast<int64_t>(rng() % 7);
          std::memcpy(bytes.data() + 8 * i, &v, 8);
        } else {
          bytes[i] = 1;
        }
      }
      inputs.push_back(std::move(bytes));
      in_ptrs.push_back(inputs.back().data());
    }
    std::vector<std::vector<float>> want, got;
    std::vector<void*> want_ptrs, got_ptrs;
    for (const TensorDesc& d : on_cpu->outputs()) {
      ASSERT_EQ(d.dtype, graph::DType::kFloat32);
      want.emplace_back(d.NumElements(), 0.0f);
      got.emplace_back(d.NumElements(), std::nanf(""));
    }
    for (size_t i = 0; i < want.size(); ++i) {
      want_ptrs.push_back(want[i].data());
      got_ptrs.push_back(got[i].data());
    }
    ASSERT_TRUE(on_cpu->Run(in_ptrs, want_ptrs).ok());
    ASSERT_TRUE(on_gpu->Run(in_ptrs, got_ptrs).ok());
    absl::Status synced = gpu->Synchronize();
    ASSERT_TRUE(synced.ok()) << synced;
    // A second run on the same plan gives the same outputs (scratch counters reset, no state).
    std::vector<std::vector<float>> again = got;
    std::vector<void*> again_ptrs;
    for (auto& v : again) again_ptrs.push_back(v.data());
    ASSERT_TRUE(on_gpu->Run(in_ptrs, again_ptrs).ok());
    ASSERT_TRUE(gpu->Synchronize().ok());
    for (size_t o = 0; o < want.size(); ++o) {
      float scale = 1.0f;
      for (float v : want[o]) scale = std::max(scale, std::fabs(v));
      int bad = 0;
      for (size_t i = 0; i < want[o].size() && bad < 5; ++i) {
        if (!(std::fabs(got[o][i] - want[o][i]) <= 1e-3f * scale)) {
          ADD_FAILURE() << "output " << o << "[" << i << "]: gpu " << got[o][i] << ", cpu " << want[o][i];
          ++bad;
        }
      }
      EXPECT_EQ(0, std::memcmp(got[o].data(), again[o].data(), got[o].size() * sizeof(float))) << "output " << o;
    }
  }
}

}  // namespace
}  // namespace tune::executor
