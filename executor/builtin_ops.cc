// The built-in CPU kernels: plain loops over row-major tensors that the compiler vectorizes,
// split over the runtime thread pool where there is enough work.
#include "executor/builtin_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor/max_pool.h"
#include "executor/node_context.h"
#include "graph/layout.h"
#include "codegen/runtime/runtime.h"

namespace tune::executor {
namespace {

using graph::DType;
using graph::Node;
using graph::Tensor;
using Shape = std::vector<int64_t>;

constexpr int kMaxRank = 8;
// Elements per parallel chunk of elementwise loops: below this a loop runs on one thread.
constexpr int64_t kChunk = 16384;

/// A kernel as a function of the node's data pointers, with everything else captured.
class FnKernel final : public OpKernel {
 public:
  using Fn = std::function<void(const void* const*, void* const*)>;
  explicit FnKernel(Fn fn) : fn_(std::move(fn)) {}
  void Run(const void* const* inputs, void* const* outputs) const override { fn_(inputs, outputs); }

 private:
  Fn fn_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> Make(FnKernel::Fn fn) {
  return std::unique_ptr<OpKernel>(std::make_unique<FnKernel>(std::move(fn)));
}

/// Runs f(i) for i in [0, n) on the runtime pool (serially for n <= 1 or one thread).
template <typename F>
void ParallelFor(int64_t n, const F& f) {
  if (n <= 1 || codegen::runtime::NumThreads() <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  tune_rt_parallel_for(
      n, [](int64_t i, void* closure) { (*static_cast<const F*>(closure))(i); }, const_cast<F*>(&f));
}

/// Runs f(begin, end) over [0, n) in chunks of kChunk elements, in parallel.
template <typename F>
void ParallelRange(int64_t n, const F& f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  ParallelFor(chunks, [&](int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

/// The product of s[begin, end) (end clamped to the rank).
int64_t Product(const Shape& s, int64_t begin = 0, int64_t end = kMaxRank + 2) {
  int64_t p = 1;
  const int64_t stop = std::min<int64_t>(end, static_cast<int64_t>(s.size()));
  for (int64_t i = std::max<int64_t>(begin, 0); i < stop; ++i) p *= s[i];
  return p;
}

std::string ShapeText(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

/// The node's context for messages and attributes (node_context.h), with its constant inputs.
struct Ctx : NodeContext {
  /// A constant int64 input's values (a 1-D list); nullopt when absent; error when not constant.
  absl::StatusOr<std::optional<Shape>> ConstInts(size_t i, const std::string& what) const {
    const Tensor* t = Input(i);
    if (t == nullptr) return std::optional<Shape>();
    if (!t->constant()) return Bad(what + " must be a constant");
    if (t->dtype != DType::kInt64) return Bad(what + " must be int64");
    return std::optional<Shape>(Shape(t->i64(), t->i64() + t->NumElements()));
  }
  absl::StatusOr<std::optional<float>> ConstScalar(size_t i, const std::string& what) const {
    const Tensor* t = Input(i);
    if (t == nullptr) return std::optional<float>();
    if (!t->constant()) return Bad(what + " must be a constant");
    if (t->NumElements() != 1) return Bad(what + " must be a scalar");
    if (t->dtype == DType::kFloat32) return std::optional<float>(t->f32()[0]);
    if (t->dtype == DType::kInt64) return std::optional<float>(static_cast<float>(t->i64()[0]));
    return Bad(what + " must be float or int64");
  }
  absl::StatusOr<int64_t> Axis(int64_t axis, int64_t rank) const {
    if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) return Bad(absl::StrCat("axis ", axis, " out of range for rank ", rank));
    return axis < 0 ? axis + rank : axis;
  }
  absl::Status Arity(size_t min_in, size_t max_in, size_t outs) const {
    size_t present = in.size();
    while (present > 0 && in[present - 1] == nullptr) --present;
    if (present < min_in || present > max_in || in.size() < min_in) {
      return Bad(absl::StrCat("takes ", min_in, min_in == max_in ? "" : absl::StrCat(" to ", max_in), " inputs, has ", present));
    }
    for (size_t i = 0; i < min_in; ++i) {
      if (in[i] == nullptr) return Bad(absl::StrCat("input ", i, " is required"));
    }
    if (out.size() < 1 || out.size() > outs || out[0] == nullptr) return Bad(absl::StrCat("has ", out.size(), " outputs"));
    return absl::OkStatus();
  }
  absl::Status DTypeIs(const Tensor* t, std::initializer_list<DType> ok, const std::string& what) const {
    for (DType d : ok) {
      if (t->dtype == d) return absl::OkStatus();
    }
    return Bad(absl::StrCat(what, " has dtype ", graph::DTypeName(t->dtype), ", which this kernel does not take"));
  }
  absl::Status OutShapeIs(const Shape& expected, size_t i = 0) const {
    if (out[i]->shape != expected) {
      return Bad(absl::StrCat("output ", ShapeText(out[i]->shape), " does not match the computed ", ShapeText(expected)));
    }
    return absl::OkStatus();
  }
};

// ---- Broadcasting ---------------------------------------------------------------------------

/// Strides of up to three inputs over a (collapsed) output iteration space; stride 0 along a
/// broadcast dimension.
struct Broadcast {
  int rank = 1;
  int64_t shape[kMaxRank] = {1};
  int64_t strides[3][kMaxRank] = {};
  int64_t total = 1;
  int inputs = 0;
};

/// numpy's broadcast of `shapes`; nullopt when they are incompatible.
std::optional<Shape> BroadcastShapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      const int64_t e = s[i];
      if (e == o || e == 1) continue;
      if (o == 1) o = e; else return std::nullopt;
    }
  }
  return out;
}

/// The iteration of `out` over `ins` broadcast to it, dims of extent 1 dropped and mergeable
/// neighbours merged. Requires each input to broadcast to `out` and the rank to fit.
Broadcast MakeBroadcast(const Shape& out, const std::vector<Shape>& ins) {
  const size_t rank = out.size();
  std::vector<Shape> strides;
  for (const auto& s : ins) {
    Shape st(rank, 0);
    int64_t stride = 1;
    for (size_t i = s.size(); i-- > 0;) {
      st[rank - s.size() + i] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
    strides.push_back(st);
  }
  // Keep dims of extent > 1, merging a dim into the previous kept one when every input is
  // contiguous (or broadcast) across both.
  std::vector<int64_t> shape;
  std::vector<Shape> kept(ins.size());
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < ins.size() && merge; ++k) merge = kept[k].back() == strides[k][d] * out[d];
    if (merge) {
      shape.back() *= out[d];
      for (size_t k = 0; k < ins.size(); ++k) kept[k].back() = strides[k][d];
    } else {
      shape.push_back(out[d]);
      for (size_t k = 0; k < ins.size(); ++k) kept[k].push_back(strides[k][d]);
    }
  }
  Broadcast b;
  b.inputs = static_cast<int>(ins.size());
  if (shape.empty()) {
    b.rank = 1;
    b.shape[0] = 1;
    for (int k = 0; k < b.inputs; ++k) b.strides[k][0] = 0;
    b.total = 1;
    return b;
  }
  b.rank = static_cast<int>(shape.size());
  b.total = 1;
  for (int d = 0; d < b.rank; ++d) {
    b.shape[d] = shape[d];
    b.total *= shape[d];
    for (int k = 0; k < b.inputs; ++k) b.strides[k][d] = kept[k][d];
  }
  return b;
}

/// Calls row(out_offset, in_offsets, n, inner_strides) for each innermost row of `b`.
template <typename F>
void ForEachRow(const Broadcast& b, const F& row) {
  if (b.total == 0) return;  // an empty output: no rows
  const int64_t inner = b.shape[b.rank - 1];
  const int64_t rows = b.total / inner;
  int64_t inner_strides[3] = {b.strides[0][b.rank - 1], b.strides[1][b.rank - 1], b.strides[2][b.rank - 1]};
  const int64_t rows_per_task = std::max<int64_t>(1, kChunk / std::max<int64_t>(inner, 1));
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  ParallelFor(tasks, [&](int64_t t) {
    for (int64_t r = t * rows_per_task; r < std::min(rows, (t + 1) * rows_per_task); ++r) {
      int64_t offsets[3] = {0, 0, 0};
      int64_t rem = r;
      for (int d = b.rank - 2; d >= 0; --d) {
        const int64_t i = rem % b.shape[d];
        rem /= b.shape[d];
        for (int k = 0; k < b.inputs; ++k) offsets[k] += i * b.strides[k][d];
      }
      row(r * inner, offsets, inner, inner_strides);
    }
  });
}

template <typename T, typename R, typename Op>
void BinaryRow(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n, const Op& op) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
  } else if (sa == 1) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], bv);
  } else if (sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(av, b[i]);
  } else {
    const R v = op(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

template <typename T, typename R, typename Op>
FnKernel::Fn BinaryFn(Broadcast b, Op op) {
  return [b, op](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    const T* y = static_cast<const T*>(in[1]);
    R* z = static_cast<R*>(out[0]);
    ForEachRow(b, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
      BinaryRow(x + off[0], s[0], y + off[1], s[1], z + o, n, op);
    });
  };
}

absl::StatusOr<std::unique_ptr<OpKernel>> Binary(const Ctx& c) {
  if (auto st = c.Arity(2, 2, 1); !st.ok()) return st;
  const Tensor& a = *c.in[0];
  const Tensor& b = *c.in[1];
  if (a.dtype != b.dtype) return c.Bad("inputs of different dtypes");
  auto shape = BroadcastShapes({a.shape, b.shape});
  if (!shape) return c.Bad("shapes " + ShapeText(a.shape) + " and " + ShapeText(b.shape) + " do not broadcast");
  if (auto st = c.OutShapeIs(*shape); !st.ok()) return st;
  if (shape->size() > kMaxRank) return c.Bad("rank above 8");
  Broadcast bc = MakeBroadcast(*shape, {a.shape, b.shape});
  const std::string& op = c.node.op;
  if (op == "Equal") {
    if (c.out[0]->dtype != DType::kBool) return c.Bad("output must be bool");
    auto eq = [](auto x, auto y) -> bool { return x == y; };
    switch (a.dtype) {
      case DType::kFloat32: return Make(BinaryFn<float, bool>(bc, eq));
      case DType::kInt64: return Make(BinaryFn<int64_t, bool>(bc, eq));
      case DType::kBool: return Make(BinaryFn<bool, bool>(bc, eq));
    }
  }
  if (c.out[0]->dtype != a.dtype) return c.Bad("output dtype differs from the inputs'");
  if (a.dtype == DType::kFloat32) {
    if (op == "Add") return Make(BinaryFn<float, float>(bc, [](float x, float y) { return x + y; }));
    if (op == "Sub") return Make(BinaryFn<float, float>(bc, [](float x, float y) { return x - y; }));
    if (op == "Mul") return Make(BinaryFn<float, float>(bc, [](float x, float y) { return x * y; }));
    if (op == "Div") return Make(BinaryFn<float, float>(bc, [](float x, float y) { return x / y; }));
    if (op == "Pow") {
      if (b.constant() && b.NumElements() == 1 && b.f32()[0] == 2.0f) {
        return Make(BinaryFn<float, float>(bc, [](float x, float) { return x * x; }));
      }
      return Make(BinaryFn<float, float>(bc, [](float x, float y) { return std::pow(x, y); }));
    }
  }
  if (a.dtype == DType::kInt64) {
    // Two's complement wrap-around (as onnxruntime's int64 arithmetic), never signed overflow;
    // x / 0 is 0 and INT64_MIN / -1 wraps to INT64_MIN rather than trapping.
    auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
    if (op == "Add") {
      return Make(BinaryFn<int64_t, int64_t>(bc, [wrap](int64_t x, int64_t y) { return wrap(uint64_t(x) + uint64_t(y)); }));
    }
    if (op == "Sub") {
      return Make(BinaryFn<int64_t, int64_t>(bc, [wrap](int64_t x, int64_t y) { return wrap(uint64_t(x) - uint64_t(y)); }));
    }
    if (op == "Mul") {
      return Make(BinaryFn<int64_t, int64_t>(bc, [wrap](int64_t x, int64_t y) { return wrap(uint64_t(x) * uint64_t(y)); }));
    }
    if (op == "Div") {
      return Make(BinaryFn<int64_t, int64_t>(bc, [wrap](int64_t x, int64_t y) {
        return y == 0 ? 0 : y == -1 ? wrap(0 - uint64_t(x)) : x / y;
      }));
    }
  }
  return c.Bad(absl::StrCat("dtype ", graph::DTypeName(a.dtype), " is not supported"));
}

template <typename T>
FnKernel::Fn WhereFn(Broadcast b) {
  return [b](const void* const* in, void* const* out) {
    const bool* cond = static_cast<const bool*>(in[0]);
    const T* x = static_cast<const T*>(in[1]);
    const T* y = static_cast<const T*>(in[2]);
    T* z = static_cast<T*>(out[0]);
    ForEachRow(b, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
      const bool* cr = cond + off[0];
      const T* xr = x + off[1];
      const T* yr = y + off[2];
      for (int64_t i = 0; i < n; ++i) z[o + i] = cr[i * s[0]] ? xr[i * s[1]] : yr[i * s[2]];
    });
  };
}

absl::StatusOr<std::unique_ptr<OpKernel>> Where(const Ctx& c) {
  if (auto st = c.Arity(3, 3, 1); !st.ok()) return st;
  if (c.in[0]->dtype != DType::kBool) return c.Bad("condition must be bool");
  if (c.in[1]->dtype != c.in[2]->dtype || c.out[0]->dtype != c.in[1]->dtype) return c.Bad("X, Y and the output differ in dtype");
  auto shape = BroadcastShapes({c.in[0]->shape, c.in[1]->shape, c.in[2]->shape});
  if (!shape) return c.Bad("shapes do not broadcast");
  if (auto st = c.OutShapeIs(*shape); !st.ok()) return st;
  if (shape->size() > kMaxRank) return c.Bad("rank above 8");
  Broadcast bc = MakeBroadcast(*shape, {c.in[0]->shape, c.in[1]->shape, c.in[2]->shape});
  switch (c.in[1]->dtype) {
    case DType::kFloat32: return Make(WhereFn<float>(bc));
    case DType::kInt64: return Make(WhereFn<int64_t>(bc));
    case DType::kBool: return Make(WhereFn<bool>(bc));
  }
  return c.Bad("bad dtype");
}

template <typename T>
FnKernel::Fn ExpandFn(Broadcast b) {
  return [b](const void* const* in, void* const* out) {
    const T* x = static_cast<const T*>(in[0]);
    T* z = static_cast<T*>(out[0]);
    ForEachRow(b, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
      const T* xr = x + off[0];
      if (s[0] == 1) {
        std::memcpy(z + o, xr, n * sizeof(T));
      } else {
        for (int64_t i = 0; i < n; ++i) z[o + i] = xr[i * s[0]];
      }
    });
  };
}

absl::StatusOr<std::unique_ptr<OpKernel>> Expand(const Ctx& c) {
  if (auto st = c.Arity(2, 2, 1); !st.ok()) return st;
  auto target = c.ConstInts(1, "shape");
  if (!target.ok()) return target.status();
  auto shape = BroadcastShapes({c.in[0]->shape, **target});
  if (!shape) return c.Bad("shape does not broadcast");
  if (auto st = c.OutShapeIs(*shape); !st.ok()) return st;
  if (shape->size() > kMaxRank) return c.Bad("rank above 8");
  if (c.out[0]->dtype != c.in[0]->dtype) return c.Bad("output dtype differs");
  Broadcast bc = MakeBroadcast(*shape, {c.in[0]->shape});
  switch (c.in[0]->dtype) {
    case DType::kFloat32: return Make(ExpandFn<float>(bc));
    case DType::kInt64: return Make(ExpandFn<int64_t>(bc));
    case DType::kBool: return Make(ExpandFn<bool>(bc));
  }
  return c.Bad("bad dtype");
}

// ---- Unary ----------------------------------------------------------------------------------

template <typename Op>
FnKernel::Fn UnaryFn(int64_t n, Op op) {
  return [n, op](const void* const* in, void* const* out) {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    ParallelRange(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = op(x[i]);
    });
  };
}

absl::StatusOr<std::unique_ptr<OpKernel>> Unary(const Ctx& c) {
  const std::string& op = c.node.op;
  if (auto st = c.Arity(1, op == "Clip" ? 3 : 1, 1); !st.ok()) return st;
  const Tensor& x = *c.in[0];
  if (auto st = c.OutShapeIs(x.shape); !st.ok()) return st;
  const int64_t n = x.NumElements();
  if (op == "Neg" && x.dtype == DType::kInt64) {
    return Make([n](const void* const* in, void* const* out) {
      const int64_t* a = static_cast<const int64_t*>(in[0]);
      int64_t* b = static_cast<int64_t*>(out[0]);
      for (int64_t i = 0; i < n; ++i) b[i] = -a[i];
    });
  }
  if (auto st = c.DTypeIs(&x, {DType::kFloat32}, "the input"); !st.ok()) return st;
  if (c.out[0]->dtype != DType::kFloat32) return c.Bad("output must be float32");
  if (op == "Relu") return Make(UnaryFn(n, [](float v) { return v > 0 ? v : 0.0f; }));
  if (op == "Neg") return Make(UnaryFn(n, [](float v) { return -v; }));
  if (op == "Sqrt") return Make(UnaryFn(n, [](float v) { return std::sqrt(v); }));
  if (op == "Exp") return Make(UnaryFn(n, [](float v) { return std::exp(v); }));
  if (op == "Tanh") return Make(UnaryFn(n, [](float v) { return std::tanh(v); }));
  if (op == "Erf") return Make(UnaryFn(n, [](float v) { return std::erf(v); }));
  if (op == "Sigmoid") return Make(UnaryFn(n, [](float v) { return 1.0f / (1.0f + std::exp(-v)); }));
  if (op == "HardSwish") {
    return Make(UnaryFn(n, [](float v) { return v * std::min(1.0f, std::max(0.0f, v / 6.0f + 0.5f)); }));
  }
  if (op == "HardSigmoid") {
    const float alpha = c.Float("alpha", 0.2f), beta = c.Float("beta", 0.5f);
    return Make(UnaryFn(n, [alpha, beta](float v) { return std::min(1.0f, std::max(0.0f, alpha * v + beta)); }));
  }
  if (op == "Gelu") {
    const std::string approx = c.String("approximate", "none");
    if (approx == "tanh") {
      return Make(UnaryFn(n, [](float v) {
        constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
        return 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
      }));
    }
    if (approx != "none") return c.Bad("approximate='" + approx + "' is not supported");
    return Make(UnaryFn(n, [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f)); }));
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (c.opset < 11) {
      lo = c.Float("min", lo);
      hi = c.Float("max", hi);
    } else {
      auto min = c.ConstScalar(1, "min");
      if (!min.ok()) return min.status();
      auto max = c.ConstScalar(2, "max");
      if (!max.ok()) return max.status();
      if (*min) lo = **min;
      if (*max) hi = **max;
    }
    return Make(UnaryFn(n, [lo, hi](float v) { return std::min(hi, std::max(lo, v)); }));
  }
  return c.Bad("not a unary op");
}

absl::StatusOr<std::unique_ptr<OpKernel>> Cast(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  if (auto st = c.OutShapeIs(c.in[0]->shape); !st.ok()) return st;
  const DType from = c.in[0]->dtype, to = c.out[0]->dtype;
  const int64_t n = c.in[0]->NumElements();
  auto cast = [n](auto* src_type, auto* dst_type) -> FnKernel::Fn {
    using S = std::remove_pointer_t<decltype(src_type)>;
    using D = std::remove_pointer_t<decltype(dst_type)>;
    return [n](const void* const* in, void* const* out) {
      const S* s = static_cast<const S*>(in[0]);
      D* d = static_cast<D*>(out[0]);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
    };
  };
  auto with_dst = [&](auto* src) -> FnKernel::Fn {
    switch (to) {
      case DType::kFloat32: return cast(src, static_cast<float*>(nullptr));
      case DType::kInt64: return cast(src, static_cast<int64_t*>(nullptr));
      case DType::kBool: return cast(src, static_cast<bool*>(nullptr));
    }
    return nullptr;
  };
  switch (from) {
    case DType::kFloat32: return Make(with_dst(static_cast<float*>(nullptr)));
    case DType::kInt64: return Make(with_dst(static_cast<int64_t*>(nullptr)));
    case DType::kBool: return Make(with_dst(static_cast<bool*>(nullptr)));
  }
  return c.Bad("bad dtype");
}

// ---- Matrix products ------------------------------------------------------------------------

/// C[M,N] (+)= A[M,K] B[K,N] for one row i: k outer, j inner (vectorized over j).
inline void MatRow(const float* a_row, const float* b, float* c_row, int64_t n, int64_t k) {
  for (int64_t j = 0; j < n; ++j) c_row[j] = 0;
  for (int64_t p = 0; p < k; ++p) {
    const float av = a_row[p];
    const float* b_row = b + p * n;
    for (int64_t j = 0; j < n; ++j) c_row[j] += av * b_row[j];
  }
}

absl::StatusOr<std::unique_ptr<OpKernel>> MatMul(const Ctx& c) {
  if (auto st = c.Arity(2, 2, 1); !st.ok()) return st;
  for (int i = 0; i < 2; ++i) {
    if (auto st = c.DTypeIs(c.in[i], {DType::kFloat32}, "an input"); !st.ok()) return st;
    if (c.in[i]->shape.empty()) return c.Bad("a scalar operand");
  }
  Shape a = c.in[0]->shape, b = c.in[1]->shape;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) return c.Bad("inner extents " + ShapeText(c.in[0]->shape) + " x " + ShapeText(c.in[1]->shape) + " differ");
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes({ab, bb});
  if (!batch) return c.Bad("batch dimensions do not broadcast");
  Shape out = *batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  if (batch->size() > kMaxRank) return c.Bad("rank above 10");
  // Matrix offsets (in matrices) of A and B per output batch index: one entry per output
  // matrix, none when the output is empty (its batch extents may still multiply to 2^40).
  const int64_t batches = Product(*batch);
  if (m == 0 || n == 0) {
    return Make([](const void* const*, void* const*) {});
  }
  std::vector<int64_t> a_off(batches), b_off(batches);
  {
    Shape ab_full(batch->size() - ab.size(), 1), bb_full(batch->size() - bb.size(), 1);
    ab_full.insert(ab_full.end(), ab.begin(), ab.end());
    bb_full.insert(bb_full.end(), bb.begin(), bb.end());
    for (int64_t i = 0; i < batches; ++i) {
      int64_t rem = i, sa = 1, sb = 1, oa = 0, ob = 0;
      for (size_t d = batch->size(); d-- > 0;) {
        const int64_t idx = rem % (*batch)[d];
        rem /= (*batch)[d];
        if (ab_full[d] != 1) oa += idx * sa;
        if (bb_full[d] != 1) ob += idx * sb;
        sa *= ab_full[d];
        sb *= bb_full[d];
      }
      a_off[i] = oa;
      b_off[i] = ob;
    }
  }
  return Make([=](const void* const* in, void* const* outs) {
    const float* A = static_cast<const float*>(in[0]);
    const float* B = static_cast<const float*>(in[1]);
    float* C = static_cast<float*>(outs[0]);
    ParallelFor(batches * m, [&](int64_t r) {
      const int64_t bi = r / m, i = r % m;
      MatRow(A + a_off[bi] * m * k + i * k, B + b_off[bi] * k * n, C + (bi * m + i) * n, n, k);
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Gemm(const Ctx& c) {
  if (auto st = c.Arity(2, 3, 1); !st.ok()) return st;
  for (size_t i = 0; i < 3; ++i) {
    if (c.Input(i) == nullptr) continue;
    if (auto st = c.DTypeIs(c.in[i], {DType::kFloat32}, "an input"); !st.ok()) return st;
  }
  if (c.in[0]->shape.size() != 2 || c.in[1]->shape.size() != 2) return c.Bad("A and B must be 2-D");
  const bool ta = c.Int("transA", 0) != 0, tb = c.Int("transB", 0) != 0;
  const float alpha = c.Float("alpha", 1.0f), beta = c.Float("beta", 1.0f);
  const int64_t m = ta ? c.in[0]->shape[1] : c.in[0]->shape[0];
  const int64_t k = ta ? c.in[0]->shape[0] : c.in[0]->shape[1];
  const int64_t kb = tb ? c.in[1]->shape[1] : c.in[1]->shape[0];
  const int64_t n = tb ? c.in[1]->shape[0] : c.in[1]->shape[1];
  if (k != kb) return c.Bad("inner extents differ");
  if (auto st = c.OutShapeIs({m, n}); !st.ok()) return st;
  int64_t c_rs = 0, c_cs = 0;  // strides of C broadcast to [M, N]
  const bool has_c = c.Input(2) != nullptr;
  if (has_c) {
    Shape cs = c.in[2]->shape;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    if (cs.size() != 2 || (cs[0] != 1 && cs[0] != m) || (cs[1] != 1 && cs[1] != n)) return c.Bad("C does not broadcast to [M, N]");
    c_cs = cs[1] == 1 ? 0 : 1;
    c_rs = cs[0] == 1 ? 0 : cs[1];
  }
  // B as [K, N] row-major: transposed once here when constant, read strided otherwise.
  std::shared_ptr<std::vector<float>> b_kn;
  if (tb && c.in[1]->constant()) {
    b_kn = std::make_shared<std::vector<float>>(k * n);
    const float* w = c.in[1]->f32();
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) (*b_kn)[p * n + j] = w[j * k + p];
  }
  return Make([=](const void* const* in, void* const* outs) {
    const float* A = static_cast<const float*>(in[0]);
    const float* B = b_kn ? b_kn->data() : static_cast<const float*>(in[1]);
    const float* C = has_c ? static_cast<const float*>(in[2]) : nullptr;
    float* Y = static_cast<float*>(outs[0]);
    const bool b_transposed = tb && !b_kn;
    ParallelFor(m, [&](int64_t i) {
      float* y = Y + i * n;
      for (int64_t j = 0; j < n; ++j) y[j] = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? A[p * m + i] : A[i * k + p];
        if (b_transposed) {
          for (int64_t j = 0; j < n; ++j) y[j] += av * B[j * k + p];
        } else {
          const float* b_row = B + p * n;
          for (int64_t j = 0; j < n; ++j) y[j] += av * b_row[j];
        }
      }
      for (int64_t j = 0; j < n; ++j) y[j] = alpha * y[j] + (C ? beta * C[i * c_rs + j * c_cs] : 0.0f);
    });
  });
}

// ---- Convolution and pooling ----------------------------------------------------------------

/// Pads (top, left, bottom, right) of a 2-D window op from `pads` or `auto_pad`.
absl::StatusOr<std::array<int64_t, 4>> WindowPads(const Ctx& c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                                                  int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
  const std::string auto_pad = c.String("auto_pad", "NOTSET");
  std::array<int64_t, 4> p = {0, 0, 0, 0};
  if (auto_pad == "NOTSET") {
    if (auto pads = c.Ints("pads")) {
      if (pads->size() != 4) return c.Bad("pads must have 4 values");
      for (int i = 0; i < 4; ++i) {
        if ((*pads)[i] < 0) return c.Bad("negative pads");
        p[i] = (*pads)[i];
      }
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t extents[2] = {h, w}, ks[2] = {kh, kw}, ss[2] = {sh, sw}, ds[2] = {dh, dw};
    for (int i = 0; i < 2; ++i) {
      const int64_t out = (extents[i] + ss[i] - 1) / ss[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * ss[i] + (ks[i] - 1) * ds[i] + 1 - extents[i]);
      const int64_t small = total / 2;
      p[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      p[i + 2] = total - p[i];
    }
  } else if (auto_pad != "VALID") {
    return c.Bad("auto_pad " + auto_pad + " is not supported");
  }
  return p;
}

absl::StatusOr<std::unique_ptr<OpKernel>> Conv(const Ctx& c) {
  if (auto st = c.Arity(2, 3, 1); !st.ok()) return st;
  for (size_t i = 0; i < 3; ++i) {
    if (c.Input(i) == nullptr) continue;
    if (auto st = c.DTypeIs(c.in[i], {DType::kFloat32}, "an input"); !st.ok()) return st;
  }
  const Shape& x = c.in[0]->shape;
  const Shape& wt = c.in[1]->shape;
  if (x.size() != 4 || wt.size() != 4) return c.Bad("only 2-D convolutions (NCHW) are supported");
  const int64_t groups = c.Int("group", 1);
  const int64_t batch = x[0], ch = x[1], h = x[2], w = x[3], oc = wt[0], kh = wt[2], kw = wt[3];
  if (groups < 1 || ch % groups != 0 || oc % groups != 0 || wt[1] != ch / groups) return c.Bad("channels and groups disagree");
  Shape strides = c.Ints("strides").value_or(Shape{1, 1}), dil = c.Ints("dilations").value_or(Shape{1, 1});
  if (strides.size() != 2 || dil.size() != 2 || strides[0] < 1 || strides[1] < 1 || dil[0] < 1 || dil[1] < 1) {
    return c.Bad("bad strides or dilations");
  }
  auto pads = WindowPads(c, h, w, kh, kw, strides[0], strides[1], dil[0], dil[1]);
  if (!pads.ok()) return pads.status();
  const auto [pt, pl, pb, pr] = *pads;
  const int64_t sh = strides[0], sw = strides[1], dh = dil[0], dw = dil[1];
  const int64_t oh = (h + pt + pb - (kh - 1) * dh - 1) / sh + 1, ow = (w + pl + pr - (kw - 1) * dw - 1) / sw + 1;
  if (oh < 1 || ow < 1) return c.Bad("output would be empty");
  if (c.Input(2) != nullptr && c.in[2]->NumElements() != oc) return c.Bad("bias size differs from the output channels");
  if (auto st = c.OutShapeIs({batch, oc, oh, ow}); !st.ok()) return st;
  const bool has_bias = c.Input(2) != nullptr;
  const int64_t cg = ch / groups, ocg = oc / groups;
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    const float* W = static_cast<const float*>(in[1]);
    const float* B = has_bias ? static_cast<const float*>(in[2]) : nullptr;
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(batch * oc, [&](int64_t t) {
      const int64_t b = t / oc, o = t % oc, g = o / ocg;
      float* y = Y + t * oh * ow;
      const float init = B ? B[o] : 0.0f;
      for (int64_t i = 0; i < oh * ow; ++i) y[i] = init;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* xp = X + (b * ch + g * cg + ci) * h * w;
        for (int64_t r = 0; r < kh; ++r) {
          for (int64_t s = 0; s < kw; ++s) {
            const float wv = W[((o * cg + ci) * kh + r) * kw + s];
            // Output columns whose input column lies inside the image.
            const int64_t off_w = s * dw - pl;
            int64_t q0 = off_w >= 0 ? 0 : (-off_w + sw - 1) / sw;
            int64_t q1 = w - 1 - off_w < 0 ? -1 : (w - 1 - off_w) / sw;
            q1 = std::min(q1, ow - 1);
            for (int64_t p = 0; p < oh; ++p) {
              const int64_t ih = p * sh + r * dh - pt;
              if (ih < 0 || ih >= h) continue;
              const float* xr = xp + ih * w + off_w;
              float* yr = y + p * ow;
              if (sw == 1) {
                for (int64_t q = q0; q <= q1; ++q) yr[q] += wv * xr[q];
              } else {
                for (int64_t q = q0; q <= q1; ++q) yr[q] += wv * xr[q * sw];
              }
            }
          }
        }
      }
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Pool(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  if (auto st = c.DTypeIs(c.in[0], {DType::kFloat32}, "the input"); !st.ok()) return st;
  const bool is_max = c.node.op == "MaxPool";
  const Shape& x = c.in[0]->shape;
  if (x.size() != 4) return c.Bad("only 2-D pooling (NCHW) is supported");
  auto ks = c.Ints("kernel_shape");
  if (!ks || ks->size() != 2 || (*ks)[0] < 1 || (*ks)[1] < 1) return c.Bad("kernel_shape must have 2 positive values");
  Shape strides = c.Ints("strides").value_or(Shape{1, 1}), dil = c.Ints("dilations").value_or(Shape{1, 1});
  if (strides.size() != 2 || dil.size() != 2 || strides[0] < 1 || strides[1] < 1 || dil[0] < 1 || dil[1] < 1) {
    return c.Bad("bad strides or dilations");
  }
  const int64_t h = x[2], w = x[3], kh = (*ks)[0], kw = (*ks)[1], sh = strides[0], sw = strides[1], dh = dil[0], dw = dil[1];
  auto pads = WindowPads(c, h, w, kh, kw, sh, sw, dh, dw);
  if (!pads.ok()) return pads.status();
  const auto [pt, pl, pb, pr] = *pads;
  const bool ceil_mode = c.Int("ceil_mode", 0) != 0;
  const bool include_pad = c.Int("count_include_pad", 0) != 0;
  auto out_extent = [&](int64_t in, int64_t pad, int64_t k, int64_t s, int64_t d) {
    const int64_t span = in + pad - (k - 1) * d - 1;
    return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  };
  int64_t oh = out_extent(h, pt + pb, kh, sh, dh), ow = out_extent(w, pl + pr, kw, sw, dw);
  if (ceil_mode) {  // the last window must start inside the input or its leading padding
    if ((oh - 1) * sh >= h + pt) --oh;
    if ((ow - 1) * sw >= w + pl) --ow;
  }
  if (c.out.size() > 1 && c.out[1] != nullptr) return c.Bad("the Indices output is not supported");
  if (auto st = c.OutShapeIs({x[0], x[1], oh, ow}); !st.ok()) return st;
  const int64_t planes = x[0] * x[1];
  if (is_max) {
    const PoolWindow window{h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl};
    return Make([=](const void* const* in, void* const* outs) {
      const float* X = static_cast<const float*>(in[0]);
      float* Y = static_cast<float*>(outs[0]);
      ParallelFor(planes, [&](int64_t t) {
        thread_local std::vector<float> row;
        if (static_cast<int64_t>(row.size()) < w) row.resize(w);
        MaxPoolPlane(X + t * h * w, Y + t * oh * ow, window, row.data());
      });
    });
  }
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(planes, [&](int64_t t) {
      const float* xp = X + t * h * w;
      float* yp = Y + t * oh * ow;
      for (int64_t p = 0; p < oh; ++p) {
        const int64_t h0 = p * sh - pt;
        for (int64_t q = 0; q < ow; ++q) {
          const int64_t w0 = q * sw - pl;
          const int64_t h1 = std::min(h0 + kh, h + pb), w1 = std::min(w0 + kw, w + pr);
          const int64_t hs = std::max<int64_t>(h0, 0), he = std::min(h1, h), ws = std::max<int64_t>(w0, 0), we = std::min(w1, w);
          float sum = 0;
          for (int64_t ih = hs; ih < he; ++ih)
            for (int64_t iw = ws; iw < we; ++iw) sum += xp[ih * w + iw];
          const int64_t count = include_pad ? (h1 - h0) * (w1 - w0) : (he - hs) * (we - ws);
          yp[p * ow + q] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        }
      }
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> GlobalAveragePool(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  if (auto st = c.DTypeIs(c.in[0], {DType::kFloat32}, "the input"); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  if (x.size() < 3) return c.Bad("input must have spatial dimensions");
  Shape out = {x[0], x[1]};
  out.resize(x.size(), 1);
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  const int64_t planes = x[0] * x[1], size = Product(x, 2);
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(planes, [&](int64_t t) {
      float sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += X[t * size + i];
      Y[t] = sum / static_cast<float>(size);
    });
  });
}

// ---- Reductions and normalizations ----------------------------------------------------------

absl::StatusOr<std::unique_ptr<OpKernel>> Reduce(const Ctx& c) {
  if (auto st = c.Arity(1, 2, 1); !st.ok()) return st;
  if (auto st = c.DTypeIs(c.in[0], {DType::kFloat32}, "the input"); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  std::optional<Shape> axes = c.Ints("axes");
  if (c.Input(1) != nullptr) {
    auto given = c.ConstInts(1, "axes");
    if (!given.ok()) return given.status();
    axes = *given;
  }
  const bool keep = c.Int("keepdims", 1) != 0;
  const bool mean = c.node.op == "ReduceMean";
  std::vector<bool> reduced(rank, false);
  if (!axes || axes->empty()) {
    if (c.Int("noop_with_empty_axes", 0) != 0) {
      if (auto st = c.OutShapeIs(x); !st.ok()) return st;
      const int64_t n = c.in[0]->NumElements();
      return Make([n](const void* const* in, void* const* outs) { std::memcpy(outs[0], in[0], n * sizeof(float)); });
    }
    reduced.assign(rank, true);
  } else {
    for (int64_t a : *axes) {
      auto ax = c.Axis(a, rank);
      if (!ax.ok()) return ax.status();
      reduced[*ax] = true;
    }
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) out.push_back(x[d]);
    else if (keep) out.push_back(1);
  }
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  // Merge runs of dims (extent-1 dims dropped) into alternating kept/reduced blocks.
  std::vector<std::pair<int64_t, bool>> blocks;
  for (int64_t d = 0; d < rank; ++d) {
    if (x[d] == 1) continue;
    if (!blocks.empty() && blocks.back().second == reduced[d]) blocks.back().first *= x[d];
    else blocks.push_back({x[d], reduced[d]});
  }
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) count *= reduced[d] ? x[d] : 1;
  const float scale = mean ? 1.0f / static_cast<float>(count) : 1.0f;
  const int64_t n_in = c.in[0]->NumElements(), n_out = Product(out);
  // [outer, R, inner] when the reduced dims form one block.
  int reduced_blocks = 0;
  for (auto& b : blocks) reduced_blocks += b.second ? 1 : 0;
  if (reduced_blocks <= 1) {
    int64_t outer = 1, r = 1, inner = 1;
    bool seen = false;
    for (auto& [extent, red] : blocks) {
      if (red) { r = extent; seen = true; }
      else if (seen) inner *= extent;
      else outer *= extent;
    }
    return Make([=](const void* const* in, void* const* outs) {
      const float* X = static_cast<const float*>(in[0]);
      float* Y = static_cast<float*>(outs[0]);
      ParallelFor(outer, [&](int64_t o) {
        float* y = Y + o * inner;
        const float* xo = X + o * r * inner;
        if (inner == 1) {
          float sum = 0;
          for (int64_t i = 0; i < r; ++i) sum += xo[i];
          y[0] = sum * scale;
          return;
        }
        for (int64_t i = 0; i < inner; ++i) y[i] = 0;
        for (int64_t j = 0; j < r; ++j)
          for (int64_t i = 0; i < inner; ++i) y[i] += xo[j * inner + i];
        for (int64_t i = 0; i < inner; ++i) y[i] *= scale;
      });
    });
  }
  // General case: every input element added into its output element (one thread).
  std::vector<int64_t> extents, out_strides;
  {
    int64_t stride = 1;
    std::vector<int64_t> st(blocks.size());
    for (size_t i = blocks.size(); i-- > 0;) {
      st[i] = blocks[i].second ? 0 : stride;
      if (!blocks[i].second) stride *= blocks[i].first;
    }
    for (size_t i = 0; i < blocks.size(); ++i) {
      extents.push_back(blocks[i].first);
      out_strides.push_back(st[i]);
    }
  }
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    float* Y = static_cast<float*>(outs[0]);
    for (int64_t i = 0; i < n_out; ++i) Y[i] = 0;
    int64_t idx[kMaxRank] = {};
    int64_t o = 0;
    const int nb = static_cast<int>(extents.size());
    for (int64_t i = 0; i < n_in; ++i) {
      Y[o] += X[i];
      for (int d = nb - 1; d >= 0; --d) {
        o += out_strides[d];
        if (++idx[d] < extents[d]) break;
        o -= out_strides[d] * extents[d];
        idx[d] = 0;
      }
    }
    for (int64_t i = 0; i < n_out; ++i) Y[i] *= scale;
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Softmax(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  if (auto st = c.DTypeIs(c.in[0], {DType::kFloat32}, "the input"); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  if (auto st = c.OutShapeIs(x); !st.ok()) return st;
  const int64_t rank = static_cast<int64_t>(x.size());
  auto axis = c.Axis(c.Int("axis", c.opset >= 13 ? -1 : 1), rank);
  if (!axis.ok()) return axis.status();
  int64_t outer = Product(x, 0, *axis), r, inner;
  if (c.opset >= 13) {
    r = rank ? x[*axis] : 1;
    inner = Product(x, *axis + 1);
  } else {
    r = Product(x, *axis);
    inner = 1;
  }
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(outer * inner, [&](int64_t t) {
      const int64_t o = t / inner, i = t % inner;
      const float* xr = X + o * r * inner + i;
      float* yr = Y + o * r * inner + i;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < r; ++j) m = std::max(m, xr[j * inner]);
      float sum = 0;
      for (int64_t j = 0; j < r; ++j) {
        const float e = std::exp(xr[j * inner] - m);
        yr[j * inner] = e;
        sum += e;
      }
      const float s = 1.0f / sum;
      for (int64_t j = 0; j < r; ++j) yr[j * inner] *= s;
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> LayerNorm(const Ctx& c) {
  if (auto st = c.Arity(2, 3, 3); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  auto axis = c.Axis(c.Int("axis", -1), rank);
  if (!axis.ok()) return axis.status();
  const float eps = c.Float("epsilon", 1e-5f);
  const int64_t outer = Product(x, 0, *axis), r = Product(x, *axis);
  for (size_t i = 0; i < 3; ++i) {
    if (c.Input(i) == nullptr) continue;
    if (auto st = c.DTypeIs(c.in[i], {DType::kFloat32}, "an input"); !st.ok()) return st;
    if (i > 0 && c.in[i]->NumElements() != r) return c.Bad("scale and bias must have the normalized shape");
  }
  if (auto st = c.OutShapeIs(x); !st.ok()) return st;
  const bool has_bias = c.Input(2) != nullptr;
  const bool mean_out = c.out.size() > 1 && c.out[1] != nullptr, inv_out = c.out.size() > 2 && c.out[2] != nullptr;
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    const float* S = static_cast<const float*>(in[1]);
    const float* B = has_bias ? static_cast<const float*>(in[2]) : nullptr;
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(outer, [&](int64_t o) {
      const float* xr = X + o * r;
      float* yr = Y + o * r;
      float mean = 0;
      for (int64_t j = 0; j < r; ++j) mean += xr[j];
      mean /= static_cast<float>(r);
      float var = 0;
      for (int64_t j = 0; j < r; ++j) var += (xr[j] - mean) * (xr[j] - mean);
      var /= static_cast<float>(r);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (int64_t j = 0; j < r; ++j) yr[j] = (xr[j] - mean) * inv * S[j] + (B ? B[j] : 0.0f);
      if (mean_out) static_cast<float*>(outs[1])[o] = mean;
      if (inv_out) static_cast<float*>(outs[2])[o] = inv;
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> BatchNorm(const Ctx& c) {
  if (auto st = c.Arity(5, 5, 1); !st.ok()) return st;
  if (c.Int("training_mode", 0) != 0) return c.Bad("training_mode is not supported");
  const Shape& x = c.in[0]->shape;
  if (x.size() < 2) return c.Bad("input must be at least 2-D");
  for (int i = 0; i < 5; ++i) {
    if (auto st = c.DTypeIs(c.in[i], {DType::kFloat32}, "an input"); !st.ok()) return st;
    if (i > 0 && c.in[i]->NumElements() != x[1]) return c.Bad("per-channel inputs must have C elements");
  }
  if (auto st = c.OutShapeIs(x); !st.ok()) return st;
  const float eps = c.Float("epsilon", 1e-5f);
  const int64_t batch = x[0], ch = x[1], size = Product(x, 2);
  return Make([=](const void* const* in, void* const* outs) {
    const float* X = static_cast<const float*>(in[0]);
    const float* S = static_cast<const float*>(in[1]);
    const float* B = static_cast<const float*>(in[2]);
    const float* M = static_cast<const float*>(in[3]);
    const float* V = static_cast<const float*>(in[4]);
    float* Y = static_cast<float*>(outs[0]);
    ParallelFor(batch * ch, [&](int64_t t) {
      const int64_t ci = t % ch;
      const float a = S[ci] / std::sqrt(V[ci] + eps), b = B[ci] - M[ci] * a;
      for (int64_t i = 0; i < size; ++i) Y[t * size + i] = X[t * size + i] * a + b;
    });
  });
}

// ---- Data movement --------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<OpKernel>> Transpose(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape perm = c.Ints("perm").value_or(Shape{});
  if (perm.empty()) {
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank || rank > kMaxRank) return c.Bad("perm does not match the rank");
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return c.Bad("perm is not a permutation");
    seen[p] = true;
  }
  Shape out(rank), in_strides(rank, 1);
  for (int64_t d = rank - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * x[d];
  for (int64_t d = 0; d < rank; ++d) out[d] = x[perm[d]];
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  if (c.out[0]->dtype != c.in[0]->dtype) return c.Bad("output dtype differs");
  // The output as a broadcast-free iteration with the input's permuted strides.
  Broadcast b;
  b.inputs = 1;
  b.rank = std::max<int>(1, static_cast<int>(rank));
  b.total = Product(out);
  b.shape[0] = 1;
  b.strides[0][0] = 0;
  for (int64_t d = 0; d < rank; ++d) {
    b.shape[d] = out[d];
    b.strides[0][d] = in_strides[perm[d]];
  }
  const int64_t esize = graph::DTypeSize(c.in[0]->dtype);
  auto run = [b](auto* type) -> FnKernel::Fn {
    using T = std::remove_pointer_t<decltype(type)>;
    return [b](const void* const* in, void* const* outs) {
      const T* X = static_cast<const T*>(in[0]);
      T* Y = static_cast<T*>(outs[0]);
      if (b.total == 0) return;
      ForEachRow(b, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
        const T* xr = X + off[0];
        for (int64_t i = 0; i < n; ++i) Y[o + i] = xr[i * s[0]];
      });
    };
  };
  if (esize == 4) return Make(run(static_cast<float*>(nullptr)));
  if (esize == 8) return Make(run(static_cast<int64_t*>(nullptr)));
  return Make(run(static_cast<bool*>(nullptr)));
}

absl::StatusOr<std::unique_ptr<OpKernel>> Concat(const Ctx& c) {
  if (c.in.empty() || c.out.size() != 1) return c.Bad("needs inputs and one output");
  for (const Tensor* t : c.in) {
    if (t == nullptr) return c.Bad("an input is absent");
  }
  const Shape& first = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(first.size());
  auto axis = c.Axis(c.Int("axis", 0), rank);
  if (!axis.ok()) return axis.status();
  Shape out = first;
  out[*axis] = 0;
  std::vector<int64_t> chunk;  // bytes each input contributes per outer index
  const int64_t esize = graph::DTypeSize(c.in[0]->dtype);
  const int64_t inner = Product(first, *axis + 1);
  for (const Tensor* t : c.in) {
    if (t->dtype != c.in[0]->dtype || t->shape.size() != first.size()) return c.Bad("inputs differ in dtype or rank");
    for (int64_t d = 0; d < rank; ++d) {
      if (d != *axis && t->shape[d] != first[d]) return c.Bad("inputs differ off the axis");
    }
    out[*axis] += t->shape[*axis];
    chunk.push_back(t->shape[*axis] * inner * esize);
  }
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  const int64_t outer = Product(first, 0, *axis), row = out[*axis] * inner * esize;
  return Make([=](const void* const* in, void* const* outs) {
    char* Y = static_cast<char*>(outs[0]);
    ParallelFor(outer, [&](int64_t o) {
      int64_t pos = 0;
      for (size_t i = 0; i < chunk.size(); ++i) {
        std::memcpy(Y + o * row + pos, static_cast<const char*>(in[i]) + o * chunk[i], chunk[i]);
        pos += chunk[i];
      }
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Split(const Ctx& c) {
  if (c.in.empty() || c.in[0] == nullptr || c.out.empty()) return c.Bad("needs an input and outputs");
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  auto axis = c.Axis(c.Int("axis", 0), rank);
  if (!axis.ok()) return axis.status();
  // The outputs' shapes (the importer's) give the split; they must add up.
  const int64_t esize = graph::DTypeSize(c.in[0]->dtype), inner = Product(x, *axis + 1);
  std::vector<int64_t> chunk;
  int64_t sum = 0;
  for (const Tensor* t : c.out) {
    if (t == nullptr || t->shape.size() != x.size() || t->dtype != c.in[0]->dtype) return c.Bad("outputs disagree with the input");
    for (int64_t d = 0; d < rank; ++d) {
      if (d != *axis && t->shape[d] != x[d]) return c.Bad("outputs differ off the axis");
    }
    sum += t->shape[*axis];
    chunk.push_back(t->shape[*axis] * inner * esize);
  }
  if (sum != x[*axis]) return c.Bad("split sizes do not add up to the input's extent");
  if (auto split = c.ConstInts(1, "split"); split.ok() && *split) {
    for (size_t i = 0; i < chunk.size() && i < (*split)->size(); ++i) {
      if ((**split)[i] != c.out[i]->shape[*axis]) return c.Bad("split sizes disagree with the outputs");
    }
  }
  const int64_t outer = Product(x, 0, *axis), row = x[*axis] * inner * esize;
  return Make([=](const void* const* in, void* const* outs) {
    const char* X = static_cast<const char*>(in[0]);
    ParallelFor(outer, [&](int64_t o) {
      int64_t pos = 0;
      for (size_t i = 0; i < chunk.size(); ++i) {
        std::memcpy(static_cast<char*>(outs[i]) + o * chunk[i], X + o * row + pos, chunk[i]);
        pos += chunk[i];
      }
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Slice(const Ctx& c) {
  if (c.in.empty() || c.in[0] == nullptr || c.out.size() != 1) return c.Bad("needs an input and one output");
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.Ints("starts").value_or(Shape{});
    ends = c.Ints("ends").value_or(Shape{});
    axes = c.Ints("axes").value_or(Shape{});
  } else {
    auto s = c.ConstInts(1, "starts");
    auto e = c.ConstInts(2, "ends");
    auto a = c.ConstInts(3, "axes");
    auto p = c.ConstInts(4, "steps");
    for (auto* st : {&s, &e, &a, &p}) {
      if (!st->ok()) return st->status();
    }
    if (!*s || !*e) return c.Bad("starts and ends are required");
    starts = **s;
    ends = **e;
    if (*a) axes = **a;
    if (*p) steps = **p;
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Bad("starts, ends, axes and steps differ in length");
  }
  Shape begin(rank, 0), step(rank, 1), out = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto ax = c.Axis(axes[i], rank);
    if (!ax.ok()) return ax.status();
    const int64_t d = *ax, n = x[d], st = steps[i];
    if (st == 0) return c.Bad("a step of 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      out[d] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      out[d] = s > e ? (s - e - st - 1) / -st : 0;
    }
    begin[d] = s;
    step[d] = st;
  }
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  if (rank > kMaxRank) return c.Bad("rank above 8");
  Shape in_strides(rank, 1);
  for (int64_t d = rank - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * x[d];
  Broadcast b;
  b.inputs = 1;
  b.rank = std::max<int>(1, static_cast<int>(rank));
  b.total = Product(out);
  b.strides[0][0] = 0;
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    b.shape[d] = out[d];
    b.strides[0][d] = in_strides[d] * step[d];
    base += begin[d] * in_strides[d];
  }
  auto run = [b, base](auto* type) -> FnKernel::Fn {
    using T = std::remove_pointer_t<decltype(type)>;
    return [b, base](const void* const* in, void* const* outs) {
      if (b.total == 0) return;
      const T* X = static_cast<const T*>(in[0]) + base;
      T* Y = static_cast<T*>(outs[0]);
      ForEachRow(b, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* s) {
        const T* xr = X + off[0];
        for (int64_t i = 0; i < n; ++i) Y[o + i] = xr[i * s[0]];
      });
    };
  };
  const int64_t esize = graph::DTypeSize(c.in[0]->dtype);
  if (esize == 4) return Make(run(static_cast<float*>(nullptr)));
  if (esize == 8) return Make(run(static_cast<int64_t*>(nullptr)));
  return Make(run(static_cast<bool*>(nullptr)));
}

absl::StatusOr<std::unique_ptr<OpKernel>> Gather(const Ctx& c) {
  if (auto st = c.Arity(2, 2, 1); !st.ok()) return st;
  if (c.in[1]->dtype != DType::kInt64) return c.Bad("indices must be int64");
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return c.Bad("data must not be a scalar");
  auto axis = c.Axis(c.Int("axis", 0), rank);
  if (!axis.ok()) return axis.status();
  Shape out(x.begin(), x.begin() + *axis);
  out.insert(out.end(), c.in[1]->shape.begin(), c.in[1]->shape.end());
  out.insert(out.end(), x.begin() + *axis + 1, x.end());
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  if (c.out[0]->dtype != c.in[0]->dtype) return c.Bad("output dtype differs");
  const int64_t esize = graph::DTypeSize(c.in[0]->dtype);
  const int64_t outer = Product(x, 0, *axis), extent = x[*axis], block = Product(x, *axis + 1) * esize;
  const int64_t count = c.in[1]->NumElements();
  return Make([=](const void* const* in, void* const* outs) {
    const char* X = static_cast<const char*>(in[0]);
    const int64_t* idx = static_cast<const int64_t*>(in[1]);
    char* Y = static_cast<char*>(outs[0]);
    ParallelFor(outer, [&](int64_t o) {
      for (int64_t j = 0; j < count; ++j) {
        int64_t i = idx[j] < 0 ? idx[j] + extent : idx[j];
        char* dst = Y + (o * count + j) * block;
        // An index out of range (onnxruntime refuses it) gives zeros rather than a wild read.
        if (i < 0 || i >= extent) std::memset(dst, 0, block);
        else std::memcpy(dst, X + (o * extent + i) * block, block);
      }
    });
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Pad(const Ctx& c) {
  if (auto st = c.Arity(1, 3, 1); !st.ok()) return st;
  if (c.String("mode", "constant") != "constant") return c.Bad("only mode=constant is supported");
  if (c.Input(3) != nullptr) return c.Bad("the axes input is not supported");
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape pads;
  float value = c.Float("value", 0.0f);
  if (c.Input(1) != nullptr) {
    auto p = c.ConstInts(1, "pads");
    if (!p.ok()) return p.status();
    pads = **p;
    auto v = c.ConstScalar(2, "constant_value");
    if (!v.ok()) return v.status();
    if (*v) value = **v;
  } else {
    pads = c.Ints("pads").value_or(Shape{});
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank) return c.Bad("pads must have 2 x rank values");
  Shape out(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (pads[d] < 0 || pads[d + rank] < 0) return c.Bad("negative pads are not supported");
    out[d] = x[d] + pads[d] + pads[d + rank];
  }
  if (auto st = c.OutShapeIs(out); !st.ok()) return st;
  if (rank == 0 || rank > kMaxRank) return c.Bad("rank must be 1 to 8");
  if (c.out[0]->dtype != c.in[0]->dtype) return c.Bad("output dtype differs");
  Shape out_strides(rank, 1);
  for (int64_t d = rank - 1; d > 0; --d) out_strides[d - 1] = out_strides[d] * out[d];
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) base += pads[d] * out_strides[d];
  const int64_t rows = Product(x, 0, rank - 1), inner = x.back(), n_out = Product(out);
  auto run = [=](auto* type) -> FnKernel::Fn {
    using T = std::remove_pointer_t<decltype(type)>;
    const T fill = static_cast<T>(value);
    return [=](const void* const* in, void* const* outs) {
      const T* X = static_cast<const T*>(in[0]);
      T* Y = static_cast<T*>(outs[0]);
      for (int64_t i = 0; i < n_out; ++i) Y[i] = fill;
      if (inner == 0) return;
      ParallelFor(rows, [&](int64_t r) {
        int64_t rem = r, o = base;
        for (int64_t d = rank - 2; d >= 0; --d) {
          o += (rem % x[d]) * out_strides[d];
          rem /= x[d];
        }
        std::memcpy(Y + o, X + r * inner, inner * sizeof(T));
      });
    };
  };
  switch (c.in[0]->dtype) {
    case DType::kFloat32: return Make(run(static_cast<float*>(nullptr)));
    case DType::kInt64: return Make(run(static_cast<int64_t*>(nullptr)));
    case DType::kBool: return Make(run(static_cast<bool*>(nullptr)));
  }
  return c.Bad("bad dtype");
}

absl::StatusOr<std::unique_ptr<OpKernel>> ShapeOp(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t start = c.Int("start", 0), end = c.Int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  Shape dims(x.begin() + start, x.begin() + end);
  if (auto st = c.OutShapeIs({static_cast<int64_t>(dims.size())}); !st.ok()) return st;
  if (c.out[0]->dtype != DType::kInt64) return c.Bad("output must be int64");
  return Make([dims](const void* const*, void* const* outs) {
    std::memcpy(outs[0], dims.data(), dims.size() * sizeof(int64_t));
  });
}

absl::StatusOr<std::unique_ptr<OpKernel>> Copy(const Ctx& c) {
  if (c.in.empty() || c.in[0] == nullptr || c.out.empty() || c.out[0] == nullptr) return c.Bad("needs an input and an output");
  if (c.in[0]->NumElements() != c.out[0]->NumElements() || c.in[0]->dtype != c.out[0]->dtype) {
    return c.Bad("output " + ShapeText(c.out[0]->shape) + " does not hold the input " + ShapeText(c.in[0]->shape));
  }
  const int64_t bytes = c.in[0]->NumElements() * graph::DTypeSize(c.in[0]->dtype);
  return Make([bytes](const void* const* in, void* const* outs) { std::memcpy(outs[0], in[0], bytes); });
}

/// One copy between channel-blocked layouts: x[N,C/a,H,W,a] -> y[N,C/b,H,W,b], channel ch of
/// pixel p at [ch/a][p][ch%a] of its image in x and [ch/b][p][ch%b] in y, where a block of 1 is
/// NCHW ([ch][p]). Channels go in groups of lcm(a, b): group i of an image lies at the same
/// offset (i * lcm * hw floats) in both layouts, and within it every run of gcd(a, b)
/// channels that starts at a multiple of gcd(a, b) is contiguous in both.
struct LayoutCopyGeometry {
  int64_t from = 1, to = 1;  // a and b
  int64_t hw = 1;            // pixels per image
  int64_t group = 1;         // lcm(a, b): channels per group
  int64_t run = 1;           // gcd(a, b): channels per contiguous run
  // Offset (floats, pixel 0) of run j of a group in x and in y; a pixel adds p * a and p * b.
  std::vector<int64_t> src_at, dst_at;
};

LayoutCopyGeometry MakeLayoutCopyGeometry(int64_t from, int64_t to, int64_t hw) {
  LayoutCopyGeometry g;
  g.from = from;
  g.to = to;
  g.hw = hw;
  g.group = std::lcm(from, to);
  g.run = std::gcd(from, to);
  for (int64_t k = 0; k < g.group; k += g.run) {
    g.src_at.push_back(k / from * hw * from + k % from);
    g.dst_at.push_back(k / to * hw * to + k % to);
  }
  return g;
}

/// Copies pixels [p0, p1) of every run of a group from `src` (the group in x) to `dst` (in y),
/// kRun floats a run (0: g.run, not known at compile time). The pixel loop is outside: the side
/// with the larger block is walked contiguously, the other in group / block streams. (Runs
/// outside, a strided pixel walk each, took about 12% longer on MobileNet-V2's Reblocks.)
template <int64_t kRun>
void CopyLayoutRuns(const float* src, float* dst, const LayoutCopyGeometry& g, int64_t p0, int64_t p1) {
  const int64_t a = g.from, b = g.to, len = kRun > 0 ? kRun : g.run;
  const int64_t runs = static_cast<int64_t>(g.src_at.size());
  const int64_t* src_at = g.src_at.data();
  const int64_t* dst_at = g.dst_at.data();
  for (int64_t p = p0; p < p1; ++p) {
    const float* s = src + p * a;
    float* d = dst + p * b;
    for (int64_t j = 0; j < runs; ++j) {
      const float* sj = s + src_at[j];
      float* dj = d + dst_at[j];
#if defined(__SSE2__)
      if constexpr (kRun > 0 && kRun % 4 == 0) {
        for (int64_t i = 0; i < kRun; i += 4) _mm_storeu_ps(dj + i, _mm_loadu_ps(sj + i));
        continue;
      }
#endif
      for (int64_t i = 0; i < len; ++i) dj[i] = sj[i];
    }
  }
}

/// Copies pixels [p0, p1) of one group between NCHW and blocks of g.group (a multiple of 4):
/// to the blocked side when kToBlocked (g.from is 1), else from it. With SSE it moves 4x4 tiles
/// (4 channels of 4 pixels, transposed in registers), walking the blocked side contiguously,
/// which on the 2-core AVX-512 EPYC VM ran about 3x faster than scalar loops in either order
/// (MobileNet-V2's 32x112x112 stem output in blocks of 16, one thread: 38 us against 116-280 us).
template <bool kToBlocked>
void CopyLayoutTiles(const float* src, float* dst, const LayoutCopyGeometry& g, int64_t p0, int64_t p1) {
  const int64_t block = g.group, hw = g.hw;
  int64_t p = p0;
#if defined(__SSE2__)
  // Offsets of row i of a tile: a channel row of the NCHW side, a pixel row of the blocked one.
  const int64_t in_row = kToBlocked ? hw : block, out_row = kToBlocked ? block : hw;
  for (; p + 4 <= p1; p += 4) {
    for (int64_t k = 0; k < block; k += 4) {
      const int64_t nchw_at = k * hw + p, blocked_at = p * block + k;
      const float* s = src + (kToBlocked ? nchw_at : blocked_at);
      float* d = dst + (kToBlocked ? blocked_at : nchw_at);
      __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + in_row);
      __m128 r2 = _mm_loadu_ps(s + 2 * in_row), r3 = _mm_loadu_ps(s + 3 * in_row);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(d, r0);
      _mm_storeu_ps(d + out_row, r1);
      _mm_storeu_ps(d + 2 * out_row, r2);
      _mm_storeu_ps(d + 3 * out_row, r3);
    }
  }
#endif
  for (; p < p1; ++p) {
    for (int64_t k = 0; k < block; ++k) {
      if constexpr (kToBlocked) {
        dst[p * block + k] = src[k * hw + p];
      } else {
        dst[k * hw + p] = src[p * block + k];
      }
    }
  }
}

/// The kernel of one layout copy of `images` images of `channels` channels (a multiple of both
/// blocks) and `hw` pixels from blocks of `from` to blocks of `to` (either may be 1, NCHW). Each
/// group of channels is split in runs of pixels (a multiple of 4, about kChunk floats each), and
/// the parallel tasks are (image, group, run of pixels): MobileNet-V2's stem output (32x112x112,
/// blocks of 16) makes 26 of them rather than 2. Copies below kChunk floats run on one thread.
/// Per run of pixels: one memcpy when the blocks are equal; 4x4 SSE tiles between NCHW and a
/// block that is a multiple of 4; else contiguous runs of gcd(from, to) channels per pixel
/// (SSE copies for runs of 4, 8 and 16). The Reblock this replaced copied one output block per
/// task with a run-length loop per pixel: MobileNet-V2's 144x56x56 16 -> 8 took 79 us at one
/// thread on the 2-core EPYC VM, 49 us with the runs.
std::unique_ptr<OpKernel> MakeLayoutCopy(int64_t images, int64_t channels, int64_t hw, int64_t from, int64_t to) {
  auto geometry = std::make_shared<const LayoutCopyGeometry>(MakeLayoutCopyGeometry(from, to, hw));
  const int64_t group = geometry->group, groups = images * (channels / group);
  // Pixels per run: hw split in about group * hw / kChunk runs, rounded up to a multiple of 4.
  const int64_t want_runs = std::max<int64_t>(1, (group * hw + kChunk - 1) / kChunk);
  const int64_t run = std::max<int64_t>(4, ((hw + want_runs - 1) / want_runs + 3) / 4 * 4);
  const int64_t runs = std::max<int64_t>(1, (hw + run - 1) / run);
  const int64_t tasks = groups * runs;
  const bool serial = groups * group * hw < kChunk;
  using Copier = void (*)(const float*, float*, const LayoutCopyGeometry&, int64_t, int64_t);
  Copier copy = nullptr;
  if (from == to) {
    copy = [](const float* s, float* d, const LayoutCopyGeometry& g, int64_t p0, int64_t p1) {
      std::memcpy(d + p0 * g.to, s + p0 * g.from, (p1 - p0) * g.to * sizeof(float));
    };
  } else if ((from == 1 || to == 1) && geometry->group % 4 == 0) {
    copy = from == 1 ? CopyLayoutTiles<true> : CopyLayoutTiles<false>;
  } else if (geometry->run == 4) {
    copy = CopyLayoutRuns<4>;
  } else if (geometry->run == 8) {
    copy = CopyLayoutRuns<8>;
  } else if (geometry->run == 16) {
    copy = CopyLayoutRuns<16>;
  } else if (geometry->run == 1) {
    copy = CopyLayoutRuns<1>;
  } else {
    copy = CopyLayoutRuns<0>;
  }
  return std::make_unique<FnKernel>([geometry, copy, group, hw, run, runs, tasks, serial](const void* const* in,
                                                                                        void* const* out) {
    const float* src = static_cast<const float*>(in[0]);
    float* dst = static_cast<float*>(out[0]);
    auto task = [&](int64_t t) {
      const int64_t at = t / runs * group * hw, r = t % runs;
      const int64_t p0 = r * run, p1 = std::min(hw, p0 + run);
      copy(src + at, dst + at, *geometry, p0, p1);
    };
    if (serial) {
      for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
      ParallelFor(tasks, task);
    }
  });
}

/// The layout copies of graph/layout.h, all one copy between blocks (MakeLayoutCopy):
/// tune.ToBlocked x[N,C,H,W] -> y[N,C/c,H,W,c] (blocks 1 -> c) and tune.ToNchw, its inverse
/// (c -> 1), c the "block" attribute; tune.Reblock x[N,C/a,H,W,a] -> y[N,C/b,H,W,b], a and b the
/// "from" and "to" attributes. The blocks must divide C.
absl::StatusOr<std::unique_ptr<OpKernel>> LayoutCopy(const Ctx& c) {
  if (auto st = c.Arity(1, 1, 1); !st.ok()) return st;
  const Tensor& x = *c.in[0];
  const Tensor& y = *c.out[0];
  if (x.dtype != DType::kFloat32 || y.dtype != DType::kFloat32) return c.Bad("takes float32 tensors");
  if (c.node.op == graph::kReblockOp) {
    const int64_t from = c.Int("from", 0), to = c.Int("to", 0);
    if (from <= 0 || to <= 0) return c.Bad("needs positive \"from\" and \"to\" attributes");
    if (x.shape.size() != 5 || x.shape[4] != from) {
      return c.Bad(absl::StrCat("the input ", ShapeText(x.shape), " is not 5-D in channel blocks of ", from));
    }
    const int64_t channels = x.shape[1] * from;
    if (channels % to != 0) return c.Bad(absl::StrCat("the block ", to, " does not divide the ", channels, " channels"));
    const Shape expected = {x.shape[0], channels / to, x.shape[2], x.shape[3], to};
    if (y.shape != expected) {
      return c.Bad(absl::StrCat("the output ", ShapeText(y.shape), " is not ", ShapeText(expected)));
    }
    return MakeLayoutCopy(expected[0], channels, expected[2] * expected[3], from, to);
  }
  const bool to_blocked = c.node.op == graph::kToBlockedOp;
  const Tensor& nchw = to_blocked ? x : y;
  const Tensor& blocked = to_blocked ? y : x;
  const int64_t block = c.Int("block", 0);
  if (block <= 0) return c.Bad("needs a positive \"block\" attribute");
  if (nchw.shape.size() != 4 || nchw.shape[1] % block != 0) {
    return c.Bad(absl::StrCat("the NCHW tensor ", ShapeText(nchw.shape), " is not 4-D with channels divisible by ", block));
  }
  const Shape expected = {nchw.shape[0], nchw.shape[1] / block, nchw.shape[2], nchw.shape[3], block};
  if (blocked.shape != expected) {
    return c.Bad(absl::StrCat("the blocked tensor ", ShapeText(blocked.shape), " is not ", ShapeText(expected)));
  }
  return MakeLayoutCopy(expected[0], nchw.shape[1], expected[2] * expected[3], to_blocked ? 1 : block,
                        to_blocked ? block : 1);
}

using Factory = absl::StatusOr<std::unique_ptr<OpKernel>> (*)(const Ctx&);

const std::map<std::string, Factory>& Registry() {
  static const auto* registry = new std::map<std::string, Factory>{
      {"Add", Binary}, {"Sub", Binary}, {"Mul", Binary}, {"Div", Binary}, {"Pow", Binary}, {"Equal", Binary},
      {"Where", Where}, {"Expand", Expand},
      {"Relu", Unary}, {"Clip", Unary}, {"Sigmoid", Unary}, {"Tanh", Unary}, {"Erf", Unary}, {"Gelu", Unary},
      {"HardSigmoid", Unary}, {"HardSwish", Unary}, {"Sqrt", Unary}, {"Exp", Unary}, {"Neg", Unary},
      {"Cast", Cast}, {"MatMul", MatMul}, {"Gemm", Gemm}, {"Conv", Conv},
      {"MaxPool", Pool}, {"AveragePool", Pool}, {"GlobalAveragePool", GlobalAveragePool},
      {"ReduceMean", Reduce}, {"ReduceSum", Reduce}, {"Softmax", Softmax},
      {"LayerNormalization", LayerNorm}, {"BatchNormalization", BatchNorm},
      {"Transpose", Transpose}, {"Concat", Concat}, {"Split", Split}, {"Slice", Slice}, {"Gather", Gather},
      {"Pad", Pad}, {"Shape", ShapeOp},
      {"Reshape", Copy}, {"Flatten", Copy}, {"Squeeze", Copy}, {"Unsqueeze", Copy}, {"Identity", Copy},
      {"Dropout", Copy},
      // The layout transforms of PlanBlockedLayout (graph/layout.h): CPU only, not in BuiltinOps().
      {"tune.ToBlocked", LayoutCopy}, {"tune.ToNchw", LayoutCopy}, {"tune.Reblock", LayoutCopy},
  };
  return *registry;
}

}  // namespace

bool IsViewOp(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
         op == "Dropout";
}

std::vector<std::string> BuiltinOps() {
  std::vector<std::string> ops;
  for (const auto& [name, factory] : Registry()) {
    if (name.rfind("tune.", 0) != 0) ops.push_back(name);
  }
  return ops;
}

absl::StatusOr<std::unique_ptr<OpKernel>> CreateBuiltinKernel(const graph::Node& node,
                                                              const std::vector<const graph::Tensor*>& inputs,
                                                              const std::vector<const graph::Tensor*>& outputs,
                                                              int64_t opset) {
  auto it = Registry().find(node.op);
  if (it == Registry().end()) {
    return absl::UnimplementedError(absl::StrCat("node '", node.name, "' (", node.op, ") has no built-in kernel"));
  }
  Ctx ctx{{node, inputs, outputs, opset}};
  bool empty = false;
  for (const Tensor* t : outputs) {
    if (t != nullptr && t->shape.size() > static_cast<size_t>(kMaxRank)) return ctx.Bad("rank above 8");
    if (t != nullptr && t->NumElements() == 0) empty = true;
  }
  auto kernel = it->second(ctx);
  // A node whose outputs are all empty (an extent of 0) has nothing to write: its kernel is
  // made for the factory's checks, then replaced, as its loops may divide by the empty extent.
  if (kernel.ok() && empty) {
    bool all_empty = true;
    for (const Tensor* t : outputs) all_empty = all_empty && (t == nullptr || t->NumElements() == 0);
    if (all_empty) return Make([](const void* const*, void* const*) {});
  }
  return kernel;
}

}  // namespace tune::executor
