// Questions asked of loop-AST expressions: which variables they use, their affine coefficients,
// the loads they read.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/ir/ir.h"

namespace tune::codegen {

/// True iff `e` mentions `var`.
bool UsesVar(const Expr& e, const VarNode* var);
/// If `e` is affine in `var` with a constant coefficient, stores it and returns true
/// (coefficient 0 when `e` does not use `var`).
bool LinearCoefficient(const Expr& e, const VarNode* var, int64_t* coeff);
/// The loads `e` reads, in pre-order: a load comes before the loads in its own indices. The
/// pointers live as long as `e`.
std::vector<const LoadNode*> CollectLoads(const Expr& e);

}  // namespace tune::codegen
