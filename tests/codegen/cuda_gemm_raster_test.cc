// Tests of the CUDA GEMM template's raster knob, the order the blocks walk the output tiles:
// RasterTile is a bijection onto the tile grid that walks columns of groups of tile rows; the
// space offers the knob only where it can matter and reads config text without it as raster
// 1; kernels of every option compute the reference in the GPU interpreter (with tails, a
// partial last group, split-K, K slices, cp.async, batches, dense and conv2d) and compile with
// NVRTC; on a GPU (skipped elsewhere) they match a host reference and the row-by-row kernel.
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/cuda_codegen.h"
#include "codegen/cuda/cuda_gemm_kernel.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/ir/gpu_schedule.h"
#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/template.h"
#include "codegen/ir/workload.h"
#include "codegen/runtime/cuda_driver.h"
#include "codegen/templates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/cpu_kernel_check.h"
#include "tests/common/cuda_test_device.h"
#include "tests/common/gpu_interpreter.h"
#include "tests/common/measure_cuda_configs.h"
#include "tests/common/nvrtc_compile.h"
#include "tests/common/random_values.h"

namespace tune::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::ParseWorkload;

// SGEMM 4096's best config of a 256-trial search on an H200 (64 x 512 block tiles: a 64 x 8
// grid), as recorded before the raster knob existed.
constexpr const char* kRasterSgemmBest =
    R"({"tile_m":[64,4,16],"tile_n":[8,64,8],"tile_k":[256,16],"vector":[4],"double_buffer":[1],"pad":[0],)"
    R"("unroll_k":[1],"interleave":[1],"k_slices":[1],"k_split":[1],"cp_async":[2],"cp_async_a":[1],)"
    R"("unroll_stages":[0],"fma_order":[1]})";

// `text` (config JSON ending in "}") with "raster": [g] added.
std::string RasterWith(const std::string& text, int64_t g) {
  return text.substr(0, text.rfind('}')) + absl::StrCat(",\"raster\":[", g, "]}");
}

// A small device, so that small outputs get the knob (more than two waves of 32 x 32 tiles: 12288
// outputs) and split-K's window (6 to 12 blocks) holds grids with a partial group.
GpuLimits RasterSmallDevice() {
  GpuLimits limits;
  limits.multiprocessors = 6;
  return limits;
}

// Every tile of the grid_m x grid_n grid, once each, for every group size.
TEST(CudaGemmRasterTest, RasterTileIsABijectionOntoTheGrid) {
  const std::vector<std::pair<int64_t, int64_t>> grids = {{7, 5}, {5, 7}, {1, 9}, {9, 1},  {1, 1},
                                                          {64, 8}, {13, 3}, {4, 4}, {33, 2}, {2, 33}};
  for (const auto& [gm, gn] : grids) {
    for (int64_t g : {1, 2, 3, 4, 8, 16, 32, 64}) {
      std::vector<int> seen(static_cast<size_t>(gm * gn), 0);
      for (int64_t l = 0; l < gm * gn; ++l) {
        const TileIndex t = RasterTile(l, gm, gn, g);
        ASSERT_TRUE(0 <= t.m && t.m < gm && 0 <= t.n && t.n < gn)
            << "grid " << gm << " x " << gn << " group " << g << ": block " << l << " -> " << t.m << ", " << t.n;
        ++seen[static_cast<size_t>(t.m * gn + t.n)];
      }
      for (int64_t i = 0; i < gm * gn; ++i) {
        EXPECT_EQ(seen[static_cast<size_t>(i)], 1)
            << "grid " << gm << " x " << gn << " group " << g << ": tile " << i / gn << ", " << i % gn;
      }
    }
  }
}

// The walk itself: row by row under 1; under 4 on 7 x 5 tiles, rows 0-3 column by column (20
// blocks), then the partial group of rows 4-6 column by column; a group of the whole grid (8 >= 7)
// is column by column; one tile row or column is walked in its only order.
TEST(CudaGemmRasterTest, RasterTileWalksColumnsOfGroups) {
  for (int64_t l = 0; l < 35; ++l) {
    const TileIndex rows = RasterTile(l, 7, 5, 1);
    EXPECT_EQ(rows.m, l / 5);
    EXPECT_EQ(rows.n, l % 5);
    const TileIndex grouped = RasterTile(l, 7, 5, 4);
    const TileIndex want = l < 20 ? TileIndex{l % 4, l / 4} : TileIndex{4 + (l - 20) % 3, (l - 20) / 3};
    EXPECT_EQ(grouped.m, want.m) << "block " << l;
    EXPECT_EQ(grouped.n, want.n) << "block " << l;
    for (int64_t g : {7, 8, 32}) {
      const TileIndex columns = RasterTile(l, 7, 5, g);
      EXPECT_EQ(columns.m, l % 7) << "group " << g;
      EXPECT_EQ(columns.n, l / 7) << "group " << g;
    }
  }
  for (int64_t l = 0; l < 9; ++l) {
    for (int64_t g : {1, 4, 16}) {
      EXPECT_EQ(RasterTile(l, 1, 9, g).n, l);
      EXPECT_EQ(RasterTile(l, 9, 1, g).m, l);
    }
  }
  // SGEMM 4096's 64 x 8 grid under 32: the 132 blocks of a wave on an H200 cover 32 tile rows
  // and 5 columns (4 whole), not 17 rows and all 8.
  int64_t rows = 0, columns = 0;
  for (int64_t l = 0; l < 132; ++l) {
    const TileIndex t = RasterTile(l, 64, 8, 32);
    rows = std::max(rows, t.m + 1), columns = std::max(columns, t.n + 1);
  }
  EXPECT_EQ(rows, 32);
  EXPECT_EQ(columns, 5);
}

// Config text without the knob (a record from before it) reads as raster 1, and its kernel is
// the row-by-row one; the other options are valid on SGEMM 4096's 64 x 8 grid and give
// kernels that compute their tile from the linear block index.
TEST(CudaGemmRasterTest, OldConfigTextReadsAsRasterOne) {
  auto t = CreateTemplate(ParseWorkload(OpKind::kMatmul, "4096,4096,4096"), Backend::kCuda);
  ASSERT_TRUE(t.ok()) << t.status();
  const search::ConfigSpace& space = (*t)->space();
  absl::StatusOr<search::Config> old = space.FromJson(kRasterSgemmBest);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(space.IsValid(*old)) << space.WhyInvalid(*old);
  EXPECT_EQ(space.GetInt(*old, "raster"), 1);
  EXPECT_EQ(space.ToJson(*old), RasterWith(kRasterSgemmBest, 1));
  absl::StatusOr<CudaKernel> rows = GenerateCuda(*(*t)->Lower(*old, "k"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->grid, (std::array<int64_t, 3>{8, 64, 1}));
  EXPECT_THAT(rows->source, Not(HasSubstr("(by * 8)")));
  for (int64_t g : {4, 8, 16, 32}) {
    absl::StatusOr<search::Config> c = space.FromJson(RasterWith(kRasterSgemmBest, g));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(space.IsValid(*c)) << g << ": " << space.WhyInvalid(*c);
    EXPECT_EQ(space.GetInt(*c, "raster"), g);
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(*c, "k"));
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->grid, rows->grid) << g;  // the same launch, another walk
    EXPECT_THAT(k->source, HasSubstr(absl::StrCat("(((by * 8) + bx) / ", g * 8, ")"))) << g;
  }
}

// The space: five options where the output is large, one where it is not or has one row; a
// grouped order is invalid with one tile row or column, with no more blocks than
// multiprocessors, and where a smaller group already walks the grid column by column; under
// the direct conv2d variant the knob is pinned.
TEST(CudaGemmRasterTest, SpaceOffersRasterWhereItCanMatter) {
  auto options = [](const Workload& w, const GpuLimits& limits) {
    auto t = CreateTemplate(w, Backend::kCuda, limits);
    EXPECT_TRUE(t.ok()) << t.status();
    std::vector<int64_t> values;
    if (!t.ok()) return values;
    const search::ConfigSpace& space = (*t)->space();
    for (const auto& o : space.knobs()[space.KnobIndex("raster")].options) values.push_back(o[0]);
    return values;
  };
  const std::vector<int64_t> all = {1, 4, 8, 16, 32};
  const GpuLimits h100;
  EXPECT_EQ(options(ParseWorkload(OpKind::kMatmul, "4096,4096,4096"), h100), all);
  EXPECT_EQ(options(ParseWorkload(OpKind::kBatchMatmul, "12,197,197,64"), h100), all);
  EXPECT_EQ(options(ParseWorkload(OpKind::kConv2d, "32,64,56,56,64,3,3,1,1"), h100), all);
  EXPECT_EQ(options(ParseWorkload(OpKind::kDense, "1,1000,2048"), h100), std::vector<int64_t>{1});
  EXPECT_EQ(options(ParseWorkload(OpKind::kDense, "128,768,3072"), h100), std::vector<int64_t>{1});
  EXPECT_EQ(options(ParseWorkload(OpKind::kConv2d, "1,64,56,56,64,3,3,1,1"), h100), std::vector<int64_t>{1});
  EXPECT_EQ(options(ParseWorkload(OpKind::kMatmul, "100,130,24"), RasterSmallDevice()), all);

  // 100 x 130 on 6 multiprocessors: 7 x 5 tiles of 16 x 32 take groups of 4 and 8 (the whole
  // grid), not 16 or 32 (the same walk as 8).
  auto t = CreateTemplate(ParseWorkload(OpKind::kMatmul, "100,130,24"), Backend::kCuda, RasterSmallDevice());
  ASSERT_TRUE(t.ok()) << t.status();
  const search::ConfigSpace& space = (*t)->space();
  const std::string base =
      R"("tile_k":[3,8],"vector":[1],"double_buffer":[0],"pad":[0],"unroll_k":[0],"interleave":[0],)"
      R"("k_slices":[1],"k_split":[1],"cp_async":[0],"cp_async_a":[0],"unroll_stages":[0],"fma_order":[0]})";
  auto why = [&](const std::string& tiles, int64_t g) {
    absl::StatusOr<search::Config> c = space.FromJson(RasterWith("{" + tiles + "," + base, g));
    EXPECT_TRUE(c.ok()) << c.status() << " " << tiles;
    return c.ok() ? space.WhyInvalid(*c) : std::string("unparsed");
  };
  const std::string grid7x5 = R"("tile_m":[7,8,2],"tile_n":[5,16,2])";
  EXPECT_EQ(why(grid7x5, 1), "");
  EXPECT_EQ(why(grid7x5, 4), "");
  EXPECT_EQ(why(grid7x5, 8), "");
  EXPECT_EQ(why(grid7x5, 16), "raster_matters");
  EXPECT_EQ(why(grid7x5, 32), "raster_matters");
  // One tile row (a block of 128 rows), one tile column (of 160), and 2 x 2 blocks on 6
  // multiprocessors.
  EXPECT_EQ(why(R"("tile_m":[1,8,16],"tile_n":[5,16,2])", 1), "");
  EXPECT_EQ(why(R"("tile_m":[1,8,16],"tile_n":[5,16,2])", 4), "raster_matters");
  EXPECT_EQ(why(R"("tile_m":[7,8,2],"tile_n":[1,32,5])", 4), "raster_matters");
  EXPECT_EQ(why(R"("tile_m":[2,16,4],"tile_n":[2,16,5])", 1), "");
  EXPECT_EQ(why(R"("tile_m":[2,16,4],"tile_n":[2,16,5])", 4), "raster_matters");

  // The direct conv2d variant: raster stays at option 0 in every draw; the implicit GEMM has
  // grouped orders (rarely valid here: with 64 output channels, 2 to 4 tile rows leave one group
  // size that is not the same walk as a smaller one).
  auto conv = CreateTemplate(ParseWorkload(OpKind::kConv2d, "32,64,56,56,64,3,3,1,1"), Backend::kCuda);
  ASSERT_TRUE(conv.ok()) << conv.status();
  const search::ConfigSpace& cs = (*conv)->space();
  std::mt19937_64 rng(std::random_device{}());
  int direct = 0;
  for (const search::Config& c : test::DrawWhere(cs, rng, 200, nullptr)) {
    if (cs.GetInt(c, "variant") != 1) continue;
    ++direct;
    EXPECT_EQ(cs.GetInt(c, "raster"), 1) << cs.ToJson(c);
  }
  EXPECT_GT(direct, 0);
  const std::vector<search::Config> grouped = test::DrawWhere(cs, rng, 3, [&](const search::Config& c) {
    return cs.GetInt(c, "variant") == 0 && cs.GetInt(c, "raster") != 1;
  });
  EXPECT_EQ(grouped.size(), 3u);
}

// The interpreter's device: 3 multiprocessors, so outputs over 6144 elements get the knob and
// split-K (3 to 6 blocks) a 2 x 2 grid.
GpuLimits RasterInterpreterDevice() {
  GpuLimits limits;
  limits.multiprocessors = 3;
  return limits;
}

// A config of `space` from `knobs` (JSON members: the tile knobs and any others), the knobs it
// leaves out at plain values (scalar loads, one stage, no padding, unrolling or interleaving,
// no K slices; the newer knobs at what text without them means).
absl::StatusOr<search::Config> RasterConfig(const search::ConfigSpace& space, const std::string& knobs) {
  std::string text = "{" + knobs;
  for (const char* plain : {R"("vector":[1])", R"("double_buffer":[0])", R"("pad":[0])", R"("unroll_k":[0])",
                            R"("interleave":[0])", R"("k_slices":[1])"}) {
    const std::string name = std::string(plain).substr(0, std::string(plain).find(':'));
    if (knobs.find(name) == std::string::npos) text += std::string(",") + plain;
  }
  return space.FromJson(text + "}");
}

// Random inputs for `w` (fresh each run) and the output the reference loops give.
struct RasterTask {
  std::vector<std::vector<float>> inputs;
  std::vector<float> reference;
};
RasterTask RasterTaskOf(const Workload& w, std::mt19937_64& rng) {
  RasterTask task;
  for (const TensorSpec& spec : w.Inputs()) task.inputs.push_back(test::RandomValues(spec.NumElements(), rng));
  task.reference = test::ReferenceOutput(w, task.inputs);
  return task;
}

// Kernels of every raster option compute the reference in the GPU interpreter, with no access
// out of bounds, unwritten read or race: a 5 x 6 grid with tails along M and N under groups of
// 4 (a partial last group of one row) and 8 (column by column), with the cp.async pipeline,
// with split-K (the counters of the right tiles reset for the next launch) and with K slices;
// dense with bias and ReLU, batch_matmul (the batch on blockIdx.z), an implicit-GEMM conv2d
// of two images; and random configs with raster > 1 of each shape.
TEST(CudaGemmRasterTest, RasterConfigsMatchTheReferenceInTheInterpreter) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937_64 rng(seed);
  struct Case {
    Workload w;
    std::vector<std::string> fixed;
  };
  const std::string grid5x6 = R"("tile_m":[5,8,2],"tile_n":[6,16,1],"tile_k":[2,8])";
  const std::string grid2x2 = R"("tile_m":[2,8,5],"tile_n":[2,16,3],"tile_k":[2,8])";
  const std::vector<Case> cases = {
      {ParseWorkload(OpKind::kMatmul, "70,90,16"),
       {grid5x6 + R"(,"raster":[4])", grid5x6 + R"(,"raster":[8])",
        grid5x6 + R"(,"raster":[4],"cp_async":[2],"double_buffer":[1])",
        grid2x2 + R"(,"raster":[4],"k_split":[2])",
        R"("tile_m":[2,10,4],"tile_n":[2,16,3],"tile_k":[2,8],"raster":[4],"k_slices":[2])"}},
      {ParseWorkload(OpKind::kDense, "70,90,16", true, true), {grid5x6 + R"(,"raster":[4])"}},
      {ParseWorkload(OpKind::kBatchMatmul, "2,40,80,8"), {R"("tile_m":[3,8,2],"tile_n":[5,16,1],"tile_k":[1,8],"raster":[4])"}},
      {ParseWorkload(OpKind::kConv2d, "2,2,12,12,24,3,3,1,1", true, true),
       {R"("tile_m":[3,8,1],"tile_n":[9,32,1],"tile_k":[3,8],"raster":[4])"}},
  };
  std::set<int64_t> rasters;
  int splits = 0, slices = 0, pipelined = 0;
  for (const Case& k : cases) {
    auto t = CreateTemplate(k.w, Backend::kCuda, RasterInterpreterDevice());
    ASSERT_TRUE(t.ok()) << t.status();
    const search::ConfigSpace& space = (*t)->space();
    std::vector<search::Config> configs;
    for (const std::string& text : k.fixed) {
      absl::StatusOr<search::Config> c = RasterConfig(space, text);
      ASSERT_TRUE(c.ok()) << c.status() << " " << text;
      ASSERT_TRUE(space.IsValid(*c)) << k.w.Key() << " " << text << ": " << space.WhyInvalid(*c);
      configs.push_back(*c);
    }
    const size_t random = k.w.op == OpKind::kMatmul ? 6 : 3;
    const size_t size = configs.size() + random;
    configs = test::DrawWhere(space, rng, size, [&](const search::Config& c) {
      return space.GetInt(c, "raster") != 1;
    }, std::move(configs));
    EXPECT_EQ(configs.size(), k.fixed.size() + random) << k.w.Key();
    const RasterTask task = RasterTaskOf(k.w, rng);
    for (const search::Config& c : configs) {
      rasters.insert(space.GetInt(c, "raster"));
      splits += space.GetInt(c, "k_split") > 1;
      slices += space.GetInt(c, "k_slices") > 1;
      pipelined += space.GetInt(c, "cp_async") > 0;
      absl::StatusOr<LoweredFunc> f = (*t)->Lower(c, "raster");
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(test::RunAgainstReference(*f, task.inputs, task.reference), "") << k.w.Key() << " " << space.ToJson(c);
    }
  }
  EXPECT_TRUE(rasters.count(4) && rasters.count(8)) << rasters.size();
  EXPECT_GT(splits, 0);
  EXPECT_GT(slices, 0);
  EXPECT_GT(pipelined, 0);
}

// Replaces min(x, c) with c: the walk of a grid whose last group of tile rows is partial, as
// if that group were whole.
struct RasterWholeGroups : IRMutator {
  Expr MutateExpr(const Expr& e) override {
    int64_t c;
    if (e->kind == ExprKind::kMin && AsInt(static_cast<const BinaryNode*>(e.get())->b, &c)) {
      return static_cast<const BinaryNode*>(e.get())->b;
    }
    return IRMutator::MutateExpr(e);
  }
};

// A kernel whose partial last group walks as a whole one leaves tiles unwritten (their blocks
// go past the grid): the comparison with the reference catches it, and the right walk passes.
TEST(CudaGemmRasterTest, AWrongWalkIsCaught) {
  const Workload w = ParseWorkload(OpKind::kMatmul, "70,90,16");
  auto t = CreateTemplate(w, Backend::kCuda, RasterInterpreterDevice());
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<search::Config> c =
      RasterConfig((*t)->space(), R"("tile_m":[5,8,2],"tile_n":[6,16,1],"tile_k":[2,8],"raster":[4])");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*t)->space().IsValid(*c)) << (*t)->space().WhyInvalid(*c);
  absl::StatusOr<LoweredFunc> f = (*t)->Lower(*c, "k");
  ASSERT_TRUE(f.ok()) << f.status();
  std::mt19937_64 rng(std::random_device{}());
  const RasterTask task = RasterTaskOf(w, rng);
  EXPECT_EQ(test::RunAgainstReference(*f, task.inputs, task.reference), "");
  LoweredFunc broken = *f;
  RasterWholeGroups whole;
  broken.body = whole.MutateStmt(f->body);
  EXPECT_THAT(test::RunAgainstReference(broken, task.inputs, task.reference), HasSubstr("expected"));
}

// SGEMM 4096's best config under every raster option, and configs with raster 4 and 8 of the
// interpreter's shapes (a partial last group, split-K, K slices, cp.async, dense, a batch,
// conv2d), compile with NVRTC for sm_90.
TEST(CudaGemmRasterTest, RasterKernelsCompileForSm90) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "this build has no NVRTC";
  std::vector<test::CudaSource> jobs;
  auto sgemm = CreateTemplate(ParseWorkload(OpKind::kMatmul, "4096,4096,4096"), Backend::kCuda);
  ASSERT_TRUE(sgemm.ok()) << sgemm.status();
  for (int64_t g : {1, 4, 8, 16, 32}) {
    absl::StatusOr<search::Config> c = (*sgemm)->space().FromJson(RasterWith(kRasterSgemmBest, g));
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*sgemm)->Lower(*c, "sgemm"));
    ASSERT_TRUE(k.ok()) << k.status();
    jobs.push_back({absl::StrCat("sgemm 4096 raster ", g), k->source});
  }
  const std::string grid5x6 = R"("tile_m":[5,8,2],"tile_n":[6,16,1],"tile_k":[2,8])";
  const std::vector<std::pair<Workload, std::string>> small = {
      {ParseWorkload(OpKind::kMatmul, "70,90,16"), grid5x6 + R"(,"raster":[4],"vector":[4],"double_buffer":[1])"},
      {ParseWorkload(OpKind::kMatmul, "70,90,16"), grid5x6 + R"(,"raster":[8],"cp_async":[2],"double_buffer":[1])"},
      {ParseWorkload(OpKind::kMatmul, "70,90,16"),
       R"("tile_m":[2,8,5],"tile_n":[2,16,3],"tile_k":[2,8],"raster":[4],"k_split":[2])"},
      {ParseWorkload(OpKind::kMatmul, "70,90,16"),
       R"("tile_m":[2,10,4],"tile_n":[2,16,3],"tile_k":[2,8],"raster":[4],"k_slices":[2])"},
      {ParseWorkload(OpKind::kDense, "70,90,16", true, true), grid5x6 + R"(,"raster":[4])"},
      {ParseWorkload(OpKind::kBatchMatmul, "2,40,80,8"), R"("tile_m":[3,8,2],"tile_n":[5,16,1],"tile_k":[1,8],"raster":[4])"},
      {ParseWorkload(OpKind::kConv2d, "2,2,12,12,24,3,3,1,1", true, true),
       R"("tile_m":[3,8,1],"tile_n":[9,32,1],"tile_k":[3,8],"raster":[4])"},
  };
  for (const auto& [w, knobs] : small) {
    auto t = CreateTemplate(w, Backend::kCuda, RasterInterpreterDevice());
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<search::Config> c = RasterConfig((*t)->space(), knobs);
    ASSERT_TRUE(c.ok()) << c.status() << " " << knobs;
    ASSERT_TRUE((*t)->space().IsValid(*c)) << w.Key() << " " << knobs << ": " << (*t)->space().WhyInvalid(*c);
    absl::StatusOr<CudaKernel> k = GenerateCuda(*(*t)->Lower(*c, "small"));
    ASSERT_TRUE(k.ok()) << k.status();
    jobs.push_back({w.Key() + " " + knobs, k->source});
  }
  test::ExpectAllCompileForSm90(jobs);
}

// ---------------------------------------------------------------------------------------------
// On a GPU: skipped where no device opens.

class GpuRasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = test::OpenTestGpu();
    if (!device.ok()) GTEST_SKIP() << device.status().message();
    device_ = std::move(*device);
    const CudaDeviceInfo& info = device_->info();
    limits_.max_threads_per_block = info.max_threads_per_block;
    limits_.max_shared_bytes_per_block = info.max_shared_per_block_optin;
    limits_.max_registers_per_block = info.regs_per_block;
    limits_.multiprocessors = info.sm_count;
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  /// The output of config `c` of `t` on `inputs`, from the second of two launches on the same
  /// scratch memory (split-K's counters must have reset themselves), the output NaN-filled
  /// before each; empty after a failure (reported). With `ms`, the mean device time of 10
  /// back-to-back launches (L2 not flushed).
  std::vector<float> Run(const Template& t, const search::Config& c, const std::vector<std::vector<float>>& inputs,
                         double* ms = nullptr) {
    const std::string what = t.workload().Key() + " " + t.space().ToJson(c);
    absl::StatusOr<LoweredFunc> f = t.Lower(c, "raster");
    EXPECT_TRUE(f.ok()) << what << ": " << f.status();
    if (!f.ok()) return {};
    absl::StatusOr<CudaKernel> k = GenerateCuda(*f);
    EXPECT_TRUE(k.ok()) << what << ": " << k.status();
    if (!k.ok()) return {};
    absl::StatusOr<CompiledCuda> compiled = CompileCuda(k->source, device_->info().Arch());
    EXPECT_TRUE(compiled.ok()) << what << ": " << compiled.status();
    if (!compiled.ok()) return {};
    absl::StatusOr<CudaModule> module = device_->LoadModule(compiled->cubin);
    EXPECT_TRUE(module.ok()) << what << ": " << module.status();
    if (!module.ok()) return {};
    absl::StatusOr<CudaFunction> fn = module->GetFunction(k->name);
    EXPECT_TRUE(fn.ok()) << what << ": " << fn.status();
    if (!fn.ok()) return {};
    std::vector<DeviceBuffer> buffers;
    auto alloc = [&](int64_t bytes) {
      absl::StatusOr<DeviceBuffer> b = device_->Alloc(bytes);
      EXPECT_TRUE(b.ok()) << b.status();
      if (b.ok()) buffers.push_back(std::move(*b));
      return b.ok();
    };
    for (const std::vector<float>& in : inputs) {
      if (!alloc(static_cast<int64_t>(in.size()) * 4) || !buffers.back().CopyFromHost(in.data()).ok()) return {};
    }
    const int64_t outputs = t.workload().Output().NumElements();
    if (!alloc(outputs * 4)) return {};
    const size_t out = buffers.size() - 1;
    for (const CudaScratch& scratch : k->scratch) {
      if (!alloc(scratch.bytes) || !buffers.back().Fill32(scratch.zero_init ? 0u : 0x7fc00000u).ok()) return {};
    }
    KernelArgs args;
    for (const DeviceBuffer& b : buffers) args.Add(b);
    const Dim3 grid{static_cast<uint32_t>(k->grid[0]), static_cast<uint32_t>(k->grid[1]),
                    static_cast<uint32_t>(k->grid[2])};
    const Dim3 block{static_cast<uint32_t>(k->block[0]), static_cast<uint32_t>(k->block[1]),
                     static_cast<uint32_t>(k->block[2])};
    for (int run = 0; run < 2; ++run) {
      EXPECT_TRUE(buffers[out].Fill32(0x7fc00000u).ok());
      absl::Status launched = device_->Launch(*fn, grid, block, k->shared_bytes, args.pointers());
      absl::Status synced = launched.ok() ? device_->Synchronize() : launched;
      EXPECT_TRUE(synced.ok()) << what << ": " << synced;
      if (!synced.ok()) return {};
    }
    std::vector<float> result(static_cast<size_t>(outputs));
    if (!buffers[out].CopyToHost(result.data()).ok()) return {};
    if (ms != nullptr) {
      absl::StatusOr<double> t_ms = device_->TimeLaunches(*fn, grid, block, k->shared_bytes, args.pointers(), 10);
      *ms = t_ms.ok() ? *t_ms : -1.0;
    }
    return result;
  }

  std::unique_ptr<CudaDevice> device_;
  GpuLimits limits_;
  uint32_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Where a device result may differ from the double-precision reference: fp32 sums of `k`
// products of values in [-1, 1).
bool RasterClose(float got, float want, int64_t k) {
  return std::abs(got - want) <= 1e-5f * static_cast<float>(k) + 1e-4f * std::abs(want);
}

// SGEMM 4096's best config under every raster option computes the same output, bit for bit, as
// under raster 1 (each output element is the same sequence of FMAs, whichever block computes
// it), and raster 1 matches the reference at 512 random elements; each option's time is printed.
TEST_F(GpuRasterTest, SgemmBestConfigUnderEveryRasterMatchesRowOrder) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  const Workload w = ParseWorkload(OpKind::kMatmul, "4096,4096,4096");
  auto t = CreateTemplate(w, Backend::kCuda, limits_);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<std::vector<float>> inputs = {test::RandomValues(4096 * 4096, rng_),
                                                  test::RandomValues(4096 * 4096, rng_)};
  std::vector<float> rows;
  for (int64_t g : {1, 4, 8, 16, 32}) {
    absl::StatusOr<search::Config> c = (*t)->space().FromJson(RasterWith(kRasterSgemmBest, g));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*t)->space().IsValid(*c)) << g << ": " << (*t)->space().WhyInvalid(*c);
    double ms = 0;
    const std::vector<float> out = Run(**t, *c, inputs, &ms);
    ASSERT_EQ(out.size(), size_t{4096} * 4096) << "raster " << g;
    std::printf("sgemm 4096 raster %2lld: %.3f ms, %.2f TFLOP/s (no L2 flush)\n", static_cast<long long>(g), ms,
                2.0 * 4096.0 * 4096.0 * 4096.0 / (ms * 1e-3) * 1e-12);
    if (g == 1) {
      rows = out;
      std::uniform_int_distribution<int64_t> pick(0, 4096 - 1);
      for (int i = 0; i < 512; ++i) {
        const int64_t m = pick(rng_), n = pick(rng_);
        double want = 0;
        for (int64_t k = 0; k < 4096; ++k) want += double{inputs[0][m * 4096 + k]} * inputs[1][k * 4096 + n];
        ASSERT_TRUE(RasterClose(out[m * 4096 + n], static_cast<float>(want), 4096))
            << "C[" << m << "][" << n << "] = " << out[m * 4096 + n] << ", expected " << want;
      }
    } else {
      EXPECT_TRUE(out == rows) << "raster " << g << " differs from raster 1";
    }
  }
}

// Random valid configs with raster > 1 of a matmul with tails, dense with bias and ReLU, the ViT
// attention batch_matmul and a batched conv2d (implicit GEMM) match the reference, and the
// same configs under raster 1, bit for bit.
TEST_F(GpuRasterTest, RandomRasterConfigsMatchTheReferenceAndRowOrder) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  const std::vector<Workload> shapes = {ParseWorkload(OpKind::kMatmul, "1000,1000,1000"),
                                        ParseWorkload(OpKind::kDense, "1024,1000,512", true, true),
                                        ParseWorkload(OpKind::kBatchMatmul, "12,197,197,64"),
                                        ParseWorkload(OpKind::kConv2d, "8,64,28,28,64,3,3,1,1", true, true)};
  int checked = 0;
  for (const Workload& w : shapes) {
    auto t = CreateTemplate(w, Backend::kCuda, limits_);
    ASSERT_TRUE(t.ok()) << t.status();
    const search::ConfigSpace& space = (*t)->space();
    const std::vector<search::Config> configs = test::DrawWhere(space, rng_, 4, [&](const search::Config& c) {
      return space.GetInt(c, "raster") != 1;
    });
    EXPECT_EQ(configs.size(), 4u) << w.Key();
    std::vector<std::vector<float>> inputs;
    for (const TensorSpec& spec : w.Inputs()) inputs.push_back(test::RandomValues(spec.NumElements(), rng_));
    const std::vector<float> reference = test::ReferenceOutput(w, inputs);
    const int64_t k = GemmDimsOf(w).k;
    for (const search::Config& c : configs) {
      search::Config rows_config = c;
      rows_config[space.KnobIndex("raster")] = 0;
      ASSERT_TRUE(space.IsValid(rows_config)) << space.WhyInvalid(rows_config);
      const std::vector<float> out = Run(**t, c, inputs), rows = Run(**t, rows_config, inputs);
      ASSERT_EQ(out.size(), reference.size()) << w.Key() << " " << space.ToJson(c);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_TRUE(RasterClose(out[i], reference[i], k))
            << w.Key() << " " << space.ToJson(c) << ": out[" << i << "] = " << out[i] << ", expected " << reference[i];
      }
      EXPECT_TRUE(out == rows) << w.Key() << " " << space.ToJson(c) << " differs from raster 1";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16);
}

}  // namespace
}  // namespace tune::codegen
