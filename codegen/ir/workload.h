// Workload: one tensor operator with concrete shapes and dtype, the unit that gets tuned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tune::codegen {

enum class OpKind { kDense, kMatmul, kBatchMatmul, kConv2d };

/// "dense", "matmul", "batch_matmul", "conv2d".
std::string OpName(OpKind op);
absl::StatusOr<OpKind> ParseOpName(const std::string& name);

/// A tensor argument of a workload: its name and row-major shape (fp32 elements).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  /// The product of the extents: 0 when one is not positive, INT64_MAX when it does not fit
  /// (never a wrapped value, whatever the shape).
  int64_t NumElements() const;
};

/// Shapes of one operator. Layouts (all row-major, fp32):
///  dense:        data[M,K], weight[N,K]            -> out[M,N]     (out = data * weight^T)
///  matmul:       a[M,K], b[K,N]                    -> out[M,N]
///  batch_matmul: a[B,M,K], b[B,K,N]                -> out[B,M,N]
///  conv2d NCHW:  data[N,C,H,W], weight[OC,C/G,KH,KW] -> out[N,OC,OH,OW]
///  conv2d NCHWc (layout_block c > 0): data[N,C/c,H,W,c], weight[OC,C,KH,KW]
///                                    -> out[N,OC/c,OH,OW,c]
/// The NCHWc form is the convolution of a model whose neighbouring layers keep their
/// activations channel-blocked (channel ch at [ch/c][..][..][ch%c]); its weight stays OIHW (a
/// constant of the model: the kernel packs it once). It takes groups == 1, or a depthwise
/// convolution (groups == C == OC, weight [C,1,KH,KW]), and c dividing C and OC.
/// With `bias` a bias[N] (dense/matmul/batch_matmul) or bias[OC] (conv2d) input follows and
/// is added to every output; with `relu` max(x, 0) is applied last, with `relu6` (exclusive
/// with relu) min(max(x, 0), 6), ONNX's Clip(0, 6).
struct Workload {
  OpKind op = OpKind::kMatmul;
  // dense / matmul / batch_matmul
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // conv2d (batch is N)
  int64_t in_c = 0, in_h = 0, in_w = 0, out_c = 0, kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  /// conv2d only: 0 for NCHW activations, c > 0 for NCHWc ones (channels in blocks of c).
  int64_t layout_block = 0;
  bool bias = false;
  bool relu = false;
  bool relu6 = false;
  std::string dtype = "float32";

  int64_t out_h() const;
  int64_t out_w() const;
  bool depthwise() const { return op == OpKind::kConv2d && groups == in_c && groups == out_c && groups > 1; }

  /// Inputs in kernel-argument order (data/a, weight/b, [bias]).
  std::vector<TensorSpec> Inputs() const;
  TensorSpec Output() const;
  /// Multiply-adds count 2 flops; bias and relu are not counted.
  double Flops() const;
  /// Stable key naming op, every shape field, epilogue and dtype, e.g.
  /// "conv2d/n1_c64_h56_w56_oc64_k3x3_s1x1_p1x1_d1x1_g1/bias_relu/float32" (an NCHWc
  /// convolution's shape part ends in "_nchw16c").
  std::string Key() const;
  /// Short human-readable label, e.g. "conv2d 1x64x56x56 k3 s1 oc64".
  std::string Label() const;
  /// InvalidArgument unless every extent is positive and the shape is consistent
  /// (groups divide channels, output size positive).
  absl::Status Validate() const;

  /// Parses "M,N,K" (dense, matmul), "B,M,N,K" (batch_matmul) or
  /// "N,C,H,W,OC,KH,KW[,stride[,pad[,dilation[,groups]]]][,nchwXc]" (conv2d; the last field
  /// names an NCHWc layout with channel blocks of X) and validates it.
  static absl::StatusOr<Workload> Parse(OpKind op, const std::string& shape);
  /// Inverse of Key().
  static absl::StatusOr<Workload> FromKey(const std::string& key);
};

}  // namespace tune::codegen
