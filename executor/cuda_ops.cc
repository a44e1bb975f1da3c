// The built-in GPU kernels as CUDA C text: one thread per output element for elementwise and
// data movement, a block per row (warp shuffles) for reductions, a shared-memory tiled GEMM.
#include "executor/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "executor/builtin_ops.h"
#include "executor/node_context.h"

namespace tune::executor {
namespace {

using graph::DType;
using graph::Node;
using graph::Tensor;
using Shape = std::vector<int64_t>;

constexpr int64_t kBlock = 256;            // threads per block of elementwise kernels
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride loops cover the rest
constexpr char kNamePlaceholder[] = "TUNE_KERNEL_NAME";

const char* CType(DType d) {
  switch (d) {
    case DType::kFloat32: return "float";
    case DType::kInt64: return "long long";
    case DType::kBool: return "bool";
  }
  return "float";
}

/// An element type of the same size, for kernels that only move data.
const char* CTypeOfSize(int64_t bytes) { return bytes == 8 ? "long long" : bytes == 4 ? "float" : "unsigned char"; }

/// A float literal that reads back as exactly `v` (infinities and NaN through their bits).
std::string FloatLit(float v) {
  if (!std::isfinite(v)) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return absl::StrFormat("__int_as_float(0x%08x)", bits);
  }
  std::string s = absl::StrFormat("%.9g", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

int64_t Product(const Shape& s, int64_t begin = 0, int64_t end = 1 << 20) {
  int64_t p = 1;
  for (int64_t i = std::max<int64_t>(begin, 0); i < std::min<int64_t>(end, static_cast<int64_t>(s.size())); ++i) p *= s[i];
  return p;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// Attribute readers of one node (node_context.h: the same defaults as the CPU kernels') and
/// its constant inputs.
struct NodeView : NodeContext {
  /// A constant int64 input (the CPU factory has checked that it is one where required).
  std::optional<Shape> ConstInts(size_t i) const {
    const Tensor* t = Input(i);
    if (t == nullptr || !t->constant() || t->dtype != DType::kInt64) return std::nullopt;
    return Shape(t->i64(), t->i64() + t->NumElements());
  }
  std::optional<float> ConstScalar(size_t i) const {
    const Tensor* t = Input(i);
    if (t == nullptr || !t->constant() || t->NumElements() != 1) return std::nullopt;
    if (t->dtype == DType::kFloat32) return t->f32()[0];
    if (t->dtype == DType::kInt64) return static_cast<float>(t->i64()[0]);
    return std::nullopt;
  }
  int64_t Axis(int64_t axis, int64_t rank) const { return axis < 0 ? axis + rank : axis; }
};

/// A kernel being written: its body refers to the parameters in0.., out0.. and to `IDX`, the
/// index type (int while every tensor has fewer than 2^30 elements, else long long).
struct Kernel {
  std::string body;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {kBlock, 1, 1};
  int64_t launch_bound = kBlock;
};

/// Blocks for `n` elements at kBlock threads each, capped (the loops stride over the grid).
int64_t BlocksFor(int64_t n, int64_t per_block = kBlock) {
  return std::clamp<int64_t>((n + per_block - 1) / per_block, n > 0 ? 1 : 0, kMaxBlocks);
}

/// A loop over the n output elements with `i` the element's index; `body` per element.
Kernel Elementwise(int64_t n, const std::string& body) {
  Kernel k;
  k.body = absl::StrCat("  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < (IDX)", n,
                        "; i += (IDX)gridDim.x * blockDim.x) {\n", body, "  }\n");
  k.grid = {BlocksFor(n), 1, 1};
  return k;
}

/// A loop over `rows` with one block per row (`row` its index); `body` runs with the whole
/// block. Threads: 32 to 256, enough for `row_length` elements.
Kernel RowWise(int64_t rows, int64_t row_length, const std::string& body) {
  Kernel k;
  const int64_t threads = std::clamp<int64_t>((row_length + 31) / 32 * 32, 32, 256);
  k.body = absl::StrCat("  __shared__ float red[32];\n  for (IDX row = blockIdx.x; row < (IDX)", rows,
                        "; row += gridDim.x) {\n", body, "  }\n");
  k.grid = {std::clamp<int64_t>(rows, rows > 0 ? 1 : 0, kMaxBlocks), 1, 1};
  k.block = {threads, 1, 1};
  k.launch_bound = threads;
  return k;
}

/// Declares `prefix0..` as the offsets of index `index` (an element of the row-major
/// iteration space `shape`) in arrays of the given per-dimension strides, plus `bases`.
std::string OffsetCode(const Shape& shape, const std::vector<Shape>& strides, const Shape& bases,
                       const std::string& index, const std::string& prefix) {
  std::string code;
  for (size_t k = 0; k < strides.size(); ++k) {
    absl::StrAppend(&code, "    IDX ", prefix, k, " = ", k < bases.size() ? bases[k] : 0, ";\n");
  }
  absl::StrAppend(&code, "    { IDX r = ", index, ";\n");
  int first = 0;
  while (first < static_cast<int>(shape.size()) && shape[first] == 1) ++first;
  for (int d = static_cast<int>(shape.size()) - 1; d >= first; --d) {
    if (shape[d] == 1) continue;
    bool used = false;
    for (const Shape& s : strides) used |= s[d] != 0;
    if (d == first) {
      if (used) absl::StrAppend(&code, "      IDX q", d, " = r;\n");
    } else {
      absl::StrAppend(&code, "      IDX q", d, " = r % ", shape[d], "; r /= ", shape[d], ";\n");
    }
    if (!used) continue;
    for (size_t k = 0; k < strides.size(); ++k) {
      if (strides[k][d] != 0) absl::StrAppend(&code, "      ", prefix, k, " += q", d, " * (IDX)", strides[k][d], ";\n");
    }
  }
  absl::StrAppend(&code, "      (void)r; }\n");
  return code;
}

/// numpy's broadcast of `shapes` (the CPU factory has checked that they broadcast).
Shape BroadcastShape(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

/// Per-dimension strides of `in` broadcast to `out` (0 along broadcast dimensions).
Shape BroadcastStrides(const Shape& out, const Shape& in) {
  Shape st(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    st[out.size() - in.size() + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return st;
}

Shape RowMajorStrides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

/// out[i] = expr over inputs read at their broadcast offsets o0, o1, ... of output index i.
Kernel BroadcastKernel(const Shape& out, const std::vector<Shape>& ins, const std::string& store) {
  std::vector<Shape> strides;
  for (const Shape& s : ins) strides.push_back(BroadcastStrides(out, s));
  return Elementwise(Product(out), OffsetCode(out, strides, {}, "i", "o") + store);
}

// ---- Elementwise ----------------------------------------------------------------------------

absl::StatusOr<Kernel> Binary(const NodeView& c) {
  const Tensor& a = *c.in[0];
  const Tensor& b = *c.in[1];
  const Shape out = BroadcastShape({a.shape, b.shape});
  const std::string& op = c.node.op;
  std::string expr;
  if (op == "Equal") {
    expr = "x == y";
  } else if (a.dtype == DType::kFloat32) {
    if (op == "Add") expr = "x + y";
    if (op == "Sub") expr = "x - y";
    if (op == "Mul") expr = "x * y";
    if (op == "Div") expr = "x / y";
    if (op == "Pow") {
      expr = (b.constant() && b.NumElements() == 1 && b.f32()[0] == 2.0f) ? "x * x" : "powf(x, y)";
    }
  } else {
    if (op == "Add") expr = "x + y";
    if (op == "Sub") expr = "x - y";
    if (op == "Mul") expr = "x * y";
    if (op == "Div") expr = "y == 0 ? 0LL : x / y";
  }
  if (expr.empty()) return c.Bad("not supported on the GPU");
  const std::string t = CType(a.dtype);
  return BroadcastKernel(out, {a.shape, b.shape},
                         absl::StrCat("    const ", t, " x = in0[o0], y = in1[o1];\n    out0[i] = ", expr, ";\n"));
}

absl::StatusOr<Kernel> Where(const NodeView& c) {
  const Shape out = BroadcastShape({c.in[0]->shape, c.in[1]->shape, c.in[2]->shape});
  return BroadcastKernel(out, {c.in[0]->shape, c.in[1]->shape, c.in[2]->shape}, "    out0[i] = in0[o0] ? in1[o1] : in2[o2];\n");
}

absl::StatusOr<Kernel> Expand(const NodeView& c) {
  return BroadcastKernel(c.out[0]->shape, {c.in[0]->shape}, "    out0[i] = in0[o0];\n");
}

absl::StatusOr<Kernel> Unary(const NodeView& c) {
  const std::string& op = c.node.op;
  const int64_t n = c.in[0]->NumElements();
  std::string expr;
  if (op == "Neg") expr = "-v";
  if (op == "Relu") expr = "v > 0 ? v : 0.0f";
  if (op == "Sqrt") expr = "sqrtf(v)";
  if (op == "Exp") expr = "expf(v)";
  if (op == "Tanh") expr = "tanhf(v)";
  if (op == "Erf") expr = "erff(v)";
  if (op == "Sigmoid") expr = "1.0f / (1.0f + expf(-v))";
  if (op == "HardSwish") expr = "v * fminf(1.0f, fmaxf(0.0f, v / 6.0f + 0.5f))";
  if (op == "HardSigmoid") {
    expr = absl::StrCat("fminf(1.0f, fmaxf(0.0f, ", FloatLit(c.Float("alpha", 0.2f)), " * v + ",
                        FloatLit(c.Float("beta", 0.5f)), "))");
  }
  if (op == "Gelu") {
    expr = c.String("approximate", "none") == "tanh"
               ? "0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))"
               : "0.5f * v * (1.0f + erff(v * 0.7071067811865476f))";
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (c.opset < 11) {
      lo = c.Float("min", lo);
      hi = c.Float("max", hi);
    } else {
      if (auto v = c.ConstScalar(1)) lo = *v;
      if (auto v = c.ConstScalar(2)) hi = *v;
    }
    expr = absl::StrCat("fminf(", FloatLit(hi), ", fmaxf(", FloatLit(lo), ", v))");
  }
  if (expr.empty()) return c.Bad("not a unary op");
  return Elementwise(n, absl::StrCat("    const ", CType(c.in[0]->dtype), " v = in0[i];\n    out0[i] = ", expr, ";\n"));
}

absl::StatusOr<Kernel> Cast(const NodeView& c) {
  return Elementwise(c.in[0]->NumElements(), absl::StrCat("    out0[i] = (", CType(c.out[0]->dtype), ")(in0[i]);\n"));
}

absl::StatusOr<Kernel> BatchNorm(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t ch = x[1], size = Product(x, 2);
  return Elementwise(Product(x), absl::StrCat("    const IDX ci = (i / (IDX)", size, ") % (IDX)", ch, ";\n",
                                              "    const float a = in1[ci] / sqrtf(in4[ci] + ", FloatLit(c.Float("epsilon", 1e-5f)),
                                              ");\n    const float b = in2[ci] - in3[ci] * a;\n    out0[i] = in0[i] * a + b;\n"));
}

// ---- Matrix products ------------------------------------------------------------------------

/// Y[batch][M,N] = epilogue(sum_p A(i,p) B(p,j)) with 16x16 tiles staged in shared memory.
/// A(i,p) = in0[a_off + i*a_rs + p*a_cs], B(p,j) = in1[b_off + p*b_rs + j*b_cs]; the batch
/// offsets come from `batch_code` (declaring ao0 and bo0... as OffsetCode of "bz").
Kernel TiledGemm(int64_t batches, int64_t m, int64_t n, int64_t k, int64_t a_rs, int64_t a_cs, int64_t b_rs,
                 int64_t b_cs, const std::string& batch_code, const std::string& epilogue) {
  Kernel g;
  g.block = {16, 16, 1};
  g.launch_bound = 256;
  g.grid = {(n + 15) / 16, (m + 15) / 16, std::clamp<int64_t>(batches, 1, 65535)};
  g.body = absl::StrCat(
      "  __shared__ float As[16][17];\n  __shared__ float Bs[16][17];\n",
      "  const int tx = threadIdx.x, ty = threadIdx.y;\n",
      "  const IDX row = (IDX)blockIdx.y * 16 + ty, col = (IDX)blockIdx.x * 16 + tx;\n",
      "  for (IDX bz = blockIdx.z; bz < (IDX)", batches, "; bz += gridDim.z) {\n", batch_code,
      "    float acc = 0.0f;\n",
      "    for (IDX k0 = 0; k0 < (IDX)", k, "; k0 += 16) {\n",
      "      const IDX ka = k0 + tx, kb = k0 + ty;\n",
      "      As[ty][tx] = (row < (IDX)", m, " && ka < (IDX)", k, ") ? in0[a0 + row * (IDX)", a_rs, " + ka * (IDX)", a_cs,
      "] : 0.0f;\n",
      "      Bs[ty][tx] = (kb < (IDX)", k, " && col < (IDX)", n, ") ? in1[b0 + kb * (IDX)", b_rs, " + col * (IDX)", b_cs,
      "] : 0.0f;\n",
      "      __syncthreads();\n",
      "#pragma unroll\n",
      "      for (int p = 0; p < 16; ++p) acc += As[ty][p] * Bs[p][tx];\n",
      "      __syncthreads();\n",
      "    }\n",
      "    if (row < (IDX)", m, " && col < (IDX)", n, ") out0[bz * (IDX)", m * n, " + row * (IDX)", n, " + col] = ", epilogue,
      ";\n  }\n");
  return g;
}

absl::StatusOr<Kernel> MatMul(const NodeView& c) {
  Shape a = c.in[0]->shape, b = c.in[1]->shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = BroadcastShape({ab, bb});
  Shape sa = BroadcastStrides(batch, ab), sb = BroadcastStrides(batch, bb);
  for (int64_t& s : sa) s *= m * k;
  for (int64_t& s : sb) s *= k * n;
  // OffsetCode declares a0 (A's offset) and b... under distinct prefixes.
  std::string code = OffsetCode(batch, {sa}, {}, "bz", "a") + OffsetCode(batch, {sb}, {}, "bz", "b");
  return TiledGemm(Product(batch), m, n, k, k, 1, n, 1, code, "acc");
}

absl::StatusOr<Kernel> Gemm(const NodeView& c) {
  const bool ta = c.Int("transA", 0) != 0, tb = c.Int("transB", 0) != 0;
  const float alpha = c.Float("alpha", 1.0f), beta = c.Float("beta", 1.0f);
  const int64_t m = ta ? c.in[0]->shape[1] : c.in[0]->shape[0];
  const int64_t k = ta ? c.in[0]->shape[0] : c.in[0]->shape[1];
  const int64_t n = tb ? c.in[1]->shape[0] : c.in[1]->shape[1];
  std::string epilogue = absl::StrCat(FloatLit(alpha), " * acc + ");
  if (c.Input(2) != nullptr) {
    Shape cs = c.in[2]->shape;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    const int64_t c_cs = cs[1] == 1 ? 0 : 1, c_rs = cs[0] == 1 ? 0 : cs[1];
    absl::StrAppend(&epilogue, FloatLit(beta), " * in2[row * (IDX)", c_rs, " + col * (IDX)", c_cs, "]");
  } else {
    absl::StrAppend(&epilogue, "0.0f");
  }
  return TiledGemm(1, m, n, k, ta ? 1 : k, ta ? m : 1, tb ? 1 : n, tb ? k : 1, "    const IDX a0 = 0, b0 = 0;\n",
                   epilogue);
}

// ---- Convolution and pooling ----------------------------------------------------------------

/// (top, left, bottom, right) pads of a 2-D window op, as the CPU kernels compute them.
std::array<int64_t, 4> WindowPads(const NodeView& c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                                  int64_t sw, int64_t dh, int64_t dw) {
  const std::string auto_pad = c.String("auto_pad", "NOTSET");
  std::array<int64_t, 4> p = {0, 0, 0, 0};
  if (auto_pad == "NOTSET") {
    if (auto pads = c.Ints("pads"); pads && pads->size() == 4) {
      for (int i = 0; i < 4; ++i) p[i] = (*pads)[i];
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
  }
  return p;
}

absl::StatusOr<Kernel> Conv(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const Shape& wt = c.in[1]->shape;
  const int64_t groups = c.Int("group", 1);
  const int64_t ch = x[1], h = x[2], w = x[3], oc = wt[0], kh = wt[2], kw = wt[3];
  Shape strides = c.Ints("strides").value_or(Shape{1, 1}), dil = c.Ints("dilations").value_or(Shape{1, 1});
  const auto [pt, pl, pb, pr] = WindowPads(c, h, w, kh, kw, strides[0], strides[1], dil[0], dil[1]);
  const Shape& y = c.out[0]->shape;
  const int64_t oh = y[2], ow = y[3], cg = ch / groups, ocg = oc / groups;
  std::string body = absl::StrCat(
      "    const IDX q = i % ", ow, "; IDX t = i / ", ow, ";\n",
      "    const IDX p = t % ", oh, "; t /= ", oh, ";\n",
      "    const IDX o = t % ", oc, "; const IDX b = t / ", oc, "; const IDX g = o / ", ocg, ";\n",
      "    float acc = ", c.Input(2) != nullptr ? "in2[o]" : "0.0f", ";\n",
      "    for (int ci = 0; ci < ", cg, "; ++ci) {\n",
      "      const float* xp = in0 + ((b * ", ch, " + g * ", cg, " + ci) * (IDX)", h * w, ");\n",
      "      const float* wp = in1 + ((o * ", cg, " + ci) * (IDX)", kh * kw, ");\n",
      "      for (int r = 0; r < ", kh, "; ++r) {\n",
      "        const IDX ih = p * ", strides[0], " + r * ", dil[0], " - ", pt, ";\n",
      "        if (ih < 0 || ih >= ", h, ") continue;\n",
      "        for (int s = 0; s < ", kw, "; ++s) {\n",
      "          const IDX iw = q * ", strides[1], " + s * ", dil[1], " - ", pl, ";\n",
      "          if (iw >= 0 && iw < ", w, ") acc += wp[r * ", kw, " + s] * xp[ih * ", w, " + iw];\n",
      "        }\n      }\n    }\n    out0[i] = acc;\n");
  (void)pb;
  (void)pr;
  return Elementwise(Product(y), body);
}

absl::StatusOr<Kernel> Pool(const NodeView& c) {
  const bool is_max = c.node.op == "MaxPool";
  const Shape& x = c.in[0]->shape;
  const Shape ks = *c.Ints("kernel_shape");
  Shape strides = c.Ints("strides").value_or(Shape{1, 1}), dil = c.Ints("dilations").value_or(Shape{1, 1});
  const int64_t h = x[2], w = x[3], kh = ks[0], kw = ks[1], sh = strides[0], sw = strides[1], dh = dil[0], dw = dil[1];
  const auto [pt, pl, pb, pr] = WindowPads(c, h, w, kh, kw, sh, sw, dh, dw);
  const bool include_pad = c.Int("count_include_pad", 0) != 0;
  const Shape& y = c.out[0]->shape;
  const int64_t oh = y[2], ow = y[3];
  std::string body = absl::StrCat("    const IDX q = i % ", ow, "; const IDX t = i / ", ow, ";\n",
                                  "    const IDX p = t % ", oh, "; const IDX plane = t / ", oh, ";\n",
                                  "    const float* xp = in0 + plane * (IDX)", h * w, ";\n",
                                  "    const IDX h0 = p * ", sh, " - ", pt, ", w0 = q * ", sw, " - ", pl, ";\n");
  if (is_max) {
    absl::StrAppend(&body, "    float m = __int_as_float(0xff800000);\n",
                    "    for (int r = 0; r < ", kh, "; ++r) {\n",
                    "      const IDX ih = h0 + r * ", dh, ";\n      if (ih < 0 || ih >= ", h, ") continue;\n",
                    "      for (int s = 0; s < ", kw, "; ++s) {\n",
                    "        const IDX iw = w0 + s * ", dw, ";\n",
                    "        if (iw >= 0 && iw < ", w, ") { const float v = xp[ih * ", w, " + iw]; m = m < v ? v : m; }\n",
                    "      }\n    }\n    out0[i] = m;\n");
  } else {
    absl::StrAppend(&body, "    const IDX h1 = min(h0 + ", kh, ", (IDX)", h + pb, "), w1 = min(w0 + ", kw, ", (IDX)", w + pr,
                    ");\n",
                    "    const IDX hs = max(h0, (IDX)0), he = min(h1, (IDX)", h, "), ws = max(w0, (IDX)0), we = min(w1, (IDX)", w,
                    ");\n",
                    "    float sum = 0.0f;\n",
                    "    for (IDX ih = hs; ih < he; ++ih)\n      for (IDX iw = ws; iw < we; ++iw) sum += xp[ih * ", w, " + iw];\n",
                    "    const IDX count = ", include_pad ? "(h1 - h0) * (w1 - w0)" : "(he - hs) * (we - ws)", ";\n",
                    "    out0[i] = count > 0 ? sum / (float)count : 0.0f;\n");
  }
  return Elementwise(Product(y), body);
}

absl::StatusOr<Kernel> GlobalAveragePool(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t planes = x[0] * x[1], size = Product(x, 2);
  return RowWise(planes, size,
                 absl::StrCat("    float sum = 0.0f;\n",
                              "    for (IDX j = threadIdx.x; j < (IDX)", size, "; j += blockDim.x) sum += in0[row * (IDX)", size,
                              " + j];\n",
                              "    sum = tune_block_sum(sum, red);\n",
                              "    if (threadIdx.x == 0) out0[row] = sum / ", FloatLit(static_cast<float>(size)), ";\n"));
}

// ---- Reductions and normalizations ----------------------------------------------------------

absl::StatusOr<Kernel> Reduce(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  std::optional<Shape> axes = c.Ints("axes");
  if (c.Input(1) != nullptr) axes = c.ConstInts(1);
  std::vector<bool> reduced(rank, false);
  if (!axes || axes->empty()) {
    if (c.Int("noop_with_empty_axes", 0) != 0) return Elementwise(Product(x), "    out0[i] = in0[i];\n");
    reduced.assign(rank, true);
  } else {
    for (int64_t a : *axes) reduced[c.Axis(a, rank)] = true;
  }
  const Shape strides = RowMajorStrides(x);
  Shape kept_shape, kept_strides, red_shape, red_strides;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      count *= x[d];
      red_shape.push_back(x[d]);
      red_strides.push_back(strides[d]);
    } else {
      kept_shape.push_back(x[d]);
      kept_strides.push_back(strides[d]);
    }
  }
  const int64_t outs = Product(kept_shape);
  const float scale = c.node.op == "ReduceMean" ? 1.0f / static_cast<float>(count) : 1.0f;
  return RowWise(outs, count,
                 absl::StrCat(OffsetCode(kept_shape, {kept_strides}, {}, "row", "base"),
                              "    float sum = 0.0f;\n",
                              "    for (IDX j = threadIdx.x; j < (IDX)", count, "; j += blockDim.x) {\n",
                              OffsetCode(red_shape, {red_strides}, {}, "j", "off"),
                              "      sum += in0[base0 + off0];\n    }\n",
                              "    sum = tune_block_sum(sum, red);\n",
                              "    if (threadIdx.x == 0) out0[row] = sum * ", FloatLit(scale), ";\n"));
}

absl::StatusOr<Kernel> Softmax(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = c.Axis(c.Int("axis", c.opset >= 13 ? -1 : 1), rank);
  const int64_t outer = Product(x, 0, axis);
  int64_t r, inner;
  if (c.opset >= 13) {
    r = rank ? x[axis] : 1;
    inner = Product(x, axis + 1);
  } else {
    r = Product(x, axis);
    inner = 1;
  }
  return RowWise(outer * inner, r,
                 absl::StrCat("    const IDX base = (row / ", inner, ") * (IDX)", r * inner, " + row % ", inner, ";\n",
                              "    float m = __int_as_float(0xff800000);\n",
                              "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) { const float v = in0[base + j * ", inner,
                              "]; m = m < v ? v : m; }\n",
                              "    m = tune_block_max(m, red);\n",
                              "    float sum = 0.0f;\n",
                              "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) { const float e = expf(in0[base + j * ",
                              inner, "] - m); out0[base + j * ", inner, "] = e; sum += e; }\n",
                              "    const float s = 1.0f / tune_block_sum(sum, red);\n",
                              "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) out0[base + j * ", inner, "] *= s;\n"));
}

absl::StatusOr<Kernel> LayerNorm(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = c.Axis(c.Int("axis", -1), rank);
  const int64_t outer = Product(x, 0, axis), r = Product(x, axis);
  const std::string rf = FloatLit(static_cast<float>(r));
  std::string body = absl::StrCat(
      "    const float* xr = in0 + row * (IDX)", r, ";\n    float* yr = out0 + row * (IDX)", r, ";\n",
      "    float sum = 0.0f;\n",
      "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) sum += xr[j];\n",
      "    const float mean = tune_block_sum(sum, red) / ", rf, ";\n",
      "    float sq = 0.0f;\n",
      "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) { const float d = xr[j] - mean; sq += d * d; }\n",
      "    const float var = tune_block_sum(sq, red) / ", rf, ";\n",
      "    const float inv = 1.0f / sqrtf(var + ", FloatLit(c.Float("epsilon", 1e-5f)), ");\n",
      "    for (IDX j = threadIdx.x; j < (IDX)", r, "; j += blockDim.x) yr[j] = (xr[j] - mean) * inv * in1[j] + ",
      c.Input(2) != nullptr ? "in2[j]" : "0.0f", ";\n");
  const int n_in = static_cast<int>(c.in.size());
  if (c.Output(1) != nullptr) absl::StrAppend(&body, "    if (threadIdx.x == 0) out1[row] = mean;\n");
  if (c.Output(2) != nullptr) absl::StrAppend(&body, "    if (threadIdx.x == 0) out2[row] = inv;\n");
  (void)n_in;
  return RowWise(outer, r, body);
}

// ---- Data movement --------------------------------------------------------------------------

/// out[i] = in0[base + sum_d q_d * strides[d]] over the output's shape.
Kernel StridedCopy(const Shape& out, const Shape& strides, int64_t base) {
  return Elementwise(Product(out), OffsetCode(out, {strides}, {base}, "i", "o") + "    out0[i] = in0[o0];\n");
}

absl::StatusOr<Kernel> Transpose(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape perm = c.Ints("perm").value_or(Shape{});
  if (perm.empty()) {
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  }
  const Shape in_strides = RowMajorStrides(x);
  Shape out(rank), strides(rank);
  for (int64_t d = 0; d < rank; ++d) {
    out[d] = x[perm[d]];
    strides[d] = in_strides[perm[d]];
  }
  return StridedCopy(out, strides, 0);
}

absl::StatusOr<Kernel> Slice(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.Ints("starts").value_or(Shape{});
    ends = c.Ints("ends").value_or(Shape{});
    axes = c.Ints("axes").value_or(Shape{});
  } else {
    starts = c.ConstInts(1).value_or(Shape{});
    ends = c.ConstInts(2).value_or(Shape{});
    axes = c.ConstInts(3).value_or(Shape{});
    steps = c.ConstInts(4).value_or(Shape{});
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  Shape begin(rank, 0), step(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t d = c.Axis(axes[i], rank), n = x[d], st = steps[i];
    int64_t s = starts[i];
    if (s < 0) s += n;
    s = st > 0 ? std::clamp<int64_t>(s, 0, n) : std::clamp<int64_t>(s, 0, n - 1);
    begin[d] = s;
    step[d] = st;
  }
  const Shape in_strides = RowMajorStrides(x);
  Shape strides(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    strides[d] = in_strides[d] * step[d];
    base += begin[d] * in_strides[d];
  }
  return StridedCopy(c.out[0]->shape, strides, base);
}

absl::StatusOr<Kernel> Concat(const NodeView& c) {
  const Shape& first = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(first.size());
  const int64_t axis = c.Axis(c.Int("axis", 0), rank);
  const Shape& out = c.out[0]->shape;
  const int64_t inner = Product(first, axis + 1), extent = out[axis];
  std::string body = absl::StrCat("    const IDX in_i = i % ", inner, "; const IDX t = i / ", inner, ";\n",
                                  "    const IDX a = t % ", extent, "; const IDX o = t / ", extent, ";\n    ");
  int64_t pos = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const int64_t e = c.in[k]->shape[axis];
    absl::StrAppend(&body, k + 1 < c.in.size() ? absl::StrCat("if (a < ", pos + e, ") ") : "", "out0[i] = in", k,
                    "[(o * ", e, " + (a - ", pos, ")) * (IDX)", inner, " + in_i];\n", k + 1 < c.in.size() ? "    else " : "");
    pos += e;
  }
  return Elementwise(Product(out), body);
}

absl::StatusOr<Kernel> Split(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = c.Axis(c.Int("axis", 0), rank);
  const int64_t inner = Product(x, axis + 1), extent = x[axis];
  std::string body = absl::StrCat("    const IDX in_i = i % ", inner, "; const IDX t = i / ", inner, ";\n",
                                  "    const IDX a = t % ", extent, "; const IDX o = t / ", extent, ";\n    ");
  int64_t pos = 0;
  for (size_t k = 0; k < c.out.size(); ++k) {
    const int64_t e = c.out[k]->shape[axis];
    absl::StrAppend(&body, k + 1 < c.out.size() ? absl::StrCat("if (a < ", pos + e, ") ") : "", "out", k, "[(o * ", e,
                    " + (a - ", pos, ")) * (IDX)", inner, " + in_i] = in0[i];\n", k + 1 < c.out.size() ? "    else " : "");
    pos += e;
  }
  return Elementwise(Product(x), body);
}

absl::StatusOr<Kernel> Gather(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = c.Axis(c.Int("axis", 0), rank);
  const int64_t extent = x[axis], inner = Product(x, axis + 1), count = c.in[1]->NumElements();
  return Elementwise(
      c.out[0]->NumElements(),
      absl::StrCat("    const IDX in_i = i % ", inner, "; const IDX t = i / ", inner, ";\n",
                   "    const IDX j = t % ", count, "; const IDX o = t / ", count, ";\n",
                   "    long long k = in1[j];\n    if (k < 0) k += ", extent, ";\n",
                   "    out0[i] = (k < 0 || k >= ", extent, ") ? 0 : in0[(o * ", extent, " + (IDX)k) * (IDX)", inner,
                   " + in_i];\n"));
}

absl::StatusOr<Kernel> Pad(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  Shape pads;
  float value = c.Float("value", 0.0f);
  if (c.Input(1) != nullptr) {
    pads = c.ConstInts(1).value_or(Shape{});
    if (auto v = c.ConstScalar(2)) value = *v;
  } else {
    pads = c.Ints("pads").value_or(Shape{});
  }
  const Shape& out = c.out[0]->shape;
  const Shape in_strides = RowMajorStrides(x);
  std::string fill = c.in[0]->dtype == DType::kFloat32 ? FloatLit(value)
                                                         : absl::StrCat("(", CType(c.in[0]->dtype), ")", static_cast<int64_t>(value));
  std::string body = "    IDX r = i, src = 0; bool inside = true;\n";
  for (int64_t d = rank - 1; d >= 0; --d) {
    absl::StrAppend(&body, "    { const IDX q = r % ", out[d], " - ", pads[d], "; r /= ", out[d], ";\n",
                    "      inside = inside && q >= 0 && q < ", x[d], "; src += q * (IDX)", in_strides[d], "; }\n");
  }
  absl::StrAppend(&body, "    out0[i] = inside ? in0[src] : ", fill, ";\n");
  return Elementwise(Product(out), body);
}

absl::StatusOr<Kernel> ShapeOp(const NodeView& c) {
  const Shape& x = c.in[0]->shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t start = c.Int("start", 0), end = c.Int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::string body;
  for (int64_t d = start; d < end; ++d) absl::StrAppend(&body, "    if (i == ", d - start, ") out0[i] = ", x[d], "LL;\n");
  return Elementwise(end - start, body);
}

absl::StatusOr<Kernel> Copy(const NodeView& c) {
  return Elementwise(c.in[0]->NumElements(), "    out0[i] = in0[i];\n");
}

using Factory = absl::StatusOr<Kernel> (*)(const NodeView&);

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
  };
  return *registry;
}

/// The element type of a parameter: the tensor's, or a same-sized one for data movement ops
/// that treat every dtype alike.
std::string ParamType(const Tensor* t, bool by_size) {
  if (t == nullptr) return "float";
  return by_size ? CTypeOfSize(graph::DTypeSize(t->dtype)) : CType(t->dtype);
}

bool MovesBytes(const std::string& op) {
  return IsViewOp(op) || op == "Transpose" || op == "Concat" || op == "Split" || op == "Slice" || op == "Expand" ||
         op == "Gather" || op == "Pad";
}

}  // namespace

const std::string& CudaOpPrelude() {
  static const std::string* prelude = new std::string(R"(// Helpers of tune's built-in GPU kernels.
__device__ __forceinline__ float tune_warp_sum(float v) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
  return v;
}
__device__ __forceinline__ float tune_warp_max(float v) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) { const float o = __shfl_xor_sync(0xffffffffu, v, s); v = v < o ? o : v; }
  return v;
}
// The sum over the block (blockDim.x a multiple of 32) of every thread's `v`, returned to all
// threads; `red` is 32 floats of shared memory. A barrier guards `red` before it is reused.
__device__ __forceinline__ float tune_block_sum(float v, float* red) {
  v = tune_warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? red[lane] : 0.0f;
    v = tune_warp_sum(v);
    if (lane == 0) red[0] = v;
  }
  __syncthreads();
  return red[0];
}
__device__ __forceinline__ float tune_block_max(float v, float* red) {
  v = tune_warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? red[lane] : __int_as_float(0xff800000);
    v = tune_warp_max(v);
    if (lane == 0) red[0] = v;
  }
  __syncthreads();
  return red[0];
}
)");
  return *prelude;
}

absl::StatusOr<CudaOpSource> MakeCudaOpSource(const graph::Node& node, const std::vector<const graph::Tensor*>& inputs,
                                              const std::vector<const graph::Tensor*>& outputs, int64_t opset) {
  // The CPU kernel's factory checks the node (arity, dtypes, shapes, constant inputs).
  auto checked = CreateBuiltinKernel(node, inputs, outputs, opset);
  if (!checked.ok()) return checked.status();
  auto it = Registry().find(node.op);
  if (it == Registry().end()) {
    return absl::UnimplementedError(absl::StrCat("node '", node.name, "' (", node.op, ") has no built-in kernel"));
  }
  NodeView view{{node, inputs, outputs, opset}};
  auto kernel = it->second(view);
  if (!kernel.ok()) return kernel.status();
  int64_t largest = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const Tensor* t : *list) {
      if (t != nullptr) largest = std::max(largest, t->NumElements());
    }
  }
  const bool by_size = MovesBytes(node.op);
  std::vector<std::string> params;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Gather's indices keep their type; the data moves by size.
    const bool sized = by_size && !(node.op == "Gather" && i == 1);
    params.push_back(absl::StrCat("const ", ParamType(inputs[i], sized), "* __restrict__ in", i));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    params.push_back(absl::StrCat(ParamType(outputs[i], by_size), "* __restrict__ out", i));
  }
  CudaOpSource src;
  src.params = static_cast<int>(params.size());
  src.grid = kernel->grid;
  src.block = kernel->block;
  std::string text = absl::StrCat("// ", node.op, "\nextern \"C\" __global__ void __launch_bounds__(", kernel->launch_bound, ") ",
                                  kNamePlaceholder, "(", absl::StrJoin(params, ", "), ") {\n",
                                  "  typedef ", largest < (int64_t{1} << 30) ? "int" : "long long", " IDX;\n", kernel->body,
                                  "}\n");
  src.name = absl::StrFormat("tune_op_%016x", Fnv1a(text));
  src.text = absl::StrReplaceAll(text, {{kNamePlaceholder, src.name}});
  return src;
}

std::string CudaOpProgram(const std::vector<CudaOpSource>& sources) {
  std::map<std::string, const std::string*> by_name;
  for (const CudaOpSource& s : sources) by_name.emplace(s.name, &s.text);
  std::string program = CudaOpPrelude();
  for (const auto& [name, text] : by_name) absl::StrAppend(&program, "\n", *text);
  return program;
}

absl::StatusOr<codegen::CompiledCuda> CompileCudaOps(const std::vector<CudaOpSource>& sources, const std::string& arch) {
  return codegen::CompileCuda(CudaOpProgram(sources), arch);
}

}  // namespace tune::executor
