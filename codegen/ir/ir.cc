// Construction, constant folding, traversal, substitution and printing of the loop AST.
#include "codegen/ir/ir.h"

#include <cstdio>
#include <sstream>

#include "base/check.h"

namespace tune::codegen {

int64_t BufferNode::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Buffer MakeBuffer(std::string name, std::vector<int64_t> shape, BufferScope scope, int arg_index) {
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->shape = std::move(shape);
  b->scope = scope;
  b->arg_index = arg_index;
  return b;
}

Buffer MakeScratchBuffer(std::string name, std::vector<int64_t> shape, int arg_index, DType dtype, bool zero_init,
                         bool coherent) {
  TUNE_CHECK(dtype == DType::kFloat32 || dtype == DType::kInt32);
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->shape = std::move(shape);
  b->scope = BufferScope::kArg;
  b->arg_index = arg_index;
  b->dtype = dtype;
  b->scratch = true;
  b->zero_init = zero_init;
  b->coherent = coherent;
  return b;
}

Expr::Expr(int64_t v) : node_(std::make_shared<IntImmNode>(v)) {}

Expr MakeVar(const std::string& name) { return Expr(std::make_shared<VarNode>(name)); }
Expr FloatImm(double v) { return Expr(std::make_shared<FloatImmNode>(v)); }
Expr Load(Buffer buffer, std::vector<Expr> indices) {
  TUNE_CHECK_MSG(indices.size() == buffer->shape.size(), "rank mismatch loading " + buffer->name);
  return Expr(std::make_shared<LoadNode>(std::move(buffer), std::move(indices)));
}
Expr Select(Expr cond, Expr t, Expr f) {
  int64_t c;
  if (AsInt(cond, &c)) return c ? t : f;
  return Expr(std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f)));
}

const VarNode* AsVar(const Expr& e) {
  return e.defined() && e->kind == ExprKind::kVar ? static_cast<const VarNode*>(e.get()) : nullptr;
}
bool AsInt(const Expr& e, int64_t* value) {
  if (!e.defined() || e->kind != ExprKind::kIntImm) return false;
  *value = static_cast<const IntImmNode*>(e.get())->value;
  return true;
}
static bool AsFloat(const Expr& e, double* value) {
  if (!e.defined() || e->kind != ExprKind::kFloatImm) return false;
  *value = static_cast<const FloatImmNode*>(e.get())->value;
  return true;
}

static int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
static int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

Expr MakeBinary(ExprKind kind, Expr a, Expr b) {
  TUNE_CHECK(a.defined() && b.defined());
  bool is_float = a->dtype == DType::kFloat32 || b->dtype == DType::kFloat32;
  int64_t x, y;
  bool ca = AsInt(a, &x), cb = AsInt(b, &y);
  if (ca && cb) {
    switch (kind) {
      case ExprKind::kAdd: return Expr(x + y);
      case ExprKind::kSub: return Expr(x - y);
      case ExprKind::kMul: return Expr(x * y);
      case ExprKind::kDiv: TUNE_CHECK(y != 0); return Expr(FloorDiv(x, y));
      case ExprKind::kMod: TUNE_CHECK(y != 0); return Expr(FloorMod(x, y));
      case ExprKind::kMin: return Expr(std::min(x, y));
      case ExprKind::kMax: return Expr(std::max(x, y));
      case ExprKind::kLT: return Expr(int64_t{x < y});
      case ExprKind::kLE: return Expr(int64_t{x <= y});
      case ExprKind::kEQ: return Expr(int64_t{x == y});
      case ExprKind::kAnd: return Expr(int64_t{x && y});
      default: break;
    }
  }
  if (!is_float) {
    switch (kind) {
      case ExprKind::kAdd:
        if (ca && x == 0) return b;
        if (cb && y == 0) return a;
        break;
      case ExprKind::kSub:
        if (cb && y == 0) return a;
        break;
      case ExprKind::kMul:
        if ((ca && x == 0) || (cb && y == 0)) return Expr(int64_t{0});
        if (ca && x == 1) return b;
        if (cb && y == 1) return a;
        break;
      case ExprKind::kDiv:
        if (cb && y == 1) return a;
        if (ca && x == 0) return a;
        break;
      case ExprKind::kMod:
        if (cb && y == 1) return Expr(int64_t{0});
        break;
      case ExprKind::kAnd:
        if (ca) return x ? b : Expr(int64_t{0});
        if (cb) return y ? a : Expr(int64_t{0});
        break;
      default: break;
    }
  } else {
    double fx, fy;
    if (kind == ExprKind::kAdd && AsFloat(b, &fy) && fy == 0.0) return a;
    if (kind == ExprKind::kAdd && AsFloat(a, &fx) && fx == 0.0) return b;
  }
  DType t = DType::kInt64;
  if (kind == ExprKind::kLT || kind == ExprKind::kLE || kind == ExprKind::kEQ || kind == ExprKind::kAnd) {
    t = DType::kBool;
  } else if (is_float) {
    t = DType::kFloat32;
  }
  return Expr(std::make_shared<BinaryNode>(kind, t, std::move(a), std::move(b)));
}

Expr Min(Expr a, Expr b) { return MakeBinary(ExprKind::kMin, std::move(a), std::move(b)); }
Expr Max(Expr a, Expr b) { return MakeBinary(ExprKind::kMax, std::move(a), std::move(b)); }
Expr operator+(Expr a, Expr b) { return MakeBinary(ExprKind::kAdd, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return MakeBinary(ExprKind::kSub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return MakeBinary(ExprKind::kMul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return MakeBinary(ExprKind::kDiv, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return MakeBinary(ExprKind::kMod, std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return MakeBinary(ExprKind::kLT, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return MakeBinary(ExprKind::kLE, std::move(a), std::move(b)); }
Expr operator==(Expr a, Expr b) { return MakeBinary(ExprKind::kEQ, std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return MakeBinary(ExprKind::kAnd, std::move(a), std::move(b)); }

std::string ForKindName(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial: return "serial";
    case ForKind::kParallel: return "parallel";
    case ForKind::kVectorized: return "vectorized";
    case ForKind::kUnrolled: return "unrolled";
    case ForKind::kBlockX: return "blockIdx.x";
    case ForKind::kBlockY: return "blockIdx.y";
    case ForKind::kBlockZ: return "blockIdx.z";
    case ForKind::kThreadX: return "threadIdx.x";
    case ForKind::kThreadY: return "threadIdx.y";
    case ForKind::kThreadZ: return "threadIdx.z";
  }
  return "?";
}

bool IsGpuBlockBinding(ForKind kind) {
  return kind == ForKind::kBlockX || kind == ForKind::kBlockY || kind == ForKind::kBlockZ;
}

int GpuBindingAxis(ForKind kind) {
  switch (kind) {
    case ForKind::kBlockX:
    case ForKind::kThreadX:
      return 0;
    case ForKind::kBlockY:
    case ForKind::kThreadY:
      return 1;
    default:
      return 2;
  }
}

bool IsGpuBinding(ForKind kind) {
  switch (kind) {
    case ForKind::kBlockX:
    case ForKind::kBlockY:
    case ForKind::kBlockZ:
    case ForKind::kThreadX:
    case ForKind::kThreadY:
    case ForKind::kThreadZ:
      return true;
    default:
      return false;
  }
}

Stmt For(Expr var, int64_t extent, ForKind kind, Stmt body) {
  TUNE_CHECK(AsVar(var) != nullptr && extent > 0);
  return std::make_shared<ForNode>(std::move(var), extent, kind, std::move(body));
}
Stmt Store(Buffer buffer, std::vector<Expr> indices, Expr value) {
  TUNE_CHECK_MSG(indices.size() == buffer->shape.size(), "rank mismatch storing " + buffer->name);
  return std::make_shared<StoreNode>(std::move(buffer), std::move(indices), std::move(value));
}
Stmt Seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s) continue;
    if (s->kind == StmtKind::kSeq) {
      for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) flat.push_back(t);
    } else {
      flat.push_back(s);
    }
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<SeqNode>(std::move(flat));
}
Stmt Allocate(Buffer buffer, Stmt body) {
  TUNE_CHECK(buffer->scope != BufferScope::kArg);
  return std::make_shared<AllocateNode>(std::move(buffer), std::move(body));
}
Stmt Sync() { return std::make_shared<SyncNode>(); }
Stmt Fence() { return std::make_shared<FenceNode>(); }
Stmt AtomicAdd(Buffer buffer, std::vector<Expr> indices, Expr value, Expr var, Stmt body) {
  TUNE_CHECK_MSG(indices.size() == buffer->shape.size(), "rank mismatch in atomicAdd on " + buffer->name);
  TUNE_CHECK_MSG(buffer->scope == BufferScope::kArg && buffer->dtype == DType::kInt32,
                 "atomicAdd on " + buffer->name + ", which is not an int32 argument");
  TUNE_CHECK(AsVar(var) != nullptr && body != nullptr);
  return std::make_shared<AtomicAddNode>(std::move(buffer), std::move(indices), std::move(value), std::move(var),
                                         std::move(body));
}
Stmt If(Expr cond, Stmt then_case) {
  TUNE_CHECK(cond.defined() && then_case != nullptr);
  return std::make_shared<IfNode>(std::move(cond), std::move(then_case));
}

Stmt AsyncCopy(Buffer dst, std::vector<Expr> dst_indices, Buffer src, std::vector<Expr> src_indices) {
  TUNE_CHECK_MSG(dst_indices.size() == dst->shape.size(), "rank mismatch copying to " + dst->name);
  TUNE_CHECK_MSG(src_indices.size() == src->shape.size(), "rank mismatch copying from " + src->name);
  TUNE_CHECK_MSG(dst->scope == BufferScope::kShared && dst->dtype == DType::kFloat32,
                 "asynchronous copy to " + dst->name + ", which is not float shared memory");
  TUNE_CHECK_MSG(src->scope == BufferScope::kArg && src->dtype == DType::kFloat32,
                 "asynchronous copy from " + src->name + ", which is not a float argument");
  return std::make_shared<AsyncCopyNode>(std::move(dst), std::move(dst_indices), std::move(src),
                                         std::move(src_indices));
}
Stmt AsyncCommit() { return std::make_shared<AsyncCommitNode>(); }
Stmt AsyncWait(int64_t pending) {
  TUNE_CHECK(pending >= 0) << "wait for " << pending << " groups";
  return std::make_shared<AsyncWaitNode>(pending);
}

// ---------------------------------------------------------------------------------------------

void IRVisitor::VisitExpr(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
      return;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      VisitExpr(n->cond);
      VisitExpr(n->true_value);
      VisitExpr(n->false_value);
      return;
    }
    case ExprKind::kLoad:
      for (auto& i : static_cast<const LoadNode*>(e.get())->indices) VisitExpr(i);
      return;
    default: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      VisitExpr(n->a);
      VisitExpr(n->b);
    }
  }
}

void IRVisitor::VisitStmt(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::kFor: {
      auto* n = static_cast<const ForNode*>(s.get());
      VisitStmt(n->body);
      return;
    }
    case StmtKind::kStore: {
      auto* n = static_cast<const StoreNode*>(s.get());
      for (auto& i : n->indices) VisitExpr(i);
      VisitExpr(n->value);
      return;
    }
    case StmtKind::kSeq:
      for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) VisitStmt(t);
      return;
    case StmtKind::kAllocate:
      VisitStmt(static_cast<const AllocateNode*>(s.get())->body);
      return;
    case StmtKind::kSync:
    case StmtKind::kFence:
    case StmtKind::kAsyncCommit:
    case StmtKind::kAsyncWait:
      return;
    case StmtKind::kAsyncCopy: {
      auto* n = static_cast<const AsyncCopyNode*>(s.get());
      for (auto& i : n->dst_indices) VisitExpr(i);
      for (auto& i : n->src_indices) VisitExpr(i);
      return;
    }
    case StmtKind::kAtomicAdd: {
      auto* n = static_cast<const AtomicAddNode*>(s.get());
      for (auto& i : n->indices) VisitExpr(i);
      VisitExpr(n->value);
      VisitStmt(n->body);
      return;
    }
    case StmtKind::kIf: {
      auto* n = static_cast<const IfNode*>(s.get());
      VisitExpr(n->cond);
      VisitStmt(n->then_case);
      return;
    }
  }
}

Expr IRMutator::MutateExpr(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
      return e;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      Expr c = MutateExpr(n->cond), t = MutateExpr(n->true_value), f = MutateExpr(n->false_value);
      if (c.get() == n->cond.get() && t.get() == n->true_value.get() && f.get() == n->false_value.get()) return e;
      return Select(c, t, f);
    }
    case ExprKind::kLoad: {
      auto* n = static_cast<const LoadNode*>(e.get());
      bool changed = false;
      std::vector<Expr> idx = MutateIndices(n->indices, &changed);
      return changed ? Load(n->buffer, std::move(idx)) : e;
    }
    default: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      Expr a = MutateExpr(n->a), b = MutateExpr(n->b);
      if (a.get() == n->a.get() && b.get() == n->b.get()) return e;
      return MakeBinary(n->kind, a, b);
    }
  }
}

std::vector<Expr> IRMutator::MutateIndices(const std::vector<Expr>& indices, bool* changed) {
  std::vector<Expr> out;
  out.reserve(indices.size());
  for (const Expr& i : indices) {
    out.push_back(MutateExpr(i));
    *changed |= out.back().get() != i.get();
  }
  return out;
}

Stmt IRMutator::MutateStmt(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::kFor: {
      auto* n = static_cast<const ForNode*>(s.get());
      Stmt body = MutateStmt(n->body);
      return body == n->body ? s : For(n->var, n->extent, n->for_kind, body);
    }
    case StmtKind::kStore: {
      auto* n = static_cast<const StoreNode*>(s.get());
      bool changed = false;
      std::vector<Expr> idx = MutateIndices(n->indices, &changed);
      Expr v = MutateExpr(n->value);
      changed |= v.get() != n->value.get();
      return changed ? Store(n->buffer, std::move(idx), v) : s;
    }
    case StmtKind::kSeq: {
      auto* n = static_cast<const SeqNode*>(s.get());
      std::vector<Stmt> out;
      bool changed = false;
      for (auto& t : n->stmts) {
        out.push_back(MutateStmt(t));
        changed |= out.back() != t;
      }
      return changed ? Seq(std::move(out)) : s;
    }
    case StmtKind::kAllocate: {
      auto* n = static_cast<const AllocateNode*>(s.get());
      Stmt body = MutateStmt(n->body);
      return body == n->body ? s : Allocate(n->buffer, body);
    }
    case StmtKind::kSync:
    case StmtKind::kFence:
    case StmtKind::kAsyncCommit:
    case StmtKind::kAsyncWait:
      return s;
    case StmtKind::kAsyncCopy: {
      auto* n = static_cast<const AsyncCopyNode*>(s.get());
      bool changed = false;
      std::vector<Expr> d = MutateIndices(n->dst_indices, &changed);
      std::vector<Expr> src = MutateIndices(n->src_indices, &changed);
      return changed ? AsyncCopy(n->dst, std::move(d), n->src, std::move(src)) : s;
    }
    case StmtKind::kAtomicAdd: {
      auto* n = static_cast<const AtomicAddNode*>(s.get());
      bool changed = false;
      std::vector<Expr> idx = MutateIndices(n->indices, &changed);
      Expr v = MutateExpr(n->value);
      Stmt body = MutateStmt(n->body);
      changed |= v.get() != n->value.get() || body != n->body;
      return changed ? AtomicAdd(n->buffer, std::move(idx), v, n->var, body) : s;
    }
    case StmtKind::kIf: {
      auto* n = static_cast<const IfNode*>(s.get());
      Expr c = MutateExpr(n->cond);
      Stmt t = MutateStmt(n->then_case);
      return c.get() == n->cond.get() && t == n->then_case ? s : If(c, t);
    }
  }
  return s;
}

namespace {
class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::unordered_map<const VarNode*, Expr>& map) : map_(map) {}
  Expr MutateExpr(const Expr& e) override {
    if (const VarNode* v = AsVar(e)) {
      auto it = map_.find(v);
      return it == map_.end() ? e : it->second;
    }
    return IRMutator::MutateExpr(e);
  }

 private:
  const std::unordered_map<const VarNode*, Expr>& map_;
};

class VarFinder : public IRVisitor {
 public:
  explicit VarFinder(const VarNode* v) : var_(v) {}
  void VisitExpr(const Expr& e) override {
    if (found) return;
    if (e.get() == var_) {
      found = true;
      return;
    }
    IRVisitor::VisitExpr(e);
  }
  bool found = false;

 private:
  const VarNode* var_;
};
}  // namespace

Expr Substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map) {
  return Substituter(map).MutateExpr(e);
}
Stmt Substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map) {
  return Substituter(map).MutateStmt(s);
}
bool UsesVar(const Expr& e, const VarNode* var) {
  VarFinder f(var);
  f.VisitExpr(e);
  return f.found;
}

Expr FlattenIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& indices) {
  TUNE_CHECK(shape.size() == indices.size());
  Expr flat = Expr(int64_t{0});
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * Expr(shape[d]) + indices[d];
  return flat;
}

bool LinearCoefficient(const Expr& e, const VarNode* var, int64_t* coeff) {
  if (!UsesVar(e, var)) {
    *coeff = 0;
    return true;
  }
  if (e.get() == var) {
    *coeff = 1;
    return true;
  }
  if (e->kind == ExprKind::kAdd || e->kind == ExprKind::kSub) {
    auto* n = static_cast<const BinaryNode*>(e.get());
    int64_t ca, cb;
    if (!LinearCoefficient(n->a, var, &ca) || !LinearCoefficient(n->b, var, &cb)) return false;
    *coeff = e->kind == ExprKind::kAdd ? ca + cb : ca - cb;
    return true;
  }
  if (e->kind == ExprKind::kMul) {
    auto* n = static_cast<const BinaryNode*>(e.get());
    int64_t k, c;
    if (AsInt(n->a, &k) && LinearCoefficient(n->b, var, &c)) {
      *coeff = k * c;
      return true;
    }
    if (AsInt(n->b, &k) && LinearCoefficient(n->a, var, &c)) {
      *coeff = k * c;
      return true;
    }
  }
  return false;
}

namespace {

/// An affine form: sum of coeff * var plus a constant.
struct Affine {
  std::vector<std::pair<Expr, int64_t>> terms;  // (var, coefficient)
  int64_t constant = 0;
};

bool ToAffine(const Expr& e, Affine* out, int64_t scale = 1) {
  int64_t v;
  if (AsInt(e, &v)) {
    out->constant += scale * v;
    return true;
  }
  if (AsVar(e)) {
    out->terms.emplace_back(e, scale);
    return true;
  }
  if (e->kind == ExprKind::kAdd || e->kind == ExprKind::kSub) {
    auto* n = static_cast<const BinaryNode*>(e.get());
    return ToAffine(n->a, out, scale) &&
           ToAffine(n->b, out, e->kind == ExprKind::kAdd ? scale : -scale);
  }
  if (e->kind == ExprKind::kMul) {
    auto* n = static_cast<const BinaryNode*>(e.get());
    if (AsInt(n->a, &v)) return ToAffine(n->b, out, scale * v);
    if (AsInt(n->b, &v)) return ToAffine(n->a, out, scale * v);
  }
  return false;
}

Expr FromTerms(const std::vector<std::pair<Expr, int64_t>>& terms, int64_t constant) {
  Expr r = Expr(int64_t{0});
  for (auto& [var, c] : terms) r = r + var * Expr(c);
  return r + Expr(constant);
}

class DivModSimplifier : public IRMutator {
 public:
  explicit DivModSimplifier(const std::unordered_map<const VarNode*, int64_t>& extents) : extents_(extents) {}
  Expr MutateExpr(const Expr& e) override {
    Expr r = IRMutator::MutateExpr(e);
    if (r->kind != ExprKind::kDiv && r->kind != ExprKind::kMod) return r;
    if (r->dtype != DType::kInt64) return r;
    auto* n = static_cast<const BinaryNode*>(r.get());
    int64_t c;
    Affine a;
    if (!AsInt(n->b, &c) || c <= 0 || !ToAffine(n->a, &a)) return r;
    // Split into terms whose coefficient is a multiple of c and a remainder with known range.
    std::vector<std::pair<Expr, int64_t>> multiple, rest;
    int64_t lo = 0, hi = 0;
    for (auto& [var, coeff] : a.terms) {
      auto it = extents_.find(AsVar(var));
      if (coeff % c == 0) {
        multiple.emplace_back(var, coeff / c);
        continue;
      }
      if (it == extents_.end() || coeff < 0) return r;
      rest.emplace_back(var, coeff);
      hi += coeff * (it->second - 1);
    }
    int64_t k = a.constant >= 0 ? a.constant / c : -((-a.constant + c - 1) / c);
    int64_t rc = a.constant - k * c;  // in [0, c)
    lo += rc;
    hi += rc;
    if (lo < 0 || hi >= c) return r;
    if (r->kind == ExprKind::kDiv) return FromTerms(multiple, k);
    return FromTerms(rest, rc);
  }

 private:
  const std::unordered_map<const VarNode*, int64_t>& extents_;
};

}  // namespace

Expr SimplifyDivMod(const Expr& e, const std::unordered_map<const VarNode*, int64_t>& extents) {
  return DivModSimplifier(extents).MutateExpr(e);
}
Stmt SimplifyDivMod(const Stmt& s, const std::unordered_map<const VarNode*, int64_t>& extents) {
  return DivModSimplifier(extents).MutateStmt(s);
}

// ---------------------------------------------------------------------------------------------
// Printer
// ---------------------------------------------------------------------------------------------

static const char* BinarySymbol(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd: return " + ";
    case ExprKind::kSub: return " - ";
    case ExprKind::kMul: return "*";
    case ExprKind::kDiv: return "/";
    case ExprKind::kMod: return " % ";
    case ExprKind::kLT: return " < ";
    case ExprKind::kLE: return " <= ";
    case ExprKind::kEQ: return " == ";
    case ExprKind::kAnd: return " && ";
    default: return nullptr;
  }
}

static int Precedence(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kMul: case ExprKind::kDiv: case ExprKind::kMod: return 5;
    case ExprKind::kAdd: case ExprKind::kSub: return 4;
    case ExprKind::kLT: case ExprKind::kLE: case ExprKind::kEQ: return 3;
    case ExprKind::kAnd: return 2;
    case ExprKind::kSelect: return 1;
    default: return 9;
  }
}

static std::string PrintIndices(const std::vector<Expr>& indices) {
  std::string s = "[";
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i) s += ", ";
    s += Print(indices[i]);
  }
  return s + "]";
}

std::string Print(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm: return std::to_string(static_cast<const IntImmNode*>(e.get())->value);
    case ExprKind::kFloatImm: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%gf", static_cast<const FloatImmNode*>(e.get())->value);
      return buf;
    }
    case ExprKind::kVar: return static_cast<const VarNode*>(e.get())->name;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return "(" + Print(n->cond) + " ? " + Print(n->true_value) + " : " + Print(n->false_value) + ")";
    }
    case ExprKind::kLoad: {
      auto* n = static_cast<const LoadNode*>(e.get());
      return n->buffer->name + PrintIndices(n->indices);
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      return std::string(e->kind == ExprKind::kMin ? "min(" : "max(") + Print(n->a) + ", " + Print(n->b) + ")";
    }
    default: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      int p = Precedence(e);
      std::string a = Print(n->a), b = Print(n->b);
      if (Precedence(n->a) < p) a = "(" + a + ")";
      // Right operand: parenthesize equal precedence too (a - (b + c), a / (b*c)).
      if (Precedence(n->b) <= p && Precedence(n->b) != 9) b = "(" + b + ")";
      return a + BinarySymbol(e->kind) + b;
    }
  }
}

std::string Print(const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  std::ostringstream os;
  switch (s->kind) {
    case StmtKind::kFor: {
      auto* n = static_cast<const ForNode*>(s.get());
      std::string v = Print(n->var);
      os << pad;
      if (n->for_kind != ForKind::kSerial) os << "// " << ForKindName(n->for_kind) << "\n" << pad;
      os << "for (" << v << " = 0; " << v << " < " << n->extent << "; ++" << v << ") {\n"
         << Print(n->body, indent + 1) << pad << "}\n";
      break;
    }
    case StmtKind::kStore: {
      auto* n = static_cast<const StoreNode*>(s.get());
      os << pad << n->buffer->name << PrintIndices(n->indices) << " = " << Print(n->value) << ";\n";
      break;
    }
    case StmtKind::kSeq:
      for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) os << Print(t, indent);
      break;
    case StmtKind::kAllocate: {
      auto* n = static_cast<const AllocateNode*>(s.get());
      const BufferScope scope = n->buffer->scope;
      os << pad
         << (scope == BufferScope::kLocal    ? "local"
             : scope == BufferScope::kShared ? "shared"
                                             : "heap")
         << " float " << n->buffer->name;
      for (int64_t d : n->buffer->shape) os << "[" << d << "]";
      os << ";\n" << Print(n->body, indent);
      break;
    }
    case StmtKind::kSync:
      os << pad << "__syncthreads();\n";
      break;
    case StmtKind::kFence:
      os << pad << "__threadfence();\n";
      break;
    case StmtKind::kAsyncCopy: {
      auto* n = static_cast<const AsyncCopyNode*>(s.get());
      os << pad << n->dst->name << PrintIndices(n->dst_indices) << " <- async " << n->src->name
         << PrintIndices(n->src_indices) << ";\n";
      break;
    }
    case StmtKind::kAsyncCommit:
      os << pad << "async_commit();\n";
      break;
    case StmtKind::kAsyncWait:
      os << pad << "async_wait(" << static_cast<const AsyncWaitNode*>(s.get())->pending << ");\n";
      break;
    case StmtKind::kAtomicAdd: {
      auto* n = static_cast<const AtomicAddNode*>(s.get());
      os << pad << "int " << Print(n->var) << " = atomic_add(&" << n->buffer->name << PrintIndices(n->indices) << ", "
         << Print(n->value) << ");\n"
         << Print(n->body, indent);
      break;
    }
    case StmtKind::kIf: {
      auto* n = static_cast<const IfNode*>(s.get());
      os << pad << "if (" << Print(n->cond) << ") {\n" << Print(n->then_case, indent + 1) << pad << "}\n";
      break;
    }
  }
  return os.str();
}

std::string Print(const LoweredFunc& func) {
  std::ostringstream os;
  os << "void " << func.name << "(";
  for (size_t i = 0; i < func.args.size(); ++i) {
    if (i) os << ", ";
    os << (func.args[i]->dtype == DType::kInt32 ? "int " : "float ") << func.args[i]->name;
    for (int64_t d : func.args[i]->shape) os << "[" << d << "]";
  }
  os << ") {\n" << Print(func.body, 1) << "}\n";
  return os.str();
}

}  // namespace tune::codegen
