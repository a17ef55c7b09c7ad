// SPDX-License-Identifier: MIT
// gk's exp, erf, tanh, silu and erf-GELU (include/gk/simd/math.hpp) as device functions,
// operation for operation, so a device kernel returns the CPU's bits. nvcc contracts a
// product feeding a sum into one FMA unless told not to, and the CPU definitions are
// compiled with contraction off: every such pair here is spelled with __fmul_rn /
// __fadd_rn (never contracted), and every std::fma of the definition is __fmaf_rn.
// Division and sqrtf are IEEE-rounded under nvcc's defaults (no --use_fast_math).
//
// libm functions that gk's CPU kernels call (logf, sinf, cosf, log1pf) have no
// bit-for-bit device twin; dm::libm_* evaluate them in double and round once, which is
// correctly rounded but for rare near-halfway cases, so they agree with glibc's (<= 1 ulp
// implementations) to within 1 ulp. expm1f is the exception: xielu subtracts x from it,
// and near xielu's zero that cancellation turned one ulp of expm1f into up to 768 ulps
// of the output, so dm::expm1 is glibc's own expm1f (fdlibm's), operation for operation.
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
__device__ __forceinline__ float libm_log1p(float x) { return static_cast<float>(::log1p(static_cast<double>(x))); }

// expm1f as glibc 2.36 and earlier compute it (sysdeps/ieee754/flt-32/s_expm1f.c, fdlibm's
// algorithm; x86-64 has no other variant), matched bit for bit on the host over every
// float. x = k ln2 + r with r in [-ln2/2, ln2/2]; expm1(r) from a rational form in r^2
// with a correction c for the rounding of r; then 2^k (expm1(r) + 1) - 1 arranged per k
// so the result does not cancel. Later glibc releases replace it with the correctly
// rounded CORE-MATH expm1f; a CPU linked against one of those differs here by an ulp.
// GK_EXPM1F_BEGIN (tests extract the function between these two markers)
__device__ __forceinline__ float expm1(float x) {
  constexpr float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f, invln2 = 1.4426950216e+00f;
  constexpr float q1 = -3.3333335072e-02f, q2 = 1.5873016091e-03f, q3 = -7.9365076090e-05f,
                  q4 = 4.0082177293e-06f, q5 = -2.0109921195e-07f;
  const std::uint32_t hx = __float_as_uint(x) & 0x7fffffffu;
  const bool neg = (__float_as_uint(x) >> 31) != 0;
  if (hx >= 0x4195b844u) {  // |x| >= 27 ln2
    if (hx > 0x7f800000u) return __fadd_rn(x, x);  // NaN
    if (neg) return -1.0f;                         // -inf too
    if (hx >= 0x42b17218u) return __int_as_float(0x7f800000);  // overflow, +inf
  }
  std::int32_t k = 0;
  float c = 0.0f;
  if (hx > 0x3eb17218u) {  // |x| > ln2 / 2: reduce
    float hi, lo;
    if (hx < 0x3f851592u) {  // |x| < 3 ln2 / 2
      hi = neg ? __fadd_rn(x, ln2_hi) : __fsub_rn(x, ln2_hi);
      lo = neg ? -ln2_lo : ln2_lo;
      k = neg ? -1 : 1;
    } else {
      k = static_cast<std::int32_t>(__fadd_rn(__fmul_rn(invln2, x), neg ? -0.5f : 0.5f));  // truncates, as C
      const float t = static_cast<float>(k);
      hi = __fsub_rn(x, __fmul_rn(t, ln2_hi));
      lo = __fmul_rn(t, ln2_lo);
    }
    x = __fsub_rn(hi, lo);
    c = __fsub_rn(__fsub_rn(hi, x), lo);
  } else if (hx < 0x33000000u) {  // |x| < 2^-25: x itself
    return x;
  }
  const float hfx = __fmul_rn(0.5f, x);
  const float hxs = __fmul_rn(x, hfx);
  float r1 = __fadd_rn(q4, __fmul_rn(hxs, q5));
  r1 = __fadd_rn(q3, __fmul_rn(hxs, r1));
  r1 = __fadd_rn(q2, __fmul_rn(hxs, r1));
  r1 = __fadd_rn(q1, __fmul_rn(hxs, r1));
  r1 = __fadd_rn(1.0f, __fmul_rn(hxs, r1));
  float t = __fsub_rn(3.0f, __fmul_rn(r1, hfx));
  float e = __fmul_rn(hxs, __fdiv_rn(__fsub_rn(r1, t), __fsub_rn(6.0f, __fmul_rn(x, t))));
  if (k == 0) return __fsub_rn(x, __fsub_rn(__fmul_rn(x, e), hxs));
  e = __fsub_rn(__fmul_rn(x, __fsub_rn(e, c)), c);
  e = __fsub_rn(e, hxs);
  if (k == -1) return __fsub_rn(__fmul_rn(0.5f, __fsub_rn(x, e)), 0.5f);
  if (k == 1) {
    if (x < -0.25f) return __fmul_rn(-2.0f, __fsub_rn(e, __fadd_rn(x, 0.5f)));
    return __fadd_rn(1.0f, __fmul_rn(2.0f, __fsub_rn(x, e)));
  }
  const std::int32_t kexp = static_cast<std::int32_t>(static_cast<std::uint32_t>(k) << 23);  // k in y's exponent
  if (k <= -2 || k > 56) {
    const float y = __fsub_rn(1.0f, __fsub_rn(e, x));
    return __fsub_rn(__int_as_float(__float_as_int(y) + kexp), 1.0f);
  }
  float y;
  if (k < 23) {
    t = __int_as_float(0x3f800000 - (0x1000000 >> k));  // 1 - 2^-k
    y = __fsub_rn(t, __fsub_rn(e, x));
  } else {
    t = __int_as_float((0x7f - k) << 23);  // 2^-k
    y = __fadd_rn(__fsub_rn(x, __fadd_rn(e, t)), 1.0f);
  }
  return __int_as_float(__float_as_int(y) + kexp);
}
// GK_EXPM1F_END

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
