// Lowering of scheduled stages (split/fuse/reorder/annotate/cache_write) into loop nests.
#include "codegen/ir/schedule.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "base/check.h"
#include "codegen/ir/ir_analysis.h"
#include "codegen/ir/simplify.h"

namespace tune::codegen {
namespace {

/// `body` under `cond`, folding a constant condition: `body` itself when true, nothing (null)
/// when false. A null `body` stays null.
Stmt GuardedBy(const Expr& cond, Stmt body) {
  if (body == nullptr) return nullptr;
  int64_t c;
  if (AsInt(cond, &c)) return c ? body : nullptr;
  return If(cond, std::move(body));
}

}  // namespace

/// The lowering of a stage whose splits have tails (Stage::Lower): versioned nests and guards.
class Stage::TailLowering {
 public:
  /// A split whose inner extent does not divide its parent's extent.
  struct Tail {
    Expr guard;                  // value(parent) < extent(parent): the indices that exist
    Expr outer_value;            // value(outer), in leaf vars
    const VarNode* outer_leaf;   // the outer loop's var when it is a leaf, else null
    int64_t last;                // extent(outer) - 1: the outer index of the partial tile
    bool reduce;                 // the parent is a reduction loop
  };
  enum class Mode { kUndecided, kFull, kPartial };
  /// What holds at a point of the nest being built.
  struct State {
    std::vector<Mode> mode;                          // per tail
    std::vector<bool> guarded;                       // per tail: an enclosing If checks it
    std::vector<bool> skip_done;                     // per SkipWhereFalse conjunct: placed or left out
    std::unordered_map<const VarNode*, Expr> subst;  // outer leaves fixed in a partial copy
    std::unordered_set<const VarNode*> bound;        // leaf vars of the enclosing loops
  };
  using Body = std::function<Stmt(const State&)>;

  /// `skip`: the SkipWhereFalse conjuncts in leaf vars, placed by Build(place_skips = true).
  TailLowering(const Stage& stage, const std::vector<Expr>& values, std::vector<Expr> skip)
      : stage_(stage), skip_(std::move(skip)) {
    for (const Relation& r : stage.relations_) {
      if (!r.is_split) continue;
      const Loop &parent = stage.loops_[r.parent], &outer = stage.loops_[r.outer], &inner = stage.loops_[r.inner];
      if (outer.extent * inner.extent == parent.extent) continue;
      const bool outer_is_leaf =
          std::find(stage.leaves_.begin(), stage.leaves_.end(), r.outer) != stage.leaves_.end();
      tails_.push_back(Tail{values[r.parent] < Expr(parent.extent), values[r.outer],
                            outer_is_leaf ? AsVar(outer.var) : nullptr, outer.extent - 1, parent.reduce});
    }
  }
  bool empty() const { return tails_.empty(); }
  State Start() const {
    return State{std::vector<Mode>(tails_.size(), Mode::kUndecided), std::vector<bool>(tails_.size(), false),
                 std::vector<bool>(skip_.size(), false), {}, {}};
  }
  /// The loops `leaves` (outermost first) around body(state), where the tails that the body's
  /// statements index through (the spatial ones, and the reduce ones too when `with_reduce`)
  /// are versioned (full tiles / partial tile) where their outer index is known, and guarded
  /// in the partial copy where their condition's variables are bound. `body` holds the
  /// statements themselves when `statements`, else further nests that Build the rest. With
  /// `place_skips` (an accumulation nest) each SkipWhereFalse conjunct not placed around the
  /// nest already wraps the rest of it where its last var is bound, with the values a partial
  /// copy fixed; one that would land in or below a vectorized loop is left out.
  Stmt Build(const std::vector<int>& leaves, bool with_reduce, const State& state, const Body& body,
             bool statements = true, bool place_skips = false) const {
    State start = state;
    start.skip_done.assign(skip_.size(), !place_skips);
    Stmt s = Level(leaves, 0, with_reduce, statements, start, body);
    return s != nullptr ? s : Seq({});
  }

 private:
  bool AllBound(const Expr& e, const State& state) const {
    for (int l : stage_.leaves_) {
      const VarNode* v = AsVar(stage_.loops_[l].var);
      if (!state.bound.count(v) && UsesVar(e, v)) return false;
    }
    return true;
  }

  /// The kind of loop `l` at this point. In a partial tile an unrolled loop stays unrolled only
  /// where the guard of its own split becomes a constant per iteration (every other index of
  /// the guard fixed), so the dead iterations fold away, or where an enclosing If checks every
  /// partial tail's guard already (the body below runs unguarded: the full panels of a GEMM's
  /// last, shorter block); otherwise it runs serially, which keeps the rarely run copies of the
  /// nest small.
  ForKind KindInPartialTile(const Loop& l, bool with_reduce, const State& state) const {
    if (l.kind != ForKind::kUnrolled) return l.kind;
    const VarNode* var = AsVar(l.var);
    bool partial = false, folds = false;
    for (size_t t = 0; t < tails_.size(); ++t) {
      const Tail& tail = tails_[t];
      // A tail whose guard an enclosing If already checks leaves the body below unguarded.
      if ((tail.reduce && !with_reduce) || state.mode[t] != Mode::kPartial || state.guarded[t]) continue;
      partial = true;
      Expr guard = Substitute(tail.guard, state.subst);
      if (!UsesVar(guard, var)) continue;
      bool only_var = true;
      for (int other : stage_.leaves_) {
        const VarNode* v = AsVar(stage_.loops_[other].var);
        if (v != var && UsesVar(guard, v)) only_var = false;
      }
      if (!only_var) return ForKind::kSerial;
      folds = true;
    }
    return partial && !folds ? ForKind::kSerial : l.kind;
  }

  Stmt Level(const std::vector<int>& leaves, size_t pos, bool with_reduce, bool statements, State state,
             const Body& body) const {
    // Versioning: the first tail whose outer index is known here splits the nest in two.
    for (size_t t = 0; t < tails_.size(); ++t) {
      const Tail& tail = tails_[t];
      if ((tail.reduce && !with_reduce) || state.mode[t] != Mode::kUndecided) continue;
      Expr outer = Substitute(tail.outer_value, state.subst);
      if (!AllBound(outer, state)) continue;
      State full = state, partial = state;
      full.mode[t] = Mode::kFull;
      partial.mode[t] = Mode::kPartial;
      if (tail.outer_leaf != nullptr) partial.subst[tail.outer_leaf] = Expr(tail.last);
      Stmt partial_nest = Level(leaves, pos, with_reduce, statements, partial, body);
      if (tail.last == 0) return partial_nest;  // one outer iteration: only the partial tile
      Stmt full_nest = GuardedBy(outer < Expr(tail.last), Level(leaves, pos, with_reduce, statements, full, body));
      return Seq({full_nest, GuardedBy(Expr(tail.last) <= outer, partial_nest)});
    }
    // Guards of the partial tiles whose indices are all bound here.
    Expr cond;
    for (size_t t = 0; t < tails_.size(); ++t) {
      const Tail& tail = tails_[t];
      if ((tail.reduce && !with_reduce) || state.mode[t] != Mode::kPartial || state.guarded[t]) continue;
      Expr guard = Substitute(tail.guard, state.subst);
      if (!AllBound(guard, state)) continue;
      state.guarded[t] = true;
      cond = cond.defined() ? (cond && guard) : guard;
    }
    for (size_t k = 0; k < skip_.size(); ++k) {
      if (state.skip_done[k]) continue;
      Expr c = Substitute(skip_[k], state.subst);
      if (!AllBound(c, state)) continue;
      state.skip_done[k] = true;
      cond = cond.defined() ? (cond && c) : c;
    }
    Stmt inner;
    if (pos == leaves.size()) {
      for (size_t t = 0; t < tails_.size() && statements; ++t) {
        TUNE_CHECK_MSG((tails_[t].reduce && !with_reduce) || state.mode[t] == Mode::kFull || state.guarded[t],
                       "a tail of stage " + stage_.output_->name + " is neither full nor guarded");
      }
      inner = body(state);
    } else {
      const Loop& l = stage_.loops_[leaves[pos]];
      const VarNode* var = AsVar(l.var);
      state.bound.insert(var);
      const ForKind kind = KindInPartialTile(l, with_reduce, state);
      // A conjunct over a vectorized var is left out: an If there would make the loop serial.
      if (kind == ForKind::kVectorized) {
        for (size_t k = 0; k < skip_.size(); ++k) {
          if (!state.skip_done[k] && UsesVar(Substitute(skip_[k], state.subst), var)) state.skip_done[k] = true;
        }
      }
      // A serial (unrolled, vectorized) loop that is the outer loop of a tail is partitioned:
      // its full tiles run in a loop of one iteration less, then the partial tile once, with
      // the index fixed. A parallel one keeps all iterations on the pool and is versioned
      // inside its body.
      size_t t = 0;
      while (t < tails_.size() && !(tails_[t].outer_leaf == var && state.mode[t] == Mode::kUndecided &&
                                    (with_reduce || !tails_[t].reduce))) {
        ++t;
      }
      if (t < tails_.size() && kind != ForKind::kParallel) {
        State full = state, partial = state;
        full.mode[t] = Mode::kFull;
        partial.mode[t] = Mode::kPartial;
        partial.subst[var] = Expr(tails_[t].last);
        Stmt full_nest;
        if (tails_[t].last > 0) {
          Stmt b = Level(leaves, pos + 1, with_reduce, statements, full, body);
          if (b != nullptr) full_nest = For(l.var, tails_[t].last, kind, b);
        }
        inner = Seq({full_nest, Level(leaves, pos + 1, with_reduce, statements, partial, body)});
      } else {
        Stmt b = Level(leaves, pos + 1, with_reduce, statements, state, body);
        if (b != nullptr) inner = For(l.var, l.extent, kind, b);
      }
    }
    return cond.defined() ? GuardedBy(cond, inner) : inner;
  }

  const Stage& stage_;
  std::vector<Tail> tails_;
  std::vector<Expr> skip_;
};

IterVar MakeIterVar(const std::string& name, int64_t extent) { return IterVar{MakeVar(name), extent}; }

Stage::Stage(Buffer output, std::vector<IterVar> axes, Expr value)
    : output_(std::move(output)), axes_(std::move(axes)), value_(std::move(value)) {
  TUNE_CHECK(axes_.size() == output_->shape.size());
  for (auto& a : axes_) leaves_.push_back(AddLoop(AsVar(a.var)->name, a.extent, false));
}

Stage::Stage(Buffer output, std::vector<IterVar> axes, std::vector<IterVar> reduce_axes, Expr summand)
    : output_(std::move(output)), axes_(std::move(axes)), reduce_axes_(std::move(reduce_axes)),
      value_(std::move(summand)), is_reduce_(true) {
  TUNE_CHECK(axes_.size() == output_->shape.size());
  for (auto& a : axes_) leaves_.push_back(AddLoop(AsVar(a.var)->name, a.extent, false));
  for (auto& a : reduce_axes_) leaves_.push_back(AddLoop(AsVar(a.var)->name, a.extent, true));
}

void Stage::SkipWhereFalse(std::vector<Expr> conjuncts) {
  TUNE_CHECK(is_reduce_);
  for (Expr& c : conjuncts) {
    TUNE_CHECK(c.defined());
    skip_unless_.push_back(std::move(c));
  }
}

void Stage::SetEpilogue(Expr acc, Expr epilogue) {
  TUNE_CHECK(AsVar(acc) != nullptr);
  acc_var_ = std::move(acc);
  epilogue_ = std::move(epilogue);
}

int Stage::AddLoop(const std::string& name, int64_t extent, bool reduce) {
  TUNE_CHECK_MSG(extent > 0, "loop " + name + " has no iterations");
  loops_.push_back(Loop{name, extent, reduce, ForKind::kSerial, MakeVar(name)});
  return static_cast<int>(loops_.size()) - 1;
}

std::pair<int, int> Stage::Split(int loop, int64_t factor, search::SplitTails tails) {
  auto it = std::find(leaves_.begin(), leaves_.end(), loop);
  TUNE_CHECK_MSG(it != leaves_.end(), "split of a non-leaf loop");
  Loop parent = loops_[loop];
  TUNE_CHECK(factor > 0 && (tails == search::SplitTails::kAllowed || parent.extent % factor == 0))
      << "split factor " << factor << " does not divide " << parent.extent;
  int outer = AddLoop(parent.name + ".o", (parent.extent + factor - 1) / factor, parent.reduce);
  int inner = AddLoop(parent.name + ".i", factor, parent.reduce);
  relations_.push_back(Relation{true, loop, outer, inner});
  it = std::find(leaves_.begin(), leaves_.end(), loop);
  *it = inner;
  leaves_.insert(it, outer);
  return {outer, inner};
}

std::vector<int> Stage::SplitFactors(int loop, const std::vector<int64_t>& factors, search::SplitTails tails) {
  TUNE_CHECK(!factors.empty());
  std::string base = loops_[loop].name;
  std::vector<int> out;
  int rest = loop;
  int64_t inner_product = 1;
  for (size_t i = 1; i < factors.size(); ++i) inner_product *= factors[i];
  const int64_t extent = loops_[loop].extent;
  TUNE_CHECK(factors[0] == (extent + inner_product - 1) / inner_product &&
             (tails == search::SplitTails::kAllowed || factors[0] * inner_product == extent))
      << "split factors of " << base << " (extent " << extent << ") start with " << factors[0];
  for (size_t i = 0; i + 1 < factors.size(); ++i) {
    // Only the outermost split may have a tail; the inner ones split the inner product exactly.
    auto [o, in] = Split(rest, inner_product, i == 0 ? tails : search::SplitTails::kNone);
    out.push_back(o);
    rest = in;
    inner_product /= factors[i + 1];
  }
  out.push_back(rest);
  for (size_t i = 0; i < out.size(); ++i) {
    loops_[out[i]].name = base + std::to_string(i);
    loops_[out[i]].var = MakeVar(loops_[out[i]].name);
  }
  return out;
}

int Stage::Fuse(int outer, int inner) {
  auto it = std::find(leaves_.begin(), leaves_.end(), outer);
  TUNE_CHECK_MSG(it != leaves_.end() && it + 1 != leaves_.end() && *(it + 1) == inner,
                 "fuse needs two adjacent leaves");
  TUNE_CHECK_MSG(!loops_[outer].reduce && !loops_[inner].reduce, "fuse of reduce loops");
  int fused = AddLoop(loops_[outer].name + "." + loops_[inner].name,
                      loops_[outer].extent * loops_[inner].extent, false);
  relations_.push_back(Relation{false, fused, outer, inner});
  it = leaves_.erase(it);
  *it = fused;
  return fused;
}

void Stage::Reorder(const std::vector<int>& order) {
  std::vector<int> a = order, b = leaves_;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  TUNE_CHECK_MSG(a == b, "reorder must permute the leaf loops");
  leaves_ = order;
}

void Stage::Annotate(int loop, ForKind kind) {
  TUNE_CHECK(std::find(leaves_.begin(), leaves_.end(), loop) != leaves_.end());
  TUNE_CHECK_MSG(!(kind == ForKind::kParallel && loops_[loop].reduce), "parallel reduce loop");
  loops_[loop].kind = kind;
}

void Stage::CacheWrite(int attach) {
  TUNE_CHECK_MSG(is_reduce_, "cache_write needs a reduction");
  auto it = std::find(leaves_.begin(), leaves_.end(), attach);
  TUNE_CHECK_MSG(it != leaves_.end(), "cache_write attach point is not a leaf");
  TUNE_CHECK_MSG(!loops_[attach].reduce, "cache_write attach point is a reduce loop");
  cache_write_ = true;
  cache_write_at_ = attach;
}

std::vector<Expr> Stage::LoopValues() const {
  std::vector<Expr> value(loops_.size());
  for (int l : leaves_) value[l] = loops_[l].var;
  for (auto r = relations_.rbegin(); r != relations_.rend(); ++r) {
    if (r->is_split) {
      value[r->parent] = value[r->outer] * Expr(loops_[r->inner].extent) + value[r->inner];
    } else {
      int64_t e = loops_[r->inner].extent;
      value[r->outer] = value[r->parent] / Expr(e);
      value[r->inner] = value[r->parent] % Expr(e);
    }
  }
  return value;
}

Stmt Stage::Nest(const std::vector<int>& leaves, Stmt body) const {
  for (auto it = leaves.rbegin(); it != leaves.rend(); ++it) {
    const Loop& l = loops_[*it];
    body = For(l.var, l.extent, l.kind, body);
  }
  return body;
}

Stmt Stage::Lower() const {
  std::unordered_map<const VarNode*, int64_t> extents;
  for (int l : leaves_) extents[AsVar(loops_[l].var)] = loops_[l].extent;
  return SimplifyDivMod(LowerNest(), extents);
}

Stmt Stage::LowerNest() const {
  std::vector<Expr> values = LoopValues();
  std::unordered_map<const VarNode*, Expr> root_map;
  std::vector<Expr> out_index;
  for (size_t i = 0; i < axes_.size(); ++i) {
    root_map[AsVar(axes_[i].var)] = values[axis(static_cast<int>(i))];
    out_index.push_back(values[axis(static_cast<int>(i))]);
  }
  for (size_t i = 0; i < reduce_axes_.size(); ++i) {
    root_map[AsVar(reduce_axes_[i].var)] = values[reduce_axis(static_cast<int>(i))];
  }
  Expr value = Substitute(value_, root_map);
  auto epilogue = [&](Expr acc) {
    if (!epilogue_.defined()) return acc;
    auto map = root_map;
    map[AsVar(acc_var_)] = acc;
    return Substitute(epilogue_, map);
  };

  // SkipWhereFalse's conjuncts in leaf vars, placed in the accumulation nests by TailLowering.
  std::vector<Expr> skip;
  for (const Expr& c : skip_unless_) skip.push_back(Substitute(c, root_map));
  const TailLowering tails(*this, values, skip);
  const TailLowering::State start = tails.Start();
  // `stmt` built inside `leaves`, with the tails of its indices versioned and guarded (and, for
  // an accumulation, `accumulate`, the skips placed).
  auto nest = [&](const std::vector<int>& leaves, bool with_reduce, const Stmt& stmt, bool accumulate = false) {
    if (tails.empty() && (!accumulate || skip.empty())) return Nest(leaves, stmt);
    return tails.Build(
        leaves, with_reduce, start, [&](const TailLowering::State& st) { return Substitute(stmt, st.subst); },
        /*statements=*/true, accumulate);
  };

  if (!is_reduce_) return nest(leaves_, false, Store(output_, out_index, epilogue(value)));

  std::vector<int> spatial;
  for (int l : leaves_) {
    if (!loops_[l].reduce) spatial.push_back(l);
  }

  // A reduction accumulating in the output: the output zeroed before it and, with an
  // epilogue, rewritten through it after.
  auto in_output = [&](const Stmt& reduction) {
    Stmt init = nest(spatial, false, Store(output_, out_index, FloatImm(0.0)));
    Stmt epi;
    if (epilogue_.defined()) {
      epi = nest(spatial, false, Store(output_, out_index, epilogue(Load(output_, out_index))));
    }
    return Seq({init, reduction, epi});
  };
  if (!cache_write_) {
    return in_output(nest(leaves_, true, Store(output_, out_index, Load(output_, out_index) + value), true));
  }

  // cache_write: leaves up to and including the attach point stay outside the tile.
  auto at = std::find(leaves_.begin(), leaves_.end(), cache_write_at_);
  std::vector<int> outer(leaves_.begin(), at + 1), inner(at + 1, leaves_.end());
  std::vector<int> inner_spatial;
  for (int l : inner) {
    if (!loops_[l].reduce) inner_spatial.push_back(l);
  }
  // The tile has one dimension per spatial leaf inside it, in leaf order, so the innermost
  // (usually vectorized) leaf is contiguous.
  std::vector<Expr> local_index;
  std::vector<int64_t> local_shape;
  for (int l : inner_spatial) {
    local_index.push_back(loops_[l].var);
    local_shape.push_back(loops_[l].extent);
  }
  if (local_shape.empty()) {
    local_index.push_back(Expr(int64_t{0}));
    local_shape.push_back(1);
  }
  Buffer acc = MakeBuffer(output_->name + ".local", local_shape, BufferScope::kLocal);
  // Reduce leaves outside the tile: the output holds the partial sums between visits of the
  // tile (zeroed before the nest, the epilogue applied after it, as without the tile); each
  // visit loads its part of the output into the tile, accumulates and stores it back.
  const bool outer_reduce =
      std::any_of(outer.begin(), outer.end(), [&](int l) { return loops_[l].reduce; });
  Stmt update = Store(acc, local_index, Load(acc, local_index) + value);
  Stmt zero_tile = Store(acc, local_index, FloatImm(0.0));
  Stmt load = Store(acc, local_index, Load(output_, out_index));
  Stmt write_back = Store(output_, out_index, outer_reduce ? Load(acc, local_index) : epilogue(Load(acc, local_index)));
  Stmt tiled;
  if (tails.empty()) {
    // The tile's initialization touches the local tile only, so it needs no guard.
    Stmt init = Nest(inner_spatial, outer_reduce ? load : zero_tile);
    Stmt main = Nest(inner, update);
    if (!skip.empty()) {
      // The skips over the outer loops' vars too (bound around the tile).
      TailLowering::State st = start;
      for (int l : outer) st.bound.insert(AsVar(loops_[l].var));
      main = tails.Build(inner, true, st, [&](const TailLowering::State&) { return update; }, true, true);
    }
    tiled = Nest(outer, Allocate(acc, Seq({init, main, Nest(inner_spatial, write_back)})));
  } else {
    tiled = tails.Build(outer, true, start, [&](const TailLowering::State& st) {
      auto body = [&](const TailLowering::State& s2, const Stmt& stmt) { return Substitute(stmt, s2.subst); };
      // (Loading the output is guarded like the write-back; the zeroed tile is not.)
      Stmt init = outer_reduce ? tails.Build(inner_spatial, false, st,
                                             [&](const TailLowering::State& s2) { return body(s2, load); })
                               : Nest(inner_spatial, zero_tile);
      Stmt main = tails.Build(inner, true, st, [&](const TailLowering::State& s2) { return body(s2, update); },
                              /*statements=*/true, /*place_skips=*/true);
      Stmt write = tails.Build(inner_spatial, false, st,
                               [&](const TailLowering::State& s2) { return body(s2, write_back); });
      return Allocate(acc, Seq({init, main, write}));
    }, /*statements=*/false);
  }
  return outer_reduce ? in_output(tiled) : tiled;
}

LoweredFunc Schedule::Lower() const {
  std::vector<Stmt> body;
  if (this->body) body.push_back(this->body);
  for (auto& s : stages) {
    // A stage filling a buffer kept across calls runs only in the call that must fill it.
    const Buffer& out = s.output();
    body.push_back(out->prepack_source != nullptr ? If(Expr(out->fresh) == Expr(1), s.Lower()) : s.Lower());
  }
  Stmt stmt = Seq(std::move(body));
  for (auto it = scratch.rbegin(); it != scratch.rend(); ++it) stmt = Allocate(*it, stmt);
  return LoweredFunc{name, args, stmt};
}

}  // namespace tune::codegen
