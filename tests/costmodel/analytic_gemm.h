// A roofline-style analytic latency of GEMM template configs: synthetic ground truth for tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "codegen/ir/template.h"
#include "codegen/templates.h"
#include "costmodel/offline_model.h"
#include "gtest/gtest.h"
#include "search/space.h"

namespace tune::costmodel::test {

/// Seconds a matmul config would take on an idealized 8-core AVX2 CPU (3 GHz, 2 FMA ports,
/// 32 KB L1, 1 MB L2, 15 GB/s per core up to 4 cores), computed from the knob values — not
/// from the loop AST, so a model of AST features has to learn the relation. The compute side
/// models SIMD lane use, independent accumulator chains (FMA latency hiding), register
/// spills, loop overhead and thread load balance; the memory side models reuse of A/B panels
/// in L1/L2, cache-line waste of narrow B rows, and the packing copy. A lognormal noise of
/// `noise` (sigma) is drawn from the config's hash, so the same config always costs the same.
inline double AnalyticGemmSeconds(const codegen::Template& t, const search::Config& c, double noise = 0.03) {
  const auto& s = t.space();
  const auto& w = t.workload();
  const double M = static_cast<double>(w.m), N = static_cast<double>(w.n), K = static_cast<double>(w.k);
  const double B = static_cast<double>(w.batch);
  auto fm = s.Get(c, "tile_m"), fn = s.Get(c, "tile_n"), fk = s.Get(c, "tile_k");
  const double m0 = fm[0], m1 = fm[1], m2 = fm[2], n0 = fn[0], n1 = fn[1], n2 = fn[2], k1 = fk[1];
  const int64_t order = s.GetInt(c, "order");
  const bool vec = s.GetInt(c, "vectorize"), unroll = s.GetInt(c, "unroll_m") || s.GetInt(c, "unroll_k");
  const bool pack = s.GetInt(c, "pack_b"), acc = s.GetInt(c, "acc_tile"), par = s.GetInt(c, "parallel");

  const double flops = 2 * B * M * N * K;
  const double peak = 3e9 * 2 * 8 * 2;  // flops/s per core
  const double vectors = vec ? std::ceil(n2 / 8) : n2;
  const double lane_eff = vec ? n2 / (vectors * 8) : 1.0 / 8 * 0.9;
  double chains = order == 2 ? vectors : m2 * vectors;
  double chain_eff = std::min(1.0, chains / 8);
  if (acc && chains > 14) chain_eff *= 14 / chains;  // spills
  if (!acc) chain_eff *= 0.35;                        // accumulating through memory
  double overhead_eff = unroll ? 1.0 : 0.7 + 0.3 * std::min(1.0, chains * (vec ? 1 : 0.25) / 8);
  if (!unroll && k1 == 1) overhead_eff *= 0.85;
  double cores = 1;
  if (par) {
    double outer = B * (order == 1 ? n0 : m0);
    cores = outer / std::ceil(outer / 8);
  }
  const double compute = flops / (peak * lane_eff * chain_eff * overhead_eff * cores);

  const double a_bytes = B * M * K * 4, b_bytes = B * K * N * 4;
  double a_traffic = a_bytes * n0 * (m2 * K * 4 <= 32768 ? 1 : n1);
  double b_traffic = b_bytes * m0 * (K * n1 * n2 * 4 <= 1 << 20 ? 1 : m1);
  double waste = pack ? 1.0 : std::max(1.0, 64 / (n2 * 4)) * (N >= 256 ? 1.3 : 1.0);
  double pack_bytes = pack ? 2 * b_bytes : 0;
  const double bandwidth = 15e9 * std::min(cores, 4.0);
  const double memory = (a_traffic + b_traffic * waste + pack_bytes) / bandwidth;

  double seconds = std::max(compute, memory) + 0.3 * std::min(compute, memory) + (par ? 3e-6 : 0);
  // Box-Muller from raw 64-bit draws (the same numbers on every standard library).
  std::mt19937_64 rng(search::ConfigHash()(c));
  const double u1 = (static_cast<double>(rng() >> 11) + 1) * 0x1.0p-53, u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  const double normal = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  return seconds * std::exp(noise * normal);
}

/// One matmul task of `shape` ("M,N,K") for training tests: `n` random valid configs of its
/// template drawn with `rng`, featurized with their loop ASTs, latencies from
/// AnalyticGemmSeconds; every `fail_every`-th config (0: none) "fails" (+inf), as a real
/// dataset's timeouts would. Named by the workload's key.
inline TrainGroup AnalyticGemmGroup(const std::string& shape, int n, std::mt19937_64& rng, int fail_every = 0) {
  TrainGroup g;
  auto w = codegen::Workload::Parse(codegen::OpKind::kMatmul, shape);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return g;
  auto tmpl = codegen::CreateTemplate(*w);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  if (!tmpl.ok()) return g;
  g.name = w->Key();
  while (static_cast<int>(g.inputs.size()) < n) {
    auto c = (*tmpl)->space().Sample(rng);
    EXPECT_TRUE(c.ok());
    auto in = MakeModelInput(**tmpl, *c, {.ast = true});
    if (!in.ok()) continue;
    g.inputs.push_back(*std::move(in));
    const bool fails = fail_every > 0 && g.inputs.size() % fail_every == 0;
    g.latencies_s.push_back(fails ? std::numeric_limits<double>::infinity() : AnalyticGemmSeconds(**tmpl, *c));
  }
  return g;
}

}  // namespace tune::costmodel::test
