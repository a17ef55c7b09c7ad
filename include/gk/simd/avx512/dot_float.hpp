// SPDX-License-Identifier: MIT
// AVX-512 row dots of the float formats (f32, f16, bf16), bit-identical to
// formats::float_row::dot: the definition's 16 lanes are one register, each step a mul
// then an add (never an FMA: the definition rounds the product), the tail a masked load
// and a masked add into its own lanes, and the reduction the definition's tree (the
// register's halves, then as in avx2/dot_float.hpp). f16 widens by vcvtph2ps (exact,
// gk::f16_to_f32's bits for every code), bf16 by a 16-bit shift.
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_ops {

// sixteen consecutive elements of a float-format row, widened to f32; masked-off
// elements are not read and come back +0
inline __m512 load_f32x16(const formats::f32::block* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, &p->v); }
inline __m512 load_f32x16(const gk::f16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load_f32x16(const gk::bf16* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

// The definition's tree over the sixteen lanes of acc: the register's halves, then as in
// avx2/dot_float.hpp.
inline float reduce_lanes16(__m512 acc) {
  // (extract 0 rather than a cast: GCC 12's cast reads an undefined register and warns)
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(acc, 0), _mm512_extractf32x8_ps(acc, 1));  // acc[j] += acc[j + 8]
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));                // acc[j] += acc[j + 4]
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                       // acc[j] += acc[j + 2]
  s = _mm_add_ss(s, _mm_movehdup_ps(s));                                                        // acc[0] += acc[1]
  return _mm_cvtss_f32(s);
}


template <class B>
float float_row_dot(const B* w, const B* a, std::int64_t n) {
  static_assert(formats::float_row::lanes == 16, "the kernel keeps the definition's 16 lanes in one register");
  __m512 acc = _mm512_setzero_ps();
  std::int64_t i = 0;
  // 64 elements a step (64 * sizeof(B) bytes: one prefetch per cache line), the adds in the
  // definition's order
  for (; i + 64 <= n; i += 64) {
    const char* ahead = reinterpret_cast<const char*>(w + i) + row_prefetch_bytes;
#pragma GCC unroll 4
    for (std::size_t l = 0; l < sizeof(B); ++l) prefetch<0>(ahead + 64 * l);
#pragma GCC unroll 4
    for (int j = 0; j < 64; j += 16)
      acc = _mm512_add_ps(acc, _mm512_mul_ps(load_f32x16(w + i + j, 0xffff), load_f32x16(a + i + j, 0xffff)));
  }
  for (; i + 16 <= n; i += 16)
    acc = _mm512_add_ps(acc, _mm512_mul_ps(load_f32x16(w + i, 0xffff), load_f32x16(a + i, 0xffff)));
  if (const int r = static_cast<int>(n - i); r > 0) {
    const auto m = static_cast<__mmask16>((1u << r) - 1);
    acc = _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(load_f32x16(w + i, m), load_f32x16(a + i, m)));
  }
  return reduce_lanes16(acc);
}

}  // namespace gk::simd::avx512_ops

namespace gk {

template <>
struct dot_kernel<formats::f32, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::f32::block* w, const formats::f32::block* a, std::int64_t n) {
    return simd::avx512_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::f16, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::f16::block* w, const formats::f16::block* a, std::int64_t n) {
    return simd::avx512_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::bf16, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::bf16::block* w, const formats::bf16::block* a, std::int64_t n) {
    return simd::avx512_ops::float_row_dot(w, a, n);
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
