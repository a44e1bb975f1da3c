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

TEST(WarpAccessTest, IndicesThatReadMemoryAreUnknown) {
  Expr tx = codegen::MakeVar("tx"), ty = codegen::MakeVar("ty");
  codegen::Buffer table = codegen::MakeBuffer("table", {32}, codegen::BufferScope::kArg, 0);
  WarpAccess a = AnalyzeWarpAccess({32}, {codegen::Load(table, {tx})}, Warp(tx, 32, ty, 1));
  EXPECT_FALSE(a.known);
  EXPECT_FALSE(AnalyzeWarpAccess({4, 4}, {tx}, Warp(tx, 32, ty, 1)).known);  // rank mismatch
}

}  // namespace
}  // namespace tune::costmodel
