// SPDX-License-Identifier: MIT
// AVX2 row dots (see dot.hpp for the rules every kernel here keeps).
//
// pmaddubsw multiplies an unsigned byte by a signed one and adds pairs with int16
// saturation; each use below names its operand ranges and the pair bound, which stays
// under 32767 for every weight byte and every activation byte, -128 included. Where a
// weight code is signed, either its offset is taken off as a second pmaddubsw over the
// same activations (q3_K, the ternaries) or the sign moves to the activation side
// (iq4_xs: |a| is exact as an unsigned byte, 128 included, and sign(v, a) of a codebook
// value in -127 .. 113 stays within -127 .. 127). Each format's min or offset term is
// formed as its scalar dot forms it: from q8_K's bsums (q5_K, q2_K) or from the
// activation bytes themselves (q3_K, iq4_xs, tq2_0, tq1_0).
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/formats/ternary.hpp"
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_ops {

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline int hsum_i32(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// int16 lanes 0-7 = 16-bit lane j of each 128-bit half of v, lanes 8-15 = lane k (v holds
// the same eight words in both halves).
inline __m256i words_jk(__m256i v, int j, int k) {
  const __m256i idx = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * k)),
                                       _mm_set1_epi16(static_cast<short>(0x0100 + 0x0202 * j)));
  return _mm256_shuffle_epi8(v, idx);
}

// The eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) of q4_K / q5_K, unpacked from
// their 12 bytes as kq::get_scale_min reads them, four sub-blocks per 32-bit word.
inline __m128i scales_mins_k4(const std::uint8_t* packed) {
  constexpr std::uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  std::uint32_t u[4];
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);  // mins 4-7
  const std::uint32_t mins03 = u[1] & low6;
  u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);  // scales 4-7
  u[2] = mins03;
  u[0] &= low6;  // scales 0-3
  return _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]), static_cast<int>(u[3]));
}

// The sixteen 6-bit scales u_j of q3_K (bytes j), unpacked as q3_K::scale reads them.
inline __m128i scales_k3(const std::uint8_t* packed) {
  constexpr std::uint32_t low4 = 0x0f0f0f0f, low2 = 0x03030303;
  std::uint32_t u[4];
  std::memcpy(u, packed, 12);
  const std::uint32_t top = u[2];
  u[2] = ((u[0] >> 4) & low4) | (((top >> 4) & low2) << 4);
  u[3] = ((u[1] >> 4) & low4) | (((top >> 6) & low2) << 4);
  u[0] = (u[0] & low4) | ((top & low2) << 4);
  u[1] = (u[1] & low4) | (((top >> 2) & low2) << 4);
  return _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]), static_cast<int>(u[3]));
}

// The eight group scales ls - 32 of iq4_xs as int16 words, as iq4_xs::group_scale reads
// them: low nibbles from scales_l, top two bits (scales_h >> 2g) & 3 by shifting word g
// left by 14 - 2g (mullo keeps the low 16 bits) and back down by 14.
inline __m128i scales_iq4_xs(const formats::iq4_xs::block& b) {
  std::uint32_t l;
  std::memcpy(&l, b.scales_l, 4);
  const __m128i lv = _mm_cvtsi32_si128(static_cast<int>(l)), low4 = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(lv, low4), _mm_and_si128(_mm_srli_epi16(lv, 4), low4)));
  const __m128i hi = _mm_srli_epi16(
      _mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(b.scales_h)),
                      _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
      14);
  return _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
}

// Bytes times 3, mod 256, exactly (two byte adds).
inline __m256i times3_u8(__m256i x) { return _mm256_add_epi8(_mm256_add_epi8(x, x), x); }

// tq1_0's trit of a byte already multiplied by 3^k mod 256: floor(3x / 256) is 1 from
// x = 86 and 2 from x = 171, so it is the count of those two thresholds x reaches
// (unsigned compares as signed ones after flipping the top bit). Result 0 .. 2.
inline __m256i top_trit(__m256i x) {
  const __m256i s = _mm256_xor_si256(x, _mm256_set1_epi8(static_cast<char>(0x80)));
  const __m256i ge86 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(85 - 128));
  const __m256i ge171 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8(170 - 128));
  return _mm256_abs_epi8(_mm256_add_epi8(ge86, ge171));
}

}  // namespace gk::simd::avx2_ops

namespace gk {

template <>
struct dot_kernel<formats::q5_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q5_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit0 = _mm256_set1_epi8(1), bit1 = _mm256_set1_epi8(2);
    const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m128i sm = scales_mins_k4(b.scales);
      const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
      // min_j * (bsums[2j] + bsums[2j+1]) as one pmaddwd of bsums with each min twice:
      // the same int32 total for any bsums
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));
      const int sum_m = hsum_i32(_mm256_madd_epi16(load(y.bsums), mins));
      const __m256i qh = load(b.qh);
      __m256i acc = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {  // 64 weights: sub-blocks 2c (low nibbles) and 2c+1 (high)
        const __m256i q = load(b.qs + 32 * c);
        const __m256i h = _mm256_srli_epi16(qh, 2 * c);
        const __m256i u0 = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_slli_epi16(_mm256_and_si256(h, bit0), 4));
        const __m256i u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4),
                                           _mm256_slli_epi16(_mm256_and_si256(h, bit1), 3));
        // codes <= 31 times bytes >= -128: pairs within +-7936, no saturation
        const __m256i p0 = _mm256_maddubs_epi16(u0, load(y.qs + 64 * c));
        const __m256i p1 = _mm256_maddubs_epi16(u1, load(y.qs + 64 * c + 32));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, words_jk(scales, 2 * c, 2 * c)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, words_jk(scales, 2 * c + 1, 2 * c + 1)));
      }
      const int sum_q = hsum_i32(acc);
      sum += to_f32(b.d) * y.d * static_cast<float>(sum_q) - to_f32(b.dmin) * y.d * static_cast<float>(sum_m);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q2_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q2_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i three = _mm256_set1_epi8(3);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m128i sc = load128(b.scales);
      // summs: bsums[j] * m_j, exact in int32 for any bsums
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), low4));
      const int summs = hsum_i32(_mm256_madd_epi16(load(y.bsums), mins));
      const __m256i s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, low4));
      __m256i acc = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load(b.qs + 32 * h);
        const __m256i s_h = h ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
        for (int k = 0; k < 4; ++k) {  // weights 128h + 32k ..: sub-blocks 8h + 2k and 8h + 2k + 1
          const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
          // codes <= 3 times bytes >= -128: pairs within +-768, no saturation
          const __m256i p = _mm256_maddubs_epi16(c, load(y.qs + 128 * h + 32 * k));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, words_jk(s_h, 2 * k, 2 * k + 1)));
        }
      }
      const int isum = hsum_i32(acc);
      const float dall = y.d * to_f32(b.d), dmin = y.d * to_f32(b.dmin);
      sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q3_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q3_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(scales_k3(b.scales), _mm_set1_epi8(32)));  // -32 .. 31
      const __m256i hm = load(b.hmask);
      __m256i acc = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load(b.qs + 32 * h);
        const __m256i s_h = h ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
        for (int k = 0; k < 4; ++k) {  // weights 128h + 32k ..: sub-blocks 8h + 2k and 8h + 2k + 1
          const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)));
          const __m256i off = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero), four);
          // code = lo - off: lo <= 3 and off <= 4 times bytes >= -128, pairs within +-768
          // and +-1024, no saturation; the difference within +-1792
          const __m256i ya = load(y.qs + 128 * h + 32 * k);
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, ya), _mm256_maddubs_epi16(off, ya));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, words_jk(s_h, 2 * k, 2 * k + 1)));
        }
      }
      sum += (to_f32(b.d) * y.d) * static_cast<float>(hsum_i32(acc));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq4_xs, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq4_xs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i values = _mm256_broadcastsi128_si256(load128(codebooks::kvalues_iq4nl));
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m256i scales = _mm256_broadcastsi128_si256(scales_iq4_xs(b));
      __m256i acc = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m128i q = load128(b.qs + 16 * g);
        // weights 32g .. 32g+15 are the low nibbles, 32g+16 .. 32g+31 the high ones
        const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low4);
        const __m256i v = _mm256_shuffle_epi8(values, codes);
        const __m256i ya = load(y.qs + 32 * g);
        // |a| <= 128 unsigned times sign(v, a) within -127 .. 127: pairs within +-32512
        const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(ya), _mm256_sign_epi8(v, ya));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, words_jk(scales, g, g)));
      }
      sum += to_f32(b.d) * y.d * static_cast<float>(hsum_i32(acc));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::tq2_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::tq2_0::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i three = _mm256_set1_epi8(3), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 256; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      // (code - 1) * a as code * a - a, both summed over the block's 8 vectors in int16:
      // codes <= 3, pairs within +-768, totals within +-6144 and +-2048
      __m256i acc = _mm256_setzero_si256(), asum = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load(b.qs + 32 * h);
        for (int k = 0; k < 4; ++k) {
          const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
          const __m256i ya = load(y.qs + 128 * h + 32 * k);
          acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(c, ya));
          asum = _mm256_add_epi16(asum, _mm256_maddubs_epi16(ones8, ya));
        }
      }
      const int s = hsum_i32(_mm256_madd_epi16(_mm256_sub_epi16(acc, asum), ones16));
      sum += static_cast<float>(s) * (y.d * to_f32(b.d));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::tq1_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::tq1_0::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const __m256i high_half = _mm256_set_m128i(_mm_set1_epi8(-1), _mm_setzero_si128());
    // qh byte i (= qh[i % 4]) times 3^(i / 4): trit i / 4 of qh[i % 4] is weight 240 + i
    const __m256i pow3_qh = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    const __m256i low8 = _mm256_set1_epi16(0xff);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 256; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      // t * a with t = trit 0 .. 2, then minus a: pairs within +-512, the 8 vectors'
      // totals within +-4096 and +-2048 in int16
      __m256i acc = _mm256_setzero_si256(), asum = _mm256_setzero_si256();
      auto add = [&](__m256i x, const std::int8_t* act) {
        const __m256i ya = load(act);
        acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(top_trit(x), ya));
        asum = _mm256_add_epi16(asum, _mm256_maddubs_epi16(ones8, ya));
      };
      __m256i x = load(b.qs);  // trit k of byte m is weight 32k + m
      for (int k = 0; k < 5; ++k) {
        add(x, y.qs + 32 * k);
        if (k < 4) x = times3_u8(x);
      }
      // trit k of byte 32 + m is weight 160 + 16k + m: halves carry trits (0, 1), (2, 3), (4, qh)
      const __m128i z = load128(b.qs + 32);
      __m256i zz = _mm256_set_m128i(z, z);
      zz = _mm256_add_epi8(zz, _mm256_and_si256(high_half, _mm256_add_epi8(zz, zz)));  // halves z, 3z
      add(zz, y.qs + 160);
      zz = times3_u8(times3_u8(zz));  // 9z, 27z
      add(zz, y.qs + 192);
      std::uint32_t qh32;
      std::memcpy(&qh32, b.qh, 4);
      const __m256i qh = _mm256_and_si256(
          _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_set1_epi32(static_cast<int>(qh32))), pow3_qh), low8);
      const __m128i qh8 = _mm_packus_epi16(_mm256_castsi256_si128(qh), _mm256_extracti128_si256(qh, 1));
      zz = _mm256_inserti128_si256(times3_u8(times3_u8(zz)), qh8, 1);  // 81z, qh
      add(zz, y.qs + 224);
      const int s = hsum_i32(_mm256_madd_epi16(_mm256_sub_epi16(acc, asum), ones16));
      sum += static_cast<float>(s) * (to_f32(b.d) * y.d);
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
