// SPDX-License-Identifier: MIT
// AVX-512 VNNI tiles of the 256-weight formats whose blocks sum integer-scaled sub-blocks:
// the lattice formats iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m and q2_K, q3_K,
// q6_K (q8_K activations). Sixteen weight rows by C activation columns, one weight row per
// 32-bit lane, as in avx512/dot_tile_legacy.hpp (whose row transposes this file reuses) and
// avx512/dot_tile_kq16.hpp.
//
// The idea: a block's bytes are put in lanes once (8 x 8 dword transposes of the sixteen
// rows); then per sub-block j (16 or 32 weights with one integer scale) F::chunk makes
// vectors of unsigned codes u = w + off, vector k holding in lane r row r's four weights
// that meet activation dword k of the sub-block. A column's activation dword is the same for
// every lane, a broadcast, so vpdpbusd, started from -off * the sub-block's activation sum,
// leaves the sixteen rows' exact sub-block sums in one vector; vpmulld by the rows' scales
// adds them into the block's integer. The unpack is shared by the C columns.
//
// The lattice points: each grid's coordinates take at most four values (iq2: 8, 25, 43) or
// eight (iq3), so a point is a 16-bit code (make_lattice, from the codebook). Thirty-two
// rows' codes are looked up at once by vpermt2w on the table in 64-entry pieces (a blend per
// index bit above those), spread to a nibble per byte, and turned into 64 + coordinate by a
// pshufb; a sign (bits of a 7-bit index and its parity bit, or 8 bits) takes u to 128 - u
// under a byte mask, so u = 64 + sign * g, off 64. iq1_s / iq1_m's grid (2048 points of
// -1, 0, 1) is fetched by vpgatherqq instead, one plus each coordinate. Gathers of the
// smaller grids measured slower (GFLOP/s, 16 x 8 as below): iq2_xxs 240 by vpgatherqq
// against 340 by lookups, iq3_xxs 166 against 285 (vpgatherdd), iq2_s 180 against 215,
// iq3_s 150 (175 with half its points gathered) against 250. Where the CPU has VBMI (and
// the translation unit targets it), iq2_s's 1024 codes are looked up 64 at a time from two
// byte planes by vpermt2b instead (lookup1024_planes), at load: Intel Xeon (Sapphire Rapids
// class), bench_matmul, one / two threads, gk/ref 4096 x 4096 N 1 0.90-0.92 -> 1.36-1.38
// (29.3 / 57.2 GFLOP/s from 20.7 / 40.8), from >= 1 GiB 0.97-0.98 -> 1.42-1.49, mul_mat_id
// 64 tokens 1.35-1.39 -> 1.73-1.77; prompts (decoded rows) about the same.
//
// Integer part, exact for every byte (activations -128 included): |w| <= 64 and codes are
// below 128, so a lane gains at most 4 * 127 * 128 per vpdpbusd; a sub-block's sum times its
// scale (|scale| <= 128: q6_K's int8, the others <= 31) stays far inside int32, as does the
// block's total. The definitions' integers are sums of such products, so any order gives
// them exactly: iq1_s adds its shift term from q8_K's bsums as they lie (a vpdpwssd per
// sub-block), q2_K its mins term the same way; iq1_m folds its per-group shift into the
// weights, 8 g + (sign ? -1 : 1). Float part: each block's term is formed lane-wise with the
// definition's operations in its order and added to the column's running sum block by
// block, as the row dot adds it; so every output is the row dot's bits.
//
// Shape 16 x 8: the matmul's whole tile in one call. Measured one thread, 4096-wide rows,
// 64 weight rows by 8 columns (L2-resident), on a loaded 2-core share, GFLOP/s, the 2 x 8
// tiles these replace (each row's block unpacked to 256 signed bytes, dotted with column
// pairs by pmaddubsw / vpdpwssd) -> 16 x 8: iq2_xxs 103 -> 325-353, iq3_xxs 92 -> 259-277,
// iq3_s 83 -> 237-246, iq2_xs 103 -> 231-239, iq2_s 95 -> 202-212, iq1_s 102 -> 207-221,
// iq1_m 69 -> 174-188, q6_K 220 -> 316-336, q3_K 215 -> 316-329, q2_K 227 -> 422-465.
// Decode (one column) goes through the tile too, the next task's rows prefetched as it goes
// (avx512/dot_tile_legacy.hpp's ahead), for every format here but q6_K. bench_matmul, one
// thread, gk/ref with row dots -> with the tile, 4096 x 4096 N = 1 | from >= 1 GiB:
// iq2_xxs 0.88 -> 2.37 | 0.81 -> 2.78, iq3_xxs 0.87 -> 2.16 | 0.87 -> 1.95, iq3_s 1.03 ->
// 2.10 | 1.00 -> 1.81, iq2_xs 0.84 -> 1.55 | 0.73 -> 1.49, iq2_s 0.84 -> 1.20 | 0.92 ->
// 1.63, q3_K 0.87 -> 1.37 | 0.89 -> 1.10, q2_K 0.79 -> 1.53 | 0.75 -> 1.42; over three
// runs, iq1_s 0.90-1.20 -> 1.13-1.20 | 0.87-0.97 -> 1.01-1.19, iq1_m 0.68-0.70 -> 0.97-1.26
// | 0.68-0.78 -> 0.93-1.09. q6_K's row dots read at the measured bandwidth already: the tile
// ran 0.85-1.04 against their 1.03-1.27 in cache, 0.66-0.75 against 0.99-1.03 from memory.
// Prompts from 16 columns (the lattice formats; q3_K and q6_K from 32, q2_K from 48) run
// on decoded rows (decoded_prompts): the unpack, which the C columns of one tile call share,
// is paid once per task instead of once per 8 columns. Intel Xeon (AVX-512, no AMX), 2026-12-06,
// bench_matmul N 64, one thread, GFLOP/s, tile -> decoded rows: iq2_s 101 -> 203, iq3_s 109
// -> 234, iq2_xxs 160 -> 250, iq2_xs 120 -> 222, iq3_xxs 132 -> 236, iq1_s 178 -> 232,
// iq1_m 138 -> 214; q3_K 171 -> 215, q6_K 169 -> 203, q2_K 230 -> 247. At 16 columns q2_K
// and q6_K lost (231 -> 194, 170 -> 155), hence their thresholds.
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
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq1.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/avx512/dot_tile_legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_iq16_tile {

using namespace gk::simd::avx512_ops;
using avx512_legacy_tile::ahead;
using avx512_legacy_tile::group_starts;
using avx512_legacy_tile::f16_rows;
using avx512_legacy_tile::kRows;
using avx512_legacy_tile::rows_x4;
using avx512_legacy_tile::rows_x8;
using avx512_legacy_tile::dword_rows;
using avx512_legacy_tile::spread_byte;
using avx512_legacy_tile::tiled_rows;
using avx512_legacy_tile::store_rows_by_column;
using avx512_legacy_tile::qs_tiled;
using avx512_legacy_tile::f16_tiled;

// A lattice grid as 16-bit codes, from the codebook. Its coordinates take few values,
// value[c] the one of code c (ascending). Four-coordinate grids (iq3) keep code(coordinate
// b) in nibble b (at most 8 values, so bit 3 of a nibble is clear); eight-coordinate grids
// (iq2) keep code(coordinate b) | code(coordinate b + 4) << 2 in nibble b (at most 4
// values). Spread to bytes (code_nibbles), a nibble is a pshufb index: lo[n] is 64 + the
// value of code n (iq3) or of its low code (iq2: weights 0-3 of a group), hi[n] 64 + the
// value of its high code (iq2: weights 4-7).
template <std::size_t N>
struct lattice {
  std::array<std::uint16_t, N> code{};
  std::array<std::uint8_t, 8> value{};
  alignas(16) std::array<std::uint8_t, 16> lo{}, hi{};
};
template <std::size_t N, class E>
constexpr lattice<N> make_lattice(const E (&grid)[N]) {
  constexpr int dims = sizeof(E);
  lattice<N> t{};
  int count = 0;
  for (std::size_t p = 0; p < N; ++p)  // the distinct values, ascending
    for (int j = 0; j < dims; ++j) {
      const auto v = static_cast<std::uint8_t>((static_cast<std::uint64_t>(grid[p]) >> (8 * j)) & 0xff);
      int at = 0;
      while (at < count && t.value[at] < v) ++at;
      if (at < count && t.value[at] == v) continue;
      if (count == (dims == 8 ? 4 : 8) || v > 64) throw "not a lattice this file's codes can hold";
      for (int k = count++; k > at; --k) t.value[k] = t.value[k - 1];
      t.value[at] = v;
    }
  auto code = [&](std::uint64_t e, int j) {
    const auto v = static_cast<std::uint8_t>((e >> (8 * j)) & 0xff);
    unsigned c = 0;
    while (t.value[c] != v) ++c;
    return c;
  };
  for (std::size_t p = 0; p < N; ++p) {
    unsigned c = 0;
    for (int b = 0; b < 4; ++b)
      c |= (dims == 8 ? code(grid[p], b) | code(grid[p], b + 4) << 2 : code(grid[p], b)) << (4 * b);
    t.code[p] = static_cast<std::uint16_t>(c);
  }
  for (int n = 0; n < 16; ++n) {
    t.lo[n] = static_cast<std::uint8_t>(64 + t.value[dims == 8 ? n & 3 : n & 7]);
    t.hi[n] = static_cast<std::uint8_t>(64 + t.value[(n >> 2) & 3]);
  }
  return t;
}
alignas(64) inline constexpr auto iq2xxs_lattice = make_lattice(codebooks::iq2xxs_grid);
alignas(64) inline constexpr auto iq2xs_lattice = make_lattice(codebooks::iq2xs_grid);
alignas(64) inline constexpr auto iq2s_lattice = make_lattice(codebooks::iq2s_grid);
alignas(64) inline constexpr auto iq3xxs_lattice = make_lattice(codebooks::iq3xxs_grid);
alignas(64) inline constexpr auto iq3s_lattice = make_lattice(codebooks::iq3s_grid);

// The 16-bit codes of table t (P * 64 entries) at the indices in the words of i: a vpermt2w
// per 64 entries, then a blend per index bit above them.
template <int P>
inline __m512i lookup_epi16(const std::uint16_t* t, __m512i i) {
  __m512i l[P];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) l[p] = _mm512_permutex2var_epi16(load(t + 64 * p), i, load(t + 64 * p + 32));
#pragma GCC unroll 4
  for (int b = 0, n = P; n > 1; ++b, n /= 2) {
    const __mmask32 m = _mm512_test_epi16_mask(i, _mm512_set1_epi16(static_cast<short>(0x40 << b)));
#pragma GCC unroll 8
    for (int p = 0; p < n / 2; ++p) l[p] = _mm512_mask_blend_epi16(m, l[2 * p], l[2 * p + 1]);
  }
  return l[0];
}

// The same for a 512-entry table, bit 8 of each index given by high.
inline __m512i lookup512_epi16(const std::uint16_t* t, __m512i i, __mmask32 high) {
  return _mm512_mask_blend_epi16(high, lookup_epi16<4>(t, i), lookup_epi16<4>(t + 256, i));
}

// The same for a 1024-entry table, bits 8 and 9 of each index given by b8 and b9.
inline __m512i lookup1024_epi16(const std::uint16_t* t, __m512i i, __mmask32 b8, __mmask32 b9) {
  return _mm512_mask_blend_epi16(b9, lookup512_epi16(t, i, b8), lookup512_epi16(t + 512, i, b8));
}

// Of dwords holding a code's bytes (lo, lo, hi, hi): byte b = nibble b of the code.
inline __m512i nibbles_of(__m512i x) {
  // bytes 0, 2 from x, 1, 3 from x >> 4 (16-bit): ternary-logic 0xD8 is c ? b : a
  const __m512i n = _mm512_ternarylogic_epi32(x, _mm512_srli_epi16(x, 4), _mm512_set1_epi32(static_cast<int>(0xff00ff00u)), 0xD8);
  return _mm512_and_si512(n, _mm512_set1_epi8(0x0f));
}

// Word h of each dword of r (a 16-bit lattice code) spread to bytes: byte b = nibble b.
inline __m512i code_nibbles(__m512i r, int h) {
  // pshufb indexes within 128-bit lanes, where dword q starts at byte 4q
  return nibbles_of(_mm512_shuffle_epi8(r, _mm512_add_epi8(_mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0),
                                                           _mm512_set1_epi32(h ? 0x03030202 : 0x01010000))));
}

#if defined(__AVX512VBMI__)
// With VBMI (vpermt2b: 128 byte entries a lookup), iq2_s's 1024 codes as two byte planes:
// its codes' low bytes, then their high bytes. 64 indices take 16 vpermt2b and 14 blends
// against 2 x (16 vpermt2w and 15 blends) for lookup1024_epi16's 32 at a time.
alignas(64) inline constexpr auto iq2s_planes = [] {
  std::array<std::uint8_t, 2048> t{};
  for (int p = 0; p < 1024; ++p) {
    t[p] = static_cast<std::uint8_t>(iq2s_lattice.code[p] & 0xff);
    t[1024 + p] = static_cast<std::uint8_t>(iq2s_lattice.code[p] >> 8);
  }
  return t;
}();

// The codes of the 64 indices whose bits 0-7 are the bytes of x, bits 8 and 9 the bits of
// b8 and b9, as their low bytes lo and high bytes hi: per plane a vpermt2b per 128 entries
// (index bits 0-6), then blends by index bits 7, 8, 9.
inline void lookup1024_planes(__m512i x, __mmask64 b8, __mmask64 b9, __m512i& lo, __m512i& hi) {
  const __mmask64 b7 = _mm512_movepi8_mask(x);
  __m512i v[2][8];
#pragma GCC unroll 2
  for (int pl = 0; pl < 2; ++pl) {
#pragma GCC unroll 8
    for (int w = 0; w < 8; ++w) {
      const std::uint8_t* t = iq2s_planes.data() + 1024 * pl + 128 * w;
      v[pl][w] = _mm512_permutex2var_epi8(load(t), x, load(t + 64));
    }
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) v[pl][w] = _mm512_mask_blend_epi8(b7, v[pl][2 * w], v[pl][2 * w + 1]);
#pragma GCC unroll 2
    for (int w = 0; w < 2; ++w) v[pl][w] = _mm512_mask_blend_epi8(b8, v[pl][2 * w], v[pl][2 * w + 1]);
    v[pl][0] = _mm512_mask_blend_epi8(b9, v[pl][0], v[pl][1]);
  }
  lo = v[0][0];
  hi = v[1][0];
}

// Byte g of each dword of the planes lo, hi (the code of that dword's group g) spread to
// nibbles as code_nibbles does: dword q of the index reads (lo[4q + g], lo[4q + g],
// hi[4q + g], hi[4q + g]), vpermt2b's indices 64 and up being hi's.
inline __m512i plane_nibbles(__m512i lo, __m512i hi, int g) {
  const __m512i quad = _mm512_set_epi32(0x3c3c3c3c, 0x38383838, 0x34343434, 0x30303030, 0x2c2c2c2c, 0x28282828,
                                        0x24242424, 0x20202020, 0x1c1c1c1c, 0x18181818, 0x14141414, 0x10101010,
                                        0x0c0c0c0c, 0x08080808, 0x04040404, 0);  // 4q in dword q
  const __m512i at = _mm512_add_epi8(quad, _mm512_set1_epi32((64 + g) << 24 | (64 + g) << 16 | g << 8 | g));
  return nibbles_of(_mm512_permutex2var_epi8(lo, at, hi));
}
#endif

// The 8-bit sign mask of a 7-bit sign index (ksigns_iq2xs) in each byte of b (bit 7 clear):
// the index with its parity as bit 7.
inline __m512i with_parity(__m512i b) {
  __m512i p = _mm512_xor_si512(b, _mm512_srli_epi32(b, 4));  // bit 0 of each byte: the parity of its bits
  p = _mm512_xor_si512(p, _mm512_srli_epi32(p, 2));
  p = _mm512_xor_si512(p, _mm512_srli_epi32(p, 1));
  // b | (x & m): ternary-logic 0xF8 (a | (b & c) of 0xF0, 0xCC, 0xAA)
  return _mm512_ternarylogic_epi32(b, _mm512_slli_epi32(p, 7), _mm512_set1_epi32(static_cast<int>(0x80808080u)), 0xF8);
}

// The sign masks of the four 7-bit sign indices at bits 7l .. 7l+6 of each dword of a: byte l.
inline __m512i sign_bytes(__m512i a) {
  __m512i b = _mm512_and_si512(a, _mm512_set1_epi32(0x7f));
  b = _mm512_ternarylogic_epi32(b, _mm512_slli_epi32(a, 1), _mm512_set1_epi32(0x7f00), 0xF8);
  b = _mm512_ternarylogic_epi32(b, _mm512_slli_epi32(a, 2), _mm512_set1_epi32(0x7f0000), 0xF8);
  b = _mm512_ternarylogic_epi32(b, _mm512_slli_epi32(a, 3), _mm512_set1_epi32(0x7f000000), 0xF8);
  return with_parity(b);
}

// Codes u = 64 + sign * g of the eight weights of one group of each lane's row: lo, hi are
// the group's biased grid dwords (weights 0-3, 4-7), s its sign byte spread over the dword.
inline void signed_codes(__m512i lo, __m512i hi, __m512i s, __m512i* q) {
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(128));
  q[0] = _mm512_mask_sub_epi8(lo, _mm512_test_epi8_mask(s, _mm512_set1_epi32(0x08040201)), k128, lo);
  q[1] = _mm512_mask_sub_epi8(hi, _mm512_test_epi8_mask(s, _mm512_set1_epi32(static_cast<int>(0x80402010u))), k128, hi);
}

// 2s + 1 of the 4-bit scale s in nibble h of sc[0], sc[1] (lane by lane): (sc >> (4h - 1)) &
// 0x1e | 1, ternary-logic 0xEA is c | (a & b).
inline __m512i nibble_scale(const __m512i* sc, int h) {
  const int b = 4 * (h % 8);
  const __m512i x = b ? _mm512_srli_epi32(sc[h / 8], b - 1) : _mm512_slli_epi32(sc[h / 8], 1);
  return _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0x1e), _mm512_set1_epi32(1), 0xEA);
}

// iq2_xxs: per sub-block j, qs dword 2j holds the grid indices of its four groups (byte l:
// group l), dword 2j+1 their sign indices (bits 7l .. 7l+6) and the scale s (bits 28-31).
// Sub-block sum times 2s+1, summed as integers; (dw * da) * float(total) * 0.125f.
struct iq2_xxs {
  using W = formats::iq2_xxs;
  static constexpr int off = 64, groups = 8;
  struct rows {
    __m512i x[16];  // lane r: qs dword p of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r][i].qs) + 32 * h;
      rows_x8(p, u.x + 8 * h);
    }
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // sub-block j: activation dwords 8j .. 8j+7
    const __m512i idx = u.x[2 * j], s = sign_bytes(u.x[2 * j + 1]), byte02 = _mm512_set1_epi32(0x00ff00ff);
    // lane r: the codes of row r's groups 0 and 2 (words 0, 1), and of groups 1 and 3
    const auto& t = iq2xxs_lattice;
    const __m512i r[2] = {lookup_epi16<4>(t.code.data(), _mm512_and_si512(idx, byte02)),
                          lookup_epi16<4>(t.code.data(), _mm512_and_si512(_mm512_srli_epi32(idx, 8), byte02))};
    const __m512i lo = _mm512_broadcast_i32x4(load128(t.lo.data())), hi = _mm512_broadcast_i32x4(load128(t.hi.data()));
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) {
      const __m512i n = code_nibbles(r[l & 1], l >> 1);
      signed_codes(_mm512_shuffle_epi8(lo, n), _mm512_shuffle_epi8(hi, n), spread_byte(s, l), q + 2 * l);
    }
  }
  // 2s + 1 of sub-block j: bits 27-31 of its aux word, bit 0 set
  static __m512i scale(const rows& u, int j) { return _mm512_or_si512(_mm512_srli_epi32(u.x[2 * j + 1], 27), _mm512_set1_epi32(1)); }
  // (dw * da) * float(total) * 0.125f
  static __m512 term(__m512 s, const rows& u, __m512 da) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, da), s), _mm512_set1_ps(0.125f));
  }
};

// iq3_xxs: qs[8j + k] is the grid index of the four weights of sub-block j that meet its
// activation dword k; the dword at qs[64 + 4j] holds the sub-block's sign indices (bits
// 7l .. 7l+6, weights 8l .. 8l+7) and its scale s (bits 28-31). Sub-block sum times 2s+1,
// summed as integers; dw * da * float(total) * 0.25f.
struct iq3_xxs {
  using W = formats::iq3_xxs;
  static constexpr int off = 64, groups = 8;
  struct rows {
    __m512i x[16];   // lane r: qs dword p of row r (grid indices)
    __m512i aux[8];  // lane r: sub-block j's sign and scale dword of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 3
    for (int h = 0; h < 3; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * h;
      rows_x8(p, h < 2 ? u.x + 8 * h : u.aux);
    }
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // sub-block j: activation dwords 8j .. 8j+7
    const auto& t = iq3xxs_lattice;
    const __m512i byte02 = _mm512_set1_epi32(0x00ff00ff), lo = _mm512_broadcast_i32x4(load128(t.lo.data()));
    __m512i v[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // activation dwords 4h .. 4h+3
      const __m512i idx = u.x[2 * j + h];
      const __m512i r[2] = {lookup_epi16<4>(t.code.data(), _mm512_and_si512(idx, byte02)),
                            lookup_epi16<4>(t.code.data(), _mm512_and_si512(_mm512_srli_epi32(idx, 8), byte02))};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) v[4 * h + k] = _mm512_shuffle_epi8(lo, code_nibbles(r[k & 1], k >> 1));
    }
    const __m512i s = sign_bytes(u.aux[j]);
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) signed_codes(v[2 * l], v[2 * l + 1], spread_byte(s, l), q + 2 * l);
  }
  static __m512i scale(const rows& u, int j) { return _mm512_or_si512(_mm512_srli_epi32(u.aux[j], 27), _mm512_set1_epi32(1)); }
  // dw * da * float(total) * 0.25f
  static __m512 term(__m512 s, const rows& u, __m512 da) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, da), s), _mm512_set1_ps(0.25f));
  }
};

// iq3_s: the grid index of the four weights of sub-block j that meet its activation dword k
// is qs[8j + k] | bit k of qh[j] << 8; signs[4j + l] holds the signs of weights 8l .. 8l+7
// (bit m: weight 8l + m), nibble j of the scales dword the scale s. Sub-block sum times
// 1 + 2s, summed as integers; dw * da * float(total).
struct iq3_s {
  using W = formats::iq3_s;
  static constexpr int off = 64, groups = 8;
  struct rows {
    __m512i x[16];   // lane r: qs dword p of row r (grid indices, low 8 bits)
    __m512i sg[8];   // lane r: signs dword j of row r
    __m512i qh[2];   // lane r: qh dword p of row r
    __m512i sc;      // lane r: the scales dword of row r
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
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].signs;
    rows_x8(p, u.sg);
    u.qh[0] = dword_rows<offsetof(W::block, qh)>(w, i);
    u.qh[1] = dword_rows<offsetof(W::block, qh) + 4>(w, i);
    u.sc = dword_rows<offsetof(W::block, scales)>(w, i);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // tiled (cpu/tiled.hpp): the sixteen scales d, then qs, qh, signs and scales dwords as vectors
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) u.x[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.sg[k] = qs_tiled<offsetof(W::block, signs)>(col, k);
    u.qh[0] = qs_tiled<offsetof(W::block, qh)>(col, 0);
    u.qh[1] = qs_tiled<offsetof(W::block, qh)>(col, 1);
    u.sc = qs_tiled<offsetof(W::block, scales)>(col, 0);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // sub-block j: activation dwords 8j .. 8j+7
    const auto& t = iq3s_lattice;
    const __m512i byte02 = _mm512_set1_epi32(0x00ff00ff), lo = _mm512_broadcast_i32x4(load128(t.lo.data()));
    const __m512i e = spread_byte(u.qh[j / 4], j % 4);  // qh[j] in every byte
    __m512i v[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // activation dwords 4h .. 4h+3: index bits 8 from qh bits 4h .. 4h+3
      const __m512i idx = u.x[2 * j + h];
      const __mmask32 h02 = _mm512_test_epi16_mask(e, _mm512_set1_epi32(1 << 4 * h | 1 << (4 * h + 2 + 16)));
      const __mmask32 h13 = _mm512_test_epi16_mask(e, _mm512_set1_epi32(1 << (4 * h + 1) | 1 << (4 * h + 3 + 16)));
      const __m512i r[2] = {lookup512_epi16(t.code.data(), _mm512_and_si512(idx, byte02), h02),
                            lookup512_epi16(t.code.data(), _mm512_and_si512(_mm512_srli_epi32(idx, 8), byte02), h13)};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) v[4 * h + k] = _mm512_shuffle_epi8(lo, code_nibbles(r[k & 1], k >> 1));
    }
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) signed_codes(v[2 * l], v[2 * l + 1], spread_byte(u.sg[j], l), q + 2 * l);
  }
  // 1 + 2s: (sc >> (4j - 1)) & 0x1e | 1, ternary-logic 0xEA is c | (a & b)
  static __m512i scale(const rows& u, int j) {
    const __m512i x = j ? _mm512_srli_epi32(u.sc, 4 * j - 1) : _mm512_slli_epi32(u.sc, 1);
    return _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0x1e), _mm512_set1_epi32(1), 0xEA);
  }
  // dw * da * float(total)
  static __m512 term(__m512 s, const rows& u, __m512 da) { return _mm512_mul_ps(_mm512_mul_ps(u.d, da), s); }
};

// iq2_xs: qs word g holds group g's grid index (bits 0-8) and sign index (bits 9-15);
// nibble h of the scales (low nibble of byte h / 2 first) is the scale s of weights
// 16h .. 16h+15, groups 2h, 2h+1. Sub-block sums times 2s+1, summed as integers;
// (dw * da) * float(total) * 0.125f.
struct iq2_xs {
  using W = formats::iq2_xs;
  static constexpr int off = 64, groups = 16;
  struct rows {
    __m512i x[16];  // lane r: qs words 2h, 2h+1 of row r
    __m512i sc[2];  // lane r: scales dword p of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r][i].qs) + 32 * h;
      rows_x8(p, u.x + 8 * h);
    }
    u.sc[0] = dword_rows<offsetof(W::block, scales)>(w, i);
    u.sc[1] = dword_rows<offsetof(W::block, scales) + 4>(w, i);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  static void chunk(const rows& u, int h, __m512i* q) {  // weights 16h .. 16h+15: activation dwords 4h .. 4h+3
    const auto& t = iq2xs_lattice;
    const __m512i x = u.x[h];
    const __m512i r = lookup_epi16<8>(t.code.data(), x);  // bits 0-8 of each word
    // sign indices: bits 9-15 to byte 0, bits 25-31 to byte 1 (ternary-logic 0xD8: c ? b : a)
    const __m512i s = with_parity(_mm512_and_si512(
        _mm512_ternarylogic_epi32(_mm512_srli_epi32(x, 9), _mm512_srli_epi32(x, 17), _mm512_set1_epi32(0xff00), 0xD8),
        _mm512_set1_epi32(0x7f7f)));
    const __m512i lo = _mm512_broadcast_i32x4(load128(t.lo.data())), hi = _mm512_broadcast_i32x4(load128(t.hi.data()));
#pragma GCC unroll 2
    for (int l = 0; l < 2; ++l) {
      const __m512i n = code_nibbles(r, l);
      signed_codes(_mm512_shuffle_epi8(lo, n), _mm512_shuffle_epi8(hi, n), spread_byte(s, l), q + 2 * l);
    }
  }
  static __m512i scale(const rows& u, int h) { return nibble_scale(u.sc, h); }
  // (dw * da) * float(total) * 0.125f
  static __m512 term(__m512 s, const rows& u, __m512 da) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, da), s), _mm512_set1_ps(0.125f));
  }
};

// iq2_s: group g's grid index is qs[g] | bits 2(g % 4), 2(g % 4) + 1 of qh[g / 4] << 8, its
// signs byte qs[32 + g] (bit m: weight 8g + m); scales as iq2_xs. Sub-block sums times
// 2s+1, summed as integers; (dw * da) * float(total) * 0.125f.
struct iq2_s {
  using W = formats::iq2_s;
  static constexpr int off = 64, groups = 16;
  struct rows {
    __m512i x[8];   // lane r: qs dword p of row r (index bits 0-7 of groups 4p .. 4p+3)
    __m512i sg[8];  // lane r: qs dword 8 + p of row r (signs of groups 4p .. 4p+3)
    __m512i qh[2];  // lane r: qh dword p of row r
    __m512i sc[2];  // lane r: scales dword p of row r
    __m512 d;
#if defined(__AVX512VBMI__)
    __m512i hi[8];  // after planes: x[p] the low bytes, hi[p] the high bytes of groups 4p .. 4p+3's codes
#endif
  };
  // With VBMI the codes are looked up at load, 64 at a time (lookup1024_planes).
  static void planes([[maybe_unused]] rows& u) {
#if defined(__AVX512VBMI__)
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const __m512i e = spread_byte(u.qh[p / 4], p % 4);  // qh[p] in every byte; byte g's bits 2g, 2g + 1
      lookup1024_planes(u.x[p], _mm512_test_epi8_mask(e, _mm512_set1_epi32(0x40100401)),
                        _mm512_test_epi8_mask(e, _mm512_set1_epi32(static_cast<int>(0x80200802u))), u.x[p], u.hi[p]);
    }
#endif
  }
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * h;
      rows_x8(p, h ? u.sg : u.x);
    }
    u.qh[0] = dword_rows<offsetof(W::block, qh)>(w, i);
    u.qh[1] = dword_rows<offsetof(W::block, qh) + 4>(w, i);
    u.sc[0] = dword_rows<offsetof(W::block, scales)>(w, i);
    u.sc[1] = dword_rows<offsetof(W::block, scales) + 4>(w, i);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
    planes(u);
  }
  // tiled (cpu/tiled.hpp): the sixteen scales d, then qs, qh and scales dwords as vectors
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      u.x[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
      u.sg[k] = qs_tiled<offsetof(W::block, qs)>(col, 8 + k);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      u.qh[k] = qs_tiled<offsetof(W::block, qh)>(col, k);
      u.sc[k] = qs_tiled<offsetof(W::block, scales)>(col, k);
    }
    u.d = f16_tiled<offsetof(W::block, d)>(col);
    planes(u);
  }
  static void chunk(const rows& u, int h, __m512i* q) {  // groups 2h, 2h+1: activation dwords 4h .. 4h+3
    const auto& t = iq2s_lattice;
#if defined(__AVX512VBMI__)
    const __m512i lo = _mm512_broadcast_i32x4(load128(t.lo.data())), hi = _mm512_broadcast_i32x4(load128(t.hi.data()));
    const int p = h / 2, b = 2 * (h % 2);  // qs dword p, its groups b, b + 1
#pragma GCC unroll 2
    for (int l = 0; l < 2; ++l) {
      const __m512i n = plane_nibbles(u.x[p], u.hi[p], b + l);
      signed_codes(_mm512_shuffle_epi8(lo, n), _mm512_shuffle_epi8(hi, n), spread_byte(u.sg[p], b + l), q + 2 * l);
    }
#else
    const int b = 2 * (h % 2);  // the groups' bytes in qs dword h / 2, and their qh bits 2b .. 2b+3
    // words 0, 1 of each dword: index bits 0-7 of groups 2h, 2h+1 (pshufb, within 128-bit
    // lanes, dword q at byte 4q; an index with bit 7 set writes zero)
    const __m512i i = _mm512_shuffle_epi8(
        u.x[h / 2], _mm512_add_epi8(_mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0),
                                    _mm512_set1_epi32(static_cast<int>(0x80008000u) | (b + 1) << 16 | b)));
    const __m512i e = spread_byte(u.qh[h / 8], (h / 2) % 4);  // qh[h / 2] in every byte
    const __mmask32 b8 = _mm512_test_epi16_mask(e, _mm512_set1_epi32(1 << 2 * b | 1 << (2 * b + 2 + 16)));
    const __mmask32 b9 = _mm512_test_epi16_mask(e, _mm512_set1_epi32(1 << (2 * b + 1) | 1 << (2 * b + 3 + 16)));
    const __m512i r = lookup1024_epi16(t.code.data(), i, b8, b9);
    const __m512i lo = _mm512_broadcast_i32x4(load128(t.lo.data())), hi = _mm512_broadcast_i32x4(load128(t.hi.data()));
#pragma GCC unroll 2
    for (int l = 0; l < 2; ++l) {
      const __m512i n = code_nibbles(r, l);
      signed_codes(_mm512_shuffle_epi8(lo, n), _mm512_shuffle_epi8(hi, n), spread_byte(u.sg[h / 2], b + l), q + 2 * l);
    }
#endif
  }
  static __m512i scale(const rows& u, int h) { return nibble_scale(u.sc, h); }
  // (dw * da) * float(total) * 0.125f
  static __m512 term(__m512 s, const rows& u, __m512 da) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(u.d, da), s), _mm512_set1_ps(0.125f));
  }
};

// The iq1s grid with 1 added to every coordinate (-1, 0, 1 become 0, 1, 2), from the codebook.
alignas(64) inline constexpr auto iq1s_plus1 = [] {
  std::array<std::uint64_t, 2048> t{};
  for (int p = 0; p < 2048; ++p)
    for (int j = 0; j < 8; ++j)
      t[p] |= static_cast<std::uint64_t>(((codebooks::iq1s_grid[p] >> (8 * j)) + 1) & 0xff) << (8 * j);
  return t;
}();

// Eight-byte entries of table t at the 16 dword indices of i, as the dwords of their low
// and high halves (lane r: entry i[r]): two vpgatherqq of eight, one permute each way.
inline void gather_halves(const std::uint64_t* t, __m512i i, __m512i& lo, __m512i& hi) {
  const __m512i g0 = _mm512_i32gather_epi64(_mm512_castsi512_si256(i), t, 8);
  const __m512i g1 = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(i, 1), t, 8);
  lo = _mm512_permutex2var_epi32(g0, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), g1);
  hi = _mm512_permutex2var_epi32(g0, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), g1);
}

// iq1_s: group l of sub-block ib (weights 32ib + 8l ..) is the iq1s_grid point qs[4ib + l] |
// bits 3l .. 3l+2 of qh[ib] << 8, coordinates -1, 0, 1 as u = 1 + g; bits 12-14 of qh[ib]
// are the scale s, ls = 2s + 1, bit 15 the sign of its shift. The integer 8 * sum + sum_shift
// is formed as sum_ib 8 ls * (sub-block sum) plus sum_ib (+-ls) * (bsums[2ib] +
// bsums[2ib+1]), a vpdpwssd per sub-block on the bsums as they lie;
// dw * da * (float(8 * sum + sum_shift) * iq1s_delta).
struct iq1_s {
  using W = formats::iq1_s;
  static constexpr int off = 1, groups = 8;
  struct rows {
    __m512i x[8];   // lane r: qs dword ib of row r (index bits 0-7 of sub-block ib's groups)
    __m512i qh[4];  // lane r: qh[2p], qh[2p+1] of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    rows_x8(p, u.x);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r][i].qh);
    rows_x4(p, u.qh);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // qh[ib] in bits 0-15 of each lane (bits above: qh[ib + 1] or zero)
  static __m512i qh(const rows& u, int ib) { return ib % 2 ? _mm512_srli_epi32(u.qh[ib / 2], 16) : u.qh[ib / 2]; }
  static void chunk(const rows& u, int ib, __m512i* q) {  // sub-block ib: activation dwords 8ib .. 8ib+7
    const __m512i h = qh(u, ib), x = u.x[ib];
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) {
      const __m512i lo8 = l == 3 ? _mm512_srli_epi32(x, 24) : _mm512_and_si512(_mm512_srli_epi32(x, 8 * l), _mm512_set1_epi32(0xff));
      // | bits 3l .. 3l+2 of qh at bit 8: ternary-logic 0xF8 is a | (b & c)
      const __m512i idx = _mm512_ternarylogic_epi32(lo8, l < 3 ? _mm512_slli_epi32(h, 8 - 3 * l) : _mm512_srli_epi32(h, 1),
                                                    _mm512_set1_epi32(0x700), 0xF8);
      gather_halves(iq1s_plus1.data(), idx, q[2 * l], q[2 * l + 1]);
    }
  }
  // 8 ls = 16 s + 8: bits 12-14 of qh moved to 4-6, | 8 (ternary-logic 0xEA is c | (a & b))
  static __m512i scale(const rows& u, int ib) {
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(qh(u, ib), 8), _mm512_set1_epi32(0x70), _mm512_set1_epi32(8), 0xEA);
  }
  static __m512i shifts(const rows& u, const formats::q8_K::block& a) {  // sum_shift
    __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const __m512i h = qh(u, ib);
      const __m512i ls = _mm512_ternarylogic_epi32(_mm512_srli_epi32(h, 11), _mm512_set1_epi32(0xe), _mm512_set1_epi32(1), 0xEA);
      const __m512i m = _mm512_mask_sub_epi32(ls, _mm512_test_epi32_mask(h, _mm512_set1_epi32(0x8000)), _mm512_setzero_si512(), ls);
      const __m512i mm = _mm512_or_si512(_mm512_and_si512(m, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(m, 16));  // m in both words
      std::int32_t b;
      std::memcpy(&b, a.bsums + 2 * ib, 4);
      t = _mm512_dpwssd_epi32(t, mm, _mm512_set1_epi32(b));
    }
    return t;
  }
  // dw * da * (float(8 * sum + sum_shift) * iq1s_delta)
  static __m512 finish(__m512i sum8, const rows& u, const formats::q8_K::block& a) {
    const __m512 s = _mm512_cvtepi32_ps(_mm512_add_epi32(sum8, shifts(u, a)));
    return _mm512_mul_ps(_mm512_mul_ps(u.d, _mm512_set1_ps(a.d)), _mm512_mul_ps(s, _mm512_set1_ps(codebooks::iq1s_delta)));
  }
};

// iq1_m: group l of sub-block j (weights 16j + 8l ..) is the iq1s_grid point qs[2j + l] |
// bits 4l .. 4l+2 of qh[j] << 8 with its shift sign at bit 4l + 3; the scale of sub-block
// j is ls = 2s + 1, s at bit 3(j % 4) of scales word j / 4, whose top nibbles make the f16
// d. As the 2 x 8 tiles did: with w = 8 g + (sign ? -1 : 1), sum_j ls_j * sum w * a is
// exactly 8 * sum + sum_shift; u = w + 9 = 8 (g + 1) + (sign ? 0 : 2).
// d * da * (float(8 * sum + sum_shift) * iq1m_delta).
struct iq1_m {
  using W = formats::iq1_m;
  static constexpr int off = 9, groups = 16;
  struct rows {
    __m512i x[8];   // lane r: qs dword p of row r (index bits 0-7 of groups 4p .. 4p+3)
    __m512i qh[4];  // lane r: qh dword p of row r
    __m512i sc[2];  // lane r: scales dword p of row r (words 2p, 2p+1)
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs;
    rows_x8(p, u.x);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qh;
    rows_x4(p, u.qh);
    u.sc[0] = dword_rows<offsetof(W::block, scales)>(w, i);
    u.sc[1] = dword_rows<offsetof(W::block, scales) + 4>(w, i);
    // d's f16 bits: the top nibbles of words 0-3 as nibbles 0-3
    const __m512i k = _mm512_set1_epi32(0xf);
    const __m512i d16 = _mm512_or_si512(
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u.sc[0], 12), k), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u.sc[0], 28), k), 4)),
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u.sc[1], 12), k), 8),
                        _mm512_slli_epi32(_mm512_srli_epi32(u.sc[1], 28), 12)));
    u.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d16));  // vcvtph2ps: as f16_to_f32 converts
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // sub-block j: activation dwords 4j .. 4j+3
    const __m512i x = _mm512_srli_epi32(u.x[j / 2], 16 * (j % 2));  // index bits 0-7: bytes 0, 1
    const __m512i h = _mm512_srli_epi32(u.qh[j / 4], 8 * (j % 4));   // qh[j]: byte 0
#pragma GCC unroll 2
    for (int l = 0; l < 2; ++l) {
      // qs byte | bits 4l .. 4l+2 of qh[j] at bit 8: ternary-logic 0xF8 is a | (b & c)
      const __m512i idx = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(x, 8 * l), _mm512_set1_epi32(0xff)),
                                                    l ? _mm512_slli_epi32(h, 4) : _mm512_slli_epi32(h, 8),
                                                    _mm512_set1_epi32(0x700), 0xF8);
      __m512i lo, hi;
      gather_halves(iq1s_plus1.data(), idx, lo, hi);
      // 8 (g + 1), + 2 where the shift sign bit is clear (g + 1 <= 2: 16-bit shifts stay in their bytes)
      const __m512i two = _mm512_maskz_mov_epi32(_mm512_testn_epi32_mask(h, _mm512_set1_epi32(8 << 4 * l)), _mm512_set1_epi8(2));
      q[2 * l] = _mm512_add_epi8(_mm512_slli_epi16(lo, 3), two);
      q[2 * l + 1] = _mm512_add_epi8(_mm512_slli_epi16(hi, 3), two);
    }
  }
  // ls = 2s + 1, s at bit 3(j % 4) of word j / 4: (x >> (b - 1)) & 0xe | 1, ternary-logic 0xEA is c | (a & b)
  static __m512i scale(const rows& u, int j) {
    const int b = 16 * ((j / 4) % 2) + 3 * (j % 4);
    const __m512i x = b ? _mm512_srli_epi32(u.sc[j / 8], b - 1) : _mm512_slli_epi32(u.sc[j / 8], 1);
    return _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0xe), _mm512_set1_epi32(1), 0xEA);
  }
  // d * da * (float(total) * iq1m_delta)
  static __m512 term(__m512 s, const rows& u, __m512 da) {
    return _mm512_mul_ps(_mm512_mul_ps(u.d, da), _mm512_mul_ps(s, _mm512_set1_ps(codebooks::iq1m_delta)));
  }
};

// q6_K: weight 128h + 32k + l (k < 4, l < 32) has its low four bits in nibble k / 2 of
// ql[64h + 32(k % 2) + l] and its top two in bits 2k, 2k+1 of qh[32h + l]; u = the 6-bit
// code (w = u - 32, off 32). Sub-block j (16 weights) has the signed scale scales[j].
// d * da * float(sum).
struct q6_K {
  using W = formats::q6_K;
  static constexpr int off = 32, groups = 16;
  struct rows {
    __m512i ql[32];  // lane r: ql dword p of row r
    __m512i qh[16];  // lane r: qh dword p of row r
    __m512i sc[4];   // lane r: scales dword p of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].ql + 32 * h;
      rows_x8(p, u.ql + 8 * h);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qh + 32 * h;
      rows_x8(p, u.qh + 8 * h);
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = reinterpret_cast<const std::uint8_t*>(w[r][i].scales);
    rows_x4(p, u.sc);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // tiled (cpu/tiled.hpp): ql, qh and scales dwords as vectors, then the sixteen scales d
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 32
    for (int k = 0; k < 32; ++k) u.ql[k] = qs_tiled<offsetof(W::block, ql)>(col, k);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) u.qh[k] = qs_tiled<offsetof(W::block, qh)>(col, k);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) u.sc[k] = qs_tiled<offsetof(W::block, scales)>(col, k);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // weights 16j .. 16j+15: activation dwords 4j .. 4j+3
    const int h = j / 8, k = (j / 2) % 4, half = j % 2;
    const __m512i top = _mm512_set1_epi8(0x30);
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m512i lo = u.ql[16 * h + 8 * (k % 2) + 4 * half + t], hi = u.qh[8 * h + 4 * half + t];
      // bits 2k, 2k+1 of each qh byte to bits 4, 5 (16-bit shifts, then masked)
      const __m512i b = _mm512_and_si512(k < 2 ? _mm512_slli_epi16(hi, 4 - 2 * k) : _mm512_srli_epi16(hi, 2 * k - 4), top);
      // nibble k / 2 of the ql byte | b: ternary-logic 0xE4 is c ? a : b, c the low-nibble mask
      q[t] = _mm512_ternarylogic_epi32(k < 2 ? lo : _mm512_srli_epi16(lo, 4), b, _mm512_set1_epi8(0x0f), 0xE4);
    }
  }
  static __m512i scale(const rows& u, int j) {  // the signed byte j % 4 of scales dword j / 4
    return _mm512_srai_epi32(_mm512_slli_epi32(u.sc[j / 4], 24 - 8 * (j % 4)), 24);
  }
  // d * da * float(sum)
  static __m512 term(__m512 s, const rows& u, __m512 da) { return _mm512_mul_ps(_mm512_mul_ps(u.d, da), s); }
};

// q3_K: weight i = 128h + 32k + l (k < 4, l < 32) has its low two bits at bits 2k, 2k+1 of
// qs[32h + l] and its top bit at bit 4h + k of hmask[l]; u = the 3-bit code (q = u - 4, off
// 4). Sub-block j (16 weights) has the 6-bit scale u_j - 32: low four bits in nibble j / 8
// of scales[j % 8], top two at bits 2(j / 4) of scales[8 + j % 4]. (d * da) * float(isum).
struct q3_K {
  using W = formats::q3_K;
  static constexpr int off = 4, groups = 16;
  struct rows {
    __m512i qs[16];  // lane r: qs dword p of row r
    __m512i hm[8];   // lane r: hmask dword p of row r
    __m512i sc[3];   // lane r: scales dword p of row r
    __m512 d;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * h;
      rows_x8(p, u.qs + 8 * h);
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].hmask;
    rows_x8(p, u.hm);
    u.sc[0] = dword_rows<offsetof(W::block, scales)>(w, i);
    u.sc[1] = dword_rows<offsetof(W::block, scales) + 4>(w, i);
    u.sc[2] = dword_rows<offsetof(W::block, scales) + 8>(w, i);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
  }
  // tiled (cpu/tiled.hpp): qs, hmask and scales dwords as vectors, then the sixteen scales d
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) u.qs[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) u.hm[k] = qs_tiled<offsetof(W::block, hmask)>(col, k);
#pragma GCC unroll 3
    for (int k = 0; k < 3; ++k) u.sc[k] = qs_tiled<offsetof(W::block, scales)>(col, k);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // weights 16j .. 16j+15: activation dwords 4j .. 4j+3
    const int h = j / 8, k = (j / 2) % 4, half = j % 2, b = j / 2;  // b = 4h + k: the hmask bit
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m512i lo = _mm512_srli_epi16(u.qs[8 * h + 4 * half + t], 2 * k), hm = u.hm[4 * half + t];
      // hmask bit b of each byte to bit 2 (16-bit shifts, then masked)
      const __m512i top = _mm512_and_si512(b <= 2 ? _mm512_slli_epi16(hm, 2 - b) : _mm512_srli_epi16(hm, b - 2), _mm512_set1_epi8(4));
      // bits 0, 1 of lo | top: ternary-logic 0xE4 is c ? a : b
      q[t] = _mm512_ternarylogic_epi32(lo, top, _mm512_set1_epi8(3), 0xE4);
    }
  }
  static __m512i scale(const rows& u, int j) {
    auto field = [](__m512i x, int shift, int mask) {  // (x >> shift) & mask, shift may be negative
      return _mm512_and_si512(shift >= 0 ? _mm512_srli_epi32(x, shift) : _mm512_slli_epi32(x, -shift), _mm512_set1_epi32(mask));
    };
    const int lb = 8 * (j % 8) + 4 * (j / 8);     // bit of the low four in scales[0 .. 7]
    const int hb = 8 * (j % 4) + 2 * (j / 4);     // bit of the top two in scales[8 .. 11]
    const __m512i s = _mm512_or_si512(field(u.sc[lb / 32], lb % 32, 0xf), field(u.sc[2], hb - 4, 0x30));
    return _mm512_sub_epi32(s, _mm512_set1_epi32(32));
  }
  // (d * da) * float(isum)
  static __m512 term(__m512 s, const rows& u, __m512 da) { return _mm512_mul_ps(_mm512_mul_ps(u.d, da), s); }
};

// q2_K: weight i = 128h + 32k + l (k < 4, l < 32) is the 2-bit code u at bits 2k, 2k+1 of
// qs[32h + l] (unsigned, off 0); scales[j] holds sub-block j's scale (low nibble) and min
// (high nibble). isum = sum_j scale_j * (sub-block sum); summs = sum_j min_j * bsums[j] as the
// bsums lie, a vpdpwssd per pair of sub-blocks. da * dw * float(isum) - da * dmin * float(summs).
struct q2_K {
  using W = formats::q2_K;
  static constexpr int off = 0, groups = 16;
  struct rows {
    __m512i qs[16];  // lane r: qs dword p of row r
    __m512i sc[4];   // lane r: scales dword p of row r
    __m512i m[8];    // lane r: mins 2p, 2p+1 of row r as two int16
    __m512 d, dmin;
  };
  static void load(const W::block* const* w, std::int64_t i, rows& u) {
    const std::uint8_t* p[kRows];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) p[r] = w[r][i].qs + 32 * h;
      rows_x8(p, u.qs + 8 * h);
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) p[r] = w[r][i].scales;
    rows_x4(p, u.sc);
    mins(u);
    u.d = f16_rows<offsetof(W::block, d)>(w, i);
    u.dmin = f16_rows<offsetof(W::block, dmin)>(w, i);
  }
  // tiled (cpu/tiled.hpp): scales and qs dwords as vectors, then the sixteen d and dmin
  static void load(tiled_rows w, std::int64_t i, rows& u) {
    const unsigned char* col = w.column<W::block>(i);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) u.qs[k] = qs_tiled<offsetof(W::block, qs)>(col, k);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) u.sc[k] = qs_tiled<offsetof(W::block, scales)>(col, k);
    mins(u);
    u.d = f16_tiled<offsetof(W::block, d)>(col);
    u.dmin = f16_tiled<offsetof(W::block, dmin)>(col);
  }
  static void mins(rows& u) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {  // bytes 2k, 2k+1: their high nibbles to bits 0-3 and 16-19
      const __m512i t = k % 2 ? _mm512_srli_epi32(u.sc[k / 2], 16) : u.sc[k / 2];
      u.m[k] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(t, 4), _mm512_set1_epi32(0xf)),
                               _mm512_and_si512(_mm512_slli_epi32(t, 4), _mm512_set1_epi32(0xf0000)));
    }
  }
  static void chunk(const rows& u, int j, __m512i* q) {  // weights 16j .. 16j+15: activation dwords 4j .. 4j+3
    const int h = j / 8, k = (j / 2) % 4, half = j % 2;
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) q[t] = _mm512_and_si512(_mm512_srli_epi16(u.qs[8 * h + 4 * half + t], 2 * k), _mm512_set1_epi8(3));
  }
  static __m512i scale(const rows& u, int j) {  // the low nibble of scales[j]
    return _mm512_and_si512(_mm512_srli_epi32(u.sc[j / 4], 8 * (j % 4)), _mm512_set1_epi32(0xf));
  }
  // dall = da * dw, dmin = da * dmin_w; dall * float(isum) - dmin * float(summs)
  static __m512 finish(__m512i isum, const rows& u, const formats::q8_K::block& a) {
    __m512i summs = _mm512_setzero_si512();  // int16 bsums times mins <= 15: within int32
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      std::int32_t b;
      std::memcpy(&b, a.bsums + 2 * k, 4);
      summs = _mm512_dpwssd_epi32(summs, u.m[k], _mm512_set1_epi32(b));
    }
    const __m512 da = _mm512_set1_ps(a.d);
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(da, u.d), _mm512_cvtepi32_ps(isum)),
                         _mm512_mul_ps(_mm512_mul_ps(da, u.dmin), _mm512_cvtepi32_ps(summs)));
  }
};

// ---- the tile ----------------------------------------------------------------------------

// C zero vectors (the columns' float sums, or a block's integer sums).
template <int C, class V>
inline void zero(V (&v)[C]) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) v[c] = V{};
}

// Group j of block i against the C columns: acc[c] += (the vpdpbusd sum of the group's code
// vectors q against column c's activation dwords, from start[c][j]) * sc by vpmulld.
template <class F, int C>
inline void group_columns(const __m512i* q, __m512i sc, const formats::q8_K::block* const* a, std::int64_t i, int j,
                          const std::int32_t (*start)[F::groups], __m512i* acc) {
  constexpr int cd = 64 / F::groups;  // activation dwords per group
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const std::int8_t* y = a[c][i].qs + 4 * cd * j;
    __m512i s = F::off != 0 ? _mm512_set1_epi32(start[c][j]) : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < cd; ++k) {
      std::int32_t yk;
      std::memcpy(&yk, y + 4 * k, 4);
      s = _mm512_dpbusd_epi32(s, q[k], _mm512_set1_epi32(yk));
    }
    acc[c] = _mm512_add_epi32(acc[c], _mm512_mullo_epi32(s, sc));
  }
}

// Block i's columns: their group starts (-off * each group's activation sum) before, and
// after, the block's float term added to each column's running sum.
template <class F, int C>
inline void block_starts(const formats::q8_K::block* const* a, std::int64_t i, std::int32_t (*start)[F::groups]) {
  if constexpr (F::off != 0)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) group_starts<F::groups>(a[c][i], F::off, start[c]);
}
template <class F, int C>
inline void block_terms(const typename F::rows& u, const formats::q8_K::block* const* a, std::int64_t i,
                        const __m512i* acc, __m512* sum) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    if constexpr (requires { F::finish(acc[c], u, a[c][i]); })  // formats whose definitions read bsums
      sum[c] = _mm512_add_ps(sum[c], F::finish(acc[c], u, a[c][i]));
    else
      sum[c] = _mm512_add_ps(sum[c], F::term(_mm512_cvtepi32_ps(acc[c]), u, _mm512_set1_ps(a[c][i].d)));
  }
}

// out[c][r] = the row dot of w[r] and a[c], r < 16, c < C. Per block and group j of
// 256 / G weights: F::chunk's code vectors u = w + off, held while every column takes them
// (vpdpbusd on its broadcast activation dwords, from -off * the group's activation sum),
// the group sum times the rows' integer scale F::scale by vpmulld, added up as integers;
// then the block's float term F::term, added to the column's running sum in block order.
// w: the sixteen rows' pointers, or a tiled group (tiled_rows).
template <class F, int C, class Rows>
inline void tile(Rows w, const formats::q8_K::block* const* a, std::int64_t n, float (*out)[kRows],
                 const ahead& next = {}) {
  constexpr int G = F::groups, cd = 64 / G;
  __m512 sum[C];
  zero(sum);
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    next.block(i);
    typename F::rows u;
    F::load(w, i, u);
    alignas(64) std::int32_t start[C][G];
    block_starts<F, C>(a, i, start);
    __m512i acc[C];
    zero(acc);
#pragma GCC unroll 16
    for (int j = 0; j < G; ++j) {
      __m512i q[cd];
      F::chunk(u, j, q);
      group_columns<F, C>(q, F::scale(u, j), a, i, j, start, acc);
    }
    block_terms<F, C>(u, a, i, acc, sum);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out[c], sum[c]);
}

// ---- decoded rows (prompts) --------------------------------------------------------------

// One block of sixteen rows decoded: the rows as F::load leaves them (the float term's
// inputs), and per group j the code vectors F::chunk makes and the scales F::scale gives.
template <class F>
struct decoded_block {
  typename F::rows u;
  __m512i q[F::groups][64 / F::groups];
  __m512i sc[F::groups];
};

// The n / 256 blocks of rows w (pointers or a tiled group) into d.
template <class F, class Rows>
inline void decode(Rows w, std::int64_t n, decoded_block<F>* d) {
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    F::load(w, i, d[i].u);
#pragma GCC unroll 16
    for (int j = 0; j < F::groups; ++j) {
      F::chunk(d[i].u, j, d[i].q[j]);
      d[i].sc[j] = F::scale(d[i].u, j);
    }
  }
}

// tile's sums from decoded rows: the same integer and float operations in the same order,
// so the same bits; the unpack is paid once per row block instead of once per tile call.
template <class F, int C>
inline void tile_decoded(const decoded_block<F>* d, const formats::q8_K::block* const* a, std::int64_t n,
                         float (*out)[kRows]) {
  constexpr int G = F::groups;
  __m512 sum[C];
  zero(sum);
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    alignas(64) std::int32_t start[C][G];
    block_starts<F, C>(a, i, start);
    __m512i acc[C];
    zero(acc);
#pragma GCC unroll 16
    for (int j = 0; j < G; ++j) group_columns<F, C>(d[i].q[j], d[i].sc[j], a, i, j, start, acc);
    block_terms<F, C>(d[i].u, a, i, acc, sum);
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
    static_assert(R >= 1 && R <= kRows, "a lattice tile holds at most 16 weight rows");
    const wblock* rows[kRows];
    for (int r = 0; r < kRows; ++r) rows[r] = w[r < R ? r : 0];
    constexpr int cb = C < 8 ? C : 8;
    float o[cb][kRows];
    for (int c0 = 0; c0 < C; c0 += cb) {
      if (C - c0 >= cb) {
        avx512_iq16_tile::tile<F, cb>(rows, a + c0, n, o, C == 1 ? next : ahead{});  // not ADL's legacy tile
        for (int c = 0; c < cb; ++c)
          for (int r = 0; r < R; ++r) out[r * C + c0 + c] = o[c][r];
      } else {
        for (int c = c0; c < C; ++c) {
          avx512_iq16_tile::tile<F, 1>(rows, a + c, n, o);
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
    avx512_iq16_tile::tile<F, C>(tiled_rows{static_cast<const unsigned char*>(group)}, a, n, o,
                                  C == 1 ? next : ahead{});
    store_rows_by_column<C>(o, out);
  }
};

// Whether F loads a tiled group (cpu/tiled.hpp's formats of this file: q2_K, q3_K, q6_K,
// iq2_s, iq3_s).
template <class F>
constexpr bool loads_tiled() {
  return requires(tiled_rows w, typename F::rows& u) { F::load(w, std::int64_t{0}, u); };
}

// Prompts through decoded rows (cpu/matmul.hpp decoded_tile), for the formats whose unpack
// outweighs a column block's vpdpbusd work: sixteen rows decoded once per task into the
// thread's scratch (decoded_block<F>, about 5-6 KiB a block of 256 weights), then run
// against every column block of the panel group by tile_decoded.
template <class F, int MinN>  // MinN: from how many columns (0: never)
struct decoded_prompts {
  static constexpr bool decoded_rows_tile = true;
  static constexpr int decoded_rows = kRows;
  static constexpr std::int64_t decoded_min_n = MinN;
  static std::size_t decoded_bytes(std::int64_t k) { return sizeof(decoded_block<F>) * static_cast<std::size_t>(k / qk_k); }
  // rows w[0 .. 15], k weights each, into dst (decoded_bytes(k), 64-byte aligned)
  static void decode_rows(const typename F::W::block* const* w, std::int64_t k, void* dst) {
    decode<F>(w, k, static_cast<decoded_block<F>*>(dst));
  }
  // the sixteen rows of a tiled group (cpu/tiled.hpp) as they lie, into dst: no untile first
  static void decode_tiled_rows(const void* group, std::int64_t k, void* dst)
    requires(loads_tiled<F>())
  {
    decode<F>(tiled_rows{static_cast<const unsigned char*>(group)}, k, static_cast<decoded_block<F>*>(dst));
  }
  // out[r * C + c]: decoded row r (0 .. 15) against column a[c], C = 1, 2, 4, 8
  template <int C>
  static void run_decoded(const void* dec, const formats::q8_K::block* const* a, std::int64_t k, float* out) {
    static_assert(C >= 1 && C <= 8);
    float o[C][kRows];
    tile_decoded<F, C>(static_cast<const decoded_block<F>*>(dec), a, k, o);
    store_rows_by_column<C>(o, out);
  }
};
template <class F>
struct decoded_prompts<F, 0> {};

}  // namespace gk::simd::avx512_iq16_tile

namespace gk {

// decode: as the legacy tiles' (avx512/dot_tile_legacy.hpp); dec_min_n: prompts of that many columns
// or more through decoded rows (decoded_prompts; 0: never).
#define GK_AVX512_IQ16_TILE(fmt, dec, dec_min_n)                                                                  \
  template <>                                                                                                      \
  struct dot_tile<formats::fmt, simd::avx512>                                                                      \
      : simd::avx512_iq16_tile::decoded_prompts<simd::avx512_iq16_tile::fmt, dec_min_n> {                         \
    static constexpr bool specialised = true, decode = dec;                                                        \
    static constexpr bool tiled = simd::avx512_iq16_tile::loads_tiled<simd::avx512_iq16_tile::fmt>();              \
    static constexpr int rows = simd::avx512_iq16_tile::kRows, cols = 8;                                            \
    template <int R, int C>                                                                                        \
    static void run(const formats::fmt::block* const* w, const formats::q8_K::block* const* a, std::int64_t n,     \
                    float* out, const void* next = nullptr, std::size_t next_bytes = 0) {                          \
      simd::avx512_iq16_tile::runner<simd::avx512_iq16_tile::fmt>::run<R, C>(w, a, n, out,                         \
                                                                             {next, next_bytes, n / qk_k});        \
    }                                                                                                              \
    template <int C>                                                                                               \
    static void run_tiled(const void* group, const formats::q8_K::block* const* a, std::int64_t n, float* out,    \
                          const void* next = nullptr, std::size_t next_bytes = 0) {                               \
      simd::avx512_iq16_tile::runner<simd::avx512_iq16_tile::fmt>::run_tiled<C>(group, a, n, out,                  \
                                                                                {next, next_bytes, n / qk_k});     \
    }                                                                                                              \
  };

GK_AVX512_IQ16_TILE(iq2_xxs, true, 16)
GK_AVX512_IQ16_TILE(iq3_xxs, true, 16)
GK_AVX512_IQ16_TILE(iq3_s, true, 16)
GK_AVX512_IQ16_TILE(iq2_xs, true, 16)
GK_AVX512_IQ16_TILE(iq2_s, true, 16)
GK_AVX512_IQ16_TILE(iq1_s, true, 16)
GK_AVX512_IQ16_TILE(iq1_m, true, 16)
GK_AVX512_IQ16_TILE(q6_K, false, 32)  // its row dots read memory faster (see above)
GK_AVX512_IQ16_TILE(q3_K, true, 32)
GK_AVX512_IQ16_TILE(q2_K, true, 48)

#undef GK_AVX512_IQ16_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
