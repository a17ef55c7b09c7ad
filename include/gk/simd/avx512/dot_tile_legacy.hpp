// SPDX-License-Identifier: MIT
// AVX-512 VNNI tiles of the small-block formats q8_0, q4_0, q5_0, q4_1, q5_1, iq4_nl, mxfp4,
// nvfp4, q1_0, q2_0 (q8_0 / q8_1 activations) and tq1_0, tq2_0, iq4_xs (q8_K): sixteen
// weight rows by C activation columns, one weight row per 32-bit lane.
//
// The idea: for one block index, the sixteen rows' weights are unpacked into vectors in
// which vector k holds, in lane r, the four weights of row r that meet activation dword k
// (bytes 4k .. 4k+3). A column's activation dword is then the same for every lane, a
// broadcast, and eight vpdpbusd leave a 32-weight integer sum of all sixteen rows in one
// vector: no horizontal reduction, no transpose of results. The unpack (a 4 x 4 or 8 x 8
// dword transpose per block) is shared by the C columns; a column's 32 weights then cost
// eight vpdpbusd and the float term, about thirteen instructions for sixteen dots.
//
// Integer part, exact for every byte: vpdpbusd multiplies unsigned by signed bytes (four
// products into int32, none saturating), so weights become unsigned codes u = w + off
// (q8_0: w ^ 0x80 = w + 128; q4_0, q5_0: the stored code, off 8 and 16; iq4_nl, iq4_xs:
// codebook value + 128; fp4: doubled e2m1 value + 12; q1_0: 2 * bit, q2_0 and the
// ternaries: the code, off 1) and each integer sum starts at -off * sum(a) over its
// activation bytes, computed once per column and block. q4_1 / q5_1 codes are unsigned
// already; their definitions read sum(a) as such. iq4_xs: each 32-weight group's sum
// times the group's integer scale, per lane, the products summed as integers as its
// definition does. Float part: each term is formed lane-wise with the definition's
// operations in its order (nvfp4, q1_0, q2_0: a block's part terms summed from 0 in
// part order first), and added to the column's running sum block by block, as the
// definition's sum runs; so every output is the row dot's bits.
//
// Shape 16 x 8: the matmul's whole tile (16 rows, an 8-column panel) in one call. Measured
// one thread, 4096-wide rows, 64 weight rows by 8 columns (L2-resident), GFLOP/s:
// q4_0 / q8_0 / q5_0 / mxfp4 rows 57 / 62 / 40 / 43, 16 x 8 about 360 / 355 / 315 / 370,
// 16 x 4 290 / 260 / 220 / 285. The layouts tried first, one block per lane (a reduction
// and a 16 x 16 transpose per dot), reached 130 / 140 for q5_0 / mxfp4 at 2 x 8 and
// 185 / 215 at 8 x 8; iq4_nl's and iq4_xs's 2 x 8 tiles of that kind 137 and 211, where
// iq4_xs at 16 x 8 runs about 310.
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/formats/ternary.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_legacy_tile {

using namespace gk::simd::avx512_ops;

inline constexpr int kRows = 16;  // weight rows per tile: one per int32 lane

// simd::ahead (simd/prefetch.hpp): the weight bytes a one-column tile prefetches as it goes,
// into L2 (T1), not L1: the next task's 16 rows (q4_0 K 4096: 36 KiB) fill most of a 48 KiB L1
// while this task's rows are still read from it. Intel Xeon (Emerald Rapids, KVM),
// bench_matmul N 1, CPU_TILED, one / two threads, two runs each, T0 -> T1: q4_0 79-82 /
// 144-156 -> 88 / 165 GFLOP/s (the reference's AMX 90-96 / 174-183), q4_K 58-59 / 110-137
// -> 80-82 / 150-155, q8_0 42-43 / 80-83 -> 44-46 / 87-89; from >= 1 GiB, one thread,
// GB/s: q4_0 10.4-11.4 -> 14.1-14.2, q4_K 10.3-11.9 -> 13.6-13.7. No prefetch at all: q4_0
// 9.0-9.3 from memory. Not measured on AMD (Zen) this time, where T0 was chosen.
using gk::simd::ahead;

// Lane r of d[p] is dword p of the 16 bytes at q[r], r = 0..15: four rows to a vector
// (rows j, 4 + j, 8 + j, 12 + j in its 128-bit lanes), then a 4 x 4 dword transpose in
// each 128-bit lane.
inline void rows_x4(const std::uint8_t* const* q, __m512i* d) {
  __m512i x[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    x[j] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(load128(q[j])),
                                                                    load128(q[4 + j]), 1),
                                                 load128(q[8 + j]), 2),
                              load128(q[12 + j]), 3);
  const __m512i a0 = _mm512_unpacklo_epi32(x[0], x[1]), a1 = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(x[2], x[3]), a3 = _mm512_unpackhi_epi32(x[2], x[3]);
  d[0] = _mm512_unpacklo_epi64(a0, a2);
  d[1] = _mm512_unpackhi_epi64(a0, a2);
  d[2] = _mm512_unpacklo_epi64(a1, a3);
  d[3] = _mm512_unpackhi_epi64(a1, a3);
}

// Lane r of d[k] is dword k of the 32 bytes at q[r]: rows m and 4 + m (8 + m and 12 + m)
// share a vector, then an 8 x 8 dword transpose in each 256-bit half (by dwords, by
// qwords, by 128-bit lanes).
inline void rows_x8(const std::uint8_t* const* q, __m512i* d) {
  __m512i v[8], x[8], y[8];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    v[m] = load2x32(q[m], q[4 + m]);
    v[4 + m] = load2x32(q[8 + m], q[12 + m]);
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    x[2 * p] = _mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]);
    x[2 * p + 1] = _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // y[4h + j]: lane-local dword j of v[4h] .. v[4h + 3]
    y[4 * h + 0] = _mm512_unpacklo_epi64(x[4 * h], x[4 * h + 2]);
    y[4 * h + 1] = _mm512_unpackhi_epi64(x[4 * h], x[4 * h + 2]);
    y[4 * h + 2] = _mm512_unpacklo_epi64(x[4 * h + 1], x[4 * h + 3]);
    y[4 * h + 3] = _mm512_unpackhi_epi64(x[4 * h + 1], x[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    d[j] = _mm512_shuffle_i32x4(y[j], y[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
    d[4 + j] = _mm512_shuffle_i32x4(y[j], y[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// The f16 at byte offset `at` of block i of the sixteen rows, as floats (vcvtph2ps: as
// to_f32 converts, NaN payloads included).
template <std::size_t at, class B>
inline __m512 f16_rows(const B* const* w, std::int64_t i) {
  auto h = [&](int r) {
    std::uint16_t v;
    std::memcpy(&v, reinterpret_cast<const unsigned char*>(w[r] + i) + at, 2);
    return static_cast<short>(v);
  };
  return _mm512_cvtph_ps(_mm256_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7), h(8), h(9), h(10), h(11),
                                           h(12), h(13), h(14), h(15)));
}

// The codes of q4-packed block i of the sixteen rows (byte j: weight j in its low nibble,
// j + 16 in its high one): activation dword k < 4 meets low nibbles, k >= 4 high ones.
template <class B>
inline void nibbles(const B* const* w, std::int64_t i, __m512i* q) {
  const std::uint8_t* p[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
  __m512i d[4];
  rows_x4(p, d);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    q[k] = _mm512_and_si512(d[k], low4);
    q[4 + k] = _mm512_and_si512(_mm512_srli_epi16(d[k], 4), low4);
  }
}

// o[c][r] (a tile's output) to out[r * C + c] (the runners' row-major order).
template <int C>
inline void store_rows_by_column(const float (*o)[kRows], float* out) {
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < kRows; ++r) out[r * C + c] = o[c][r];
}

// A group of sixteen rows stored tiled (cpu/tiled.hpp): block column i is 16 x sizeof(B)
// bytes at group + 16 i sizeof(B), each field of the block before qs as sixteen copies
// (row r's at 16 offset + 2r), then qs dword k of the sixteen rows as one vector.
struct tiled_rows {
  const unsigned char* group;
  template <class B>
  const unsigned char* column(std::int64_t i) const {
    return group + static_cast<std::size_t>(i) * kRows * sizeof(B);
  }
};
// The f16 field at byte offset `at` of the sixteen rows of a tiled block column.
template <std::size_t at>
inline __m512 f16_tiled(const unsigned char* col) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + kRows * at)));
}
// Vector k: lane r is qs dword k of row r, qs at byte offset `at` of the block.
template <std::size_t at>
inline __m512i qs_tiled(const unsigned char* col, int k) {
  return load(col + kRows * at + 64 * k);
}
// nibbles(), from a tiled block column.
template <std::size_t at>
inline void nibbles_tiled(const unsigned char* col, __m512i* q) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i d = qs_tiled<at>(col, k);
    q[k] = _mm512_and_si512(d, low4);
    q[4 + k] = _mm512_and_si512(_mm512_srli_epi16(d, 4), low4);
  }
}

// kvalues_iq4nl + 128 (1 .. 241) as a pshufb table: iq4_nl's and iq4_xs's unsigned codes.
inline __m512i nl4_table() {
  static constexpr auto biased = [] {
    std::array<std::uint8_t, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::uint8_t>(formats::nl4::values[c] + 128);
    return t;
  }();
  return _mm512_broadcast_i32x4(load128(biased.data()));
}

// The 4 bytes at byte offset `at` of block i of the sixteen rows, lane r.
template <std::size_t at, class B>
inline __m512i dword_rows(const B* const* w, std::int64_t i) {
  auto g = [&](int r) {
    std::int32_t v;
    std::memcpy(&v, reinterpret_cast<const unsigned char*>(w[r] + i) + at, 4);
    return v;
  };
  return _mm512_setr_epi32(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7), g(8), g(9), g(10), g(11), g(12), g(13),
                           g(14), g(15));
}

// Byte `byte` of each dword of x in all four bytes of that dword (pshufb indexes within a
// 128-bit lane, where dword j starts at byte 4j).
inline __m512i spread_byte(__m512i x, int byte) {
  return _mm512_shuffle_epi8(x, _mm512_add_epi8(_mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0),
                                                _mm512_set1_epi8(static_cast<char>(byte))));
}
// Of bytes spread so: byte b of each dword where its bit first + b is set (first 0 or 4).
inline __mmask64 nibble_bits(__m512i spread, int first) {
  return _mm512_test_epi8_mask(spread, _mm512_set1_epi32(first ? static_cast<int>(0x80402010u) : 0x08040201));
}

// q5_0 / q5_1: 16 added to the codes whose fifth bit is set (bit j of the little-endian
// word qh is weight j's): byte b of dword k is weight 4k + b, bit 4 (k % 2) + b of qh's
// byte k / 2.
// qh: lane r row r's qh word.
inline void fifth_bits(__m512i qh, __m512i* q) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    q[k] = _mm512_mask_add_epi8(q[k], nibble_bits(spread_byte(qh, k / 2), 4 * (k % 2)), q[k], _mm512_set1_epi8(16));
}
template <class B>
inline void fifth_bits(const B* const* w, std::int64_t i, __m512i* q) {
  fifth_bits(dword_rows<offsetof(B, qh)>(w, i), q);
}
// The qh words of a tiled block column (a field before qs: two 2-byte units, each as
// sixteen rows' copies), lane r row r's.
template <std::size_t at>
inline __m512i qh_tiled(const unsigned char* col) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + kRows * at)));
  const __m512i hi =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + kRows * (at + 2))));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// ---- the formats ------------------------------------------------------------------------
// Each says how block i of the sixteen rows becomes unsigned codes u = w + off, in
// `parts` groups of `part_dwords` vectors (a part is one integer sum of the definition:
// the whole block, or one activation block, or one 16-weight sub-block), vector k of a
// part meeting activation dword k of it; and forms the definition's float terms.

// P = 1: the block's one integer sum, one float term per block.
template <class Fmt, int offset>
struct one_part {
  using W = Fmt;
  static constexpr int off = offset, parts = 1, part_dwords = 8;
  static constexpr bool affine = false;
};

struct q8_0 : one_part<formats::q8_0, 128> {
  struct rows {
    __m512i q[1][8];
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r][i].qs);
    rows_x8(p, u.q[0]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.q[0][k] = _mm512_xor_si512(u.q[0][k], _mm512_set1_epi8(static_cast<char>(0x80)));
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      u.q[0][k] = _mm512_xor_si512(qs_tiled<offsetof(W::block, qs)>(col, k), _mm512_set1_epi8(static_cast<char>(0x80)));
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  // float(s) * (dw * da)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(s, _mm512_mul_ps(u.d, da)); }
};

struct q4_0 : one_part<formats::q4_0, 8> {
  struct rows {
    __m512i q[1][8];
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    nibbles(w, i, u.q[0]);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  // float(s) * dw * da
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(_mm512_mul_ps(s, u.d), da); }
};

struct q5_0 : one_part<formats::q5_0, 16> {
  struct rows {
    __m512i q[1][8];
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    nibbles(w, i, u.q[0]);
    fifth_bits(w, i, u.q[0]);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
    fifth_bits(qh_tiled<offsetof(W::block, qh)>(col), u.q[0]);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  // dw * da * float(s)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(_mm512_mul_ps(u.d, da), s); }
};

// q4_1 / q5_1: codes as they are, dw * da * float(s) + mw * (da * float(sum a))
template <class Fmt>
struct affine_part : one_part<Fmt, 0> {
  static constexpr bool affine = true;
  struct rows {
    __m512i q[1][8];
    __m512 d, m;
  };
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512 dsa) {
    return _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, da), s), _mm512_mul_ps(u.m, dsa));
  }
};

struct q4_1 : affine_part<formats::q4_1> {
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    nibbles(w, i, u.q[0]);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
    u.m = f16_rows<offsetof(W::block, m)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
    u.m = f16_tiled<offsetof(W::block, m)>(col);
  }
};

struct q5_1 : affine_part<formats::q5_1> {
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    nibbles(w, i, u.q[0]);
    fifth_bits(w, i, u.q[0]);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
    u.m = f16_rows<offsetof(W::block, m)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
    fifth_bits(qh_tiled<offsetof(W::block, qh)>(col), u.q[0]);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
    u.m = f16_tiled<offsetof(W::block, m)>(col);
  }
};

// iq4_nl: the code indexes kvalues_iq4nl (-127 .. 113); u = value + 128 (1 .. 241) by a
// pshufb on the biased codebook. float(s) * (dw * da)
struct iq4_nl : one_part<formats::iq4_nl, 128> {
  struct rows {
    __m512i q[1][8];
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const __m512i table = nl4_table();
    nibbles(w, i, u.q[0]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.q[0][k] = _mm512_shuffle_epi8(table, u.q[0][k]);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    const __m512i table = nl4_table();
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.q[0][k] = _mm512_shuffle_epi8(table, u.q[0][k]);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(s, _mm512_mul_ps(u.d, da)); }
};

// doubled e2m1 values + 12 (0 .. 24) as a pshufb table, from the format's own fp4_doubled
inline __m512i fp4_codes() {
  static constexpr auto table = [] {
    std::array<std::uint8_t, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::uint8_t>(formats::detail::fp4_doubled(static_cast<std::uint8_t>(c)) + 12);
    return t;
  }();
  return _mm512_broadcast_i32x4(load128(table.data()));
}

struct mxfp4 : one_part<formats::mxfp4, 12> {
  struct rows {
    __m512i q[1][8];
    __m512 h;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    nibbles(w, i, u.q[0]);
    alignas(64) int e[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) e[r] = w[r][i].e;
    from(_mm512_load_si512(e), u);
  }
  // a tiled block column: the sixteen e bytes, then qs in dwords
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
    nibbles_tiled<offsetof(W::block, qs)>(col, u.q[0]);
    from(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col))), u);
  }
  // u.q[0]: the codes' nibbles; ev: lane r row r's e
  static void from(__m512i ev, rows& u) {
    const __m512i table = fp4_codes();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.q[0][k] = _mm512_shuffle_epi8(table, u.q[0][k]);
    // e8m0_to_f32_half: the bits 0x00200000 << e for e < 2, else (e - 1) << 23
    const __m512i one = _mm512_set1_epi32(1);
    u.h = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(ev, one),
                                                     _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), ev),
                                                     _mm512_slli_epi32(_mm512_sub_epi32(ev, one), 23)));
  }
  // da * h * float(s)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(_mm512_mul_ps(da, u.h), s); }
};

// P > 1: the block's value is 0 + part term 0 + part term 1 + ..., in part order, then
// finished (q1_0, q2_0: times dw).

// nvfp4: four 16-weight sub-blocks (two per activation block), each with a ue4m3 scale;
// byte 8k + j holds sub-block k's weight j (low nibble) and j + 8 (high)
struct nvfp4 {
  using W = formats::nvfp4;
  static constexpr int off = 12, parts = 4, part_dwords = 4;
  static constexpr bool affine = false;
  struct rows {
    __m512i q[4][4];
    __m512 h[4];
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    __m512i e[8];
    rows_x8(p, e);
    from(e, dword_rows<offsetof(W::block, d)>(w, i), u);
  }
  // a tiled block column: the four scale bytes as one dword unit, then qs in dwords
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    static_assert(offsetof(W::block, d) == 0 && sizeof(W::block::d) == 4 && offsetof(W::block, qs) == 4);
    const unsigned char* col = w.column<W::block>(i);
    __m512i e[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) e[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
    from(e, _mm512_loadu_si512(col), u);
  }
  // e[k]: lane r row r's qs dword k; s4: lane r row r's four scale bytes
  static void from(const __m512i* e, __m512i s4, rows& u) {
    const __m512i table = fp4_codes(), low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {  // weights 4j .. 4j+3 and 8 + 4j .. 8 + 4j+3
        u.q[k][j] = _mm512_shuffle_epi8(table, _mm512_and_si512(e[2 * k + j], low4));
        u.q[k][2 + j] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(e[2 * k + j], 4), low4));
      }
    // half_scale = ue4m3_to_f32(s) * 0.5f: 0 for s = 0 or 0x7f; exponent field 0: the
    // mantissa * 2^-9; else the bits ((e + 120) << 23) | (m << 20)
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i s = _mm512_and_si512(_mm512_srli_epi32(s4, 8 * k), _mm512_set1_epi32(0xff));
      const __m512i ex = _mm512_and_si512(_mm512_srli_epi32(s, 3), _mm512_set1_epi32(0xf));
      const __m512i mn = _mm512_and_si512(s, _mm512_set1_epi32(7));
      const __m512i normal = _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(ex, _mm512_set1_epi32(120)), 23),
                                             _mm512_slli_epi32(mn, 20));
      const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mn), _mm512_castsi512_ps(_mm512_set1_epi32(0x3b000000)));
      __m512 v = _mm512_mask_blend_ps(_mm512_test_epi32_mask(ex, ex), sub, _mm512_castsi512_ps(normal));
      v = _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(0x7f)), v, _mm512_setzero_ps());
      u.h[k] = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
    }
  }
  // da * h * float(s)
  static __m512 part_term(__m512 s, const rows& u, int k, __m512 da) { return _mm512_mul_ps(_mm512_mul_ps(da, u.h[k]), s); }
  static __m512 finish(__m512 b, const rows&) { return b; }
};

// q1_0 / q2_0: one part per activation block, da * float(s) each, the sum times dw
template <class Fmt>
struct multi_part {
  using W = Fmt;
  static constexpr int off = 1, parts = W::block_size / 32, part_dwords = 8;
  static constexpr bool affine = false;
  struct rows {
    __m512i q[parts][8];
    __m512 d;
  };
  static __m512 part_term(__m512 s, const rows&, int, __m512 da) { return _mm512_mul_ps(da, s); }
  static __m512 finish(__m512 b, const rows& u) { return _mm512_mul_ps(u.d, b); }
};

// q1_0: bit j % 8 of qs[j / 8] set: w = +1, else -1; u = 2 * bit, off 1. Activation
// block k reads the little-endian word qs[4k ..]: its dword m is bits 4m .. 4m+3.
struct q1_0 : multi_part<formats::q1_0> {
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    __m512i d[4];
    rows_x4(p, d);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m)
        u.q[k][m] = _mm512_maskz_mov_epi8(nibble_bits(spread_byte(d[k], m / 2), 4 * (m % 2)), _mm512_set1_epi8(2));
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
};

// q2_0: bits 2 (j % 4) .. +1 of qs[j / 4] are weight j's code c, w = c - 1 (off 1).
// Activation block k reads qs[8k .. 8k+7]: its dword m is the four codes of byte 8k + m.
struct q2_0 : multi_part<formats::q2_0> {
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    __m512i d[4];
    rows_x4(p, d);
    const __m512i lo = _mm512_set1_epi32(0x40100401), hi = _mm512_set1_epi32(static_cast<int>(0x80200802u));
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k)
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512i x = spread_byte(d[2 * k + m / 4], m % 4);  // byte b: code b at bits 2b, 2b+1
        const __m512i c = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(x, lo), _mm512_set1_epi8(1));
        u.q[k][m] = _mm512_mask_add_epi8(c, _mm512_test_epi8_mask(x, hi), c, _mm512_set1_epi8(2));
      }
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
};

// tq2_0 / tq1_0 (q8_K activations): the block's one integer sum over 256 weights, 64
// activation dwords, in eight chunks; float(s) * (dw * da) and float(s) * (da * dw).
// The codes are unpacked chunk by chunk from each row's bytes put in lanes once per block.

// tq2_0: weight 128h + 32k + m is bits 2k .. 2k+1 of qs[32h + m] (code c, w = c - 1):
// activation dword 32h + 8k + j is field k of qs dword 8h + j, the same field in each byte.
struct tq2_0 {
  using W = formats::tq2_0;
  static constexpr int off = 1, parts = 1, part_dwords = 64;
  static constexpr bool affine = false;
  struct rows {
    __m512i x[16];  // lane r: qs dword p of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * h;
      rows_x8(p, u.x + 8 * h);
    }
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // tiled (cpu/tiled.hpp): the qs dwords as 16 vectors, then the sixteen scales
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) u.x[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // activation dwords 8j .. 8j+7
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      q[k] = _mm512_and_si512(_mm512_srli_epi16(u.x[8 * (j / 4) + k], 2 * (j % 4)), _mm512_set1_epi8(3));
  }
  // float(s) * (da * dw)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(s, _mm512_mul_ps(da, u.d)); }
};

// tq1_0: trit k of a byte b is floor(3 x / 256) for x = b * 3^k mod 256 (formats'
// detail::trit), here 1 for x >= 86 and 2 for x >= 171; w = t - 1. Activation dword J:
// J < 40: trit J / 8 of qs dword J % 8; J < 60: trit (J - 40) / 4 of qs dword
// 8 + (J - 40) % 4; else trit J - 60 of the qh word.
struct tq1_0 {
  using W = formats::tq1_0;
  static constexpr int off = 1, parts = 1, part_dwords = 64;
  static constexpr bool affine = false;
  struct rows {
    __m512i x[13];  // lane r: qs dwords 0 .. 11 of row r, then its qh word
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    rows_x8(p, u.x);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32;
    rows_x4(p, u.x + 8);
    u.x[12] = dword_rows<offsetof(W::block, qh)>(w, i);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // tiled (cpu/tiled.hpp): qs dwords 0 .. 11 and the qh word (dword 12) as 13 vectors, then
  // the sixteen scales
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    static_assert(offsetof(W::block, qh) == offsetof(W::block, qs) + 48);
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 13
    for (int k = 0; k < 13; ++k) u.x[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static __m512i trit(__m512i b, int k) {
    for (int e = 0; e < k; ++e) b = _mm512_add_epi8(b, _mm512_add_epi8(b, b));  // * 3, mod 256
    const __m512i one = _mm512_set1_epi8(1);
    const __m512i t = _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(b, _mm512_set1_epi8(86)), one);
    return _mm512_mask_add_epi8(t, _mm512_cmpge_epu8_mask(b, _mm512_set1_epi8(static_cast<char>(171))), t, one);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // activation dwords 8j .. 8j+7
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const int J = 8 * j + k;
      q[k] = J < 40 ? trit(u.x[J % 8], J / 8) : J < 60 ? trit(u.x[8 + (J - 40) % 4], (J - 40) / 4) : trit(u.x[12], J - 60);
    }
  }
  // float(s) * (dw * da)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(s, _mm512_mul_ps(u.d, da)); }
};

// iq4_xs (q8_K): eight 32-weight groups, group g's codes the 16 bytes qs[16g ..] packed
// as iq4_nl's, u = value + 128; the group's integer sum times its integer scale ls - 32
// (per lane, vpmulld), the eight products summed as integers as the definition does (all
// exact int32); then dw * da * float(total).
struct iq4_xs {
  using W = formats::iq4_xs;
  static constexpr int off = 128, parts = 1, part_dwords = 64, groups = 8;
  static constexpr bool affine = false;
  struct rows {
    const std::uint8_t* p[kRows];
    const unsigned char* col = nullptr;  // a tiled block column (cpu/tiled.hpp), else p
    __m512i sc[8];  // group scales ls - 32, lane r
    __m512i table;
    __m512 d;
  };
  // ls of group g: bits 4g .. 4g+3 of the scales_l dword, bits 2g, 2g+1 of scales_h on top
  static void scales(__m512i lo, __m512i hi, rows& u) {
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g)
      u.sc[g] = _mm512_sub_epi32(
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(lo, 4 * g), _mm512_set1_epi32(0xf)),
                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hi, 2 * g), _mm512_set1_epi32(3)), 4)),
          _mm512_set1_epi32(32));
  }
  // tiled: the block in 4-byte units, (d, scales_h) the first, scales_l the second
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    u.table = nl4_table();
    u.col = w.column<W::block>(i);
    const __m512i dh = avx512_ops::load(u.col);
    scales(avx512_ops::load(u.col + kRows * offsetof(W::block, scales_l)), _mm512_srli_epi32(dh, 16), u);
    u.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh));  // vcvtph2ps: as to_f32 converts
  }
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    u.table = nl4_table();
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) u.p[r] = w[r][i].qs;
    scales(dword_rows<offsetof(W::block, scales_l)>(w, i), _mm512_srli_epi32(dword_rows<offsetof(W::block, d)>(w, i), 16),
           u);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // group j: activation dwords 8j .. 8j+7
    __m512i d[4];
    if (u.col) {  // qs dword 4j + k of the sixteen rows
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) d[k] = qs_tiled<offsetof(W::block, qs)>(u.col, 4 * j + k);
    } else {
      const std::uint8_t* p[kRows];
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = u.p[r] + 16 * j;
      rows_x4(p, d);
    }
    const __m512i low4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm512_shuffle_epi8(u.table, _mm512_and_si512(d[k], low4));
      q[4 + k] = _mm512_shuffle_epi8(u.table, _mm512_and_si512(_mm512_srli_epi16(d[k], 4), low4));
    }
  }
  static __m512i scale(const rows& u, int j) { return u.sc[j]; }
  // dw * da * float(total)
  static __m512 term(__m512 s, const rows& u, __m512 da, __m512) { return _mm512_mul_ps(_mm512_mul_ps(u.d, da), s); }
};

// ---- the tile ----------------------------------------------------------------------------

// Facts of format F's parts: activation blocks per weight block, parts per activation
// block, and the bytes of a part.
// Integer groups of a one-part format whose chunks carry per-lane integer scales (1: none).
template <class F>
constexpr int int_groups() {
  if constexpr (requires { F::groups; })
    return F::groups;
  else
    return 1;
}

template <class F>
struct part_layout {
  using A = typename F::W::dot_type;
  static constexpr int per = F::W::block_size / A::block_size;
  static constexpr int halves = F::parts / per;
  static constexpr int bytes = A::block_size / halves;
};

// -off * (the sum of the bytes of each of the G groups of 256 / G activations of block b):
// dpbusd by ones gives four-byte sums, then a transpose-and-add (the sums of qs itself, not
// q8_K's bsums: the definition reads the codes). Shared with dot_tile_iq16.hpp.
template <int G>
inline void group_starts(const formats::q8_K::block& b, int off, std::int32_t* start) {
  static_assert(G == 8 || G == 16);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i v[4];  // v[k]: four-byte sums of bytes 64k .. 64k+63, lane 4q + t: bytes 64k + 16q + 4t ..
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, load(b.qs + 64 * k));
  const __m512i x0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i x1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));  // lane 4q + k: 16-byte group 4k + q
  t = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), t);
  t = _mm512_mullo_epi32(t, _mm512_set1_epi32(-off));
  if constexpr (G == 16) {
    _mm512_storeu_si512(start, t);
  } else {  // pairs of 16-byte groups
    const __m512i pairs = _mm512_add_epi32(t, _mm512_srli_epi64(t, 32));  // even lanes
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(start), _mm512_cvtepi64_epi32(pairs));
  }
}

// Per column, for the activation blocks i0 .. i0+m-1 (m <= 16): each block's da, and per
// part -off * its byte sum, and for the affine formats da * float(byte sum). Sums are
// exact int32.
template <class F, int C>
struct column_terms {
  using L = part_layout<F>;
  alignas(64) float da[C][16];
  alignas(64) float dsa[C][16];
  static constexpr int G = int_groups<F>();
  alignas(64) std::int32_t start[C][G > 2 ? 16 * G : 32];  // G > 1: per block and group

  void fill(const typename F::W::dot_type::block* const* a, std::int64_t i0, int m) {
    using ablock = typename F::W::dot_type::block;
    for (int c = 0; c < C; ++c) {
      const ablock* y = a[c] + i0;
      if constexpr (L::A::block_size == qk_k) {  // q8_K: float d, one part per block
        for (int l = 0; l < m; ++l) {
          da[c][l] = y[l].d;
          if constexpr (G > 1) {  // groups of 256 / G bytes (iq4_xs: 32). Eight horizontal
            // reductions per block instead measured iq4_xs prompt 106-123 GFLOP/s (0.70-0.76 of
            // the reference, one thread), the tile alone about 300: this fill ran per tile
            static_assert(G == 8);
            group_starts<G>(y[l], F::off, start[c] + G * l);
          } else {
            __m512i v = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) v = _mm512_dpbusd_epi32(v, _mm512_set1_epi8(1), load(y[l].qs + 64 * k));
            start[c][l] = -F::off * _mm512_reduce_add_epi32(v);
          }
        }
        continue;
      } else if (m < 16) {
        for (int l = 0; l < m; ++l) {
          da[c][l] = half_to_f32(y[l].d);
          int all = 0;
          for (int h = 0; h < L::halves; ++h) {
            int s = 0;
            for (int j = 0; j < L::bytes; ++j) s += y[l].qs[L::bytes * h + j];
            start[c][L::halves * l + h] = -F::off * s;
            all += s;
          }
          dsa[c][l] = da[c][l] * static_cast<float>(all);
        }
        continue;
      } else {
        const __m512 d = f16x16<sizeof(ablock)>(&y[0].d);
        _mm512_store_ps(da[c], d);
        __m512i v[8];  // v[k]: four-byte sums of blocks 2k, 2k+1; 128-bit lane q is half q % 2 of block 2k + q / 2
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
          v[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), load2x32(y[2 * k].qs, y[2 * k + 1].qs));
        if constexpr (L::halves == 1) {
          const __m512i s = block_sums16(v);
          _mm512_store_si512(start[c], _mm512_mullo_epi32(s, _mm512_set1_epi32(-F::off)));
          if constexpr (F::affine) _mm512_store_ps(dsa[c], _mm512_mul_ps(d, _mm512_cvtepi32_ps(s)));
        } else {
#pragma GCC unroll 2
          for (int g = 0; g < 2; ++g) {  // lane 4q + j: the total of 128-bit lane q of v[4g + j]
            const __m512i x0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[4 * g], v[4 * g + 1]),
                                                _mm512_unpackhi_epi32(v[4 * g], v[4 * g + 1]));
            const __m512i x1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[4 * g + 2], v[4 * g + 3]),
                                                _mm512_unpackhi_epi32(v[4 * g + 2], v[4 * g + 3]));
            const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));
            const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
            _mm512_store_si512(start[c] + 16 * g,
                               _mm512_mullo_epi32(_mm512_permutexvar_epi32(order, t), _mm512_set1_epi32(-F::off)));
          }
        }
      }
    }
  }
};

// out[c][r] = the row dot of w[r] and a[c], r < 16, c < C. A part's dwords go eight at a
// time (a chunk: eight code vectors held while every column takes them), each column's
// integer sum running on across the chunks.
// w: the sixteen rows' pointers, or a tiled group (tiled_rows).
template <class F, int C, class Rows>
inline void tile(Rows w, const typename F::W::dot_type::block* const* a, std::int64_t n, float (*out)[kRows],
                 const ahead& next = {}) {
  using L = part_layout<F>;
  constexpr int cd = F::part_dwords < 8 ? F::part_dwords : 8, chunks = F::part_dwords / cd;
  constexpr int G = int_groups<F>();
  static_assert(G == 1 || G == chunks, "a scaled group is one chunk");
  const std::int64_t na = n / L::A::block_size;
  __m512 sum[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) sum[c] = _mm512_setzero_ps();
  column_terms<F, C> ct;
  for (std::int64_t i0 = 0; i0 < na; i0 += 16) {
    const int m = na - i0 < 16 ? static_cast<int>(na - i0) : 16;
    ct.fill(a, i0, m);
    for (int l = 0; l < m / L::per; ++l) {
      const std::int64_t i = i0 / L::per + l;
      typename F::rows u;
      next.block(i);
      F::load(w, i, u);
      // the activation dwords of part p, chunk j, column c
      auto y = [&](int c, int p, int j) {
        return reinterpret_cast<const unsigned char*>(a[c][i * L::per + p / L::halves].qs) + L::bytes * (p % L::halves) +
               4 * cd * j;
      };
      auto start = [&](int c, int p) {
        return F::off != 0 ? _mm512_set1_epi32(ct.start[c][F::parts * l + p]) : _mm512_setzero_si512();
      };
      auto madd = [&](__m512i acc, const __m512i* q, const unsigned char* yc) {
#pragma GCC unroll 8
        for (int k = 0; k < cd; ++k) {
          std::int32_t yk;
          std::memcpy(&yk, yc + 4 * k, 4);
          acc = _mm512_dpbusd_epi32(acc, q[k], _mm512_set1_epi32(yk));
        }
        return acc;
      };
      if constexpr (chunks > 1) {  // one part; each column's sum runs on across the chunks
        // unscaled (tq1_0, tq2_0): with one or two columns, the chunks go to S separate
        // sums (integers, so the same total): one chain of 8 x chunks dependent vpdpbusd
        // a block was the decode rate's bound
        constexpr int S = G == 1 && C <= 2 ? 4 : 1;
        __m512i acc[C], part[S > 1 ? S - 1 : 1][C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          acc[c] = G > 1 ? _mm512_setzero_si512() : start(c, 0);
#pragma GCC unroll 4
          for (int h = 0; h + 1 < S; ++h) part[h][c] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int j = 0; j < chunks; ++j) {
          __m512i q[cd];
          F::chunk(u, j, q);
          if constexpr (G > 1) {  // total += scale_j * (group j's sum)
            const __m512i sc = F::scale(u, j);
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c)
              acc[c] = _mm512_add_epi32(
                  acc[c], _mm512_mullo_epi32(madd(_mm512_set1_epi32(ct.start[c][G * l + j]), q, y(c, 0, j)), sc));
          } else {
#pragma GCC unroll 8
            for (int c = 0; c < C; ++c) {
              __m512i& a = j % S == 0 ? acc[c] : part[(j % S + S - 1) % S][c];
              a = madd(a, q, y(c, 0, j));
            }
          }
        }
        if constexpr (S > 1)
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c)
#pragma GCC unroll 4
            for (int h = 0; h + 1 < S; ++h) acc[c] = _mm512_add_epi32(acc[c], part[h][c]);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          sum[c] = _mm512_add_ps(sum[c], F::term(_mm512_cvtepi32_ps(acc[c]), u, _mm512_set1_ps(ct.da[c][l]),
                                                 _mm512_set1_ps(ct.dsa[c][l])));
      } else if constexpr (F::parts == 1) {
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512 s = _mm512_cvtepi32_ps(madd(start(c, 0), u.q[0], y(c, 0, 0)));
          sum[c] = _mm512_add_ps(sum[c], F::term(s, u, _mm512_set1_ps(ct.da[c][l]), _mm512_set1_ps(ct.dsa[c][l])));
        }
      } else {
        __m512 b[C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) b[c] = _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int p = 0; p < F::parts; ++p)
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            const __m512 s = _mm512_cvtepi32_ps(madd(start(c, p), u.q[p], y(c, p, 0)));
            b[c] = _mm512_add_ps(b[c], F::part_term(s, u, p, _mm512_set1_ps(ct.da[c][L::per * l + p / L::halves])));
          }
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) sum[c] = _mm512_add_ps(sum[c], F::finish(b[c], u));
      }
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out[c], sum[c]);
}

// Any R x C with R <= 16: rows past R repeat row 0 (their lanes are computed and
// dropped), columns go eight at a time. A one-column call prefetches `next` as it goes.
template <class F>
struct runner {
  using wblock = typename F::W::block;
  using ablock = typename F::W::dot_type::block;
  template <int R, int C>
  static void run(const wblock* const* w, const ablock* const* a, std::int64_t n, float* out,
                  const ahead& next = {}) {
    static_assert(R >= 1 && R <= kRows, "a legacy tile holds at most 16 weight rows");
    const wblock* rows[kRows];
    for (int r = 0; r < kRows; ++r) rows[r] = w[r < R ? r : 0];
    constexpr int cb = C < 8 ? C : 8;
    float o[cb][kRows];
    for (int c0 = 0; c0 < C; c0 += cb) {
      if (C - c0 >= cb) {
        tile<F, cb>(rows, a + c0, n, o, C == 1 ? next : ahead{});
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
  static void run_tiled(const void* group, const ablock* const* a, std::int64_t n, float* out, const ahead& next = {}) {
    static_assert(C >= 1 && C <= 8);
    float o[C][kRows];
    tile<F, C>(tiled_rows{static_cast<const unsigned char*>(group)}, a, n, o, C == 1 ? next : ahead{});
    store_rows_by_column<C>(o, out);
  }
};

// Whether F loads a tiled group (cpu/tiled.hpp's formats of this file).
template <class F>
constexpr bool loads_tiled() {
  return requires(tiled_rows w, typename F::rows& u) { F::load(w, std::int64_t{0}, u); };
}

}  // namespace gk::simd::avx512_legacy_tile

namespace gk {

// path: how the matmul runs one column (decode_path; cpu/matmul.hpp); through the tile, with
// the next rows' bytes [next, next + next_bytes) to prefetch.
#define GK_AVX512_LEGACY_TILE(fmt, path)                                                                           \
  template <>                                                                                                      \
  struct dot_tile<formats::fmt, simd::avx512> {                                                                    \
    static constexpr bool specialised = true, decode = path == decode_path::tile;                                  \
    static constexpr bool decode_on_intel = path == decode_path::tile_on_intel;                                    \
    static constexpr bool tiled = simd::avx512_legacy_tile::loads_tiled<simd::avx512_legacy_tile::fmt>();          \
    static constexpr int rows = simd::avx512_legacy_tile::kRows, cols = 8;                                          \
    template <int R, int C>                                                                                        \
    static void run(const formats::fmt::block* const* w, const formats::fmt::dot_type::block* const* a,            \
                    std::int64_t n, float* out, const void* next = nullptr, std::size_t next_bytes = 0) {          \
      simd::avx512_legacy_tile::runner<simd::avx512_legacy_tile::fmt>::run<R, C>(                                  \
          w, a, n, out, {next, next_bytes, n / formats::fmt::block_size});                                         \
    }                                                                                                              \
    template <int C>                                                                                               \
    static void run_tiled(const void* group, const formats::fmt::dot_type::block* const* a, std::int64_t n,        \
                          float* out, const void* next = nullptr, std::size_t next_bytes = 0) {                    \
      simd::avx512_legacy_tile::runner<simd::avx512_legacy_tile::fmt>::run_tiled<C>(                               \
          group, a, n, out, {next, next_bytes, n / formats::fmt::block_size});                                     \
    }                                                                                                              \
  };

GK_AVX512_LEGACY_TILE(q8_0, decode_path::tile_on_intel)  // see cpu/matmul.hpp, tile_decodes
GK_AVX512_LEGACY_TILE(q4_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(q5_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(q4_1, decode_path::tile)
GK_AVX512_LEGACY_TILE(q5_1, decode_path::tile)
GK_AVX512_LEGACY_TILE(iq4_nl, decode_path::tile)
GK_AVX512_LEGACY_TILE(mxfp4, decode_path::tile)
GK_AVX512_LEGACY_TILE(nvfp4, decode_path::tile)
GK_AVX512_LEGACY_TILE(q1_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(q2_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(tq1_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(tq2_0, decode_path::tile)
GK_AVX512_LEGACY_TILE(iq4_xs, decode_path::tile)

#undef GK_AVX512_LEGACY_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
