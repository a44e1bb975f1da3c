// Construction and constant folding of the loop AST's buffers, expressions and statements.
#include "codegen/ir/ir.h"

#include <algorithm>

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

Buffer MakePrepackedBuffer(std::string name, std::vector<int64_t> shape, Buffer source) {
  TUNE_CHECK(source != nullptr && source->scope == BufferScope::kArg) << "a prepacked buffer needs an argument";
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->shape = std::move(shape);
  b->scope = BufferScope::kHeap;
  b->prepack_source = std::move(source);
  b->fresh = MakeVar(b->name + ".fresh").node();
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

Expr FlattenIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& indices) {
  TUNE_CHECK(shape.size() == indices.size());
  Expr flat = Expr(int64_t{0});
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * Expr(shape[d]) + indices[d];
  return flat;
}

}  // namespace tune::codegen
