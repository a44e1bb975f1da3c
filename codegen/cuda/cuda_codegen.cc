// CUDA C generation from the loop AST: bindings, shared and local buffers, wide accesses.
#include "codegen/cuda/cuda_codegen.h"

#include <cctype>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codegen/ir/ir_analysis.h"
#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/simplify.h"

namespace tune::codegen {
namespace {

constexpr int64_t kMaxBlockThreads = 1024;
constexpr int64_t kMaxBlockDim[3] = {1024, 1024, 64};
constexpr int64_t kMaxGridDim[3] = {INT32_MAX, 65535, 65535};
constexpr int64_t kSharedAlignFloats = 4;  // 16 bytes: float4 accesses stay aligned

// cp.async (sm_80+): global -> shared copies of 4, 8 (cached in L1) or 16 bytes (L2 only),
// their commit and wait. The "memory" clobbers keep the compiler from moving shared-memory
// accesses across them.
constexpr const char* kAsyncCopyHelpers = R"(#define TUNE_SMEM(p) static_cast<unsigned>(__cvta_generic_to_shared(p))
__device__ __forceinline__ void tune_cp_async4(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(TUNE_SMEM(dst)), "l"(__cvta_generic_to_global(src))
               : "memory");
}
__device__ __forceinline__ void tune_cp_async8(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(TUNE_SMEM(dst)), "l"(__cvta_generic_to_global(src))
               : "memory");
}
__device__ __forceinline__ void tune_cp_async16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(TUNE_SMEM(dst)), "l"(__cvta_generic_to_global(src))
               : "memory");
}
__device__ __forceinline__ void tune_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void tune_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
)";

std::string Sanitize(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v_" + out;
  return out;
}

/// True when the integer expression `e` is a multiple of `n` for every value of its variables
/// (conservative: false when unsure).
bool IsMultipleOf(const Expr& e, int64_t n) {
  int64_t v;
  if (AsInt(e, &v)) return v % n == 0;
  switch (e->kind) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMin:
    case ExprKind::kMax: {
      auto* b = static_cast<const BinaryNode*>(e.get());
      return IsMultipleOf(b->a, n) && IsMultipleOf(b->b, n);
    }
    case ExprKind::kMul: {
      auto* b = static_cast<const BinaryNode*>(e.get());
      return IsMultipleOf(b->a, n) || IsMultipleOf(b->b, n);
    }
    case ExprKind::kMod: {  // a % c with both multiples of n is a multiple of n
      auto* b = static_cast<const BinaryNode*>(e.get());
      return IsMultipleOf(b->a, n) && IsMultipleOf(b->b, n);
    }
    default:
      return false;
  }
}

/// The launch shape and buffer facts gathered before printing.
struct Survey : IRVisitor {
  std::array<int64_t, 3> grid = {0, 0, 0}, block = {0, 0, 0};
  std::set<ForKind> open;  // bindings enclosing the current statement
  std::unordered_set<const BufferNode*> stored;
  std::vector<Buffer> shared;
  bool async_copies = false;  // cp.async statements: the kernel needs the helpers
  std::string error;

  void Fail(const std::string& why) {
    if (error.empty()) error = why;
  }
  void CheckBuffer(const Buffer& b) {
    if (b->NumElements() >= (int64_t{1} << 31)) {
      Fail(absl::StrCat("buffer ", b->name, " has ", b->NumElements(), " elements (32-bit indices)"));
    }
  }
  void VisitExpr(const Expr& e) override {
    if (e->kind == ExprKind::kLoad) CheckBuffer(static_cast<const LoadNode*>(e.get())->buffer);
    IRVisitor::VisitExpr(e);
  }
  void VisitStmt(const Stmt& s) override {
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* n = static_cast<const ForNode*>(s.get());
        if (IsGpuBinding(n->for_kind)) {
          if (open.count(n->for_kind)) Fail(ForKindName(n->for_kind) + " is bound inside itself");
          auto& dims = IsGpuBlockBinding(n->for_kind) ? grid : block;
          int64_t& dim = dims[GpuBindingAxis(n->for_kind)];
          if (dim != 0 && dim != n->extent) {
            Fail(absl::StrCat(ForKindName(n->for_kind), " is bound with extents ", dim, " and ", n->extent));
          }
          dim = n->extent;
          open.insert(n->for_kind);
          IRVisitor::VisitStmt(s);
          open.erase(n->for_kind);
          return;
        }
        break;
      }
      case StmtKind::kStore: {
        auto* n = static_cast<const StoreNode*>(s.get());
        stored.insert(n->buffer.get());
        CheckBuffer(n->buffer);
        break;
      }
      case StmtKind::kAtomicAdd: {
        auto* n = static_cast<const AtomicAddNode*>(s.get());
        stored.insert(n->buffer.get());
        CheckBuffer(n->buffer);
        break;
      }
      case StmtKind::kAsyncCopy: {
        auto* n = static_cast<const AsyncCopyNode*>(s.get());
        stored.insert(n->dst.get());
        CheckBuffer(n->dst);
        CheckBuffer(n->src);
        async_copies = true;
        break;
      }
      case StmtKind::kAsyncCommit:
      case StmtKind::kAsyncWait:
        async_copies = true;
        break;
      case StmtKind::kAllocate: {
        auto* n = static_cast<const AllocateNode*>(s.get());
        CheckBuffer(n->buffer);
        if (n->buffer->scope == BufferScope::kHeap) {
          Fail("buffer " + n->buffer->name + " is heap scratch memory, which GPU kernels do not allocate");
        }
        if (n->buffer->scope == BufferScope::kShared) shared.push_back(n->buffer);
        break;
      }
      default:
        break;
    }
    IRVisitor::VisitStmt(s);
  }
};

/// Replaces chosen loads by placeholder variables (the lanes of a wide load).
class LoadReplacer : public IRMutator {
 public:
  explicit LoadReplacer(const std::map<std::string, Expr>& by_key,
                        std::function<std::string(const LoadNode*)> key)
      : by_key_(by_key), key_(std::move(key)) {}
  Expr MutateExpr(const Expr& e) override {
    if (e->kind == ExprKind::kLoad) {
      auto it = by_key_.find(key_(static_cast<const LoadNode*>(e.get())));
      if (it != by_key_.end()) return it->second;
    }
    return IRMutator::MutateExpr(e);
  }

 private:
  const std::map<std::string, Expr>& by_key_;
  std::function<std::string(const LoadNode*)> key_;
};

/// The loads in `e`; with `unguarded_only`, not those under a select (a guarded load may be
/// out of bounds in the lanes whose guard is false, so it must not become a wide load).
void CollectLoads(const Expr& e, std::vector<const LoadNode*>& out, bool unguarded_only = false) {
  struct V : IRVisitor {
    std::vector<const LoadNode*>* out;
    bool unguarded_only;
    void VisitExpr(const Expr& x) override {
      if (unguarded_only && x->kind == ExprKind::kSelect) return;
      if (x->kind == ExprKind::kLoad) out->push_back(static_cast<const LoadNode*>(x.get()));
      IRVisitor::VisitExpr(x);
    }
  } v;
  v.out = &out;
  v.unguarded_only = unguarded_only;
  v.VisitExpr(e);
}

bool FlattenStores(const Stmt& s, std::vector<const StoreNode*>& out) {
  if (s->kind == StmtKind::kStore) {
    out.push_back(static_cast<const StoreNode*>(s.get()));
    return true;
  }
  if (s->kind == StmtKind::kSeq) {
    for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) {
      if (!FlattenStores(t, out)) return false;
    }
    return true;
  }
  return false;
}

class CudaPrinter {
 public:
  CudaPrinter(const Survey& survey, const std::unordered_map<const BufferNode*, int64_t>& shared_offset)
      : survey_(survey), shared_offset_(shared_offset) {}

  std::string BufferName(const BufferNode* b) {
    auto it = buffer_names_.find(b);
    if (it != buffer_names_.end()) return it->second;
    return buffer_names_[b] = Unique(Sanitize(b->name));
  }
  std::string VarName(const VarNode* v) {
    auto it = var_names_.find(v);
    if (it != var_names_.end()) return it->second;
    return var_names_[v] = Unique(Sanitize(v->name));
  }
  void NameVar(const VarNode* v, std::string text) { var_names_[v] = std::move(text); }

  std::string PrintExpr(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return std::to_string(static_cast<const IntImmNode*>(e.get())->value);
      case ExprKind::kFloatImm: {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.9g", static_cast<const FloatImmNode*>(e.get())->value);
        std::string s = buf;
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
        return s + "f";
      }
      case ExprKind::kVar:
        return VarName(AsVar(e));
      case ExprKind::kSelect: {
        auto* n = static_cast<const SelectNode*>(e.get());
        return "(" + PrintExpr(n->cond) + " ? " + PrintExpr(n->true_value) + " : " + PrintExpr(n->false_value) + ")";
      }
      case ExprKind::kLoad: {
        auto* n = static_cast<const LoadNode*>(e.get());
        const std::string index = PrintExpr(FlattenIndex(n->buffer->shape, n->indices));
        if (n->buffer->coherent) return "__ldcg(" + BufferName(n->buffer.get()) + " + " + index + ")";
        return BufferName(n->buffer.get()) + "[" + index + "]";
      }
      default: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        std::string a = PrintExpr(n->a), b = PrintExpr(n->b);
        const bool fp = n->a->dtype == DType::kFloat32;
        switch (e->kind) {
          case ExprKind::kMin: return (fp ? "fminf(" : "min(") + a + ", " + b + ")";
          case ExprKind::kMax: return (fp ? "fmaxf(" : "max(") + a + ", " + b + ")";
          case ExprKind::kAdd: return "(" + a + " + " + b + ")";
          case ExprKind::kSub: return "(" + a + " - " + b + ")";
          case ExprKind::kMul: return "(" + a + " * " + b + ")";
          case ExprKind::kDiv: return "(" + a + " / " + b + ")";  // operands >= 0: floor == trunc
          case ExprKind::kMod: return "(" + a + " % " + b + ")";
          case ExprKind::kLT: return "(" + a + " < " + b + ")";
          case ExprKind::kLE: return "(" + a + " <= " + b + ")";
          case ExprKind::kEQ: return "(" + a + " == " + b + ")";
          case ExprKind::kAnd: return "(" + a + " && " + b + ")";
          default: return "?";
        }
      }
    }
  }

  void PrintStmt(const Stmt& s, int indent) {
    const std::string pad(indent * 2, ' ');
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* n = static_cast<const ForNode*>(s.get());
        const std::string v = VarName(AsVar(n->var));
        if (IsGpuBinding(n->for_kind)) {
          os_ << pad << "{\n" << pad << "  const int " << v << " = " << ForKindName(n->for_kind) << ";\n";
          PrintStmt(n->body, indent + 1);
          os_ << pad << "}\n";
          return;
        }
        if (n->for_kind == ForKind::kVectorized && PrintVectorized(n, indent)) return;
        if (n->for_kind == ForKind::kUnrolled || n->for_kind == ForKind::kVectorized) {
          os_ << pad << "#pragma unroll\n";
        }
        os_ << pad << "for (int " << v << " = 0; " << v << " < " << n->extent << "; ++" << v << ") {\n";
        PrintStmt(n->body, indent + 1);
        os_ << pad << "}\n";
        return;
      }
      case StmtKind::kStore: {
        auto* n = static_cast<const StoreNode*>(s.get());
        os_ << pad << BufferName(n->buffer.get()) << "["
            << PrintExpr(FlattenIndex(n->buffer->shape, n->indices)) << "] = " << PrintExpr(n->value) << ";\n";
        return;
      }
      case StmtKind::kSeq:
        for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) PrintStmt(t, indent);
        return;
      case StmtKind::kAllocate: {
        auto* n = static_cast<const AllocateNode*>(s.get());
        const std::string name = BufferName(n->buffer.get());
        if (n->buffer->scope == BufferScope::kShared) {
          os_ << pad << "float* __restrict__ " << name << " = tune_smem + " << shared_offset_.at(n->buffer.get())
              << ";\n";
        } else {
          os_ << pad << "float " << name << "[" << n->buffer->NumElements() << "];\n";
        }
        PrintStmt(n->body, indent);
        return;
      }
      case StmtKind::kSync:
        os_ << pad << "__syncthreads();\n";
        return;
      case StmtKind::kFence:
        os_ << pad << "__threadfence();\n";
        return;
      case StmtKind::kAsyncCopy: {
        auto* n = static_cast<const AsyncCopyNode*>(s.get());
        os_ << pad << "tune_cp_async4(" << BufferName(n->dst.get()) << " + "
            << PrintExpr(FlattenIndex(n->dst->shape, n->dst_indices)) << ", " << BufferName(n->src.get()) << " + "
            << PrintExpr(FlattenIndex(n->src->shape, n->src_indices)) << ");\n";
        return;
      }
      case StmtKind::kAsyncCommit:
        os_ << pad << "tune_cp_async_commit();\n";
        return;
      case StmtKind::kAsyncWait:
        os_ << pad << "tune_cp_async_wait<" << static_cast<const AsyncWaitNode*>(s.get())->pending << ">();\n";
        return;
      case StmtKind::kAtomicAdd: {
        auto* n = static_cast<const AtomicAddNode*>(s.get());
        os_ << pad << "{\n"
            << pad << "  const int " << VarName(AsVar(n->var)) << " = atomicAdd(" << BufferName(n->buffer.get())
            << " + " << PrintExpr(FlattenIndex(n->buffer->shape, n->indices)) << ", " << PrintExpr(n->value)
            << ");\n";
        PrintStmt(n->body, indent + 1);
        os_ << pad << "}\n";
        return;
      }
      case StmtKind::kIf: {
        auto* n = static_cast<const IfNode*>(s.get());
        os_ << pad << "if (" << PrintExpr(n->cond) << ") {\n";
        PrintStmt(n->then_case, indent + 1);
        os_ << pad << "}\n";
        return;
      }
    }
  }

  std::string str() const { return os_.str(); }

 private:
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; !used_.insert(name).second; ++i) name = base + "_" + std::to_string(i);
    return name;
  }

  /// A wide access is possible for `flat` (the flattened index of a `b` access) in lane var
  /// `var` of `lanes` lanes: stride 1 in `var`, a global or shared buffer, the lane-0 index a
  /// multiple of `lanes`. Stores the lane-0 index in `base`.
  bool Widenable(const BufferNode* b, const Expr& flat, const VarNode* var, int64_t lanes, Expr* base) {
    if (b->scope != BufferScope::kArg && b->scope != BufferScope::kShared) return false;
    if (b->dtype != DType::kFloat32) return false;
    int64_t coeff;
    if (!LinearCoefficient(flat, var, &coeff) || coeff != 1) return false;
    *base = Substitute(flat, {{var, Expr(int64_t{0})}});
    if (b->scope == BufferScope::kShared && shared_offset_.at(b) % lanes != 0) return false;
    return IsMultipleOf(*base, lanes);
  }

  /// A vectorized loop of asynchronous copies only: one 8- or 16-byte cp.async per copy whose
  /// source and destination are both contiguous and aligned, one 4-byte copy per lane for the
  /// rest. False (print it as a loop) when the body holds anything else.
  bool PrintVectorizedAsync(const ForNode* n, int indent) {
    const int64_t lanes = n->extent;
    std::vector<const AsyncCopyNode*> copies;
    std::vector<Stmt> body = {n->body};
    if (n->body->kind == StmtKind::kSeq) body = static_cast<const SeqNode*>(n->body.get())->stmts;
    for (const Stmt& t : body) {
      if (t->kind != StmtKind::kAsyncCopy) return false;
      copies.push_back(static_cast<const AsyncCopyNode*>(t.get()));
    }
    const std::string pad(indent * 2, ' ');
    const VarNode* var = AsVar(n->var);
    os_ << pad << "{  // " << lanes << " lanes of " << VarName(var) << "\n";
    for (const AsyncCopyNode* c : copies) {
      const Expr dst = FlattenIndex(c->dst->shape, c->dst_indices), src = FlattenIndex(c->src->shape, c->src_indices);
      const std::string d = BufferName(c->dst.get()), s = BufferName(c->src.get());
      Expr dst_base, src_base;
      if (Widenable(c->dst.get(), dst, var, lanes, &dst_base) && Widenable(c->src.get(), src, var, lanes, &src_base)) {
        os_ << pad << "  tune_cp_async" << lanes * 4 << "(" << d << " + " << PrintExpr(dst_base) << ", " << s << " + "
            << PrintExpr(src_base) << ");\n";
        continue;
      }
      for (int64_t l = 0; l < lanes; ++l) {
        os_ << pad << "  tune_cp_async4(" << d << " + " << PrintExpr(Substitute(dst, {{var, Expr(l)}})) << ", " << s
            << " + " << PrintExpr(Substitute(src, {{var, Expr(l)}})) << ");\n";
      }
    }
    os_ << pad << "}\n";
    return true;
  }

  bool PrintVectorized(const ForNode* n, int indent) {
    const int64_t lanes = n->extent;
    if (lanes != 2 && lanes != 4) return false;
    if (PrintVectorizedAsync(n, indent)) return true;
    std::vector<const StoreNode*> stores;
    if (!FlattenStores(n->body, stores)) return false;
    const VarNode* var = AsVar(n->var);
    std::unordered_set<const BufferNode*> written;
    for (auto* st : stores) written.insert(st->buffer.get());
    std::vector<const LoadNode*> loads;
    for (auto* st : stores) CollectLoads(st->value, loads);
    for (auto* ld : loads) {
      if (written.count(ld->buffer.get())) return false;  // lane order matters: unroll instead
    }
    const std::string pad(indent * 2, ' ');
    const char* vec_type = lanes == 4 ? "float4" : "float2";
    static const char* kComponent[] = {".x", ".y", ".z", ".w"};
    auto key = [this](const LoadNode* ld) {
      return BufferName(ld->buffer.get()) + "[" + PrintExpr(FlattenIndex(ld->buffer->shape, ld->indices)) + "]";
    };
    os_ << pad << "{  // " << lanes << " lanes of " << VarName(var) << "\n";
    // One wide load per distinct contiguous, aligned load; its lanes stand in for the loads.
    std::vector<std::map<std::string, Expr>> lane_loads(lanes);
    std::vector<const LoadNode*> unguarded;
    for (auto* st : stores) CollectLoads(st->value, unguarded, /*unguarded_only=*/true);
    for (auto* ld : unguarded) {
      const std::string k = key(ld);
      if (lane_loads[0].count(k)) continue;
      Expr base;
      if (!Widenable(ld->buffer.get(), FlattenIndex(ld->buffer->shape, ld->indices), var, lanes, &base)) continue;
      const std::string t = Unique("wide");
      const std::string address = std::string("reinterpret_cast<const ") + vec_type + "*>(" +
                                  BufferName(ld->buffer.get()) + " + " + PrintExpr(base) + ")";
      os_ << pad << "  const " << vec_type << " " << t << " = "
          << (ld->buffer->coherent ? "__ldcg(" + address + ")" : "*" + address) << ";\n";
      for (int64_t l = 0; l < lanes; ++l) {
        Expr placeholder = MakeVar(t + kComponent[l]);
        NameVar(AsVar(placeholder), t + kComponent[l]);
        lane_loads[l][k] = placeholder;
      }
    }
    // Every lane's values, then the stores (wide where contiguous and aligned).
    std::vector<std::vector<std::string>> values(stores.size());
    for (int64_t l = 0; l < lanes; ++l) {
      LoadReplacer replace(lane_loads[l], key);
      for (size_t i = 0; i < stores.size(); ++i) {
        Expr value = Substitute(replace.MutateExpr(stores[i]->value), {{var, Expr(l)}});
        const std::string t = Unique("lane");
        os_ << pad << "  const float " << t << " = " << PrintExpr(value) << ";\n";
        values[i].push_back(t);
      }
    }
    for (size_t i = 0; i < stores.size(); ++i) {
      const StoreNode* st = stores[i];
      const std::string buf = BufferName(st->buffer.get());
      Expr flat = FlattenIndex(st->buffer->shape, st->indices);
      Expr base;
      if (Widenable(st->buffer.get(), flat, var, lanes, &base)) {
        os_ << pad << "  *reinterpret_cast<" << vec_type << "*>(" << buf << " + " << PrintExpr(base)
            << ") = make_" << vec_type << "(";
        for (int64_t l = 0; l < lanes; ++l) os_ << (l ? ", " : "") << values[i][l];
        os_ << ");\n";
      } else {
        for (int64_t l = 0; l < lanes; ++l) {
          os_ << pad << "  " << buf << "[" << PrintExpr(Substitute(flat, {{var, Expr(l)}})) << "] = " << values[i][l]
              << ";\n";
        }
      }
    }
    os_ << pad << "}\n";
    return true;
  }

  const Survey& survey_;
  const std::unordered_map<const BufferNode*, int64_t>& shared_offset_;
  std::ostringstream os_;
  std::unordered_map<const BufferNode*, std::string> buffer_names_;
  std::unordered_map<const VarNode*, std::string> var_names_;
  std::unordered_set<std::string> used_;
};

}  // namespace

absl::StatusOr<CudaKernel> GenerateCuda(const LoweredFunc& func) {
  Survey survey;
  for (const Buffer& b : func.args) survey.CheckBuffer(b);
  survey.VisitStmt(func.body);
  if (!survey.error.empty()) return absl::InvalidArgumentError("kernel " + func.name + ": " + survey.error);

  CudaKernel k;
  k.name = Sanitize(func.name);
  for (int d = 0; d < 3; ++d) {
    k.grid[d] = std::max<int64_t>(1, survey.grid[d]);
    k.block[d] = std::max<int64_t>(1, survey.block[d]);
    if (k.grid[d] > kMaxGridDim[d] || k.block[d] > kMaxBlockDim[d]) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", func.name, ": grid or block dimension ", d,
                                                     " exceeds CUDA's limit (grid ", k.grid[d], ", block ",
                                                     k.block[d], ")"));
    }
  }
  if (k.threads_per_block() > kMaxBlockThreads) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", func.name, ": ", k.threads_per_block(),
                                                   " threads per block (at most ", kMaxBlockThreads, ")"));
  }
  std::unordered_map<const BufferNode*, int64_t> shared_offset;
  int64_t shared_floats = 0;
  for (const Buffer& b : survey.shared) {
    if (shared_offset.count(b.get())) continue;
    shared_offset[b.get()] = shared_floats;
    shared_floats += (b->NumElements() + kSharedAlignFloats - 1) / kSharedAlignFloats * kSharedAlignFloats;
  }
  k.shared_bytes = shared_floats * 4;

  CudaPrinter printer(survey, shared_offset);
  std::vector<std::string> params;
  for (const Buffer& b : func.args) {
    if (b->scratch) {
      k.scratch.push_back(CudaScratch{b->NumElements() * b->ElementBytes(), b->zero_init});
    } else if (!k.scratch.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", func.name, ": argument ", b->name, " follows a scratch argument"));
    }
    const bool read_only = survey.stored.count(b.get()) == 0;
    const char* type = b->dtype == DType::kInt32 ? "int" : "float";
    params.push_back(std::string(read_only ? "const " : "") + type + "* __restrict__ " + printer.BufferName(b.get()));
  }
  printer.PrintStmt(func.body, 1);

  std::ostringstream os;
  os << "// Generated by tune: " << func.name << ", grid (" << k.grid[0] << ", " << k.grid[1] << ", " << k.grid[2]
     << "), block (" << k.block[0] << ", " << k.block[1] << ", " << k.block[2] << "), " << k.shared_bytes
     << " bytes of shared memory\n";
  for (const Buffer& b : func.args) {
    if (!b->scratch) continue;
    os << "// Scratch argument " << printer.BufferName(b.get()) << ": " << b->NumElements() * b->ElementBytes()
       << " bytes, the same memory for every launch"
       << (b->zero_init ? ", zero before the first (each launch leaves it zero)\n" : "\n");
  }
  if (survey.async_copies) os << kAsyncCopyHelpers;
  os << "extern \"C\" __global__ void __launch_bounds__(" << k.threads_per_block() << ") " << k.name << "(";
  for (size_t i = 0; i < params.size(); ++i) os << (i ? ", " : "") << params[i];
  os << ") {\n";
  if (k.shared_bytes > 0) os << "  extern __shared__ __align__(16) float tune_smem[];\n";
  os << printer.str() << "}\n";
  k.source = os.str();
  return k;
}

}  // namespace tune::codegen
