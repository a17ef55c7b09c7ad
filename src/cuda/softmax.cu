// SPDX-License-Identifier: MIT
// The softmax family on the device: soft_max (scale, f32/f16 mask broadcast over dims 2
// and 3, ALiBi slopes, sinks) with one block per row, and diag_mask_inf/zero elementwise.
//
// A row is the CPU's (cpu/softmax.hpp) operation for operation: w = x*scale,
// w = fma(slope, mask, w), m = max(w, sink) ignoring NaN, e = exp(w - m) with gk's exp
// (device_math.cuh, the CPU's bits), sum of e in double, y = e * (float)(1/sum). Only the
// double sum's order differs (threads' shares, then a tree), ~1e-16 relative, so outputs
// are the CPU's bits but for a sum within that distance of a rounding boundary. w is
// recomputed in each pass rather than kept (a row can be longer than shared memory).
// Fully masked rows come out as on the CPU: NaN without a sink, zeros with one.
// ALiBi slopes come from the host (powf, as the CPU computes them), one per head.
#include <cmath>
#include <limits>
#include <vector>

#include "device_math.cuh"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr int softmax_threads = 256;

struct softmax_args {
  tview x, y, mask;       // mask.data null: none
  int mask_type;          // 0 f32, 1 f16
  const float* slopes;    // per head (i2), null: 1
  const char* sinks;      // f32 per head, null: none
  std::int64_t sinks_nb0;
  float scale;
};

__device__ __forceinline__ float w_of(const softmax_args& a, const char* xr, const char* mr, float slope,
                                      std::int64_t i) {
  float w = __fmul_rn(*reinterpret_cast<const float*>(xr + i * a.x.nb[0]), a.scale);
  if (mr) w = __fmaf_rn(slope, load_float(mr + i * a.mask.nb[0], a.mask_type), w);
  return w;
}

__global__ void __launch_bounds__(softmax_threads) soft_max_kernel(softmax_args a) {
  __shared__ float redf[softmax_threads / 32];
  __shared__ double redd[softmax_threads / 32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t i1 = r % a.x.ne[1], i2 = (r / a.x.ne[1]) % a.x.ne[2], i3 = r / (a.x.ne[1] * a.x.ne[2]);
  const std::int64_t n = a.x.ne[0];
  const char* xr = a.x.data + i1 * a.x.nb[1] + i2 * a.x.nb[2] + i3 * a.x.nb[3];
  char* yr = a.y.data + i1 * a.y.nb[1] + i2 * a.y.nb[2] + i3 * a.y.nb[3];
  const char* mr = a.mask.data ? a.mask.data + i1 * a.mask.nb[1] + (i2 % a.mask.ne[2]) * a.mask.nb[2] +
                                     (i3 % a.mask.ne[3]) * a.mask.nb[3]
                               : nullptr;
  const float slope = a.slopes ? a.slopes[i2] : 1.0f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;

  // max, as the CPU's `w > m ? w : m` from -inf: NaN never wins
  float mx = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float w = w_of(a, xr, mr, slope, i);
    mx = w > mx ? w : mx;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, mx, o);
    mx = v > mx ? v : mx;
  }
  if (lane == 0) redf[warp] = mx;
  __syncthreads();
  mx = -std::numeric_limits<float>::infinity();
  for (int w = 0; w < nw; ++w) mx = redf[w] > mx ? redf[w] : mx;
  float sink = 0.0f;
  if (a.sinks) {
    sink = *reinterpret_cast<const float*>(a.sinks + i2 * a.sinks_nb0);
    mx = sink > mx ? sink : mx;
  }

  // e = exp(w - m) into y (in place: this thread read element i above and reads it again
  // here, before writing it), summed in double
  double s = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = dm::exp(__fsub_rn(w_of(a, xr, mr, slope, i), mx));
    *reinterpret_cast<float*>(yr + i * a.y.nb[0]) = e;
    s += static_cast<double>(e);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) redd[warp] = s;
  __syncthreads();
  s = 0.0;
  for (int w = 0; w < nw; ++w) s += redd[w];
  if (a.sinks) s += static_cast<double>(dm::exp(__fsub_rn(sink, mx)));
  const float inv = static_cast<float>(1.0 / s);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float* p = reinterpret_cast<float*>(yr + i * a.y.nb[0]);
    *p = __fmul_rn(*p, inv);
  }
}

// y = x, but element i0 of row i1 becomes `value` where i0 > n_past + i1
__global__ void __launch_bounds__(softmax_threads) diag_mask_kernel(tview x, tview y, int n_past, float value) {
  const std::int64_t n = x.ne[0] * x.ne[1] * x.ne[2] * x.ne[3];
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i0 = e % x.ne[0], i1 = (e / x.ne[0]) % x.ne[1], i2 = (e / (x.ne[0] * x.ne[1])) % x.ne[2],
                       i3 = e / (x.ne[0] * x.ne[1] * x.ne[2]);
    const float v = *reinterpret_cast<const float*>(x.data + i0 * x.nb[0] + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3]);
    *reinterpret_cast<float*>(y.data + i0 * y.nb[0] + i1 * y.nb[1] + i2 * y.nb[2] + i3 * y.nb[3]) =
        i0 > n_past + i1 ? value : v;
  }
}

// The CPU's ALiBi slopes (cpu/softmax.hpp's alibi): float pow on the host, same operands.
std::vector<float> alibi_slopes(float max_bias, std::int64_t n_head) {
  const auto nh = static_cast<std::uint32_t>(n_head);
  const std::uint32_t n_log2 = nh ? 1u << static_cast<std::uint32_t>(std::floor(std::log2(static_cast<double>(nh)))) : 1u;
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_log2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_log2));
  std::vector<float> s(static_cast<std::size_t>(n_head));
  for (std::uint32_t h = 0; h < nh; ++h)
    s[h] = h < n_log2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n_log2) + 1));
  return s;
}

bool aligned4(const tensor* t) {
  for (int i = 0; i < 4; ++i)
    if (t->nb[i] % 4) return false;
  return true;
}

}  // namespace

bool softmax_supports(const tensor* node) {
  const tensor* a = node->src[0];
  if (node->op != op::soft_max && node->op != op::diag_mask_inf && node->op != op::diag_mask_zero) return false;
  if (!a || a->type != type::f32 || node->type != type::f32 || !a->same_shape(*node)) return false;
  if (!aligned4(a) || !aligned4(node)) return false;
  if (node->op != op::soft_max) return true;
  const tensor* mask = node->src[1];
  const tensor* sinks = node->src[2];
  if (mask && ((mask->type != type::f32 && mask->type != type::f16) || mask->ne[0] != a->ne[0] ||
               mask->ne[1] < a->ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0))
    return false;
  if (mask && mask->nb[0] % gk::type_size(mask->type)) return false;
  if (sinks && (sinks->type != type::f32 || sinks->ne[0] < a->ne[2] || sinks->nb[0] % 4)) return false;
  return true;
}

void softmax_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  if (node->op != op::soft_max) {
    const std::int64_t n = a->nelements();
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + softmax_threads - 1) / softmax_threads,
                                                                         std::int64_t{x.props.sm_count} * 16 + 1));
    const float value = node->op == op::diag_mask_inf ? -std::numeric_limits<float>::infinity() : 0.0f;
    diag_mask_kernel<<<blocks, softmax_threads, 0, x.stream>>>(view_of(a), view_of(node), node->param_i32(0), value);
    GK_CUDA_LAUNCHED();
    return;
  }
  const tensor* mask = node->src[1];
  const tensor* sinks = node->src[2];
  softmax_args args{};
  args.x = view_of(a);
  args.y = view_of(node);
  if (mask) {
    args.mask = view_of(mask);
    args.mask_type = mask->type == type::f16 ? 1 : 0;
  } else {
    args.mask.data = nullptr;
  }
  args.scale = node->param_f32(0);
  const float max_bias = node->param_f32(1);
  args.slopes = nullptr;
  if (mask && max_bias > 0.0f) {
    const std::vector<float> s = alibi_slopes(max_bias, a->ne[2]);
    auto* d = static_cast<float*>(x.scratch(s.size() * sizeof(float)));
    GK_CUDA_CHECK(cudaMemcpyAsync(d, s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice, x.stream));
    args.slopes = d;
  }
  args.sinks = sinks ? static_cast<const char*>(sinks->data) : nullptr;
  args.sinks_nb0 = sinks ? static_cast<std::int64_t>(sinks->nb[0]) : 0;
  const unsigned threads = a->ne[0] <= 256 ? 32 : softmax_threads;
  soft_max_kernel<<<static_cast<unsigned>(a->nrows()), threads, 0, x.stream>>>(args);
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
