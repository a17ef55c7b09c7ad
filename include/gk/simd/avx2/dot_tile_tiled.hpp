// SPDX-License-Identifier: MIT
// AVX2 tiles that read a group of sixteen weight rows stored tiled (cpu/tiled.hpp) as it
// lies: one weight row per 32-bit lane, eight rows to a vector, so no horizontal sum at
// all. q4_0, q4_K, q6_K, iq4_nl and mxfp4, each kernel's layout and bounds beside it; q4_0's
// as the example. Block column i of a q4_0 group holds the sixteen rows' d (32 bytes), then qs dword k
// of the sixteen rows as 64 bytes (rows 0-7 in the first 32): one load gives lane r the
// codes of row r's weights 4k .. 4k+3 (low nibbles) and 16 + 4k .. 16 + 4k + 3 (high).
// Against the activation dword of the same four weights, broadcast, pmaddubsw gives each
// row's products in its own lane; the block's eight such steps add up in 16 bits (codes
// <= 15 against bytes >= -128: each step's pairs within +-3840, eight steps within +-30720,
// so nothing wraps), one pmaddwd by ones makes the row's sum of u * a, and 8 * sum(a) (the
// column's, the same for every row) makes it the block's exact integer sum of (u - 8) * a.
// The definition's float operations then run lane-wise, each lane adding its block in
// block order: every output is the scalar definition's bits.
//
// The same rows stored plain go through the pair tile (avx2/dot_tile_pairs.hpp), eight
// rows at a time (this tile's shape is the tiled group's sixteen rows).
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/avx2/dot_tile_pairs.hpp"
#include "gk/simd/prefetch.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_tiled {

using namespace gk::simd::avx2_ops;
using gk::simd::ahead;

inline constexpr int kRows = 16, kChunk = 64;  // rows of a tiled group; blocks per offset chunk

inline __m256i bcast32(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// off[j] = mult * (sum of activation block i0 + j's bytes), j < m (m <= kChunk), eight
// blocks per hadd tree (|sum| <= 4096, so mult <= 128 keeps it inside int32 many times over).
inline void offsets(const formats::q8_0::block* a, std::int64_t i0, int m, int mult, std::int32_t* off) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int j0 = 0; j0 < m; j0 += 8) {
    __m256i v[8];
    for (int j = 0; j < 8; ++j)
      v[j] = j0 + j < m ? _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(a[i0 + j0 + j].qs)), ones16)
                        : _mm256_setzero_si256();
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(off + j0), _mm256_mullo_epi32(hsum8_i32(v), _mm256_set1_epi32(mult)));
  }
}

// Rows 8h .. 8h + 7 of a tiled q4_0 group against CB columns, blocks [i0, i0 + m), added to
// acc[c] lane by lane (lane r: row 8h + r).
template <int CB>
inline void q4_0_half(const unsigned char* group, int h, const formats::q8_0::block* const* a, std::int64_t i0, int m,
                      const std::int32_t (*off)[kChunk], __m256* acc, const ahead& next) {
  constexpr std::size_t col_bytes = kRows * sizeof(formats::q4_0::block);
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1);
  for (int j = 0; j < m; ++j) {
    const std::int64_t i = i0 + j;
    next.block(i);
    const unsigned char* col = group + static_cast<std::size_t>(i) * col_bytes;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16 * h)));
    __m256i lo[4], hi[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i q = load(col + 32 + 64 * k + 32 * h);
      lo[k] = _mm256_and_si256(q, low4);
      hi[k] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    }
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      const std::int8_t* aq = a[c][i].qs;
      __m256i s16 = _mm256_maddubs_epi16(lo[0], bcast32(aq));
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[0], bcast32(aq + 16)));
#pragma GCC unroll 3
      for (int k = 1; k < 4; ++k) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo[k], bcast32(aq + 4 * k)));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[k], bcast32(aq + 16 + 4 * k)));
      }
      const __m256i s = _mm256_sub_epi32(_mm256_madd_epi16(s16, ones16), _mm256_set1_epi32(off[c][j]));
      const __m256 da = _mm256_set1_ps(_cvtsh_ss(a[c][i].d.bits));
      // (s * dw) * da, as formats::q4_0::dot
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), dw), da));
    }
  }
}

// The sixteen rows of a tiled q4_0 group by C columns: out[r * C + c].
template <int C>
void q4_0_tiled(const void* group, const formats::q8_0::block* const* a, std::int64_t n, float* out, const ahead& next) {
  const auto* g = static_cast<const unsigned char*>(group);
  const std::int64_t nb = n / 32;
  constexpr int CB = C < 4 ? C : 4;
  static_assert(C % CB == 0);
  for (int c0 = 0; c0 < C; c0 += CB) {
    __m256 acc[2][CB];
    for (auto& h : acc)
      for (auto& v : h) v = _mm256_setzero_ps();
    alignas(32) std::int32_t off[CB][kChunk];
    for (std::int64_t i0 = 0; i0 < nb; i0 += kChunk) {
      const int m = static_cast<int>(std::min<std::int64_t>(kChunk, nb - i0));
      for (int c = 0; c < CB; ++c) offsets(a[c0 + c], i0, m, 8, off[c]);
      for (int h = 0; h < 2; ++h)
        q4_0_half<CB>(g, h, a + c0, i0, m, off, acc[h], c0 == 0 && h == 0 ? next : ahead{});
    }
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < CB; ++c) {
        alignas(32) float o[8];
        _mm256_store_ps(o, acc[h][c]);
        for (int r = 0; r < 8; ++r) out[(8 * h + r) * C + c0 + c] = o[r];
      }
  }
}

// The word pattern for pshufb: in every dword lane, byte b (0..3) of the lane as the low
// byte of both 16-bit words (b2 for the second word), high bytes zero.
inline __m256i lane_bytes_as_words(int b, int b2) {
  auto lane = [&](int r) { return (4 * r + b) | (0x80 << 8) | ((4 * r + b2) << 16) | (0x80 << 24); };
  return _mm256_setr_epi32(lane(0), lane(1), lane(2), lane(3), lane(0), lane(1), lane(2), lane(3));
}

// Rows 8h .. 8h + 7 of a tiled q4_K group against CB columns, every block, added to acc[c]
// lane by lane. A q4_K block column is the block's 36 dwords, each as sixteen rows' copies
// (64 bytes, rows 0-7 first): dword 0 is d | dmin << 16, dwords 1-3 the packed scales and
// mins, dwords 4 .. 35 the codes (qs dword 8c + l: weights 64c + 4l .. + 3 in its low
// nibbles, sub-block 2c, and 64c + 32 + 4l .. in its high ones, sub-block 2c + 1). Per
// sub-block its eight steps add up in 16 bits (codes <= 15: within +-30720), pmaddwd by the
// row's 6-bit scale; the min term per row is sum_j min_j * (bsums[2j] + bsums[2j + 1]) by
// four pmaddwd of min pairs with bsum pairs (bsum pairs within +-4096 in 16 bits).
template <int CB>
inline void q4_K_half(const unsigned char* group, int h, const formats::q8_K::block* const* a, std::int64_t nb,
                      __m256* acc, const ahead& next) {
  constexpr std::size_t col_bytes = kRows * sizeof(formats::q4_K::block);
  const __m256i low4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f), m4 = low4, m2 = _mm256_set1_epi8(3);
  for (std::int64_t i = 0; i < nb; ++i) {
    next.block(i);
    const unsigned char* col = group + static_cast<std::size_t>(i) * col_bytes + 32 * h;
    auto unit = [&](int u) { return load(col + 64 * u); };
    const __m256i u0 = unit(0), u1 = unit(1), u2 = unit(2), u3 = unit(3);
    // d and dmin of the eight rows: [d 0-3, dmin 0-3 | d 4-7, dmin 4-7] -> [d | dmin]
    const __m256i dd = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_and_si256(u0, _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(u0, 16)), 0xd8);
    const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(dd)), dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(dd, 1));
    // kq::get_scale_min, byte-wise in every lane: scales and mins 0-3 are the low six bits of
    // bytes 0-3 and 4-7; 4-7 are the nibbles of bytes 8-11 with bytes 0-3's and 4-7's top two
    // bits above them
    const __m256i sc03 = _mm256_and_si256(u1, m6), mn03 = _mm256_and_si256(u2, m6);
    const __m256i sc47 = _mm256_or_si256(_mm256_and_si256(u3, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m2), 4));
    const __m256i mn47 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u3, 4), m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 6), m2), 4));
    __m256i q32[CB], m32[CB];
    const std::int8_t* aq[CB];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      aq[c] = a[c][i].qs;
      q32[c] = _mm256_setzero_si256();
      // bsum pairs: [b0 b1 b2 b3 (twice) | b4 b5 b6 b7 (twice)], b_j = bsums[2j] + bsums[2j + 1]
      const __m256i b = _mm256_hadd_epi16(load(a[c][i].bsums), load(a[c][i].bsums));
      m32[c] = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(mn03, lane_bytes_as_words(0, 1)), _mm256_permutevar8x32_epi32(b, _mm256_set1_epi32(0))),
                           _mm256_madd_epi16(_mm256_shuffle_epi8(mn03, lane_bytes_as_words(2, 3)), _mm256_permutevar8x32_epi32(b, _mm256_set1_epi32(1)))),
          _mm256_add_epi32(_mm256_madd_epi16(_mm256_shuffle_epi8(mn47, lane_bytes_as_words(0, 1)), _mm256_permutevar8x32_epi32(b, _mm256_set1_epi32(4))),
                           _mm256_madd_epi16(_mm256_shuffle_epi8(mn47, lane_bytes_as_words(2, 3)), _mm256_permutevar8x32_epi32(b, _mm256_set1_epi32(5)))));
    }
#pragma GCC unroll 1
    for (int cc = 0; cc < 4; ++cc) {  // weights 64cc ..: sub-blocks 2cc (low nibbles) and 2cc + 1 (high)
      __m256i lo16[CB], hi16[CB];
#pragma GCC unroll 4
      for (int c = 0; c < CB; ++c) lo16[c] = hi16[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m256i q = unit(4 + 8 * cc + l);
        const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
#pragma GCC unroll 4
        for (int c = 0; c < CB; ++c) {
          lo16[c] = _mm256_add_epi16(lo16[c], _mm256_maddubs_epi16(lo, bcast32(aq[c] + 64 * cc + 4 * l)));
          hi16[c] = _mm256_add_epi16(hi16[c], _mm256_maddubs_epi16(hi, bcast32(aq[c] + 64 * cc + 32 + 4 * l)));
        }
      }
      const __m256i sc = cc < 2 ? sc03 : sc47;
      const __m256i s_lo = _mm256_shuffle_epi8(sc, lane_bytes_as_words(2 * cc % 4, 2 * cc % 4));
      const __m256i s_hi = _mm256_shuffle_epi8(sc, lane_bytes_as_words((2 * cc + 1) % 4, (2 * cc + 1) % 4));
#pragma GCC unroll 4
      for (int c = 0; c < CB; ++c)
        q32[c] = _mm256_add_epi32(q32[c], _mm256_add_epi32(_mm256_madd_epi16(lo16[c], s_lo), _mm256_madd_epi16(hi16[c], s_hi)));
    }
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      const __m256 yd = _mm256_set1_ps(a[c][i].d);
      // (d * yd) * sum_q - (dmin * yd) * sum_m, as kq::dot_scale_min
      acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dw, yd), _mm256_cvtepi32_ps(q32[c])),
                                                   _mm256_mul_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(m32[c]))));
    }
  }
}

// The sixteen rows of a tiled group by C columns, `half` doing eight rows by up to four.
template <int C, class Ab, class Half>
void by_halves(const void* group, const Ab* const* a, float* out, Half half) {
  const auto* g = static_cast<const unsigned char*>(group);
  constexpr int CB = C < 4 ? C : 4;
  static_assert(C % CB == 0);
  for (int c0 = 0; c0 < C; c0 += CB)
    for (int h = 0; h < 2; ++h) {
      __m256 acc[CB];
      for (auto& v : acc) v = _mm256_setzero_ps();
      half.template operator()<CB>(g, h, a + c0, acc, c0 == 0 && h == 0);
      for (int c = 0; c < CB; ++c) {
        alignas(32) float o[8];
        _mm256_store_ps(o, acc[c]);
        for (int r = 0; r < 8; ++r) out[(8 * h + r) * C + c0 + c] = o[r];
      }
    }
}

template <int C>
void q4_K_tiled(const void* group, const formats::q8_K::block* const* a, std::int64_t n, float* out, const ahead& next) {
  by_halves<C>(group, a, out, [&]<int CB>(const unsigned char* g, int h, const formats::q8_K::block* const* ac, __m256* acc, bool first) {
    q4_K_half<CB>(g, h, ac, n / qk_k, acc, first ? next : ahead{});
  });
}

// Rows 8h .. 8h + 7 of a tiled q6_K group against CB columns. A q6_K block column is ql
// (dwords 0-31), qh (32-47) and the sixteen int8 scales (48-51) as sixteen rows' copies of
// each dword (64 bytes, rows 0-7 first), then the rows' f16 d (32 bytes). For weights
// 128h2 + 32k + 4g .. + 3 the codes u (0 .. 63) come from ql dword 16h2 + 8(k & 1) + g
// (nibble k >> 1) and bits 2k of qh dword 32 + 8h2 + g; sub-block 8h2 + 2k + (g >= 4).
// u * a by pmaddubsw (pairs within +-16128, two steps within +-32256 in 16 bits), pmaddwd by
// the sub-block's scale every two steps; the -32 offset as 32 * sum_j sc_j * S_j with S_j
// the column's 16-weight sums from its bytes (not bsums, which the definition does not
// read), by pmaddwd of scale pairs with S pairs. The same integer total as the definition.
template <int CB>
inline void q6_K_half(const unsigned char* group, int h, const formats::q8_K::block* const* a, std::int64_t nb,
                      __m256* acc, const ahead& next) {
  constexpr std::size_t col_bytes = kRows * sizeof(formats::q6_K::block);
  const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (std::int64_t i = 0; i < nb; ++i) {
    next.block(i);
    const unsigned char* base = group + static_cast<std::size_t>(i) * col_bytes;
    const unsigned char* col = base + 32 * h;
    auto unit = [&](int u) { return load(col + 64 * u); };
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + 64 * 52 + 16 * h)));
    // int8 scale bytes b and b2 of scale dword q in every lane as sign-extended words
    auto scale_words = [&](int q, int b, int b2) {
      auto lane = [&](int r) { return (0x80 | ((4 * r + b) << 8) | (0x80 << 16)) | ((4 * r + b2) << 24); };
      const __m256i idx = _mm256_setr_epi32(lane(0), lane(1), lane(2), lane(3), lane(0), lane(1), lane(2), lane(3));
      return _mm256_srai_epi16(_mm256_shuffle_epi8(unit(48 + q), idx), 8);
    };
    __m256i q32[CB];
    const std::int8_t* aq[CB];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      aq[c] = a[c][i].qs;
      // S_j in order, as sixteen words, then the offset sum_j sc_j * S_j by pairs
      __m256i m[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) m[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(aq[c] + 32 * k)), ones16);
      const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
      const __m256i f = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
      const __m256i t = _mm256_packs_epi32(e, f);  // [S0 S2 .. S14 | S1 S3 .. S15], |S_j| <= 2048
      alignas(32) std::int32_t sp[8];  // dword j: S_2j | S_2j+1 << 16
      _mm_store_si128(reinterpret_cast<__m128i*>(sp), _mm_unpacklo_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
      _mm_store_si128(reinterpret_cast<__m128i*>(sp + 4), _mm_unpackhi_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1)));
      __m256i o = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        o = _mm256_add_epi32(o, _mm256_madd_epi16(scale_words(j / 2, 2 * (j % 2), 2 * (j % 2) + 1), _mm256_set1_epi32(sp[j])));
      q32[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(o, 5));
    }
#pragma GCC unroll 1
    for (int h2 = 0; h2 < 2; ++h2)
#pragma GCC unroll 1
      for (int k = 0; k < 4; ++k)
#pragma GCC unroll 2
        for (int gh = 0; gh < 2; ++gh) {
          const int j = 8 * h2 + 2 * k + gh;  // the sub-block
          const __m256i sc = scale_words(j / 4, j % 4, j % 4);
#pragma GCC unroll 2
          for (int gp = 0; gp < 2; ++gp) {
            __m256i s16[CB];
#pragma GCC unroll 4
            for (int c = 0; c < CB; ++c) s16[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int gg = 0; gg < 2; ++gg) {
              const int g = 4 * gh + 2 * gp + gg;
              const __m256i ql = unit(16 * h2 + 8 * (k & 1) + g), qh = unit(32 + 8 * h2 + g);
              const __m256i lo = (k >> 1) ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4) : _mm256_and_si256(ql, low4);
              const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three), 4));
#pragma GCC unroll 4
              for (int c = 0; c < CB; ++c)
                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(u, bcast32(aq[c] + 128 * h2 + 32 * k + 4 * g)));
            }
#pragma GCC unroll 4
            for (int c = 0; c < CB; ++c) q32[c] = _mm256_add_epi32(q32[c], _mm256_madd_epi16(s16[c], sc));
          }
        }
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      // (d * yd) * s, as formats::q6_K::dot
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[c][i].d)), _mm256_cvtepi32_ps(q32[c])));
    }
  }
}

template <int C>
void q6_K_tiled(const void* group, const formats::q8_K::block* const* a, std::int64_t n, float* out, const ahead& next) {
  by_halves<C>(group, a, out, [&]<int CB>(const unsigned char* g, int h, const formats::q8_K::block* const* ac, __m256* acc, bool first) {
    q6_K_half<CB>(g, h, ac, n / qk_k, acc, first ? next : ahead{});
  });
}

// iq4_nl and mxfp4 tiled: the signed codebook value v of a code as u - off with u >= 0 from
// a pshufb table. mxfp4 (doubled e2m1, -12 .. 12): u = v + 12 <= 24, a step's pmaddubsw
// pairs within +-6144, four steps within +-24576 in 16 bits, so pmaddwd every four steps.
// iq4_nl (-127 .. 113): u = v + 128 <= 241 split as 16 u_h + u_l (both <= 15, eight steps
// within +-30720 each), pmaddwd by 16 and by 1. Either way the row's integer sum is
// sum(u * a) - off * sum(a), exact. Block column: the rows' d (iq4_nl, 32 bytes) or e
// (mxfp4, 16 bytes), then qs dword k of the sixteen rows at `qs + 64k` as in q4_0.
struct iq4_nl_cb {
  using W = formats::iq4_nl;
  static constexpr bool split = true;
  static constexpr int off = 128, qs = 32;
  static __m256i table_hi() { return table([](int v) { return (v + 128) >> 4; }); }
  static __m256i table_lo() { return table([](int v) { return (v + 128) & 15; }); }
  template <class Fn>
  static __m256i table(Fn f) {
    alignas(16) std::int8_t t[16];
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::int8_t>(f(codebooks::kvalues_iq4nl[c]));
    return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static __m256 row_scale(const unsigned char* col, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + 16 * h)));
  }
  // s * (dw * da), as formats::iq4_nl::dot
  static __m256 value(__m256 s, __m256 dw, __m256 da) { return _mm256_mul_ps(s, _mm256_mul_ps(dw, da)); }
};
struct mxfp4_cb {
  using W = formats::mxfp4;
  static constexpr bool split = false;
  static constexpr int off = 12, qs = 16;
  static __m256i table_lo() {
    alignas(16) std::int8_t t[16];
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::int8_t>(fp4_values()[c] + 12);
    return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static __m256 row_scale(const unsigned char* col, int h) {
    std::int64_t e8;
    std::memcpy(&e8, col + 8 * h, 8);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(e8));
    // e8m0_to_f32_half: the bits 0x00200000 << e for e < 2, else (e - 1) << 23
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e),
                                                  _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23),
                                                  _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
  }
  // (da * h) * s, as formats::mxfp4::dot
  static __m256 value(__m256 s, __m256 h, __m256 da) { return _mm256_mul_ps(_mm256_mul_ps(da, h), s); }
};

template <class T, int CB>
inline void codebook_half(const unsigned char* group, int h, const formats::q8_0::block* const* a, std::int64_t i0,
                          int m, const std::int32_t (*off)[kChunk], __m256* acc, const ahead& next) {
  constexpr std::size_t col_bytes = kRows * sizeof(typename T::W::block);
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones16 = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi16(16);
  const __m256i tlo = T::table_lo();
  __m256i thi = tlo;
  if constexpr (T::split) thi = T::table_hi();
  for (int j = 0; j < m; ++j) {
    const std::int64_t i = i0 + j;
    next.block(i);
    const unsigned char* col = group + static_cast<std::size_t>(i) * col_bytes;
    const __m256 dw = T::row_scale(col, h);
    // step t: weights 4t .. 4t+3 (t < 4, low nibbles) or 16 + 4(t - 4) .. (high), looked up
    // once for the CB columns
    __m256i ul[8], uh[8];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i q = load(col + T::qs + 64 * k + 32 * h);
      const __m256i c0 = _mm256_and_si256(q, low4), c1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      ul[k] = _mm256_shuffle_epi8(tlo, c0);
      ul[4 + k] = _mm256_shuffle_epi8(tlo, c1);
      if constexpr (T::split) {
        uh[k] = _mm256_shuffle_epi8(thi, c0);
        uh[4 + k] = _mm256_shuffle_epi8(thi, c1);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      const std::int8_t* aq = a[c][i].qs;
      __m256i s;
      if constexpr (T::split) {
        __m256i sh = _mm256_setzero_si256(), sl = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m256i av = bcast32(aq + (t < 4 ? 4 * t : 16 + 4 * (t - 4)));
          sh = _mm256_add_epi16(sh, _mm256_maddubs_epi16(uh[t], av));
          sl = _mm256_add_epi16(sl, _mm256_maddubs_epi16(ul[t], av));
        }
        s = _mm256_add_epi32(_mm256_madd_epi16(sh, sixteen), _mm256_madd_epi16(sl, ones16));
      } else {
        __m256i s4[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m256i av = bcast32(aq + (t < 4 ? 4 * t : 16 + 4 * (t - 4)));
          s4[t / 4] = _mm256_add_epi16(s4[t / 4], _mm256_maddubs_epi16(ul[t], av));
        }
        s = _mm256_add_epi32(_mm256_madd_epi16(s4[0], ones16), _mm256_madd_epi16(s4[1], ones16));
      }
      s = _mm256_sub_epi32(s, _mm256_set1_epi32(off[c][j]));
      const __m256 da = _mm256_set1_ps(_cvtsh_ss(a[c][i].d.bits));
      acc[c] = _mm256_add_ps(acc[c], T::value(_mm256_cvtepi32_ps(s), dw, da));
    }
  }
}

// The sixteen rows of a tiled iq4_nl / mxfp4 group by C columns: out[r * C + c].
template <class T, int C>
void codebook_tiled(const void* group, const formats::q8_0::block* const* a, std::int64_t n, float* out, const ahead& next) {
  const std::int64_t nb = n / 32;
  by_halves<C>(group, a, out, [&]<int CB>(const unsigned char* g, int h, const formats::q8_0::block* const* ac, __m256* acc, bool first) {
    alignas(32) std::int32_t off[CB][kChunk];
    for (std::int64_t i0 = 0; i0 < nb; i0 += kChunk) {
      const int m = static_cast<int>(std::min<std::int64_t>(kChunk, nb - i0));
      for (int c = 0; c < CB; ++c) offsets(ac[c], i0, m, T::off, off[c]);
      codebook_half<T, CB>(g, h, ac, i0, m, off, acc, first ? next : ahead{});
    }
  });
}
template <int C>
void iq4_nl_tiled(const void* group, const formats::q8_0::block* const* a, std::int64_t n, float* out, const ahead& next) {
  codebook_tiled<iq4_nl_cb, C>(group, a, n, out, next);
}
template <int C>
void mxfp4_tiled(const void* group, const formats::q8_0::block* const* a, std::int64_t n, float* out, const ahead& next) {
  codebook_tiled<mxfp4_cb, C>(group, a, n, out, next);
}

// The pair tile for up to sixteen plain rows: two runs of eight.
template <class F, int R, int C>
void pairs16(const typename F::W::block* const* w, const typename F::W::dot_type::block* const* a, std::int64_t n,
             float* out, const ahead& next) {
  static_assert(R >= 1 && R <= kRows);
  using run8 = avx2_pair_tile::runner<F>;
  if constexpr (R <= 8) {
    run8::template run<R, C>(w, a, n, out, next);
  } else {
    // each half prefetches half of the next task (see ahead::part): from >= 1 GiB, one
    // thread, q6_K 7.9 -> 10.2 GB/s (the first half prefetching all of it and the second
    // none, as until 2026-12-03; same harness as cpu/matmul.hpp's rows_block_plain)
    run8::template run<8, C>(w, a, n, out, next.part(0, 2));
    run8::template run<R - 8, C>(w + 8, a, n, out + 8 * C, next.part(1, 2));
  }
}

}  // namespace gk::simd::avx2_tiled

namespace gk {

// fmt: plain rows through the pair tile (simd::avx2_pair_tile::fmt_t), tiled groups
// through simd::avx2_tiled::fmt_tiled; prompts on decoded rows where prompt_rows has them
// (iq4_nl: dot_tile_wide.hpp).
#define GK_AVX2_TILED_TILE(fmt)                                                                                    \
  template <>                                                                                                      \
  struct dot_tile<formats::fmt, simd::avx2> : simd::avx2_wide::prompt_rows<formats::fmt> {                         \
    static constexpr bool specialised = true, decode = true, tiled = true;                                          \
    static constexpr int rows = simd::avx2_tiled::kRows, cols = 4;                                                  \
    template <int R, int C>                                                                                        \
    static void run(const formats::fmt::block* const* w, const formats::fmt::dot_type::block* const* a,            \
                    std::int64_t n, float* out, const void* next = nullptr, std::size_t next_bytes = 0) {          \
      simd::avx2_tiled::pairs16<simd::avx2_pair_tile::fmt##_t, R, C>(w, a, n, out,                                   \
                                                                    {next, next_bytes, n / formats::fmt::block_size}); \
    }                                                                                                              \
    template <int C>                                                                                               \
    static void run_tiled(const void* group, const formats::fmt::dot_type::block* const* a, std::int64_t n,        \
                          float* out, const void* next = nullptr, std::size_t next_bytes = 0) {                    \
      simd::avx2_tiled::fmt##_tiled<C>(group, a, n, out, {next, next_bytes, n / formats::fmt::block_size});        \
    }                                                                                                              \
  };

GK_AVX2_TILED_TILE(q4_0)
GK_AVX2_TILED_TILE(q4_K)
GK_AVX2_TILED_TILE(iq4_nl)
GK_AVX2_TILED_TILE(mxfp4)
GK_AVX2_TILED_TILE(q6_K)

#undef GK_AVX2_TILED_TILE


}  // namespace gk

GK_EXACT_FP_END

#endif
