// Workload: op names, tensor shapes, FLOP counts, stable keys and parsing of shape strings.
#include "codegen/ir/workload.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tune::codegen {
namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

bool IsMatmulLike(OpKind op) { return op != OpKind::kConv2d; }

// What Parse() expects for `op`, as written in error messages.
std::string ExpectedShape(OpKind op) {
  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      return "M,N,K (positive integers)";
    case OpKind::kBatchMatmul:
      return "B,M,N,K (positive integers)";
    case OpKind::kConv2d:
      return "N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]][,nchwXc] (positive integers; "
             "pad may be 0; nchw16c: activations in blocks of 16 channels)";
  }
  return "";
}

// Parses a non-negative decimal integer made of digits only (no sign, no spaces).
// Returns false on an empty string, any other character, or a value above int64 max.
bool ParseDigits(absl::string_view text, int64_t* value, bool* overflow) {
  *overflow = false;
  if (text.empty()) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const int digit = c - '0';
    if (v > (kMaxInt64 - digit) / 10) {
      *overflow = true;
      return false;
    }
    v = v * 10 + digit;
  }
  *value = v;
  return true;
}

// a * b, or -1 when it does not fit in int64 (a, b >= 0).
int64_t CheckedMul(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (a != 0 && b > kMaxInt64 / a) return -1;
  return a * b;
}

// Output extent of a convolution along one axis; 0 when the dilated kernel does not fit.
int64_t ConvOutExtent(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  if (stride <= 0) return 0;
  // In 128 bits: any int64 fields (an unvalidated workload's) give a value, never an overflow.
  const __int128 span = static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) -
                        static_cast<__int128>(dilation) * (static_cast<__int128>(kernel) - 1) - 1;
  if (span < 0) return 0;
  const __int128 extent = span / stride + 1;
  return extent > kMaxInt64 ? kMaxInt64 : static_cast<int64_t>(extent);
}

std::string EpilogueName(bool bias, bool relu, bool relu6) {
  const char* act = relu ? "relu" : relu6 ? "relu6" : nullptr;
  if (act == nullptr) return bias ? "bias" : "none";
  return bias ? absl::StrCat("bias_", act) : act;
}

// One token of a shape key: "<prefix><a>", or "<prefix><a>x<b>" where `b` is set.
struct KeyToken {
  const char* prefix;
  int64_t Workload::*a;
  int64_t Workload::*b = nullptr;
};

// The tokens of an operator's shape key, in order.
const std::vector<KeyToken>& KeyTokens(OpKind op) {
  static const std::vector<KeyToken> kGemm = {{"m", &Workload::m}, {"n", &Workload::n}, {"k", &Workload::k}};
  static const std::vector<KeyToken> kBatchGemm = {
      {"b", &Workload::batch}, {"m", &Workload::m}, {"n", &Workload::n}, {"k", &Workload::k}};
  static const std::vector<KeyToken> kConv = {{"n", &Workload::batch},
                                              {"c", &Workload::in_c},
                                              {"h", &Workload::in_h},
                                              {"w", &Workload::in_w},
                                              {"oc", &Workload::out_c},
                                              {"k", &Workload::kernel_h, &Workload::kernel_w},
                                              {"s", &Workload::stride_h, &Workload::stride_w},
                                              {"p", &Workload::pad_h, &Workload::pad_w},
                                              {"d", &Workload::dilation_h, &Workload::dilation_w},
                                              {"g", &Workload::groups}};
  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      return kGemm;
    case OpKind::kBatchMatmul:
      return kBatchGemm;
    case OpKind::kConv2d:
      break;
  }
  return kConv;
}

// The layout token of an NCHWc convolution, "nchw16c"; empty for NCHW.
std::string LayoutToken(const Workload& w) {
  return w.layout_block > 0 ? absl::StrCat("nchw", w.layout_block, "c") : "";
}

// Reads a layout token ("nchw<c>c", c positive) into `*block`.
bool ParseLayoutToken(absl::string_view token, int64_t* block) {
  bool overflow = false;
  return absl::ConsumePrefix(&token, "nchw") && absl::ConsumeSuffix(&token, "c") &&
         ParseDigits(token, block, &overflow) && *block > 0;
}

// The shape part of Key(), e.g. "m128_n768_k768".
std::string ShapeKey(const Workload& w) {
  std::string key;
  for (const KeyToken& t : KeyTokens(w.op)) {
    absl::StrAppend(&key, key.empty() ? "" : "_", t.prefix, w.*t.a);
    if (t.b != nullptr) absl::StrAppend(&key, "x", w.*t.b);
  }
  if (w.layout_block != 0) absl::StrAppend(&key, "_", LayoutToken(w));
  return key;
}

// Parses one "<prefix><int>" or "<prefix><int>x<int>" token of a shape key.
bool ParseKeyToken(absl::string_view token, absl::string_view prefix, int64_t* a, int64_t* b) {
  if (!absl::ConsumePrefix(&token, prefix)) return false;
  bool overflow = false;
  if (b == nullptr) return ParseDigits(token, a, &overflow);
  std::vector<absl::string_view> parts = absl::StrSplit(token, 'x');
  return parts.size() == 2 && ParseDigits(parts[0], a, &overflow) &&
         ParseDigits(parts[1], b, &overflow);
}

}  // namespace

std::string OpName(OpKind op) {
  switch (op) {
    case OpKind::kDense:
      return "dense";
    case OpKind::kMatmul:
      return "matmul";
    case OpKind::kBatchMatmul:
      return "batch_matmul";
    case OpKind::kConv2d:
      return "conv2d";
  }
  return "unknown";
}

absl::StatusOr<OpKind> ParseOpName(const std::string& name) {
  for (OpKind op : {OpKind::kDense, OpKind::kMatmul, OpKind::kBatchMatmul, OpKind::kConv2d}) {
    if (name == OpName(op)) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown op '", name, "'; expected one of dense, matmul, batch_matmul, conv2d"));
}

int64_t TensorSpec::NumElements() const {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (extent <= 0) return 0;
    count = CheckedMul(count, extent);
    if (count < 0) return kMaxInt64;  // saturates: never wraps to a small or negative count
  }
  return count;
}

int64_t Workload::out_h() const {
  if (op != OpKind::kConv2d) return 0;
  return ConvOutExtent(in_h, kernel_h, stride_h, pad_h, dilation_h);
}

int64_t Workload::out_w() const {
  if (op != OpKind::kConv2d) return 0;
  return ConvOutExtent(in_w, kernel_w, stride_w, pad_w, dilation_w);
}

std::vector<TensorSpec> Workload::Inputs() const {
  std::vector<TensorSpec> inputs;
  switch (op) {
    case OpKind::kDense:
      inputs.push_back({"data", {m, k}});
      inputs.push_back({"weight", {n, k}});
      if (bias) inputs.push_back({"bias", {n}});
      break;
    case OpKind::kMatmul:
      inputs.push_back({"a", {m, k}});
      inputs.push_back({"b", {k, n}});
      if (bias) inputs.push_back({"bias", {n}});
      break;
    case OpKind::kBatchMatmul:
      inputs.push_back({"a", {batch, m, k}});
      inputs.push_back({"b", {batch, k, n}});
      if (bias) inputs.push_back({"bias", {n}});
      break;
    case OpKind::kConv2d:
      if (layout_block > 0) {
        inputs.push_back({"data", {batch, in_c / layout_block, in_h, in_w, layout_block}});
      } else {
        inputs.push_back({"data", {batch, in_c, in_h, in_w}});
      }
      inputs.push_back({"weight", {out_c, groups > 0 ? in_c / groups : 0, kernel_h, kernel_w}});
      if (bias) inputs.push_back({"bias", {out_c}});
      break;
  }
  return inputs;
}

TensorSpec Workload::Output() const {
  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      return {"out", {m, n}};
    case OpKind::kBatchMatmul:
      return {"out", {batch, m, n}};
    case OpKind::kConv2d:
      if (layout_block > 0) return {"out", {batch, out_c / layout_block, out_h(), out_w(), layout_block}};
      return {"out", {batch, out_c, out_h(), out_w()}};
  }
  return {"out", {}};
}

double Workload::Flops() const {
  if (IsMatmulLike(op)) {
    const double b = op == OpKind::kBatchMatmul ? static_cast<double>(batch) : 1.0;
    return 2.0 * b * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  if (groups <= 0) return 0;
  return 2.0 * static_cast<double>(batch) * static_cast<double>(out_c) *
         static_cast<double>(out_h()) * static_cast<double>(out_w()) *
         static_cast<double>(in_c / groups) * static_cast<double>(kernel_h) *
         static_cast<double>(kernel_w);
}

std::string Workload::Key() const {
  return absl::StrCat(OpName(op), "/", ShapeKey(*this), "/", EpilogueName(bias, relu, relu6), "/", dtype);
}

std::string Workload::Label() const {
  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      return absl::StrCat(OpName(op), " ", m, "x", n, "x", k);
    case OpKind::kBatchMatmul:
      return absl::StrCat(OpName(op), " ", batch, "x", m, "x", n, "x", k);
    case OpKind::kConv2d: {
      std::string label = absl::StrCat("conv2d ", batch, "x", in_c, "x", in_h, "x", in_w);
      if (kernel_h == kernel_w) {
        absl::StrAppend(&label, " k", kernel_h);
      } else {
        absl::StrAppend(&label, " k", kernel_h, "x", kernel_w);
      }
      if (stride_h == stride_w) {
        absl::StrAppend(&label, " s", stride_h);
      } else {
        absl::StrAppend(&label, " s", stride_h, "x", stride_w);
      }
      absl::StrAppend(&label, " oc", out_c);
      if (dilation_h != 1 || dilation_w != 1) {
        absl::StrAppend(&label, " d", dilation_h);
        if (dilation_w != dilation_h) absl::StrAppend(&label, "x", dilation_w);
      }
      if (depthwise()) {
        absl::StrAppend(&label, " dw");
      } else if (groups != 1) {
        absl::StrAppend(&label, " g", groups);
      }
      if (layout_block > 0) absl::StrAppend(&label, " ", LayoutToken(*this));
      return label;
    }
  }
  return OpName(op);
}

absl::Status Workload::Validate() const {
  const std::string what = absl::StrCat("invalid ", OpName(op), " workload ", ShapeKey(*this));
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  auto positive = [&](const char* field, int64_t value) -> absl::Status {
    if (value > 0) return absl::OkStatus();
    return fail(absl::StrCat(field, " must be positive, got ", value));
  };
  if (dtype != "float32") return fail(absl::StrCat("dtype must be float32, got '", dtype, "'"));
  if (relu && relu6) return fail("relu and relu6 are exclusive");
  if (layout_block != 0) {
    if (op != OpKind::kConv2d) return fail("a channel-blocked layout is for conv2d only");
    if (layout_block < 0 || layout_block > 1024) {
      return fail(absl::StrCat("the layout's channel block must be 1..1024, got ", layout_block));
    }
    if (groups != 1 && !depthwise()) {
      return fail(absl::StrCat("the NCHWc layout takes groups 1 or depthwise (groups == C == OC), got groups ",
                               groups, " of C ", in_c, " and OC ", out_c));
    }
    if (in_c % layout_block != 0 || out_c % layout_block != 0) {
      return fail(absl::StrCat("the layout's channel block ", layout_block, " must divide C ", in_c,
                               " and OC ", out_c));
    }
  }

  if (IsMatmulLike(op)) {
    if (op != OpKind::kBatchMatmul && batch != 1) {
      return fail(
          absl::StrCat("batch must be 1 for ", OpName(op), ", got ", batch, " (use batch_matmul)"));
    }
    const std::pair<const char*, int64_t> fields[] = {
        {"batch", batch}, {"M", m}, {"N", n}, {"K", k}};
    for (const auto& [field, value] : fields) {
      if (absl::Status s = positive(field, value); !s.ok()) return s;
    }
  } else {
    const std::pair<const char*, int64_t> fields[] = {{"N", batch},
                                                      {"C", in_c},
                                                      {"H", in_h},
                                                      {"W", in_w},
                                                      {"OC", out_c},
                                                      {"KH", kernel_h},
                                                      {"KW", kernel_w},
                                                      {"stride_h", stride_h},
                                                      {"stride_w", stride_w},
                                                      {"dilation_h", dilation_h},
                                                      {"dilation_w", dilation_w},
                                                      {"groups", groups}};
    for (const auto& [field, value] : fields) {
      if (absl::Status s = positive(field, value); !s.ok()) return s;
    }
    if (pad_h < 0 || pad_w < 0) {
      return fail(absl::StrCat("padding must be non-negative, got ", pad_h, "x", pad_w));
    }
    if (in_c % groups != 0 || out_c % groups != 0) {
      return fail(absl::StrCat("groups ", groups, " must divide C ", in_c, " and OC ", out_c));
    }
    // Guard the extent arithmetic below against overflow before using it.
    for (int64_t v : {in_h, in_w, kernel_h, kernel_w, pad_h, pad_w, dilation_h, dilation_w}) {
      if (v > (int64_t{1} << 30)) return fail(absl::StrCat("extent ", v, " is too large"));
    }
    if (out_h() <= 0 || out_w() <= 0) {
      return fail(absl::StrCat("the ", dilation_h * (kernel_h - 1) + 1, "x",
                               dilation_w * (kernel_w - 1) + 1,
                               " (dilated) kernel does not fit the padded ", in_h + 2 * pad_h, "x",
                               in_w + 2 * pad_w, " input"));
    }
  }
  // Every tensor's element count must fit in int64 so that indexing cannot overflow.
  std::vector<TensorSpec> tensors = Inputs();
  tensors.push_back(Output());
  for (const TensorSpec& t : tensors) {
    int64_t count = 1;
    for (int64_t extent : t.shape) count = CheckedMul(count, extent);
    if (count < 0 || count > (int64_t{1} << 48)) {
      return fail(absl::StrCat("tensor '", t.name, "' has too many elements"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Workload> Workload::Parse(OpKind op, const std::string& shape) {
  auto malformed = [&](const std::string& detail) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ", OpName(op), " shape '", shape,
                                                   "': expected ", ExpectedShape(op), "; ",
                                                   detail));
  };
  std::vector<std::string> fields = absl::StrSplit(shape, ',');
  // A conv2d shape may end in its activations' layout, "nchw16c".
  int64_t layout_block = 0;
  if (op == OpKind::kConv2d && fields.size() > 1) {
    const absl::string_view last = absl::StripAsciiWhitespace(fields.back());
    if (absl::StartsWith(last, "nchw")) {
      if (!ParseLayoutToken(last, &layout_block)) {
        return malformed(absl::StrCat("layout '", last, "' is not nchwXc with X a positive integer"));
      }
      fields.pop_back();
    }
  }
  std::vector<int64_t> values;
  for (size_t i = 0; i < fields.size(); ++i) {
    const absl::string_view field = absl::StripAsciiWhitespace(fields[i]);
    if (field.empty()) {
      if (fields.size() == 1) return malformed("got an empty string");
      return malformed(absl::StrCat("field ", i + 1, " is empty",
                                    i + 1 == fields.size() ? " (trailing comma?)" : ""));
    }
    int64_t value = 0;
    bool overflow = false;
    if (!ParseDigits(field, &value, &overflow)) {
      if (overflow) return malformed(absl::StrCat("field ", i + 1, " '", field, "' overflows"));
      return malformed(
          absl::StrCat("field ", i + 1, " '", field, "' is not a non-negative integer"));
    }
    values.push_back(value);
  }

  Workload w;
  w.op = op;
  // Positional names, used to say which field is zero.
  std::vector<const char*> names;
  size_t min_fields = 0, max_fields = 0;
  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      names = {"M", "N", "K"};
      min_fields = max_fields = 3;
      break;
    case OpKind::kBatchMatmul:
      names = {"B", "M", "N", "K"};
      min_fields = max_fields = 4;
      break;
    case OpKind::kConv2d:
      names = {"N", "C", "H", "W", "OC", "KH", "KW", "stride", "pad", "dilation", "groups"};
      min_fields = 7;
      max_fields = 11;
      break;
  }
  if (values.size() < min_fields || values.size() > max_fields) {
    return malformed(
        absl::StrCat("got ", values.size(), values.size() == 1 ? " field" : " fields"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const bool may_be_zero = op == OpKind::kConv2d && i == 8;  // pad
    if (values[i] == 0 && !may_be_zero) {
      return malformed(absl::StrCat(names[i], " must be positive, got 0"));
    }
  }

  switch (op) {
    case OpKind::kDense:
    case OpKind::kMatmul:
      w.m = values[0], w.n = values[1], w.k = values[2];
      break;
    case OpKind::kBatchMatmul:
      w.batch = values[0], w.m = values[1], w.n = values[2], w.k = values[3];
      break;
    case OpKind::kConv2d: {
      w.batch = values[0], w.in_c = values[1], w.in_h = values[2], w.in_w = values[3];
      w.out_c = values[4], w.kernel_h = values[5], w.kernel_w = values[6];
      auto at = [&](size_t i, int64_t fallback) {
        return i < values.size() ? values[i] : fallback;
      };
      w.stride_h = w.stride_w = at(7, 1);
      w.pad_h = w.pad_w = at(8, 0);
      w.dilation_h = w.dilation_w = at(9, 1);
      w.groups = at(10, 1);
      w.layout_block = layout_block;
      break;
    }
  }
  if (absl::Status s = w.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad ", OpName(op), " shape '", shape, "': ", s.message()));
  }
  return w;
}

absl::StatusOr<Workload> Workload::FromKey(const std::string& key) {
  auto bad = [&](const std::string& detail) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed workload key '", key, "': ", detail,
                     " (expected OP/SHAPE/EPILOGUE/DTYPE, e.g. "
                     "'conv2d/n1_c64_h56_w56_oc64_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32')"));
  };
  const std::vector<std::string> parts = absl::StrSplit(key, '/');
  if (parts.size() != 4) return bad(absl::StrCat("got ", parts.size(), " '/'-separated parts"));

  Workload w;
  absl::StatusOr<OpKind> op = ParseOpName(parts[0]);
  if (!op.ok()) return bad(std::string(op.status().message()));
  w.op = *op;

  const std::vector<absl::string_view> tokens = absl::StrSplit(parts[1], '_');
  const std::vector<KeyToken>& fields = KeyTokens(w.op);
  bool ok = tokens.size() == fields.size() ||
            (w.op == OpKind::kConv2d && tokens.size() == fields.size() + 1 &&
             ParseLayoutToken(tokens.back(), &w.layout_block));
  for (size_t i = 0; ok && i < fields.size(); ++i) {
    const KeyToken& f = fields[i];
    ok = ParseKeyToken(tokens[i], f.prefix, &(w.*f.a), f.b == nullptr ? nullptr : &(w.*f.b));
  }
  if (!ok) return bad(absl::StrCat("cannot read ", OpName(w.op), " shape '", parts[1], "'"));

  const std::string& epilogue = parts[2];
  if (epilogue == "bias_relu") {
    w.bias = w.relu = true;
  } else if (epilogue == "bias_relu6") {
    w.bias = w.relu6 = true;
  } else if (epilogue == "bias") {
    w.bias = true;
  } else if (epilogue == "relu") {
    w.relu = true;
  } else if (epilogue == "relu6") {
    w.relu6 = true;
  } else if (epilogue != "none") {
    return bad(absl::StrCat("unknown epilogue '", epilogue,
                            "' (expected none, bias, relu, relu6, bias_relu or bias_relu6)"));
  }
  w.dtype = parts[3];

  if (absl::Status s = w.Validate(); !s.ok()) return bad(std::string(s.message()));
  // Reject non-canonical spellings (leading zeros and the like) so that keys stay unique.
  if (w.Key() != key) return bad(absl::StrCat("not canonical; expected '", w.Key(), "'"));
  return w;
}

}  // namespace tune::codegen
