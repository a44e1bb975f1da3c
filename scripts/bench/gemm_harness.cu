// One generated GEMM kernel (C = A x B, row-major, fp32) beside cuBLAS (TF32 off) in one
// process: checks ours against cuBLAS on random inputs, then times both with CUDA events
// (median of back-to-back launches) so a profiler can see the two kernels under the same
// conditions. Built by scripts/bench/gpu_profile_sgemm:
//   nvcc -O3 -arch=sm_90 -DKERNEL_FILE='"kernel.cu"' -DKERNEL_FN=best gemm_harness.cu -lcublas
//   ./a.out M N K GX GY GZ BX BY BZ SHARED_BYTES REPEATS
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include KERNEL_FILE

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                 \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

template <typename F>
float MedianMs(int repeats, F launch) {
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  std::vector<float> ms;
  for (int r = 0; r < repeats; ++r) {
    CHECK(cudaEventRecord(t0));
    launch();
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, t0, t1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char** argv) {
  if (argc != 12) {
    std::fprintf(stderr, "usage: %s M N K GX GY GZ BX BY BZ SHARED_BYTES REPEATS\n", argv[0]);
    return 2;
  }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
  const dim3 grid(std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]));
  const dim3 block(std::atoi(argv[7]), std::atoi(argv[8]), std::atoi(argv[9]));
  const int shared = std::atoi(argv[10]), repeats = std::atoi(argv[11]);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> ha(size_t(m) * k), hb(size_t(k) * n);
  for (float& v : ha) v = uniform(rng);
  for (float& v : hb) v = uniform(rng);
  float *a, *b, *c, *ref;
  CHECK(cudaMalloc(&a, ha.size() * 4));
  CHECK(cudaMalloc(&b, hb.size() * 4));
  CHECK(cudaMalloc(&c, size_t(m) * n * 4));
  CHECK(cudaMalloc(&ref, size_t(m) * n * 4));
  CHECK(cudaMemcpy(a, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  if (shared > 48 * 1024) CHECK(cudaFuncSetAttribute(KERNEL_FN, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);  // IEEE fp32: no TF32
  const float one = 1.0f, zero = 0.0f;
  auto ours = [&] { KERNEL_FN<<<grid, block, shared>>>(a, b, c); };
  // Row-major C = A B is column-major C^T = B^T A^T.
  auto vendor = [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, ref, n); };
  ours();
  vendor();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> hc(size_t(m) * n), hr(size_t(m) * n);
  CHECK(cudaMemcpy(hc.data(), c, hc.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < hc.size(); ++i) {
    diff += double(hc[i] - hr[i]) * (hc[i] - hr[i]);
    norm += double(hr[i]) * hr[i];
  }
  const double rel = std::sqrt(diff / norm);
  const float ours_ms = MedianMs(repeats, ours), vendor_ms = MedianMs(repeats, vendor);
  const double flop = 2.0 * m * n * k;
  std::printf("ours %.4f ms %.1f TFLOP/s  cublas %.4f ms %.1f TFLOP/s  ratio %.3f  rel_err %.2e\n", ours_ms,
              flop / ours_ms / 1e9, vendor_ms, flop / vendor_ms / 1e9, vendor_ms / ours_ms, rel);
  return rel < 1e-5 ? 0 : 3;
}
