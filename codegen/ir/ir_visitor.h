// Traversals of the loop AST: a read-only visitor and a rebuilding mutator.
#pragma once

#include <vector>

#include "codegen/ir/ir.h"

namespace tune::codegen {

/// Read-only traversal. Override a Visit* method and call the base to keep recursing.
class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void VisitExpr(const Expr& e);
  virtual void VisitStmt(const Stmt& s);
};

/// Rebuilding traversal: returns the same node when nothing below changed. Override and
/// call the base for the default rebuild.
class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr MutateExpr(const Expr& e);
  virtual Stmt MutateStmt(const Stmt& s);

 protected:
  /// MutateExpr of each index; sets `*changed` when any of them changed.
  std::vector<Expr> MutateIndices(const std::vector<Expr>& indices, bool* changed);
};

}  // namespace tune::codegen
