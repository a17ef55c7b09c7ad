// SPDX-License-Identifier: MIT
// AVX2 row dots of the float formats (f32, f16, bf16), bit-identical to
// formats::float_row::dot: lanes 0-7 and 8-15 of the definition are two registers, each
// step a mul then an add (never an FMA: the definition rounds the product), the tail goes
// to its own lanes through a zero-padded copy and a blend, and the reduction is the
// definition's tree (the two registers, then the halves, pairs and neighbours of one).
// f16 widens by vcvtph2ps, which is exact and gives gk::f16_to_f32's bits for every one of
// the 65536 codes (NaNs quieted, payload and sign kept); bf16 widens by a 16-bit shift.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_ops {

// eight consecutive elements of a float-format row, widened to f32
inline __m256 load_f32x8(const formats::f32::block* p) { return _mm256_loadu_ps(&p->v); }
inline __m256 load_f32x8(const gk::f16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_f32x8(const gk::bf16* p) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

// The definition's tree over lanes 0-7 (lo) and 8-15 (hi).
inline float reduce_lanes16(__m256 lo, __m256 hi) {
  lo = _mm256_add_ps(lo, hi);                                                              // acc[j] += acc[j + 8]
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));         // acc[j] += acc[j + 4]
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                  // acc[j] += acc[j + 2]
  s = _mm_add_ss(s, _mm_movehdup_ps(s));                                                   // acc[0] += acc[1]
  return _mm_cvtss_f32(s);
}

template <class B>
float float_row_dot(const B* w, const B* a, std::int64_t n) {
  static_assert(formats::float_row::lanes == 16, "the kernel keeps the definition's 16 lanes in two registers");
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();  // lanes 0-7, 8-15
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(load_f32x8(w + i), load_f32x8(a + i)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(load_f32x8(w + i + 8), load_f32x8(a + i + 8)));
  }
  if (const int r = static_cast<int>(n - i); r > 0) {
    B wt[16] = {}, at[16] = {};
    std::memcpy(wt, w + i, static_cast<std::size_t>(r) * sizeof(B));
    std::memcpy(at, a + i, static_cast<std::size_t>(r) * sizeof(B));
    // lanes at or past r keep their sums untouched (blend, not an add of +0)
    const __m256i rv = _mm256_set1_epi32(r);
    const __m256 in_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256 in_hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)));
    lo = _mm256_blendv_ps(lo, _mm256_add_ps(lo, _mm256_mul_ps(load_f32x8(wt), load_f32x8(at))), in_lo);
    hi = _mm256_blendv_ps(hi, _mm256_add_ps(hi, _mm256_mul_ps(load_f32x8(wt + 8), load_f32x8(at + 8))), in_hi);
  }
  return reduce_lanes16(lo, hi);
}

}  // namespace gk::simd::avx2_ops

namespace gk {

template <>
struct dot_kernel<formats::f32, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::f32::block* w, const formats::f32::block* a, std::int64_t n) {
    return simd::avx2_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::f16, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::f16::block* w, const formats::f16::block* a, std::int64_t n) {
    return simd::avx2_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::bf16, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::bf16::block* w, const formats::bf16::block* a, std::int64_t n) {
    return simd::avx2_ops::float_row_dot(w, a, n);
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
