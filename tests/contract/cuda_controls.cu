// SPDX-License-Identifier: MIT
// The planted CUDA controls: real kernels, each wrong in exactly the way one gate exists to
// catch. A run where any of them passes its gate fails (the gate would prove nothing).
// Every kernel name holds "contract_control"; the two gate-5 ones hold
// "contract_control_gate5" and are only compiled, never launched: their launch records
// (cuda_controls.launches.txt) ask for what no chip can give.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "cuda_controls.hpp"

namespace gk_contract::cuda_controls {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("contract control ") + what + ": " + cudaGetErrorString(e));
}
void launched(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}

constexpr int kThreads = 128;

// block-wide tree reduction of one value per thread (kThreads threads)
template <class Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] = op(s[threadIdx.x], s[threadIdx.x + w]);
    __syncthreads();
  }
  return s[0];
}

}  // namespace

// gate 1: a row maximum by fmaxf, which returns the number when one side is NaN
__global__ void __launch_bounds__(kThreads) contract_control_row_max_fmax(const float* x, float* y, int n) {
  const float* r = x + static_cast<long>(blockIdx.x) * n;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, r[i]);
  m = block_reduce(m, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) y[blockIdx.x] = m;
}

// gate 2: a row sum by atomicAdd from four blocks per row, racing; which thread adds which
// element also rotates with a per-launch salt, so the order of the adds is never the same
__global__ void __launch_bounds__(kThreads) contract_control_row_sum_atomic(const float* x, float* y, int n, int salt) {
  const int row = blockIdx.x / 4, part = blockIdx.x % 4;
  const float* r = x + static_cast<long>(row) * n;
  const int i0 = n * part / 4, i1 = n * (part + 1) / 4, len = i1 - i0;
  if (len <= 0) return;
  for (int i = threadIdx.x; i < len; i += kThreads) atomicAdd(&y[row], r[i0 + (i + salt) % len]);
}

// gate 2: a row sum that accumulates in its input row (element 0 ends up holding the sum)
__global__ void __launch_bounds__(kThreads) contract_control_row_sum_inplace(float* x, float* y, int n) {
  float* r = x + static_cast<long>(blockIdx.x) * n;
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) s += r[i];
  s = block_reduce(s, [](float a, float b) { return a + b; });
  if (threadIdx.x == 0) {
    r[0] = s;
    y[blockIdx.x] = r[0];
  }
}

// gate 3: a row sum in tiles of 32 whose partial last tile loses its last element; whole
// tiles are summed right, so only the shapes at tile edges can tell
__global__ void __launch_bounds__(kThreads) contract_control_row_sum_tail_drop(const float* x, float* y, int n) {
  const float* r = x + static_cast<long>(blockIdx.x) * n;
  const int whole = n / 32 * 32;
  const int end = whole == n ? n : n - 1;
  float s = 0.0f;
  for (int i = threadIdx.x; i < end; i += kThreads) s += r[i];
  s = block_reduce(s, [](float a, float b) { return a + b; });
  if (threadIdx.x == 0) y[blockIdx.x] = s;
}

// gate 4: a dot whose sums are kept in half precision
__global__ void __launch_bounds__(kThreads) contract_control_dot_half(const float* w, const float* x, float* y, int n) {
  const float* r = w + static_cast<long>(blockIdx.x) * n;
  __shared__ __half s[kThreads];
  __half acc = __float2half(0.0f);
  for (int i = threadIdx.x; i < n; i += kThreads) acc = __hadd(acc, __hmul(__float2half(r[i]), __float2half(x[i])));
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] = __hadd(s[threadIdx.x], s[threadIdx.x + k]);
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = __half2float(s[0]);
}

// gate 5: launch bounds of 128 threads; its launch record launches 256
__global__ void __launch_bounds__(128) contract_control_gate5_past_bounds(float* x) {
  x[blockIdx.x * blockDim.x + threadIdx.x] *= 2.0f;
}

// gate 5: a kernel whose every thread keeps a large unrolled array live, so ptxas takes
// (nearly) all 255 registers; its launch record asks 1024 threads, 4x what a block's
// 65536 registers hold at that count
__global__ void contract_control_gate5_register_hog(const float* __restrict__ x, float* __restrict__ y, int n) {
  constexpr int K = 160;
  float a[K];
#pragma unroll
  for (int i = 0; i < K; ++i) a[i] = x[(i * 7919 + threadIdx.x) % n];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = i + 1; j < K; j += 37) s = fmaf(a[i], a[j], s);
#pragma unroll
  for (int i = 0; i < K; ++i) s += a[i] * a[K - 1 - i] * static_cast<float>(i);
  y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// gate 5: a kernel on dynamic shared memory; its launch record asks 300 KiB, more than any
// chip lets a block have
__global__ void contract_control_gate5_shared_hog(float* x) {
  extern __shared__ float s[];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

void row_max_fmax(const float* x, float* y, int n, int rows) {
  contract_control_row_max_fmax<<<rows, kThreads>>>(x, y, n);
  launched("row_max_fmax");
}
void row_sum_atomic(const float* x, float* y, int n, int rows) {
  static int salt = 0;
  salt += 97;
  check(cudaMemset(y, 0, sizeof(float) * static_cast<std::size_t>(rows)), "row_sum_atomic memset");
  contract_control_row_sum_atomic<<<rows * 4, kThreads>>>(x, y, n, salt);
  launched("row_sum_atomic");
}
void row_sum_inplace(float* x, float* y, int n, int rows) {
  contract_control_row_sum_inplace<<<rows, kThreads>>>(x, y, n);
  launched("row_sum_inplace");
}
void row_sum_tail_drop(const float* x, float* y, int n, int rows) {
  contract_control_row_sum_tail_drop<<<rows, kThreads>>>(x, y, n);
  launched("row_sum_tail_drop");
}
void dot_half(const float* w, const float* x, float* y, int n, int rows) {
  contract_control_dot_half<<<rows, kThreads>>>(w, x, y, n);
  launched("dot_half");
}

}  // namespace gk_contract::cuda_controls
