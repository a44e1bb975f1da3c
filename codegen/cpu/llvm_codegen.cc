// Lowering of the loop AST to LLVM IR (IRBuilder), the O3 pipeline and object emission.
#include "codegen/cpu/llvm_codegen.h"

#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "base/check.h"
#include "codegen/ir/ir_analysis.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/simplify.h"

namespace tune::codegen {
namespace {

constexpr int kMaxVectorLanes = 64;

void InitLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();  // inline assembly (BufferNode::broadcast_operand)
  });
}

std::string HostFeatures() {
  llvm::StringMap<bool> features;
  std::string out;
  if (llvm::sys::getHostCPUFeatures(features)) {
    for (auto& f : features) {
      if (!out.empty()) out += ",";
      out += f.second ? '+' : '-';
      out += f.first();
    }
  }
  return out;
}

/// True iff every store in `s` writes an index that moves with `var` (so lanes never write
/// the same element) and `s` holds no loops: then the loop over `var` can become vector code.
/// An If may guard stores: lanes whose condition fails are masked off.
bool CanVectorize(const Stmt& s, const VarNode* var) {
  switch (s->kind) {
    case StmtKind::kIf:
      return CanVectorize(static_cast<const IfNode*>(s.get())->then_case, var);
    case StmtKind::kStore: {
      auto* n = static_cast<const StoreNode*>(s.get());
      Expr flat = FlattenIndex(n->buffer->shape, n->indices);
      int64_t c;
      if (LinearCoefficient(flat, var, &c)) return c != 0;
      return UsesVar(flat, var);
    }
    case StmtKind::kSeq:
      for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) {
        if (!CanVectorize(t, var)) return false;
      }
      return true;
    default:
      return false;
  }
}

/// True iff `s` has GPU thread bindings, shared memory or barriers.
bool UsesGpuConstructs(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void VisitStmt(const Stmt& t) override {
      if (t->kind == StmtKind::kSync || t->kind == StmtKind::kFence || t->kind == StmtKind::kAtomicAdd ||
          t->kind == StmtKind::kAsyncCopy || t->kind == StmtKind::kAsyncCommit ||
          t->kind == StmtKind::kAsyncWait) {
        found = true;
      }
      if (t->kind == StmtKind::kFor && IsGpuBinding(static_cast<const ForNode*>(t.get())->for_kind)) found = true;
      if (t->kind == StmtKind::kAllocate &&
          static_cast<const AllocateNode*>(t.get())->buffer->scope == BufferScope::kShared) {
        found = true;
      }
      IRVisitor::VisitStmt(t);
    }
  } finder;
  finder.VisitStmt(s);
  return finder.found;
}

/// The buffers kept across calls (BufferNode::prepack_source) that `s` allocates, in order.
std::vector<Buffer> PrepackedBuffers(const Stmt& s) {
  struct Finder : IRVisitor {
    std::vector<Buffer> found;
    void VisitStmt(const Stmt& t) override {
      if (t->kind == StmtKind::kAllocate) {
        const Buffer& buf = static_cast<const AllocateNode*>(t.get())->buffer;
        if (buf->prepack_source != nullptr) found.push_back(buf);
      }
      IRVisitor::VisitStmt(t);
    }
  } finder;
  finder.VisitStmt(s);
  return finder.found;
}

/// The key text of a prepacked buffer for tune_rt_prepacked: the kernel's name, the buffer's,
/// and a hash of the kernel's whole AST, so that two kernels that differ anywhere (another
/// config of the same workload, say) never share a packed buffer, whatever their names.
std::string PrepackedId(const LoweredFunc& func, const Buffer& buffer) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (unsigned char c : Print(func)) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return func.name + "/" + buffer->name + "/" + hex;
}

class Lowering {
 public:
  /// `avx512`: the target has AVX-512F and AVX-512VL (embedded broadcasts of 8 and 16 lanes).
  Lowering(llvm::LLVMContext& ctx, llvm::Module& mod, const std::string& cpu,
           const std::string& features, bool avx512)
      : ctx_(ctx), mod_(mod), b_(ctx), cpu_(cpu), features_(features), avx512_(avx512) {
    f32_ = llvm::Type::getFloatTy(ctx);
    i64_ = llvm::Type::getInt64Ty(ctx);
    ptr_ = llvm::PointerType::get(ctx, 0);
  }

  void LowerFunc(const LoweredFunc& func) {
    // The implementation takes one noalias pointer per buffer; the exported wrapper unpacks
    // the argument array and calls it (and is inlined away).
    // A buffer kept across calls is obtained (and released) by the wrapper and passed to the
    // implementation as one more noalias pointer with its `fresh` flag (i64).
    const std::vector<Buffer> prepacked = PrepackedBuffers(func.body);
    std::vector<llvm::Type*> params(func.args.size(), ptr_);
    for (size_t i = 0; i < prepacked.size(); ++i) params.insert(params.end(), {ptr_, i64_});
    auto* impl_ty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    auto* impl = llvm::Function::Create(impl_ty, llvm::Function::InternalLinkage,
                                        func.name + "_impl", mod_);
    SetAttrs(impl);
    impl->addFnAttr(llvm::Attribute::AlwaysInline);
    for (size_t i = 0; i < func.args.size(); ++i) {
      impl->getArg(i)->addAttr(llvm::Attribute::NoAlias);
      impl->getArg(i)->setName(func.args[i]->name);
      bufs_[func.args[i].get()] = impl->getArg(i);
    }
    for (size_t i = 0; i < prepacked.size(); ++i) {
      llvm::Argument* data = impl->getArg(static_cast<unsigned>(func.args.size() + 2 * i));
      llvm::Argument* fresh = impl->getArg(static_cast<unsigned>(func.args.size() + 2 * i + 1));
      data->addAttr(llvm::Attribute::NoAlias);
      data->setName(prepacked[i]->name);
      fresh->setName(prepacked[i]->name + ".fresh");
      bufs_[prepacked[i].get()] = data;
      vars_[static_cast<const VarNode*>(prepacked[i]->fresh.get())] = fresh;
    }
    BeginFunction(impl);
    LowerStmt(func.body);
    b_.CreateRetVoid();
    EndFunction();

    auto* wrap_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr_}, false);
    auto* wrap = llvm::Function::Create(wrap_ty, llvm::Function::ExternalLinkage, func.name, mod_);
    SetAttrs(wrap);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", wrap));
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < func.args.size(); ++i) {
      auto* slot = b_.CreateGEP(ptr_, wrap->getArg(0), {b_.getInt64(static_cast<int64_t>(i))});
      args.push_back(b_.CreateAlignedLoad(ptr_, slot, llvm::Align(8)));
    }
    llvm::FunctionCallee acquire_fn = mod_.getOrInsertFunction(
        "tune_rt_prepacked", llvm::FunctionType::get(ptr_, {ptr_, ptr_, i64_, ptr_}, false));
    llvm::FunctionCallee release_fn = mod_.getOrInsertFunction(
        "tune_rt_prepacked_release", llvm::FunctionType::get(b_.getVoidTy(), {ptr_}, false));
    std::vector<llvm::Value*> held;
    for (const Buffer& buf : prepacked) {
      size_t source = 0;
      while (source < func.args.size() && func.args[source] != buf->prepack_source) ++source;
      TUNE_CHECK(source < func.args.size()) << "the source of " << buf->name << " is no argument";
      llvm::Value* id = b_.CreateGlobalStringPtr(PrepackedId(func, buf), buf->name + ".id");
      llvm::IRBuilder<> entry(&wrap->getEntryBlock(), wrap->getEntryBlock().getFirstInsertionPt());
      llvm::AllocaInst* flag = entry.CreateAlloca(b_.getInt32Ty(), nullptr, buf->name + ".fresh");
      llvm::Value* data =
          b_.CreateCall(acquire_fn, {id, args[source], b_.getInt64(buf->NumElements() * 4), flag});
      args.push_back(data);
      args.push_back(b_.CreateSExt(b_.CreateLoad(b_.getInt32Ty(), flag), i64_));
      held.push_back(data);
    }
    b_.CreateCall(impl, args);
    for (llvm::Value* data : held) b_.CreateCall(release_fn, {data});
    b_.CreateRetVoid();
  }

 private:
  struct Val {
    llvm::Value* v;
    bool vec;
  };

  void SetAttrs(llvm::Function* f) {
    f->addFnAttr("target-cpu", cpu_);
    f->addFnAttr("target-features", features_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
  }

  void BeginFunction(llvm::Function* f) {
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
    fn_stack_.push_back(entry);
    b_.SetInsertPoint(entry);
  }
  void EndFunction() { fn_stack_.pop_back(); }

  llvm::Value* Splat(const Val& x) {
    if (x.vec) return x.v;
    return b_.CreateVectorSplat(lanes_, x.v);
  }

  llvm::Value* Ramp() {
    std::vector<llvm::Constant*> c;
    for (int i = 0; i < lanes_; ++i) c.push_back(llvm::ConstantInt::get(i64_, i));
    return llvm::ConstantVector::get(c);
  }

  Val LowerExpr(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return {llvm::ConstantInt::get(i64_, static_cast<const IntImmNode*>(e.get())->value), false};
      case ExprKind::kFloatImm:
        return {llvm::ConstantFP::get(f32_, static_cast<const FloatImmNode*>(e.get())->value), false};
      case ExprKind::kVar: {
        const VarNode* v = AsVar(e);
        if (v == vec_var_) return {Ramp(), true};
        auto it = vars_.find(v);
        TUNE_CHECK_MSG(it != vars_.end(), "unbound variable " + v->name);
        return {it->second, false};
      }
      case ExprKind::kSelect: {
        auto* n = static_cast<const SelectNode*>(e.get());
        Val c = LowerExpr(n->cond), t = LowerExpr(n->true_value), f = LowerExpr(n->false_value);
        if (c.vec || t.vec || f.vec) return {b_.CreateSelect(Splat(c), Splat(t), Splat(f)), true};
        return {b_.CreateSelect(c.v, t.v, f.v), false};
      }
      case ExprKind::kLoad:
        return LowerLoad(static_cast<const LoadNode*>(e.get()));
      default:
        return LowerBinary(static_cast<const BinaryNode*>(e.get()));
    }
  }

  Val LowerBinary(const BinaryNode* n) {
    Val a = LowerExpr(n->a), b = LowerExpr(n->b);
    bool vec = a.vec || b.vec;
    llvm::Value* x = vec ? Splat(a) : a.v;
    llvm::Value* y = vec ? Splat(b) : b.v;
    bool is_float = n->a->dtype == DType::kFloat32;
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
    llvm::Value* r = nullptr;
    switch (n->kind) {
      case ExprKind::kAdd: r = is_float ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y); break;
      case ExprKind::kSub: r = is_float ? b_.CreateFSub(x, y) : b_.CreateSub(x, y); break;
      case ExprKind::kMul: r = is_float ? b_.CreateFMul(x, y) : b_.CreateMul(x, y); break;
      case ExprKind::kDiv: r = is_float ? b_.CreateFDiv(x, y) : b_.CreateSDiv(x, y); break;
      case ExprKind::kMod: TUNE_CHECK(!is_float); r = b_.CreateSRem(x, y); break;
      case ExprKind::kMin:
        r = is_float ? b_.CreateMinNum(x, y) : b_.CreateSelect(b_.CreateICmpSLT(x, y), x, y);
        break;
      case ExprKind::kMax:
        r = is_float ? b_.CreateMaxNum(x, y) : b_.CreateSelect(b_.CreateICmpSGT(x, y), x, y);
        break;
      case ExprKind::kLT: r = is_float ? b_.CreateFCmpOLT(x, y) : b_.CreateICmpSLT(x, y); break;
      case ExprKind::kLE: r = is_float ? b_.CreateFCmpOLE(x, y) : b_.CreateICmpSLE(x, y); break;
      case ExprKind::kEQ: r = is_float ? b_.CreateFCmpOEQ(x, y) : b_.CreateICmpEQ(x, y); break;
      case ExprKind::kAnd: r = b_.CreateAnd(ToBool(x), ToBool(y)); break;
      default: TUNE_CHECK_MSG(false, "unexpected binary node");
    }
    return {r, vec};
  }

  llvm::Value* ToBool(llvm::Value* v) {
    if (v->getType()->getScalarType()->isIntegerTy(1)) return v;
    return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }

  llvm::Value* BufferPtr(const Buffer& buf) {
    auto it = bufs_.find(buf.get());
    TUNE_CHECK_MSG(it != bufs_.end(), "unbound buffer " + buf->name);
    return it->second;
  }

  Val LowerLoad(const LoadNode* n) {
    Expr flat = FlattenIndex(n->buffer->shape, n->indices);
    llvm::Value* base = BufferPtr(n->buffer);
    if (vec_var_ == nullptr || !UsesVar(flat, vec_var_)) {
      llvm::Value* idx = LowerExpr(flat).v;
      return {b_.CreateAlignedLoad(f32_, b_.CreateInBoundsGEP(f32_, base, {idx}), llvm::Align(4)), false};
    }
    int64_t coeff;
    auto* vty = llvm::FixedVectorType::get(f32_, lanes_);
    if (LinearCoefficient(flat, vec_var_, &coeff) && coeff == 1) {
      Expr start = Substitute(flat, {{vec_var_, Expr(int64_t{0})}});
      // Masked lanes may lie past the buffer: their addresses are computed without inbounds.
      if (mask_ != nullptr) {
        auto* ptr = b_.CreateGEP(f32_, base, {LowerExpr(start).v});
        return {b_.CreateMaskedLoad(vty, ptr, llvm::Align(4), mask_, llvm::Constant::getNullValue(vty)), true};
      }
      auto* ptr = b_.CreateInBoundsGEP(f32_, base, {LowerExpr(start).v});
      return {b_.CreateAlignedLoad(vty, ptr, llvm::Align(4)), true};
    }
    llvm::Value* idx = Splat(LowerExpr(flat));
    if (mask_ != nullptr) {
      auto* ptrs = b_.CreateGEP(f32_, base, {idx});
      return {b_.CreateMaskedGather(vty, ptrs, llvm::Align(4), mask_, llvm::Constant::getNullValue(vty)), true};
    }
    auto* ptrs = b_.CreateInBoundsGEP(f32_, base, {idx});
    return {b_.CreateMaskedGather(vty, ptrs, llvm::Align(4)), true};
  }

  void LowerStore(const StoreNode* n) {
    Expr flat = FlattenIndex(n->buffer->shape, n->indices);
    llvm::Value* base = BufferPtr(n->buffer);
    Val value = mask_ == nullptr ? BroadcastOperandFma(n->value) : Val{nullptr, false};
    if (value.v == nullptr) value = LowerExpr(n->value);
    if (vec_var_ == nullptr) {
      TUNE_CHECK(!value.vec);
      auto* ptr = b_.CreateInBoundsGEP(f32_, base, {LowerExpr(flat).v});
      b_.CreateAlignedStore(value.v, ptr, llvm::Align(4));
      return;
    }
    int64_t coeff;
    if (LinearCoefficient(flat, vec_var_, &coeff) && coeff == 1) {
      Expr start = Substitute(flat, {{vec_var_, Expr(int64_t{0})}});
      if (mask_ != nullptr) {
        auto* ptr = b_.CreateGEP(f32_, base, {LowerExpr(start).v});
        b_.CreateMaskedStore(Splat(value), ptr, llvm::Align(4), mask_);
      } else {
        auto* ptr = b_.CreateInBoundsGEP(f32_, base, {LowerExpr(start).v});
        b_.CreateAlignedStore(Splat(value), ptr, llvm::Align(4));
      }
      return;
    }
    llvm::Value* idx = Splat(LowerExpr(flat));
    if (mask_ != nullptr) {
      b_.CreateMaskedScatter(Splat(value), b_.CreateGEP(f32_, base, {idx}), llvm::Align(4), mask_);
    } else {
      b_.CreateMaskedScatter(Splat(value), b_.CreateInBoundsGEP(f32_, base, {idx}), llvm::Align(4));
    }
  }

  /// Where `e` is a + x * v (or v * x, either side of the sum) inside a vector loop of 8 or 16
  /// lanes on AVX-512, with x a scalar load of a buffer marked broadcast_operand and a, v
  /// vectors: the FMA `vfmadd231ps x{1toN}, v, a`, x read from memory by each FMA (inline
  /// assembly: LLVM keeps a broadcast that several FMAs use in a register). Else {nullptr}.
  Val BroadcastOperandFma(const Expr& e) {
    if (!avx512_ || vec_var_ == nullptr || (lanes_ != 16 && lanes_ != 8) || e->kind != ExprKind::kAdd ||
        e->dtype != DType::kFloat32) {
      return {nullptr, false};
    }
    auto* sum = static_cast<const BinaryNode*>(e.get());
    // The scalar load of a product, or null.
    auto scalar_of = [this](const Expr& product, Expr* other) -> const LoadNode* {
      if (product->kind != ExprKind::kMul) return nullptr;
      auto* mul = static_cast<const BinaryNode*>(product.get());
      for (const auto& [x, v] : {std::pair{mul->a, mul->b}, std::pair{mul->b, mul->a}}) {
        if (x->kind != ExprKind::kLoad) continue;
        auto* load = static_cast<const LoadNode*>(x.get());
        if (!load->buffer->broadcast_operand || load->buffer->dtype != DType::kFloat32 ||
            UsesVar(FlattenIndex(load->buffer->shape, load->indices), vec_var_) || !UsesVar(v, vec_var_)) {
          continue;
        }
        *other = v;
        return load;
      }
      return nullptr;
    };
    Expr v, addend = sum->a;
    const LoadNode* x = scalar_of(sum->b, &v);
    if (x == nullptr) {
      x = scalar_of(sum->a, &v);
      addend = sum->b;
    }
    if (x == nullptr || !UsesVar(addend, vec_var_)) return {nullptr, false};
    Val acc = LowerExpr(addend), vec = LowerExpr(v);
    if (!acc.vec || !vec.vec) return {nullptr, false};
    llvm::Value* ptr = b_.CreateInBoundsGEP(f32_, BufferPtr(x->buffer),
                                            {LowerExpr(FlattenIndex(x->buffer->shape, x->indices)).v});
    auto* vty = llvm::FixedVectorType::get(f32_, lanes_);
    auto* fty = llvm::FunctionType::get(vty, {vty, ptr_, vty}, false);
    // AT&T operand order: $0 (the accumulator, tied to input 2) += $1 * broadcast($2).
    const std::string text = "vfmadd231ps $2{1to" + std::to_string(lanes_) + "}, $1, $0";
    auto* fma = b_.CreateCall(llvm::InlineAsm::get(fty, text, "=v,v,*m,0", /*hasSideEffects=*/false),
                              {vec.v, ptr, acc.v});
    fma->addParamAttr(1, llvm::Attribute::get(ctx_, llvm::Attribute::ElementType, f32_));
    // It only reads x and always returns: loads of the other operands stay free to be shared
    // and moved around it, and accumulators in memory to be promoted to registers around it.
    fma->setOnlyAccessesArgMemory();
    fma->setOnlyReadsMemory();
    fma->setDoesNotThrow();
    fma->addFnAttr(llvm::Attribute::WillReturn);
    return {fma, true};
  }

  void LowerStmt(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kStore:
        LowerStore(static_cast<const StoreNode*>(s.get()));
        return;
      case StmtKind::kSeq:
        for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) LowerStmt(t);
        return;
      case StmtKind::kAllocate:
        LowerAllocate(static_cast<const AllocateNode*>(s.get()));
        return;
      case StmtKind::kFor:
        LowerFor(static_cast<const ForNode*>(s.get()));
        return;
      case StmtKind::kIf:
        LowerIf(static_cast<const IfNode*>(s.get()));
        return;
      case StmtKind::kSync:  // these GPU statements are rejected by CompileForHost before lowering
      case StmtKind::kFence:
      case StmtKind::kAtomicAdd:
      case StmtKind::kAsyncCopy:
      case StmtKind::kAsyncCommit:
      case StmtKind::kAsyncWait:
        return;
    }
  }

  /// Appends the conjuncts of `e` (a && b && ...) to `out`.
  static void Conjuncts(const Expr& e, std::vector<Expr>* out) {
    if (e->kind == ExprKind::kAnd) {
      auto* n = static_cast<const BinaryNode*>(e.get());
      Conjuncts(n->a, out);
      Conjuncts(n->b, out);
      return;
    }
    out->push_back(e);
  }

  /// A branch on the conjuncts that are the same for every lane; inside a vectorized loop the
  /// conjuncts that use its variable become a lane mask of the loads and stores below.
  /// A condition that folds to a constant emits the body or nothing.
  void LowerIf(const IfNode* n) {
    std::vector<Expr> conjuncts;
    Conjuncts(n->cond, &conjuncts);
    Expr uniform, per_lane;
    for (const Expr& c : conjuncts) {
      Expr& part = vec_var_ != nullptr && UsesVar(c, vec_var_) ? per_lane : uniform;
      part = part.defined() ? (part && c) : c;
    }
    if (!uniform.defined()) {
      LowerMasked(per_lane, n->then_case);
      return;
    }
    Val cond = LowerExpr(uniform);
    TUNE_CHECK(!cond.vec);
    llvm::Value* c = ToBool(cond.v);
    if (auto* k = llvm::dyn_cast<llvm::ConstantInt>(c)) {
      if (!k->isZero()) LowerMasked(per_lane, n->then_case);
      return;
    }
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn);
    auto* end_bb = llvm::BasicBlock::Create(ctx_, "if.end", fn);
    b_.CreateCondBr(c, then_bb, end_bb);
    b_.SetInsertPoint(then_bb);
    LowerMasked(per_lane, n->then_case);
    b_.CreateBr(end_bb);
    b_.SetInsertPoint(end_bb);
  }

  /// `body` with the lanes where `cond` (undefined: every lane) fails masked off.
  void LowerMasked(const Expr& cond, const Stmt& body) {
    if (!cond.defined()) {
      LowerStmt(body);
      return;
    }
    llvm::Value* saved = mask_;
    llvm::Value* lanes = ToBool(Splat(LowerExpr(cond)));
    mask_ = saved != nullptr ? b_.CreateAnd(saved, lanes) : lanes;
    LowerStmt(body);
    mask_ = saved;
  }

  void LowerAllocate(const AllocateNode* n) {
    const Buffer& buf = n->buffer;
    if (buf->scope == BufferScope::kLocal) {
      llvm::IRBuilder<> entry(fn_stack_.back(), fn_stack_.back()->getFirstInsertionPt());
      auto* arr = llvm::ArrayType::get(f32_, buf->NumElements());
      auto* alloca = entry.CreateAlloca(arr, nullptr, buf->name);
      alloca->setAlignment(llvm::Align(32));
      bufs_[buf.get()] = alloca;
      LowerStmt(n->body);
      bufs_.erase(buf.get());
      return;
    }
    if (buf->prepack_source != nullptr) {  // bound to an argument of the implementation
      LowerStmt(n->body);
      return;
    }
    llvm::FunctionCallee alloc_fn = mod_.getOrInsertFunction(
        "tune_rt_alloc", llvm::FunctionType::get(ptr_, {i64_}, false));
    llvm::FunctionCallee free_fn = mod_.getOrInsertFunction(
        "tune_rt_free", llvm::FunctionType::get(b_.getVoidTy(), {ptr_}, false));
    if (auto* f = llvm::dyn_cast<llvm::Function>(alloc_fn.getCallee())) {
      f->addRetAttr(llvm::Attribute::NoAlias);
      f->addFnAttr(llvm::Attribute::NoUnwind);
    }
    llvm::Value* p = b_.CreateCall(alloc_fn, {b_.getInt64(buf->NumElements() * 4)});
    bufs_[buf.get()] = p;
    LowerStmt(n->body);
    b_.CreateCall(free_fn, {p});
    bufs_.erase(buf.get());
  }

  void LowerFor(const ForNode* n) {
    const VarNode* var = AsVar(n->var);
    switch (n->for_kind) {
      case ForKind::kUnrolled:
        for (int64_t i = 0; i < n->extent; ++i) {
          vars_[var] = b_.getInt64(i);
          LowerStmt(n->body);
        }
        vars_.erase(var);
        return;
      case ForKind::kVectorized:
        if (vec_var_ == nullptr && n->extent > 1 && n->extent <= kMaxVectorLanes &&
            CanVectorize(n->body, var)) {
          vec_var_ = var;
          lanes_ = static_cast<int>(n->extent);
          LowerStmt(n->body);
          vec_var_ = nullptr;
          lanes_ = 0;
          return;
        }
        break;
      case ForKind::kParallel:
        if (vec_var_ == nullptr && n->extent > 1) {
          LowerParallel(n);
          return;
        }
        break;
      case ForKind::kSerial:
        break;
      default:  // GPU bindings: rejected by CompileForHost before lowering
        break;
    }
    LowerSerial(n);
  }

  void LowerSerial(const ForNode* n) {
    const VarNode* var = AsVar(n->var);
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(ctx_, var->name, fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, var->name + ".end", fn);
    b_.CreateBr(loop);
    b_.SetInsertPoint(loop);
    llvm::PHINode* phi = b_.CreatePHI(i64_, 2, var->name);
    phi->addIncoming(b_.getInt64(0), pre);
    vars_[var] = phi;
    LowerStmt(n->body);
    llvm::Value* next = b_.CreateAdd(phi, b_.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
    phi->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, b_.getInt64(n->extent)), loop, exit);
    b_.SetInsertPoint(exit);
    vars_.erase(var);
  }

  /// Outlines the loop body into `void body(i64 i, ptr closure)`; the closure carries every
  /// bound variable and buffer pointer as i64 slots.
  void LowerParallel(const ForNode* n) {
    std::vector<std::pair<const VarNode*, llvm::Value*>> cap_vars(vars_.begin(), vars_.end());
    std::vector<std::pair<const BufferNode*, llvm::Value*>> cap_bufs(bufs_.begin(), bufs_.end());
    size_t slots = cap_vars.size() + cap_bufs.size();
    llvm::IRBuilder<> entry(fn_stack_.back(), fn_stack_.back()->getFirstInsertionPt());
    auto* closure_ty = llvm::ArrayType::get(i64_, slots == 0 ? 1 : slots);
    auto* closure = entry.CreateAlloca(closure_ty, nullptr, "closure");
    size_t k = 0;
    for (auto& [v, val] : cap_vars) {
      b_.CreateStore(val, b_.CreateConstInBoundsGEP2_64(closure_ty, closure, 0, k++));
    }
    for (auto& [bn, val] : cap_bufs) {
      b_.CreateStore(b_.CreatePtrToInt(val, i64_), b_.CreateConstInBoundsGEP2_64(closure_ty, closure, 0, k++));
    }

    auto* body_ty = llvm::FunctionType::get(b_.getVoidTy(), {i64_, ptr_}, false);
    auto* body_fn = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage,
                                           "parallel_" + AsVar(n->var)->name, mod_);
    SetAttrs(body_fn);
    auto saved_vars = vars_;
    auto saved_bufs = bufs_;
    llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
    BeginFunction(body_fn);
    k = 0;
    for (auto& [v, val] : cap_vars) {
      vars_[v] = b_.CreateLoad(i64_, b_.CreateConstInBoundsGEP2_64(closure_ty, body_fn->getArg(1), 0, k++));
    }
    for (auto& [bn, val] : cap_bufs) {
      auto* raw = b_.CreateLoad(i64_, b_.CreateConstInBoundsGEP2_64(closure_ty, body_fn->getArg(1), 0, k++));
      bufs_[bn] = b_.CreateIntToPtr(raw, ptr_);
    }
    vars_[AsVar(n->var)] = body_fn->getArg(0);
    LowerStmt(n->body);
    b_.CreateRetVoid();
    EndFunction();
    vars_ = saved_vars;
    bufs_ = saved_bufs;
    b_.restoreIP(saved_ip);

    auto rt = mod_.getOrInsertFunction(
        "tune_rt_parallel_for", llvm::FunctionType::get(b_.getVoidTy(), {i64_, ptr_, ptr_}, false));
    b_.CreateCall(rt, {b_.getInt64(n->extent), body_fn, closure});
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  llvm::IRBuilder<> b_;
  std::string cpu_, features_;
  llvm::Type* f32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  std::unordered_map<const VarNode*, llvm::Value*> vars_;
  std::unordered_map<const BufferNode*, llvm::Value*> bufs_;
  std::vector<llvm::BasicBlock*> fn_stack_;  // entry block of each function being built
  const VarNode* vec_var_ = nullptr;
  int lanes_ = 0;
  llvm::Value* mask_ = nullptr;  // <lanes x i1>: the lanes that run, inside a guarded vector loop
  bool avx512_ = false;          // embedded-broadcast FMAs available (BufferNode::broadcast_operand)
};

/// InvalidArgument unless LLVM knows `cpu` and every feature of `features` for `target`.
absl::Status CheckCpu(const llvm::Target& target, const std::string& triple, const std::string& cpu,
                      const std::string& features) {
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target.createMCSubtargetInfo(triple, "", ""));
  if (!sti) return absl::InternalError("cannot describe the LLVM target " + triple);
  if (!sti->isCPUStringValid(cpu)) {
    return absl::InvalidArgumentError("LLVM does not know the CPU '" + cpu + "' for " + triple);
  }
  llvm::StringMap<bool> host_features;
  llvm::sys::getHostCPUFeatures(host_features);
  llvm::SmallVector<llvm::StringRef, 16> items;
  llvm::StringRef(features).split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    item = item.trim();
    if (item.empty()) continue;
    if (item[0] != '+' && item[0] != '-') {
      return absl::InvalidArgumentError("CPU feature '" + item.str() + "' must start with + or -");
    }
    // The features LLVM reads from CPUs of this architecture (what target keys record);
    // unknown to it when the host's are not listed.
    const llvm::StringRef name = item.drop_front();
    if (!host_features.empty() && host_features.find(name) == host_features.end()) {
      return absl::InvalidArgumentError("LLVM does not know the CPU feature '" + name.str() + "' for " + triple);
    }
  }
  return absl::OkStatus();
}

/// CompileForHost and CompileForCpu: `cpu` and `features` checked first when `check_cpu`.
absl::StatusOr<CompiledKernel> Compile(const LoweredFunc& func, const std::string& cpu, const std::string& features,
                                       const CodegenOptions& options, bool check_cpu) {
  if (UsesGpuConstructs(func.body)) {
    return absl::InvalidArgumentError("kernel " + func.name +
                                      " binds GPU threads or uses shared memory; it needs the CUDA backend");
  }
  std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr) return absl::InternalError("LLVM target lookup failed: " + error);
  if (check_cpu) {
    if (absl::Status st = CheckCpu(*target, triple, cpu, features); !st.ok()) return st;
  }
  llvm::TargetOptions topts;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpu, features, topts, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      options.opt_level >= 2 ? llvm::CodeGenOpt::Aggressive : llvm::CodeGenOpt::Default));
  if (!tm) return absl::InternalError("cannot create an LLVM target machine for " + triple);

  llvm::LLVMContext ctx;
  auto mod = std::make_unique<llvm::Module>(func.name, ctx);
  mod->setTargetTriple(triple);
  mod->setDataLayout(tm->createDataLayout());
  // Embedded broadcasts of 8 and 16 lanes: AVX-512F with VL, the CPU's own or named features.
  bool avx512 = false;
  {
    std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, cpu, features));
    avx512 = sti != nullptr && sti->checkFeatures("+avx512f,+avx512vl");
  }
  Lowering(ctx, *mod, cpu, features, avx512).LowerFunc(func);

  std::string verify_msg;
  llvm::raw_string_ostream verify_os(verify_msg);
  if (llvm::verifyModule(*mod, &verify_os)) {
    return absl::InternalError("generated LLVM IR is invalid: " + verify_os.str());
  }

  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopUnrolling = true;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = options.opt_level >= 3   ? llvm::OptimizationLevel::O3
                                    : options.opt_level == 2 ? llvm::OptimizationLevel::O2
                                    : options.opt_level == 1 ? llvm::OptimizationLevel::O1
                                                             : llvm::OptimizationLevel::O0;
    llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                      ? pb.buildO0DefaultPipeline(level)
                                      : pb.buildPerModuleDefaultPipeline(level);
    mpm.run(*mod, mam);
  }

  CompiledKernel out;
  out.symbol = func.name;
  if (options.keep_ir) {
    llvm::raw_string_ostream os(out.ir);
    mod->print(os, nullptr);
  }
  llvm::SmallVector<char, 0> buffer;
  {
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
      return absl::InternalError("LLVM cannot emit object code for " + triple);
    }
    pm.run(*mod);
  }
  out.object_code.assign(buffer.begin(), buffer.end());
  return out;
}

}  // namespace

std::string HostCpuName() { return llvm::sys::getHostCPUName().str(); }

absl::StatusOr<CompiledKernel> CompileForHost(const LoweredFunc& func, const CodegenOptions& options) {
  InitLLVMOnce();
  return Compile(func, HostCpuName(), HostFeatures(), options, /*check_cpu=*/false);
}

absl::StatusOr<CompiledKernel> CompileForCpu(const LoweredFunc& func, const std::string& cpu,
                                             const std::string& features, const CodegenOptions& options) {
  InitLLVMOnce();
  return Compile(func, cpu, features, options, /*check_cpu=*/true);
}

}  // namespace tune::codegen
