// The GEMM template: dense, matmul and batch_matmul with optional bias + ReLU.
#pragma once

#include "codegen/ir/template.h"

namespace tune::codegen {

/// out[b,m,n] = epilogue(sum_k A[b,m,k] * B(b,k,n)). Knobs: three-level tiles of M and N
/// (the innermost pair forms the register accumulator tile), a two-level tile of K, the loop
/// order, vectorization of the N tile, unrolling of the M tile and the inner K loop, a packed
/// [N/nb][K][nb] copy of B, the accumulator tile on/off, and a parallel outer loop.
class GemmTemplate : public Template {
 public:
  explicit GemmTemplate(Workload workload);
  std::string name() const override { return "gemm"; }
  int version() const override { return 1; }
  search::Config DefaultConfig() const override;

 protected:
  Schedule Build(const search::Config& config) const override;
};

}  // namespace tune::codegen
