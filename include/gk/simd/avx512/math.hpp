// SPDX-License-Identifier: MIT
// AVX-512 exp/erf/tanh/silu/gelu rows: the vocabulary math_detail's lane code is written in,
// 16 floats a register; the bits are the scalar definition's (gk/simd/math.hpp).
// Compiles to nothing unless the translation unit targets simd::avx512 (F, BW, VL, DQ, VNNI).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/simd/math.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_math {

struct vec {
  using reg = __m512;
  using ireg = __m512i;
  static constexpr int lanes = 16;
  // min, max and the shifts go through their all-lanes masked forms: the plain ones pass
  // _mm512_undefined_*() as the source, which GCC 12 reports as maybe-uninitialized.
  static constexpr __mmask16 all = 0xffff;
  static reg set1(float v) { return _mm512_set1_ps(v); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg min(reg a, reg b) { return _mm512_mask_min_ps(a, all, a, b); }
  static reg max(reg a, reg b) { return _mm512_mask_max_ps(a, all, a, b); }
  static reg abs(reg a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), a); }
  static reg neg_abs(reg a) { return _mm512_or_ps(_mm512_set1_ps(-0.0f), a); }
  static reg copysign(reg mag, reg sgn) {
    const reg sign = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign, mag), _mm512_and_ps(sign, sgn));
  }
  static reg select_lt(reg a, reg b, reg if_true, reg if_false) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), if_false, if_true);
  }
  static ireg bits(reg a) { return _mm512_castps_si512(a); }
  static reg from_bits(ireg a) { return _mm512_castsi512_ps(a); }
  static ireg iset1(std::int32_t v) { return _mm512_set1_epi32(v); }
  static ireg iadd(ireg a, ireg b) { return _mm512_add_epi32(a, b); }
  static ireg isub(ireg a, ireg b) { return _mm512_sub_epi32(a, b); }
  static ireg isra1(ireg a) { return _mm512_mask_srai_epi32(a, all, a, 1); }
  static ireg ishl23(ireg a) { return _mm512_mask_slli_epi32(a, all, a, 23); }
};

}  // namespace gk::simd::avx512_math

namespace gk::simd {

template <>
inline void exp_row<avx512>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx512_math::vec>::exp(x, y, n); }
template <>
inline void erf_row<avx512>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx512_math::vec>::erf(x, y, n); }
template <>
inline void tanh_row<avx512>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx512_math::vec>::tanh(x, y, n); }
template <>
inline void silu_row<avx512>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx512_math::vec>::silu(x, y, n); }
template <>
inline void gelu_row<avx512>(const float* x, float* y, std::int64_t n) { math_detail::rows<avx512_math::vec>::gelu(x, y, n); }

}  // namespace gk::simd

GK_EXACT_FP_END

#endif
