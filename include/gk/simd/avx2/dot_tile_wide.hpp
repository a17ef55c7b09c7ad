// SPDX-License-Identifier: MIT
// AVX2 prompts of q8_0, q5_0, iq4_nl and iq4_xs on rows decoded to 16 bits (cpu/matmul.hpp
// decoded_tile, from decoded_min_n = 16 columns): the weights whose values are full-range or
// signed beyond what pmaddubsw takes exactly (q8_0's -128 .. 127, the iq4 codebook's
// -127 .. 113) cost the pair tiles two pmaddubsw per 32 weights (or sign extension of both
// sides per column block), and an hadd tree per 32-weight block of eight pairs.
//
// Here a task's sixteen rows are decoded once into the thread's scratch as 16-bit values
// (iq4_xs: the codebook value times its group's scale, |.| <= 127 * 32), eight rows
// interleaved so that one vector holds the same two consecutive weights of the eight rows
// (lane r: row r). A column's 16-bit activations are broadcast two at a time, so one
// pmaddwd gives the eight rows' partial sums of two weights, and a block's integer sum of
// each row is already in its lane: no horizontal sums. Four columns run at a time against
// both halves (pair_sums: two weight loads and four broadcasts per eight pmaddwd); the
// columns' bytes are widened once per 256 weights of a task and call.
//
// Standalone (/tmp harness, not committed), one thread, 16 rows x 64 columns x 4096, decode
// included, GFLOP/s: q8_0 ~92, q5_0 ~89, iq4_nl ~90, iq4_xs ~117, against the pair tiles'
// ~62 (q8_0) and ~64 (iq4_xs); the host is noisy (the same runs read 20 % lower at times).
//
// Exact: pmaddwd's pairs are within 2 * 4064 * 128, a block's 32-bit sums within 2^27, so
// each (row, column, block) integer is the definition's (iq4_xs: the sum over its eight
// groups of scale times codebook dot, as formats::iq4_xs::dot adds them), and the float
// part is F::value on the same operands in the definition's order, each lane adding its
// blocks in order from 0: every output is the scalar definition's bits.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/avx2/dot_legacy.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_wide {

// Rows 0 .. 7 of 16-bit pairs (t[r]: row r's pairs 0 .. 7 as 32-bit lanes) transposed in
// place: t[p] holds pair p of rows 0 .. 7.
inline void transpose8(__m256i* t) {
  __m256i a[8], b[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    a[2 * i] = _mm256_unpacklo_epi32(t[2 * i], t[2 * i + 1]);      // pairs 0 1 | 4 5 of rows 2i, 2i + 1
    a[2 * i + 1] = _mm256_unpackhi_epi32(t[2 * i], t[2 * i + 1]);  // pairs 2 3 | 6 7
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
    b[4 * h + 0] = _mm256_unpacklo_epi64(a[4 * h], a[4 * h + 2]);      // pair 0 | 4
    b[4 * h + 1] = _mm256_unpackhi_epi64(a[4 * h], a[4 * h + 2]);      // pair 1 | 5
    b[4 * h + 2] = _mm256_unpacklo_epi64(a[4 * h + 1], a[4 * h + 3]);  // pair 2 | 6
    b[4 * h + 3] = _mm256_unpackhi_epi64(a[4 * h + 1], a[4 * h + 3]);  // pair 3 | 7
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[p] = _mm256_permute2x128_si256(b[p], b[4 + p], 0x20);
    t[p + 4] = _mm256_permute2x128_si256(b[p], b[4 + p], 0x31);
  }
}

// One block of eight decoded rows: w[p] the 16-bit weights 2p, 2p + 1 of rows 0 .. 7
// (lane r), rf the rows' float factors.
template <int BS>
struct alignas(32) panel {
  __m256i w[BS / 2];
  float rf[8];
};

// 32 bytes as two vectors of 16-bit lanes: bytes 0 .. 15 and 16 .. 31.
inline void widen32(__m256i bytes, __m256i* out) {
  out[0] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes));
  out[1] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(bytes, 1));
}

// s * (dw * da), the block value of q8_0, q5_0 ((dw * da) * s: the same product) and iq4_nl,
// and of iq4_xs ((d * yd) * total).
inline __m256 s_times_dd(__m256 s, __m256 rf, __m256 cf) { return _mm256_mul_ps(s, _mm256_mul_ps(rf, cf)); }

// The activations' float factors of blocks y[0 .. m - 1] (m <= 8) into cf: q8_0's f16 d
// by one vcvtph2ps (exact, as to_f32; its software conversion, per column block, cost q8_0
// about a fifth of its time), q8_K's float d.
inline void col_factors(const formats::q8_0::block* y, int m, float* cf) {
  alignas(16) std::uint16_t h[8] = {};
  for (int j = 0; j < m; ++j) h[j] = y[j].d.bits;
  alignas(32) float f[8];
  _mm256_store_ps(f, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
  std::memcpy(cf, f, sizeof(float) * static_cast<std::size_t>(m));
}
inline void col_factors(const formats::q8_K::block* y, int m, float* cf) {
  for (int j = 0; j < m; ++j) cf[j] = y[j].d;
}

// The formats: values(b, g, out) the 16-bit weights 32g .. 32g + 31 of block b (out[0]:
// 0 .. 15, out[1]: 16 .. 31); the row's float factor is its f16 d (to_f32 of d.bits, by
// vcvtph2ps); value the block's float value from its integer sum s and the factors.
struct q8_0_w {
  using W = formats::q8_0;
  static void values(const W::block& b, int, __m256i* out) { widen32(avx2_ops::load(b.qs), out); }
  static __m256 value(__m256 s, __m256 rf, __m256 cf) { return s_times_dd(s, rf, cf); }
};

struct q5_0_w : q8_0_w {
  using W = formats::q5_0;
  static void values(const W::block& b, int, __m256i* out) {
    widen32(_mm256_sub_epi8(avx2_ops::codes5(b.qs, b.qh), _mm256_set1_epi8(16)), out);
  }
};

inline __m256i iq4_values(const std::uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebooks::kvalues_iq4nl)));
  return _mm256_shuffle_epi8(table, avx2_ops::nibbles32(qs));
}

struct iq4_nl_w : q8_0_w {
  using W = formats::iq4_nl;
  static void values(const W::block& b, int, __m256i* out) { widen32(iq4_values(b.qs), out); }
};

struct iq4_xs_w {
  using W = formats::iq4_xs;
  static void values(const W::block& b, int g, __m256i* out) {
    widen32(iq4_values(b.qs + 16 * g), out);
    const __m256i s = _mm256_set1_epi16(static_cast<short>(W::group_scale(b, g)));  // -32 .. 31
    out[0] = _mm256_mullo_epi16(out[0], s);
    out[1] = _mm256_mullo_epi16(out[1], s);
  }
  static __m256 value(__m256 s, __m256 rf, __m256 cf) { return s_times_dd(s, rf, cf); }
};

// The f16 d of block i of rows w[0 .. 7] as floats (vcvtph2ps: exact, as to_f32).
template <class B>
inline __m256 row_factors(const B* const* w, std::int64_t i) {
  return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(w[0][i].d.bits), static_cast<short>(w[1][i].d.bits),
                                        static_cast<short>(w[2][i].d.bits), static_cast<short>(w[3][i].d.bits),
                                        static_cast<short>(w[4][i].d.bits), static_cast<short>(w[5][i].d.bits),
                                        static_cast<short>(w[6][i].d.bits), static_cast<short>(w[7][i].d.bits)));
}

// For blocks b = 0 .. nb - 1, s[(2b + h) * G + c]: the eight rows' sums over the n pairs of
// panel h of block b (w[h] + b * wstep) against the 16-bit column col[c] + b * cstep, each
// pair 2p, 2p + 1 of the column broadcast to pmaddwd. Not inlined: inlined into
// run_decoded, GCC 12 kept the float factors of the next pass in registers and spilled an
// accumulator, whose loop-carried store and load held q8_0 at 68 GFLOP/s against iq4_xs'
// 111 (standalone, Zen 3); one call per block as well cost q8_0 a further ~10 %.
template <int G>
[[gnu::noinline]] inline void pair_sums(const __m256i* const* w, std::ptrdiff_t wstep, const std::int16_t* const* col,
                                        std::ptrdiff_t cstep, int n, int nb, __m256i* s) {
#pragma GCC unroll 1
  for (int blk = 0; blk < nb; ++blk) {
    const __m256i* w0 = w[0] + blk * wstep;
    const __m256i* w1 = w[1] + blk * wstep;
    __m256i acc0[G], acc1[G];
#pragma GCC unroll 4
    for (int c = 0; c < G; ++c) acc0[c] = acc1[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int p = 0; p < n; ++p) {
      const __m256i a = _mm256_load_si256(w0 + p), b = _mm256_load_si256(w1 + p);
#pragma GCC unroll 4
      for (int c = 0; c < G; ++c) {
        std::int32_t t;
        std::memcpy(&t, col[c] + blk * cstep + 2 * p, 4);
        const __m256i x = _mm256_set1_epi32(t);
        acc0[c] = _mm256_add_epi32(acc0[c], _mm256_madd_epi16(a, x));
        acc1[c] = _mm256_add_epi32(acc1[c], _mm256_madd_epi16(b, x));
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < G; ++c) s[2 * blk * G + c] = acc0[c], s[(2 * blk + 1) * G + c] = acc1[c];
  }
}

// dot_tile's decoded_tile members for trait F (cpu/matmul.hpp): sixteen rows decoded per
// task, run against one to eight columns at a time.
template <class F>
struct rows16 {
  using wf = typename F::W;  // (not W: dot_tile's own W comes from its other base)
  using af = typename wf::dot_type;
  static constexpr int bs = wf::block_size;
  static_assert(bs == af::block_size && bs % 32 == 0);
  using P = panel<bs>;
  static constexpr bool decoded_rows_tile = true;
  static constexpr int decoded_rows = 16;
  // Decoding costs about as much as running eight columns: 16 rows x N columns x 4096,
  // standalone, decoded / pair tile GFLOP/s, N 8: q8_0 55 / 65, q5_0 47 / 52, iq4_xs 66 / 72;
  // N 16: 72 / 64, 65 / 53, 89 / 71 (the lattice formats and tq2_0 win from 8 already).
  static constexpr std::int64_t decoded_min_n = 16;
  static std::size_t decoded_bytes(std::int64_t k) { return sizeof(P) * 2 * static_cast<std::size_t>(k / bs); }

  // rows w[0 .. 15], k weights each, into dst (decoded_bytes(k), 32-byte aligned): half h's
  // block i at panel 2 * i + h
  static void decode_rows(const typename wf::block* const* w, std::int64_t k, void* dst) {
    const std::int64_t nb = k / bs;
    auto* d = static_cast<P*>(dst);
    for (std::int64_t i = 0; i < nb; ++i) {
#pragma GCC unroll 1
      for (int h = 0; h < 2; ++h) {
        P& p = d[2 * i + h];
        _mm256_store_ps(p.rf, row_factors(w + 8 * h, i));
#pragma GCC unroll 1
        for (int g = 0; g < bs / 32; ++g) {
          __m256i t[2][8];
          for (int r = 0; r < 8; ++r) {
            __m256i v[2];
            F::values(w[8 * h + r][i], g, v);
            t[0][r] = v[0];
            t[1][r] = v[1];
          }
          transpose8(t[0]);
          transpose8(t[1]);
          for (int j = 0; j < 8; ++j) {
            p.w[16 * g + j] = t[0][j];
            p.w[16 * g + 8 + j] = t[1][j];
          }
        }
      }
    }
  }

  // out[r * C + c]: decoded row r (0 .. 15) against column a[c], C = 1, 2, 4, 8
  template <int C>
  static void run_decoded(const void* dec, const typename af::block* const* a, std::int64_t k, float* out) {
    constexpr int per_chunk = bs >= 256 ? 1 : 256 / bs;  // blocks whose columns are widened together
    // columns per pass, against both halves: two weight vectors and four broadcasts per eight
    // pmaddwd (one half against eight columns ran 66-85 against 70-97 GFLOP/s, and GCC 12
    // spilled an accumulator there; standalone, Zen 3)
    constexpr int G = C < 4 ? C : 4;
    const std::int64_t nb = k / bs;
    const auto* d = static_cast<const P*>(dec);
    alignas(32) std::int16_t wa[C][per_chunk * bs];
    alignas(32) float cf[C][8];
    __m256i s[2 * per_chunk * G];  // pair_sums' sums of one pass
    __m256 o[2][C];
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < C; ++c) o[h][c] = _mm256_setzero_ps();
    for (std::int64_t i0 = 0; i0 < nb; i0 += per_chunk) {
      const int m = static_cast<int>(std::min<std::int64_t>(per_chunk, nb - i0));
      for (int c = 0; c < C; ++c) {
        col_factors(a[c] + i0, m, cf[c]);
        for (int j = 0; j < m; ++j)
          for (int q = 0; q < bs / 32; ++q)
            widen32(avx2_ops::load(a[c][i0 + j].qs + 32 * q), reinterpret_cast<__m256i*>(wa[c] + j * bs + 32 * q));
      }
#pragma GCC unroll 1
      for (int c0 = 0; c0 < C; c0 += G) {
        const __m256i* w[2] = {d[2 * i0].w, d[2 * i0 + 1].w};
        const std::int16_t* col[G];
        for (int c = 0; c < G; ++c) col[c] = wa[c0 + c];
        pair_sums<G>(w, 2 * static_cast<std::ptrdiff_t>(sizeof(P) / sizeof(__m256i)), col, bs, bs / 2, m, s);
        for (int j = 0; j < m; ++j) {
          const __m256 rf0 = _mm256_load_ps(d[2 * (i0 + j)].rf), rf1 = _mm256_load_ps(d[2 * (i0 + j) + 1].rf);
#pragma GCC unroll 4
          for (int c = 0; c < G; ++c) {
            const __m256 cfc = _mm256_set1_ps(cf[c0 + c][j]);
            o[0][c0 + c] = _mm256_add_ps(o[0][c0 + c], F::value(_mm256_cvtepi32_ps(s[2 * j * G + c]), rf0, cfc));
            o[1][c0 + c] = _mm256_add_ps(o[1][c0 + c], F::value(_mm256_cvtepi32_ps(s[(2 * j + 1) * G + c]), rf1, cfc));
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < C; ++c) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, o[h][c]);
        for (int r = 0; r < 8; ++r) out[(8 * h + r) * C + c] = lanes[r];
      }
  }
};

// What dot_tile<W, avx2> adds for prompts: nothing, or rows16 of W's trait.
template <class W>
struct prompt_rows {};
template <>
struct prompt_rows<formats::q8_0> : rows16<q8_0_w> {};
template <>
struct prompt_rows<formats::q5_0> : rows16<q5_0_w> {};
template <>
struct prompt_rows<formats::iq4_nl> : rows16<iq4_nl_w> {};
template <>
struct prompt_rows<formats::iq4_xs> : rows16<iq4_xs_w> {};

}  // namespace gk::simd::avx2_wide

GK_EXACT_FP_END

#endif
