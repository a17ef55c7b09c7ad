// SPDX-License-Identifier: MIT
// AVX2 tiles of the lattice formats (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m):
// the pair tiles of dot_tile_pairs.hpp, eight weight rows by C activation columns.
//
// Their row dots (dot_iq.hpp) spend most of a block on unpacking the row: grid rows
// gathered by scalar loads, sign bytes turned into masks, scales picked. Here a row is
// unpacked once per block for its C columns, and what a column alone determines (its
// 16- or 8-weight sums) once per block for the eight rows.
//
// Each weight is a signed grid value w (|w| <= 62; iq1: -1, 0, 1) that a row turns into
// the unsigned byte w + o (o = 64; iq1: 1), so each column needs one pmaddubsw per 32
// weights, its pairs within +-2 * 126 * 128 = +-32256 for every activation byte, -128
// included (negating the activation bytes, as psignb does, would not be exact); the sum
// over a sub-block of w * q is then that minus o times the column's own sum of q there,
// taken from its bytes once per block. (The iq2/iq3 row dots split g by its sign into two
// pmaddubsw instead; per column that is twice the multiplies, and the four-column tiles
// ran 12-25 % slower that way, Zen 3.) So each pair's integer sum is the definition's
// integer exactly, and the float part is the definition's operations in its order, lane
// by lane: every output is the scalar definition's bits.
//
// For prompts (from decoded_min_n columns, cpu/matmul.hpp decoded_tile) a block of 16 rows
// is decoded once per task into the thread's scratch (decoded_block: the offset bytes, the
// scales, the correction vectors, the row's float factor) and run against every column
// block of the panel group: the unpack, once per four columns above, is then once per
// task, and each 32 weights of a pair cost one pmaddubsw and one pmaddwd. q3_K (its codes
// offset by 4) and tq2_0 (its codes, added in 16 bits over a block as its pair tile does)
// go the same way; their pair tiles stay in dot_tile_pairs.hpp.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq1.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/simd/avx2/dot_iq.hpp"
#include "gk/simd/avx2/dot_tile_pairs.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

// Nested in the pair tiles' namespace (its helpers in sight), its own names apart from theirs.
namespace gk::simd::avx2_pair_tile::lattice {

// A row's 32 weights k: their offset bytes u = w + o and their scales as 16-bit lanes.
struct offset_chunk { __m256i u, scales; };

// A row block's vectors that its pairs' corrections read (F::corr against a column's sums).
struct row_corr { __m256i v[2]; };

// The pairs' integer sums of a row whose weights 32k .. 32k + 31 are chunk(k): per column
// init(column) (the offset's correction) plus, over k, pmaddubsw(u, q) times the scales by
// pmaddwd (bounds at each caller). The k loop stays a loop: unrolled into the tile's eight
// rows it made 14 KB of code for iq2_xxs' one-column tile, which ran 1.4x slower with one
// column and 1.7x with four (bench_matmul N 1 and 64, Zen 3).
template <int C, class Col, class Init, class Chunk>
inline void offset_pairs(const Col* cs, __m256i* const* v, Init init, Chunk chunk) {
  __m256i acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = init(cs[c]);
#pragma GCC unroll 1
  for (int k = 0; k < 8; ++k) {
    const offset_chunk w = chunk(k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(w.u, load(cs[c].q + 32 * k)), w.scales));
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) v[0][c] = acc[c];
}

// sc[k]: the scales of 16-weight sub-blocks 2k (16-bit lanes 0-7) and 2k + 1 (8-15), from
// bytes in pick_scales' layout, picked before the k loop, where k is a constant (one
// shuffle each; in the loop iq2_xs' one-column tile ran at 19.9 GFLOP/s against 21.4).
inline void scales_per16(__m256i bytes, __m256i* sc) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) sc[k] = pick_scales(bytes, k);
}

// The eight four-byte sums of each 32-byte chunk of a q8_K block's quants (pmaddubsw by 1:
// pairs within +-256), lane l of m[k] covering bytes 32k + 4l .. + 3.
inline void quad_sums(const std::int8_t* q, __m256i* m) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) m[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(q + 32 * k)), ones16);
}

// A q8_K column: its quant bytes and, in 32-bit lane k, the sums of chunk k's two 16-weight
// halves as the 16-bit pair (S_2k, S_2k+1) (|S| <= 2048), taken from the bytes as the
// definitions' integer sums read them (not from bsums).
struct col_sums { const std::int8_t* q; __m256i s; };
inline col_sums prep_col_sums(const formats::q8_K::block& y) {
  __m256i m[8];
  quad_sums(y.qs, m);
  // two hadds give [S0 S2 S4 S6 | S1 S3 S5 S7] of chunks 0-3, and of 4-7 likewise
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
  const __m256i even = _mm256_permute2x128_si256(a, b, 0x20), odd = _mm256_permute2x128_si256(a, b, 0x31);
  return {y.qs, _mm256_blend_epi16(even, _mm256_slli_epi32(odd, 16), 0xaa)};
}

// -64 * (2s + 1) in both 16-bit halves of 32-bit lane k, s the 4-bit scale of chunk k in
// lane k: the offset's correction against col_sums (|.| <= 1984, times |S| <= 2048 twice
// by pmaddwd: within +-2^23).
inline __m256i minus64_per32(__m256i s) {
  const __m256i both = _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
  return _mm256_sub_epi16(_mm256_set1_epi16(-64), _mm256_slli_epi16(both, 7));
}

// 64 + g * sign as unsigned bytes, g the grid bytes (<= 62: 2 .. 126), neg 0xff where
// the sign is negative.
inline __m256i plus64(__m256i g, __m256i neg) {
  return _mm256_add_epi8(_mm256_sub_epi8(_mm256_xor_si256(g, neg), neg), _mm256_set1_epi8(64));
}

// Four 64-bit grid rows as one vector (the iq2 and iq1 grids: 8 bytes per group of 8).
template <class Grid, class Index>
inline __m256i grid4(const Grid& grid, Index q0, Index q1, Index q2, Index q3) {
  return _mm256_set_epi64x(static_cast<long long>(grid[q3]), static_cast<long long>(grid[q2]),
                           static_cast<long long>(grid[q1]), static_cast<long long>(grid[q0]));
}

// Eight 32-bit grid rows as one vector (the iq3 grids: 4 bytes per index).
template <class Grid, class Index>
inline __m256i grid8(const Grid& grid, const Index* q) {
  return _mm256_set_epi32(static_cast<int>(grid[q[7]]), static_cast<int>(grid[q[6]]), static_cast<int>(grid[q[5]]),
                          static_cast<int>(grid[q[4]]), static_cast<int>(grid[q[3]]), static_cast<int>(grid[q[2]]),
                          static_cast<int>(grid[q[1]]), static_cast<int>(grid[q[0]]));
}

// 0x80 at byte n (n < 16) where n has odd parity: completes ksigns_iq2xs' even parity.
inline __m256i odd_parity4() {
  return _mm256_broadcastsi128_si256(_mm_set_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0));
}

// The sign bytes of the 32 groups of 8 of iq2_xxs and iq3_xxs, byte 4k + l for group l of
// chunk k (sign_bits_to_mask's order), from their words aux (lane k): the 7-bit
// ksigns_iq2xs index at bits 7l .. 7l + 6, completed to even parity by bit 7 as the
// codebook is. All 32 at once in vectors: one ksigns_mask load per group of 8, as the row
// dots do, left iq3_xxs' one-column tile at 16.1 GFLOP/s against 18.7 (Zen 3).
inline void ksigns_bytes(__m256i aux, std::uint8_t* out) {
  const __m256i m7f = _mm256_set1_epi32(0x7f), low4 = _mm256_set1_epi8(0x0f), odd4 = odd_parity4();
  const __m256i b01 = _mm256_or_si256(_mm256_and_si256(aux, m7f),
                                      _mm256_and_si256(_mm256_slli_epi32(aux, 1), _mm256_slli_epi32(m7f, 8)));
  const __m256i b23 = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_slli_epi32(m7f, 16)),
                                      _mm256_and_si256(_mm256_slli_epi32(aux, 3), _mm256_slli_epi32(m7f, 24)));
  const __m256i b = _mm256_or_si256(b01, b23);
  const __m256i odd = _mm256_xor_si256(_mm256_shuffle_epi8(odd4, _mm256_and_si256(b, low4)),
                                       _mm256_shuffle_epi8(odd4, _mm256_and_si256(_mm256_srli_epi16(b, 4), low4)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_or_si256(b, odd));
}

inline std::uint32_t u32_at(const void* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The q8_K-activated formats of one integer sum per pair whose row scale is the f16 d.
struct iq_d_yd {
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
};

// The iq2 and iq3 formats: signed grid bytes offset by 64 against col_sums; each pmaddubsw
// pair within +-2 * 126 * 128 = +-32256, times 2s + 1 <= 31 by pmaddwd, the correction as
// minus64_per32: exact in 32 bits.
struct iq_grid : iq_d_yd {
  using col = col_sums;
  static col prep_col(const formats::q8_K::block& y) { return prep_col_sums(y); }
  static void col_ints(const col*, int, __m256i*) {}
  // the offset's correction of a pair: the row's minus64 (corr[0]) against the column's sums
  static __m256i corr(const row_corr& r, const col& c) { return _mm256_madd_epi16(c.s, r.v[0]); }
};

// ((d * yd) * s) * k, k = 1 / inverse_k: the iq2 formats (1/8) and iq3_xxs (1/4).
template <int inverse_k>
struct iq_scaled : iq_grid {
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0])),
                         _mm256_set1_ps(1.0f / inverse_k));
  }
};

// iq2_xxs: per 32 weights two words, four 8-bit grid indices and four 7-bit sign indices
// with the scale s at bits 28-31; grid bytes 8 .. 43. Value ((d * yd) * s) * 0.125.
struct iq2_xxs_t : iq_scaled<8> {
  using W = formats::iq2_xxs;
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    // the aux words (the high halves of the 64-bit words) in order
    const __m256i aux = _mm256_permutevar8x32_epi32(_mm256_blend_epi32(_mm256_srli_epi64(load(b.qs), 32), load(b.qs + 16), 0xaa),
                                                    _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    alignas(32) std::uint8_t sb[32];
    ksigns_bytes(aux, sb);
    const std::uint8_t* gi = reinterpret_cast<const std::uint8_t*>(b.qs);  // index of group l of chunk k: byte 8k + l
    body(row_corr{{minus64_per32(_mm256_srli_epi32(aux, 28))}}, [&](int k) {
      const std::uint8_t* q = gi + 8 * k;
      return offset_chunk{plus64(grid4(codebooks::iq2xxs_grid, q[0], q[1], q[2], q[3]), sign_bits_to_mask(u32_at(sb + 4 * k))),
                          _mm256_set1_epi16(static_cast<short>(2 * (q[7] >> 4) + 1))};
    });
  }
};

// The 4-bit scales per 16 weights of iq2_xs and iq2_s (byte k: s_2k low, s_2k+1 high):
// 2s + 1 as bytes, sub-block h at byte h in both halves (nibble_scales' layout, for
// pick_scales), and -64 * (2s + 1) as 16-bit (s_2k, s_2k+1) in 32-bit lane k (|.| <= 1984,
// against col_sums by pmaddwd within +-2^23).
struct scales16 { __m256i odd, minus64; };
inline scales16 nibble_scales16(const std::uint8_t* p) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), m4 = _mm_set1_epi8(0x0f);
  const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
  return {_mm256_broadcastsi128_si256(_mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1))),
          _mm256_sub_epi16(_mm256_set1_epi16(-64), _mm256_slli_epi16(_mm256_cvtepu8_epi16(s), 7))};
}

// iq2_xs: per group of 8 a 9-bit grid index and a 7-bit sign index in one u16; grid bytes
// 8 .. 43; 4-bit scales per 16 weights. Value ((d * yd) * s) * 0.125.
struct iq2_xs_t : iq_scaled<8> {
  using W = formats::iq2_xs;
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    const __m256i m511 = _mm256_set1_epi16(511), odd4 = odd_parity4();
    alignas(32) std::uint16_t gi[32];
    alignas(32) std::uint8_t sb[32];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load(b.qs + 16 * h);
      _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_and_si256(q, m511));
      const __m256i s7 = _mm256_srli_epi16(q, 9);  // 7 sign bits, high byte 0
      const __m256i full = _mm256_or_si256(s7, _mm256_shuffle_epi8(odd4, _mm256_xor_si256(s7, _mm256_srli_epi16(q, 13))));
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(full, full), 0x08);  // 16 bytes in order, low half
      _mm_store_si128(reinterpret_cast<__m128i*>(sb + 16 * h), _mm256_castsi256_si128(packed));
    }
    const scales16 s16 = nibble_scales16(b.scales);
    __m256i sc[8];
    scales_per16(s16.odd, sc);
    body(row_corr{{s16.minus64}}, [&](int k) {
      const std::uint16_t* q = gi + 4 * k;
      return offset_chunk{plus64(grid4(codebooks::iq2xs_grid, q[0], q[1], q[2], q[3]), sign_bits_to_mask(u32_at(sb + 4 * k))),
                          sc[k]};
    });
  }
};

// iq2_s: per group of 8 a 10-bit grid index (8 bits in qs, 2 in qh) and 8 sign bits;
// grid bytes 8 .. 43; 4-bit scales per 16 weights. Value ((d * yd) * s) * 0.125.
struct iq2_s_t : iq_scaled<8> {
  using W = formats::iq2_s;
  template <class Body>
  static void with_row(const W::block& b, Body body) {
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
    std::uint64_t qh8;
    std::memcpy(&qh8, b.qh, 8);
    const __m256i qh = _mm256_set1_epi64x(static_cast<long long>(qh8));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = _mm256_cvtepu8_epi16(load128(b.qs + 16 * h));
      const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, qh_pick[h]), shift), m300);
      _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
    }
    const scales16 s16 = nibble_scales16(b.scales);
    __m256i sc[8];
    scales_per16(s16.odd, sc);
    body(row_corr{{s16.minus64}}, [&](int k) {
      const std::uint16_t* q = gi + 4 * k;
      return offset_chunk{
          plus64(grid4(codebooks::iq2s_grid, q[0], q[1], q[2], q[3]), sign_bits_to_mask(u32_at(b.qs + 32 + 4 * k))), sc[k]};
    });
  }
};

// iq3_xxs: eight 8-bit grid indices per 32 weights, and a word of four 7-bit sign indices
// with the scale s at bits 28-31; grid bytes 4 .. 62. Value ((d * yd) * s) * 0.25.
struct iq3_xxs_t : iq_scaled<4> {
  using W = formats::iq3_xxs;
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    const __m256i aux = load(b.qs + qk_k / 4);
    alignas(32) std::uint8_t sb[32];
    ksigns_bytes(aux, sb);
    body(row_corr{{minus64_per32(_mm256_srli_epi32(aux, 28))}}, [&](int j) {
      return offset_chunk{plus64(grid8(codebooks::iq3xxs_grid, b.qs + 8 * j), sign_bits_to_mask(u32_at(sb + 4 * j))),
                          _mm256_set1_epi16(static_cast<short>(2 * (b.qs[qk_k / 4 + 4 * j + 3] >> 4) + 1))};
    });
  }
};

// iq3_s: 9-bit grid indices (8 bits in qs, 1 in qh) per 4 weights, 8 sign bits per 8
// weights, 4-bit scales per 32; grid bytes 1 .. 15. Value (d * yd) * s.
struct iq3_s_t : iq_grid {
  using W = formats::iq3_s;
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    // 16-bit lane k of quarter t (index 16t + k: sub-block j = 2t + k/8, point k%8) takes
    // bit k%8 of qh[j] as index bit 8
    const __m256i bit = _mm256_set_epi16(128, 64, 32, 16, 8, 4, 2, 1, 128, 64, 32, 16, 8, 4, 2, 1);
    const __m256i b256 = _mm256_set1_epi16(256);
    alignas(32) std::uint16_t gi[64];
    const __m256i qh = _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qh)));
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m256i lo = _mm256_cvtepu8_epi16(load128(b.qs + 16 * t));
      const __m256i hj = _mm256_shuffle_epi8(qh, _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(0x8000 | (2 * t + 1))),
                                                                   _mm_set1_epi16(static_cast<short>(0x8000 | (2 * t)))));
      const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi16(_mm256_and_si256(hj, bit), bit), b256);
      _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * t), _mm256_or_si256(lo, hi));
    }
    // s of sub-block j: nibble j of the four scale bytes
    const __m256i s = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u32_at(b.scales))),
                                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                       _mm256_set1_epi32(0xf));
    body(row_corr{{minus64_per32(s)}}, [&](int j) {
      const int ls = 1 + 2 * ((b.scales[j / 2] >> (4 * (j & 1))) & 0xf);
      return offset_chunk{plus64(grid8(codebooks::iq3s_grid, gi + 8 * j), sign_bits_to_mask(u32_at(b.signs + 4 * j))),
                          _mm256_set1_epi16(static_cast<short>(ls))};
    });
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// ---- iq1_s, iq1_m: coordinates c in {-1, 0, 1} offset by 1 -----------------------------

// Per 32 weights k, u = c + 1 (0 .. 2) from the rows' iq1s_grid indices gi, and 8 * ls
// (<= 120) as the scales: each pmaddubsw pair within +-2 * 2 * 128 = +-512, times <= 120
// by pmaddwd, exact in 32 bits.
inline offset_chunk iq1_chunk(const std::uint16_t* gi, int k, __m256i scales8) {
  const std::uint16_t* q = gi + 4 * k;
  return {_mm256_add_epi8(grid4(codebooks::iq1s_grid, q[0], q[1], q[2], q[3]), _mm256_set1_epi8(1)), scales8};
}

// iq1_s: per sub-block of 32 a scale 2s + 1 and one shift sign, per group of 8 an 11-bit
// index into iq1s_grid. With U = sum (c + 1) * q, S the column's 16-weight sums from its
// bytes and B the q8_K bsums (which the definition reads for the shift):
//   8 * sum + sum_shift = sum ls * (8 * U - 8 * (S_2ib + S_2ib+1) + sign * (B_2ib + B_2ib+1)).
// Value (d * yd) * (s * delta).
struct iq1_s_t : iq_d_yd {
  using W = formats::iq1_s;
  struct col { const std::int8_t* q; __m256i s, bsums; };
  static col prep_col(const formats::q8_K::block& y) {
    const col_sums c = prep_col_sums(y);
    return {c.q, c.s, load(y.bsums)};
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    // 16-bit lane g of half h (group 16h + g, l = g % 4) reads qh[4h + g/4] and moves its
    // 3-bit field l (bits 3l..3l+2) to bits 8-10: times 256, 32, 4 (low product) for
    // l = 0, 1, 2, and a shift right by 1 (high product with 2^15) for l = 3
    const __m256i qh_pick[2] = {
        _mm256_set_epi64x(0x0706070607060706, 0x0504050405040504, 0x0302030203020302, 0x0100010001000100),
        _mm256_set_epi64x(0x0f0e0f0e0f0e0f0e, 0x0d0c0d0c0d0c0d0c, 0x0b0a0b0a0b0a0b0a, 0x0908090809080908)};
    const __m256i mul_lo = _mm256_set1_epi64x(0x0000000400200100);
    const __m256i mul_hi = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i m700 = _mm256_set1_epi16(0x700);
    alignas(32) std::uint16_t gi[32];
    const __m128i qh = load128(b.qh);
    const __m256i qh2 = _mm256_broadcastsi128_si256(qh);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = _mm256_cvtepu8_epi16(load128(b.qs + 16 * h));
      const __m256i hq = _mm256_shuffle_epi8(qh2, qh_pick[h]);
      const __m256i hi = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(hq, mul_lo), _mm256_mulhi_epu16(hq, mul_hi)), m700);
      _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
    }
    // ls = 2s+1 per sub-block (16-bit lane ib), and ls times the shift sign
    const __m128i s3 = _mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7));
    const __m128i ls = _mm_add_epi16(_mm_add_epi16(s3, s3), _mm_set1_epi16(1));
    const __m128i negm = _mm_srai_epi16(qh, 15);
    const __m128i lss = _mm_sub_epi16(_mm_xor_si128(ls, negm), negm);
    const __m128i m8ls = _mm_sub_epi16(_mm_setzero_si128(), _mm_slli_epi16(ls, 3));
    // in both 16-bit halves of 32-bit lane ib: ls * sign against (B_2ib, B_2ib+1) (|.| <=
    // 15 * 2 * 2048) and -8 * ls against (S_2ib, S_2ib+1) (|.| <= 120 * 2 * 2048)
    const __m256i lss2 = _mm256_set_m128i(_mm_unpackhi_epi16(lss, lss), _mm_unpacklo_epi16(lss, lss));
    const __m256i m8ls2 = _mm256_set_m128i(_mm_unpackhi_epi16(m8ls, m8ls), _mm_unpacklo_epi16(m8ls, m8ls));
    // 8 * ls of sub-block k (byte 2k, the low byte of 16-bit lane k) in every lane
    const __m256i sc8 = _mm256_broadcastsi128_si256(_mm_slli_epi16(ls, 3));
    body(row_corr{{lss2, m8ls2}},
         [&](int k) { return iq1_chunk(gi, k, _mm256_shuffle_epi8(sc8, _mm256_set1_epi16(static_cast<short>(0x8000 | 2 * k)))); });
  }
  static __m256i corr(const row_corr& r, const col& c) {
    return _mm256_add_epi32(_mm256_madd_epi16(r.v[0], c.bsums), _mm256_madd_epi16(r.v[1], c.s));
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]),
                         _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_set1_ps(codebooks::iq1s_delta)));
  }
};

// iq1_m: per sub-block of 16 a scale 2s + 1, per group of 8 an 11-bit index and a shift
// sign. With U_j = sum (c + 1) * q and E_g the column's 8-weight sums from its bytes:
//   8 * sum + sum_shift = 8 * sum_j ls_j * U_j + sum_g ls_{g/2} * (sign_g - 8) * E_g.
// Value (scale * yd) * (s * delta), scale the f16 spread over the scales' top nibbles.
struct iq1_m_t {
  using W = formats::iq1_m;
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  // e[h]: E_{16h} .. E_{16h + 15} in order (|E| <= 1024)
  struct col { const std::int8_t* q; __m256i e[2]; };
  static col prep_col(const formats::q8_K::block& y) {
    __m256i m[8];
    quad_sums(y.qs, m);
    // hadd of chunks 2i, 2i + 1: [E0 E1 E4 E5 | E2 E3 E6 E7] of their groups; packs of two
    // such pairs of chunks puts the 16-bit pairs (E_2j, E_2j+1) at 32-bit lanes
    // [0 2 4 6 | 1 3 5 7], which the permute puts in order
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    col c{y.qs, {}};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
      c.e[h] = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi32(_mm256_hadd_epi32(m[4 * h], m[4 * h + 1]), _mm256_hadd_epi32(m[4 * h + 2], m[4 * h + 3])), order);
    return c;
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    alignas(32) std::uint16_t gi[32];
    const __m128i m7 = _mm_set1_epi8(7);
    const __m128i qh = load128(b.qh);
    {  // index of group g: qs[g] | top 3 bits (nibble g%2 of qh[g/2], low 3 bits) << 8
      const __m128i lo3 = _mm_and_si128(qh, m7), hi3 = _mm_and_si128(_mm_srli_epi16(qh, 4), m7);
      const __m128i top[2] = {_mm_unpacklo_epi8(lo3, hi3), _mm_unpackhi_epi8(lo3, hi3)};
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i lo = _mm256_cvtepu8_epi16(load128(b.qs + 16 * h));
        const __m256i hi = _mm256_slli_epi16(_mm256_cvtepu8_epi16(top[h]), 8);
        _mm256_store_si256(reinterpret_cast<__m256i*>(gi + 16 * h), _mm256_or_si256(lo, hi));
      }
    }
    // ls = 2s+1 of sub-block j (byte j): the 3-bit field at bit 3(j%4) of scales word j/4,
    // moved to bits 9-11 by multiplying by 2^(9 - 3(j%4)) (higher bits drop out)
    const __m128i lsmul = _mm_set1_epi64x(0x0001000800400200);
    const __m128i sw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i f0 = _mm_mullo_epi16(_mm_shuffle_epi8(sw, _mm_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 1, 0, 1, 0, 1, 0, 1, 0)), lsmul);
    const __m128i f1 = _mm_mullo_epi16(_mm_shuffle_epi8(sw, _mm_set_epi8(7, 6, 7, 6, 7, 6, 7, 6, 5, 4, 5, 4, 5, 4, 5, 4)), lsmul);
    const __m128i m7w = _mm_set1_epi16(7);
    const __m128i f = _mm_packus_epi16(_mm_and_si128(_mm_srli_epi16(f0, 9), m7w), _mm_and_si128(_mm_srli_epi16(f1, 9), m7w));
    const __m128i ls = _mm_add_epi8(_mm_add_epi8(f, f), _mm_set1_epi8(1));
    // ls_{g/2} * (sign_g - 8) for groups 16h .. 16h + 15 (-9 * ls where the sign bit, bit
    // 3 + 4(g%2) of qh[g/2], is set, else -7 * ls; |.| <= 135), against E (<= 135 * 2 * 1024)
    const __m256i sign_bit = _mm256_set1_epi32(0x00800008);
    const __m256i minus7 = _mm256_set1_epi16(-7);
    __m256i wg[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m128i lsg = h ? _mm_unpackhi_epi8(ls, ls) : _mm_unpacklo_epi8(ls, ls);
      const __m128i qhg = h ? _mm_unpackhi_epi8(qh, qh) : _mm_unpacklo_epi8(qh, qh);
      const __m256i neg = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_cvtepu8_epi16(qhg), sign_bit), sign_bit);
      wg[h] = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(lsg), _mm256_add_epi16(minus7, _mm256_add_epi16(neg, neg)));
    }
    // 8 * ls as bytes (<= 120), sub-block j at byte j: chunk k holds sub-blocks 2k, 2k + 1
    __m256i sc[8];
    scales_per16(_mm256_broadcastsi128_si256(_mm_slli_epi16(ls, 3)), sc);
    body(row_corr{{wg[0], wg[1]}}, [&](int k) { return iq1_chunk(gi, k, sc[k]); });
  }
  static __m256i corr(const row_corr& r, const col& c) {
    return _mm256_add_epi32(_mm256_madd_epi16(r.v[0], c.e[0]), _mm256_madd_epi16(r.v[1], c.e[1]));
  }
  // iq1_m::scale's f16 bits: the top nibbles of the four scale words
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    f[0] = f16_lanes([&](int r) {
      const W::block& b = w(r);
      return static_cast<short>((W::word(b, 0) >> 12) | ((W::word(b, 1) >> 8) & 0x00f0) | ((W::word(b, 2) >> 4) & 0x0f00) |
                                (W::word(b, 3) & 0xf000));
    });
  }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]),
                         _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_set1_ps(codebooks::iq1m_delta)));
  }
};

// ---- the traits' rows as the tiles read them ---------------------------------------------

// A row block unpacked as it is read: F::with_row hands its corrections and its chunks
// (computed in the k loop) to offset_pairs.
template <class F>
struct direct : F {
  template <int C>
  static void row_pairs(const typename F::W::block& b, const typename F::col* cs, __m256i* const* v) {
    F::with_row(b, [&](const row_corr& r, auto chunk) {
      offset_pairs<C>(cs, v, [&](const typename F::col& c) { return F::corr(r, c); }, chunk);
    });
  }
};

// A row block decoded once (decoded<F>::decode8) for many columns: what with_row hands out,
// stored. 480 bytes per 256 weights.
struct alignas(32) decoded_block {
  std::uint8_t u[qk_k];    // the offset bytes, chunk k at 32k
  std::int8_t sc[8][16];   // chunk k's scales as bytes, 16-bit lane j's at sc[k][j] (one vpmovsxbw)
  row_corr corr;           // F::corr's row vectors
  float rf;                // the row's float factor (lane r of F::rowf)
};

// F over decoded rows: the same pairs, the same integer sums, the same float operations
// (every output the definition's bits, as direct<F>'s), the row's unpack a few loads.
template <class F>
struct decoded : F {
  struct W {
    using block = decoded_block;
    using dot_type = formats::q8_K;
    static constexpr int block_size = qk_k;
  };
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    f[0] = _mm256_setr_ps(w(0).rf, w(1).rf, w(2).rf, w(3).rf, w(4).rf, w(5).rf, w(6).rf, w(7).rf);
  }
  template <int C>
  static void row_pairs(const decoded_block& b, const typename F::col* cs, __m256i* const* v) {
    if constexpr (requires { F::template decoded_pairs<C>(b.u, cs, v); }) {
      F::template decoded_pairs<C>(b.u, cs, v);  // F's own pairs over u
    } else {
      offset_pairs<C>(cs, v, [&](const typename F::col& c) { return F::corr(b.corr, c); }, [&](int k) {
        return offset_chunk{_mm256_load_si256(reinterpret_cast<const __m256i*>(b.u + 32 * k)),
                            _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(b.sc[k])))};
      });
    }
  }
  // Blocks 0 .. nb - 1 of eight weight rows w[r] into out[r].
  static void decode8(const typename F::W::block* const* w, std::int64_t nb, decoded_block* const* out) {
    for (std::int64_t i = 0; i < nb; ++i) {
      __m256 rf[1];
      F::rowf([&](int r) -> const typename F::W::block& { return w[r][i]; }, rf);
      alignas(32) float rfs[8];
      _mm256_store_ps(rfs, rf[0]);
      for (int r = 0; r < 8; ++r) {
        decoded_block& d = out[r][i];
        d.rf = rfs[r];
        F::with_row(w[r][i], [&](const row_corr& corr, auto chunk) {
          d.corr = corr;
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            const offset_chunk o = chunk(k);
            _mm256_store_si256(reinterpret_cast<__m256i*>(d.u + 32 * k), o.u);
            // the 16-bit scales (-32 .. 120) as their low bytes
            const __m256i lo = _mm256_shuffle_epi8(o.scales, _mm256_broadcastsi128_si256(_mm_setr_epi8(
                                                                 0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1)));
            _mm_store_si128(reinterpret_cast<__m128i*>(d.sc[k]),
                            _mm_unpacklo_epi64(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
          }
        });
      }
    }
  }
};

// dot_tile<W, avx2> of a lattice format: the pair tile of direct<F>, and for prompts
// (cpu/matmul.hpp decoded_tile) sixteen rows decoded once per task into the thread's
// scratch, then run against every column block of the panel group through decoded<F>'s
// eight-row tiles.
template <class F, class Direct, bool Decode>
struct rows_decoded_tile : pair_tile_of<Direct, Decode> {
  using W = typename F::W;
  static constexpr bool decoded_rows_tile = true;
  static constexpr int decoded_rows = 16;
  static constexpr std::int64_t decoded_min_n = 8;
  static std::size_t decoded_bytes(std::int64_t k) { return sizeof(decoded_block) * decoded_rows * static_cast<std::size_t>(k / qk_k); }
  // rows w[0 .. 15], k weights each, into dst (decoded_bytes(k), 32-byte aligned)
  static void decode_rows(const typename W::block* const* w, std::int64_t k, void* dst) {
    const std::int64_t nb = k / qk_k;
    auto* d = static_cast<decoded_block*>(dst);
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      decoded_block* out[8];
      for (int r = 0; r < 8; ++r) out[r] = d + (8 * h + r) * nb;
      decoded<F>::decode8(w + 8 * h, nb, out);
    }
  }
  // out[r * C + c]: decoded row r (0 .. 15) against column a[c], C = 1, 2, 4, 8
  template <int C>
  static void run_decoded(const void* dec, const formats::q8_K::block* const* a, std::int64_t k, float* out) {
    const std::int64_t nb = k / qk_k;
    const auto* d = static_cast<const decoded_block*>(dec);
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      const decoded_block* rows[8];
      for (int r = 0; r < 8; ++r) rows[r] = d + (8 * h + r) * nb;
      tile<decoded<F>, C>(rows, a, k, out + 8 * h * C);
    }
  }
};

template <class F, bool Decode>
using lattice_tile = rows_decoded_tile<F, direct<F>, Decode>;

// q3_K decoded: codes w = lo - 4 (high bit clear) or lo (set), lo the 2-bit field, as the
// bytes u = w + 4 (0 .. 7; pmaddubsw pairs within +-2 * 7 * 128), times the 6-bit scale
// s - 32 of each 16 weights by pmaddwd; the correction -4 * s (16-bit lane h) against the
// column's 16-weight sums S_h. Value (d * yd) * sum, as q3_K_t's.
struct q3_K_rows : iq_d_yd {
  using W = formats::q3_K;
  using col = col_sums;
  static col prep_col(const formats::q8_K::block& y) { return prep_col_sums(y); }
  static void col_ints(const col*, int, __m256i*) {}
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(scales_k3(b.scales), _mm_set1_epi8(32)));  // -32 .. 31
    const __m256i hm = load(b.hmask), three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    body(row_corr{{_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 2))}}, [&](int k) {
      const int h = k / 4, kk = k % 4;  // weights 128h + 32kk ..: sub-blocks 8h + 2kk, 8h + 2kk + 1
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(load(b.qs + 32 * h), 2 * kk), three);
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << k));
      const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
      const __m256i s_h = _mm256_permute2x128_si256(s16, s16, h ? 0x11 : 0x00);
      return offset_chunk{_mm256_or_si256(lo, high), words_jk(s_h, 2 * kk, 2 * kk + 1)};
    });
  }
  static __m256i corr(const row_corr& r, const col& c) { return _mm256_madd_epi16(c.s, r.v[0]); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// tq2_0 decoded: its codes (0 .. 3) as the bytes u; each pair's block sum of u * q by
// pmaddubsw added in 16 bits over the block, minus the column's byte sums, then one pmaddwd:
// tq2_0_t's arithmetic (its bounds), the unpack done once per task. Value as tq2_0_t's.
struct tq2_0_rows : tq2_0_t {
  template <class Body>
  static void with_row(const W::block& b, Body body) {
    const __m256i three = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    body(row_corr{}, [&](int k) {  // weights 128h + 32kk .., k = 4h + kk
      return offset_chunk{_mm256_and_si256(_mm256_srli_epi16(load(b.qs + 32 * (k / 4)), 2 * (k % 4)), three), ones};
    });
  }
  template <int C>
  static void decoded_pairs(const std::uint8_t* u, const col* cs, __m256i* const* v) {
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int k = 0; k < 8; ++k) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(u + 32 * k));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(w, load(cs[c].q + 32 * k)));
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = _mm256_madd_epi16(_mm256_sub_epi16(acc[c], cs[c].asum), _mm256_set1_epi16(1));
  }
};

}  // namespace gk::simd::avx2_pair_tile::lattice

namespace gk {

#define GK_AVX2_PAIR_TILE_IQ(fmt, decodes) \
  template <>                               \
  struct dot_tile<formats::fmt, simd::avx2>   \
      : simd::avx2_pair_tile::lattice::lattice_tile<simd::avx2_pair_tile::lattice::fmt##_t, decodes> {};

GK_AVX2_PAIR_TILE_IQ(iq2_xxs, true)
GK_AVX2_PAIR_TILE_IQ(iq2_xs, true)
GK_AVX2_PAIR_TILE_IQ(iq2_s, true)
GK_AVX2_PAIR_TILE_IQ(iq3_xxs, true)
GK_AVX2_PAIR_TILE_IQ(iq3_s, true)
GK_AVX2_PAIR_TILE_IQ(iq1_s, false)  // one column: its row dot is 2 % faster (22.9 against 22.5 GFLOP/s)
GK_AVX2_PAIR_TILE_IQ(iq1_m, true)

#undef GK_AVX2_PAIR_TILE_IQ

// q3_K: its pair tile (dot_tile_pairs.hpp), and decoded rows for prompts.
template <>
struct dot_tile<formats::q3_K, simd::avx2>
    : simd::avx2_pair_tile::lattice::rows_decoded_tile<simd::avx2_pair_tile::lattice::q3_K_rows,
                                                       simd::avx2_pair_tile::q3_K_t, true> {};

// tq2_0 likewise.
template <>
struct dot_tile<formats::tq2_0, simd::avx2>
    : simd::avx2_pair_tile::lattice::rows_decoded_tile<simd::avx2_pair_tile::lattice::tq2_0_rows,
                                                       simd::avx2_pair_tile::tq2_0_t, true> {};

}  // namespace gk

GK_EXACT_FP_END

#endif
