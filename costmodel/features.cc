// Feature extraction: one walk over the loop AST, then a footprint analysis of the main statement.
#include "costmodel/features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "base/check.h"
#include "codegen/ir/ir_analysis.h"
#include "costmodel/warp_access.h"

namespace tune::costmodel {
namespace {

using codegen::AllocateNode;
using codegen::BinaryNode;
using codegen::Buffer;
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

static_assert(std::is_standard_layout_v<AstFeatures> && std::is_trivially_copyable_v<AstFeatures>);
static_assert(sizeof(AstFeatures) % sizeof(float) == 0);

constexpr double kBytesPerElement = 4.0;  // fp32
constexpr double kLineBytes = 64.0;

float Log2p(double x) { return x > 0 ? static_cast<float>(std::log2(1.0 + x)) : 0.0f; }

struct Loop {
  const VarNode* var;
  int64_t extent;
  ForKind kind;
};

/// Float arithmetic nodes in `e` (loads count 0; integer index arithmetic is not counted).
int CountFlops(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
    case ExprKind::kLoad:
      return 0;
    case ExprKind::kSelect: {
      auto* n = static_cast<const SelectNode*>(e.get());
      return (n->dtype == DType::kFloat32 ? 1 : 0) + CountFlops(n->true_value) + CountFlops(n->false_value);
    }
    default: {
      auto* n = static_cast<const BinaryNode*>(e.get());
      int own = n->dtype == DType::kFloat32 ? 1 : 0;
      return own + CountFlops(n->a) + CountFlops(n->b);
    }
  }
}

/// One pass over the kernel: aggregate counts and the main statement with its nest.
class Walker {
 public:
  void Walk(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* n = static_cast<const ForNode*>(s.get());
        ++num_loops;
        if (n->for_kind == ForKind::kVectorized) ++num_vectorized;
        if (n->for_kind == ForKind::kUnrolled) ++num_unrolled;
        if (n->for_kind == ForKind::kParallel) ++num_parallel;
        if (codegen::IsGpuBinding(n->for_kind)) {
          gpu = true;
          double& dim = (codegen::IsGpuBlockBinding(n->for_kind) ? block_dims
                                                                 : thread_dims)[codegen::GpuBindingAxis(n->for_kind)];
          dim = static_cast<double>(n->extent);  // a binding repeated in peeled code has one extent
        }
        stack_.push_back(Loop{codegen::AsVar(n->var), n->extent, n->for_kind});
        max_depth = std::max(max_depth, static_cast<int>(stack_.size()));
        double saved = execs_;
        execs_ *= static_cast<double>(n->extent);
        if (n->for_kind == ForKind::kParallel) ++parallel_nesting_;
        Walk(n->body);
        if (n->for_kind == ForKind::kParallel) --parallel_nesting_;
        execs_ = saved;
        stack_.pop_back();
        return;
      }
      case StmtKind::kStore: {
        auto* n = static_cast<const StoreNode*>(s.get());
        if (arrival_ != nullptr) NoteLastArrivalFlag(*n);
        const std::vector<const LoadNode*> loads = codegen::CollectLoads(n->value);
        if (const std::optional<WarpShape> warp = WarpShapeOf(stack_)) {
          warp_transactions.Add(*warp, *n->buffer, n->indices, /*write=*/true, execs_);
          for (const LoadNode* load : loads) {
            warp_transactions.Add(*warp, *load->buffer, load->indices, /*write=*/false, execs_);
          }
        }
        const double lanes = InnermostVectorLanes();
        if (lanes > 0 && n->buffer->scope == BufferScope::kShared) shared_copy_lanes = std::max(shared_copy_lanes, lanes);
        if (n->buffer->scope == BufferScope::kArg) arg_elements += execs_;
        for (const LoadNode* load : loads) {
          if (load->buffer->scope != BufferScope::kArg) continue;
          arg_elements += execs_;
          if (lanes > 0) arg_load_lanes = std::max(arg_load_lanes, lanes);
        }
        int flops = CountFlops(n->value);
        total_flops += execs_ * flops;
        store_execs += execs_;
        if (parallel_nesting_ > 0) parallel_execs += execs_;
        if (main == nullptr || execs_ > main_execs || (execs_ == main_execs && flops > main_flops)) {
          main = n;
          main_execs = execs_;
          main_flops = flops;
          main_nest = stack_;
          main_alloc_depth = 0;
          for (const auto& [buffer, depth] : allocs_) {
            if (buffer == n->buffer.get()) main_alloc_depth = depth;
          }
        }
        return;
      }
      case StmtKind::kSeq:
        for (auto& t : static_cast<const SeqNode*>(s.get())->stmts) Walk(t);
        return;
      case StmtKind::kSync:
        ++num_syncs;
        sync_execs += execs_;
        return;
      case StmtKind::kFence:
      case StmtKind::kAsyncCommit:
      case StmtKind::kAsyncWait:  // each precedes a barrier, which is counted
        return;
      case StmtKind::kAsyncCopy: {  // a global -> shared move: counted with the stores
        store_execs += execs_;
        auto* n = static_cast<const codegen::AsyncCopyNode*>(s.get());
        if (n->src->scope == BufferScope::kArg) arg_elements += execs_;
        if (const std::optional<WarpShape> warp = WarpShapeOf(stack_)) {
          warp_transactions.Add(*warp, *n->dst, n->dst_indices, /*write=*/true, execs_);
          warp_transactions.Add(*warp, *n->src, n->src_indices, /*write=*/false, execs_);
        }
        const double lanes = InnermostVectorLanes();
        if (n->dst->scope == BufferScope::kShared) shared_copy_lanes = std::max(shared_copy_lanes, lanes);
        if (n->src->scope == BufferScope::kArg) arg_load_lanes = std::max(arg_load_lanes, lanes);
        return;
      }
      case StmtKind::kAtomicAdd: {  // split-K's arrival counter: its body runs once per block
        auto* n = static_cast<const codegen::AtomicAddNode*>(s.get());
        arrival_ = codegen::AsVar(n->var);
        Walk(n->body);
        arrival_ = nullptr;
        return;
      }
      case StmtKind::kIf: {  // counted as if taken (an upper bound on the work), except ...
        auto* n = static_cast<const codegen::IfNode*>(s.get());
        // ... the fix-up only the last of a counter's arrivals runs: its share of the blocks.
        for (const LoadNode* load : codegen::CollectLoads(n->cond)) {
          auto flag = last_arrival_flags_.find(load->buffer.get());
          if (flag == last_arrival_flags_.end()) continue;
          const double saved = execs_;
          execs_ *= flag->second;
          Walk(n->then_case);
          execs_ = saved;
          return;
        }
        // ... the packing of a weight kept across calls (`fresh == 1`): it runs in the first
        // call for a weight, not in the calls that are timed.
        if (n->cond.node()->kind == codegen::ExprKind::kEQ) {
          auto* eq = static_cast<const codegen::BinaryNode*>(n->cond.node().get());
          if (once_vars_.count(eq->a.node().get()) > 0) return;
        }
        Walk(n->then_case);
        return;
      }
      case StmtKind::kAllocate: {
        auto* n = static_cast<const AllocateNode*>(s.get());
        double elems = static_cast<double>(n->buffer->NumElements());
        if (n->buffer->scope == BufferScope::kHeap) {
          heap_bytes += elems * kBytesPerElement;
          ++num_heap_buffers;
        } else if (n->buffer->scope == BufferScope::kShared) {
          shared_bytes += elems * kBytesPerElement;
        } else {
          max_local = std::max(max_local, elems);
          if (n->buffer->scope == BufferScope::kLocal && local_buffers_.insert(n->buffer.get()).second) {
            local_floats += elems;
          }
        }
        if (n->buffer->fresh != nullptr) once_vars_.insert(n->buffer->fresh.get());
        allocs_.emplace_back(n->buffer.get(), stack_.size());
        Walk(n->body);
        allocs_.pop_back();
        return;
      }
    }
  }

  double total_flops = 0, store_execs = 0, parallel_execs = 0, heap_bytes = 0, max_local = 0;
  double shared_bytes = 0;
  double arg_elements = 0;  // element loads and stores of argument buffers, all executions
  double sync_execs = 0;    // barriers passed, summed over all threads
  double local_floats = 0;  // elements of all distinct kLocal buffers (per thread on a GPU)
  double shared_copy_lanes = 0, arg_load_lanes = 0;  // see AstFeatures
  WarpTransactions warp_transactions;  // weighted by executions
  double block_dims[3] = {1, 1, 1}, thread_dims[3] = {1, 1, 1};
  int num_syncs = 0;
  bool gpu = false;  // the kernel has GPU bindings
  int num_loops = 0, num_vectorized = 0, num_unrolled = 0, num_parallel = 0, max_depth = 0;
  int num_heap_buffers = 0;
  const StoreNode* main = nullptr;
  double main_execs = 0;
  int main_flops = 0;
  std::vector<Loop> main_nest;
  size_t main_alloc_depth = 0;  // loops outside the allocation of the main statement's buffer

 private:
  /// A store under an arrival counter of `select(arrived == c, 1, 0)` flags the last of c + 1
  /// arrivals: an If on the flag runs in 1 / (c + 1) of the blocks.
  void NoteLastArrivalFlag(const StoreNode& n) {
    if (n.value->kind != ExprKind::kSelect) return;
    auto* select = static_cast<const SelectNode*>(n.value.get());
    if (select->cond->kind != ExprKind::kEQ) return;
    auto* eq = static_cast<const codegen::BinaryNode*>(select->cond.get());
    int64_t last = 0;
    if (codegen::AsVar(eq->a) != arrival_ || !codegen::AsInt(eq->b, &last) || last < 0) return;
    last_arrival_flags_[n.buffer.get()] = 1.0 / static_cast<double>(last + 1);
  }

  /// Extent of the innermost vectorized loop enclosing the current statement; 0 when none.
  double InnermostVectorLanes() const {
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].kind == ForKind::kVectorized) return static_cast<double>(stack_[i].extent);
    }
    return 0;
  }

  std::vector<Loop> stack_;
  std::vector<std::pair<const BufferNode*, size_t>> allocs_;  // enclosing allocations
  std::set<const BufferNode*> local_buffers_;      // kLocal buffers counted in local_floats
  std::set<const codegen::ExprNode*> once_vars_;  // `fresh` flags of buffers kept across calls
  double execs_ = 1;
  int parallel_nesting_ = 0;
  const codegen::VarNode* arrival_ = nullptr;  // the result of the enclosing atomic counter
  std::map<const BufferNode*, double> last_arrival_flags_;  // flag buffer -> share of blocks
};

/// How the blocks of a kernel the walker saw fill the GPU of the kGpu* constants.
GpuLaunch LaunchOf(const Walker& w) {
  GpuLaunch l;
  if (!w.gpu) return l;
  l.threads = w.thread_dims[0] * w.thread_dims[1] * w.thread_dims[2];
  l.blocks = w.block_dims[0] * w.block_dims[1] * w.block_dims[2];
  l.local_floats = w.local_floats;
  const double warps = std::ceil(l.threads / 32.0);
  l.lane_fill = warps > 0 ? l.threads / (32.0 * warps) : 0.0;
  // Registers are allocated per thread in steps of 8 (256 per warp); the compiler fits one block
  // of up to 1024 threads on an SM, spilling what does not fit.
  const double wanted_registers = std::ceil((l.local_floats + kGpuRegisterOverhead) / 8.0) * 8.0;
  const double register_cap =
      warps > 0 ? std::min<double>(kGpuMaxRegisters / 8 * 8, std::floor(kGpuRegistersPerSm / (32.0 * warps) / 8.0) * 8.0)
                : 0.0;
  l.register_excess = std::max(0.0, wanted_registers - register_cap);
  const double registers = std::min(wanted_registers, register_cap);
  if (warps > 0 && l.threads <= 1024 && w.shared_bytes <= kGpuSharedPerBlock && registers > 0) {
    const double by_threads = std::floor(kGpuThreadsPerSm / 32.0 / warps);
    const double shared_alloc = std::ceil(w.shared_bytes / 128.0) * 128.0 + kGpuSharedReserved;
    const double by_shared = std::floor(kGpuSharedPerSm / shared_alloc);
    const double by_registers = std::floor(std::floor(kGpuRegistersPerSm / (registers * 32.0)) / warps);
    l.resident_blocks = std::min({by_threads, by_shared, by_registers, static_cast<double>(kGpuBlocksPerSm)});
  }
  l.occupancy = l.resident_blocks * warps / (kGpuThreadsPerSm / 32.0);
  if (l.resident_blocks > 0 && l.blocks > 0) {
    const double per_wave = kGpuSms * l.resident_blocks;
    l.waves = l.blocks / per_wave;
    l.wave_fill = l.blocks / (std::ceil(l.waves) * per_wave);
  }
  if (l.blocks > 0 && l.threads > 0) {
    const double sm_blocks = std::ceil(l.blocks / kGpuSms);
    const double rounds = std::ceil(l.waves);
    const double thread_slots = l.blocks * l.threads;
    l.sm_flops = w.total_flops / l.blocks * sm_blocks;
    l.sm_global_bytes = w.arg_elements * kBytesPerElement / l.blocks * sm_blocks;
    l.thread_serial_stores = w.store_execs / thread_slots * rounds;
    l.serial_barriers = w.sync_execs / thread_slots * rounds;
    l.thread_serial_global = w.arg_elements / thread_slots * rounds;
    l.sm_roofline_ns = 1e9 * std::max(l.sm_flops / kGpuSmFlops, l.sm_global_bytes / kGpuSmBytes);
  }
  return l;
}

/// The index of one access decomposed over the loops of the nest: per dimension, a
/// coefficient per loop when the index is affine, else just which loops it mentions.
class AccessIndex {
 public:
  AccessIndex(const std::vector<Loop>& nest, const BufferNode* buffer, const std::vector<Expr>& indices)
      : nest_(nest), buffer_(buffer), dims_(indices.size()) {
    size_t depth = nest.size();
    for (size_t d = 0; d < dims_.size(); ++d) {
      dims_[d].coeff.assign(depth, 0);
      dims_[d].used.assign(depth, 0);
      Decompose(indices[d], 1, &dims_[d]);
      for (size_t i = 0; i < depth; ++i) {
        if (dims_[d].affine && dims_[d].coeff[i] == 0) dims_[d].used[i] = 0;
      }
    }
  }

  /// True if the index depends on loop `i` (outermost = 0).
  bool Depends(size_t i) const {
    for (auto& d : dims_) {
      if (d.used[i]) return true;
    }
    return false;
  }

  /// Address step in elements of one iteration of loop `i` in the row-major flattening
  /// (non-affine dimensions that mention the loop count as step 1 of that dimension).
  double FlatStride(size_t i) const {
    double stride = 0, row = 1;
    for (size_t d = dims_.size(); d-- > 0;) {
      const Dim& dim = dims_[d];
      if (dim.affine) {
        stride += static_cast<double>(dim.coeff[i]) * row;
      } else if (dim.used[i]) {
        stride += row;
      }
      row *= static_cast<double>(buffer_->shape[d]);
    }
    return std::fabs(stride);
  }

  /// Unique elements and 64-byte lines touched by the loops nest_[first..end).
  void Footprint(size_t first, double* elements, double* lines) const {
    double product = 1, all_vars = 1, last_distinct = 1, last_span = 1;
    for (size_t d = 0; d < dims_.size(); ++d) {
      const Dim& dim = dims_[d];
      double span = 1, count = 1;
      for (size_t i = first; i < nest_.size(); ++i) {
        if (!dim.used[i]) continue;
        double e = static_cast<double>(nest_[i].extent);
        count *= e;
        if (dim.affine) span += std::fabs(static_cast<double>(dim.coeff[i])) * (e - 1);
      }
      double shape = static_cast<double>(buffer_->shape[d]);
      double distinct = dim.affine ? std::min({span, count, shape}) : std::min(count, shape);
      product *= distinct;
      if (d + 1 == dims_.size()) {
        last_distinct = distinct;
        last_span = dim.affine ? std::min(span, shape) : distinct;
      }
    }
    for (size_t i = first; i < nest_.size(); ++i) {
      if (Depends(i)) all_vars *= static_cast<double>(nest_[i].extent);
    }
    *elements = std::min(product, all_vars);
    double last_lines = std::min(last_distinct, std::ceil(last_span * kBytesPerElement / kLineBytes));
    *lines = *elements / last_distinct * last_lines;
  }

 private:
  struct Dim {
    std::vector<int64_t> coeff;
    std::vector<char> used;
    bool affine = true;
  };

  int LoopOf(const VarNode* v) const {
    for (size_t i = nest_.size(); i-- > 0;) {
      if (nest_[i].var == v) return static_cast<int>(i);
    }
    return -1;
  }

  void MarkUsed(const Expr& e, Dim* dim) const {
    if (const VarNode* v = codegen::AsVar(e)) {
      int i = LoopOf(v);
      if (i >= 0) dim->used[i] = 1;
      return;
    }
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return;
      case ExprKind::kSelect: {
        auto* n = static_cast<const SelectNode*>(e.get());
        MarkUsed(n->cond, dim);
        MarkUsed(n->true_value, dim);
        MarkUsed(n->false_value, dim);
        return;
      }
      case ExprKind::kLoad:
        for (auto& i : static_cast<const LoadNode*>(e.get())->indices) MarkUsed(i, dim);
        return;
      default: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        MarkUsed(n->a, dim);
        MarkUsed(n->b, dim);
      }
    }
  }

  void Decompose(const Expr& e, int64_t scale, Dim* dim) const {
    int64_t c;
    switch (e->kind) {
      case ExprKind::kIntImm:
        return;
      case ExprKind::kVar: {
        int i = LoopOf(static_cast<const VarNode*>(e.get()));
        if (i >= 0) {
          dim->coeff[i] += scale;
          dim->used[i] = 1;
        }
        return;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        Decompose(n->a, scale, dim);
        Decompose(n->b, e->kind == ExprKind::kAdd ? scale : -scale, dim);
        return;
      }
      case ExprKind::kMul: {
        auto* n = static_cast<const BinaryNode*>(e.get());
        if (codegen::AsInt(n->a, &c)) return Decompose(n->b, scale * c, dim);
        if (codegen::AsInt(n->b, &c)) return Decompose(n->a, scale * c, dim);
        break;
      }
      default:
        break;
    }
    dim->affine = false;
    MarkUsed(e, dim);
  }

  const std::vector<Loop>& nest_;
  const BufferNode* buffer_;
  std::vector<Dim> dims_;
};

struct Access {
  const BufferNode* buffer;
  const std::vector<Expr>* indices;  // of the first access
  int reads = 0, writes = 0;
  double whole_elements = 0;
};

/// First loop of the nest (outermost = 0) inside level `l` (see kLevels).
size_t LevelStart(size_t depth, int l) {
  if (l == kLevels - 1) return 0;
  size_t inner = static_cast<size_t>(l) + 1;
  return inner >= depth ? 0 : depth - inner;
}

void DescribeMain(const Walker& w, AstFeatures* f) {
  const StoreNode* store = w.main;
  const std::vector<Loop>& nest = w.main_nest;
  const size_t depth = nest.size();

  f->main_depth = static_cast<float>(depth);
  f->log_main_execs = Log2p(w.main_execs);
  f->main_exec_fraction = w.store_execs > 0 ? static_cast<float>(w.main_execs / w.store_execs) : 0.0f;
  f->main_flops = static_cast<float>(w.main_flops);
  if (store->buffer->scope == BufferScope::kLocal) {
    f->log_local_tile = Log2p(static_cast<double>(store->buffer->NumElements()));
  }

  AccessIndex out_index(nest, store->buffer.get(), store->indices);
  double unroll = 1, parallel = 1, reduce = 1;
  bool any_parallel = false;
  f->vector_lanes = 1;
  bool found_vector = false;
  for (size_t i = depth; i-- > 0;) {
    const Loop& loop = nest[i];
    double e = static_cast<double>(loop.extent);
    if (loop.kind == ForKind::kVectorized && !found_vector) {
      found_vector = true;
      f->vector_lanes = static_cast<float>(loop.extent);
      f->vector_innermost = i + 1 == depth ? 1.0f : 0.0f;
    }
    if (loop.kind == ForKind::kUnrolled) unroll *= e;
    if (loop.kind == ForKind::kParallel) {
      parallel *= e;
      any_parallel = true;
    }
    // A loop outside the allocation of a local destination starts a fresh tile: not a reduction.
    bool is_reduce = i >= w.main_alloc_depth && !out_index.Depends(i);
    if (is_reduce) reduce *= e;
    size_t slot = depth - 1 - i;
    if (slot < static_cast<size_t>(kLoopSlots)) {
      LoopFeatures& lf = f->loops[slot];
      lf.log_extent = Log2p(e);
      lf.vectorized = loop.kind == ForKind::kVectorized ? 1.0f : 0.0f;
      lf.unrolled = loop.kind == ForKind::kUnrolled ? 1.0f : 0.0f;
      lf.parallel = loop.kind == ForKind::kParallel ? 1.0f : 0.0f;
      lf.thread_bound = codegen::IsGpuBinding(loop.kind) ? 1.0f : 0.0f;
      lf.reduction = is_reduce ? 1.0f : 0.0f;
    }
  }
  f->log_unroll_product = Log2p(unroll);
  f->log_parallel_extent = any_parallel ? Log2p(parallel) : 0.0f;
  f->log_parallel_grain = any_parallel ? Log2p(w.main_execs / parallel) : 0.0f;
  f->log_reduce_extent = Log2p(reduce);

  // Accesses: the stored buffer first, then loaded buffers by first appearance.
  const std::vector<const LoadNode*> loads = codegen::CollectLoads(store->value);
  std::vector<Access> accesses;
  accesses.push_back(Access{store->buffer.get(), &store->indices, 0, 1, 0});
  for (const LoadNode* load : loads) {
    auto it = std::find_if(accesses.begin(), accesses.end(),
                           [&](const Access& a) { return a.buffer == load->buffer.get(); });
    if (it == accesses.end()) {
      accesses.push_back(Access{load->buffer.get(), &load->indices, 1, 0, 0});
    } else {
      ++it->reads;
    }
  }
  std::vector<AccessIndex> indices;
  indices.reserve(accesses.size());
  for (Access& a : accesses) {
    indices.emplace_back(nest, a.buffer, *a.indices);
    double lines;
    indices.back().Footprint(0, &a.whole_elements, &lines);
  }
  // Slots 1..: loaded buffers by decreasing whole-nest footprint (stable).
  std::vector<size_t> order;
  for (size_t i = 1; i < accesses.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return accesses[a].whole_elements > accesses[b].whole_elements;
  });
  order.insert(order.begin(), 0);

  double level_bytes[kLevels] = {};
  for (size_t slot = 0; slot < order.size(); ++slot) {
    const Access& a = accesses[order[slot]];
    const AccessIndex& index = indices[order[slot]];
    const bool local = a.buffer->scope == BufferScope::kLocal;
    AccessFeatures* af = slot < static_cast<size_t>(kAccessSlots) ? &f->accesses[slot] : nullptr;
    for (int l = 0; l < kLevels; ++l) {
      double elements, lines;
      index.Footprint(LevelStart(depth, l), &elements, &lines);
      if (!local) level_bytes[l] += elements * kBytesPerElement;
      if (af != nullptr) af->log_bytes[l] = Log2p(elements * kBytesPerElement);
      if (af != nullptr && l == kLevels - 1) af->log_lines = Log2p(lines);
    }
    if (af == nullptr) continue;
    af->present = 1;
    af->reads = static_cast<float>(a.reads);
    af->writes = static_cast<float>(a.writes);
    af->scope_local = local ? 1.0f : 0.0f;
    af->scope_heap = a.buffer->scope == BufferScope::kHeap ? 1.0f : 0.0f;
    af->scope_shared = a.buffer->scope == BufferScope::kShared ? 1.0f : 0.0f;
    if (depth > 0) af->log_stride_innermost = Log2p(index.FlatStride(depth - 1));
    double run = 1;
    int reuse_depth = 0;
    for (size_t i = depth; i-- > 0;) {
      if (index.Depends(i)) {
        af->log_stride_used = Log2p(index.FlatStride(i));
        break;
      }
      ++reuse_depth;
      run *= static_cast<double>(nest[i].extent);
    }
    af->reuse_depth = static_cast<float>(reuse_depth);
    af->log_reuse_run = Log2p(run);
    af->log_reuse = a.whole_elements > 0 ? Log2p(w.main_execs / a.whole_elements) : 0.0f;
    af->log_accesses = Log2p(w.main_execs * (a.reads + a.writes));
  }

  for (int l = 0; l < kLevels; ++l) {
    double iterations = 1;
    for (size_t i = LevelStart(depth, l); i < depth; ++i) iterations *= static_cast<double>(nest[i].extent);
    double flops = iterations * w.main_flops;
    f->log_intensity[l] = Log2p(flops / std::max(level_bytes[l], 1.0));
  }
}

std::vector<std::string> BuildNames() {
  std::vector<std::string> names = {
      "log_total_flops", "log_store_execs", "parallel_fraction", "log_arg_bytes", "log_heap_bytes",
      "num_heap_buffers", "log_local_floats", "num_stages", "num_loops", "num_vectorized",
      "num_unrolled", "num_parallel", "max_depth", "log_shared_bytes", "num_syncs", "log_gpu_threads",
      "log_gpu_blocks", "main_depth", "log_main_execs",
      "main_exec_fraction", "main_flops", "vector_lanes", "vector_innermost", "log_unroll_product",
      "log_parallel_extent", "log_parallel_grain", "log_reduce_extent", "log_local_tile"};
  for (int i = 0; i < kLoopSlots; ++i) {
    std::string p = "loop" + std::to_string(i) + ".";
    for (const char* n : {"log_extent", "vectorized", "unrolled", "parallel", "thread_bound", "reduction"}) {
      names.push_back(p + n);
    }
  }
  for (int i = 0; i < kAccessSlots; ++i) {
    std::string p = "access" + std::to_string(i) + ".";
    for (const char* n : {"present", "reads", "writes", "scope_local", "scope_heap", "scope_shared"}) {
      names.push_back(p + n);
    }
    for (int l = 0; l < kLevels; ++l) names.push_back(p + "log_bytes.l" + std::to_string(l));
    for (const char* n : {"log_stride_innermost", "log_stride_used", "reuse_depth", "log_reuse_run",
                          "log_reuse", "log_accesses", "log_lines"}) {
      names.push_back(p + n);
    }
  }
  for (int l = 0; l < kLevels; ++l) names.push_back("log_intensity.l" + std::to_string(l));
  names.push_back("shared_copy_lanes");
  names.push_back("arg_load_lanes");
  for (const char* n : {"log_thread_local_floats", "log_register_excess", "lane_fill", "resident_blocks", "occupancy",
                        "wave_fill", "global_load_efficiency", "global_store_efficiency", "log_shared_conflict",
                        "log_sm_flops", "log_sm_global_bytes", "log_thread_serial_stores", "log_serial_barriers", "log_thread_serial_global", "log_sm_roofline_ns"}) {
    names.push_back(n);
  }
  TUNE_CHECK(names.size() == kNumFeatures) << names.size() << " names for " << kNumFeatures << " features";
  return names;
}

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string> names = BuildNames();
  return names;
}

size_t FeatureIndex(const std::string& name) {
  static const std::unordered_map<std::string, size_t> index = [] {
    std::unordered_map<std::string, size_t> m;
    const auto& names = FeatureNames();
    for (size_t i = 0; i < names.size(); ++i) m[names[i]] = i;
    return m;
  }();
  auto it = index.find(name);
  TUNE_CHECK(it != index.end()) << "no feature named '" << name << "'";
  return it->second;
}

AstFeatures ExtractAstFeatures(const codegen::LoweredFunc& func) {
  AstFeatures f;
  std::memset(&f, 0, sizeof(f));
  double arg_bytes = 0;
  for (const Buffer& b : func.args) arg_bytes += static_cast<double>(b->NumElements()) * kBytesPerElement;
  f.log_arg_bytes = Log2p(arg_bytes);
  if (!func.body) return f;

  Walker w;
  w.Walk(func.body);
  f.log_total_flops = Log2p(w.total_flops);
  f.log_store_execs = Log2p(w.store_execs);
  f.parallel_fraction = w.store_execs > 0 ? static_cast<float>(w.parallel_execs / w.store_execs) : 0.0f;
  f.log_heap_bytes = Log2p(w.heap_bytes);
  f.num_heap_buffers = static_cast<float>(w.num_heap_buffers);
  f.log_local_floats = Log2p(w.max_local);
  f.log_shared_bytes = Log2p(w.shared_bytes);
  f.num_syncs = static_cast<float>(w.num_syncs);
  f.shared_copy_lanes = static_cast<float>(w.shared_copy_lanes);
  f.arg_load_lanes = static_cast<float>(w.arg_load_lanes);
  if (w.gpu) {
    const GpuLaunch launch = LaunchOf(w);
    f.log_gpu_threads = Log2p(launch.threads);
    f.log_gpu_blocks = Log2p(launch.blocks);
    f.log_thread_local_floats = Log2p(launch.local_floats);
    f.log_register_excess = Log2p(launch.register_excess);
    f.lane_fill = static_cast<float>(launch.lane_fill);
    f.resident_blocks = static_cast<float>(launch.resident_blocks);
    f.occupancy = static_cast<float>(launch.occupancy);
    f.wave_fill = static_cast<float>(launch.wave_fill);
    const std::array<float, 3> warp = w.warp_transactions.Fields();
    f.global_load_efficiency = warp[0];
    f.global_store_efficiency = warp[1];
    f.log_shared_conflict = warp[2];
    f.log_sm_flops = Log2p(launch.sm_flops);
    f.log_sm_global_bytes = Log2p(launch.sm_global_bytes);
    f.log_thread_serial_stores = Log2p(launch.thread_serial_stores);
    f.log_serial_barriers = Log2p(launch.serial_barriers);
    f.log_thread_serial_global = Log2p(launch.thread_serial_global);
    f.log_sm_roofline_ns = Log2p(launch.sm_roofline_ns);
  }
  Stmt top = func.body;
  while (top->kind == StmtKind::kAllocate) top = static_cast<const AllocateNode*>(top.get())->body;
  f.num_stages = top->kind == StmtKind::kSeq ? static_cast<float>(static_cast<const SeqNode*>(top.get())->stmts.size()) : 1.0f;
  f.num_loops = static_cast<float>(w.num_loops);
  f.num_vectorized = static_cast<float>(w.num_vectorized);
  f.num_unrolled = static_cast<float>(w.num_unrolled);
  f.num_parallel = static_cast<float>(w.num_parallel);
  f.max_depth = static_cast<float>(w.max_depth);
  if (w.main != nullptr) DescribeMain(w, &f);
  return f;
}

GpuLaunch EstimateGpuLaunch(const codegen::LoweredFunc& func) {
  if (!func.body) return GpuLaunch{};
  Walker w;
  w.Walk(func.body);
  return LaunchOf(w);
}

std::vector<float> ExtractFeatures(const codegen::LoweredFunc& func) {
  AstFeatures f = ExtractAstFeatures(func);
  std::vector<float> out(kNumFeatures);
  std::memcpy(out.data(), &f, sizeof(f));
  for (float& v : out) {
    if (!std::isfinite(v)) v = 0.0f;
  }
  return out;
}

}  // namespace tune::costmodel
