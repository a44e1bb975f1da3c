// Rewrites of the loop AST: substitution of variables and simplification of integer div/mod.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "codegen/ir/ir.h"

namespace tune::codegen {

/// Replaces variables by expressions (keyed by VarNode address), folding constants.
Expr Substitute(const Expr& e, const std::unordered_map<const VarNode*, Expr>& map);
Stmt Substitute(const Stmt& s, const std::unordered_map<const VarNode*, Expr>& map);

/// Simplifies integer division and modulo whose dividend is affine in variables with known
/// extents (var in [0, extent)): (c*q*x + y) / c -> q*x + y / c and (c*q*x + y) % c -> y % c,
/// and y / c -> 0, y % c -> y when 0 <= y < c. Leaves everything else as it is.
Expr SimplifyDivMod(const Expr& e, const std::unordered_map<const VarNode*, int64_t>& extents);
Stmt SimplifyDivMod(const Stmt& s, const std::unordered_map<const VarNode*, int64_t>& extents);

}  // namespace tune::codegen
