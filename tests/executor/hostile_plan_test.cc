// Execution plans and built-in kernels on hostile graphs (defects the onnx_import fuzz target
// found): tensors beyond this machine's memory, empty tensors, int64 division that traps, a
// broadcast MatMul whose batch table would need terabytes.
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/builtin_ops.h"
#include "executor/execution_plan.h"
#include "gmock/gmock.h"
#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "tests/graph/onnx_writer.h"

namespace tune::executor {
namespace {

using ::testing::HasSubstr;
namespace hx = tune::test_onnx;

graph::Tensor HostileTensor(const std::string& name, graph::DType dtype, std::vector<int64_t> shape) {
  return graph::Tensor{name, dtype, std::move(shape), std::nullopt};
}

graph::Node HostileNode(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
  graph::Node n;
  n.name = "n";
  n.op = op;
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

// A graph input of 1e12 floats (4 TB) imports but the plan refuses it as InvalidArgument
// naming the machine's limit, before any memory is taken (it asked the allocator for 4 TB).
TEST(HostilePlanTest, TensorsBeyondThisMachinesMemoryAreRefused) {
  auto g = graph::ImportOnnxBytes(hx::Model({hx::Node("Relu", {"x"}, {"y"})}, {hx::Value("x", hx::kFloat, {1000000000000})},
                                            {hx::Value("y", hx::kFloat, {})}),
                                  "tera.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  auto backend = CreateBackend("llvm", 1);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::shared_ptr<const Backend> shared = std::move(*backend);
  auto plan = ExecutionPlan::Create(*g, shared, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr("this machine allows"));
  EXPECT_THAT(plan.status().message(), HasSubstr("tensor 'x'"));

  // Many tensors that fit one by one but not together (ten Relus of 1/8 of the memory each,
  // all graph outputs, so all live at the end).
  const int64_t elements = std::max<int64_t>(measure::HostMemoryBytes() / 8 / 4, 1 << 20);
  std::vector<std::string> nodes, outputs;
  for (int i = 0; i < 10; ++i) {
    nodes.push_back(hx::Node("Relu", {"x"}, {"y" + std::to_string(i)}));
    outputs.push_back(hx::Value("y" + std::to_string(i), hx::kFloat, {}));
  }
  g = graph::ImportOnnxBytes(hx::Model(nodes, {hx::Value("x", hx::kFloat, {elements})}, outputs), "many.onnx");
  ASSERT_TRUE(g.ok()) << g.status();
  plan = ExecutionPlan::Create(*g, shared, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("of memory at once; this machine allows"));
}

// int64 Div of INT64_MIN by -1 trapped (SIGFPE); now it wraps, and x / 0 is 0. Add, Sub and
// Mul wrap as two's complement.
TEST(HostilePlanTest, Int64ArithmeticNeverTraps) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  std::vector<graph::Tensor> ins = {HostileTensor("a", graph::DType::kInt64, {4}), HostileTensor("b", graph::DType::kInt64, {4})};
  graph::Tensor out = HostileTensor("c", graph::DType::kInt64, {4});
  const std::vector<int64_t> a = {lo, 7, hi, lo}, b = {-1, 0, 2, -1};
  for (const std::string op : {"Div", "Add", "Sub", "Mul"}) {
    auto kernel = CreateBuiltinKernel(HostileNode(op, {"a", "b"}, {"c"}), {&ins[0], &ins[1]}, {&out}, 17);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<int64_t> c(4, 123);
    const void* in_ptrs[] = {a.data(), b.data()};
    void* out_ptrs[] = {c.data()};
    (*kernel)->Run(in_ptrs, out_ptrs);
    if (op == "Div") EXPECT_EQ(c, (std::vector<int64_t>{lo, 0, hi / 2, lo}));
    if (op == "Add") EXPECT_EQ(c, (std::vector<int64_t>{hi, 7, lo + 1, hi}));
    if (op == "Mul") EXPECT_EQ(c, (std::vector<int64_t>{lo, 0, -2, lo}));
  }
}

// Elementwise kernels over an empty output divided by its zero extent (SIGFPE); a node whose
// outputs are all empty now writes nothing.
TEST(HostilePlanTest, EmptyOutputsRunWithoutDividingByZero) {
  graph::Tensor a = HostileTensor("a", graph::DType::kFloat32, {0, 3});
  graph::Tensor b = HostileTensor("b", graph::DType::kFloat32, {1, 3});
  graph::Tensor c = HostileTensor("c", graph::DType::kFloat32, {0, 3});
  for (const std::string op : {"Add", "Mul", "Relu", "Softmax", "ReduceSum", "Transpose"}) {
    const bool binary = op == "Add" || op == "Mul";
    graph::Node node = HostileNode(op, binary ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"a"}, {"c"});
    graph::Tensor out = c;
    if (op == "ReduceSum") out.shape = {1, 3};
    if (op == "Transpose") out.shape = {3, 0};
    std::vector<const graph::Tensor*> ins = {&a};
    if (binary) ins.push_back(&b);
    auto kernel = CreateBuiltinKernel(node, ins, {&out}, 11);
    if (!kernel.ok()) continue;  // a refusal is fine; a kernel must run
    float in_a[1] = {0}, in_b[3] = {1, 2, 3}, res[3] = {0, 0, 0};
    const void* in_ptrs[] = {in_a, in_b};
    void* out_ptrs[] = {res};
    (*kernel)->Run(in_ptrs, out_ptrs);
  }
  SUCCEED();
}

// A broadcast MatMul with an empty output but batch extents multiplying to 2^40 built a
// table of 2^40 offsets (std::bad_alloc); its kernel is now made without one.
TEST(HostilePlanTest, EmptyMatMulWithHugeBatchMakesNoTable) {
  graph::Tensor a = HostileTensor("a", graph::DType::kFloat32, {int64_t{1} << 20, int64_t{1} << 20, 0, 4});
  graph::Tensor b = HostileTensor("b", graph::DType::kFloat32, {1, 1, 4, 3});
  graph::Tensor c = HostileTensor("c", graph::DType::kFloat32, {int64_t{1} << 20, int64_t{1} << 20, 0, 3});
  auto kernel = CreateBuiltinKernel(HostileNode("MatMul", {"a", "b"}, {"c"}), {&a, &b}, {&c}, 13);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  float unused[12] = {};
  const void* in_ptrs[] = {unused, unused};
  void* out_ptrs[] = {unused};
  (*kernel)->Run(in_ptrs, out_ptrs);
}

}  // namespace
}  // namespace tune::executor
