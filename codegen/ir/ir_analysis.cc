// Questions asked of the loop AST: which variables an expression uses, affine coefficients, loads.
#include "codegen/ir/ir_analysis.h"

#include <utility>

#include "codegen/ir/ir_visitor.h"

namespace tune::codegen {
namespace {

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

class LoadCollector : public IRVisitor {
 public:
  void VisitExpr(const Expr& e) override {
    if (e->kind == ExprKind::kLoad) loads.push_back(static_cast<const LoadNode*>(e.get()));
    IRVisitor::VisitExpr(e);
  }
  std::vector<const LoadNode*> loads;
};

}  // namespace

bool UsesVar(const Expr& e, const VarNode* var) {
  VarFinder f(var);
  f.VisitExpr(e);
  return f.found;
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

std::vector<const LoadNode*> CollectLoads(const Expr& e) {
  LoadCollector collector;
  collector.VisitExpr(e);
  return std::move(collector.loads);
}

}  // namespace tune::codegen