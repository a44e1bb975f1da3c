// Naive CUDA reference kernels (double accumulation) for every operator.
#include "measure/cuda_reference.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tune::measure {
namespace {

constexpr int64_t kThreads = 256;

// Grid-stride loop over the output; INDEX decomposes `i` into the op's coordinates.
constexpr const char* kGemm = R"(
extern "C" __global__ void __launch_bounds__(256) tune_reference(const float* __restrict__ a,
    const float* __restrict__ b, $BIAS_PARAM float* __restrict__ out) {
  const long long total = $BATCH * $M * $N;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < total; i += (long long)gridDim.x * 256) {
    const long long n = i % $N, m = (i / $N) % $M, z = i / ($N * $M);
    double s = 0.0;
    for (long long k = 0; k < $K; ++k) {
      s += (double)a[(z * $M + m) * $K + k] * (double)$B_AT;
    }
    $EPILOGUE
    out[i] = (float)s;
  }
}
)";

constexpr const char* kConv = R"(
extern "C" __global__ void __launch_bounds__(256) tune_reference(const float* __restrict__ data,
    const float* __restrict__ weight, $BIAS_PARAM float* __restrict__ out) {
  const long long total = $BATCH * $OC * $OH * $OW;
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < total; i += (long long)gridDim.x * 256) {
    const long long ow = i % $OW, oh = (i / $OW) % $OH, oc = (i / ($OW * $OH)) % $OC;
    const long long nb = i / ($OW * $OH * $OC);
    const long long g = oc / ($OC / $G), cpg = $C / $G;
    double s = 0.0;
    for (long long c = 0; c < cpg; ++c) {
      for (long long kh = 0; kh < $KH; ++kh) {
        const long long ih = oh * $SH - $PH + kh * $DH;
        if (ih < 0 || ih >= $H) continue;
        for (long long kw = 0; kw < $KW; ++kw) {
          const long long iw = ow * $SW - $PW + kw * $DW;
          if (iw < 0 || iw >= $W) continue;
          s += (double)data[((nb * $C + g * cpg + c) * $H + ih) * $W + iw] *
               (double)weight[((oc * cpg + c) * $KH + kh) * $KW + kw];
        }
      }
    }
    $EPILOGUE
    out[i] = (float)s;
  }
}
)";

}  // namespace

CudaReferenceKernel MakeCudaReference(const codegen::Workload& w) {
  using codegen::OpKind;
  CudaReferenceKernel k;
  k.name = "tune_reference";
  k.block = {kThreads, 1, 1};
  const std::string ll = "LL";
  auto num = [&](int64_t v) { return absl::StrCat(v, ll); };
  std::string epilogue;
  int64_t total;
  std::string source;
  if (w.op == OpKind::kConv2d) {
    total = w.batch * w.out_c * w.out_h() * w.out_w();
    if (w.bias) epilogue += "s += (double)bias[oc];";
    source = absl::StrReplaceAll(
        kConv, {{"$BATCH", num(w.batch)}, {"$OC", num(w.out_c)}, {"$OH", num(w.out_h())}, {"$OW", num(w.out_w())},
                {"$G", num(w.groups)}, {"$C", num(w.in_c)}, {"$KH", num(w.kernel_h)}, {"$KW", num(w.kernel_w)},
                {"$SH", num(w.stride_h)}, {"$SW", num(w.stride_w)}, {"$PH", num(w.pad_h)}, {"$PW", num(w.pad_w)},
                {"$DH", num(w.dilation_h)}, {"$DW", num(w.dilation_w)}, {"$H", num(w.in_h)}, {"$W", num(w.in_w)},
                {"$BIAS_PARAM", w.bias ? "const float* __restrict__ bias," : ""}, {"$EPILOGUE", "$EPILOGUE"}});
  } else {
    total = w.batch * w.m * w.n;
    const bool batched = w.op == OpKind::kBatchMatmul;
    std::string b_at = w.op == OpKind::kDense ? absl::StrCat("b[n * ", num(w.k), " + k]")
                       : batched ? absl::StrCat("b[(z * ", num(w.k), " + k) * ", num(w.n), " + n]")
                                 : absl::StrCat("b[k * ", num(w.n), " + n]");
    if (w.bias) epilogue += "s += (double)bias[n];";
    source = absl::StrReplaceAll(kGemm, {{"$BATCH", num(batched ? w.batch : 1)}, {"$M", num(w.m)}, {"$N", num(w.n)},
                                         {"$K", num(w.k)}, {"$B_AT", b_at},
                                         {"$BIAS_PARAM", w.bias ? "const float* __restrict__ bias," : ""}});
  }
  if (w.relu) epilogue += " if (s < 0.0) s = 0.0;";
  if (w.relu6) epilogue += " if (s < 0.0) s = 0.0; if (s > 6.0) s = 6.0;";
  k.source = absl::StrReplaceAll(source, {{"$EPILOGUE", epilogue}});
  k.grid = {std::min<int64_t>((total + kThreads - 1) / kThreads, 65536), 1, 1};
  return k;
}

}  // namespace tune::measure
