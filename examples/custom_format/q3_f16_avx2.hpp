// SPDX-License-Identifier: MIT
// q3_f16's avx2 dot kernel: a specialisation of gk::dot_kernel made in the user's code,
// as gk makes its own in include/gk/simd/avx2/. Compiles to nothing unless the build
// enables AVX2, FMA and F16C (gk's avx2 target); then it serves avx2 and, by gk's
// fallback, avx512. It must be visible before anything instantiates a q3_f16 kernel
// (gk::register_format<q3_f16> does), so include it right after q3_f16.hpp.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include <gk/gk.hpp>

#include "q3_f16.hpp"

GK_EXACT_FP_BEGIN

// avx2: the integer sum of a block in registers (the 32 codes unpacked to bytes, multiplied
// with the activation bytes), then the scalar definition's float steps in its order, so
// the result is the definition's bits. Unpacking: the 8 low-bit bytes copied to four
// 64-bit lanes shifted by 0, 2, 4, 6 give byte j = low bits of code j; the 4 high-bit
// bytes spread one per 8 output bytes and tested against 1 << (j % 8) give its high bit.
// One horizontal sum per block is the price of the definition's bits (its float sum runs
// block by block, in order); even so it reads 5.2 GB/s against the scalar 0.37 (one
// thread, 4096-wide rows, avx512 machine).
template <>
struct gk::dot_kernel<example::q3_f16, gk::simd::avx2> {
  static constexpr std::string_view served_by = "avx2 (examples/custom_format)";
  static float row(const example::q3_f16::block* w, const gk::formats::q8_0::block* a, std::int64_t n) {
    const __m256i shifts = _mm256_setr_epi64x(0, 2, 4, 6);
    const __m256i three = _mm256_set1_epi8(3);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i four = _mm256_set1_epi8(4);
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      std::uint64_t ql;
      std::uint32_t qh;
      std::memcpy(&ql, w[i].ql, 8);
      std::memcpy(&qh, w[i].qh, 4);
      const __m256i lo =
          _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(static_cast<long long>(ql)), shifts), three);
      const __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), spread), bit);
      const __m256i q = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(hb, bit), four));  // 0..7
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
      // sum q*x - 4*sum x: unsigned codes times signed bytes, pairs summed in 16 bits
      // (at most 2 * 7 * 128), then in 32
      const __m256i qx = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), ones16);
      const __m256i sx = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, x), ones16);
      const __m256i v = _mm256_sub_epi32(qx, _mm256_slli_epi32(sx, 2));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
      sum += example::q3_f16::scaled(_mm_cvtsi128_si32(s), w[i], a[i]);
    }
    return sum;
  }
};

GK_EXACT_FP_END

#endif
