// SPDX-License-Identifier: MIT
// gk's exp, erf, tanh, silu and erf-GELU (include/gk/simd/math.hpp) as device functions,
// operation for operation, so a device kernel returns the CPU's bits. nvcc contracts a
// product feeding a sum into one FMA unless told not to, and the CPU definitions are
// compiled with contraction off: every such pair here is spelled with __fmul_rn /
// __fadd_rn (never contracted), and every std::fma of the definition is __fmaf_rn.
// Division and sqrtf are IEEE-rounded under nvcc's defaults (no --use_fast_math).
//
// libm functions that gk's CPU kernels call (logf, sinf, cosf, expm1f, log1pf) have no
// bit-for-bit device twin; dm::libm_* evaluate them in double and round once, which is
// correctly rounded but for rare near-halfway cases, so they agree with glibc's (<= 1 ulp
// implementations) to within 1 ulp.
// Self-contained: only CUDA's own headers.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace gk::cuda::dm {

// the constants of gk::simd::math_detail, bit for bit (the polynomials are inline below)
constexpr float log2e = 0x1.715476p+0f;
constexpr float ln2_hi = 0x1.62e430p-1f, ln2_lo = -0x1.05c610p-29f;
constexpr float round_shift = 0x1.8p23f;
constexpr float exp_lo = -104.0f, exp_hi = 89.0f;
constexpr float erf_split = 0.921875f, erf_clamp = 4.0f;
constexpr float tanh_split = 0.625f, tanh_clamp = 10.0f;
constexpr float inv_sqrt2 = 0x1.6a09e6p-1f, lowest = -0x1.fffffep127f;

__device__ __forceinline__ float exp(float x) {
  x = exp_hi < x ? exp_hi : x;  // keeps NaN, as the definition
  x = exp_lo > x ? exp_lo : x;
  const float kf = __fmaf_rn(x, log2e, round_shift);
  const float k = __fsub_rn(kf, round_shift);
  float r = __fmaf_rn(k, -ln2_hi, x);
  r = __fmaf_rn(k, -ln2_lo, r);
  float q = 0x1.a1891ap-13f;
  q = __fmaf_rn(q, r, 0x1.6d9904p-10f);
  q = __fmaf_rn(q, r, 0x1.1110a0p-7f);
  q = __fmaf_rn(q, r, 0x1.55547cp-5f);
  q = __fmaf_rn(q, r, 0x1.555556p-3f);
  q = __fmaf_rn(q, r, 0x1p-1f);
  const float y = __fadd_rn(__fmaf_rn(q, __fmul_rn(r, r), r), 1.0f);
  const std::int32_t n = static_cast<std::int32_t>(__float_as_uint(kf) - __float_as_uint(round_shift));
  const std::int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = __uint_as_float(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = __uint_as_float(static_cast<std::uint32_t>(n2 + 127) << 23);
  return __fmul_rn(__fmul_rn(y, s1), s2);
}

__device__ __forceinline__ float erf(float x) {
  const float t = fabsf(x);
  if (t < erf_split) {
    const float s = __fmul_rn(x, x);
    float q = 0x1.61f296p-14f;
    q = __fmaf_rn(q, s, -0x1.abdc30p-11f);
    q = __fmaf_rn(q, s, 0x1.54f91ap-8f);
    q = __fmaf_rn(q, s, -0x1.b81404p-6f);
    q = __fmaf_rn(q, s, 0x1.ce2e50p-4f);
    q = __fmaf_rn(q, s, -0x1.812744p-2f);
    q = __fmaf_rn(q, s, 0x1.06eba8p-3f);
    return __fmaf_rn(x, q, x);
  }
  const float tc = erf_clamp < t ? erf_clamp : t;
  float l = -0x1.69c898p-22f;
  l = __fmaf_rn(l, tc, -0x1.19f7bap-16f);
  l = __fmaf_rn(l, tc, 0x1.af1246p-12f);
  l = __fmaf_rn(l, tc, -0x1.0cb0ccp-8f);
  l = __fmaf_rn(l, tc, 0x1.9961eap-6f);
  l = __fmaf_rn(l, tc, -0x1.bae130p-4f);
  l = __fmaf_rn(l, tc, -0x1.4454a0p-1f);
  l = __fmaf_rn(l, tc, -0x1.2124f6p+0f);
  l = __fmaf_rn(l, tc, 0x1.5e2732p-13f);
  return copysignf(__fsub_rn(1.0f, exp(l)), x);
}

__device__ __forceinline__ float tanh(float x) {
  const float t = fabsf(x);
  float y;
  if (t < tanh_split) {
    const float s = __fmul_rn(t, t);
    float r = 0x1.1a476ap-9f;
    r = __fmaf_rn(r, s, -0x1.0c5e7cp-7f);
    r = __fmaf_rn(r, s, 0x1.63a2aap-6f);
    r = __fmaf_rn(r, s, -0x1.b9f0eep-5f);
    r = __fmaf_rn(r, s, 0x1.111074p-3f);
    r = __fmaf_rn(r, s, -0x1.555554p-2f);
    y = __fmaf_rn(__fmul_rn(t, s), r, t);
  } else {
    const float tc = tanh_clamp < t ? tanh_clamp : t;
    y = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(exp(__fadd_rn(tc, tc)), 1.0f)));
  }
  return copysignf(y, x);
}

__device__ __forceinline__ float silu(float x) {
  const float e = exp(-fabsf(x));
  const float num = x < 0.0f ? __fmul_rn(lowest > x ? lowest : x, e) : x;
  return __fdiv_rn(num, __fadd_rn(1.0f, e));
}

// GELU with erf: 0.5 x (1 + erf(x / sqrt 2))
__device__ __forceinline__ float gelu_erf(float x) {
  return __fmul_rn(__fmul_rn(0.5f, lowest > x ? lowest : x), __fadd_rn(1.0f, erf(__fmul_rn(x, inv_sqrt2))));
}

// GELU, tanh form, as gk's CPU rowfn::gelu_tanh:
// t = (sqrt(2/pi) x) (1 + (0.044715 x) x); y = (0.5 x) (1 + tanh t)
__device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, x), x));
  const float t = tanh(__fmul_rn(__fmul_rn(0.79788456080286535587989211986876f, x), inner));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, t));
}

// x / (1 + exp(-1.702 x)), as rowfn::gelu_quick
__device__ __forceinline__ float gelu_quick(float x) {
  return __fdiv_rn(x, __fadd_rn(1.0f, exp(__fmul_rn(-1.702f, x))));
}

// 1 / (1 + exp(-x)), as rowfn::sigmoid
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, exp(-x))); }

// libm functions, evaluated in double and rounded once (see the top of the file)
__device__ __forceinline__ float libm_log(float x) { return static_cast<float>(::log(static_cast<double>(x))); }
__device__ __forceinline__ float libm_sin(float x) { return static_cast<float>(::sin(static_cast<double>(x))); }
__device__ __forceinline__ float libm_cos(float x) { return static_cast<float>(::cos(static_cast<double>(x))); }
__device__ __forceinline__ float libm_expm1(float x) { return static_cast<float>(::expm1(static_cast<double>(x))); }
__device__ __forceinline__ float libm_log1p(float x) { return static_cast<float>(::log1p(static_cast<double>(x))); }

// Stores in the CPU's narrowing (gk/core/narrow.hpp), NaN included: round to nearest even,
// f16 NaN as sign | 0x7e00, bf16 NaN as its top half with the quiet bit set.
__device__ __forceinline__ std::uint16_t f16_bits(float v) {
  const std::uint32_t x = __float_as_uint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u);
  return __half_as_ushort(__float2half_rn(v));
}
__device__ __forceinline__ std::uint16_t bf16_bits(float v) {
  const std::uint32_t x = __float_as_uint(v);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
// t: gk::type id, 0 f32, 1 f16, 30 bf16
__device__ __forceinline__ float load(const char* p, int t) {
  if (t == 0) return *reinterpret_cast<const float*>(p);
  const std::uint16_t h = *reinterpret_cast<const std::uint16_t*>(p);
  return t == 1 ? __half2float(__ushort_as_half(h)) : __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}
__device__ __forceinline__ void store(char* p, int t, float v) {
  if (t == 0) *reinterpret_cast<float*>(p) = v;
  else *reinterpret_cast<std::uint16_t*>(p) = t == 1 ? f16_bits(v) : bf16_bits(v);
}

}  // namespace gk::cuda::dm
