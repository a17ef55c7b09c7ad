// SPDX-License-Identifier: MIT
// AVX2 row dots. Each vectorises the exact integer part of a block (sign-extend to 16
// bits and pmaddwd, or pmaddubsw where one side is a small unsigned code, so no sum can
// saturate for any input bytes) and then runs the scalar definition's float operations in
// the definition's order, so the result is the definition's bits for every input.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_ops {

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// sum over 32 lanes of a[i] * b[i], both signed bytes, exact for every byte value.
inline __m256i dot_i8x32(__m256i a, __m256i b) {
  const __m256i a_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(a));
  const __m256i a_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(a, 1));
  const __m256i b_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(b));
  const __m256i b_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(b, 1));
  return _mm256_add_epi32(_mm256_madd_epi16(a_lo, b_lo), _mm256_madd_epi16(a_hi, b_hi));
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

}  // namespace gk::simd::avx2_ops

namespace gk {

// q8_0 and q4_0: dot_legacy.hpp (eight blocks at a time).

template <>
struct dot_kernel<formats::q4_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q4_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      __m256i acc = _mm256_setzero_si256();
      int sum_m = 0;
      for (int c = 0; c < 4; ++c) {  // 64 weights: sub-blocks 2c (low nibbles) and 2c+1 (high)
        const formats::kq::scale_min s0 = formats::kq::get_scale_min(b.scales, 2 * c);
        const formats::kq::scale_min s1 = formats::kq::get_scale_min(b.scales, 2 * c + 1);
        const __m256i q = load(b.qs + 32 * c);
        // codes <= 15 times bytes >= -128: pairs stay within +-3840, no saturation
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), load(y.qs + 64 * c));
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), load(y.qs + 64 * c + 32));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_set1_epi16(static_cast<short>(s0.scale))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<short>(s1.scale))));
        sum_m += s0.min * (y.bsums[4 * c] + y.bsums[4 * c + 1]) + s1.min * (y.bsums[4 * c + 2] + y.bsums[4 * c + 3]);
      }
      const int sum_q = hsum_i32(acc);
      sum += to_f32(b.d) * y.d * static_cast<float>(sum_q) - to_f32(b.dmin) * y.d * static_cast<float>(sum_m);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q6_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q6_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      __m256i acc = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32), qh = load(b.qh + 32 * h);
        for (int k = 0; k < 4; ++k) {
          const __m256i ql = (k & 1) ? ql1 : ql0;
          const __m256i lo = (k >> 1) ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4) : _mm256_and_si256(ql, low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three);
          const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // 0..63
          // (u - 32) * a as u * a - 32 * a: pairs within +-16128 and +-8192, no saturation
          const __m256i ya = load(y.qs + 128 * h + 32 * k);
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, ya), _mm256_maddubs_epi16(k32, ya));
          const int j = 8 * h + 2 * k;  // sub-blocks j (lanes 0-7) and j+1 (lanes 8-15)
          const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(b.scales[j + 1]), _mm_set1_epi16(b.scales[j]));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
        }
      }
      sum += to_f32(b.d) * y.d * static_cast<float>(hsum_i32(acc));
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
