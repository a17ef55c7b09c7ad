// SPDX-License-Identifier: MIT
// AVX2 exp/erf/tanh/silu/gelu rows: the vocabulary math_detail's lane code is written in,
// 8 floats a register; the bits are the scalar definition's (gk/simd/math.hpp).
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/simd/math.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_math {

struct vec {
  using reg = __m256;
  using ireg = __m256i;
  static constexpr int lanes = 8;
  static reg set1(float v) { return _mm256_set1_ps(v); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg min(reg a, reg b) { return _mm256_min_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static reg abs(reg a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static reg neg_abs(reg a) { return _mm256_or_ps(_mm256_set1_ps(-0.0f), a); }
  static reg copysign(reg mag, reg sgn) {
    const reg sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
  }
  static reg select_lt(reg a, reg b, reg if_true, reg if_false) {
    return _mm256_blendv_ps(if_false, if_true, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  static ireg bits(reg a) { return _mm256_castps_si256(a); }
  static reg from_bits(ireg a) { return _mm256_castsi256_ps(a); }
  static ireg iset1(std::int32_t v) { return _mm256_set1_epi32(v); }
  static ireg iadd(ireg a, ireg b) { return _mm256_add_epi32(a, b); }
  static ireg isub(ireg a, ireg b) { return _mm256_sub_epi32(a, b); }
  static ireg isra1(ireg a) { return _mm256_srai_epi32(a, 1); }
  static ireg ishl23(ireg a) { return _mm256_slli_epi32(a, 23); }
};

}  // namespace gk::simd::avx2_math

namespace gk::simd {

template <>
inline void exp_row<avx2>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx2_math::vec>::exp(x, y, n); }
template <>
inline void erf_row<avx2>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx2_math::vec>::erf(x, y, n); }
template <>
inline void tanh_row<avx2>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx2_math::vec>::tanh(x, y, n); }
template <>
inline void silu_row<avx2>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx2_math::vec>::silu(x, y, n); }
template <>
inline void gelu_row<avx2>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx2_math::vec>::gelu(x, y, n); }

}  // namespace gk::simd

GK_EXACT_FP_END

#endif
