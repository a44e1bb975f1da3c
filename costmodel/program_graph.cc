// ExtractProgramGraph: one walk over the loop AST giving loop, statement and buffer nodes with typed edges.
#include "costmodel/program_graph.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/check.h"
#include "codegen/ir/ir_analysis.h"
#include "costmodel/features.h"
#include "costmodel/warp_access.h"

namespace tune::costmodel {

// Node feature layout (kNodeFeatures floats per node; fields of another node kind are 0).
// Conventions: "log" fields hold log2(1 + x) of a non-negative quantity x (0 means x = 0),
// flags are 0 or 1, elements are fp32 (4 bytes). A statement is a Store, or an AsyncCopy
// (a global -> shared copy: no flops, it reads its source and writes its destination).
//
//  --- every node ---
//   0 is_loop            1 if the node is a For loop [flag]
//   1 is_statement       1 if the node is a statement [flag]
//   2 is_buffer          1 if the node is a buffer [flag]
//   3 depth              loops enclosing the node (a loop does not count itself); 0 for buffers [loops]
//   4 log_execs          log2(1 + executions): for a loop, iterations it runs in the whole kernel
//                        (its extent times the product of the enclosing extents); for a
//                        statement, how often it runs; for a buffer, loads and stores of it by the
//                        kept statements [executions / accesses]
//  --- loops ---
//   5 log_extent         log2(1 + trip count) [iterations]
//   6 vectorized         ForKind::kVectorized [flag]
//   7 unrolled           ForKind::kUnrolled [flag]
//   8 parallel           ForKind::kParallel (thread pool) [flag]
//   9 gpu_block          bound to blockIdx.{x,y,z} [flag]
//  10 gpu_thread         bound to threadIdx.{x,y,z} [flag]
//  11 reduction          some statement inside accumulates into an element that does not depend
//                        on the loop variable, and the loop is inside the allocation of that
//                        statement's destination [flag]
//  12 log_outer_extent   log2(1 + product of the enclosing loops' extents) [iterations]
//  13 log_flops_per_iter log2(1 + float ops of one iteration of the loop body) [flops]
//  14 log_stores_per_iter log2(1 + statement executions of one iteration of the body) [executions]
//  15 innermost          the loop contains no other loop [flag]
//  --- statements ---
//  16 flops              float ops per execution [flops] (raw)
//  17 loads              loads per execution [count] (raw)
//  18 accumulates        the value loads the destination buffer (a reduction update) [flag]
//  19 log_flops          log2(1 + flops of all executions) [flops]
//  20 in_parallel        some enclosing loop is parallel [flag]
//  21 vector_innermost   the innermost enclosing loop is vectorized [flag]
//  22 log_intensity      log2(1 + all flops / unique non-local bytes touched by the whole nest)
//                        [flops per byte]
//  23 log_vector_lanes   log2(1 + extent of the innermost enclosing vectorized loop, 0 if none) [lanes]
//  24.. three access slots of kAccessFields floats each: slot 0 is the destination, slots 1 and 2
//       the two loaded buffers (other than the destination) with the largest whole-nest
//       footprint, largest first; an empty slot is all 0. Per slot, at offset:
//       +0 present            the slot describes a buffer [flag]
//       +1 scope_local        kLocal (register) tile [flag]
//       +2 scope_shared       GPU shared memory [flag]
//       +3 scope_heap         kernel-allocated heap scratch [flag]
//       +4 accesses           loads (or 1 store) of the buffer per execution [count] (raw)
//       +5 log_stride_inner   log2(1 + |address step| per iteration of the innermost enclosing
//                             loop) [elements]; 0 when invariant there
//       +6 log_bytes_l0       log2(1 + unique bytes touched by the innermost loop) [bytes]
//       +7 log_bytes_l1       log2(1 + unique bytes touched by the innermost 3 loops) [bytes]
//       +8 log_bytes_all      log2(1 + unique bytes touched by the whole nest) [bytes]
//       +9 reuse_depth        consecutive innermost loops the index does not depend on [loops]
//       +10 log_reuse         log2(1 + executions / unique elements of the whole nest) [uses per element]
//  --- buffers ---
//  57 scope_arg          a kernel argument [flag]
//  58 scope_heap         heap scratch (packing, padding) [flag]
//  59 scope_local        register tile [flag]
//  60 scope_shared       GPU shared memory [flag]
//  61 log_bytes          log2(1 + size) [bytes]
//  62 dims               number of dimensions [count] (raw)
//  63 log_readers        log2(1 + statements (kept nodes) that load it) [count]
//  --- loops bound to blockIdx.{x,y,z}: the kernel's launch on the GPU (EstimateGpuLaunch,
//      against the H100 of features.h; 0 on every other node) ---
//  64 log_thread_local_floats  log2(1 + kLocal elements per thread) [floats]
//  65 resident_blocks    blocks resident per SM [blocks] (raw)
//  66 occupancy          resident warps per SM / 64 [0..1]
//  67 log_waves          log2(1 + blocks / (SMs x resident blocks)) [waves]
//  68 wave_fill          blocks / (ceil(waves) x SMs x resident blocks) [0..1]
//  69 log_sm_flops       log2(1 + flops of the busiest SM's ceil(blocks / SMs) blocks) [flops]
//  70 log_sm_global_bytes  log2(1 + their argument-buffer accesses x 4) [bytes]
//  71 log_thread_serial_stores  log2(1 + store executions of one thread x ceil(waves)) [stores]
//  72 log_serial_barriers  log2(1 + barriers one thread passes x ceil(waves)) [barriers]
//  73 log_thread_serial_global  log2(1 + argument accesses of one thread x ceil(waves)) [accesses]
//  74 log_sm_roofline_ns  log2(1 + the busiest SM's roofline time, features.h) [ns]
//  --- statements inside GPU thread loops: the first warp's memory transactions (warp_access.h;
//      0 elsewhere and where no access is computable) ---
//  75 global_load_efficiency   fewest 32-byte sectors holding the elements the warp loads from
//                              global memory / sectors it touches [0..1]
//  76 global_store_efficiency  the same for its store to global memory [0..1]
//  77 log_shared_conflict      log2(shared-memory wavefronts / conflict-free wavefronts) of its
//                              shared loads and store [log2 ways]
//
// Unique elements of an access: per index dimension, affine coefficients of the nest's loop
// variables give a span (1 + sum |coeff| (extent - 1)), capped by the product of the extents
// it uses and the dimension's size; non-affine dimensions count the product of the extents
// they mention. The product over dimensions is capped by the extents the index depends on.

namespace {

using codegen::AllocateNode;
using codegen::BinaryNode;
using codegen::BufferNode;
using codegen::BufferScope;
using codegen::DType;
using codegen::Expr;
using codegen::ExprKind;
using codegen::ForKind;
using codegen::ForNode;
using codegen::LoadNode;
using codegen::SelectNode;
using codegen::SeqNode;
using codegen::Stmt;
using codegen::StmtKind;
using codegen::StoreNode;
using codegen::VarNode;

constexpr int kAccessSlots = 3;
constexpr int kAccessFields = 11;
constexpr int kFirstAccess = 24;
constexpr int kFirstBuffer = kFirstAccess + kAccessSlots * kAccessFields;  // 57
constexpr int kFirstLaunch = kFirstBuffer + 7;  // 64
constexpr int kFirstWarp = kFirstLaunch + 11;    // 75
static_assert(kFirstWarp + 3 == kNodeFeatures, "node feature layout and kNodeFeatures disagree");

constexpr double kBytes = 4.0;

float Lg(double x) { return x > 0 && std::isfinite(x) ? static_cast<float>(std::log2(1.0 + x)) : 0.0f; }

int CountGraphFlops(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
    case ExprKind::kLoad:
      return 0;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return (n->dtype == DType::kFloat32 ? 1 : 0) + CountGraphFlops(n->true_value) + CountGraphFlops(n->false_value);
    }
    default: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      return (n->dtype == DType::kFloat32 ? 1 : 0) + CountGraphFlops(n->a) + CountGraphFlops(n->b);
    }
  }
}

struct NestLoop {
  const VarNode* var;
  int64_t extent;
  ForKind kind;
  int node;  // its node id, -1 when beyond kMaxGraphNodes
};

/// One access's index over the nest: per dimension, loop coefficients when affine.
struct GraphAccess {
  const BufferNode* buffer = nullptr;
  const std::vector<Expr>* indices = nullptr;
  int count = 0;
  bool write = false;
  std::vector<std::vector<int64_t>> coeff;  // [dim][loop]
  std::vector<std::vector<char>> used;      // [dim][loop]
  std::vector<char> affine;                 // [dim]
  double whole = 0;                         // unique elements of the whole nest

  void Analyze(const std::vector<NestLoop>& nest) {
    const size_t dims = indices->size();
    coeff.assign(dims, std::vector<int64_t>(nest.size(), 0));
    used.assign(dims, std::vector<char>(nest.size(), 0));
    affine.assign(dims, 1);
    for (size_t d = 0; d < dims; ++d) {
      for (size_t i = 0; i < nest.size(); ++i) {
        const Expr& e = (*indices)[d];
        if (!codegen::UsesVar(e, nest[i].var)) continue;
        used[d][i] = 1;
        int64_t c = 0;
        if (codegen::LinearCoefficient(e, nest[i].var, &c)) {
          coeff[d][i] = c;
          if (c == 0) used[d][i] = 0;
        } else {
          affine[d] = 0;
        }
      }
    }
    whole = Footprint(nest, 0);
  }
  bool Depends(size_t i) const {
    for (const auto& u : used)
      if (u[i]) return true;
    return false;
  }
  double FlatStride(size_t i) const {
    double stride = 0, row = 1;
    for (size_t d = used.size(); d-- > 0;) {
      if (affine[d]) {
        stride += static_cast<double>(coeff[d][i]) * row;
      } else if (used[d][i]) {
        stride += row;
      }
      row *= static_cast<double>(buffer->shape[d]);
    }
    return std::fabs(stride);
  }
  /// Unique elements touched by the loops nest[first..].
  double Footprint(const std::vector<NestLoop>& nest, size_t first) const {
    double product = 1, all = 1;
    for (size_t d = 0; d < used.size(); ++d) {
      double span = 1, count = 1;
      for (size_t i = first; i < nest.size(); ++i) {
        if (!used[d][i]) continue;
        const double e = static_cast<double>(nest[i].extent);
        count *= e;
        span += std::fabs(static_cast<double>(coeff[d][i])) * (e - 1);
      }
      const double shape = static_cast<double>(buffer->shape[d]);
      product *= affine[d] ? std::min({span, count, shape}) : std::min(count, shape);
    }
    for (size_t i = first; i < nest.size(); ++i)
      if (Depends(i)) all *= static_cast<double>(nest[i].extent);
    return std::min(product, all);
  }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(const codegen::LoweredFunc& func) {
    for (const auto& b : func.args) BufferIndex(b.get());
  }

  void Walk(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* n = static_cast<const ForNode*>(s.get());
        const int id = NewNode(NodeKind::kLoop);
        stack_.push_back(NestLoop{codegen::AsVar(n->var), n->extent, n->for_kind, id});
        const double outer = execs_;
        execs_ *= static_cast<double>(n->extent);
        if (id >= 0) {
          float* f = Row(id);
          f[3] = static_cast<float>(stack_.size() - 1);
          f[4] = Lg(execs_);
          f[5] = Lg(static_cast<double>(n->extent));
          f[6] = n->for_kind == ForKind::kVectorized;
          f[7] = n->for_kind == ForKind::kUnrolled;
          f[8] = n->for_kind == ForKind::kParallel;
          f[9] = codegen::IsGpuBlockBinding(n->for_kind);
          if (codegen::IsGpuBlockBinding(n->for_kind)) block_loops_.push_back(id);
          f[10] = codegen::IsGpuBinding(n->for_kind) && !codegen::IsGpuBlockBinding(n->for_kind);
          f[12] = Lg(outer);
          loop_acc_.resize(static_cast<size_t>(id) + 1);
          loop_acc_[id] = LoopAcc{};
          loop_acc_[id].iterations = execs_;
        }
        parents_.push_back(id);
        last_child_.push_back(-1);
        Walk(n->body);
        parents_.pop_back();
        last_child_.pop_back();
        execs_ = outer;
        stack_.pop_back();
        if (id >= 0) {
          float* f = Row(id);
          const LoopAcc& a = loop_acc_[id];
          f[13] = Lg(a.flops / a.iterations);
          f[14] = Lg(a.stores / a.iterations);
          f[15] = a.has_loop ? 0.0f : 1.0f;
          if (a.reduction) f[11] = 1;
        }
        return;
      }
      case StmtKind::kStore: {
        auto* n = static_cast<const StoreNode*>(s.get());
        Statement(n->buffer.get(), &n->indices, n->value, nullptr, nullptr);
        return;
      }
      case StmtKind::kAsyncCopy: {
        auto* n = static_cast<const codegen::AsyncCopyNode*>(s.get());
        Statement(n->dst.get(), &n->dst_indices, Expr(), n->src.get(), &n->src_indices);
        return;
      }
      case StmtKind::kSeq:
        for (const auto& t : static_cast<const SeqNode*>(s.get())->stmts) Walk(t);
        return;
      case StmtKind::kAtomicAdd:
        Walk(static_cast<const codegen::AtomicAddNode*>(s.get())->body);
        return;
      case StmtKind::kIf:
        Walk(static_cast<const codegen::IfNode*>(s.get())->then_case);
        return;
      case StmtKind::kAllocate: {
        auto* n = static_cast<const AllocateNode*>(s.get());
        BufferIndex(n->buffer.get());
        allocs_.emplace_back(n->buffer.get(), stack_.size());
        Walk(n->body);
        allocs_.pop_back();
        return;
      }
      case StmtKind::kSync:
      case StmtKind::kFence:
      case StmtKind::kAsyncCommit:
      case StmtKind::kAsyncWait:
        return;
    }
  }

  /// Writes the launch estimate of the same kernel onto the blockIdx loops.
  void SetLaunch(const GpuLaunch& launch) {
    for (int id : block_loops_) {
      float* f = Row(id);
      f[kFirstLaunch + 0] = Lg(launch.local_floats);
      f[kFirstLaunch + 1] = static_cast<float>(launch.resident_blocks);
      f[kFirstLaunch + 2] = static_cast<float>(launch.occupancy);
      f[kFirstLaunch + 3] = Lg(launch.waves);
      f[kFirstLaunch + 4] = static_cast<float>(launch.wave_fill);
      f[kFirstLaunch + 5] = Lg(launch.sm_flops);
      f[kFirstLaunch + 6] = Lg(launch.sm_global_bytes);
      f[kFirstLaunch + 7] = Lg(launch.thread_serial_stores);
      f[kFirstLaunch + 8] = Lg(launch.serial_barriers);
      f[kFirstLaunch + 9] = Lg(launch.thread_serial_global);
      f[kFirstLaunch + 10] = Lg(launch.sm_roofline_ns);
    }
  }
  bool HasBlockLoops() const { return !block_loops_.empty(); }

  ProgramGraph Finish() {
    ProgramGraph g;
    const int code_nodes = static_cast<int>(kinds_.size());
    if (code_nodes == 0) {  // no loop and no store: one all-zero statement node
      kinds_.push_back(NodeKind::kStatement);
      features_.assign(kNodeFeatures, 0.0f);
      g.num_nodes = 1;
      g.kinds = kinds_;
      g.features = features_;
      g.sequence = {0};
      return g;
    }
    for (int i = 0; i < code_nodes; ++i) g.sequence.push_back(i);
    const int offset = code_nodes;
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const BufferNode* buf = buffers_[b];
      kinds_.push_back(NodeKind::kBuffer);
      features_.resize(features_.size() + kNodeFeatures, 0.0f);
      float* f = &features_[features_.size() - kNodeFeatures];
      f[2] = 1;
      f[4] = Lg(buffer_accesses_[b]);
      f[kFirstBuffer + 0] = buf->scope == BufferScope::kArg;
      f[kFirstBuffer + 1] = buf->scope == BufferScope::kHeap;
      f[kFirstBuffer + 2] = buf->scope == BufferScope::kLocal;
      f[kFirstBuffer + 3] = buf->scope == BufferScope::kShared;
      f[kFirstBuffer + 4] = Lg(static_cast<double>(buf->NumElements()) * kBytes);
      f[kFirstBuffer + 5] = static_cast<float>(buf->shape.size());
      f[kFirstBuffer + 6] = Lg(buffer_readers_[b]);
    }
    for (auto& e : edges_) {
      if (e.kind == EdgeKind::kReads) e.src += offset;
      if (e.kind == EdgeKind::kWrites) e.dst += offset;
      g.edge_src.push_back(e.src);
      g.edge_dst.push_back(e.dst);
      g.edge_kinds.push_back(e.kind);
    }
    g.num_nodes = static_cast<int>(kinds_.size());
    g.kinds = std::move(kinds_);
    for (float& v : features_)
      if (!std::isfinite(v)) v = 0.0f;
    g.features = std::move(features_);
    return g;
  }

 private:
  struct LoopAcc {
    double iterations = 1, flops = 0, stores = 0;
    bool has_loop = false, reduction = false;
  };
  struct PendingEdge {
    int32_t src, dst;
    EdgeKind kind;
  };

  int BufferIndex(const BufferNode* b) {
    auto it = buffer_ids_.find(b);
    if (it != buffer_ids_.end()) return it->second;
    const int id = static_cast<int>(buffers_.size());
    buffer_ids_.emplace(b, id);
    buffers_.push_back(b);
    buffer_accesses_.push_back(0);
    buffer_readers_.push_back(0);
    return id;
  }

  float* Row(int id) { return &features_[static_cast<size_t>(id) * kNodeFeatures]; }

  /// A new loop or statement node under the current parent, or -1 beyond kMaxGraphNodes.
  int NewNode(NodeKind kind) {
    if (static_cast<int>(kinds_.size()) >= kMaxGraphNodes) return -1;
    const int id = static_cast<int>(kinds_.size());
    kinds_.push_back(kind);
    features_.resize(features_.size() + kNodeFeatures, 0.0f);
    Row(id)[static_cast<int>(kind)] = 1;
    const int parent = parents_.empty() ? -1 : parents_.back();
    if (parent >= 0) edges_.push_back({parent, id, EdgeKind::kNests});
    int& last = last_child_.empty() ? root_last_ : last_child_.back();
    if (last >= 0) edges_.push_back({last, id, EdgeKind::kNext});
    last = id;
    for (const NestLoop& l : stack_)
      if (l.node >= 0 && kind == NodeKind::kLoop) loop_acc_[l.node].has_loop = true;
    return id;
  }

  /// Fields 69-71 of a statement with `accesses` (the destination first), inside GPU thread
  /// loops; left 0 elsewhere.
  void WarpFields(const std::vector<GraphAccess>& accesses, float* out) const {
    const std::optional<WarpShape> warp = WarpShapeOf(stack_);
    if (!warp) return;
    WarpTransactions sums;
    for (const GraphAccess& a : accesses) sums.Add(*warp, *a.buffer, *a.indices, a.write, 1.0);
    const std::array<float, 3> fields = sums.Fields();
    std::copy(fields.begin(), fields.end(), out);
  }

  void Statement(const BufferNode* dst, const std::vector<Expr>* dst_indices, const Expr& value,
                 const BufferNode* src, const std::vector<Expr>* src_indices) {
    const int flops = value.defined() ? CountGraphFlops(value) : 0;
    // Loops' work accumulates even past the node limit (their iteration counts stay right).
    for (const NestLoop& l : stack_) {
      if (l.node < 0) continue;
      loop_acc_[l.node].flops += execs_ * flops;
      loop_acc_[l.node].stores += execs_;
    }
    const int id = NewNode(NodeKind::kStatement);
    if (id < 0) return;

    std::vector<GraphAccess> accesses(1);
    accesses[0].buffer = dst;
    accesses[0].indices = dst_indices;
    accesses[0].count = 1;
    accesses[0].write = true;
    int loads = 0;
    auto add_load = [&](const BufferNode* b, const std::vector<Expr>* idx) {
      ++loads;
      for (auto& a : accesses) {
        if (a.buffer == b) {
          if (!a.write) ++a.count;
          return;
        }
      }
      GraphAccess a;
      a.buffer = b;
      a.indices = idx;
      a.count = 1;
      accesses.push_back(std::move(a));
    };
    bool accumulates = false;
    if (value.defined()) {
      for (const LoadNode* l : codegen::CollectLoads(value)) {
        if (l->buffer.get() == dst) accumulates = true;
        add_load(l->buffer.get(), &l->indices);
      }
    }
    if (src != nullptr) add_load(src, src_indices);
    for (auto& a : accesses) a.Analyze(stack_);

    // Reduction loops: inside the destination's allocation, not indexing the destination.
    size_t alloc_depth = 0;
    for (const auto& [b, depth] : allocs_)
      if (b == dst) alloc_depth = depth;
    if (accumulates) {
      for (size_t i = alloc_depth; i < stack_.size(); ++i) {
        if (stack_[i].node >= 0 && !accesses[0].Depends(i)) loop_acc_[stack_[i].node].reduction = true;
      }
    }

    float* f = Row(id);
    const size_t depth = stack_.size();
    f[3] = static_cast<float>(depth);
    f[4] = Lg(execs_);
    f[16] = static_cast<float>(flops);
    f[17] = static_cast<float>(loads);
    f[18] = accumulates;
    f[19] = Lg(execs_ * flops);
    double lanes = 0;
    for (size_t i = depth; i-- > 0;) {
      if (stack_[i].kind == ForKind::kParallel) f[20] = 1;
      if (stack_[i].kind == ForKind::kVectorized && lanes == 0) lanes = static_cast<double>(stack_[i].extent);
    }
    f[21] = depth > 0 && stack_.back().kind == ForKind::kVectorized;
    f[23] = Lg(lanes);

    WarpFields(accesses, f + kFirstWarp);

    double unique_bytes = 0;
    for (const auto& a : accesses)
      if (a.buffer->scope != BufferScope::kLocal) unique_bytes += a.whole * kBytes;
    f[22] = Lg(execs_ * flops / std::max(unique_bytes, 1.0));

    std::vector<size_t> order;
    for (size_t i = 1; i < accesses.size(); ++i) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return accesses[a].whole > accesses[b].whole; });
    order.insert(order.begin(), 0);
    for (size_t slot = 0; slot < order.size() && slot < static_cast<size_t>(kAccessSlots); ++slot) {
      const GraphAccess& a = accesses[order[slot]];
      float* s = f + kFirstAccess + slot * kAccessFields;
      s[0] = 1;
      s[1] = a.buffer->scope == BufferScope::kLocal;
      s[2] = a.buffer->scope == BufferScope::kShared;
      s[3] = a.buffer->scope == BufferScope::kHeap;
      s[4] = static_cast<float>(a.count);
      if (depth > 0) {
        s[5] = Lg(a.FlatStride(depth - 1));
        s[6] = Lg(a.Footprint(stack_, depth - 1) * kBytes);
        s[7] = Lg(a.Footprint(stack_, depth >= 3 ? depth - 3 : 0) * kBytes);
      } else {
        s[6] = s[7] = Lg(kBytes);
      }
      s[8] = Lg(a.whole * kBytes);
      int reuse_depth = 0;
      for (size_t i = depth; i-- > 0 && !a.Depends(i);) ++reuse_depth;
      s[9] = static_cast<float>(reuse_depth);
      s[10] = a.whole > 0 ? Lg(execs_ / a.whole) : 0.0f;
    }

    // Buffer edges: one per distinct buffer read, one for the write.
    for (size_t i = 0; i < accesses.size(); ++i) {
      const GraphAccess& a = accesses[i];
      const int b = BufferIndex(a.buffer);
      buffer_accesses_[b] += execs_ * a.count;
      if (a.write) {
        edges_.push_back({id, b, EdgeKind::kWrites});
        if (accumulates) {
          edges_.push_back({b, id, EdgeKind::kReads});
          ++buffer_readers_[b];
        }
      } else {
        edges_.push_back({b, id, EdgeKind::kReads});
        ++buffer_readers_[b];
      }
    }
  }

  std::vector<NodeKind> kinds_;
  std::vector<float> features_;
  std::vector<PendingEdge> edges_;  // kReads: src is a buffer index; kWrites: dst is one
  std::vector<LoopAcc> loop_acc_;
  std::vector<NestLoop> stack_;
  std::vector<int> parents_, last_child_;
  std::vector<int> block_loops_;  // kept loop nodes bound to blockIdx
  int root_last_ = -1;
  std::vector<std::pair<const BufferNode*, size_t>> allocs_;
  std::unordered_map<const BufferNode*, int> buffer_ids_;
  std::vector<const BufferNode*> buffers_;
  std::vector<double> buffer_accesses_, buffer_readers_;
  double execs_ = 1;
};

std::vector<std::string> BuildNodeFeatureNames() {
  std::vector<std::string> names = {
      "is_loop", "is_statement", "is_buffer", "depth", "log_execs",
      "loop.log_extent", "loop.vectorized", "loop.unrolled", "loop.parallel", "loop.gpu_block",
      "loop.gpu_thread", "loop.reduction", "loop.log_outer_extent", "loop.log_flops_per_iter",
      "loop.log_stores_per_iter", "loop.innermost",
      "stmt.flops", "stmt.loads", "stmt.accumulates", "stmt.log_flops", "stmt.in_parallel",
      "stmt.vector_innermost", "stmt.log_intensity", "stmt.log_vector_lanes"};
  for (int s = 0; s < kAccessSlots; ++s) {
    const std::string p = "stmt.access" + std::to_string(s) + ".";
    for (const char* n : {"present", "scope_local", "scope_shared", "scope_heap", "accesses", "log_stride_inner",
                          "log_bytes_l0", "log_bytes_l1", "log_bytes_all", "reuse_depth", "log_reuse"}) {
      names.push_back(p + n);
    }
  }
  for (const char* n : {"buffer.scope_arg", "buffer.scope_heap", "buffer.scope_local", "buffer.scope_shared",
                        "buffer.log_bytes", "buffer.dims", "buffer.log_readers", "launch.log_thread_local_floats",
                        "launch.resident_blocks", "launch.occupancy", "launch.log_waves", "launch.wave_fill",
                        "launch.log_sm_flops", "launch.log_sm_global_bytes", "launch.log_thread_serial_stores",
                        "launch.log_serial_barriers", "launch.log_thread_serial_global", "launch.log_sm_roofline_ns",
                        "stmt.global_load_efficiency", "stmt.global_store_efficiency", "stmt.log_shared_conflict"}) {
    names.push_back(n);
  }
  TUNE_CHECK(static_cast<int>(names.size()) == kNodeFeatures) << names.size() << " names for " << kNodeFeatures;
  return names;
}

}  // namespace

ProgramGraph ExtractProgramGraph(const codegen::LoweredFunc& func) {
  GraphBuilder builder(func);
  if (func.body) builder.Walk(func.body);
  if (builder.HasBlockLoops()) builder.SetLaunch(EstimateGpuLaunch(func));
  return builder.Finish();
}

const std::vector<std::string>& NodeFeatureNames() {
  static const std::vector<std::string> names = BuildNodeFeatureNames();
  return names;
}

}  // namespace tune::costmodel
