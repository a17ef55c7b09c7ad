// SPDX-License-Identifier: MIT
// AVX2 row dots (see dot.hpp for the rules every kernel here keeps).
//
// The lattice formats: grid rows are gathered with scalar table loads into a vector (one
// 64-bit row per group of 8 for the iq2/iq1 grids, one 32-bit row per 4 weights for the
// iq3 grids); signs become a byte mask (0xff where negative) and the signed products are
// formed with pmaddubsw on the unsigned grid bytes split by that mask:
//   sum g*sign*q = maddubs(g & ~neg, q) - maddubs(g & neg, q),
// which stays exact for q = -128 (negating q in bytes, as psignb does, would not).
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq1.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_ops {

// Byte masks of the 7-bit sign indices: byte j is 0xff where bit j of ksigns_iq2xs[i] is
// set. Derived from the codebook at compile time.
inline constexpr std::array<std::uint64_t, 128> ksigns_mask = [] {
  std::array<std::uint64_t, 128> t{};
  for (int i = 0; i < 128; ++i) {
    std::uint64_t m = 0;
    for (int j = 0; j < 8; ++j)
      if ((codebooks::ksigns_iq2xs[i] >> j) & 1u) m |= std::uint64_t{0xff} << (8 * j);
    t[i] = m;
  }
  return t;
}();

// 32 sign bits (bit i for byte i) to a byte mask, 0xff where the bit is set.
inline __m256i sign_bits_to_mask(std::uint32_t bits) {
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Pairwise 16-bit sums of g[i] * (neg[i] ? -1 : 1) * q[i], g unsigned bytes <= 62: each of
// the two pmaddubsw pair sums is at most 2 * 62 * 128 = 15872 in magnitude, so neither
// saturates, and each product lands in exactly one of them, so the difference is within
// +-15872 too. Exact for every activation byte, -128 included.
inline __m256i signed_dot_pairs(__m256i g, __m256i neg, __m256i q) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_andnot_si256(neg, g), q);
  const __m256i n = _mm256_maddubs_epi16(_mm256_and_si256(neg, g), q);
  return _mm256_sub_epi16(p, n);
}

// Per-block scales as bytes 2s+1 <= 31, sub-block h at byte h, in both 128-bit halves;
// pick(k) gives 16-bit lanes 0-7 = scale of sub-block 2k, lanes 8-15 = sub-block 2k+1.
inline __m256i nibble_scales(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  const __m128i x = _mm_set1_epi64x(static_cast<long long>(v)), m4 = _mm_set1_epi8(0x0f);
  const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
  return _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1)));
}
inline __m256i pick_scales(__m256i sc, int k) {
  const __m256i idx = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(0x8000 | (2 * k + 1))),
                                       _mm_set1_epi16(static_cast<short>(0x8000 | (2 * k))));
  return _mm256_shuffle_epi8(sc, idx);
}


// The integer sum of one iq2_xs / iq2_s super-block: 32 groups of 8 grid points (indices
// gi, 16 per 128 weights), their sign bits (4 bytes per 32 weights) and 4-bit scales sc.
// Grid bytes 8..43: see signed_dot_pairs; pairs times 2s+1 <= 31 stay exact in 32 bits.
template <std::size_t N>
inline int iq2_grid_block_sum(const std::uint64_t (&grid)[N], const std::uint16_t* gi, const std::uint8_t* signs,
                              const std::int8_t* yq, __m256i sc) {
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {  // weights 32k..32k+31: sub-blocks 2k, 2k+1
    const std::uint16_t* q = gi + 4 * k;
    const __m256i g = _mm256_set_epi64x(static_cast<long long>(grid[q[3]]), static_cast<long long>(grid[q[2]]),
                                        static_cast<long long>(grid[q[1]]), static_cast<long long>(grid[q[0]]));
    std::uint32_t bits;
    std::memcpy(&bits, signs + 4 * k, 4);
    const __m256i p = signed_dot_pairs(g, sign_bits_to_mask(bits), load(yq + 32 * k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pick_scales(sc, k)));
  }
  return hsum_i32(acc);
}

}  // namespace gk::simd::avx2_ops

namespace gk {

template <>
struct dot_kernel<formats::iq2_xxs, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq2_xxs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    using formats::iq2_xxs;
    const auto& grid = codebooks::iq2xxs_grid;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      __m256i acc = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        std::uint32_t idx, aux;
        std::memcpy(&idx, b.qs + 4 * k, 4);
        std::memcpy(&aux, b.qs + 4 * k + 2, 4);
        const __m256i g = _mm256_set_epi64x(static_cast<long long>(grid[idx >> 24]), static_cast<long long>(grid[(idx >> 16) & 0xff]),
                                            static_cast<long long>(grid[(idx >> 8) & 0xff]), static_cast<long long>(grid[idx & 0xff]));
        const __m256i neg = _mm256_set_epi64x(
            static_cast<long long>(ksigns_mask[(aux >> 21) & 127]), static_cast<long long>(ksigns_mask[(aux >> 14) & 127]),
            static_cast<long long>(ksigns_mask[(aux >> 7) & 127]), static_cast<long long>(ksigns_mask[aux & 127]));
        const __m256i p = signed_dot_pairs(g, neg, load(y.qs + 32 * k));
        // pairs within +-15872 times 2s+1 <= 31: exact in 32 bits
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1))));
      }
      const int bsum = hsum_i32(acc);
      sum += (to_f32(b.d) * y.d) * static_cast<float>(bsum) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq3_xxs, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq3_xxs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const auto& grid = codebooks::iq3xxs_grid;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      __m256i acc = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const std::uint8_t* q = b.qs + 8 * j;
        std::uint32_t aux;
        std::memcpy(&aux, b.qs + qk_k / 4 + 4 * j, 4);
        const __m256i g = _mm256_set_epi32(static_cast<int>(grid[q[7]]), static_cast<int>(grid[q[6]]), static_cast<int>(grid[q[5]]),
                                           static_cast<int>(grid[q[4]]), static_cast<int>(grid[q[3]]), static_cast<int>(grid[q[2]]),
                                           static_cast<int>(grid[q[1]]), static_cast<int>(grid[q[0]]));
        const __m256i neg = _mm256_set_epi64x(
            static_cast<long long>(ksigns_mask[(aux >> 21) & 127]), static_cast<long long>(ksigns_mask[(aux >> 14) & 127]),
            static_cast<long long>(ksigns_mask[(aux >> 7) & 127]), static_cast<long long>(ksigns_mask[aux & 127]));
        // grid bytes 4..62 (any index): see signed_dot_pairs; pairs times 2s+1 <= 31 exact in 32 bits
        const __m256i p = signed_dot_pairs(g, neg, load(y.qs + 32 * j));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1))));
      }
      const int s = hsum_i32(acc);
      sum += to_f32(b.d) * y.d * static_cast<float>(s) * 0.25f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq2_xs, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq2_xs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const auto& grid = codebooks::iq2xs_grid;
    const __m256i m511 = _mm256_set1_epi16(511);
    // 0x80 where the 4-bit index has odd parity: completes ksigns_iq2xs' even parity
    const __m256i odd4 = _mm256_broadcastsi128_si256(_mm_set_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0));
    alignas(32) std::uint16_t gi[32];
    alignas(32) std::uint8_t sb[32];
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load(b.qs + 16 * h);
        _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_and_si256(q, m511));
        const __m256i s7 = _mm256_srli_epi16(q, 9);  // 7 sign bits, high byte 0
        const __m256i full = _mm256_or_si256(s7, _mm256_shuffle_epi8(odd4, _mm256_xor_si256(s7, _mm256_srli_epi16(q, 13))));
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(full, full), 0x08);  // 16 bytes in order, low half
        _mm_store_si128(reinterpret_cast<__m128i*>(sb + 16 * h), _mm256_castsi256_si128(packed));
      }
      const __m256i sc = nibble_scales(b.scales);
      const int bsum = iq2_grid_block_sum(grid, gi, sb, y.qs, sc);
      sum += (to_f32(b.d) * y.d) * static_cast<float>(bsum) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq2_s, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq2_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const auto& grid = codebooks::iq2s_grid;
    // 16-bit lane g of half h (group 16h + g) reads qh byte 4h + g/4 and shifts its 2-bit
    // field g%4 to bits 8-9 by multiplying by 2^(8 - 2(g%4))
    const __m256i qh_pick[2] = {
        _mm256_set_epi64x(static_cast<long long>(0x8003800380038003ull), static_cast<long long>(0x8002800280028002ull),
                          static_cast<long long>(0x8001800180018001ull), static_cast<long long>(0x8000800080008000ull)),
        _mm256_set_epi64x(static_cast<long long>(0x8007800780078007ull), static_cast<long long>(0x8006800680068006ull),
                          static_cast<long long>(0x8005800580058005ull), static_cast<long long>(0x8004800480048004ull))};
    const __m256i shift = _mm256_set1_epi64x(0x0004001000400100);
    const __m256i m300 = _mm256_set1_epi16(0x300);
    alignas(32) std::uint16_t gi[32];
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      std::uint64_t qh8;
      std::memcpy(&qh8, b.qh, 8);
      const __m256i qh = _mm256_set1_epi64x(static_cast<long long>(qh8));
      for (int h = 0; h < 2; ++h) {
        const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, qh_pick[h]), shift), m300);
        _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
      }
      const __m256i sc = nibble_scales(b.scales);
      const int bsum = iq2_grid_block_sum(grid, gi, b.qs + 32, y.qs, sc);
      sum += (to_f32(b.d) * y.d) * static_cast<float>(bsum) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq3_s, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq3_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const auto& grid = codebooks::iq3s_grid;
    // 16-bit lane k of quarter t (index 16t + k: sub-block j = 2t + k/8, point k%8) takes
    // bit k%8 of qh[j] as index bit 8
    const __m256i bit = _mm256_set_epi16(128, 64, 32, 16, 8, 4, 2, 1, 128, 64, 32, 16, 8, 4, 2, 1);
    const __m256i b256 = _mm256_set1_epi16(256);
    alignas(32) std::uint16_t gi[64];
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m256i qh = _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qh)));
      for (int t = 0; t < 4; ++t) {
        const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * t)));
        const __m256i hj = _mm256_shuffle_epi8(qh, _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(0x8000 | (2 * t + 1))),
                                                                     _mm_set1_epi16(static_cast<short>(0x8000 | (2 * t)))));
        const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi16(_mm256_and_si256(hj, bit), bit), b256);
        _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * t), _mm256_or_si256(lo, hi));
      }
      __m256i acc = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const std::uint16_t* q = gi + 8 * j;
        const __m256i g = _mm256_set_epi32(static_cast<int>(grid[q[7]]), static_cast<int>(grid[q[6]]), static_cast<int>(grid[q[5]]),
                                           static_cast<int>(grid[q[4]]), static_cast<int>(grid[q[3]]), static_cast<int>(grid[q[2]]),
                                           static_cast<int>(grid[q[1]]), static_cast<int>(grid[q[0]]));
        std::uint32_t bits;
        std::memcpy(&bits, b.signs + 4 * j, 4);
        // grid bytes 1..15: see signed_dot_pairs; pairs times 2s+1 <= 31 exact in 32 bits
        const __m256i p = signed_dot_pairs(g, sign_bits_to_mask(bits), load(y.qs + 32 * j));
        const int ls = 1 + 2 * ((b.scales[j / 2] >> (4 * (j & 1))) & 0xf);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<short>(ls))));
      }
      const int s = hsum_i32(acc);
      sum += to_f32(b.d) * y.d * static_cast<float>(s);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq1_s, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq1_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const auto& grid = codebooks::iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    // 16-bit lane g of half h (group 16h + g, l = g % 4) reads qh[4h + g/4] and moves its
    // 3-bit field l (bits 3l..3l+2) to bits 8-10: times 256, 32, 4 (low product) for
    // l = 0, 1, 2, and a shift right by 1 (high product with 2^15) for l = 3
    const __m256i qh_pick[2] = {
        _mm256_set_epi64x(0x0706070607060706, 0x0504050405040504, 0x0302030203020302, 0x0100010001000100),
        _mm256_set_epi64x(0x0f0e0f0e0f0e0f0e, 0x0d0c0d0c0d0c0d0c, 0x0b0a0b0a0b0a0b0a, 0x0908090809080908)};
    const __m256i mul_lo = _mm256_set1_epi64x(0x0000000400200100), mul_hi = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i m700 = _mm256_set1_epi16(0x700);
    alignas(32) std::uint16_t gi[32];
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
      const __m256i qh2 = _mm256_broadcastsi128_si256(qh);
      for (int h = 0; h < 2; ++h) {
        const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        const __m256i hq = _mm256_shuffle_epi8(qh2, qh_pick[h]);
        const __m256i hi = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(hq, mul_lo), _mm256_mulhi_epu16(hq, mul_hi)), m700);
        _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
      }
      // ls = 2s+1 per sub-block (16-bit lane ib), and ls times the shift sign
      const __m128i s3 = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
      const __m128i ls = _mm_add_epi16(_mm_add_epi16(s3, s3), _mm_set1_epi16(1));
      const __m128i negm = _mm_srai_epi16(qh, 15);
      const __m128i lss = _mm_sub_epi16(_mm_xor_si128(ls, negm), negm);
      // sum_shift = sum over ib of ls*sign * (bsums[2ib] + bsums[2ib+1]), as 32-bit lanes
      const __m256i shift = _mm256_madd_epi16(_mm256_set_m128i(_mm_unpackhi_epi16(lss, lss), _mm_unpacklo_epi16(lss, lss)),
                                              load(y.bsums));
      const __m256i sc = _mm256_broadcastsi128_si256(ls);
      __m256i acc = _mm256_setzero_si256();
      for (int ib = 0; ib < 8; ++ib) {
        const std::uint16_t* q = gi + 4 * ib;
        const __m256i g = _mm256_set_epi64x(static_cast<long long>(grid[q[3]]), static_cast<long long>(grid[q[2]]),
                                            static_cast<long long>(grid[q[1]]), static_cast<long long>(grid[q[0]]));
        const __m256i ya = load(y.qs + 32 * ib);
        // coordinates c in {-1, 0, 1} as c + 1 in {0, 1, 2}: sum c*q = maddubs(c+1, q) -
        // maddubs(1, q); pairs within +-512 and +-256, no saturation, difference exact
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_add_epi8(g, one), ya), _mm256_maddubs_epi16(one, ya));
        const __m256i lsv = _mm256_shuffle_epi8(sc, _mm256_set1_epi16(static_cast<short>((2 * ib + 1) << 8 | 2 * ib)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, lsv));
      }
      // 8 * sum + sum_shift: the definition's integer (|.| < 2^26), summed in another order
      const int s = hsum_i32(_mm256_add_epi32(_mm256_slli_epi32(acc, 3), shift));
      sum += to_f32(b.d) * y.d * (static_cast<float>(s) * codebooks::iq1s_delta);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq1_m, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq1_m::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    using formats::iq1_m;
    const auto& grid = codebooks::iq1s_grid;
    const __m256i one = _mm256_set1_epi8(1);
    const __m128i m7 = _mm_set1_epi8(7);
    // 16-bit lane l of a pair sum covers weights 2l, 2l+1, so group l/4; its shift sign
    // is bit 3 + 4(l/4) of the two qh bytes read as one 16-bit word
    const __m256i shift_bit = _mm256_set_epi64x(static_cast<long long>(0x8000800080008000ull), 0x0800080008000800,
                                                0x0080008000800080, 0x0008000800080008);
    const __m128i lsmul = _mm_set1_epi64x(0x0001000800400200);
    alignas(32) std::uint16_t gi[32];
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      {  // index of group g: qs[g] | top 3 bits (nibble g%2 of qh[g/2], low 3 bits) << 8
        const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
        const __m128i lo3 = _mm_and_si128(qh, m7), hi3 = _mm_and_si128(_mm_srli_epi16(qh, 4), m7);
        const __m128i top[2] = {_mm_unpacklo_epi8(lo3, hi3), _mm_unpackhi_epi8(lo3, hi3)};
        for (int h = 0; h < 2; ++h) {
          const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
          const __m256i hi = _mm256_slli_epi16(_mm256_cvtepu8_epi16(top[h]), 8);
          _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
        }
      }
      // ls = 2s+1 of sub-block j (byte j): the 3-bit field at bit 3(j%4) of scales word j/4,
      // moved to bits 9-11 by multiplying by 2^(9 - 3(j%4)) (higher bits drop out)
      const __m128i sw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
      const __m128i f0 = _mm_mullo_epi16(_mm_shuffle_epi8(sw, _mm_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 1, 0, 1, 0, 1, 0, 1, 0)), lsmul);
      const __m128i f1 = _mm_mullo_epi16(_mm_shuffle_epi8(sw, _mm_set_epi8(7, 6, 7, 6, 7, 6, 7, 6, 5, 4, 5, 4, 5, 4, 5, 4)), lsmul);
      const __m128i m7w = _mm_set1_epi16(7);
      const __m128i f = _mm_packus_epi16(_mm_and_si128(_mm_srli_epi16(f0, 9), m7w), _mm_and_si128(_mm_srli_epi16(f1, 9), m7w));
      const __m256i sc = _mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(f, f), _mm_set1_epi8(1)));
      __m256i acc = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {  // sub-blocks 2c (lanes 0-15), 2c+1 (lanes 16-31)
        const std::uint16_t* q = gi + 4 * c;
        const __m256i g = _mm256_set_epi64x(static_cast<long long>(grid[q[3]]), static_cast<long long>(grid[q[2]]),
                                            static_cast<long long>(grid[q[1]]), static_cast<long long>(grid[q[0]]));
        const __m256i ya = load(y.qs + 32 * c);
        // u = c + 1 in {0, 1, 2}: U = maddubs(u, q) within +-512, Q = maddubs(1, q) within
        // +-256, no saturation. Per pair 8 * (U - Q) + sign * Q, U - Q within +-256: within
        // +-(2048 + 256), exact in 16 bits, and times 2s+1 <= 15 exact in 32.
        const __m256i u = _mm256_maddubs_epi16(_mm256_add_epi8(g, one), ya);
        const __m256i s = _mm256_maddubs_epi16(one, ya);
        std::uint16_t h01;
        std::memcpy(&h01, b.qh + 2 * c, 2);
        const __m256i neg = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<short>(h01)), shift_bit), shift_bit);
        const __m256i sh = _mm256_sub_epi16(_mm256_xor_si256(s, neg), neg);  // -Q where neg (|Q| <= 256)
        const __m256i v = _mm256_add_epi16(_mm256_slli_epi16(_mm256_sub_epi16(u, s), 3), sh);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, pick_scales(sc, c)));
      }
      const int s = hsum_i32(acc);
      sum += iq1_m::scale(b) * y.d * (static_cast<float>(s) * codebooks::iq1m_delta);
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
