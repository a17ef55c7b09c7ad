// SPDX-License-Identifier: MIT
// exp, erf, tanh and the activations built on them (silu, gelu), as scalar functions
// that are the definition and as row functions exp_row<T> ... gelu_row<T> per target.
// The reference's silu and softmax spend their time in scalar expf; these vectorise.
//
// Every target returns the scalar definition's bits, so results do not depend on the
// machine: the vector code runs the same polynomials with the same operations in the
// same order, FMA where the definition says std::fma (which is correctly rounded on any
// target, so an avx2 lane and the scalar call agree), and a branch of the definition is a
// blend of both arms in a vector. NaN in gives NaN out; payloads are not part of it.
//
// Accuracy against libm (double, rounded to float), measured by tests/simd/test_math.cpp
// over every 5th float pattern of the ranges the kernels see (both signs, every binade):
//   exp   1 ulp on [-104, 89]; 0 from -103.97 (exp < 2^-150), inf from 88.73, subnormal
//         results rounded once from the polynomial (so within 1 ulp of the 2^-149 grid)
//   erf   1 ulp.  tanh 1 ulp (tested bound 2); odd, and exactly ±1 from |x| >= 9.01
//   silu  3 ulp while the result is normal (x >= -87); below, |error| < 2^-126
//   gelu  2 ulp for x >= 0; for x < 0, 1 + erf cancels (as in the reference's erf gelu),
//         so there the bound is 2 ulp of x/2
// The polynomials are weighted least-squares fits on Chebyshev nodes (mpmath, 400 nodes),
// coefficients rounded to float; their own error is below 0.05 ulp, the rest is rounding.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::math_detail {

// exp(r) = 1 + r + r^2 p(r) for |r| <= ln2/2; p has degree 5 (fit error 1.2e-9 relative).
struct exp_coefficients {
  float c[6];
};
inline constexpr exp_coefficients exp_poly = {{0x1p-1f, 0x1.555556p-3f, 0x1.55547cp-5f, 0x1.1110a0p-7f,
                                               0x1.6d9904p-10f, 0x1.a1891ap-13f}};
inline constexpr float log2e = 0x1.715476p+0f;
inline constexpr float ln2_hi = 0x1.62e430p-1f, ln2_lo = -0x1.05c610p-29f;  // ln2 to 48 bits
inline constexpr float round_shift = 0x1.8p23f;  // x + 1.5*2^23 rounds x to an integer
// Inputs are clamped here: exp(89) overflows and exp(-104) < 2^-150 rounds to zero, and
// 2^n for n in [-151, 129] splits into two normal powers 2^(n>>1) * 2^(n - (n>>1)).
inline constexpr float exp_lo = -104.0f, exp_hi = 89.0f;

// erf(x) = x + x q(x^2) below erf_split (q of degree 6, fit error 1.4e-9);
// erf(x) = 1 - exp(l(x)) above, l(t) ~ log(erfc(t)) of degree 8 on [erf_split, 4].
inline constexpr float erf_split = 0.921875f, erf_clamp = 4.0f;  // erf(3.92) rounds to 1
inline constexpr float erf_small[7] = {0x1.06eba8p-3f,  -0x1.812744p-2f, 0x1.ce2e50p-4f, -0x1.b81404p-6f,
                                       0x1.54f91ap-8f,  -0x1.abdc30p-11f, 0x1.61f296p-14f};
inline constexpr float erf_tail[9] = {0x1.5e2732p-13f, -0x1.2124f6p+0f, -0x1.4454a0p-1f,
                                      -0x1.bae130p-4f, 0x1.9961eap-6f,  -0x1.0cb0ccp-8f,
                                      0x1.af1246p-12f, -0x1.19f7bap-16f, -0x1.69c898p-22f};

// tanh(t) = t + t^3 r(t^2) below tanh_split (r of degree 5, fit error 9e-10);
// tanh(t) = 1 - 2 / (exp(2t) + 1) above; from t = 9.01 that is 1 exactly.
inline constexpr float tanh_split = 0.625f, tanh_clamp = 10.0f;
inline constexpr float tanh_small[6] = {-0x1.555554p-2f, 0x1.111074p-3f, -0x1.b9f0eep-5f,
                                        0x1.63a2aap-6f,  -0x1.0c5e7cp-7f, 0x1.1a476ap-9f};

inline constexpr float inv_sqrt2 = 0x1.6a09e6p-1f, lowest = -0x1.fffffep127f;

// The definition of exp, with its polynomial as a parameter so a test can plant a bad one.
inline float exp_with(float x, const exp_coefficients& p) {
  x = exp_hi < x ? exp_hi : x;  // min and max that keep NaN, as minps/maxps(bound, x) do
  x = exp_lo > x ? exp_lo : x;
  const float kf = std::fma(x, log2e, round_shift);
  const float k = kf - round_shift;
  float r = std::fma(k, -ln2_hi, x);
  r = std::fma(k, -ln2_lo, r);
  float q = p.c[5];
  for (int i = 4; i >= 0; --i) q = std::fma(q, r, p.c[i]);
  const float y = std::fma(q, r * r, r) + 1.0f;
  const auto n = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(kf) - std::bit_cast<std::uint32_t>(round_shift));
  const std::int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
  return y * s1 * s2;
}

}  // namespace gk::simd::math_detail

namespace gk::simd {

inline float exp(float x) { return math_detail::exp_with(x, math_detail::exp_poly); }

inline float erf(float x) {
  using namespace math_detail;
  const float t = std::fabs(x);
  if (t < erf_split) {
    const float s = x * x;
    float q = erf_small[6];
    for (int i = 5; i >= 0; --i) q = std::fma(q, s, erf_small[i]);
    return std::fma(x, q, x);
  }
  const float tc = erf_clamp < t ? erf_clamp : t;
  float l = erf_tail[8];
  for (int i = 7; i >= 0; --i) l = std::fma(l, tc, erf_tail[i]);
  return std::copysign(1.0f - exp(l), x);
}

inline float tanh(float x) {
  using namespace math_detail;
  const float t = std::fabs(x);
  float y;
  if (t < tanh_split) {
    const float s = t * t;
    float r = tanh_small[5];
    for (int i = 4; i >= 0; --i) r = std::fma(r, s, tanh_small[i]);
    y = std::fma(t * s, r, t);
  } else {
    const float tc = tanh_clamp < t ? tanh_clamp : t;
    y = 1.0f - 2.0f / (exp(tc + tc) + 1.0f);
  }
  return std::copysign(y, x);
}

// x / (1 + e^-x), with e = exp(-|x|) so it never overflows: for x < 0 it is x e / (1 + e),
// which keeps silu within 3 ulp down to where it turns subnormal (x / inf gives -0 below -88.7).
// (x is raised to -FLT_MAX where it multiplies a factor that may be 0, so -inf gives -0.)
inline float silu(float x) {
  using namespace math_detail;
  const float e = exp(-std::fabs(x));
  const float num = x < 0.0f ? (lowest > x ? lowest : x) * e : x;
  return num / (1.0f + e);
}

inline float gelu(float x) {
  using namespace math_detail;
  return 0.5f * (lowest > x ? lowest : x) * (1.0f + erf(x * inv_sqrt2));
}

// The same definitions over V, a target's vocabulary of V::lanes-wide float registers:
// set1 load store add sub mul div fma, min/max with minps/maxps semantics (a < b ? a : b,
// so NaN in the second operand survives), abs, neg_abs, copysign, select_lt(a, b, t, f)
// = a < b ? t : f per lane, and int32 lanes: bits from_bits iset1 iadd isub isra1 ishl23.
// Each line below is the scalar line above it; keep them in step.
namespace math_detail {

template <class V>
typename V::reg exp_lanes(typename V::reg x) {
  using R = typename V::reg;
  x = V::min(V::set1(exp_hi), x);
  x = V::max(V::set1(exp_lo), x);
  const R kf = V::fma(x, V::set1(log2e), V::set1(round_shift));
  const R k = V::sub(kf, V::set1(round_shift));
  R r = V::fma(k, V::set1(-ln2_hi), x);
  r = V::fma(k, V::set1(-ln2_lo), r);
  R q = V::set1(exp_poly.c[5]);
  for (int i = 4; i >= 0; --i) q = V::fma(q, r, V::set1(exp_poly.c[i]));
  const R y = V::add(V::fma(q, V::mul(r, r), r), V::set1(1.0f));
  const auto n = V::isub(V::bits(kf), V::bits(V::set1(round_shift)));
  const auto n1 = V::isra1(n);
  const auto n2 = V::isub(n, n1);
  const R s1 = V::from_bits(V::ishl23(V::iadd(n1, V::iset1(127))));
  const R s2 = V::from_bits(V::ishl23(V::iadd(n2, V::iset1(127))));
  return V::mul(V::mul(y, s1), s2);
}

template <class V>
typename V::reg erf_lanes(typename V::reg x) {
  using R = typename V::reg;
  const R t = V::abs(x);
  const R s = V::mul(x, x);
  R q = V::set1(erf_small[6]);
  for (int i = 5; i >= 0; --i) q = V::fma(q, s, V::set1(erf_small[i]));
  const R small = V::fma(x, q, x);
  const R tc = V::min(V::set1(erf_clamp), t);
  R l = V::set1(erf_tail[8]);
  for (int i = 7; i >= 0; --i) l = V::fma(l, tc, V::set1(erf_tail[i]));
  const R tail = V::copysign(V::sub(V::set1(1.0f), exp_lanes<V>(l)), x);
  return V::select_lt(t, V::set1(erf_split), small, tail);
}

template <class V>
typename V::reg tanh_lanes(typename V::reg x) {
  using R = typename V::reg;
  const R t = V::abs(x);
  const R s = V::mul(t, t);
  R r = V::set1(tanh_small[5]);
  for (int i = 4; i >= 0; --i) r = V::fma(r, s, V::set1(tanh_small[i]));
  const R small = V::fma(V::mul(t, s), r, t);
  const R tc = V::min(V::set1(tanh_clamp), t);
  const R e = exp_lanes<V>(V::add(tc, tc));
  const R big = V::sub(V::set1(1.0f), V::div(V::set1(2.0f), V::add(e, V::set1(1.0f))));
  return V::copysign(V::select_lt(t, V::set1(tanh_split), small, big), x);
}

template <class V>
typename V::reg silu_lanes(typename V::reg x) {
  const auto e = exp_lanes<V>(V::neg_abs(x));
  const auto num = V::select_lt(x, V::set1(0.0f), V::mul(V::max(V::set1(lowest), x), e), x);
  return V::div(num, V::add(V::set1(1.0f), e));
}

template <class V>
typename V::reg gelu_lanes(typename V::reg x) {
  const auto e = erf_lanes<V>(V::mul(x, V::set1(inv_sqrt2)));
  return V::mul(V::mul(V::set1(0.5f), V::max(V::set1(lowest), x)), V::add(V::set1(1.0f), e));
}

// Whole registers through Lanes, the tail through the scalar definition (same bits).
template <class V, class Lanes, class One>
void map_row(const float* x, float* y, std::int64_t n, Lanes lanes, One one) {
  std::int64_t i = 0;
  for (; i + V::lanes <= n; i += V::lanes) V::store(y + i, lanes(V::load(x + i)));
  for (; i < n; ++i) y[i] = one(x[i]);
}

// One target's five row functions, given its vocabulary V.
template <class V>
struct rows {
  static void exp(const float* x, float* y, std::int64_t n) {
    map_row<V>(x, y, n, exp_lanes<V>, [](float v) { return simd::exp(v); });
  }
  static void erf(const float* x, float* y, std::int64_t n) {
    map_row<V>(x, y, n, erf_lanes<V>, [](float v) { return simd::erf(v); });
  }
  static void tanh(const float* x, float* y, std::int64_t n) {
    map_row<V>(x, y, n, tanh_lanes<V>, [](float v) { return simd::tanh(v); });
  }
  static void silu(const float* x, float* y, std::int64_t n) {
    map_row<V>(x, y, n, silu_lanes<V>, [](float v) { return simd::silu(v); });
  }
  static void gelu(const float* x, float* y, std::int64_t n) {
    map_row<V>(x, y, n, gelu_lanes<V>, [](float v) { return simd::gelu(v); });
  }
};

}  // namespace math_detail

// Row functions: y[i] = f(x[i]) for i < n; x == y is allowed. The primary template forwards
// to T::fallback; the scalar specialisation is the definition.
template <Target T>
void exp_row(const float* x, float* y, std::int64_t n) { exp_row<typename T::fallback>(x, y, n); }
template <Target T>
void erf_row(const float* x, float* y, std::int64_t n) { erf_row<typename T::fallback>(x, y, n); }
template <Target T>
void tanh_row(const float* x, float* y, std::int64_t n) { tanh_row<typename T::fallback>(x, y, n); }
template <Target T>
void silu_row(const float* x, float* y, std::int64_t n) { silu_row<typename T::fallback>(x, y, n); }
template <Target T>
void gelu_row(const float* x, float* y, std::int64_t n) { gelu_row<typename T::fallback>(x, y, n); }

template <>
inline void exp_row<scalar>(const float* x, float* y, std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = exp(x[i]); }
template <>
inline void erf_row<scalar>(const float* x, float* y, std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = erf(x[i]); }
template <>
inline void tanh_row<scalar>(const float* x, float* y, std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = tanh(x[i]); }
template <>
inline void silu_row<scalar>(const float* x, float* y, std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = silu(x[i]); }
template <>
inline void gelu_row<scalar>(const float* x, float* y, std::int64_t n) { for (std::int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]); }

}  // namespace gk::simd

GK_EXACT_FP_END

// Target specialisations; each file compiles to nothing unless its target is enabled.
#include "gk/simd/avx2/math.hpp"
#include "gk/simd/avx512/math.hpp"
#include "gk/simd/neon/math.hpp"
