// GpuInterpreter: runs a GPU kernel's loop AST on the CPU, checking bounds and barriers.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "codegen/ir/ir.h"

namespace tune::test {

/// Executes a LoweredFunc with GPU bindings (what GenerateCuda accepts) on the CPU: blocks one
/// after another, the threads of a block in lockstep, statement by statement -- one valid
/// interleaving, since the AST has no data-dependent control flow. Arithmetic follows the
/// printed CUDA C: fp32 values, integer division truncating (and an error when an operand is
/// negative, which the IR does not allow), selects evaluating only the chosen side.
///
/// Beyond computing the outputs it reports, as an error, what would be undefined or silently
/// wrong on a device: an index outside its dimension (of any buffer), a read of a shared or
/// local element never written (every allocation starts poisoned), and a shared-memory race
/// between barriers -- a thread reading an element another thread wrote since the last
/// __syncthreads, or writing one another thread read since then. (Several threads writing
/// one element nobody reads, like the spare row idle copy lanes write, is not a race here.)
/// An if runs its body for the threads whose condition holds (a barrier inside an if the
/// threads disagree on is an error); atomicAdd applies thread by thread, in thread order;
/// __threadfence is a no-op (blocks run one after another, so the last block of a split-K
/// tile is always the last in block order). Integer (counter) arguments are held as floats.
/// Asynchronous copies (cp.async) read their source when issued and land when the issuing
/// thread waits for their group (at the wait_group that covers it, as late as a device may
/// land them): until then the destination element is in flight, and any read or write of it
/// is an error (other copies to it excepted: idle copy lanes share a spare row). Issuing and
/// landing are both checked for races like a store by the issuing thread, so a copy into a
/// stage that other threads read since the last barrier is flagged; a copy still in flight
/// when its shared buffer goes out of scope is an error too.
/// Arguments keep their contents between runs, so running a kernel twice on the same scratch
/// memory shows whether it leaves that memory as it found it.
/// For small workloads: every operation walks the tree.
class GpuInterpreter {
 public:
  /// Runs `func` on `args` (one array per func.args buffer, in order, each of that buffer's
  /// size; written in place). OK, or InvalidArgument naming the first problem found.
  static absl::Status Run(const codegen::LoweredFunc& func, const std::vector<std::vector<float>*>& args) {
    GpuInterpreter in;
    if (args.size() != func.args.size()) return absl::InvalidArgumentError("argument count");
    for (size_t i = 0; i < args.size(); ++i) {
      if (static_cast<int64_t>(args[i]->size()) != func.args[i]->NumElements()) {
        return absl::InvalidArgumentError("argument " + func.args[i]->name + " has the wrong size");
      }
      in.global_[func.args[i].get()] = args[i];
    }
    std::vector<Thread> threads(1);
    in.Exec(func.body, threads);
    return in.error_.empty() ? absl::OkStatus() : absl::InvalidArgumentError(in.error_);
  }

 private:
  /// An asynchronous copy in flight: the value it read and where it will land.
  struct PendingCopy {
    const codegen::BufferNode* buffer;
    int64_t flat;
    float value;
  };
  struct Thread {
    int64_t id = 0;  // linear thread index within the block
    std::unordered_map<const codegen::VarNode*, int64_t> vars;
    std::unordered_map<const codegen::BufferNode*, std::vector<float>> locals;
    std::vector<PendingCopy> open_group;               // issued since the last commit
    std::deque<std::vector<PendingCopy>> committed;    // oldest first
  };
  struct Shared {
    std::vector<float> data;
    // Per element: the last writer and reader (thread index; -2 for several readers) and the
    // epoch (barrier interval) they acted in.
    std::vector<int64_t> writer, write_epoch, reader, read_epoch;
    std::vector<int64_t> in_flight;  // asynchronous copies on their way to the element
  };
  static constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

  void Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }

  double Eval(const codegen::Expr& e, Thread& t, int64_t tid) {
    using codegen::ExprKind;
    if (!error_.empty()) return 0;
    switch (e->kind) {
      case ExprKind::kIntImm:
        return static_cast<double>(static_cast<const codegen::IntImmNode*>(e.get())->value);
      case ExprKind::kFloatImm:
        return static_cast<float>(static_cast<const codegen::FloatImmNode*>(e.get())->value);
      case ExprKind::kVar: {
        auto it = t.vars.find(codegen::AsVar(e));
        if (it == t.vars.end()) Fail("unbound variable " + codegen::AsVar(e)->name);
        return it == t.vars.end() ? 0 : static_cast<double>(it->second);
      }
      case ExprKind::kSelect: {
        auto* n = static_cast<const codegen::SelectNode*>(e.get());
        return Eval(n->cond, t, tid) != 0 ? Eval(n->true_value, t, tid) : Eval(n->false_value, t, tid);
      }
      case ExprKind::kLoad: {
        auto* n = static_cast<const codegen::LoadNode*>(e.get());
        float* slot = Element(n->buffer, n->indices, t, tid, /*write=*/false);
        if (slot == nullptr) return 0;
        if (std::isnan(*slot) && n->buffer->scope != codegen::BufferScope::kArg) {
          Fail("read of " + n->buffer->name + " before it was written");
        }
        return *slot;
      }
      default:
        break;
    }
    auto* n = static_cast<const codegen::BinaryNode*>(e.get());
    const double a = Eval(n->a, t, tid), b = Eval(n->b, t, tid);
    const bool fp = n->a->dtype == codegen::DType::kFloat32;
    auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
    switch (e->kind) {
      case ExprKind::kAdd: return fp ? f(a + b) : a + b;
      case ExprKind::kSub: return fp ? f(a - b) : a - b;
      case ExprKind::kMul: return fp ? f(a * b) : a * b;
      case ExprKind::kMin: return a < b ? a : b;
      case ExprKind::kMax: return a > b ? a : b;
      case ExprKind::kDiv:
      case ExprKind::kMod: {
        const int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
        if (x < 0 || y <= 0) {
          Fail(absl::StrCat("integer ", e->kind == ExprKind::kDiv ? "division " : "modulo ", x, " by ", y,
                            " in ", codegen::Print(e)));
          return 0;
        }
        return static_cast<double>(e->kind == ExprKind::kDiv ? x / y : x % y);
      }
      case ExprKind::kLT: return a < b;
      case ExprKind::kLE: return a <= b;
      case ExprKind::kEQ: return a == b;
      case ExprKind::kAnd: return a != 0 && b != 0;
      default:
        Fail("unknown expression");
        return 0;
    }
  }

  // The element an access names, after the bounds and race checks; null after an error.
  float* Element(const codegen::Buffer& b, const std::vector<codegen::Expr>& indices, Thread& t, int64_t tid,
                 bool write) {
    if (indices.size() != b->shape.size()) {
      Fail("buffer " + b->name + " indexed with the wrong rank");
      return nullptr;
    }
    int64_t flat = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t i = static_cast<int64_t>(Eval(indices[d], t, tid));
      if (!error_.empty()) return nullptr;
      if (i < 0 || i >= b->shape[d]) {
        Fail(absl::StrCat(write ? "write" : "read", " of ", b->name, " out of bounds: index ", i, " of dimension ",
                          d, " (extent ", b->shape[d], ")"));
        return nullptr;
      }
      flat = flat * b->shape[d] + i;
    }
    switch (b->scope) {
      case codegen::BufferScope::kArg: {
        auto it = global_.find(b.get());
        if (it == global_.end()) {
          Fail("buffer " + b->name + " is not an argument");
          return nullptr;
        }
        return it->second->data() + flat;
      }
      case codegen::BufferScope::kLocal: {
        auto it = t.locals.find(b.get());
        if (it == t.locals.end()) {
          Fail("local " + b->name + " used outside its allocation");
          return nullptr;
        }
        return it->second.data() + flat;
      }
      case codegen::BufferScope::kShared: {
        auto it = shared_.find(b.get());
        if (it == shared_.end()) {
          Fail("shared " + b->name + " used outside its allocation");
          return nullptr;
        }
        Shared& s = it->second;
        if (s.in_flight[flat] > 0 && !issuing_) {
          Fail(absl::StrCat(write ? "write" : "read", " of shared ", b->name, "[", flat,
                            "] while an asynchronous copy into it is in flight"));
          return nullptr;
        }
        if (write) {
          if (s.read_epoch[flat] == epoch_ && s.reader[flat] != tid) {
            Fail(absl::StrCat("race on shared ", b->name, "[", flat, "]: thread ", tid,
                              " writes what another thread read since the last barrier"));
          }
          s.writer[flat] = tid;
          s.write_epoch[flat] = epoch_;
        } else {
          if (s.write_epoch[flat] == epoch_ && s.writer[flat] != tid) {
            Fail(absl::StrCat("race on shared ", b->name, "[", flat, "]: thread ", tid, " reads what thread ",
                              s.writer[flat], " wrote since the last barrier"));
          }
          s.reader[flat] = s.read_epoch[flat] == epoch_ && s.reader[flat] != tid ? -2 : tid;
          s.read_epoch[flat] = epoch_;
        }
        return s.data.data() + flat;
      }
      case codegen::BufferScope::kHeap:
        break;
    }
    Fail("heap buffer " + b->name + " in a GPU kernel");
    return nullptr;
  }

  void Exec(const codegen::Stmt& s, std::vector<Thread>& threads) {
    using codegen::StmtKind;
    if (!error_.empty()) return;
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* n = static_cast<const codegen::ForNode*>(s.get());
        const codegen::VarNode* var = codegen::AsVar(n->var);
        if (codegen::IsGpuBinding(n->for_kind) && !codegen::IsGpuBlockBinding(n->for_kind)) {
          // The threads of this axis: every thread so far splits into `extent` threads.
          std::vector<Thread> split;
          split.reserve(threads.size() * n->extent);
          for (const Thread& t : threads) {
            for (int64_t i = 0; i < n->extent; ++i) {
              split.push_back(t);
              split.back().vars[var] = i;
              split.back().id = static_cast<int64_t>(split.size()) - 1;
            }
          }
          Exec(n->body, split);
          return;
        }
        if (codegen::IsGpuBlockBinding(n->for_kind)) ++epoch_;  // blocks share no barrier interval
        for (int64_t i = 0; i < n->extent && error_.empty(); ++i) {
          for (Thread& t : threads) t.vars[var] = i;
          Exec(n->body, threads);
        }
        return;
      }
      case StmtKind::kStore: {
        auto* n = static_cast<const codegen::StoreNode*>(s.get());
        for (Thread& t : threads) {
          if (!error_.empty()) break;
          const double v = Eval(n->value, t, t.id);
          float* slot = Element(n->buffer, n->indices, t, t.id, /*write=*/true);
          if (slot != nullptr) *slot = static_cast<float>(v);
        }
        return;
      }
      case StmtKind::kFence:
        return;
      case StmtKind::kAsyncCopy: {
        auto* n = static_cast<const codegen::AsyncCopyNode*>(s.get());
        if (n->src->scope != codegen::BufferScope::kArg || n->dst->scope != codegen::BufferScope::kShared) {
          Fail("asynchronous copy from " + n->src->name + " to " + n->dst->name + ": not global to shared");
          return;
        }
        for (Thread& t : threads) {
          if (!error_.empty()) return;
          float* from = Element(n->src, n->src_indices, t, t.id, /*write=*/false);
          issuing_ = true;
          float* to = Element(n->dst, n->dst_indices, t, t.id, /*write=*/true);  // bounds, races at issue
          issuing_ = false;
          if (from == nullptr || to == nullptr) return;
          Shared& sh = shared_.at(n->dst.get());
          const int64_t flat = to - sh.data.data();
          ++sh.in_flight[flat];
          t.open_group.push_back(PendingCopy{n->dst.get(), flat, *from});
        }
        return;
      }
      case StmtKind::kAsyncCommit:
        for (Thread& t : threads) {
          t.committed.push_back(std::move(t.open_group));
          t.open_group.clear();
        }
        return;
      case StmtKind::kAsyncWait: {
        const auto pending = static_cast<size_t>(static_cast<const codegen::AsyncWaitNode*>(s.get())->pending);
        for (Thread& t : threads) {
          while (t.committed.size() > pending && error_.empty()) {
            for (const PendingCopy& c : t.committed.front()) Land(c, t);
            t.committed.pop_front();
          }
        }
        return;
      }
      case StmtKind::kAtomicAdd: {
        auto* n = static_cast<const codegen::AtomicAddNode*>(s.get());
        if (n->buffer->scope != codegen::BufferScope::kArg) {
          Fail("atomicAdd on " + n->buffer->name + ", which is not global memory");
          return;
        }
        const codegen::VarNode* var = codegen::AsVar(n->var);
        for (Thread& t : threads) {
          if (!error_.empty()) return;
          const double v = Eval(n->value, t, t.id);
          float* slot = Element(n->buffer, n->indices, t, t.id, /*write=*/true);
          if (slot == nullptr) return;
          t.vars[var] = static_cast<int64_t>(*slot);
          *slot = static_cast<float>(*slot + v);
        }
        Exec(n->body, threads);
        for (Thread& t : threads) t.vars.erase(var);
        return;
      }
      case StmtKind::kIf: {
        auto* n = static_cast<const codegen::IfNode*>(s.get());
        std::vector<size_t> taken;
        for (size_t i = 0; i < threads.size() && error_.empty(); ++i) {
          if (Eval(n->cond, threads[i], threads[i].id) != 0) taken.push_back(i);
        }
        if (!error_.empty() || taken.empty()) return;
        if (taken.size() == threads.size()) {
          Exec(n->then_case, threads);
          return;
        }
        std::vector<Thread> some;
        for (size_t i : taken) some.push_back(std::move(threads[i]));
        ++divergent_;
        Exec(n->then_case, some);
        --divergent_;
        for (size_t j = 0; j < taken.size(); ++j) threads[taken[j]] = std::move(some[j]);
        return;
      }
      case StmtKind::kSeq:
        for (const codegen::Stmt& t : static_cast<const codegen::SeqNode*>(s.get())->stmts) Exec(t, threads);
        return;
      case StmtKind::kSync:
        if (divergent_ > 0) Fail("__syncthreads inside an if the threads of a block disagree on");
        ++epoch_;
        return;
      case StmtKind::kAllocate: {
        auto* n = static_cast<const codegen::AllocateNode*>(s.get());
        const codegen::BufferNode* b = n->buffer.get();
        const size_t size = static_cast<size_t>(b->NumElements());
        if (b->scope == codegen::BufferScope::kShared) {
          shared_[b] = Shared{std::vector<float>(size, kPoison), std::vector<int64_t>(size, -1),
                              std::vector<int64_t>(size, -1), std::vector<int64_t>(size, -1),
                              std::vector<int64_t>(size, -1), std::vector<int64_t>(size, 0)};
          Exec(n->body, threads);
          for (int64_t count : shared_.at(b).in_flight) {
            if (count > 0) {
              Fail("an asynchronous copy into shared " + b->name + " is still in flight at the end of its scope");
              break;
            }
          }
          shared_.erase(b);
          return;
        }
        if (b->scope != codegen::BufferScope::kLocal) {
          Fail("buffer " + b->name + " cannot be allocated in a GPU kernel");
          return;
        }
        for (Thread& t : threads) t.locals[b] = std::vector<float>(size, kPoison);
        Exec(n->body, threads);
        for (Thread& t : threads) t.locals.erase(b);
        return;
      }
    }
  }

  /// An asynchronous copy lands: a write of its element by the issuing thread, now.
  void Land(const PendingCopy& c, Thread& t) {
    auto it = shared_.find(c.buffer);
    if (it == shared_.end()) {
      Fail("an asynchronous copy into shared " + c.buffer->name + " landed after its scope ended");
      return;
    }
    Shared& s = it->second;
    --s.in_flight[c.flat];
    if (s.in_flight[c.flat] > 0) return;  // several copies to one element: the last one lands it
    if (s.read_epoch[c.flat] == epoch_ && s.reader[c.flat] != t.id) {
      Fail(absl::StrCat("race on shared ", c.buffer->name, "[", c.flat, "]: an asynchronous copy of thread ", t.id,
                        " lands on what another thread read since the last barrier"));
      return;
    }
    s.writer[c.flat] = t.id;
    s.write_epoch[c.flat] = epoch_;
    s.data[c.flat] = c.value;
  }

  std::unordered_map<const codegen::BufferNode*, std::vector<float>*> global_;
  std::unordered_map<const codegen::BufferNode*, Shared> shared_;
  int64_t epoch_ = 0;
  int divergent_ = 0;  // depth of ifs that only some threads of the block entered
  bool issuing_ = false;  // an asynchronous copy's destination: copies may share one (a spare row)
  std::string error_;
};

/// Runs `f` in the interpreter on `inputs` -- twice where it has scratch arguments (split-K's
/// workspace and counters; the second run on what the first left) -- with the output poisoned
/// (NaN) before each run. "" when every run matches `reference` (1e-4 relative + absolute),
/// leaves the inputs unchanged and zero-initialized scratch zero; else why not.
inline std::string RunAgainstReference(const codegen::LoweredFunc& f, const std::vector<std::vector<float>>& inputs,
                                       const std::vector<float>& reference) {
  std::vector<std::vector<float>> in = inputs, scratch;
  std::vector<float> out;
  std::vector<std::vector<float>*> args;
  for (auto& v : in) args.push_back(&v);
  args.push_back(&out);
  int runs = 1;
  for (const codegen::Buffer& b : f.args) {
    if (!b->scratch) continue;
    scratch.emplace_back(b->NumElements(), b->zero_init ? 0.0f : std::nanf(""));
    runs = 2;
  }
  for (auto& v : scratch) args.push_back(&v);
  for (int run = 1; run <= runs; ++run) {
    out.assign(reference.size(), std::nanf(""));  // an element never written shows
    absl::Status st = GpuInterpreter::Run(f, args);
    if (!st.ok()) return absl::StrCat("run ", run, ": ", st.ToString());
    for (size_t i = 0; i < out.size(); ++i) {
      if (!(std::abs(out[i] - reference[i]) <= 1e-4f + 1e-4f * std::abs(reference[i]))) {
        return absl::StrCat("run ", run, ": out[", i, "] = ", out[i], ", expected ", reference[i]);
      }
    }
    for (size_t a = 0; a < inputs.size(); ++a) {
      if (in[a] != inputs[a]) return absl::StrCat("run ", run, " changed input ", a);
    }
    size_t s = 0;
    for (const codegen::Buffer& b : f.args) {
      if (!b->scratch) continue;
      const std::vector<float>& v = scratch[s++];
      for (size_t i = 0; b->zero_init && i < v.size(); ++i) {
        if (v[i] != 0.0f) return absl::StrCat("run ", run, " left ", b->name, "[", i, "] = ", v[i]);
      }
    }
  }
  return "";
}

}  // namespace tune::test
