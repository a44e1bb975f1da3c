// Compute stages and the schedule primitives that turn them into loop nests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "codegen/ir/ir.h"
#include "search/space.h"

namespace tune::codegen {

/// A loop variable of a compute definition with its extent (iterates 0..extent-1).
struct IterVar {
  Expr var;
  int64_t extent;
};
IterVar MakeIterVar(const std::string& name, int64_t extent);

/// One compute definition plus its schedule. Either an elementwise/layout stage
/// (out[axes] = value) or a sum reduction (out[axes] = sum over reduce_axes of value), with an
/// optional epilogue applied to each finished output element.
///
/// Loops are named by integer handles. The root loops are axis(i) and reduce_axis(i);
/// Split/Fuse create new loops; the leaf loops, in their current order, become the nest.
class Stage {
 public:
  Stage(Buffer output, std::vector<IterVar> axes, Expr value);
  Stage(Buffer output, std::vector<IterVar> axes, std::vector<IterVar> reduce_axes, Expr summand);

  /// out = epilogue, where `acc` (a var) stands for the reduced value inside `epilogue` and
  /// the root axis vars may appear (e.g. relu(acc + bias[n])).
  void SetEpilogue(Expr acc, Expr epilogue);

  /// A reduction whose summand is zero wherever one of `conjuncts` (conditions over the root
  /// axis and reduce axis vars) is false, e.g. a convolution's taps on the zero border of its
  /// padded input: the accumulation skips those iterations. Each conjunct becomes an If around
  /// the rest of the accumulation nest in the innermost loop that binds its last var (in a
  /// tail's partial copy with the copy's fixed index; in an unrolled loop it folds per
  /// iteration). One over a vectorized loop's var is left out (an If there would make the loop
  /// serial), which only costs the skipped work: the summand is zero there anyway. The
  /// initialization and write-back of the output or accumulator tile are never skipped.
  /// Reductions only.
  void SkipWhereFalse(std::vector<Expr> conjuncts);

  int axis(int i) const { return i; }
  int reduce_axis(int i) const { return static_cast<int>(axes_.size()) + i; }
  int64_t extent(int loop) const { return loops_[loop].extent; }
  const std::string& loop_name(int loop) const { return loops_[loop].name; }
  const std::vector<int>& leaves() const { return leaves_; }
  const Buffer& output() const { return output_; }

  /// Splits `loop` into (outer, inner) with inner extent `factor`. The two replace `loop` in
  /// the leaf order. With SplitTails::kNone `factor` must divide the loop's extent. With
  /// kAllowed it need not: the outer extent is ceil(extent / factor), the last outer iteration
  /// is a partial tile, and Lower() runs it in a guarded copy of the nest (see Lower).
  std::pair<int, int> Split(int loop, int64_t factor, search::SplitTails tails = search::SplitTails::kNone);
  /// Splits `loop` into as many loops as `factors` (outermost first). kNone: product = extent.
  /// kAllowed: the inner factors (all but the first) need not divide the extent, and the first
  /// is ceil(extent / product of the inner ones), as search::ConfigSpace::AddSplit makes them.
  std::vector<int> SplitFactors(int loop, const std::vector<int64_t>& factors,
                                search::SplitTails tails = search::SplitTails::kNone);
  /// Fuses two adjacent leaves (outer then inner, both spatial) into one.
  int Fuse(int outer, int inner);
  /// Sets the leaf order; `order` must be a permutation of leaves().
  void Reorder(const std::vector<int>& order);
  void Vectorize(int loop) { Annotate(loop, ForKind::kVectorized); }
  void Unroll(int loop) { Annotate(loop, ForKind::kUnrolled); }
  void Parallel(int loop) { Annotate(loop, ForKind::kParallel); }
  void Annotate(int loop, ForKind kind);
  /// Accumulates into a kLocal tile allocated inside leaf `attach` (a spatial leaf); the
  /// tile is zeroed before the reduction and written back (through the epilogue) after it.
  /// Reduce leaves outside the tile: the output is zeroed before the nest and holds the partial
  /// sums; each visit of the tile loads its part of the output, accumulates the inner
  /// reduction and stores it back, and the epilogue runs over the output after the nest.
  void CacheWrite(int attach);

  /// The loop nest of this stage. Splits with a tail (Split with kAllowed, factor not dividing
  /// the extent): each statement that indexes through the split loop runs only where the split
  /// loop's index is below its extent. Full tiles run the unguarded nest (the same statements
  /// as without a tail); the partial last tile runs a copy of the nest below the split's outer
  /// loop, with that index fixed and each statement under an If hoisted to the innermost loop
  /// its condition uses (in a vectorized loop the If masks lanes; an unrolled loop keeps its
  /// iterations where their conditions fold to constants, else runs serially). A serial outer
  /// loop is partitioned (extent - 1 full iterations, then the partial tile); a parallel or
  /// fused one is versioned inside its body (if full ... if partial ...). The accumulator tile
  /// of CacheWrite is local and needs no guard on its initialization; the accumulation, the
  /// write-back and the epilogue are guarded. Without tails the nest is exactly the untailed one.
  Stmt Lower() const;

 private:
  struct Loop {
    std::string name;
    int64_t extent;
    bool reduce;
    ForKind kind = ForKind::kSerial;
    Expr var;
  };
  struct Relation {
    bool is_split;
    int parent, outer, inner;  // split: parent -> (outer, inner); fuse: (outer, inner) -> parent
  };
  int AddLoop(const std::string& name, int64_t extent, bool reduce);
  /// Value of every loop (by handle) in terms of the leaf loop vars.
  std::vector<Expr> LoopValues() const;
  Stmt Nest(const std::vector<int>& leaves, Stmt body) const;
  Stmt LowerNest() const;
  class TailLowering;

  Buffer output_;
  std::vector<IterVar> axes_, reduce_axes_;
  Expr value_;
  bool is_reduce_ = false;
  Expr acc_var_, epilogue_;
  std::vector<Loop> loops_;
  std::vector<Relation> relations_;
  std::vector<int> leaves_;
  int cache_write_at_ = -1;
  bool cache_write_ = false;
  std::vector<Expr> skip_unless_;  // SkipWhereFalse's conjuncts, over the root vars
};

/// A kernel: its argument buffers, scratch buffers and stages run in order (a stage whose
/// output is a buffer kept across calls, BufferNode::prepack_source, only in a call where that
/// buffer's `fresh` flag is 1). GPU templates
/// build their loop nest with the primitives of codegen/gpu_schedule.h instead of stages:
/// then `body` is that nest and `stages` is empty.
struct Schedule {
  std::string name;
  std::vector<Buffer> args;     // kArg buffers in argument order
  std::vector<Buffer> scratch;  // kHeap buffers written by earlier stages
  std::vector<Stage> stages;
  Stmt body;                    // a nest built directly (GPU templates); null otherwise

  LoweredFunc Lower() const;
};

}  // namespace tune::codegen
