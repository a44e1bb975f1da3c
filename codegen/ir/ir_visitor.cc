// The default traversals of the loop AST: IRVisitor recursion and IRMutator rebuilding.
#include "codegen/ir/ir_visitor.h"

namespace tune::codegen {

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

}  // namespace tune::codegen
