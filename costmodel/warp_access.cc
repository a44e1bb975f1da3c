// Warp-level memory access analysis: coalescing into 32-byte sectors, shared-memory banks.
#include "costmodel/warp_access.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace tune::costmodel {
namespace {

using codegen::BinaryNode;
using codegen::Expr;
using codegen::ExprKind;
using codegen::SelectNode;
using codegen::VarNode;

constexpr int64_t kWarp = 32;
constexpr int64_t kBytesPerElement = 4;  // fp32
constexpr int64_t kSectorBytes = 32;
constexpr int64_t kBanks = 32;  // 4-byte banks

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

/// The integer value of index expression `e` with the variables of `env` set and every other
/// one 0; nullopt when it reads memory or divides by zero.
std::optional<int64_t> Eval(const Expr& e, const std::unordered_map<const VarNode*, int64_t>& env) {
  switch (e->kind) {
    case ExprKind::kIntImm:
      return static_cast<const codegen::IntImmNode*>(e.get())->value;
    case ExprKind::kVar: {
      auto it = env.find(static_cast<const VarNode*>(e.get()));
      return it == env.end() ? 0 : it->second;
    }
    case ExprKind::kFloatImm:
    case ExprKind::kLoad:
      return std::nullopt;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      auto c = Eval(n->cond, env);
      if (!c) return std::nullopt;
      return Eval(*c != 0 ? n->true_value : n->false_value, env);
    }
    default:
      break;
  }
  auto* n = static_cast<const BinaryNode*>(e.get());
  auto a = Eval(n->a, env), b = Eval(n->b, env);
  if (!a || !b) return std::nullopt;
  switch (e->kind) {
    case ExprKind::kAdd: return *a + *b;
    case ExprKind::kSub: return *a - *b;
    case ExprKind::kMul: return *a * *b;
    case ExprKind::kDiv: return *b == 0 ? std::nullopt : std::optional<int64_t>(FloorDiv(*a, *b));
    case ExprKind::kMod: return *b == 0 ? std::nullopt : std::optional<int64_t>(*a - FloorDiv(*a, *b) * *b);
    case ExprKind::kMin: return std::min(*a, *b);
    case ExprKind::kMax: return std::max(*a, *b);
    case ExprKind::kLT: return *a < *b ? 1 : 0;
    case ExprKind::kLE: return *a <= *b ? 1 : 0;
    case ExprKind::kEQ: return *a == *b ? 1 : 0;
    case ExprKind::kAnd: return (*a != 0 && *b != 0) ? 1 : 0;
    default: return std::nullopt;
  }
}

}  // namespace

WarpAccess AnalyzeWarpAccess(const std::vector<int64_t>& shape, const std::vector<Expr>& indices,
                             const WarpShape& warp) {
  WarpAccess out;
  if (indices.size() != shape.size() || indices.empty()) return out;
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * std::max<int64_t>(shape[d], 1);
  const int64_t block = warp.thread_extents[0] * warp.thread_extents[1] * warp.thread_extents[2];
  const int64_t lanes = std::clamp<int64_t>(block, 1, kWarp);
  const int64_t vector = std::max<int64_t>(warp.vector_lanes, 1);
  // A request is served in phases: 128-bit accesses 8 threads at a time, 64-bit 16, else 32.
  const int64_t phase_threads = vector >= 4 ? 8 : vector == 2 ? 16 : kWarp;

  std::unordered_map<const VarNode*, int64_t> env;
  std::set<int64_t> sectors, elements;
  // Per phase, per bank: the distinct words.
  std::map<int64_t, std::map<int64_t, std::set<int64_t>>> banks;
  for (int64_t t = 0; t < lanes; ++t) {
    const int64_t tid[3] = {t % warp.thread_extents[0], (t / warp.thread_extents[0]) % warp.thread_extents[1],
                            t / (warp.thread_extents[0] * warp.thread_extents[1])};
    for (int a = 0; a < 3; ++a) {
      if (warp.thread_vars[a] != nullptr) env[warp.thread_vars[a]] = tid[a];
    }
    for (int64_t v = 0; v < vector; ++v) {
      if (warp.vector_var != nullptr) env[warp.vector_var] = v;
      int64_t offset = 0;
      for (size_t d = 0; d < indices.size(); ++d) {
        auto value = Eval(indices[d], env);
        if (!value) return out;
        offset += *value * strides[d];
      }
      elements.insert(offset);
      sectors.insert(FloorDiv(offset * kBytesPerElement, kSectorBytes));
      const int64_t bank = ((offset % kBanks) + kBanks) % kBanks;
      banks[t / phase_threads][bank].insert(offset);
    }
  }
  out.known = true;
  out.sectors = static_cast<double>(sectors.size());
  out.min_sectors =
      static_cast<double>((static_cast<int64_t>(elements.size()) * kBytesPerElement + kSectorBytes - 1) / kSectorBytes);
  for (const auto& [phase, by_bank] : banks) {
    size_t most = 0;
    for (const auto& [bank, words] : by_bank) most = std::max(most, words.size());
    out.wavefronts += static_cast<double>(most);
    out.min_wavefronts += 1;
  }
  return out;
}

}  // namespace tune::costmodel
