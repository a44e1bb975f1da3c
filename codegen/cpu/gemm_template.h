// The GEMM template: dense, matmul and batch_matmul with optional bias + ReLU.
#pragma once

#include "codegen/cpu/cpu_limits.h"
#include "codegen/ir/template.h"

namespace tune::codegen {

/// out[b,m,n] = epilogue(sum_k A[b,m,k] * B(b,k,n)). Knobs: three-level tiles of M and N
/// (the innermost pair forms the register accumulator tile), a two-level tile of K, the loop
/// order, vectorization of the N tile, unrolling of the M tile and the inner K loop, a packed
/// [N/nb][K][nb] copy of B, a packed [M/mr][K][mr] copy of A, the accumulator tile on/off,
/// and a parallel outer loop (or the outer M and N block loops fused into one parallel loop).
///
/// The register tile (mr x nr, the innermost factors of M and N) is sized to the CPU: mr may
/// be any of 1..16 and nr any multiple of the vector lanes up to 64, so the canonical
/// micro-kernels (6x16 for AVX2's 16 ymm registers, 14x32 or 6x64 for AVX-512's 32 zmm) are
/// in the space, with tails where they do not divide M or N. Tiles of more than 256 floats
/// are offered only where the accumulators fit the CPU's registers (AVX-512).
class GemmTemplate : public Template {
 public:
  explicit GemmTemplate(Workload workload, CpuLimits cpu = HostCpuLimits());
  std::string name() const override { return "gemm"; }
  int version() const override { return 2; }
  /// The default: whole-extent outer tiles, a 1x1 register tile, nothing packed or unrolled,
  /// and, where cpu.threads > 1, the M and N block loops fused into one parallel loop (the
  /// outer loop alone for batch_matmul, or where only that one shares out evenly; serial
  /// where neither does).
  search::Config DefaultConfig() const override;
  /// Where cpu.threads > 1, a config with "parallel" 0 gets the default's rule: 2 (M and N
  /// blocks fused; not an option of batch_matmul) where parallel_balance keeps it, else 1 (the
  /// outer loop), else none.
  search::Config ParallelFormOf(const search::Config& config) const override;
  /// The two register tiles of the most accumulators that fit the vector registers beside
  /// their B vectors and one broadcast A value, tiles whose width divides N first (AVX-512:
  /// 14x32 and 6x64; AVX2: 14x8 and 6x16; rows at most M), each over B packed by panels of its
  /// width in the N-outer order (a panel stays in cache while every row block uses it),
  /// vectorized, rows unrolled, inner K chunks of up to 64, with A packed and in place; dense's
  /// weight packed once; in parallel form where cpu.threads > 1.
  std::vector<search::Config> StartConfigs() const override;

 protected:
  Schedule Build(const search::Config& config) const override;

 private:
  CpuLimits cpu_;
};

}  // namespace tune::codegen
