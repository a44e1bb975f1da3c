// Shape inference and constant folding of ONNX operators: one function per op family.
#include "graph/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tune::graph {
namespace {

using Shape = std::vector<int64_t>;

/// What one op's inference sees: the node, its inputs, and the outputs it fills.
struct Ctx {
  const Node& node;
  int64_t opset;
  const std::vector<const Tensor*>& in;
  std::vector<Tensor>& out;

  absl::Status Error(const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", node.op, "): ", why));
  }
  /// Input i, or nullptr when absent.
  const Tensor* In(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  /// True when every present input is a constant small enough to evaluate.
  bool AllConstant() const {
    for (const Tensor* t : in) {
      if (t && (!t->constant() || t->NumElements() > kMaxFoldElements)) return false;
    }
    return true;
  }
  Tensor& Out(size_t i, DType dtype, Shape shape) {
    out[i].dtype = dtype;
    out[i].shape = std::move(shape);
    out[i].data.reset();
    return out[i];
  }
};

/// The product of the extents s[from..to) (to clamped to the rank), saturating at INT64_MAX
/// (0 when an extent is not positive), so that a huge shape fails the size checks rather
/// than wrapping.
int64_t Product(const Shape& s, int64_t from = 0, int64_t to = -1) {
  const int64_t end = to < 0 || to > static_cast<int64_t>(s.size()) ? static_cast<int64_t>(s.size()) : to;
  int64_t n = 1;
  for (int64_t i = std::max<int64_t>(from, 0); i < end; ++i) {
    if (s[i] <= 0) return 0;
    if (__builtin_mul_overflow(n, s[i], &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

/// a + b, a * b saturating at the int64 range (shape arithmetic on values from a file).
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

Shape Strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

bool Fits(const Shape& s) {
  for (int64_t e : s) {
    if (e < 0) return false;
  }
  return Product(s) <= kMaxFoldElements;
}

/// For every element of `out_shape`, the offset of the element of `in_shape` that broadcasts
/// to it (numpy rules, right-aligned).
std::vector<int64_t> BroadcastOffsets(const Shape& out_shape, const Shape& in_shape) {
  const size_t r = out_shape.size();
  Shape in_st(r, 0);
  Shape in_strides = Strides(in_shape);
  for (size_t i = 0; i < in_shape.size(); ++i) {
    size_t o = r - in_shape.size() + i;
    in_st[o] = in_shape[i] == 1 ? 0 : in_strides[i];
  }
  int64_t n = Product(out_shape);
  std::vector<int64_t> offsets(n);
  Shape idx(r, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += idx[d] * in_st[d];
    offsets[e] = off;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return offsets;
}

/// The elements of `src` at `offsets`, as the data of a tensor of src's dtype.
std::vector<uint8_t> Gather(const Tensor& src, const std::vector<int64_t>& offsets) {
  const int64_t size = DTypeSize(src.dtype);
  std::vector<uint8_t> data(offsets.size() * size);
  for (size_t i = 0; i < offsets.size(); ++i) {
    std::memcpy(data.data() + i * size, src.data->data() + offsets[i] * size, size);
  }
  return data;
}

int64_t NormAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

DType OnnxElemType(int64_t t, bool* ok) {
  *ok = true;
  switch (t) {
    case 1: case 10: case 11: case 16: return DType::kFloat32;   // float, float16, double, bfloat16
    case 2: case 3: case 4: case 5: case 6: case 7: case 12: case 13: return DType::kInt64;
    case 9: return DType::kBool;
    default: *ok = false; return DType::kFloat32;
  }
}

// ---- elementwise -------------------------------------------------------------------------

/// Unary ops: same shape; `f` evaluates floats when the input is constant.
absl::Status Unary(Ctx& c, std::function<float(float)> f = nullptr, DType out_dtype = DType::kFloat32,
                   bool keep_dtype = true) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  Tensor& o = c.Out(0, keep_dtype ? x->dtype : out_dtype, x->shape);
  if (f && c.AllConstant() && x->dtype == DType::kFloat32) {
    std::vector<float> v = ConstF32(*x);
    for (float& e : v) e = f(e);
    o = MakeF32(o.name, o.shape, v);
  }
  return absl::OkStatus();
}

enum class BinKind { kArith, kCompare, kLogic };

absl::Status Binary(Ctx& c, BinKind kind, std::function<double(double, double)> f) {
  const Tensor* a = c.In(0);
  const Tensor* b = c.In(1);
  if (!a || !b) return c.Error("needs two inputs");
  Shape s;
  if (absl::Status st = BroadcastShapes(a->shape, b->shape, &s); !st.ok()) return c.Error(std::string(st.message()));
  DType dt = kind == BinKind::kArith ? a->dtype : DType::kBool;
  Tensor& o = c.Out(0, dt, s);
  if (!c.AllConstant() || !Fits(s) || !f) return absl::OkStatus();
  std::vector<int64_t> oa = BroadcastOffsets(s, a->shape), ob = BroadcastOffsets(s, b->shape);
  const int64_t n = Product(s);
  if (a->dtype == DType::kFloat32 || b->dtype == DType::kFloat32) {
    std::vector<float> va = ConstF32(*a), vb = ConstF32(*b);
    std::vector<float> r(n);
    for (int64_t i = 0; i < n; ++i) r[i] = static_cast<float>(f(va[oa[i]], vb[ob[i]]));
    if (dt == DType::kFloat32) {
      o = MakeF32(o.name, s, r);
    } else if (dt == DType::kInt64) {
      // An int64 input with a float one: the result keeps the first input's type.
      std::vector<int64_t> ri(n);
      for (int64_t i = 0; i < n; ++i) {
        ri[i] = std::isfinite(r[i]) && std::fabs(r[i]) < 9.2e18f ? static_cast<int64_t>(r[i]) : 0;
      }
      o = MakeI64(o.name, s, ri);
    } else {
      o.data = std::vector<uint8_t>(n);
      for (int64_t i = 0; i < n; ++i) (*o.data)[i] = r[i] != 0;
    }
  } else {
    std::vector<int64_t> va = ConstI64(*a), vb = ConstI64(*b);
    std::vector<int64_t> r(n);
    for (int64_t i = 0; i < n; ++i) {
      if (c.node.op == "Div") {
        // x / 0 and INT64_MIN / -1 are left to run time.
        if (vb[ob[i]] == 0 || (vb[ob[i]] == -1 && va[oa[i]] == std::numeric_limits<int64_t>::min())) {
          return absl::OkStatus();
        }
        r[i] = va[oa[i]] / vb[ob[i]];
      } else if (c.node.op == "Add") {
        r[i] = SatAdd(va[oa[i]], vb[ob[i]]);
      } else if (c.node.op == "Sub") {
        r[i] = vb[ob[i]] == std::numeric_limits<int64_t>::min() ? SatAdd(SatAdd(va[oa[i]], std::numeric_limits<int64_t>::max()), 1)
                                                                 : SatAdd(va[oa[i]], -vb[ob[i]]);
      } else if (c.node.op == "Mul") {
        r[i] = SatMul(va[oa[i]], vb[ob[i]]);
      } else {
        // Comparisons and logic give 0/1; Pow saturates (a double past the int64 range).
        const double v = f(static_cast<double>(va[oa[i]]), static_cast<double>(vb[ob[i]]));
        r[i] = std::isnan(v) ? 0 : v >= 9.2e18 ? std::numeric_limits<int64_t>::max()
                             : v <= -9.2e18 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(v);
      }
    }
    if (dt == DType::kInt64) {
      o = MakeI64(o.name, s, r);
    } else {
      o.data = std::vector<uint8_t>(n);
      for (int64_t i = 0; i < n; ++i) (*o.data)[i] = r[i] != 0;
    }
  }
  return absl::OkStatus();
}

/// Variadic broadcasting ops (Sum, Max, Min, Mean): shapes only.
absl::Status Variadic(Ctx& c) {
  if (c.in.empty() || !c.In(0)) return c.Error("needs inputs");
  Shape s = c.In(0)->shape;
  for (size_t i = 1; i < c.in.size(); ++i) {
    if (!c.In(i)) continue;
    Shape next;
    if (absl::Status st = BroadcastShapes(s, c.In(i)->shape, &next); !st.ok()) return c.Error(std::string(st.message()));
    s = next;
  }
  c.Out(0, c.In(0)->dtype, s);
  return absl::OkStatus();
}

absl::Status Where(Ctx& c) {
  const Tensor *cond = c.In(0), *x = c.In(1), *y = c.In(2);
  if (!cond || !x || !y) return c.Error("needs three inputs");
  Shape s, s2;
  if (absl::Status st = BroadcastShapes(cond->shape, x->shape, &s2); !st.ok()) return c.Error(std::string(st.message()));
  if (absl::Status st = BroadcastShapes(s2, y->shape, &s); !st.ok()) return c.Error(std::string(st.message()));
  Tensor& o = c.Out(0, x->dtype, s);
  if (!c.AllConstant() || !Fits(s)) return absl::OkStatus();
  std::vector<int64_t> oc = BroadcastOffsets(s, cond->shape), ox = BroadcastOffsets(s, x->shape),
                       oy = BroadcastOffsets(s, y->shape);
  std::vector<int64_t> vc = ConstI64(*cond);
  const int64_t size = DTypeSize(x->dtype);
  std::vector<uint8_t> data(Product(s) * size);
  for (size_t i = 0; i < oc.size(); ++i) {
    const Tensor* src = vc[oc[i]] ? x : y;
    std::memcpy(data.data() + i * size, src->data->data() + (vc[oc[i]] ? ox[i] : oy[i]) * size, size);
  }
  o.data = std::move(data);
  return absl::OkStatus();
}

absl::Status Cast(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  bool ok;
  DType to = OnnxElemType(AttrInt(c.node, "to", 1), &ok);
  if (!ok) return c.Error(absl::StrCat("cannot cast to ONNX element type ", AttrInt(c.node, "to", 1)));
  Tensor& o = c.Out(0, to, x->shape);
  if (!c.AllConstant()) return absl::OkStatus();
  if (to == DType::kFloat32) {
    o = MakeF32(o.name, x->shape, ConstF32(*x));
  } else if (to == DType::kInt64) {
    o = MakeI64(o.name, x->shape, ConstI64(*x));
  } else {
    std::vector<float> v = ConstF32(*x);
    o.data = std::vector<uint8_t>(v.size());
    for (size_t i = 0; i < v.size(); ++i) (*o.data)[i] = v[i] != 0;
  }
  return absl::OkStatus();
}

// ---- linear algebra and convolution -----------------------------------------------------

absl::Status MatMul(Ctx& c) {
  const Tensor *a = c.In(0), *b = c.In(1);
  if (!a || !b) return c.Error("needs two inputs");
  Shape sa = a->shape, sb = b->shape;
  if (sa.empty() || sb.empty()) return c.Error("inputs must have rank >= 1");
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  if (sa.back() != sb[sb.size() - 2]) {
    return c.Error(absl::StrCat("inner dimensions differ: ", ShapeText(a->shape), " x ", ShapeText(b->shape)));
  }
  Shape batch;
  if (absl::Status st = BroadcastShapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), &batch);
      !st.ok()) {
    return c.Error(std::string(st.message()));
  }
  Shape s = batch;
  if (!va) s.push_back(sa[sa.size() - 2]);
  if (!vb) s.push_back(sb.back());
  c.Out(0, a->dtype, s);
  return absl::OkStatus();
}

absl::Status Gemm(Ctx& c) {
  const Tensor *a = c.In(0), *b = c.In(1);
  if (!a || !b || a->shape.size() != 2 || b->shape.size() != 2) return c.Error("A and B must be matrices");
  const bool ta = AttrInt(c.node, "transA", 0), tb = AttrInt(c.node, "transB", 0);
  int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  int64_t kb = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (k != kb) return c.Error(absl::StrCat("inner dimensions differ: ", k, " and ", kb));
  c.Out(0, a->dtype, {m, n});
  return absl::OkStatus();
}

/// Spatial output extents of Conv and pooling: kernel, strides, dilations, pads/auto_pad, ceil_mode.
absl::Status SpatialOut(Ctx& c, const Shape& x, const Shape& kernel, bool ceil_mode, Shape* out) {
  const size_t sp = x.size() - 2;
  if (kernel.size() != sp) return c.Error("kernel_shape does not match the input's rank");
  Shape strides = AttrInts(c.node, "strides", Shape(sp, 1));
  Shape dil = AttrInts(c.node, "dilations", Shape(sp, 1));
  Shape pads = AttrInts(c.node, "pads", Shape(2 * sp, 0));
  std::string auto_pad = AttrString(c.node, "auto_pad", "NOTSET");
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return c.Error("strides, dilations or pads of the wrong length");
  for (size_t i = 0; i < 2 * sp; ++i) {
    if (pads[i] < 0 || pads[i] > kMaxTensorElements) return c.Error("pads must be in [0, 2^40]");
  }
  for (size_t i = 0; i < sp; ++i) {
    if (strides[i] < 1 || dil[i] < 1 || kernel[i] < 1) return c.Error("non-positive kernel, stride or dilation");
    if (strides[i] > kMaxTensorElements || dil[i] > kMaxTensorElements || kernel[i] > kMaxTensorElements) {
      return c.Error("kernel, stride or dilation above 2^40");
    }
    // Every term is at most 2^40 (the input's extent too), so none of this overflows.
    const int64_t in = x[2 + i], eff = SatAdd(SatMul(kernel[i] - 1, dil[i]), 1);
    if (eff > kMaxTensorElements) return c.Error("the dilated kernel is larger than 2^40");
    int64_t o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (in + strides[i] - 1) / strides[i];
    } else if (auto_pad == "VALID") {
      o = in < eff ? 0 : (in - eff) / strides[i] + 1;
    } else {
      const int64_t span = in + pads[i] + pads[i + sp] - eff;
      if (span < 0) return c.Error("the kernel is larger than the padded input");
      o = ceil_mode ? (span + strides[i] - 1) / strides[i] + 1 : span / strides[i] + 1;
      // The last window must start inside the input or its left padding.
      if (ceil_mode && (o - 1) * strides[i] >= in + pads[i]) --o;
    }
    if (o < 1) return c.Error("the output would be empty");
    out->push_back(o);
  }
  return absl::OkStatus();
}

absl::Status Conv(Ctx& c) {
  const Tensor *x = c.In(0), *w = c.In(1);
  if (!x || !w || x->shape.size() < 3 || w->shape.size() != x->shape.size()) {
    return c.Error("input and weight must have the same rank >= 3");
  }
  Shape kernel = AttrInts(c.node, "kernel_shape", Shape(w->shape.begin() + 2, w->shape.end()));
  const int64_t group = AttrInt(c.node, "group", 1);
  if (group < 1 || x->shape[1] != SatMul(w->shape[1], group)) {
    return c.Error(absl::StrCat("input channels ", x->shape[1], " do not match the weight ", ShapeText(w->shape),
                                " with group ", group));
  }
  Shape s = {x->shape[0], w->shape[0]};
  if (absl::Status st = SpatialOut(c, x->shape, kernel, false, &s); !st.ok()) return st;
  c.Out(0, DType::kFloat32, s);
  return absl::OkStatus();
}

absl::Status Pool(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x || x->shape.size() < 3) return c.Error("input must have rank >= 3");
  if (!HasAttr(c.node, "kernel_shape")) return c.Error("missing kernel_shape");
  Shape s = {x->shape[0], x->shape[1]};
  if (absl::Status st = SpatialOut(c, x->shape, AttrInts(c.node, "kernel_shape"), AttrInt(c.node, "ceil_mode", 0), &s);
      !st.ok()) {
    return st;
  }
  c.Out(0, x->dtype, s);
  if (c.out.size() > 1) c.Out(1, DType::kInt64, s);  // MaxPool's Indices
  return absl::OkStatus();
}

absl::Status GlobalPool(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x || x->shape.size() < 3) return c.Error("input must have rank >= 3");
  Shape s = x->shape;
  std::fill(s.begin() + 2, s.end(), 1);
  c.Out(0, x->dtype, s);
  return absl::OkStatus();
}

absl::Status Normalization(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  c.Out(0, x->dtype, x->shape);
  if (c.node.op == "LayerNormalization" && c.out.size() > 1) {
    const int64_t axis = NormAxis(AttrInt(c.node, "axis", -1), x->shape.size());
    Shape s = x->shape;
    for (size_t i = std::max<int64_t>(axis, 0); i < s.size(); ++i) s[i] = 1;
    for (size_t i = 1; i < c.out.size(); ++i) c.Out(i, DType::kFloat32, s);
  } else if (c.out.size() > 1) {
    return c.Error("only the inference form (one output) is supported");
  }
  return absl::OkStatus();
}

// ---- shape ops ---------------------------------------------------------------------------

absl::Status ShapeOp(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size();
  int64_t start = NormAxis(AttrInt(c.node, "start", 0), r), end = HasAttr(c.node, "end") ? NormAxis(AttrInt(c.node, "end", r), r) : r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  Shape v(x->shape.begin() + start, x->shape.begin() + end);
  c.out[0] = MakeI64(c.out[0].name, {static_cast<int64_t>(v.size())}, v);
  return absl::OkStatus();
}

absl::Status Size(Ctx& c) {
  if (!c.In(0)) return c.Error("missing input");
  c.out[0] = MakeI64(c.out[0].name, {}, {c.In(0)->NumElements()});
  return absl::OkStatus();
}

/// Output = a view of the input's data with a new shape (Reshape, Flatten, Squeeze, Unsqueeze).
absl::Status Reshaped(Ctx& c, Shape s) {
  const Tensor* x = c.In(0);
  if (Product(s) != x->NumElements()) {
    return c.Error(absl::StrCat("cannot reshape ", ShapeText(x->shape), " to ", ShapeText(s)));
  }
  Tensor& o = c.Out(0, x->dtype, std::move(s));
  if (x->constant() && x->NumElements() <= kMaxFoldElements) o.data = x->data;
  return absl::OkStatus();
}

absl::Status Reshape(Ctx& c) {
  const Tensor *x = c.In(0), *shape = c.In(1);
  if (!x || !shape) return c.Error("needs data and shape");
  if (!shape->constant()) return c.Error("the target shape is computed at run time; tune needs it constant");
  Shape target = ConstI64(*shape);
  const bool allowzero = AttrInt(c.node, "allowzero", 0);
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= x->shape.size()) return c.Error("0 in the shape past the input's rank");
      target[i] = x->shape[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return c.Error("more than one -1 in the shape");
      infer = i;
    } else if (target[i] < 0) {
      return c.Error("negative extent in the shape");
    } else {
      known = SatMul(known, target[i]);
    }
  }
  if (infer >= 0) {
    if (known == 0 || x->NumElements() % known) return c.Error(absl::StrCat("cannot reshape ", ShapeText(x->shape), " to ", ShapeText(target)));
    target[infer] = x->NumElements() / known;
  }
  return Reshaped(c, target);
}

absl::Status Flatten(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size(), axis = NormAxis(AttrInt(c.node, "axis", 1), r);
  if (axis < 0 || axis > r) return c.Error("axis out of range");
  return Reshaped(c, {Product(x->shape, 0, axis), Product(x->shape, axis)});
}

/// Axes from the attribute (before `input_opset`) or the input `index`; `*given` false when absent.
absl::Status Axes(Ctx& c, int64_t input_opset, size_t index, Shape* axes, bool* given) {
  *given = false;
  if (c.opset < input_opset) {
    if (HasAttr(c.node, "axes")) {
      *axes = AttrInts(c.node, "axes");
      *given = true;
    }
    return absl::OkStatus();
  }
  const Tensor* t = c.In(index);
  if (!t) return absl::OkStatus();
  if (!t->constant()) return c.Error("the axes are computed at run time; tune needs them constant");
  *axes = ConstI64(*t);
  *given = true;
  return absl::OkStatus();
}

absl::Status Squeeze(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  Shape axes;
  bool given;
  if (absl::Status st = Axes(c, 13, 1, &axes, &given); !st.ok()) return st;
  const int64_t r = x->shape.size();
  std::vector<bool> drop(r, false);
  if (!given) {
    for (int64_t i = 0; i < r; ++i) drop[i] = x->shape[i] == 1;
  }
  for (int64_t a : axes) {
    a = NormAxis(a, r);
    if (a < 0 || a >= r || x->shape[a] != 1) return c.Error("squeezed axis out of range or not 1");
    drop[a] = true;
  }
  Shape s;
  for (int64_t i = 0; i < r; ++i) {
    if (!drop[i]) s.push_back(x->shape[i]);
  }
  return Reshaped(c, s);
}

absl::Status Unsqueeze(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  Shape axes;
  bool given;
  if (absl::Status st = Axes(c, 13, 1, &axes, &given); !st.ok()) return st;
  if (!given) return c.Error("missing axes");
  const int64_t r = x->shape.size() + axes.size();
  std::vector<bool> ins(r, false);
  for (int64_t a : axes) {
    a = NormAxis(a, r);
    if (a < 0 || a >= r || ins[a]) return c.Error("axis out of range or repeated");
    ins[a] = true;
  }
  Shape s;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) s.push_back(ins[i] ? 1 : x->shape[j++]);
  return Reshaped(c, s);
}

absl::Status Transpose(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size();
  Shape perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
  perm = AttrInts(c.node, "perm", perm);
  if (static_cast<int64_t>(perm.size()) != r) return c.Error("perm does not match the rank");
  Shape s(r);
  for (int64_t i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= r) return c.Error("perm out of range");
    s[i] = x->shape[perm[i]];
  }
  Tensor& o = c.Out(0, x->dtype, s);
  if (!c.AllConstant()) return absl::OkStatus();
  Shape in_st = Strides(x->shape), st(r);
  for (int64_t i = 0; i < r; ++i) st[i] = in_st[perm[i]];
  std::vector<int64_t> offsets(Product(s));
  Shape idx(r, 0);
  for (size_t e = 0; e < offsets.size(); ++e) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += idx[d] * st[d];
    offsets[e] = off;
    for (int64_t d = r; d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  o.data = Gather(*x, offsets);
  return absl::OkStatus();
}

absl::Status Concat(Ctx& c) {
  if (c.in.empty() || !c.In(0)) return c.Error("needs inputs");
  const int64_t r = c.In(0)->shape.size();
  const int64_t axis = NormAxis(AttrInt(c.node, "axis", 0), r);
  if (axis < 0 || axis >= r) return c.Error("axis out of range");
  Shape s = c.In(0)->shape;
  s[axis] = 0;
  for (const Tensor* t : c.in) {
    if (!t || static_cast<int64_t>(t->shape.size()) != r) return c.Error("inputs of different ranks");
    for (int64_t d = 0; d < r; ++d) {
      if (d != axis && t->shape[d] != s[d]) return c.Error("inputs differ outside the axis");
    }
    s[axis] = SatAdd(s[axis], t->shape[axis]);
  }
  Tensor& o = c.Out(0, c.In(0)->dtype, s);
  if (!c.AllConstant()) return absl::OkStatus();
  const int64_t outer = Product(s, 0, axis), size = DTypeSize(o.dtype);
  std::vector<uint8_t> data;
  data.reserve(Product(s) * size);
  for (int64_t i = 0; i < outer; ++i) {
    for (const Tensor* t : c.in) {
      const int64_t chunk = Product(t->shape, axis) * size;
      data.insert(data.end(), t->data->begin() + i * chunk, t->data->begin() + (i + 1) * chunk);
    }
  }
  o.data = std::move(data);
  return absl::OkStatus();
}

absl::Status Split(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size(), axis = NormAxis(AttrInt(c.node, "axis", 0), r);
  if (axis < 0 || axis >= r) return c.Error("axis out of range");
  Shape split;
  if (c.opset < 13) {
    split = AttrInts(c.node, "split");
  } else if (const Tensor* t = c.In(1)) {
    if (!t->constant()) return c.Error("the split sizes are computed at run time; tune needs them constant");
    split = ConstI64(*t);
  }
  const int64_t n = c.out.size();
  if (split.empty()) {
    const int64_t chunk = (x->shape[axis] + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) split.push_back(std::min(chunk, x->shape[axis] - i * chunk));
  }
  int64_t total = 0;
  for (int64_t e : split) {
    if (e < 0) return c.Error("negative split size");
    total = SatAdd(total, e);
  }
  if (static_cast<int64_t>(split.size()) != n || total != x->shape[axis]) {
    return c.Error("split sizes do not add up to the axis");
  }
  const int64_t outer = Product(x->shape, 0, axis), inner = Product(x->shape, axis + 1), size = DTypeSize(x->dtype);
  int64_t begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    Shape s = x->shape;
    s[axis] = split[i];
    Tensor& o = c.Out(i, x->dtype, s);
    if (c.AllConstant()) {
      std::vector<uint8_t> data;
      for (int64_t j = 0; j < outer; ++j) {
        auto from = x->data->begin() + (j * x->shape[axis] + begin) * inner * size;
        data.insert(data.end(), from, from + split[i] * inner * size);
      }
      o.data = std::move(data);
    }
    begin += split[i];
  }
  return absl::OkStatus();
}

absl::Status Slice(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size();
  Shape starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = AttrInts(c.node, "starts");
    ends = AttrInts(c.node, "ends");
    axes = AttrInts(c.node, "axes");
  } else {
    for (size_t i = 1; i < 5; ++i) {
      const Tensor* t = c.In(i);
      if (t && !t->constant()) return c.Error("starts, ends, axes and steps must be constant");
    }
    if (!c.In(1) || !c.In(2)) return c.Error("missing starts or ends");
    starts = ConstI64(*c.In(1));
    ends = ConstI64(*c.In(2));
    if (c.In(3)) axes = ConstI64(*c.In(3));
    if (c.In(4)) steps = ConstI64(*c.In(4));
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error("starts, ends, axes and steps differ in length");
  }
  Shape begin(r, 0), step(r, 1), s = x->shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = NormAxis(axes[i], r);
    if (a < 0 || a >= r || steps[i] == 0) return c.Error("axis out of range or zero step");
    const int64_t dim = x->shape[a];
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    // (b, e within [-1, dim] after clamping; a step of any size, INT64_MIN included.)
    if (steps[i] > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      s[a] = e > b ? (e - b - 1) / steps[i] + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      s[a] = b > e ? (steps[i] == std::numeric_limits<int64_t>::min() ? 1 : (b - e - 1) / -steps[i] + 1) : 0;
    }
    begin[a] = b;
    step[a] = steps[i];
  }
  Tensor& o = c.Out(0, x->dtype, s);
  if (!c.AllConstant()) return absl::OkStatus();
  Shape st = Strides(x->shape);
  std::vector<int64_t> offsets(Product(s));
  Shape idx(r, 0);
  for (size_t e = 0; e < offsets.size(); ++e) {
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d) off += (begin[d] + idx[d] * step[d]) * st[d];
    offsets[e] = off;
    for (int64_t d = r; d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  o.data = Gather(*x, offsets);
  return absl::OkStatus();
}

absl::Status GatherOp(Ctx& c) {
  const Tensor *x = c.In(0), *ind = c.In(1);
  if (!x || !ind) return c.Error("needs data and indices");
  const int64_t r = x->shape.size(), axis = NormAxis(AttrInt(c.node, "axis", 0), r);
  if (axis < 0 || axis >= r) return c.Error("axis out of range");
  Shape s(x->shape.begin(), x->shape.begin() + axis);
  s.insert(s.end(), ind->shape.begin(), ind->shape.end());
  s.insert(s.end(), x->shape.begin() + axis + 1, x->shape.end());
  Tensor& o = c.Out(0, x->dtype, s);
  if (!c.AllConstant() || !Fits(s)) return absl::OkStatus();
  std::vector<int64_t> idx = ConstI64(*ind);
  const int64_t outer = Product(x->shape, 0, axis), inner = Product(x->shape, axis + 1), dim = x->shape[axis];
  std::vector<int64_t> offsets;
  offsets.reserve(Product(s));
  for (int64_t i = 0; i < outer; ++i) {
    for (int64_t j : idx) {
      if (j < 0) j += dim;
      if (j < 0 || j >= dim) return c.Error("index out of range");
      for (int64_t k = 0; k < inner; ++k) offsets.push_back((i * dim + j) * inner + k);
    }
  }
  o.data = Gather(*x, offsets);
  return absl::OkStatus();
}

absl::Status ConstantOfShape(Ctx& c) {
  const Tensor* shape = c.In(0);
  if (!shape || !shape->constant()) return c.Error("the shape must be constant");
  Shape s = ConstI64(*shape);
  for (int64_t e : s) {
    if (e < 0) return c.Error("negative extent");
  }
  Tensor value = MakeF32("", {1}, {0.0f});
  if (auto it = c.node.attributes.find("value"); it != c.node.attributes.end()) {
    if (const Tensor* t = std::get_if<Tensor>(&it->second); t && t->constant() && t->NumElements() == 1) value = *t;
  }
  Tensor& o = c.Out(0, value.dtype, s);
  if (Fits(s)) o.data = Gather(value, std::vector<int64_t>(Product(s), 0));
  return absl::OkStatus();
}

absl::Status Expand(Ctx& c) {
  const Tensor *x = c.In(0), *shape = c.In(1);
  if (!x || !shape) return c.Error("needs data and shape");
  if (!shape->constant()) return c.Error("the shape is computed at run time; tune needs it constant");
  Shape s;
  if (absl::Status st = BroadcastShapes(x->shape, ConstI64(*shape), &s); !st.ok()) return c.Error(std::string(st.message()));
  Tensor& o = c.Out(0, x->dtype, s);
  if (c.AllConstant() && Fits(s)) o.data = Gather(*x, BroadcastOffsets(s, x->shape));
  return absl::OkStatus();
}

absl::Status Tile(Ctx& c) {
  const Tensor *x = c.In(0), *rep = c.In(1);
  if (!x || !rep || !rep->constant()) return c.Error("the repeats must be constant");
  Shape reps = ConstI64(*rep), s = x->shape;
  if (reps.size() != s.size()) return c.Error("repeats do not match the rank");
  for (size_t i = 0; i < s.size(); ++i) {
    if (reps[i] < 0) return c.Error("negative repeats");
    s[i] = SatMul(s[i], reps[i]);
  }
  c.Out(0, x->dtype, s);
  return absl::OkStatus();
}

absl::Status Range(Ctx& c) {
  const Tensor *start = c.In(0), *limit = c.In(1), *delta = c.In(2);
  if (!start || !limit || !delta || !c.AllConstant()) return c.Error("start, limit and delta must be constant");
  if (start->dtype == DType::kFloat32) {
    if (start->NumElements() != 1 || limit->NumElements() != 1 || delta->NumElements() != 1) {
      return c.Error("start, limit and delta must be scalars");
    }
    float s = ConstF32(*start)[0], l = ConstF32(*limit)[0], d = ConstF32(*delta)[0];
    if (d == 0) return c.Error("zero delta");
    const double count = std::ceil((static_cast<double>(l) - s) / d);
    if (!(count <= static_cast<double>(kMaxFoldElements))) return c.Error("range too long");
    int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = s + i * d;
    c.out[0] = MakeF32(c.out[0].name, {n}, v);
  } else {
    if (start->NumElements() != 1 || limit->NumElements() != 1 || delta->NumElements() != 1) {
      return c.Error("start, limit and delta must be scalars");
    }
    int64_t s = ConstI64(*start)[0], l = ConstI64(*limit)[0], d = ConstI64(*delta)[0];
    if (d == 0) return c.Error("zero delta");
    // In 128 bits: limit - start and the rounding overflow int64 for extreme values.
    const __int128 span = static_cast<__int128>(l) - s + (d > 0 ? d - 1 : d + 1);
    const __int128 count = span / d;
    if (count > kMaxFoldElements) return c.Error("range too long");
    int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
    if (n > kMaxFoldElements) return c.Error("range too long");
    std::vector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(static_cast<__int128>(s) + static_cast<__int128>(i) * d);
    c.out[0] = MakeI64(c.out[0].name, {n}, v);
  }
  return absl::OkStatus();
}

absl::Status Reduce(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  Shape axes;
  bool given;
  const int64_t input_opset = c.node.op == "ReduceSum" ? 13 : 18;
  if (absl::Status st = Axes(c, input_opset, 1, &axes, &given); !st.ok()) return st;
  const int64_t r = x->shape.size();
  const bool keep = AttrInt(c.node, "keepdims", 1);
  std::vector<bool> red(r, !given && !AttrInt(c.node, "noop_with_empty_axes", 0));
  for (int64_t a : axes) {
    a = NormAxis(a, r);
    if (a < 0 || a >= r) return c.Error("axis out of range");
    red[a] = true;
  }
  Shape s;
  for (int64_t i = 0; i < r; ++i) {
    if (!red[i]) s.push_back(x->shape[i]);
    else if (keep) s.push_back(1);
  }
  c.Out(0, c.node.op == "ArgMax" || c.node.op == "ArgMin" ? DType::kInt64 : x->dtype, s);
  return absl::OkStatus();
}

absl::Status ArgReduce(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  const int64_t r = x->shape.size(), axis = NormAxis(AttrInt(c.node, "axis", 0), r);
  if (axis < 0 || axis >= r) return c.Error("axis out of range");
  Shape s = x->shape;
  if (AttrInt(c.node, "keepdims", 1)) s[axis] = 1;
  else s.erase(s.begin() + axis);
  c.Out(0, DType::kInt64, s);
  return absl::OkStatus();
}

absl::Status Pad(Ctx& c) {
  const Tensor* x = c.In(0);
  if (!x) return c.Error("missing input");
  Shape pads;
  if (c.opset < 11) {
    pads = AttrInts(c.node, "pads");
  } else {
    if (!c.In(1) || !c.In(1)->constant()) return c.Error("the pads must be constant");
    pads = ConstI64(*c.In(1));
  }
  const size_t r = x->shape.size();
  if (pads.size() != 2 * r) return c.Error("pads do not match the rank");
  Shape s = x->shape;
  for (size_t i = 0; i < r; ++i) {
    s[i] = SatAdd(SatAdd(s[i], pads[i]), pads[i + r]);
    if (s[i] < 0) return c.Error("negative output extent");
  }
  c.Out(0, x->dtype, s);
  return absl::OkStatus();
}

absl::Status Clip(Ctx& c) {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (c.opset < 11) {
    lo = AttrFloat(c.node, "min", lo);
    hi = AttrFloat(c.node, "max", hi);
  } else {
    for (size_t i : {1, 2}) {
      if (c.In(i) && !c.In(i)->constant()) return Unary(c);
    }
    if (c.In(1) && c.In(1)->NumElements() == 1) lo = ConstF32(*c.In(1))[0];
    if (c.In(2) && c.In(2)->NumElements() == 1) hi = ConstF32(*c.In(2))[0];
  }
  return Unary(c, [lo, hi](float v) { return std::min(std::max(v, lo), hi); });
}

}  // namespace

absl::Status BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if ((x != y && x != 1 && y != 1) || x < 0 || y < 0) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", ShapeText(a), " and ", ShapeText(b), " do not broadcast"));
    }
    (*out)[i] = x == 1 ? y : x;
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const std::vector<int64_t>& shape) {
  // Zero extents count as 1: strides over a zero-sized tensor multiply the other extents.
  int64_t n = 1;
  for (int64_t e : shape) {
    if (e < 0) return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeText(shape), " has a negative extent"));
    if (__builtin_mul_overflow(n, std::max<int64_t>(e, 1), &n) || n > kMaxTensorElements) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeText(shape), " has more than 2^40 elements"));
    }
  }
  return absl::OkStatus();
}

bool HasAttr(const Node& node, const std::string& name) { return node.attributes.count(name) > 0; }

int64_t AttrInt(const Node& node, const std::string& name, int64_t fallback) {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return fallback;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  return fallback;
}

float AttrFloat(const Node& node, const std::string& name, float fallback) {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return fallback;
  if (const float* v = std::get_if<float>(&it->second)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<float>(*v);
  return fallback;
}

std::vector<int64_t> AttrInts(const Node& node, const std::string& name, const std::vector<int64_t>& fallback) {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return fallback;
}

std::string AttrString(const Node& node, const std::string& name, const std::string& fallback) {
  auto it = node.attributes.find(name);
  if (it == node.attributes.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  return fallback;
}

std::vector<int64_t> ConstI64(const Tensor& t) {
  const int64_t n = t.NumElements();
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kInt64: std::memcpy(&v[i], t.data->data() + i * 8, 8); break;
      case DType::kBool: v[i] = (*t.data)[i] != 0; break;
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, t.data->data() + i * 4, 4);
        // Truncated toward zero; NaN is 0 and values past the int64 range saturate.
        v[i] = std::isnan(f) ? 0 : f >= 9.2e18f ? std::numeric_limits<int64_t>::max()
                             : f <= -9.2e18f ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(f);
        break;
      }
    }
  }
  return v;
}

std::vector<float> ConstF32(const Tensor& t) {
  const int64_t n = t.NumElements();
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kFloat32: std::memcpy(&v[i], t.data->data() + i * 4, 4); break;
      case DType::kBool: v[i] = (*t.data)[i] != 0; break;
      case DType::kInt64: {
        int64_t x;
        std::memcpy(&x, t.data->data() + i * 8, 8);
        v[i] = static_cast<float>(x);
        break;
      }
    }
  }
  return v;
}

Tensor MakeI64(const std::string& name, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  Tensor t{name, DType::kInt64, std::move(shape), std::vector<uint8_t>(values.size() * 8)};
  if (!values.empty()) std::memcpy(t.data->data(), values.data(), values.size() * 8);
  return t;
}

Tensor MakeF32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t{name, DType::kFloat32, std::move(shape), std::vector<uint8_t>(values.size() * 4)};
  if (!values.empty()) std::memcpy(t.data->data(), values.data(), values.size() * 4);
  return t;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? "x" : "", shape[i]);
  return s;
}

absl::Status InferNode(const Node& node, int64_t opset, const std::vector<const Tensor*>& in, std::vector<Tensor>* out) {
  out->clear();
  for (const std::string& name : node.outputs) out->push_back(Tensor{name, DType::kFloat32, {}, std::nullopt});
  Ctx c{node, opset, in, *out};
  if (out->empty()) return c.Error("has no outputs");
  const std::string& op = node.op;
  using F = std::function<float(float)>;
  static const std::map<std::string, F>* unary = new std::map<std::string, F>{
      {"Relu", [](float v) { return v > 0 ? v : 0.0f; }},
      {"Sigmoid", [](float v) { return 1.0f / (1.0f + std::exp(-v)); }},
      {"Tanh", [](float v) { return std::tanh(v); }},
      {"Erf", [](float v) { return std::erf(v); }},
      {"Sqrt", [](float v) { return std::sqrt(v); }},
      {"Exp", [](float v) { return std::exp(v); }},
      {"Log", [](float v) { return std::log(v); }},
      {"Neg", [](float v) { return -v; }},
      {"Abs", [](float v) { return std::fabs(v); }},
      {"Reciprocal", [](float v) { return 1.0f / v; }},
      {"Floor", [](float v) { return std::floor(v); }},
      {"Ceil", [](float v) { return std::ceil(v); }},
      {"Round", [](float v) { return std::nearbyint(v); }},
      {"Sin", nullptr}, {"Cos", nullptr}, {"HardSigmoid", nullptr}, {"HardSwish", nullptr},
      {"Gelu", nullptr}, {"LeakyRelu", nullptr}, {"Elu", nullptr}, {"Selu", nullptr},
      {"Softplus", nullptr}, {"Softsign", nullptr}, {"Mish", nullptr}, {"PRelu", nullptr},
      {"Softmax", nullptr}, {"LogSoftmax", nullptr}, {"Hardmax", nullptr}, {"CumSum", nullptr},
      {"Not", nullptr}, {"Sign", nullptr}, {"Celu", nullptr}, {"ThresholdedRelu", nullptr},
      {"LRN", nullptr}, {"Identity", nullptr}, {"Dropout", nullptr}};
  if (auto it = unary->find(op); it != unary->end()) {
    if (op == "Dropout" && out->size() > 1) {
      if (absl::Status st = Unary(c); !st.ok()) return st;
      c.Out(1, DType::kBool, c.In(0)->shape);
      return absl::OkStatus();
    }
    return Unary(c, it->second);
  }
  if (op == "Clip") return Clip(c);
  static const std::map<std::string, std::pair<BinKind, std::function<double(double, double)>>>* binary =
      new std::map<std::string, std::pair<BinKind, std::function<double(double, double)>>>{
          {"Add", {BinKind::kArith, [](double a, double b) { return a + b; }}},
          {"Sub", {BinKind::kArith, [](double a, double b) { return a - b; }}},
          {"Mul", {BinKind::kArith, [](double a, double b) { return a * b; }}},
          {"Div", {BinKind::kArith, [](double a, double b) { return a / b; }}},
          {"Pow", {BinKind::kArith, [](double a, double b) { return std::pow(a, b); }}},
          {"Mod", {BinKind::kArith, nullptr}},
          {"Equal", {BinKind::kCompare, [](double a, double b) { return a == b; }}},
          {"Less", {BinKind::kCompare, [](double a, double b) { return a < b; }}},
          {"LessOrEqual", {BinKind::kCompare, [](double a, double b) { return a <= b; }}},
          {"Greater", {BinKind::kCompare, [](double a, double b) { return a > b; }}},
          {"GreaterOrEqual", {BinKind::kCompare, [](double a, double b) { return a >= b; }}},
          {"And", {BinKind::kLogic, [](double a, double b) { return a != 0 && b != 0; }}},
          {"Or", {BinKind::kLogic, [](double a, double b) { return a != 0 || b != 0; }}},
          {"Xor", {BinKind::kLogic, [](double a, double b) { return (a != 0) != (b != 0); }}},
      };
  if (auto it = binary->find(op); it != binary->end()) return Binary(c, it->second.first, it->second.second);
  if (op == "Sum" || op == "Max" || op == "Min" || op == "Mean") return Variadic(c);
  if (op == "Where") return Where(c);
  if (op == "Cast") return Cast(c);
  if (op == "MatMul") return MatMul(c);
  if (op == "Gemm") return Gemm(c);
  if (op == "Conv") return Conv(c);
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") return Pool(c);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return GlobalPool(c);
  if (op == "BatchNormalization" || op == "LayerNormalization" || op == "InstanceNormalization") return Normalization(c);
  if (op == "Shape") return ShapeOp(c);
  if (op == "Size") return Size(c);
  if (op == "Reshape") return Reshape(c);
  if (op == "Flatten") return Flatten(c);
  if (op == "Squeeze") return Squeeze(c);
  if (op == "Unsqueeze") return Unsqueeze(c);
  if (op == "Transpose") return Transpose(c);
  if (op == "Concat") return Concat(c);
  if (op == "Split") return Split(c);
  if (op == "Slice") return Slice(c);
  if (op == "Gather") return GatherOp(c);
  if (op == "ConstantOfShape") return ConstantOfShape(c);
  if (op == "Expand") return Expand(c);
  if (op == "Tile") return Tile(c);
  if (op == "Range") return Range(c);
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" ||
      op == "ReduceL2" || op == "ReduceSumSquare") {
    return Reduce(c);
  }
  if (op == "ArgMax" || op == "ArgMin") return ArgReduce(c);
  if (op == "Pad") return Pad(c);
  return c.Error("tune cannot infer the output shape of op " + op);
}

}  // namespace tune::graph
