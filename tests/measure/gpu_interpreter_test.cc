// CUDA templates checked without a GPU: their kernels' loop ASTs run on the CPU by the
// GpuInterpreter (tests/common) and compared with the naive reference; and the interpreter's
// own checks (bounds, unwritten reads, shared-memory races) on planted kernels.
#include "tests/common/gpu_interpreter.h"

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "codegen/ir/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/reference.h"
#include "measure/runner.h"
#include "tests/common/measure_cuda_configs.h"

namespace tune::measure {
namespace {

using codegen::OpKind;
using codegen::Workload;
using ::testing::HasSubstr;
using test::GpuInterpreter;
using test::ParseWorkload;

Workload Conv(const std::string& shape, bool bias, bool relu) {
  return ParseWorkload(OpKind::kConv2d, shape, bias, relu);
}

// The arguments of kernel `f` on `task`: copies of its inputs, a poisoned output, and its
// scratch memory, zeroed or NaN-filled as the CUDA runner does.
struct KernelArgs {
  KernelArgs(const codegen::LoweredFunc& f, const TaskData& task)
      : inputs(task.inputs), out(task.reference.size(), kPoison) {
    for (const codegen::Buffer& b : f.args) {
      if (b->scratch) scratch.emplace_back(b->NumElements(), b->zero_init ? 0.0f : std::nanf(""));
    }
    for (auto& in : inputs) args.push_back(&in);
    args.push_back(&out);
    for (auto& sc : scratch) args.push_back(&sc);
  }
  KernelArgs(const KernelArgs&) = delete;

  static constexpr float kPoison = -12345.0f;
  std::vector<std::vector<float>> inputs;
  std::vector<float> out;
  std::vector<std::vector<float>> scratch;
  std::vector<std::vector<float>*> args;  // points into the members above
};

// Runs `config` of `tmpl` on the task's inputs `runs` times, with the same scratch memory
// (initialized once) and a fresh poisoned output each time; "" when every run matches the
// reference and leaves the zero-initialized scratch zero, else why not.
std::string RunAndCompare(const codegen::Template& tmpl, const search::Config& config, const TaskData& task,
                          int runs = 1) {
  absl::StatusOr<codegen::LoweredFunc> f = tmpl.Lower(config, "k");
  if (!f.ok()) return f.status().ToString();
  KernelArgs k(*f, task);
  std::vector<float>& out = k.out;
  const std::vector<std::vector<float>>& scratch = k.scratch;
  for (int run = 0; run < runs; ++run) {
    out.assign(task.reference.size(), KernelArgs::kPoison);
    absl::Status st = GpuInterpreter::Run(*f, k.args);
    if (!st.ok()) return absl::StrCat("run ", run + 1, ": ", st.ToString());
    std::string why;
    if (!AllClose(out.data(), task.reference.data(), static_cast<int64_t>(out.size()), 1e-4, 1e-5, &why)) {
      return absl::StrCat("run ", run + 1, ": ", why);
    }
    size_t s = 0;
    for (const codegen::Buffer& b : f->args) {
      if (!b->scratch) continue;
      const std::vector<float>& v = scratch[s++];
      for (size_t i = 0; b->zero_init && i < v.size(); ++i) {
        if (v[i] != 0.0f) return absl::StrCat("run ", run + 1, " left ", b->name, "[", i, "] = ", v[i]);
      }
    }
  }
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
    auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 5);
    const std::vector<search::Config> direct =
        test::DrawWhere(space, rng, 30, [&](const search::Config& c) { return space.GetInt(c, "variant") == 1; }, {}, 4000);
    for (const search::Config& c : direct) {
      EXPECT_EQ(RunAndCompare(**tmpl, c, task), "") << w.Key() << " " << space.ToJson(c);
    }
    EXPECT_EQ(direct.size(), 30u) << w.Key();
    checked += static_cast<int>(direct.size());
  }
  EXPECT_GE(checked, 180);
}

// The interpreter agrees with the implicit-GEMM kernels too (measured correct on GPUs), on
// the same shapes: a check of the interpreter as much as of the template.
TEST(CudaConvOnCpuTest, RandomImplicitGemmConfigsMatchTheReference) {
  std::mt19937_64 rng(32);
  for (const Workload& w : DirectShapes()) {
    auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 6);
    EXPECT_EQ(RunAndCompare(**tmpl, (*tmpl)->DefaultConfig(), task), "") << w.Key();
    const std::vector<search::Config> implicit =
        test::DrawWhere(space, rng, 5, [&](const search::Config& c) { return space.GetInt(c, "variant") == 0; }, {}, 4000);
    for (const search::Config& c : implicit) {
      EXPECT_EQ(RunAndCompare(**tmpl, c, task), "") << w.Key() << " " << space.ToJson(c);
    }
  }
}

// Split-K: random valid configs with k_split > 1 of dense with bias, dense with bias + relu,
// matmul, batch_matmul and an implicit-GEMM conv2d (with K slices, double buffering and
// interleaved tiles among them) compute the reference output, run twice on the same workspace
// and counters: the blocks of a tile run in order here, so the last one is the fix-up block,
// and the second run is right only if the first left every counter at zero.
TEST(CudaGemmOnCpuTest, RandomSplitKConfigsMatchTheReferenceTwice) {
  const std::vector<Workload> workloads = {
      ParseWorkload(OpKind::kDense, "8,12,96", true, false), ParseWorkload(OpKind::kDense, "4,16,128", true, true),
      ParseWorkload(OpKind::kMatmul, "12,8,64"), ParseWorkload(OpKind::kBatchMatmul, "3,8,8,64"),
      Conv("2,16,5,5,8,3,3,1,1", true, true)};
  std::mt19937_64 rng(33);
  int checked = 0, sliced = 0;
  std::set<int64_t> splits;
  for (const Workload& w : workloads) {
    auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 7);
    const std::vector<search::Config> split =
        test::DrawWhere(space, rng, 8, [&](const search::Config& c) { return space.GetInt(c, "k_split") != 1; }, {}, 20000);
    for (const search::Config& c : split) {
      splits.insert(space.GetInt(c, "k_split"));
      sliced += space.GetInt(c, "k_slices") > 1;
      EXPECT_EQ(RunAndCompare(**tmpl, c, task, /*runs=*/2), "") << w.Key() << " " << space.ToJson(c);
    }
    EXPECT_EQ(split.size(), 8u) << w.Key();
    checked += static_cast<int>(split.size());
  }
  EXPECT_EQ(checked, 40);
  EXPECT_GT(sliced, 0);
  EXPECT_EQ(splits, (std::set<int64_t>{2, 4, 8}));
}

// >= 30 random configs with the cp.async pipeline (2, 3 or 4 stages; more K tiles than stages
// and fewer, idle copy lanes, K slices and split-K occur) of dense (bias, relu), matmul and
// batch_matmul compute the reference on the CPU, with copies landing only at their wait: no
// read of a stage in flight, no copy into a stage another thread still reads. Each kernel
// with every wait allowing one more group in flight is caught reading a stage in flight.
// `a_path` picks the configs by cp_async_a (0 async, 1 registers: the hybrid, whose A stores
// are checked for races with the reads of that stage like any shared store).
void ExpectRandomCpAsyncConfigsMatchTheReference(int64_t a_path, uint64_t seed) {
  const std::vector<Workload> workloads = {
      ParseWorkload(OpKind::kDense, "8,12,96", true, true), ParseWorkload(OpKind::kMatmul, "16,32,64"),
      ParseWorkload(OpKind::kMatmul, "12,8,40"), ParseWorkload(OpKind::kBatchMatmul, "2,8,16,32")};
  std::mt19937_64 rng(seed);
  int checked = 0;
  std::set<int64_t> stages;
  bool fewer_tiles_than_stages = false;
  for (const Workload& w : workloads) {
    auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const search::ConfigSpace& space = (*tmpl)->space();
    const TaskData task = TaskData::Create(w, 8);
    const std::vector<search::Config> drawn = test::DrawWhere(
        space, rng, 8,
        [&](const search::Config& c) {
          return space.GetInt(c, "cp_async") != 0 && space.GetInt(c, "cp_async_a") == a_path;
        },
        {}, 20000);
    for (const search::Config& c : drawn) {
      const int64_t n = space.GetInt(c, "cp_async");
      stages.insert(n);
      const int64_t tiles = space.Get(c, "tile_k")[0] / space.GetInt(c, "k_split");
      fewer_tiles_than_stages |= tiles < n - 1;
      EXPECT_EQ(RunAndCompare(**tmpl, c, task, /*runs=*/space.GetInt(c, "k_split") > 1 ? 2 : 1), "")
          << w.Key() << " " << space.ToJson(c);
      // The same kernel waiting for one group fewer computes on a stage still in flight.
      absl::StatusOr<codegen::LoweredFunc> f = (*tmpl)->Lower(c, "k");
      ASSERT_TRUE(f.ok());
      struct WaitLess : codegen::IRMutator {
        codegen::Stmt MutateStmt(const codegen::Stmt& s) override {
          if (s->kind != codegen::StmtKind::kAsyncWait) return IRMutator::MutateStmt(s);
          return codegen::AsyncWait(static_cast<const codegen::AsyncWaitNode*>(s.get())->pending + 1);
        }
      };
      codegen::LoweredFunc early = *f;
      early.body = WaitLess().MutateStmt(f->body);
      KernelArgs args(*f, task);
      EXPECT_THAT(GpuInterpreter::Run(early, args.args).ToString(), HasSubstr("in flight")) << space.ToJson(c);
    }
    EXPECT_EQ(drawn.size(), 8u) << w.Key();
    checked += static_cast<int>(drawn.size());
  }
  EXPECT_GE(checked, 30);
  EXPECT_EQ(stages, (std::set<int64_t>{2, 3, 4}));
  EXPECT_TRUE(fewer_tiles_than_stages);
}

TEST(CudaGemmOnCpuTest, RandomCpAsyncConfigsMatchTheReference) { ExpectRandomCpAsyncConfigsMatchTheReference(0, 80); }

TEST(CudaGemmOnCpuTest, RandomCpAsyncHybridConfigsMatchTheReference) {
  ExpectRandomCpAsyncConfigsMatchTheReference(1, 81);
}

// Thread tiles of 16 rows or columns, interleaved as four runs of 4 a quarter block tile apart,
// and main loops unrolled by their stage count (unroll_stages): double-buffered and
// asynchronous (plain and hybrid), with loop counts that leave no remainder and ones whose
// last iterations are peeled. Each matches the reference; so does the rolled loop. The FMA
// orders (fma_order rows, blocked, columns, quads) take turns.
TEST(CudaGemmOnCpuTest, WideInterleavedTilesAndUnrolledStagesMatchTheReference) {
  const Workload w = ParseWorkload(OpKind::kMatmul, "128,64,40", false, false);
  auto tmpl = codegen::CreateTemplate(w, codegen::Backend::kCuda);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const search::ConfigSpace& space = (*tmpl)->space();
  const TaskData task = TaskData::Create(w, 8);
  // (tile_m, tile_n): 16 x 8 and 8 x 16 per thread, 32 threads, one or two blocks.
  const std::vector<std::pair<std::string, std::string>> tiles = {{"[1,8,16]", "[2,4,8]"}, {"[2,8,8]", "[1,4,16]"}};
  // (tile_k, cp_async, cp_async_a): 5 tiles of 8 or 10 of 4; loop iterations 4 and 9 when
  // double-buffered, 3, 7 and 4 under 3, 4 and 2 asynchronous stages.
  const std::vector<std::tuple<std::string, int, int>> loops = {
      {"[5,8]", 0, 0}, {"[10,4]", 0, 0}, {"[5,8]", 3, 0}, {"[10,4]", 4, 0}, {"[5,8]", 2, 1}};
  int checked = 0;
  std::set<int64_t> orders;
  for (const auto& [tm, tn] : tiles) {
    for (const auto& [tk, stages, a_path] : loops) {
      for (int unroll : {0, 1}) {
        const std::string text = absl::StrCat(
            "{\"tile_m\":", tm, ",\"tile_n\":", tn, ",\"tile_k\":", tk,
            ",\"vector\":[4],\"double_buffer\":[1],\"pad\":[4],\"unroll_k\":[1],\"interleave\":[1],"
            "\"k_slices\":[1],\"k_split\":[1],\"cp_async\":[",
            stages, "],\"cp_async_a\":[", a_path, "],\"unroll_stages\":[", unroll, "],\"fma_order\":[",
            (checked / 2) % 4, "]}");
        absl::StatusOr<search::Config> c = space.FromJson(text);
        ASSERT_TRUE(c.ok()) << c.status();
        ASSERT_TRUE(space.IsValid(*c)) << text << ": " << space.WhyInvalid(*c);
        orders.insert(space.GetInt(*c, "fma_order"));
        EXPECT_EQ(RunAndCompare(**tmpl, *c, task), "") << text;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 20);
  EXPECT_EQ(orders, (std::set<int64_t>{0, 1, 2, 3}));
}

// A split-K kernel that forgot to reset its counters is right once and wrong the second time
// (no block sees itself last, so the output stays poisoned): what the two runs guard against.
TEST(CudaGemmOnCpuTest, ACounterLeftDirtyFailsTheSecondRun) {
  using namespace codegen;  // NOLINT
  Buffer out = MakeBuffer("out", {2}, BufferScope::kArg, 0);
  Buffer ws = MakeScratchBuffer("ws", {2, 2}, 1, DType::kFloat32, false, true);
  Buffer count = MakeScratchBuffer("count", {1}, 2, DType::kInt32, true, false);
  Buffer last = MakeBuffer("last", {1}, BufferScope::kShared);
  Expr s = MakeVar("s"), t = MakeVar("t"), old = MakeVar("old");
  Expr first = t == Expr(int64_t{0});
  auto kernel = [&](bool reset) {
    Stmt fixup = Store(out, {t}, Load(ws, {Expr(int64_t{0}), t}) + Load(ws, {Expr(int64_t{1}), t}));
    if (reset) fixup = Seq({fixup, If(first, Store(count, {Expr(int64_t{0})}, Expr(int64_t{0})))});
    Stmt body = Seq({Store(ws, {s, t}, FloatImm(1.0)), Fence(), Sync(),
                     If(first, AtomicAdd(count, {Expr(int64_t{0})}, Expr(1), old,
                                         Store(last, {Expr(int64_t{0})},
                                               Select(old == Expr(1), FloatImm(1.0), FloatImm(0.0))))),
                     Sync(), If(FloatImm(0.0) < Load(last, {Expr(int64_t{0})}), fixup)});
    body = Bind(t, 2, ForKind::kThreadX, Allocate(last, body));
    return LoweredFunc{"k", {out, ws, count}, Bind(s, 2, ForKind::kBlockX, body)};
  };
  for (bool reset : {true, false}) {
    std::vector<float> o, w(4, std::nanf("")), c(1, 0.0f);
    for (int run = 0; run < 2; ++run) {
      o.assign(2, -1.0f);
      ASSERT_TRUE(GpuInterpreter::Run(kernel(reset), {&o, &w, &c}).ok());
      const bool right = o == std::vector<float>{2.0f, 2.0f};
      EXPECT_EQ(right, reset || run == 0) << "reset " << reset << " run " << run;
    }
    EXPECT_EQ(c[0], reset ? 0.0f : 4.0f);
  }
  // A barrier inside an if that only some threads take is reported.
  Stmt divergent = Bind(t, 2, ForKind::kThreadX, If(first, Sync()));
  std::vector<float> o(2);
  EXPECT_THAT(GpuInterpreter::Run(LoweredFunc{"d", {out}, divergent}, {&o}).ToString(),
              HasSubstr("__syncthreads inside an if"));
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

// Eight threads copy in[0..31] to shared memory with cp.async and read their neighbour's part.
// Right with commit, wait and barrier; without the wait the read finds the copy in flight;
// without the barrier the copy that lands at the wait races with the neighbour's read; a copy
// reissued into the stage before a barrier lands on what the neighbour read; a copy never
// waited for is still in flight at the end of the buffer's scope.
codegen::LoweredFunc AsyncNeighbours(bool wait, bool barrier, bool reissue, bool commit = true) {
  using namespace codegen;  // NOLINT
  Buffer in = MakeBuffer("in", {64}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {32}, BufferScope::kArg, 1);
  Buffer stage = MakeBuffer("stage", {32}, BufferScope::kShared);
  Expr t = MakeVar("t"), v = MakeVar("v"), w = MakeVar("w"), u = MakeVar("u");
  std::vector<Stmt> body = {
      For(v, 4, ForKind::kVectorized, AsyncCopy(stage, {t * Expr(4) + v}, in, {t * Expr(4) + v}))};
  if (commit) body.push_back(AsyncCommit());
  if (wait) body.push_back(AsyncWait(0));
  if (barrier) body.push_back(Sync());
  body.push_back(For(w, 4, ForKind::kUnrolled,
                     Store(out, {t * Expr(4) + w}, Load(stage, {((t + Expr(1)) % Expr(8)) * Expr(4) + w}))));
  if (reissue) {
    body.push_back(
        For(u, 4, ForKind::kVectorized, AsyncCopy(stage, {t * Expr(4) + u}, in, {Expr(32) + t * Expr(4) + u})));
    body.push_back(AsyncCommit());
    body.push_back(AsyncWait(0));
  }
  return LoweredFunc{"neighbours", {in, out},
                     Bind(t, 8, ForKind::kThreadX, Allocate(stage, Seq(std::move(body))))};
}

TEST(GpuInterpreterTest, AsyncCopiesLandAtTheirWait) {
  std::vector<float> in(64), out(32, 0.0f);
  for (int i = 0; i < 64; ++i) in[i] = static_cast<float>(i);
  ASSERT_TRUE(GpuInterpreter::Run(AsyncNeighbours(true, true, false), {&in, &out}).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], (i + 4) % 32) << i;
  EXPECT_THAT(GpuInterpreter::Run(AsyncNeighbours(false, true, false), {&in, &out}).ToString(),
              HasSubstr("read of shared stage[4] while an asynchronous copy into it is in flight"));
  EXPECT_THAT(GpuInterpreter::Run(AsyncNeighbours(true, false, false), {&in, &out}).ToString(),
              HasSubstr("race on shared stage[4]: thread 0 reads what thread 1 wrote since the last barrier"));
  EXPECT_THAT(GpuInterpreter::Run(AsyncNeighbours(true, true, true), {&in, &out}).ToString(),
              HasSubstr("race on shared stage[0]: thread 0 writes what another thread read since the last barrier"));
  EXPECT_THAT(GpuInterpreter::Run(AsyncNeighbours(true, true, false, /*commit=*/false), {&in, &out}).ToString(),
              HasSubstr("in flight"));
}

}  // namespace
}  // namespace tune::measure
