// Tests of the warp-level access analysis: sectors of global accesses, shared-memory banks.
#include "costmodel/warp_access.h"

#include <vector>

#include "gtest/gtest.h"

namespace tune::costmodel {
namespace {

using codegen::Expr;
using codegen::VarNode;

const VarNode* AsVarNode(const Expr& e) { return static_cast<const VarNode*>(e.get()); }

/// A block of `x` x `y` threads (threadIdx.x = tx, threadIdx.y = ty), `lanes` vector lanes on `v`.
WarpShape Warp(const Expr& tx, int64_t x, const Expr& ty, int64_t y, const Expr& v = Expr(), int64_t lanes = 1) {
  WarpShape w;
  w.thread_vars = {AsVarNode(tx), y > 1 ? AsVarNode(ty) : nullptr, nullptr};
  w.thread_extents = {x, y, 1};
  if (lanes > 1) {
    w.vector_var = AsVarNode(v);
    w.vector_lanes = lanes;
  }
  return w;
}

TEST(WarpAccessTest, RowsAreCoalescedAndColumnsAreNot) {
  Expr tx = codegen::MakeVar("tx"), ty = codegen::MakeVar("ty"), k = codegen::MakeVar("k");
  // 32 threads along a row of 64 floats: 128 bytes, 4 sectors, none wasted.
  WarpAccess row = AnalyzeWarpAccess({64, 64}, {k, tx}, Warp(tx, 32, ty, 1));
  ASSERT_TRUE(row.known);
  EXPECT_EQ(row.sectors, 4);
  EXPECT_EQ(row.min_sectors, 4);
  // Down a column: each thread's float in its own sector (256 bytes apart), 8x the traffic.
  WarpAccess column = AnalyzeWarpAccess({64, 64}, {tx, k}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(column.sectors, 32);
  EXPECT_EQ(column.min_sectors, 4);
  // A block of 8 x 4 threads: the warp reads 4 rows of 8 floats, one sector each.
  WarpAccess tile = AnalyzeWarpAccess({64, 64}, {ty, tx}, Warp(tx, 8, ty, 4));
  EXPECT_EQ(tile.sectors, 4);
  EXPECT_EQ(tile.min_sectors, 4);
  // Every lane the same float: one sector, and one shared-memory wavefront (a broadcast).
  WarpAccess same = AnalyzeWarpAccess({64, 64}, {k, Expr(int64_t{3})}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(same.sectors, 1);
  EXPECT_EQ(same.min_sectors, 1);
  EXPECT_EQ(same.wavefronts, 1);
  // Four lanes per thread (float4): 512 bytes in 16 sectors, served in 4 phases of 8 threads.
  Expr v = codegen::MakeVar("v");
  WarpAccess wide = AnalyzeWarpAccess({64, 128}, {k, tx * Expr(int64_t{4}) + v}, Warp(tx, 32, ty, 1, v, 4));
  EXPECT_EQ(wide.sectors, 16);
  EXPECT_EQ(wide.min_sectors, 16);
  EXPECT_EQ(wide.wavefronts, 4);
  EXPECT_EQ(wide.min_wavefronts, 4);
}

TEST(WarpAccessTest, SharedMemoryColumnsConflictUnlessPadded) {
  Expr tx = codegen::MakeVar("tx"), ty = codegen::MakeVar("ty"), k = codegen::MakeVar("k");
  // Rows of 32 floats: a column lies in one bank, 32 distinct words: 32 wavefronts.
  WarpAccess column = AnalyzeWarpAccess({32, 32}, {tx, k}, Warp(tx, 32, ty, 1));
  ASSERT_TRUE(column.known);
  EXPECT_EQ(column.wavefronts, 32);
  EXPECT_EQ(column.min_wavefronts, 1);
  // Padded to 33 floats a row, the column spreads over all banks.
  WarpAccess padded = AnalyzeWarpAccess({32, 33}, {tx, k}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(padded.wavefronts, 1);
  // Stride 2: two words per bank, two-way.
  WarpAccess strided = AnalyzeWarpAccess({4, 64}, {k, tx * Expr(int64_t{2})}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(strided.wavefronts, 2);
  // Index arithmetic with div/mod: (tx / 8, tx % 8) in rows of 8 floats is a contiguous run.
  WarpAccess divmod = AnalyzeWarpAccess({4, 8}, {tx / Expr(int64_t{8}), tx % Expr(int64_t{8})}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(divmod.wavefronts, 1);
  EXPECT_EQ(divmod.sectors, 4);
}

TEST(WarpAccessTest, SelectsTakeTheirLanesBranchAndNegativeOffsetsFloor) {
  Expr tx = codegen::MakeVar("tx"), ty = codegen::MakeVar("ty"), k = codegen::MakeVar("k");
  // The first 16 lanes read column tx, the others column tx + 32 (a second run of 16 floats);
  // the branch a lane does not take may divide by zero (k is 0): still known.
  Expr split = codegen::Select(tx < Expr(int64_t{16}), tx, tx + Expr(int64_t{32}));
  WarpAccess two_runs = AnalyzeWarpAccess({4, 128}, {k, split}, Warp(tx, 32, ty, 1));
  ASSERT_TRUE(two_runs.known);
  EXPECT_EQ(two_runs.sectors, 4);  // 0-15 and 48-63: two sectors each
  EXPECT_EQ(two_runs.min_sectors, 4);
  Expr guarded = codegen::Select(tx < Expr(int64_t{64}), tx, tx / k);
  WarpAccess taken = AnalyzeWarpAccess({4, 64}, {k, guarded}, Warp(tx, 32, ty, 1));
  ASSERT_TRUE(taken.known);
  EXPECT_EQ(taken.sectors, 4);
  // Where a lane takes the division by zero, unknown.
  EXPECT_FALSE(AnalyzeWarpAccess({4, 64}, {k, tx / k}, Warp(tx, 32, ty, 1)).known);
  // Offsets 8 floats before the buffer's start still floor into sectors: -8..23 spans four.
  WarpAccess shifted = AnalyzeWarpAccess({64}, {tx - Expr(int64_t{8})}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(shifted.sectors, 4);
  // Lanes that straddle sectors: 1..32 touch five.
  WarpAccess straddle = AnalyzeWarpAccess({64}, {tx + Expr(int64_t{1})}, Warp(tx, 32, ty, 1));
  EXPECT_EQ(straddle.sectors, 5);
  EXPECT_EQ(straddle.min_sectors, 4);
  // A column of rows of 24 floats (not a power of two) with tx % 3 and tx / 3 indices.
  WarpAccess mixed = AnalyzeWarpAccess({16, 24}, {tx / Expr(int64_t{3}), tx % Expr(int64_t{3})}, Warp(tx, 32, ty, 1));
  ASSERT_TRUE(mixed.known);
  EXPECT_EQ(mixed.min_sectors, 4);  // 32 distinct floats
  EXPECT_EQ(mixed.sectors, 11);     // rows 0..10, 3 floats each, one sector a row (24 floats = 3 sectors a row)
}

TEST(WarpAccessTest, IndicesThatReadMemoryAreUnknown) {
  Expr tx = codegen::MakeVar("tx"), ty = codegen::MakeVar("ty");
  codegen::Buffer table = codegen::MakeBuffer("table", {32}, codegen::BufferScope::kArg, 0);
  WarpAccess a = AnalyzeWarpAccess({32}, {codegen::Load(table, {tx})}, Warp(tx, 32, ty, 1));
  EXPECT_FALSE(a.known);
  EXPECT_FALSE(AnalyzeWarpAccess({4, 4}, {tx}, Warp(tx, 32, ty, 1)).known);  // rank mismatch
}

}  // namespace
}  // namespace tune::costmodel
