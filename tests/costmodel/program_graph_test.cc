// Tests of the program graph: node order, kinds and edges against the lowered AST, finite features, sensitivity.
#include "costmodel/program_graph.h"

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/template.h"
#include "costmodel/features.h"
#include "gtest/gtest.h"
#include "tests/common/toy_template.h"

namespace tune::costmodel {
namespace {

using codegen::OpKind;
using codegen::Template;
using ::tune::test::MakeTemplate;

/// Counts loops, stores and the loop -> child nesting pairs independently of the builder.
class GraphCounter : public codegen::IRVisitor {
 public:
  void VisitStmt(const codegen::Stmt& s) override {
    if (s->kind == codegen::StmtKind::kFor) {
      ++loops;
      if (inside_loop_ > 0) ++nested;
      ++inside_loop_;
      codegen::IRVisitor::VisitStmt(s);
      --inside_loop_;
      return;
    }
    if (s->kind == codegen::StmtKind::kStore || s->kind == codegen::StmtKind::kAsyncCopy) {
      ++stores;
      if (inside_loop_ > 0) ++nested;
    }
    codegen::IRVisitor::VisitStmt(s);
  }
  int loops = 0, stores = 0, nested = 0;

 private:
  int inside_loop_ = 0;
};

codegen::LoweredFunc LowerGraphConfig(const Template& t, const search::Config& c) {
  auto func = t.Lower(c, "k");
  EXPECT_TRUE(func.ok()) << func.status();
  return func.ok() ? *func : codegen::LoweredFunc{};
}

std::map<EdgeKind, int> EdgeCounts(const ProgramGraph& g) {
  std::map<EdgeKind, int> m;
  for (EdgeKind k : g.edge_kinds) ++m[k];
  return m;
}

/// Structural checks every graph must pass, against an independent count of the AST.
void CheckGraphAgainstAst(const codegen::LoweredFunc& func, const ProgramGraph& g) {
  GraphCounter counter;
  counter.VisitStmt(func.body);
  ASSERT_LE(counter.loops + counter.stores, kMaxGraphNodes);
  ASSERT_EQ(static_cast<int>(g.kinds.size()), g.num_nodes);
  ASSERT_EQ(g.features.size(), static_cast<size_t>(g.num_nodes) * kNodeFeatures);
  int loops = 0, stmts = 0, buffers = 0;
  for (int i = 0; i < g.num_nodes; ++i) {
    switch (g.kinds[i]) {
      case NodeKind::kLoop:
        ++loops;
        EXPECT_EQ(buffers, 0) << "buffers come after every loop and statement";
        break;
      case NodeKind::kStatement:
        ++stmts;
        EXPECT_EQ(buffers, 0);
        break;
      case NodeKind::kBuffer:
        ++buffers;
        break;
    }
    // The one-hot kind matches.
    EXPECT_EQ(g.features[i * kNodeFeatures + static_cast<int>(g.kinds[i])], 1.0f);
  }
  EXPECT_EQ(loops, counter.loops);
  EXPECT_EQ(stmts, counter.stores);
  EXPECT_GE(buffers, static_cast<int>(func.args.size()));
  EXPECT_EQ(static_cast<int>(g.sequence.size()), loops + stmts);
  for (size_t i = 0; i < g.sequence.size(); ++i) EXPECT_EQ(g.sequence[i], static_cast<int>(i));
  for (float v : g.features) ASSERT_TRUE(std::isfinite(v));

  ASSERT_EQ(g.edge_src.size(), g.edge_kinds.size());
  ASSERT_EQ(g.edge_dst.size(), g.edge_kinds.size());
  auto counts = EdgeCounts(g);
  EXPECT_EQ(counts[EdgeKind::kNests], counter.nested);
  EXPECT_EQ(counts[EdgeKind::kWrites], stmts);
  EXPECT_GE(counts[EdgeKind::kReads], 1);
  std::set<std::pair<int, int>> nests;
  for (size_t e = 0; e < g.edge_kinds.size(); ++e) {
    const int s = g.edge_src[e], d = g.edge_dst[e];
    ASSERT_GE(s, 0);
    ASSERT_LT(s, g.num_nodes);
    ASSERT_GE(d, 0);
    ASSERT_LT(d, g.num_nodes);
    switch (g.edge_kinds[e]) {
      case EdgeKind::kNests:
        EXPECT_EQ(g.kinds[s], NodeKind::kLoop);
        EXPECT_NE(g.kinds[d], NodeKind::kBuffer);
        EXPECT_LT(s, d) << "pre-order: a loop comes before what it contains";
        EXPECT_TRUE(nests.emplace(s, d).second);
        break;
      case EdgeKind::kNext:
        EXPECT_NE(g.kinds[s], NodeKind::kBuffer);
        EXPECT_NE(g.kinds[d], NodeKind::kBuffer);
        EXPECT_LT(s, d);
        break;
      case EdgeKind::kReads:
        EXPECT_EQ(g.kinds[s], NodeKind::kBuffer);
        EXPECT_EQ(g.kinds[d], NodeKind::kStatement);
        break;
      case EdgeKind::kWrites:
        EXPECT_EQ(g.kinds[s], NodeKind::kStatement);
        EXPECT_EQ(g.kinds[d], NodeKind::kBuffer);
        break;
    }
  }
  // Every node but the top-level ones has exactly one parent.
  std::map<int, int> parents;
  for (auto& [s, d] : nests) ++parents[d];
  for (auto& [d, n] : parents) EXPECT_EQ(n, 1) << "node " << d;
}

float NodeFeature(const ProgramGraph& g, int node, const std::string& name) {
  const auto& names = NodeFeatureNames();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return g.features[node * kNodeFeatures + i];
  ADD_FAILURE() << "no node feature " << name;
  return 0;
}

TEST(ProgramGraphTest, NamesAreDistinctAndComplete) {
  const auto& names = NodeFeatureNames();
  ASSERT_EQ(static_cast<int>(names.size()), kNodeFeatures);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

// GEMM 64x64x64 with a register tile (m = 1x32x2, n = 1x4x16 vectorized, k = 16x4): known shape.
TEST(ProgramGraphTest, GemmWithRegisterTileHasItsLoopsStatementsAndBuffers) {
  auto t = MakeTemplate(OpKind::kMatmul, "64,64,64");
  auto c = t->space().FromJson(
      R"({"tile_m":[1,32,2],"tile_n":[1,4,16],"tile_k":[16,4],"order":[0],"vectorize":[1],)"
      R"("unroll_m":[0],"unroll_k":[0],"pack_b":[0],"acc_tile":[1],"parallel":[1]})");
  ASSERT_TRUE(c.ok()) << c.status();
  codegen::LoweredFunc func = LowerGraphConfig(*t, *c);
  ProgramGraph g = ExtractProgramGraph(func);
  SCOPED_TRACE(codegen::Print(func));
  CheckGraphAgainstAst(func, g);
  // A register tile: an init store, the update, a write-back: three statements, and a local
  // buffer beyond the three arguments.
  int stmts = 0, buffers = 0, vector_loops = 0, parallel_loops = 0, reductions = 0, accumulating = 0;
  float max_flops = 0;
  for (int i = 0; i < g.num_nodes; ++i) {
    if (g.kinds[i] == NodeKind::kStatement) {
      ++stmts;
      max_flops = std::max(max_flops, NodeFeature(g, i, "stmt.flops"));
      if (NodeFeature(g, i, "stmt.accumulates") == 1) {
        ++accumulating;
        EXPECT_EQ(NodeFeature(g, i, "stmt.access0.scope_local"), 1.0f) << "the update writes the register tile";
        EXPECT_EQ(NodeFeature(g, i, "stmt.access1.present"), 1.0f);
        EXPECT_EQ(NodeFeature(g, i, "stmt.access2.present"), 1.0f);
        EXPECT_EQ(NodeFeature(g, i, "stmt.in_parallel"), 1.0f);
      }
    }
    if (g.kinds[i] == NodeKind::kBuffer) ++buffers;
    if (g.kinds[i] == NodeKind::kLoop) {
      vector_loops += NodeFeature(g, i, "loop.vectorized") == 1;
      parallel_loops += NodeFeature(g, i, "loop.parallel") == 1;
      reductions += NodeFeature(g, i, "loop.reduction") == 1;
    }
  }
  EXPECT_EQ(stmts, 3);
  EXPECT_EQ(buffers, 4);
  EXPECT_EQ(accumulating, 1);
  EXPECT_EQ(max_flops, 2.0f) << "the update is one multiply and one add";
  EXPECT_GE(vector_loops, 1);
  EXPECT_EQ(parallel_loops, 1);
  EXPECT_EQ(reductions, 2) << "k0 and k1 are the reduction loops";
}

TEST(ProgramGraphTest, RandomGemmAndConvConfigsGiveConsistentDistinctGraphs) {
  std::vector<std::unique_ptr<Template>> templates;
  templates.push_back(MakeTemplate(OpKind::kMatmul, "128,96,64"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "1,32,28,28,64,3,3,1,1"));
  templates.push_back(MakeTemplate(OpKind::kConv2d, "1,32,14,14,32,3,3,1,1,1,32"));  // depthwise
  std::mt19937_64 rng(std::random_device{}());
  for (auto& t : templates) {
    SCOPED_TRACE(t->workload().Label());
    std::set<std::vector<float>> distinct;
    int drawn = 0;
    for (int i = 0; i < 25; ++i) {
      auto c = t->space().Sample(rng);
      ASSERT_TRUE(c.ok());
      codegen::LoweredFunc func = LowerGraphConfig(*t, *c);
      ProgramGraph g = ExtractProgramGraph(func);
      CheckGraphAgainstAst(func, g);
      ProgramGraph again = ExtractProgramGraph(func);
      EXPECT_EQ(again.features, g.features) << "deterministic";
      EXPECT_EQ(again.edge_src, g.edge_src);
      distinct.insert(g.features);
      ++drawn;
    }
    EXPECT_GE(distinct.size(), static_cast<size_t>(drawn) * 3 / 5) << "different configs, different graphs";
  }
}

TEST(ProgramGraphTest, ConvHasPaddingStageAndSequentialStages) {
  auto t = MakeTemplate(OpKind::kConv2d, "1,16,14,14,32,3,3,1,1");
  codegen::LoweredFunc func = LowerGraphConfig(*t, t->DefaultConfig());
  ProgramGraph g = ExtractProgramGraph(func);
  CheckGraphAgainstAst(func, g);
  // The direct conv reads input and weights: some statement has 2 flops (multiply-add).
  bool mac = false;
  for (int i = 0; i < g.num_nodes; ++i)
    if (g.kinds[i] == NodeKind::kStatement && NodeFeature(g, i, "stmt.flops") >= 2) mac = true;
  EXPECT_TRUE(mac);
  // log_execs of the statement with most executions equals log2(1 + N*K*OH*OW*C*R*S) or more.
  float max_execs = 0;
  for (int i = 0; i < g.num_nodes; ++i)
    if (g.kinds[i] == NodeKind::kStatement) max_execs = std::max(max_execs, NodeFeature(g, i, "log_execs"));
  EXPECT_NEAR(max_execs, std::log2(1.0 + 32.0 * 14 * 14 * 16 * 9), 1e-3);
}

TEST(ProgramGraphTest, LargeProgramsKeepTheFirstNodesInProgramOrder) {
  using namespace codegen;  // NOLINT: AST constructors
  std::mt19937_64 rng(std::random_device{}());
  const int stores = kMaxGraphNodes + 20 + static_cast<int>(rng() % 50);
  Buffer a = MakeBuffer("a", {64}, BufferScope::kArg, 0);
  Buffer out = MakeBuffer("out", {64}, BufferScope::kArg, 1);
  Expr i = MakeVar("i");
  std::vector<Stmt> body;
  for (int s = 0; s < stores; ++s) body.push_back(Store(out, {i}, Load(a, {i}) * FloatImm(1.0 + s)));
  LoweredFunc func{"many", {a, out}, For(i, 64, ForKind::kSerial, Seq(body))};
  ProgramGraph g = ExtractProgramGraph(func);
  ASSERT_EQ(static_cast<int>(g.sequence.size()), kMaxGraphNodes);
  EXPECT_EQ(g.num_nodes, kMaxGraphNodes + 2) << "the kept nodes and the two buffers";
  EXPECT_EQ(g.kinds[0], NodeKind::kLoop);
  auto counts = EdgeCounts(g);
  EXPECT_EQ(counts[EdgeKind::kNests], kMaxGraphNodes - 1);
  EXPECT_EQ(counts[EdgeKind::kNext], kMaxGraphNodes - 2);
  EXPECT_EQ(counts[EdgeKind::kWrites], kMaxGraphNodes - 1);
  EXPECT_EQ(counts[EdgeKind::kReads], kMaxGraphNodes - 1);
  for (size_t e = 0; e < g.edge_src.size(); ++e) {
    ASSERT_LT(g.edge_src[e], g.num_nodes);
    ASSERT_LT(g.edge_dst[e], g.num_nodes);
  }
  for (float v : g.features) ASSERT_TRUE(std::isfinite(v));
  // The loop's work counts every statement, kept or not: stores per iteration = all of them.
  EXPECT_NEAR(NodeFeature(g, 0, "loop.log_stores_per_iter"), std::log2(1.0 + stores), 1e-4);
}

// A CUDA kernel's launch (occupancy, waves) sits on its blockIdx loops, with the values of
// EstimateGpuLaunch and the AST features; no other node has it, and a CPU kernel has none. Random CUDA GEMM configs
// of a GEMM whose size is random too.
TEST(ProgramGraphTest, GpuLaunchFieldsOnTheBlockLoops) {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<std::string> launch = {"launch.log_thread_local_floats", "launch.resident_blocks",
                                           "launch.occupancy",           "launch.log_waves",
                                           "launch.wave_fill",           "launch.log_sm_flops",
                                           "launch.log_sm_global_bytes", "launch.log_thread_serial_stores",
                                           "launch.log_serial_barriers", "launch.log_thread_serial_global",
                                           "launch.log_sm_roofline_ns"};
  for (int i = 0; i < 8; ++i) {
    const int m = 64 * std::uniform_int_distribution<int>(1, 64)(rng);
    const int n = 64 * std::uniform_int_distribution<int>(1, 64)(rng);
    auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, std::to_string(m) + "," + std::to_string(n) + ",256"),
                          codegen::Backend::kCuda);
    ASSERT_NE(t, nullptr);
    auto c = t->space().Sample(rng);
    ASSERT_TRUE(c.ok());
    auto func = t->Lower(*c, "k");
    ASSERT_TRUE(func.ok()) << func.status();
    SCOPED_TRACE(t->workload().Label() + " " + t->space().ToJson(*c));
    const GpuLaunch l = EstimateGpuLaunch(*func);
    const AstFeatures ast = ExtractAstFeatures(*func);
    EXPECT_GT(l.resident_blocks, 0.0);
    EXPECT_EQ(l.blocks, std::round(std::exp2(ast.log_gpu_blocks) - 1));
    const float expected[] = {ast.log_thread_local_floats,
                              ast.resident_blocks,
                              ast.occupancy,
                              static_cast<float>(std::log2(1 + l.waves)),
                              ast.wave_fill,
                              ast.log_sm_flops,
                              ast.log_sm_global_bytes,
                              ast.log_thread_serial_stores,
                              ast.log_serial_barriers,
                              ast.log_thread_serial_global,
                              ast.log_sm_roofline_ns};
    static_assert(std::size(expected) == 11);
    EXPECT_GT(ast.log_sm_flops, 0.0f);
    EXPECT_GT(ast.log_serial_barriers, 0.0f);
    ProgramGraph g = ExtractProgramGraph(*func);
    int block_loops = 0;
    for (int v = 0; v < g.num_nodes; ++v) {
      const bool block = NodeFeature(g, v, "loop.gpu_block") == 1.0f;
      block_loops += block;
      for (size_t k = 0; k < launch.size(); ++k) {
        EXPECT_EQ(NodeFeature(g, v, launch[k]), block ? expected[k] : 0.0f) << launch[k] << " of node " << v;
      }
    }
    EXPECT_GE(block_loops, 2);  // blockIdx.x and .y
  }
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  auto func = cpu->Lower(*cpu->space().Sample(rng), "k");
  ASSERT_TRUE(func.ok());
  ProgramGraph g = ExtractProgramGraph(*func);
  for (int v = 0; v < g.num_nodes; ++v) {
    for (const std::string& name : launch) EXPECT_EQ(NodeFeature(g, v, name), 0.0f) << name;
  }
}

// The warp transaction fields sit on statements inside GPU thread loops only, in range; the
// CUDA GEMM's unpadded shared tiles show bank conflicts that padding removes or lowers, and
// the per-statement sums agree with the kernel-wide AST feature's direction.
TEST(ProgramGraphTest, GpuWarpFieldsOnStatements) {
  auto t = MakeTemplate(::tune::test::ToyWorkload(OpKind::kMatmul, "256,256,256"), codegen::Backend::kCuda);
  ASSERT_NE(t, nullptr);
  const std::vector<std::string> warp = {"stmt.global_load_efficiency", "stmt.global_store_efficiency",
                                         "stmt.log_shared_conflict"};
  std::vector<float> conflict;
  for (int pad : {0, 4}) {
    auto c = t->space().FromJson(R"({"tile_m":[4,8,8],"tile_n":[4,16,4],"tile_k":[16,16],"vector":[4],)"
                                 R"("double_buffer":[0],"pad":[)" + std::to_string(pad) +
                                 R"(],"unroll_k":[0],"interleave":[0],"k_slices":[1]})");
    ASSERT_TRUE(c.ok()) << c.status();
    auto func = t->Lower(*c, "k");
    ASSERT_TRUE(func.ok()) << func.status();
    ProgramGraph g = ExtractProgramGraph(*func);
    float most = 0, load = 0, store = 0;
    for (int v = 0; v < g.num_nodes; ++v) {
      if (g.kinds[v] != NodeKind::kStatement) {
        for (const std::string& name : warp) EXPECT_EQ(NodeFeature(g, v, name), 0.0f) << name << " of node " << v;
        continue;
      }
      most = std::max(most, NodeFeature(g, v, "stmt.log_shared_conflict"));
      load = std::max(load, NodeFeature(g, v, "stmt.global_load_efficiency"));
      store = std::max(store, NodeFeature(g, v, "stmt.global_store_efficiency"));
      for (const std::string& name : warp) {
        EXPECT_GE(NodeFeature(g, v, name), 0.0f) << name;
        EXPECT_LE(NodeFeature(g, v, name), name == warp[2] ? 5.0f : 1.0f) << name;
      }
    }
    EXPECT_FLOAT_EQ(load, 1.0f);  // the float4 tile copies
    EXPECT_GT(store, 0.0f);       // the output's write-back
    conflict.push_back(most);
  }
  EXPECT_GT(conflict[0], 0.0f);
  EXPECT_LT(conflict[1], conflict[0]);
  // Two output columns a thread stored one float at a time: the write-back statement uses
  // half of each sector it touches; every load of the global operands is coalesced.
  {
    auto c = t->space().FromJson(R"({"tile_m":[8,4,8],"tile_n":[4,32,2],"tile_k":[16,16],"vector":[1],)"
                                 R"("double_buffer":[1],"pad":[4],"unroll_k":[1],"interleave":[1],"k_slices":[1],)"
                                 R"("k_split":[1],"cp_async":[3],"cp_async_a":[0],"unroll_stages":[0],)"
                                 R"("fma_order":[2],"raster":[1]})");
    ASSERT_TRUE(c.ok()) << c.status();
    auto func = t->Lower(*c, "k");
    ASSERT_TRUE(func.ok()) << func.status();
    ProgramGraph g = ExtractProgramGraph(*func);
    int half_stores = 0;
    for (int v = 0; v < g.num_nodes; ++v) {
      if (g.kinds[v] != NodeKind::kStatement) continue;
      const float load = NodeFeature(g, v, "stmt.global_load_efficiency");
      EXPECT_TRUE(load == 0.0f || load == 1.0f) << "node " << v << ": " << load;
      half_stores += NodeFeature(g, v, "stmt.global_store_efficiency") == 0.5f;
    }
    EXPECT_GE(half_stores, 1);
  }
  // CPU kernels: none.
  std::mt19937_64 rng(std::random_device{}());
  auto cpu = MakeTemplate(OpKind::kMatmul, "64,64,64");
  auto func = cpu->Lower(*cpu->space().Sample(rng), "k");
  ASSERT_TRUE(func.ok());
  ProgramGraph g = ExtractProgramGraph(*func);
  for (int v = 0; v < g.num_nodes; ++v) {
    for (const std::string& name : warp) EXPECT_EQ(NodeFeature(g, v, name), 0.0f) << name;
  }
}

TEST(ProgramGraphTest, EmptyKernelGivesOneZeroStatement) {
  codegen::LoweredFunc func;
  func.name = "empty";
  ProgramGraph g = ExtractProgramGraph(func);
  ASSERT_EQ(g.num_nodes, 1);
  EXPECT_EQ(g.kinds[0], NodeKind::kStatement);
  EXPECT_EQ(g.sequence, std::vector<int32_t>{0});
  for (float v : g.features) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tune::costmodel
