// SPDX-License-Identifier: MIT
// AVX-512 VNNI tiles of q4_K and q5_K (q8_K activations): sixteen weight rows by C
// activation columns, one weight row per 32-bit lane, as the 32-weight formats' tiles in
// avx512/dot_tile_legacy.hpp (whose row transposes this file reuses).
//
// The idea: per 64 weights (qs bytes 32c .. 32c+31 of each row) the sixteen rows' bytes are
// transposed once so that lane r of vector k holds row r's bytes 4k .. 4k+3; their low
// nibbles are sub-block 2c's codes for activation dword k, their high nibbles sub-block
// 2c+1's (q5_K adds its fifth bits, transposed once per block the same way). A column's
// activation dword is a broadcast, and eight vpdpbusd leave sub-block j's integer sum of
// all sixteen rows in one vector; vpmulld by the vector of the rows' 6-bit scales adds it
// into sum_q. The codes (0..31) are unsigned already and the q8_K bytes signed, so no
// offset is needed: a lane gains at most 4 * 31 * 128 per vpdpbusd, and a block's sum_q
// stays within 256 * 31 * 128 * 63 < 2^31, exact in any order. The mins term takes q8_K's
// bsums as they lie: dword j of bsums is (bsums[2j], bsums[2j+1]), and vpdpwssd of it
// with the rows' min j in both words of a lane adds min_j * (bsums[2j] + bsums[2j+1]).
// The block's float term, d * da * float(sum_q) - dmin * da * float(sum_m), is formed lane
// by lane in that order and added to the column's running sum block by block, as the row
// dot adds it, so every output is the row dot's bits.
//
// Shape 16 x 8: the matmul's whole tile (16 rows, an 8-column panel) in one call; the
// unpack (four 8 x 8 dword transposes, the scales) is shared by the eight columns, and a
// column's 256 weights cost 64 vpdpbusd, eight vpmulld and eight vpdpwssd. Measured in
// bench_matmul (4096 x 4096, N = 64, one thread, on a loaded 2-core share, so ranges), GFLOP/s
// against the 2 x 8 tiles it replaced (dot_tile.hpp, since removed): q4_K 126-169 ->
// 202-290, q5_K 106-170 -> 269-274.
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/avx512/dot_tile_legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_kq16_tile {

using namespace gk::simd::avx512_ops;
using avx512_legacy_tile::ahead;
using avx512_legacy_tile::rows_x4;
using avx512_legacy_tile::rows_x8;
using avx512_legacy_tile::tiled_rows;
using avx512_legacy_tile::store_rows_by_column;

inline constexpr int kRows = 16;  // weight rows per tile: one per int32 lane

// Block i of the sixteen rows, as the column loop reads it: per sub-block j the rows'
// scales (lane r: row r's scale j) and mins (lane r: row r's min j in both 16-bit words),
// and the f16 scales as floats.
struct header {
  __m512i ls[8], lm[8];
  __m512 d, dmin;
};

// The first 16 bytes of a q4_K / q5_K block are d, dmin and the 12 scale bytes: one 4 x 4
// dword transpose puts (d, dmin) and scale dwords 0, 1, 2 of row r in lane r. As
// kq::get_scale_min reads them: scales 0-3 are the low 6 bits of bytes 0-3, mins 0-3 of
// bytes 4-7; scales 4-7 are the low nibbles of bytes 8-11 with bits 6-7 of bytes 0-3 on
// top, mins 4-7 the high nibbles of bytes 8-11 with bits 6-7 of bytes 4-7 on top.
inline void header_from(const __m512i* x, header& h);
template <class B>
inline void load_header(const B* const* w, std::int64_t i, header& h) {
  const std::uint8_t* p[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r] + i);
  __m512i x[4];
  rows_x4(p, x);
  header_from(x, h);
}
// The same from a tiled group (cpu/tiled.hpp: K-quant blocks go in 4-byte units), where
// lane r of the vector at 16 * 4p is dword p of row r's block already.
template <class B>
inline void load_header(tiled_rows w, std::int64_t i, header& h) {
  const unsigned char* col = w.column<B>(i);
  const __m512i x[4] = {load(col), load(col + 64), load(col + 128), load(col + 192)};
  header_from(x, h);
}
// x[p], lane r: dword p of row r's first 16 bytes.
inline void header_from(const __m512i* x, header& h) {
  h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x[0]));  // vcvtph2ps: as to_f32 converts
  h.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x[0], 16)));
  const __m512i low6 = _mm512_set1_epi8(0x3f), low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
  // bytes t of each dword: scales t, 4 + t; mins t, 4 + t
  const __m512i s03 = _mm512_and_si512(x[1], low6), m03 = _mm512_and_si512(x[2], low6);
  const __m512i s47 = _mm512_or_si512(_mm512_and_si512(x[3], low4), _mm512_and_si512(_mm512_srli_epi32(x[1], 2), top2));
  const __m512i m47 =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(x[3], 4), low4), _mm512_and_si512(_mm512_srli_epi32(x[2], 2), top2));
  // pshufb within 128-bit lanes: dword q of a lane starts at byte 4q; 0x80 writes zero
  const __m512i base = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    const __m512i one = _mm512_add_epi8(base, _mm512_set1_epi32(static_cast<int>(0x80808000u) | t));
    const __m512i two = _mm512_add_epi8(base, _mm512_set1_epi32(static_cast<int>(0x80008000u) | t << 16 | t));
    h.ls[t] = _mm512_shuffle_epi8(s03, one);
    h.ls[4 + t] = _mm512_shuffle_epi8(s47, one);
    h.lm[t] = _mm512_shuffle_epi8(m03, two);
    h.lm[4 + t] = _mm512_shuffle_epi8(m47, two);
  }
}

// q4_K: byte 32c + l of qs holds weight 64c + l (sub-block 2c) in its low nibble and
// 64c + 32 + l (sub-block 2c+1) in its high one. From x[k], lane r: row r's qs bytes
// 32c + 4k .. +3, codes(x, e, c, h, q) gives q[k], lane r: row r's four codes of
// sub-block 2c + h that meet activation dword k of it.
struct q4_K {
  using W = formats::q4_K;
  struct extra {};
  template <class Rows>
  static void prepare(Rows, std::int64_t, extra&) {}
  static void codes(const __m512i* x, const extra&, int, int h, __m512i* q) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) q[k] = _mm512_and_si512(h ? _mm512_srli_epi16(x[k], 4) : x[k], low4);
  }
};

// q5_K: q4_K's low four bits, and bit 2c + h of qh[l] as bit 4 of weight 64c + 32h + l's
// code; qh's 32 bytes are transposed once per block as qs's are.
struct q5_K {
  using W = formats::q5_K;
  struct extra {
    __m512i qh[8];  // lane r: qh dword k of row r
  };
  static void prepare(const W::block* const* w, std::int64_t i, extra& e) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qh;
    rows_x8(p, e.qh);
  }
  static void prepare(tiled_rows w, std::int64_t i, extra& e) {
    const unsigned char* col = w.column<W::block>(i) + kRows * offsetof(W::block, qh);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) e.qh[k] = load(col + 64 * k);
  }
  static void codes(const __m512i* x, const extra& e, int c, int h, __m512i* q) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
    const int b = 2 * c + h;  // the qh bit of these codes, moved to bit 4 of the same byte: a
                              // 16-bit shift moves every byte's bit there, the mask keeps it
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i f = b <= 4 ? _mm512_slli_epi16(e.qh[k], 4 - b) : _mm512_srli_epi16(e.qh[k], b - 4);
      q[k] = _mm512_or_si512(_mm512_and_si512(h ? _mm512_srli_epi16(x[k], 4) : x[k], low4), _mm512_and_si512(f, bit4));
    }
  }
};

// out[c][r] = the row dot of w[r] and a[c], r < 16, c < C.
// w: the sixteen rows' pointers, or a tiled group (tiled_rows).
template <class F, int C, class Rows>
inline void tile(Rows w, const formats::q8_K::block* const* a, std::int64_t n, float (*out)[kRows],
                 const ahead& next = {}) {
  __m512 sum[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) sum[c] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    next.block(i);
    header h;
    load_header<typename F::W::block>(w, i, h);
    typename F::extra e;
    F::prepare(w, i, e);
    __m512i sq[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) sq[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {  // qs bytes 32g .. 32g+31: sub-blocks 2g (low nibbles), 2g+1
      __m512i x[8];
      if constexpr (std::is_same_v<Rows, tiled_rows>) {
        const unsigned char* col = w.template column<typename F::W::block>(i) + kRows * offsetof(typename F::W::block, qs);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) x[k] = load(col + 512 * g + 64 * k);
      } else {
        const std::uint8_t* p[kRows];
#pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * g;
        rows_x8(p, x);
      }
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {
        __m512i q[8];
        F::codes(x, e, g, s, q);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const std::int8_t* y = a[c][i].qs + 64 * g + 32 * s;
          __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            std::int32_t yk;
            std::memcpy(&yk, y + 4 * k, 4);
            acc = _mm512_dpbusd_epi32(acc, q[k], _mm512_set1_epi32(yk));
          }
          sq[c] = _mm512_add_epi32(sq[c], _mm512_mullo_epi32(acc, h.ls[2 * g + s]));
        }
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512i sm = _mm512_setzero_si512();  // int16 bsums times mins <= 63: within int32
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        std::int32_t b;
        std::memcpy(&b, a[c][i].bsums + 2 * j, 4);
        sm = _mm512_dpwssd_epi32(sm, h.lm[j], _mm512_set1_epi32(b));
      }
      const __m512 da = _mm512_set1_ps(a[c][i].d);
      // d * da * float(sum_q) - dmin * da * float(sum_m)
      const __m512 t = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(h.d, da), _mm512_cvtepi32_ps(sq[c])),
                                     _mm512_mul_ps(_mm512_mul_ps(h.dmin, da), _mm512_cvtepi32_ps(sm)));
      sum[c] = _mm512_add_ps(sum[c], t);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out[c], sum[c]);
}

// Any R x C with R <= 16: rows past R repeat row 0 (their lanes are computed and
// dropped), columns go eight at a time, then one at a time. A one-column call prefetches
// `next` as it goes.
template <class F>
struct runner {
  using wblock = typename F::W::block;
  template <int R, int C>
  static void run(const wblock* const* w, const formats::q8_K::block* const* a, std::int64_t n, float* out,
                  const ahead& next = {}) {
    static_assert(R >= 1 && R <= kRows, "a q4_K / q5_K tile holds at most 16 weight rows");
    const wblock* rows[kRows];
    for (int r = 0; r < kRows; ++r) rows[r] = w[r < R ? r : 0];
    constexpr int cb = C < 8 ? C : 8;
    float o[cb][kRows];
    for (int c0 = 0; c0 < C; c0 += cb) {
      if (C - c0 >= cb) {
        avx512_kq16_tile::tile<F, cb>(rows, a + c0, n, o, C == 1 ? next : ahead{});  // not ADL's legacy tile
        for (int c = 0; c < cb; ++c)
          for (int r = 0; r < R; ++r) out[r * C + c0 + c] = o[c][r];
      } else {
        for (int c = c0; c < C; ++c) {
          tile<F, 1>(rows, a + c, n, o);
          for (int r = 0; r < R; ++r) out[r * C + c] = o[0][r];
        }
      }
    }
  }
  // The sixteen rows of a tiled group (cpu/tiled.hpp), C columns (cpu/matmul.hpp hands a
  // group 8, 4, 2 or 1 at a time).
  template <int C>
  static void run_tiled(const void* group, const formats::q8_K::block* const* a, std::int64_t n, float* out,
                        const ahead& next = {}) {
    static_assert(C >= 1 && C <= 8);
    float o[C][kRows];
    avx512_kq16_tile::tile<F, C>(tiled_rows{static_cast<const unsigned char*>(group)}, a, n, o,
                                  C == 1 ? next : ahead{});
    store_rows_by_column<C>(o, out);
  }
};

}  // namespace gk::simd::avx512_kq16_tile

namespace gk {

// path: as the legacy tiles' (avx512/dot_tile_legacy.hpp).
#define GK_AVX512_KQ16_TILE(fmt, path)                                                                             \
  template <>                                                                                                      \
  struct dot_tile<formats::fmt, simd::avx512> {                                                                    \
    static constexpr bool specialised = true, decode = path == decode_path::tile;                                  \
    static constexpr bool decode_on_intel = path == decode_path::tile_on_intel;                                    \
    static constexpr bool tiled = true; /* reads cpu/tiled.hpp's groups: run_tiled */                              \
    static constexpr int rows = simd::avx512_kq16_tile::kRows, cols = 8;                                            \
    template <int R, int C>                                                                                        \
    static void run(const formats::fmt::block* const* w, const formats::q8_K::block* const* a, std::int64_t n,     \
                    float* out, const void* next = nullptr, std::size_t next_bytes = 0) {                          \
      simd::avx512_kq16_tile::runner<simd::avx512_kq16_tile::fmt>::run<R, C>(w, a, n, out,                         \
                                                                             {next, next_bytes, n / qk_k});        \
    }                                                                                                              \
    template <int C>                                                                                               \
    static void run_tiled(const void* group, const formats::q8_K::block* const* a, std::int64_t n, float* out,     \
                          const void* next = nullptr, std::size_t next_bytes = 0) {                                \
      simd::avx512_kq16_tile::runner<simd::avx512_kq16_tile::fmt>::run_tiled<C>(group, a, n, out,                 \
                                                                                {next, next_bytes, n / qk_k});     \
    }                                                                                                              \
  };

GK_AVX512_KQ16_TILE(q4_K, decode_path::tile)
GK_AVX512_KQ16_TILE(q5_K, decode_path::tile_on_intel)  // as q8_0's (see cpu/matmul.hpp)

#undef GK_AVX512_KQ16_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
