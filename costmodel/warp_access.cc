// Warp-level memory access analysis: coalescing into 32-byte sectors, shared-memory banks.
#include "costmodel/warp_access.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

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

// Floor division and modulo (b != 0). Index divisors are mostly powers of two: a shift and a
// mask there (an arithmetic shift floors), a division elsewhere.
bool PowerOfTwo(int64_t b) { return b > 0 && (b & (b - 1)) == 0; }  // no popcount call without -mpopcnt
int64_t FloorDiv(int64_t a, int64_t b) {
  if (PowerOfTwo(b)) return a >> std::countr_zero(static_cast<uint64_t>(b));
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}
int64_t FloorMod(int64_t a, int64_t b) {
  if (PowerOfTwo(b)) return a & (b - 1);
  return a - FloorDiv(a, b) * b;
}

/// The lane variables: a warp's threadIdx.x/y/z and the vector lane (null: unused).
using LaneVars = std::array<const VarNode*, 4>;

/// An index expression folded for one warp: subtrees without lane variables become constants
/// (evaluated once, every other variable 0), the rest a small program over the lane variables
/// that RunLanes evaluates for all lanes at once.
class LaneProgram {
 public:
  /// Adds `e`; its node, or -1 when a part it must evaluate reads memory or divides by 0.
  int Compile(const Expr& e, const LaneVars& lanes) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return Constant(static_cast<const codegen::IntImmNode*>(e.get())->value);
      case ExprKind::kVar:
        for (int k = 0; k < 4; ++k) {
          if (lanes[k] == e.get()) return Push({ExprKind::kVar, 0, k, -1, -1, -1});
        }
        return Constant(0);
      case ExprKind::kFloatImm:
      case ExprKind::kLoad:
        return -1;
      case ExprKind::kSelect: {
        auto* n = static_cast<const SelectNode*>(e.get());
        const int c = Compile(n->cond, lanes);
        if (c < 0) return -1;
        if (IsConstant(c)) return Compile(ops_[c].value != 0 ? n->true_value : n->false_value, lanes);
        const int t = Compile(n->true_value, lanes), f = Compile(n->false_value, lanes);
        if (t < 0 || f < 0) return -1;
        return Push({ExprKind::kSelect, 0, -1, c, t, f});
      }
      default:
        break;
    }
    auto* n = static_cast<const BinaryNode*>(e.get());
    const int a = Compile(n->a, lanes), b = Compile(n->b, lanes);
    if (a < 0 || b < 0) return -1;
    if (IsConstant(a) && IsConstant(b)) {
      auto v = Apply(e->kind, ops_[a].value, ops_[b].value);
      return v ? Constant(*v) : -1;
    }
    return Push({e->kind, 0, -1, a, b, -1});
  }

  /// Evaluates every node for `lanes` lanes at once (`lane_values[k]` holds lane variable k of
  /// each lane), in the order Compile added them (operands first): `values` gets node i's value
  /// of lane l at i * lanes + l, `valid` whether it is defined (a division by 0 is not; a
  /// select takes the validity of the branch it picks, as evaluating only that branch would).
  void RunLanes(size_t lanes, const std::vector<int64_t> lane_values[4], std::vector<int64_t>* values,
                std::vector<char>* valid) const {
    values->assign(ops_.size() * lanes, 0);
    valid->assign(ops_.size() * lanes, 1);
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = ops_[i];
      int64_t* v = values->data() + i * lanes;
      char* ok = valid->data() + i * lanes;
      switch (op.kind) {
        case ExprKind::kIntImm:
          std::fill(v, v + lanes, op.value);
          break;
        case ExprKind::kVar:
          std::copy(lane_values[op.var].begin(), lane_values[op.var].begin() + static_cast<std::ptrdiff_t>(lanes), v);
          break;
        case ExprKind::kSelect: {
          const int64_t* c = values->data() + op.a * lanes;
          const char* c_ok = valid->data() + op.a * lanes;
          for (size_t l = 0; l < lanes; ++l) {
            const size_t pick = (c[l] != 0 ? op.b : op.c) * lanes + l;
            v[l] = (*values)[pick];
            ok[l] = c_ok[l] && (*valid)[pick];
          }
          break;
        }
        default: {
          const int64_t* a = values->data() + op.a * lanes;
          const int64_t* b = values->data() + op.b * lanes;
          const char* a_ok = valid->data() + op.a * lanes;
          const char* b_ok = valid->data() + op.b * lanes;
          for (size_t l = 0; l < lanes; ++l) ok[l] = a_ok[l] & b_ok[l];
          // One loop per operation, so the common ones vectorize.
          switch (op.kind) {
            case ExprKind::kAdd: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] + b[l]; break;
            case ExprKind::kSub: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] - b[l]; break;
            case ExprKind::kMul: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] * b[l]; break;
            case ExprKind::kMin: for (size_t l = 0; l < lanes; ++l) v[l] = std::min(a[l], b[l]); break;
            case ExprKind::kMax: for (size_t l = 0; l < lanes; ++l) v[l] = std::max(a[l], b[l]); break;
            case ExprKind::kLT: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] < b[l]; break;
            case ExprKind::kLE: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] <= b[l]; break;
            case ExprKind::kEQ: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] == b[l]; break;
            case ExprKind::kAnd: for (size_t l = 0; l < lanes; ++l) v[l] = a[l] != 0 && b[l] != 0; break;
            default:  // kDiv, kMod
              for (size_t l = 0; l < lanes; ++l) {
                auto r = Apply(op.kind, a[l], b[l]);
                v[l] = r.value_or(0);
                ok[l] &= r.has_value();
              }
              break;
          }
          break;
        }
      }
    }
  }

  void Clear() { ops_.clear(); }

 private:
  struct Op {
    ExprKind kind;
    int64_t value;  // kIntImm
    int var;        // kVar: index into the lane values
    int a, b, c;    // operands (kSelect: condition, true, false)
  };

  static std::optional<int64_t> Apply(ExprKind kind, int64_t a, int64_t b) {
    switch (kind) {
      case ExprKind::kAdd: return a + b;
      case ExprKind::kSub: return a - b;
      case ExprKind::kMul: return a * b;
      case ExprKind::kDiv: return b == 0 ? std::nullopt : std::optional<int64_t>(FloorDiv(a, b));
      case ExprKind::kMod: return b == 0 ? std::nullopt : std::optional<int64_t>(FloorMod(a, b));
      case ExprKind::kMin: return std::min(a, b);
      case ExprKind::kMax: return std::max(a, b);
      case ExprKind::kLT: return a < b ? 1 : 0;
      case ExprKind::kLE: return a <= b ? 1 : 0;
      case ExprKind::kEQ: return a == b ? 1 : 0;
      case ExprKind::kAnd: return (a != 0 && b != 0) ? 1 : 0;
      default: return std::nullopt;
    }
  }
  bool IsConstant(int i) const { return ops_[i].kind == ExprKind::kIntImm; }
  int Constant(int64_t v) { return Push({ExprKind::kIntImm, v, -1, -1, -1, -1}); }
  int Push(const Op& op) {
    ops_.push_back(op);
    return static_cast<int>(ops_.size()) - 1;
  }

  std::vector<Op> ops_;
};

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

  // Each index folded once (what does not depend on the lanes is a constant).
  const LaneVars lane_vars = {warp.thread_vars[0], warp.thread_vars[1], warp.thread_vars[2], warp.vector_var};
  // Buffers kept across calls (one set a thread): featurizing calls this for every access of
  // every candidate a search ranks, and allocating them anew each time cost a quarter of it.
  struct Scratch {
    LaneProgram program;
    std::vector<int> roots;
    std::vector<int64_t> lane_values[4], values, elements, sectors;
    std::vector<char> valid;
    std::vector<std::pair<int64_t, int64_t>> touched;
  };
  thread_local Scratch scratch;
  LaneProgram& program = scratch.program;
  std::vector<int>& roots = scratch.roots;
  program.Clear();
  roots.clear();
  for (const Expr& index : indices) {
    roots.push_back(program.Compile(index, lane_vars));
    if (roots.back() < 0) return out;
  }
  // Every lane of the warp (thread t, vector lane v at t * vector + v) evaluated at once.
  const size_t count = static_cast<size_t>(lanes * vector);
  std::vector<int64_t>* lane_values = scratch.lane_values;
  for (int k = 0; k < 4; ++k) lane_values[k].resize(count);
  for (int64_t t = 0; t < lanes; ++t) {
    for (int64_t v = 0; v < vector; ++v) {
      const size_t l = static_cast<size_t>(t * vector + v);
      lane_values[0][l] = t % warp.thread_extents[0];
      lane_values[1][l] = (t / warp.thread_extents[0]) % warp.thread_extents[1];
      lane_values[2][l] = t / (warp.thread_extents[0] * warp.thread_extents[1]);
      lane_values[3][l] = v;
    }
  }
  std::vector<int64_t>& values = scratch.values;
  std::vector<char>& valid = scratch.valid;
  program.RunLanes(count, lane_values, &values, &valid);
  // (phase, offset) of every element the warp touches.
  std::vector<std::pair<int64_t, int64_t>>& touched = scratch.touched;
  touched.resize(count);
  for (size_t l = 0; l < count; ++l) {
    int64_t offset = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      const size_t at = static_cast<size_t>(roots[d]) * count + l;
      if (!valid[at]) return out;
      offset += values[at] * strides[d];
    }
    touched[l] = {static_cast<int64_t>(l) / vector / phase_threads, offset};
  }
  out.known = true;
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<int64_t>& elements = scratch.elements;
  std::vector<int64_t>& sectors = scratch.sectors;
  elements.clear();
  sectors.clear();
  for (const auto& [phase, offset] : touched) elements.push_back(offset);
  std::sort(elements.begin(), elements.end());
  elements.erase(std::unique(elements.begin(), elements.end()), elements.end());
  // Sorted elements give sorted sectors (the floor is monotone): equal ones are neighbours.
  for (int64_t offset : elements) {
    const int64_t sector = FloorDiv(offset * kBytesPerElement, kSectorBytes);
    if (sectors.empty() || sectors.back() != sector) sectors.push_back(sector);
  }
  out.sectors = static_cast<double>(sectors.size());
  out.min_sectors =
      static_cast<double>((static_cast<int64_t>(elements.size()) * kBytesPerElement + kSectorBytes - 1) / kSectorBytes);
  // Per phase (touched is sorted by phase, its offsets distinct): the most words in one bank.
  for (size_t i = 0; i < touched.size();) {
    size_t j = i;
    int per_bank[kBanks] = {};
    int most = 0;
    for (; j < touched.size() && touched[j].first == touched[i].first; ++j) {
      most = std::max(most, ++per_bank[((touched[j].second % kBanks) + kBanks) % kBanks]);
    }
    out.wavefronts += most;
    out.min_wavefronts += 1;
    i = j;
  }
  return out;
}

void WarpTransactions::Add(const WarpShape& warp, const codegen::BufferNode& buffer,
                           const std::vector<Expr>& indices, bool write, double weight) {
  const bool global = buffer.scope == codegen::BufferScope::kArg, shared = buffer.scope == codegen::BufferScope::kShared;
  if (!global && !shared) return;
  const WarpAccess a = AnalyzeWarpAccess(buffer.shape, indices, warp);
  if (!a.known) return;
  double* sum = shared ? shared_ : write ? store_ : load_;
  sum[0] += weight * (shared ? a.min_wavefronts : a.min_sectors);
  sum[1] += weight * (shared ? a.wavefronts : a.sectors);
}

std::array<float, 3> WarpTransactions::Fields() const {
  std::array<float, 3> out = {0, 0, 0};
  if (load_[1] > 0) out[0] = static_cast<float>(load_[0] / load_[1]);
  if (store_[1] > 0) out[1] = static_cast<float>(store_[0] / store_[1]);
  if (shared_[0] > 0) out[2] = static_cast<float>(std::log2(shared_[1] / shared_[0]));
  return out;
}

}  // namespace tune::costmodel
