// SPDX-License-Identifier: MIT
// AVX-512 VNNI tiles of the non-linear 4-bit formats iq4_nl and iq4_xs: R weight rows by
// C activation columns, each weight block decoded once and dotted with all C columns.
//
// Codebook values reach -127 and 113, so avx512/dot_tile.hpp's u8 x s8 pmaddubsw kernel
// (bounded for |w| <= 64) would saturate. Here:
//   iq4_nl (q8_0 activations, one f16 scale per 32 weights): vpdpbusd, four u8 x s8
//     products into int32 without any intermediate saturation (each product is within
//     int16, four of them within int32), on activations made unsigned, a ^ 0x80 = a + 128,
//     and signed codebook values; 128 * sum w per block (the row's part) is subtracted.
//     Exact for every activation byte, -128 included.
//   iq4_xs (q8_K activations, a 6-bit signed integer scale per 32 weights): the codebook
//     values times their group scale as int16 (|127 * 32| = 4064), the activations
//     sign-extended to int16, and vpdpwssd (int16 pairs into int32): a block's total is
//     within 256 * 128 * 4064 < 2^31, exact in any order.
// Every dot's integer block sums are the definition's integers; the float terms are
// formed per (row, column) with the definition's operations, and each dot's running sum
// takes its block terms one by one in block order, as the definition's sum does, so every
// output is the row dot's bits. iq4_nl works sixteen blocks at a time: per (row, column)
// a vector of sixteen block terms (lanes = blocks), then a 16 x 16 transpose so that the
// sixteen dots' chains advance together (lanes = dots), one vector add per block; the
// tail blocks run the definition's block dot. iq4_xs (one float term per 256 weights)
// forms the sixteen dots' terms in one vector per block (lanes = dots).
// Shape 2 x 8 for both (the panel's eight columns share each decoded row). Measured one
// thread, 4096-wide rows, 64 weight rows by 8 columns, GFLOP/s rows / 2 x 8 / 4 x 4:
// iq4_nl 42 / 137 / 136, iq4_xs 54 / 211 / 160.
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq4.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_iq4_tile {

using namespace gk::simd::avx512_ops;

// rows[i] becomes column i of the 16 x 16 matrix whose row j was rows[j]: at each level
// h the off-diagonal h x h sub-blocks of every 2h x 2h block swap.
inline void transpose16(__m512* rows) {
#pragma GCC unroll 4
  for (int h = 8; h > 0; h /= 2) {
    alignas(64) int ia[16], ib[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
      ia[k] = (k & h) == 0 ? k : 16 + k - h;
      ib[k] = (k & h) == 0 ? k + h : 16 + k;
    }
    const __m512i va = _mm512_load_si512(ia), vb = _mm512_load_si512(ib);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if ((i & h) != 0) continue;
      const __m512 x = rows[i], y = rows[i + h];
      rows[i] = _mm512_permutex2var_ps(x, va, y);
      rows[i + h] = _mm512_permutex2var_ps(x, vb, y);
    }
  }
}

// lanes j = r * C + c (j < R * C) of the row's or the column's value; other lanes 0
template <int R, int C>
inline __m512i row_index() {
  alignas(64) int v[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) v[j] = j < R * C ? j / C : 0;
  return _mm512_load_si512(v);
}
template <int R, int C>
inline __m512i col_index() {
  alignas(64) int v[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) v[j] = j < R * C ? j % C : 0;
  return _mm512_load_si512(v);
}

// ---- iq4_nl ------------------------------------------------------------------------------

// The signed codebook values of blocks b[0], b[1]: weights 0-31 of b[0] in bytes 0-31
// (low nibbles then high ones), b[1]'s in 32-63.
inline __m512i nl_pair(const formats::iq4_nl::block* b, __m512i table) {
  const __m256i q = _mm256_inserti128_si256(_mm256_zextsi128_si256(load128(b[0].qs)), load128(b[1].qs), 1);
  const __m512i q5 = _mm512_zextsi256_si512(q);
  const __m512i qq = _mm512_shuffle_i64x2(q5, q5, _MM_SHUFFLE(1, 1, 0, 0));
  const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                       0x0004000400040004);
  const __m512i c = _mm512_and_si512(_mm512_srlv_epi16(qq, sh), _mm512_set1_epi8(0x0f));
  return _mm512_shuffle_epi8(table, c);
}

template <int R, int C>
inline void nl_tile(const formats::iq4_nl::block* const* w, const formats::q8_0::block* const* a, std::int64_t n,
                    float* out) {
  static_assert(R * C <= 16 && R >= 1 && C >= 1);
  using wblock = formats::iq4_nl::block;
  using ablock = formats::q8_0::block;
  const std::int64_t nb = n / 32;
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i table = _mm512_broadcast_i32x4(load128(codebooks::kvalues_iq4nl));
  alignas(64) std::int8_t wq[R][8][64];  // sixteen blocks of each row, two per 64 bytes
  __m512 sum = _mm512_setzero_ps();      // lane j = r * C + c: that dot's running sum
  std::int64_t i = 0;
  for (; i + 16 <= nb; i += 16) {
    __m512i corr[R];  // 128 * sum w of each block, block l in lane l
    __m512 dw[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512i v[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i q = nl_pair(w[r] + i + 2 * k, table);
        _mm512_store_si512(wq[r][k], q);
        v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, q);
      }
      corr[r] = block_sums16(v);
      dw[r] = f16x16<sizeof(wblock)>(&w[r][i].d);
    }
    __m512 t[16];
#pragma GCC unroll 16
    for (int j = R * C; j < 16; ++j) t[j] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      __m512i y[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) y[k] = _mm512_xor_si512(load2x32(a[c][i + 2 * k].qs, a[c][i + 2 * k + 1].qs), k80);
      const __m512 da = f16x16<sizeof(ablock)>(&a[c][i].d);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i v[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), y[k], _mm512_load_si512(wq[r][k]));
        const __m512i s = _mm512_sub_epi32(block_sums16(v), corr[r]);
        // float(sum) * (to_f32(w.d) * to_f32(a.d)), block l in lane l
        t[r * C + c] = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], da));
      }
    }
    transpose16(t);  // t[l]: block l's terms, dot j in lane j
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) sum = _mm512_add_ps(sum, t[l]);
  }
  alignas(64) float s[16];
  _mm512_store_ps(s, sum);
  for (; i < nb; ++i)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) s[r * C + c] += formats::iq4_nl::dot(w[r][i], a[c] + i);
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) out[j] = s[j];
}

// ---- iq4_xs ------------------------------------------------------------------------------

template <int R, int C>
inline void xs_tile(const formats::iq4_xs::block* const* w, const formats::q8_K::block* const* a, std::int64_t n,
                    float* out) {
  static_assert(R * C <= 16 && R >= 1 && C >= 1);
  const std::int64_t nb = n / qk_k;
  const __m256i table = _mm256_broadcastsi128_si256(load128(codebooks::kvalues_iq4nl));
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m512i ri = row_index<R, C>(), ci = col_index<R, C>();
  alignas(64) std::int16_t wq[R][8][32];  // group g of each row: value * group scale
  __m512 sum = _mm512_setzero_ps();       // lane j = r * C + c
  for (std::int64_t i = 0; i < nb; ++i) {
    alignas(64) float fw[16] = {}, fa[16] = {};
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const formats::iq4_xs::block& b = w[r][i];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m128i q = load128(b.qs + 16 * g);
        const __m256i codes = _mm256_and_si256(
            _mm256_inserti128_si256(_mm256_zextsi128_si256(q), _mm_srli_epi16(q, 4), 1), low4);
        const __m512i v = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(table, codes));
        const auto sc = static_cast<short>(formats::iq4_xs::group_scale(b, g));
        _mm512_store_si512(wq[r][g], _mm512_mullo_epi16(v, _mm512_set1_epi16(sc)));
      }
      fw[r] = half_to_f32(b.d);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) fa[c] = a[c][i].d;
    __m512i acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i y[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) y[c] = _mm512_cvtepi8_epi16(load256(a[c][i].qs + 32 * g));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i wv = _mm512_load_si512(wq[r][g]);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) acc[r * C + c] = _mm512_dpwssd_epi32(acc[r * C + c], y[c], wv);
      }
    }
    __m512i v[8];  // dots 2k (lanes 0-7) and 2k+1 (lanes 8-15), halves folded
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      v[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(acc[2 * k], acc[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_i32x4(acc[2 * k], acc[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 total = _mm512_cvtepi32_ps(block_sums16(v));
    const __m512 vw = _mm512_permutexvar_ps(ri, _mm512_load_ps(fw));
    const __m512 va = _mm512_permutexvar_ps(ci, _mm512_load_ps(fa));
    // to_f32(w.d) * a->d * float(total)
    sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(vw, va), total));
  }
  alignas(64) float s[16];
  _mm512_store_ps(s, sum);
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) out[j] = s[j];
}

// Any R x C (R <= 16) through tiles of at most sixteen dots.
template <class K>
struct runner {
  template <int R, int C>
  static void run(const typename K::wblock* const* w, const typename K::ablock* const* a, std::int64_t n, float* out) {
    static_assert(R >= 1 && R <= 16);
    if constexpr (R * C <= 16) {
      K::template tile<R, C>(w, a, n, out);
    } else {
      constexpr int cb = 16 / R;
      float o[R * cb];
      for (int c0 = 0; c0 < C; c0 += cb) {
        if (C - c0 >= cb) {
          K::template tile<R, cb>(w, a + c0, n, o);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < cb; ++c) out[r * C + c0 + c] = o[r * cb + c];
        } else {
          for (int c = c0; c < C; ++c) {
            K::template tile<R, 1>(w, a + c, n, o);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) out[r * C + c] = o[r];
          }
        }
      }
    }
  }
};

struct nl {
  using wblock = formats::iq4_nl::block;
  using ablock = formats::q8_0::block;
  template <int R, int C>
  static void tile(const wblock* const* w, const ablock* const* a, std::int64_t n, float* out) {
    nl_tile<R, C>(w, a, n, out);
  }
};
struct xs {
  using wblock = formats::iq4_xs::block;
  using ablock = formats::q8_K::block;
  template <int R, int C>
  static void tile(const wblock* const* w, const ablock* const* a, std::int64_t n, float* out) {
    xs_tile<R, C>(w, a, n, out);
  }
};

}  // namespace gk::simd::avx512_iq4_tile

namespace gk {

template <>
struct dot_tile<formats::iq4_nl, simd::avx512> {
  static constexpr bool specialised = true;
  static constexpr int rows = 2, cols = 8;
  template <int R, int C>
  static void run(const formats::iq4_nl::block* const* w, const formats::q8_0::block* const* a, std::int64_t n,
                  float* out) {
    simd::avx512_iq4_tile::runner<simd::avx512_iq4_tile::nl>::run<R, C>(w, a, n, out);
  }
};

template <>
struct dot_tile<formats::iq4_xs, simd::avx512> {
  static constexpr bool specialised = true;
  static constexpr int rows = 2, cols = 8;
  template <int R, int C>
  static void run(const formats::iq4_xs::block* const* w, const formats::q8_K::block* const* a, std::int64_t n,
                  float* out) {
    simd::avx512_iq4_tile::runner<simd::avx512_iq4_tile::xs>::run<R, C>(w, a, n, out);
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
