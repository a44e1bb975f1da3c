// The loop AST: immutable expression and statement nodes and buffers, and their constructors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tune::codegen {

struct ExprNode;

/// kInt32: 32-bit integers in memory (GPU arrival counters, see AtomicAddNode); expressions
/// are never kInt32 (integer expressions are kInt64).
enum class DType { kInt64, kFloat32, kBool, kInt32 };

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

/// Where a buffer lives. kArg: a kernel argument (Workload tensor). kHeap: scratch memory
/// allocated by the kernel (packed weights, padded input). kLocal: a small per-thread tile on
/// the stack that the backend keeps in registers when every access index is constant.
/// kShared: GPU shared memory of one thread block (CUDA backend only).
enum class BufferScope { kArg, kHeap, kLocal, kShared };

struct BufferNode {
  std::string name;
  std::vector<int64_t> shape;  // row-major
  BufferScope scope = BufferScope::kArg;
  int arg_index = -1;  // position in the kernel's argument array when scope == kArg
  DType dtype = DType::kFloat32;  // element type: kFloat32, or kInt32 (counters of a scratch buffer)
  /// A kArg buffer that is no workload tensor but scratch memory of a GPU kernel: the caller
  /// allocates it (after the tensors, in argument order) and passes the same memory to every
  /// launch. `zero_init`: it must be zero before the first launch, and every launch leaves it
  /// zero again. `coherent`: blocks of one launch read what other blocks wrote, so its loads
  /// bypass the SM's L1 cache (__ldcg) and are ordered by __threadfence (FenceNode).
  bool scratch = false;
  bool zero_init = false;
  bool coherent = false;
  /// A kHeap buffer holding a packed copy of the kArg buffer `prepack_source` (a constant
  /// weight), kept across calls (CPU backend: tune_rt_prepacked, keyed by the kernel and the
  /// source's address): `fresh` (an int64 var) is 1 in a call that must fill it, else 0, and
  /// Schedule::Lower runs the stages that write it only where `fresh` is 1. Null: per call.
  std::shared_ptr<const BufferNode> prepack_source;
  std::shared_ptr<const ExprNode> fresh;  // a VarNode; Expr(fresh) in expressions
  /// CPU backend, AVX-512: where a vector accumulation acc = acc + x * v (or v * x) multiplies
  /// a vector v by a scalar x loaded from this buffer, the FMA reads x as an embedded-broadcast
  /// memory operand ({1to16}) rather than from a register broadcast once, so a register tile
  /// may use every vector register but the weights'. The values are the same; other backends
  /// and targets ignore it.
  bool broadcast_operand = false;
  int64_t NumElements() const;
  /// Bytes of one element (4 for both dtypes a buffer may have).
  int64_t ElementBytes() const { return 4; }
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer MakeBuffer(std::string name, std::vector<int64_t> shape, BufferScope scope,
                  int arg_index = -1);
/// A kHeap buffer packed from `source` once and kept across calls (BufferNode::prepack_source).
Buffer MakePrepackedBuffer(std::string name, std::vector<int64_t> shape, Buffer source);
/// A scratch argument of a GPU kernel (see BufferNode::scratch), at `arg_index`.
Buffer MakeScratchBuffer(std::string name, std::vector<int64_t> shape, int arg_index, DType dtype, bool zero_init,
                         bool coherent);

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

enum class ExprKind {
  kIntImm, kFloatImm, kVar,
  kAdd, kSub, kMul, kDiv, kMod, kMin, kMax,  // binary arithmetic (Div/Mod: floor, ints >= 0)
  kLT, kLE, kEQ, kAnd,                        // comparisons / logic, result kBool
  kSelect, kLoad,
};

struct ExprNode;
/// A handle to an immutable expression node; cheap to copy. Operators build new nodes.
class Expr {
 public:
  Expr() = default;
  Expr(int64_t v);  // NOLINT: integer literal
  Expr(int v) : Expr(static_cast<int64_t>(v)) {}  // NOLINT
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }
  bool defined() const { return node_ != nullptr; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  ExprKind kind;
  DType dtype;
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
};
struct IntImmNode : ExprNode {
  int64_t value;
  explicit IntImmNode(int64_t v) : ExprNode(ExprKind::kIntImm, DType::kInt64), value(v) {}
};
struct FloatImmNode : ExprNode {
  double value;
  explicit FloatImmNode(double v) : ExprNode(ExprKind::kFloatImm, DType::kFloat32), value(v) {}
};
/// A loop or placeholder variable (int64); identity is the node's address, not its name.
struct VarNode : ExprNode {
  std::string name;
  explicit VarNode(std::string n) : ExprNode(ExprKind::kVar, DType::kInt64), name(std::move(n)) {}
};
struct BinaryNode : ExprNode {
  Expr a, b;
  BinaryNode(ExprKind k, DType t, Expr x, Expr y) : ExprNode(k, t), a(std::move(x)), b(std::move(y)) {}
};
struct SelectNode : ExprNode {
  Expr cond, true_value, false_value;
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(ExprKind::kSelect, t->dtype), cond(std::move(c)), true_value(std::move(t)),
        false_value(std::move(f)) {}
};
/// buffer[indices...] (one index per dimension).
struct LoadNode : ExprNode {
  Buffer buffer;
  std::vector<Expr> indices;
  LoadNode(Buffer buf, std::vector<Expr> idx)
      : ExprNode(ExprKind::kLoad, DType::kFloat32), buffer(std::move(buf)), indices(std::move(idx)) {}
};

Expr MakeVar(const std::string& name);
Expr FloatImm(double v);
Expr Load(Buffer buffer, std::vector<Expr> indices);
Expr Select(Expr cond, Expr t, Expr f);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
/// Builds a binary node of `kind`, folding constants and identities (x+0, x*1, x/1, 0*x...).
Expr MakeBinary(ExprKind kind, Expr a, Expr b);

const VarNode* AsVar(const Expr& e);
/// The value of an integer constant, or false.
bool AsInt(const Expr& e, int64_t* value);

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

enum class StmtKind {
  kFor, kStore, kSeq, kAllocate, kSync, kFence, kAtomicAdd, kIf,
  kAsyncCopy, kAsyncCommit, kAsyncWait,  // cp.async (CUDA backend only)
};
/// How a loop runs. kVectorized: lanes of one SIMD vector (on a GPU: one 64- or 128-bit
/// access per thread where the addresses allow); kUnrolled: fully unrolled; kParallel:
/// iterations spread over the runtime thread pool. The GPU bindings (CUDA backend only): the
/// loop is not run at all, its variable is blockIdx.{x,y,z} or threadIdx.{x,y,z} and its
/// extent becomes that grid or block dimension.
enum class ForKind {
  kSerial, kParallel, kVectorized, kUnrolled,
  kBlockX, kBlockY, kBlockZ, kThreadX, kThreadY, kThreadZ,
};
std::string ForKindName(ForKind kind);
/// True for the GPU block and thread bindings.
bool IsGpuBinding(ForKind kind);
/// True for the block (grid) bindings kBlockX/Y/Z.
bool IsGpuBlockBinding(ForKind kind);
/// The launch axis of a GPU binding: 0 for x, 1 for y, 2 for z.
int GpuBindingAxis(ForKind kind);

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

struct StmtNode {
  StmtKind kind;
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};
/// for (var = 0; var < extent; ++var) body
struct ForNode : StmtNode {
  Expr var;
  int64_t extent;
  ForKind for_kind;
  Stmt body;
  ForNode(Expr v, int64_t e, ForKind k, Stmt b)
      : StmtNode(StmtKind::kFor), var(std::move(v)), extent(e), for_kind(k), body(std::move(b)) {}
};
struct StoreNode : StmtNode {
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  StoreNode(Buffer buf, std::vector<Expr> idx, Expr v)
      : StmtNode(StmtKind::kStore), buffer(std::move(buf)), indices(std::move(idx)), value(std::move(v)) {}
};
struct SeqNode : StmtNode {
  std::vector<Stmt> stmts;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(StmtKind::kSeq), stmts(std::move(s)) {}
};
/// A barrier of all threads of a GPU thread block (__syncthreads); CUDA backend only.
struct SyncNode : StmtNode {
  SyncNode() : StmtNode(StmtKind::kSync) {}
};
/// A device-wide memory fence (__threadfence): this thread's earlier global writes are seen by
/// every thread of the device before its later ones. CUDA backend only.
struct FenceNode : StmtNode {
  FenceNode() : StmtNode(StmtKind::kFence) {}
};
/// `var` = atomicAdd(&buffer[indices], value), the element's old value, visible in `body`:
/// { const int var = atomicAdd(...); body }. `buffer` is a kInt32 kArg (scratch) buffer and
/// `value` an integer expression. CUDA backend only.
struct AtomicAddNode : StmtNode {
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
  Expr var;
  Stmt body;
  AtomicAddNode(Buffer buf, std::vector<Expr> idx, Expr v, Expr result, Stmt b)
      : StmtNode(StmtKind::kAtomicAdd), buffer(std::move(buf)), indices(std::move(idx)), value(std::move(v)),
        var(std::move(result)), body(std::move(b)) {}
};
/// if (cond) then_case. On a GPU the threads of a block may disagree on `cond` only where
/// `then_case` holds no barrier (kSync). On a CPU `cond` is scalar: an If never sits directly
/// in a loop that becomes vector code (the loop runs serially instead).
struct IfNode : StmtNode {
  Expr cond;
  Stmt then_case;
  IfNode(Expr c, Stmt t) : StmtNode(StmtKind::kIf), cond(std::move(c)), then_case(std::move(t)) {}
};
/// dst[dst_indices] = src[src_indices], one float copied from global memory (a kArg buffer)
/// to shared memory (kShared) without passing through registers (cp.async, sm_80 and later).
/// The copy is in flight from here until this thread waits for its group (AsyncWaitNode):
/// neither the element nor its source may be touched before, and other threads see it only
/// after a barrier that follows the wait. In a vectorized loop of 2 or 4 lanes the CUDA
/// backend issues one 8- or 16-byte copy where both sides are contiguous and aligned, else one
/// 4-byte copy per lane. CUDA backend only.
struct AsyncCopyNode : StmtNode {
  Buffer dst;
  std::vector<Expr> dst_indices;
  Buffer src;
  std::vector<Expr> src_indices;
  AsyncCopyNode(Buffer d, std::vector<Expr> di, Buffer s, std::vector<Expr> si)
      : StmtNode(StmtKind::kAsyncCopy), dst(std::move(d)), dst_indices(std::move(di)), src(std::move(s)),
        src_indices(std::move(si)) {}
};
/// cp.async.commit_group: the asynchronous copies this thread issued since its last commit
/// form one group (possibly empty). CUDA backend only.
struct AsyncCommitNode : StmtNode {
  AsyncCommitNode() : StmtNode(StmtKind::kAsyncCommit) {}
};
/// cp.async.wait_group `pending`: this thread waits until at most `pending` of its committed
/// groups, the most recent ones, are still in flight; the copies of all older groups have
/// landed (for this thread: a barrier after the wait publishes them to the block). Copies not
/// yet committed are not waited for. CUDA backend only.
struct AsyncWaitNode : StmtNode {
  int64_t pending;
  explicit AsyncWaitNode(int64_t n) : StmtNode(StmtKind::kAsyncWait), pending(n) {}
};
/// Allocates `buffer` (kHeap, kLocal or kShared) for the duration of `body`.
struct AllocateNode : StmtNode {
  Buffer buffer;
  Stmt body;
  AllocateNode(Buffer buf, Stmt b) : StmtNode(StmtKind::kAllocate), buffer(std::move(buf)), body(std::move(b)) {}
};

Stmt For(Expr var, int64_t extent, ForKind kind, Stmt body);
Stmt Store(Buffer buffer, std::vector<Expr> indices, Expr value);
/// A sequence; nested sequences are flattened and a single statement is returned as is.
Stmt Seq(std::vector<Stmt> stmts);
Stmt Allocate(Buffer buffer, Stmt body);
Stmt Sync();
Stmt Fence();
/// `var` (a fresh variable) = atomicAdd(&buffer[indices], value) for `body`.
Stmt AtomicAdd(Buffer buffer, std::vector<Expr> indices, Expr value, Expr var, Stmt body);
Stmt If(Expr cond, Stmt then_case);
/// An asynchronous copy of one float from `src` (kArg, float) to `dst` (kShared).
Stmt AsyncCopy(Buffer dst, std::vector<Expr> dst_indices, Buffer src, std::vector<Expr> src_indices);
Stmt AsyncCommit();
/// Waits until at most `pending` (>= 0) committed groups are in flight.
Stmt AsyncWait(int64_t pending);

/// A complete kernel: a name, its argument buffers (in argument order) and its body.
struct LoweredFunc {
  std::string name;
  std::vector<Buffer> args;
  Stmt body;
};

/// Row-major flattening of `indices` into `shape`.
Expr FlattenIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& indices);

}  // namespace tune::codegen

// The traversals, analyses, rewrites and the printer of the AST, for callers that include this
// header only (each has its own header; they include this one).
#include "codegen/ir/ir_analysis.h"
#include "codegen/ir/ir_printer.h"
#include "codegen/ir/ir_visitor.h"
#include "codegen/ir/simplify.h"
