// The built-in CPU kernels against naive references on random inputs (broadcasting, odd shapes).
#include "executor/builtin_ops.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "codegen/runtime/runtime.h"
#include "gtest/gtest.h"
#include "tests/common/test_seed.h"

namespace tune::executor {
namespace {

using graph::DType;
using graph::Tensor;
using Shape = std::vector<int64_t>;

int64_t NumOf(const Shape& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

/// Random floats in [-1, 1) away from 0 (never zeros).
std::vector<float> RandomFloats(int64_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = u(rng); while (std::fabs(x) < 1e-3f);
  }
  return v;
}

Tensor FloatTensor(const std::string& name, const Shape& shape, std::vector<float> values, bool constant = false) {
  Tensor t{name, DType::kFloat32, shape, std::nullopt};
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  t.data = std::move(bytes);
  if (!constant) t.data->shrink_to_fit();
  return t;
}

Tensor IntTensor(const std::string& name, const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t{name, DType::kInt64, shape, std::vector<uint8_t>(values.size() * 8)};
  std::memcpy(t.data->data(), values.data(), values.size() * 8);
  return t;
}

Tensor OutTensor(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32) {
  return Tensor{name, dtype, shape, std::nullopt};
}

/// Runs the built-in kernel of `node` on `ins` (data taken from each tensor's bytes; every
/// tensor is handed to the kernel as constant-capable) and returns each output's bytes.
std::vector<std::vector<uint8_t>> RunOp(const graph::Node& node, const std::vector<Tensor>& ins,
                                        const std::vector<Tensor>& outs, int64_t opset = 17) {
  std::vector<const Tensor*> in_ptrs, out_ptrs;
  for (const auto& t : ins) in_ptrs.push_back(t.name.empty() ? nullptr : &t);
  for (const auto& t : outs) out_ptrs.push_back(&t);
  auto kernel = CreateBuiltinKernel(node, in_ptrs, out_ptrs, opset);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return {};
  std::vector<const void*> in_data;
  for (const auto& t : ins) in_data.push_back(t.name.empty() ? nullptr : t.data->data());
  std::vector<std::vector<uint8_t>> out_data;
  std::vector<void*> out_ptr_data;
  for (const auto& t : outs) out_data.emplace_back(NumOf(t.shape) * graph::DTypeSize(t.dtype) + 1, 0xAB);
  for (auto& d : out_data) out_ptr_data.push_back(d.data());
  (*kernel)->Run(in_data.data(), out_ptr_data.data());
  for (size_t i = 0; i < outs.size(); ++i) out_data[i].pop_back();
  return out_data;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
std::vector<int64_t> AsInts(const std::vector<uint8_t>& b) {
  std::vector<int64_t> v(b.size() / 8);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
std::vector<float> Floats(const Tensor& t) { return AsFloats(*t.data); }

graph::Node MakeNode(const std::string& op, int ins, int outs, std::map<std::string, graph::Attribute> attrs = {}) {
  graph::Node n;
  n.name = "n_" + op;
  n.op = op;
  for (int i = 0; i < ins; ++i) n.inputs.push_back("i" + std::to_string(i));
  for (int i = 0; i < outs; ++i) n.outputs.push_back("o" + std::to_string(i));
  n.attributes = std::move(attrs);
  return n;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
  }
}

/// Multi-index of flat index `i` in `shape`.
Shape Unravel(int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

/// Flat index in `in` (broadcast to the output's rank from the right) of output index `idx`.
int64_t BroadcastFlat(const Shape& idx, const Shape& in) {
  int64_t flat = 0;
  const size_t off = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
  return flat;
}

class BuiltinOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_threads_ = codegen::runtime::NumThreads();
    codegen::runtime::SetNumThreads(2);
  }
  void TearDown() override { codegen::runtime::SetNumThreads(saved_threads_); }
  int saved_threads_ = 0;
  std::mt19937_64 rng_ = test::TestRng(7);
};

TEST_F(BuiltinOpsTest, BinaryOpsBroadcastLikeNumpy) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4, 5}, {3, 1, 5}}, {{5}, {2, 1, 5}}, {{1}, {7, 3}}, {{4, 1}, {1, 6}}, {{3, 17}, {3, 17}}, {{}, {2, 3}}};
  const std::map<std::string, std::function<float(float, float)>> ops = {
      {"Add", std::plus<float>()}, {"Sub", std::minus<float>()}, {"Mul", std::multiplies<float>()},
      {"Div", std::divides<float>()}, {"Pow", [](float a, float b) { return std::pow(a, b); }}};
  for (const auto& [sa, sb] : cases) {
    for (const auto& [op, fn] : ops) {
      Shape out = sa.size() >= sb.size() ? sa : sb;
      for (size_t i = 0; i < std::min(sa.size(), sb.size()); ++i) {
        const int64_t ea = sa[sa.size() - 1 - i], eb = sb[sb.size() - 1 - i];
        out[out.size() - 1 - i] = std::max(ea, eb);
      }
      auto a = RandomFloats(NumOf(sa), rng_, op == "Pow" ? 0.1f : -1.0f, 1.0f);
      auto b = RandomFloats(NumOf(sb), rng_);
      auto got = AsFloats(RunOp(MakeNode(op, 2, 1), {FloatTensor("i0", sa, a), FloatTensor("i1", sb, b)},
                                {OutTensor("o0", out)})[0]);
      std::vector<float> want(NumOf(out));
      for (int64_t i = 0; i < NumOf(out); ++i) {
        Shape idx = Unravel(i, out);
        want[i] = fn(a[BroadcastFlat(idx, sa)], b[BroadcastFlat(idx, sb)]);
      }
      SCOPED_TRACE(op);
      ExpectNear(got, want, 1e-5f);
    }
  }
}

TEST_F(BuiltinOpsTest, EqualWhereExpandAndCast) {
  std::vector<int64_t> a(12), b(4);
  std::uniform_int_distribution<int64_t> small(1, 3);
  for (auto& v : a) v = small(rng_);
  for (auto& v : b) v = small(rng_);
  auto eq = RunOp(MakeNode("Equal", 2, 1), {IntTensor("i0", {3, 4}, a), IntTensor("i1", {4}, b)},
                  {OutTensor("o0", {3, 4}, DType::kBool)})[0];
  for (int i = 0; i < 12; ++i) EXPECT_EQ(eq[i] != 0, a[i] == b[i % 4]) << i;

  Tensor cond{"i0", DType::kBool, {3, 1}, std::vector<uint8_t>{1, 0, 1}};
  auto x = RandomFloats(4, rng_), y = RandomFloats(12, rng_);
  auto w = AsFloats(RunOp(MakeNode("Where", 3, 1), {cond, FloatTensor("i1", {4}, x), FloatTensor("i2", {3, 4}, y)},
                          {OutTensor("o0", {3, 4})})[0]);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(w[i], (i / 4 != 1) ? x[i % 4] : y[i]) << i;

  auto e_in = RandomFloats(3, rng_);
  auto e = AsFloats(RunOp(MakeNode("Expand", 2, 1), {FloatTensor("i0", {3, 1}, e_in), IntTensor("i1", {3}, {2, 1, 5})},
                          {OutTensor("o0", {2, 3, 5})})[0]);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(e[i], e_in[(i / 5) % 3]) << i;

  auto f = RandomFloats(10, rng_, -5.0f, 5.0f);
  auto as_int = AsInts(RunOp(MakeNode("Cast", 1, 1, {{"to", int64_t{7}}}), {FloatTensor("i0", {10}, f)},
                             {OutTensor("o0", {10}, DType::kInt64)})[0]);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(as_int[i], static_cast<int64_t>(f[i]));
  auto as_bool = RunOp(MakeNode("Cast", 1, 1, {{"to", int64_t{9}}}), {IntTensor("i0", {10}, as_int)},
                       {OutTensor("o0", {10}, DType::kBool)})[0];
  for (int i = 0; i < 10; ++i) EXPECT_EQ(as_bool[i] != 0, as_int[i] != 0);
}

TEST_F(BuiltinOpsTest, UnaryOps) {
  const Shape s = {3, 7, 5};
  auto x = RandomFloats(NumOf(s), rng_, -4.0f, 4.0f);
  auto pos = RandomFloats(NumOf(s), rng_, 0.01f, 4.0f);
  const std::map<std::string, std::function<float(float)>> ops = {
      {"Relu", [](float v) { return v > 0 ? v : 0; }},
      {"Sigmoid", [](float v) { return 1 / (1 + std::exp(-v)); }},
      {"Tanh", [](float v) { return std::tanh(v); }},
      {"Erf", [](float v) { return std::erf(v); }},
      {"Gelu", [](float v) { return 0.5f * v * (1 + std::erf(v / std::sqrt(2.0f))); }},
      {"HardSigmoid", [](float v) { return std::clamp(0.2f * v + 0.5f, 0.0f, 1.0f); }},
      {"HardSwish", [](float v) { return v * std::clamp(v / 6 + 0.5f, 0.0f, 1.0f); }},
      {"Exp", [](float v) { return std::exp(v); }},
      {"Neg", [](float v) { return -v; }},
      {"Sqrt", [](float v) { return std::sqrt(v); }}};
  for (const auto& [op, fn] : ops) {
    const auto& in = op == "Sqrt" ? pos : x;
    auto got = AsFloats(RunOp(MakeNode(op, 1, 1), {FloatTensor("i0", s, in)}, {OutTensor("o0", s)})[0]);
    std::vector<float> want;
    for (float v : in) want.push_back(fn(v));
    SCOPED_TRACE(op);
    ExpectNear(got, want, 1e-5f);
  }
  // Clip with constant bounds (opset 11+) and with attributes (older opsets).
  const float lo = -0.7f, hi = 1.3f;
  auto clip = AsFloats(RunOp(MakeNode("Clip", 3, 1),
                             {FloatTensor("i0", s, x), FloatTensor("i1", {}, {lo}, true), FloatTensor("i2", {}, {hi}, true)},
                             {OutTensor("o0", s)})[0]);
  auto clip6 = AsFloats(RunOp(MakeNode("Clip", 1, 1, {{"min", 0.0f}, {"max", 6.0f}}), {FloatTensor("i0", s, x)},
                              {OutTensor("o0", s)}, 6)[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(clip[i], std::clamp(x[i], lo, hi));
    EXPECT_EQ(clip6[i], std::clamp(x[i], 0.0f, 6.0f));
  }
}

TEST_F(BuiltinOpsTest, MatMulBroadcastsBatchesAndVectors) {
  struct Case { Shape a, b, out; };
  for (const Case& c : std::vector<Case>{{{2, 1, 3, 5}, {4, 5, 6}, {2, 4, 3, 6}}, {{5}, {5, 6}, {6}},
                                         {{3, 5}, {5}, {3}}, {{7, 9}, {9, 11}, {7, 11}}}) {
    auto a = RandomFloats(NumOf(c.a), rng_), b = RandomFloats(NumOf(c.b), rng_);
    auto got = AsFloats(RunOp(MakeNode("MatMul", 2, 1), {FloatTensor("i0", c.a, a), FloatTensor("i1", c.b, b)},
                              {OutTensor("o0", c.out)})[0]);
    Shape sa = c.a, sb = c.b;
    if (sa.size() == 1) sa.insert(sa.begin(), 1);
    if (sb.size() == 1) sb.push_back(1);
    const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
    Shape batch(std::max(batch_a.size(), batch_b.size()), 1);
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t ea = i < batch_a.size() ? batch_a[batch_a.size() - 1 - i] : 1;
      const int64_t eb = i < batch_b.size() ? batch_b[batch_b.size() - 1 - i] : 1;
      batch[batch.size() - 1 - i] = std::max(ea, eb);
    }
    std::vector<float> want;
    for (int64_t bi = 0; bi < NumOf(batch); ++bi) {
      Shape idx = Unravel(bi, batch);
      const int64_t oa = BroadcastFlat(idx, batch_a), ob = BroadcastFlat(idx, batch_b);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p) s += double(a[oa * m * k + i * k + p]) * b[ob * k * n + p * n + j];
          want.push_back(static_cast<float>(s));
        }
    }
    ExpectNear(got, want, 1e-5f);
  }
}

TEST_F(BuiltinOpsTest, GemmWithTransposesAlphaBetaAndBroadcastC) {
  const int64_t m = 5, k = 7, n = 9;
  for (int variant = 0; variant < 4; ++variant) {
    const bool ta = variant & 1, tb = variant & 2;
    auto a = RandomFloats(m * k, rng_), b = RandomFloats(k * n, rng_);
    const Shape c_shape = variant % 2 ? Shape{m, 1} : Shape{n};
    auto cv = RandomFloats(NumOf(c_shape), rng_);
    const float alpha = 0.75f, beta = -1.5f;
    graph::Node node = MakeNode("Gemm", 3, 1, {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}});
    auto got = AsFloats(RunOp(node, {FloatTensor("i0", ta ? Shape{k, m} : Shape{m, k}, a),
                                     FloatTensor("i1", tb ? Shape{n, k} : Shape{k, n}, b, true),
                                     FloatTensor("i2", c_shape, cv)},
                              {OutTensor("o0", {m, n})})[0]);
    std::vector<float> want;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
        want.push_back(static_cast<float>(alpha * s + beta * (variant % 2 ? cv[i] : cv[j])));
      }
    SCOPED_TRACE(variant);
    ExpectNear(got, want, 1e-5f);
  }
}

TEST_F(BuiltinOpsTest, ConvWithGroupsStridesPadsAndDilations) {
  const int64_t batch = 2, ch = 4, h = 9, w = 7, oc = 6, groups = 2, kh = 3, kw = 2;
  const Shape strides = {2, 1}, pads = {1, 0, 2, 1}, dil = {1, 2};
  const int64_t oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) / strides[0] + 1;
  const int64_t ow = (w + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) / strides[1] + 1;
  auto x = RandomFloats(batch * ch * h * w, rng_), wt = RandomFloats(oc * (ch / groups) * kh * kw, rng_),
       bias = RandomFloats(oc, rng_);
  graph::Node node = MakeNode("Conv", 3, 1, {{"group", groups}, {"strides", strides}, {"pads", pads}, {"dilations", dil},
                                             {"kernel_shape", Shape{kh, kw}}});
  auto got = AsFloats(RunOp(node, {FloatTensor("i0", {batch, ch, h, w}, x), FloatTensor("i1", {oc, ch / groups, kh, kw}, wt),
                                   FloatTensor("i2", {oc}, bias)},
                            {OutTensor("o0", {batch, oc, oh, ow})})[0]);
  std::vector<float> want;
  const int64_t cg = ch / groups, ocg = oc / groups;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t p = 0; p < oh; ++p)
        for (int64_t q = 0; q < ow; ++q) {
          double s = bias[o];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < kh; ++r)
              for (int64_t t = 0; t < kw; ++t) {
                const int64_t ih = p * strides[0] - pads[0] + r * dil[0], iw = q * strides[1] - pads[1] + t * dil[1];
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                s += double(x[((b * ch + (o / ocg) * cg + c) * h + ih) * w + iw]) * wt[((o * cg + c) * kh + r) * kw + t];
              }
          want.push_back(static_cast<float>(s));
        }
  ExpectNear(got, want, 1e-5f);
}

TEST_F(BuiltinOpsTest, PoolingWithPadsCeilModeAndCountIncludePad) {
  const int64_t n = 2, c = 3, h = 10, w = 7;
  auto x = RandomFloats(n * c * h * w, rng_);
  for (const bool is_max : {true, false}) {
    for (const bool ceil : {false, true}) {
      for (const bool include : {false, true}) {
        const Shape k = {3, 2}, s = {2, 2}, pads = {1, 0, 1, 1};
        auto extent = [&](int64_t in, int64_t pad, int64_t kk, int64_t ss) {
          const int64_t span = in + pad - kk;
          int64_t o = (ceil ? (span + ss - 1) / ss : span / ss) + 1;
          return o;
        };
        int64_t oh = extent(h, pads[0] + pads[2], k[0], s[0]), ow = extent(w, pads[1] + pads[3], k[1], s[1]);
        if (ceil && (oh - 1) * s[0] >= h + pads[0]) --oh;
        if (ceil && (ow - 1) * s[1] >= w + pads[1]) --ow;
        graph::Node node = MakeNode(is_max ? "MaxPool" : "AveragePool", 1, 1,
                                    {{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t{ceil}},
                                     {"count_include_pad", int64_t{include}}});
        auto got = AsFloats(RunOp(node, {FloatTensor("i0", {n, c, h, w}, x)}, {OutTensor("o0", {n, c, oh, ow})})[0]);
        std::vector<float> want;
        for (int64_t t = 0; t < n * c; ++t)
          for (int64_t p = 0; p < oh; ++p)
            for (int64_t q = 0; q < ow; ++q) {
              const int64_t h0 = p * s[0] - pads[0], w0 = q * s[1] - pads[1];
              double best = -1e30, sum = 0;
              int64_t valid = 0;
              for (int64_t r = h0; r < h0 + k[0]; ++r)
                for (int64_t u = w0; u < w0 + k[1]; ++u) {
                  if (r < 0 || r >= h || u < 0 || u >= w) continue;
                  best = std::max<double>(best, x[(t * h + r) * w + u]);
                  sum += x[(t * h + r) * w + u];
                  ++valid;
                }
              const int64_t padded = (std::min(h0 + k[0], h + pads[2]) - h0) * (std::min(w0 + k[1], w + pads[3]) - w0);
              want.push_back(static_cast<float>(is_max ? best : sum / (include ? padded : valid)));
            }
        SCOPED_TRACE(testing::Message() << is_max << ceil << include);
        ExpectNear(got, want, 1e-5f);
      }
    }
  }
  auto g = AsFloats(RunOp(MakeNode("GlobalAveragePool", 1, 1), {FloatTensor("i0", {n, c, h, w}, x)},
                          {OutTensor("o0", {n, c, 1, 1})})[0]);
  for (int64_t t = 0; t < n * c; ++t) {
    double s = 0;
    for (int64_t i = 0; i < h * w; ++i) s += x[t * h * w + i];
    EXPECT_NEAR(g[t], s / (h * w), 1e-5);
  }
}

TEST_F(BuiltinOpsTest, ReductionsOverAnyAxes) {
  const Shape s = {3, 4, 5, 2};
  auto x = RandomFloats(NumOf(s), rng_);
  struct Case { std::string op; Shape axes; bool keep; };
  for (const Case& c : std::vector<Case>{{"ReduceMean", {1, 3}, false}, {"ReduceSum", {-1}, true},
                                         {"ReduceMean", {1, 2}, true}, {"ReduceSum", {0, 2}, false},
                                         {"ReduceMean", {}, false}}) {
    Shape out;
    std::vector<bool> red(4, c.axes.empty());
    for (int64_t a : c.axes) red[a < 0 ? a + 4 : a] = true;
    for (int d = 0; d < 4; ++d) {
      if (!red[d]) out.push_back(s[d]);
      else if (c.keep) out.push_back(1);
    }
    std::map<std::string, graph::Attribute> attrs = {{"keepdims", int64_t{c.keep}}};
    if (!c.axes.empty()) attrs["axes"] = c.axes;
    auto got = AsFloats(RunOp(MakeNode(c.op, 1, 1, attrs), {FloatTensor("i0", s, x)}, {OutTensor("o0", out)})[0]);
    std::vector<double> want(NumOf(out), 0);
    int64_t count = 1;
    for (int d = 0; d < 4; ++d) count *= red[d] ? s[d] : 1;
    for (int64_t i = 0; i < NumOf(s); ++i) {
      Shape idx = Unravel(i, s);
      int64_t o = 0;
      for (int d = 0; d < 4; ++d) {
        if (!red[d]) o = o * s[d] + idx[d];
      }
      want[o] += x[i];
    }
    std::vector<float> wantf;
    for (double v : want) wantf.push_back(static_cast<float>(c.op == "ReduceMean" ? v / count : v));
    SCOPED_TRACE(c.op);
    ExpectNear(got, wantf, 1e-5f);
  }
}

TEST_F(BuiltinOpsTest, SoftmaxLayerNormAndBatchNorm) {
  const Shape s = {2, 3, 5};
  auto x = RandomFloats(NumOf(s), rng_, -3.0f, 3.0f);
  auto sm = AsFloats(RunOp(MakeNode("Softmax", 1, 1, {{"axis", int64_t{1}}}), {FloatTensor("i0", s, x)}, {OutTensor("o0", s)})[0]);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 5; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < 3; ++j) sum += std::exp(double(x[(a * 3 + j) * 5 + c]));
      for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(sm[(a * 3 + j) * 5 + c], std::exp(double(x[(a * 3 + j) * 5 + c])) / sum, 1e-6);
    }
  auto scale = RandomFloats(5, rng_), bias = RandomFloats(5, rng_);
  auto ln = AsFloats(RunOp(MakeNode("LayerNormalization", 3, 1, {{"epsilon", 1e-5f}}),
                           {FloatTensor("i0", s, x), FloatTensor("i1", {5}, scale), FloatTensor("i2", {5}, bias)},
                           {OutTensor("o0", s)})[0]);
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 5; ++j) mean += x[r * 5 + j] / 5.0;
    for (int j = 0; j < 5; ++j) var += (x[r * 5 + j] - mean) * (x[r * 5 + j] - mean) / 5.0;
    for (int j = 0; j < 5; ++j) {
      EXPECT_NEAR(ln[r * 5 + j], (x[r * 5 + j] - mean) / std::sqrt(var + 1e-5) * scale[j] + bias[j], 1e-4);
    }
  }
  auto mean = RandomFloats(3, rng_), var = RandomFloats(3, rng_, 0.1f, 2.0f);
  auto bn = AsFloats(RunOp(MakeNode("BatchNormalization", 5, 1, {{"epsilon", 1e-3f}}),
                           {FloatTensor("i0", s, x), FloatTensor("i1", {3}, {scale[0], scale[1], scale[2]}),
                            FloatTensor("i2", {3}, {bias[0], bias[1], bias[2]}), FloatTensor("i3", {3}, mean),
                            FloatTensor("i4", {3}, var)},
                           {OutTensor("o0", s)})[0]);
  for (int64_t i = 0; i < NumOf(s); ++i) {
    const int64_t c = (i / 5) % 3;
    EXPECT_NEAR(bn[i], (x[i] - mean[c]) / std::sqrt(var[c] + 1e-3) * scale[c] + bias[c], 1e-5);
  }
}

TEST_F(BuiltinOpsTest, TransposeConcatSplitSliceGatherPad) {
  const Shape s = {2, 3, 4, 5};
  auto x = RandomFloats(NumOf(s), rng_);
  // Transpose.
  const Shape perm = {0, 2, 3, 1};
  auto tr = AsFloats(RunOp(MakeNode("Transpose", 1, 1, {{"perm", perm}}), {FloatTensor("i0", s, x)},
                           {OutTensor("o0", {2, 4, 5, 3})})[0]);
  for (int64_t i = 0; i < NumOf(s); ++i) {
    Shape idx = Unravel(i, {2, 4, 5, 3});
    EXPECT_EQ(tr[i], x[((idx[0] * 3 + idx[3]) * 4 + idx[1]) * 5 + idx[2]]);
  }
  // Concat along axis 1 with an input of another extent.
  auto y = RandomFloats(2 * 2 * 4 * 5, rng_);
  auto cat = AsFloats(RunOp(MakeNode("Concat", 2, 1, {{"axis", int64_t{1}}}),
                            {FloatTensor("i0", s, x), FloatTensor("i1", {2, 2, 4, 5}, y)}, {OutTensor("o0", {2, 5, 4, 5})})[0]);
  for (int64_t i = 0; i < 2 * 5 * 20; ++i) {
    const int64_t b = i / 100, c = (i / 20) % 5, r = i % 20;
    EXPECT_EQ(cat[i], c < 3 ? x[(b * 3 + c) * 20 + r] : y[(b * 2 + c - 3) * 20 + r]);
  }
  // Split along axis 2 into 1 and 3.
  auto parts = RunOp(MakeNode("Split", 1, 2, {{"axis", int64_t{2}}}), {FloatTensor("i0", s, x)},
                     {OutTensor("o0", {2, 3, 1, 5}), OutTensor("o1", {2, 3, 3, 5})});
  auto p0 = AsFloats(parts[0]), p1 = AsFloats(parts[1]);
  for (int64_t i = 0; i < NumOf(s); ++i) {
    Shape idx = Unravel(i, s);
    const int64_t row = idx[0] * 3 + idx[1];
    EXPECT_EQ(x[i], idx[2] == 0 ? p0[row * 5 + idx[3]] : p1[(row * 3 + idx[2] - 1) * 5 + idx[3]]);
  }
  // Slice: axis 3 from -1 backwards by 2, axis 1 from 1 to the end.
  auto sl = AsFloats(RunOp(MakeNode("Slice", 5, 1),
                           {FloatTensor("i0", s, x), IntTensor("i1", {2}, {-1, 1}), IntTensor("i2", {2}, {-100, 1000}),
                            IntTensor("i3", {2}, {3, 1}), IntTensor("i4", {2}, {-2, 1})},
                           {OutTensor("o0", {2, 2, 4, 3})})[0]);
  for (int64_t i = 0; i < 2 * 2 * 4 * 3; ++i) {
    Shape idx = Unravel(i, {2, 2, 4, 3});
    EXPECT_EQ(sl[i], x[((idx[0] * 3 + idx[1] + 1) * 4 + idx[2]) * 5 + (4 - 2 * idx[3])]);
  }
  // Gather along axis 1 with a negative index.
  std::vector<int64_t> ind = {2, -3, 1, 0};
  auto ga = AsFloats(RunOp(MakeNode("Gather", 2, 1, {{"axis", int64_t{1}}}), {FloatTensor("i0", s, x), IntTensor("i1", {2, 2}, ind)},
                           {OutTensor("o0", {2, 2, 2, 4, 5})})[0]);
  for (int64_t i = 0; i < 2 * 4 * 20; ++i) {
    const int64_t b = i / 80, j = (i / 20) % 4, r = i % 20;
    const int64_t c = ind[j] < 0 ? ind[j] + 3 : ind[j];
    EXPECT_EQ(ga[i], x[(b * 3 + c) * 20 + r]);
  }
  // Pad with a constant value.
  auto pd = AsFloats(RunOp(MakeNode("Pad", 3, 1),
                           {FloatTensor("i0", s, x), IntTensor("i1", {8}, {0, 1, 0, 2, 1, 0, 3, 1}),
                            FloatTensor("i2", {}, {0.25f}, true)},
                           {OutTensor("o0", {3, 4, 7, 8})})[0]);
  for (int64_t i = 0; i < 3 * 4 * 7 * 8; ++i) {
    Shape idx = Unravel(i, {3, 4, 7, 8});
    const int64_t a = idx[0], b = idx[1] - 1, c = idx[2], d = idx[3] - 2;
    const bool inside = a < 2 && b >= 0 && b < 3 && c < 4 && d >= 0 && d < 5;
    EXPECT_EQ(pd[i], inside ? x[((a * 3 + b) * 4 + c) * 5 + d] : 0.25f) << i;
  }
}

TEST_F(BuiltinOpsTest, RefusesUnknownOpsAndBadShapes) {
  auto x = RandomFloats(4, rng_);
  Tensor in = FloatTensor("i0", {2, 2}, x), out = OutTensor("o0", {2, 2});
  auto det = CreateBuiltinKernel(MakeNode("Det", 1, 1), {&in}, {&out}, 17);
  ASSERT_FALSE(det.ok());
  EXPECT_EQ(det.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(det.status().message(), "node 'n_Det' (Det) has no built-in kernel");
  Tensor wrong = OutTensor("o0", {2, 3});
  auto relu = CreateBuiltinKernel(MakeNode("Relu", 1, 1), {&in}, {&wrong}, 17);
  ASSERT_FALSE(relu.ok());
  EXPECT_NE(relu.status().message().find("n_Relu"), std::string::npos);
  Tensor starts{"i1", DType::kInt64, {1}, std::nullopt};  // not a constant
  Tensor ends = IntTensor("i2", {1}, {1});
  auto slice = CreateBuiltinKernel(MakeNode("Slice", 3, 1), {&in, &starts, &ends}, {&out}, 17);
  ASSERT_FALSE(slice.ok());
  EXPECT_NE(slice.status().message().find("starts must be a constant"), std::string::npos);
}

}  // namespace
}  // namespace tune::executor
