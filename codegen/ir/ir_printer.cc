// Readable pseudo-C of the loop AST, for golden tests and --show-kernel.
#include "codegen/ir/ir_printer.h"

#include <cstdio>
#include <sstream>

namespace tune::codegen {

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
      const bool prepacked = n->buffer->prepack_source != nullptr;
      os << pad
         << (scope == BufferScope::kLocal    ? "local"
             : scope == BufferScope::kShared ? "shared"
             : prepacked                     ? "prepacked"
                                             : "heap")
         << " float " << n->buffer->name;
      for (int64_t d : n->buffer->shape) os << "[" << d << "]";
      // Kept across calls, one per kernel and address of its source.
      if (prepacked) os << " of " << n->buffer->prepack_source->name;
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
