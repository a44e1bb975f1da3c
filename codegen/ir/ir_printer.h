// Print: readable pseudo-C of the loop AST.
#pragma once

#include <string>

#include "codegen/ir/ir.h"

namespace tune::codegen {

/// Readable pseudo-C of a kernel or statement (used by golden tests and --show-kernel).
std::string Print(const LoweredFunc& func);
std::string Print(const Stmt& s, int indent = 0);
std::string Print(const Expr& e);

}  // namespace tune::codegen
