// CUDA templates checked without a GPU: their kernels' loop ASTs run on the CPU by the
// GpuInterpreter (tests/common) and compared with the naive reference; and the interpreter's
// own checks (bounds, unwritten reads, shared-memory races) on planted kernels.
#include "tests/common/gpu_interpreter.h"

#include <random>
#include <string>
#include <vector>

#include "codegen/gpu_schedule.h"
#include "codegen/template.h"
#include "codegen/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/reference.h"
#include "measure/runner.h"

namespace tune::measure {
namespace {

using codegen::OpKind;
using codegen::Workload;
using ::testing::HasSubstr;
using test::GpuInterpreter;

Workload Conv(const std::string& shape, bool bias, bool relu) {
  absl::StatusOr<Workload> w = Workload::Parse(OpKind::kConv2d, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  w->bias = bias;
  w->relu = relu;
  return *w;
}

// Runs `config` of `tmpl` on the task's inputs; "" when it matches the reference, else why not.
std::string RunAndCompare(const codegen::Template& tmpl, const search::Config& config, const TaskData& task) {
  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(config, "k");
  if (!f.ok()) return f.status().ToString();
  std::vector<std::vector<float>> inputs = task.inputs;
  std::vector<float> out(task.reference.size(), -12345.0f);
  std::vector<std::vector<float>*> args;
  for (auto& in : inputs) args.push_back(&in);
  args.push_back(&out);
  absl::Status st = GpuInterpreter::Run(*f, args);
  if (!st.ok()) return st.ToString();
  std::string why;
  if (!AllClose(out.data(), task.reference.data(), static_cast<int64_t>(out.size()), 1e-4, 1e-5, &why)) return why;
  return "";
}

// conv2d shapes for the direct variant: padding, stride 2, dilation 2, batch 2, a 5x5 window,
// a strided 1x1 (no padding), odd extents (so few splits exist), with and without the epilogue.
std::vector<Workload> DirectShapes() {
  return {Conv("1,3,9,11,8,3,3,1,1", true, true), Conv("2,4,10,9,6,3,3,2,1", true, false),
          Conv("1,5,11,10,4,3,3,1,2,2", false, true), Conv("2,6,8,8,8,1,1,2,0", true, true),
          Conv("1,2,9,9,4,5,5,1,2", false, false), Conv("1,8,7,7,16,3,3,1,1", true, true)};
}

// >= 30 random valid configs of the direct variant per shape (double-buffered, vector loads,
// padded rows, unrolled steps and halo copies with idle lanes all occur) compute the reference
// output, with no out-of-bounds access, unwritten read or shared-memory race.
TEST(CudaConvOnCpuTest, RandomDirectConfigsMatchTheReference) {
  std::mt19937_64 rng(31);
  int checked = 0;
  for (const Workload& w : DirectShapes()) {
    auto tmpl = codegen::Template::Create(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 5);
    int direct = 0;
    for (int draw = 0; draw < 4000 && direct < 30; ++draw) {
      absl::StatusOr<search::Config> c = space.Sample(rng);
      ASSERT_TRUE(c.ok()) << c.status();
      if (space.GetInt(*c, "variant") != 1) continue;
      ++direct;
      EXPECT_EQ(RunAndCompare(**tmpl, *c, task), "") << w.Key() << " " << space.ToJson(*c);
    }
    EXPECT_EQ(direct, 30) << w.Key();
    checked += direct;
  }
  EXPECT_GE(checked, 180);
}

// The interpreter agrees with the implicit-GEMM kernels too (measured correct on GPUs), on
// the same shapes: a check of the interpreter as much as of the template.
TEST(CudaConvOnCpuTest, RandomImplicitGemmConfigsMatchTheReference) {
  std::mt19937_64 rng(32);
  for (const Workload& w : DirectShapes()) {
    auto tmpl = codegen::Template::Create(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 6);
    EXPECT_EQ(RunAndCompare(**tmpl, (*tmpl)->DefaultConfig(), task), "") << w.Key();
    int implicit = 0;
    for (int draw = 0; draw < 4000 && implicit < 5; ++draw) {
      absl::StatusOr<search::Config> c = space.Sample(rng);
      ASSERT_TRUE(c.ok()) << c.status();
      if (space.GetInt(*c, "variant") != 0) continue;
      ++implicit;
      EXPECT_EQ(RunAndCompare(**tmpl, *c, task), "") << w.Key() << " " << space.ToJson(*c);
    }
  }
}

// out[b * 64 + t] = tile[63 - t] after staging in[b * 64 + t] in shared memory: correct with
// the barrier; without it a race; with a shifted index out of bounds; reading a shared element
// nobody wrote is caught too.
codegen::LoweredFunc Reverse(bool barrier, int64_t shift, int64_t staged) {
  using namespace codegen;  // NOLINT
  Buffer in = MakeBuffer("in", {128}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {128}, BufferScope::kArg, 1);
  Buffer tile = MakeBuffer("tile", {64}, BufferScope::kShared);
  Expr b = MakeVar("b"), t = MakeVar("t");
  Stmt stage = Store(tile, {Min(t, Expr(staged - 1))}, Load(in, {b * Expr(64) + t}));
  Stmt use = Store(out, {b * Expr(64) + t + Expr(shift)}, Load(tile, {Expr(63) - t}));
  Stmt body = Allocate(tile, barrier ? Seq({stage, Sync(), use}) : Seq({stage, use}));
  body = Bind(t, 64, ForKind::kThreadX, body);
  body = Bind(b, 2, ForKind::kBlockX, body);
  return LoweredFunc{"reverse", {in, out}, body};
}

TEST(GpuInterpreterTest, RunsBlocksAndThreadsAndCatchesWhatADeviceWouldNot) {
  std::vector<float> in(128), out(128, 0.0f);
  for (int i = 0; i < 128; ++i) in[i] = static_cast<float>(i);
  ASSERT_TRUE(GpuInterpreter::Run(Reverse(true, 0, 64), {&in, &out}).ok());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(out[i], (i / 64) * 64 + 63 - i % 64) << i;
  EXPECT_THAT(GpuInterpreter::Run(Reverse(false, 0, 64), {&in, &out}).ToString(),
              HasSubstr("race on shared tile"));
  EXPECT_THAT(GpuInterpreter::Run(Reverse(true, 1, 64), {&in, &out}).ToString(),
              HasSubstr("write of out out of bounds: index 128 of dimension 0 (extent 128)"));
  EXPECT_THAT(GpuInterpreter::Run(Reverse(true, 0, 32), {&in, &out}).ToString(),
              HasSubstr("read of tile before it was written"));
}

}  // namespace
}  // namespace tune::measure
