// SPDX-License-Identifier: MIT
// The norm family on the device: norm, rms_norm, l2_norm (one block per row) and
// group_norm (one block per (group, i3)). f32 in and out, any element strides.
//
// The CPU definition (cpu/norm.hpp) sums float terms sequentially in double and rounds
// once. Here each thread sums its strided share in double and the block adds the shares
// as a tree, also in double: the double sums differ from the sequential one by ~1e-16
// relative, so the rounded float statistics, and therefore the outputs, are the CPU's
// bits except when a sum lands within that distance of a float rounding boundary (not
// seen in the tests). Every float operation after the sums is the CPU's, spelled with
// __f*_rn so nvcc cannot contract a product into a neighbouring add.
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr int norm_threads = 256;

// Sum of v over the block, in double; every thread gets the total.
__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < nw; ++w) s += red[w];  // every thread in the same order: one value
  return s;
}

__device__ __forceinline__ const float* elem(const tview& t, std::int64_t i0, std::int64_t i1, std::int64_t i2,
                                             std::int64_t i3) {
  return reinterpret_cast<const float*>(t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3]);
}
__device__ __forceinline__ float* elem_w(const tview& t, std::int64_t i0, std::int64_t i1, std::int64_t i2,
                                         std::int64_t i3) {
  return reinterpret_cast<float*>(t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3]);
}

// o: 0 norm, 1 rms_norm, 2 l2_norm. In place (y == x) is safe: a thread reads element i
// (in every pass) before it writes element i, and the passes are separated by barriers.
__global__ void __launch_bounds__(norm_threads) norm_rows_kernel(tview x, tview y, int o, float eps) {
  __shared__ double red[norm_threads / 32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t i1 = r % x.ne[1], i2 = (r / x.ne[1]) % x.ne[2], i3 = r / (x.ne[1] * x.ne[2]);
  const std::int64_t n = x.ne[0];
  float mean = 0.0f, scale;
  if (o == 0) {
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(*elem(x, i, i1, i2, i3));
    s = block_sum(s, red);
    mean = __fdiv_rn(static_cast<float>(s), static_cast<float>(n));
    double s2 = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = __fsub_rn(*elem(x, i, i1, i2, i3), mean);
      s2 += static_cast<double>(__fmul_rn(v, v));
    }
    s2 = block_sum(s2, red);
    const float variance = static_cast<float>(s2 / static_cast<double>(n));
    scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  } else {
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = *elem(x, i, i1, i2, i3);
      s += static_cast<double>(__fmul_rn(v, v));
    }
    s = block_sum(s, red);
    if (o == 1) {
      const float m = static_cast<float>(s / static_cast<double>(n));
      scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(m, eps)));
    } else {
      const float len = __fsqrt_rn(static_cast<float>(s));
      scale = __fdiv_rn(1.0f, fmaxf(len, eps));
    }
  }
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = *elem(x, i, i1, i2, i3);
    *elem_w(y, i, i1, i2, i3) = __fmul_rn(o == 0 ? __fsub_rn(v, mean) : v, scale);
  }
}

// One block per (group g, i3): channels [c0, c1) of dim 2, all of dims 0 and 1.
__global__ void __launch_bounds__(norm_threads) group_norm_kernel(tview x, tview y, int n_groups, float eps) {
  __shared__ double red[norm_threads / 32];
  const std::int64_t g = blockIdx.x % n_groups, i3 = blockIdx.x / n_groups;
  const std::int64_t n0 = x.ne[0], n1 = x.ne[1], n2 = x.ne[2];
  const std::int64_t per_group = (n2 + n_groups - 1) / n_groups;
  const std::int64_t c0 = g * per_group, c1 = c0 + per_group < n2 ? c0 + per_group : n2;
  if (c0 >= c1) return;  // more groups than channels: this one is empty
  const std::int64_t count = n0 * n1 * (c1 - c0);
  const double dcount = static_cast<double>(count);
  auto at = [&](std::int64_t e) {  // element e of the group, in row order
    const std::int64_t i0 = e % n0, i1 = (e / n0) % n1, i2 = c0 + e / (n0 * n1);
    return elem(x, i0, i1, i2, i3);
  };
  double s = 0.0;
  for (std::int64_t e = threadIdx.x; e < count; e += blockDim.x) s += static_cast<double>(*at(e));
  s = block_sum(s, red);
  const float mean = static_cast<float>(s / dcount);
  double s2 = 0.0;
  for (std::int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const float v = __fsub_rn(*at(e), mean);
    s2 += static_cast<double>(__fmul_rn(v, v));
  }
  s2 = block_sum(s2, red);
  const float variance = static_cast<float>(s2 / dcount);
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  for (std::int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const std::int64_t i0 = e % n0, i1 = (e / n0) % n1, i2 = c0 + e / (n0 * n1);
    const float v = *elem(x, i0, i1, i2, i3);
    *elem_w(y, i0, i1, i2, i3) = __fmul_rn(__fsub_rn(v, mean), scale);
  }
}

}  // namespace

bool norm_supports(const tensor* node) {
  const tensor* a = node->src[0];
  switch (node->op) {
    case op::norm: case op::rms_norm: case op::l2_norm: case op::group_norm: break;
    default: return false;
  }
  if (!a || a->type != type::f32 || node->type != type::f32 || !a->same_shape(*node)) return false;
  if (node->op == op::group_norm && node->param_i32(0) <= 0) return false;
  // f32 elements must sit on 4-byte boundaries
  for (int i = 0; i < 4; ++i)
    if (a->nb[i] % 4 || node->nb[i] % 4) return false;
  return true;
}

void norm_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tview xv = view_of(a), yv = view_of(node);
  if (node->op == op::group_norm) {
    const int n_groups = node->param_i32(0);
    const std::int64_t units = std::int64_t{n_groups} * a->ne[3];
    group_norm_kernel<<<static_cast<unsigned>(units), norm_threads, 0, x.stream>>>(xv, yv, n_groups,
                                                                                    node->param_f32(1));
  } else {
    const int o = node->op == op::norm ? 0 : node->op == op::rms_norm ? 1 : 2;
    // a warp per row is enough for short rows; the barriers cost the same either way
    const unsigned threads = a->ne[0] <= 256 ? 32 : norm_threads;
    norm_rows_kernel<<<static_cast<unsigned>(a->nrows()), threads, 0, x.stream>>>(xv, yv, o, node->param_f32(0));
  }
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
