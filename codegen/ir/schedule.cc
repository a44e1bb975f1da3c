// Lowering of scheduled stages (split/fuse/reorder/annotate/cache_write) into loop nests.
#include "codegen/ir/schedule.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"
#include "codegen/ir/simplify.h"

namespace tune::codegen {

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

std::pair<int, int> Stage::Split(int loop, int64_t factor) {
  auto it = std::find(leaves_.begin(), leaves_.end(), loop);
  TUNE_CHECK_MSG(it != leaves_.end(), "split of a non-leaf loop");
  Loop parent = loops_[loop];
  TUNE_CHECK(factor > 0 && parent.extent % factor == 0) << "split factor " << factor
                                                        << " does not divide " << parent.extent;
  int outer = AddLoop(parent.name + ".o", parent.extent / factor, parent.reduce);
  int inner = AddLoop(parent.name + ".i", factor, parent.reduce);
  relations_.push_back(Relation{true, loop, outer, inner});
  it = std::find(leaves_.begin(), leaves_.end(), loop);
  *it = inner;
  leaves_.insert(it, outer);
  return {outer, inner};
}

std::vector<int> Stage::SplitFactors(int loop, const std::vector<int64_t>& factors) {
  TUNE_CHECK(!factors.empty());
  std::string base = loops_[loop].name;
  std::vector<int> out;
  int rest = loop;
  int64_t inner_product = 1;
  for (size_t i = 1; i < factors.size(); ++i) inner_product *= factors[i];
  for (size_t i = 0; i + 1 < factors.size(); ++i) {
    auto [o, in] = Split(rest, inner_product);
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
  for (auto jt = leaves_.begin(); jt <= it; ++jt) {
    TUNE_CHECK_MSG(!loops_[*jt].reduce, "reduce loop outside the cache_write tile");
  }
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

  if (!is_reduce_) return Nest(leaves_, Store(output_, out_index, epilogue(value)));

  std::vector<int> spatial;
  for (int l : leaves_) {
    if (!loops_[l].reduce) spatial.push_back(l);
  }

  if (!cache_write_) {
    Stmt init = Nest(spatial, Store(output_, out_index, FloatImm(0.0)));
    Stmt main = Nest(leaves_, Store(output_, out_index, Load(output_, out_index) + value));
    Stmt epi;
    if (epilogue_.defined()) epi = Nest(spatial, Store(output_, out_index, epilogue(Load(output_, out_index))));
    return Seq({init, main, epi});
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
  Stmt init = Nest(inner_spatial, Store(acc, local_index, FloatImm(0.0)));
  Stmt main = Nest(inner, Store(acc, local_index, Load(acc, local_index) + value));
  Stmt write = Nest(inner_spatial, Store(output_, out_index, epilogue(Load(acc, local_index))));
  return Nest(outer, Allocate(acc, Seq({init, main, write})));
}

LoweredFunc Schedule::Lower() const {
  std::vector<Stmt> body;
  if (this->body) body.push_back(this->body);
  for (auto& s : stages) body.push_back(s.Lower());
  Stmt stmt = Seq(std::move(body));
  for (auto it = scratch.rbegin(); it != scratch.rend(); ++it) stmt = Allocate(*it, stmt);
  return LoweredFunc{name, args, stmt};
}

}  // namespace tune::codegen
