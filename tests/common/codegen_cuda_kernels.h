// Test kernels in CUDA C shared by the NVRTC and CUDA driver tests.
#pragma once

namespace tune::test {

/// out[i] = a * x[i] + y[i] for i < n: kernel `saxpy`, one thread per element, any launch shape.
constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x,
                                 const float* __restrict__ y, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

/// Kernel `reverse_tiles`, 256 threads a block: reverses each 256-element block of float4s
/// through static shared memory (4096 bytes), and sums each float4 with its mirror through
/// dynamic shared memory (as large as the launch makes it).
constexpr const char* kSharedFloat4 = R"(
extern "C" __global__ void reverse_tiles(const float4* __restrict__ in, float4* __restrict__ out) {
  __shared__ float4 tile[256];
  extern __shared__ float dyn[];
  int i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = in[i];
  __syncthreads();
  float4 v = tile[255 - threadIdx.x];
  dyn[threadIdx.x] = v.x;
  __syncthreads();
  out[i] = make_float4(v.w, v.z, v.y, v.x + dyn[255 - threadIdx.x]);
}
)";

}  // namespace tune::test
