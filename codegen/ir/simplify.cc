// Rewrites of the loop AST: variable substitution and div/mod simplification.
#include "codegen/ir/simplify.h"

#include <algorithm>
#include <utility>

#include "codegen/ir/ir_visitor.h"

namespace tune::codegen {
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

/// An affine form: sum of coeff * var plus a constant. A term's "var" may also be an atom: a
/// division or modulo by a positive constant that could not be simplified (a fused loop's
/// m0 = f / 64, n0 = f % 64), which the simplifier treats as one more variable.
struct Affine {
  std::vector<std::pair<Expr, int64_t>> terms;  // (var or atom, coefficient)
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
  if ((e->kind == ExprKind::kDiv || e->kind == ExprKind::kMod) && e->dtype == DType::kInt64) {
    auto* n = static_cast<const BinaryNode*>(e.get());
    if (AsInt(n->b, &v) && v > 0) {
      out->terms.emplace_back(e, scale);
      return true;
    }
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

  /// The range [0, *hi] of a term of an affine form: a var with a known extent, or an atom
  /// x / c or x % c whose dividend x is a non-negative affine form of such vars (and atoms).
  /// False when it is not known to be non-negative and bounded.
  bool Range(const Expr& term, int64_t* hi) const {
    if (const VarNode* var = AsVar(term)) {
      auto it = extents_.find(var);
      if (it == extents_.end()) return false;
      *hi = it->second - 1;
      return true;
    }
    auto* n = static_cast<const BinaryNode*>(term.get());
    int64_t c;
    Affine x;
    if (!AsInt(n->b, &c) || c <= 0 || !ToAffine(n->a, &x) || x.constant < 0) return false;
    int64_t x_hi = x.constant;
    for (auto& [t, coeff] : x.terms) {
      int64_t t_hi;
      if (coeff < 0 || !Range(t, &t_hi)) return false;
      x_hi += coeff * t_hi;
    }
    *hi = term->kind == ExprKind::kDiv ? x_hi / c : std::min(x_hi, c - 1);
    return true;
  }

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
      int64_t var_hi;
      if (coeff % c == 0) {
        // Loop vars are non-negative; an atom must be shown to be.
        if (AsVar(var) == nullptr && !Range(var, &var_hi)) return r;
        multiple.emplace_back(var, coeff / c);
        continue;
      }
      if (coeff < 0 || !Range(var, &var_hi)) return r;
      rest.emplace_back(var, coeff);
      hi += coeff * var_hi;
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

Expr Substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map) {
  return Substituter(map).MutateExpr(e);
}
Stmt Substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map) {
  return Substituter(map).MutateStmt(s);
}

Expr SimplifyDivMod(const Expr& e, const std::unordered_map<const VarNode*, int64_t>& extents) {
  return DivModSimplifier(extents).MutateExpr(e);
}
Stmt SimplifyDivMod(const Stmt& s, const std::unordered_map<const VarNode*, int64_t>& extents) {
  return DivModSimplifier(extents).MutateStmt(s);
}

}  // namespace tune::codegen
