// The conv2d template: NCHW convolution with stride, padding, dilation, groups, bias + ReLU.
#pragma once

#include "codegen/ir/template.h"

namespace tune::codegen {

/// out[n,oc,oh,ow] = epilogue(sum_{ic,kh,kw} pad(data)[n, g*ICg+ic, oh*sh+kh*dh, ow*sw+kw*dw] *
/// weight[oc,ic,kh,kw]). Knobs: three-level tiles of OC and OW, two-level tiles of OH and the
/// per-group input channels, the loop order, which register-tile axis (OW or OC) is
/// vectorized, unrolling, a packed [OC/ob][ICg][KH][KW][ob] weight copy, the accumulator tile
/// on/off, and a parallel outer loop. Padding is materialized in a scratch buffer first.
class Conv2dTemplate : public Template {
 public:
  explicit Conv2dTemplate(Workload workload);
  std::string name() const override { return "conv2d"; }
  int version() const override { return 1; }
  search::Config DefaultConfig() const override;

 protected:
  Schedule Build(const search::Config& config) const override;
};

}  // namespace tune::codegen
