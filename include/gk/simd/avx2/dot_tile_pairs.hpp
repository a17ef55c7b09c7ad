// SPDX-License-Identifier: MIT
// AVX2 pair tiles: eight weight rows by C activation columns (C = 1, 2, 4), one (row,
// column) dot per float lane. The traits here: q8_0, q4_0, q5_0, q4_1, q5_1, iq4_nl, mxfp4,
// q1_0, nvfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, tq2_0, tq1_0 (the lattice formats' in
// dot_tile_pairs_iq.hpp); q4_0, q4_K, q6_K, iq4_nl and mxfp4 register through
// dot_tile_tiled.hpp, which runs these for plain rows and reads CPU_TILED groups itself.
// From 8 columns q8_0, q5_0, iq4_nl and iq4_xs take rows decoded to 16 bits instead
// (dot_tile_wide.hpp, through prompt_rows), q3_K and tq2_0 decoded rows
// (dot_tile_pairs_iq.hpp).
// bench_matmul, AMD EPYC (Zen 3 class), one thread, N 64, row dots -> tile: q4_0 11 -> 45,
// q8_0 13 -> 62, q4_K 34 -> 79, q6_K 27 -> 61, q2_K 46 -> 91, iq4_xs 33 -> 67 GFLOP/s; as
// gk/ref, q1_0 0.62 -> 1.62, nvfp4 0.72 -> 1.72, tq1_0 ~0.65 -> 1.86.
//
// Per block, each weight row is unpacked once for its C columns and each activation column
// once for the eight rows (q1_0's and nvfp4's blocks span four and two q8_0 blocks, read
// together); every (row, column) pair gets its block's exact integer sums as 32-bit
// partial sums (the same pmaddubsw/pmaddwd bounds as the row dots of avx2/dot.hpp and
// dot_legacy.hpp), eight pairs are reduced together by one hadd tree into one vector per
// sum, pair p in lane p % 8, and the definition's per-block float operations run
// lane-wise on that vector with each lane's own scales (row scales and column scales
// permuted into the pairs' lanes), then each lane adds its block to its own running sum in
// block order. So every output is the scalar definition's bits (formats::*::dot summed in
// order): the integer part is exact and the float part is the same operations on the same
// operands in the same order, lane by lane.
//
// Pair p = r * C + c is row r, column c: groups of eight pairs are lanes 0-7 of
// out[8g .. 8g + 7] directly. R < 8 repeats row 0 in the rows past R (computed, dropped).
// One column (decode) prefetches the next task's rows as it goes (`ahead`).
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/formats/ternary.hpp"
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/avx2/dot_kquants.hpp"
#include "gk/simd/avx2/dot_legacy.hpp"
#include "gk/simd/avx2/dot_tile_wide.hpp"
#include "gk/simd/prefetch.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_pair_tile {

using namespace gk::simd::avx2_ops;

inline constexpr int kRows = 8;

using gk::simd::ahead;  // simd/prefetch.hpp

// Eight f16 fields as floats, lane j from get(j) (vcvtph2ps is exact, as to_f32 is).
template <class Get>
inline __m256 f16_lanes(Get get) {
  return _mm256_cvtph_ps(_mm_setr_epi16(get(0), get(1), get(2), get(3), get(4), get(5), get(6), get(7)));
}

// The 32 activation bytes widened to 16 bits, for pmaddwd with full-range weight bytes.
struct wide_bytes { __m256i lo, hi; };
inline wide_bytes widen(const std::int8_t* q) {
  const __m128i* p = reinterpret_cast<const __m128i*>(q);
  return {_mm256_cvtepi8_epi16(_mm_loadu_si128(p)), _mm256_cvtepi8_epi16(_mm_loadu_si128(p + 1))};
}

// The 32-weight formats' pairs: one integer sum, a row unpacked once for its C columns.
template <class F>
struct per_pair {
  static constexpr int nint = 1;
  template <int C, class B, class Col>
  static void row_pairs(const B& b, const Col* cs, __m256i* const* v) {
    const typename F::row u = F::prep_row(b);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = F::pair(u, cs[c]);
  }
};

// ---- the formats: a row's unpacked block, a column's prepared block, a pair's integer
// partial sums, the scales as lanes (rows: lane r; columns: lane c), and the block's float
// value from its integer sum, lane-wise, as the definition writes it -----------------------

// The formats whose block value needs only the two f16 d's.
template <class F>
struct d_only : per_pair<F> {
  static constexpr int nrowf = 1, ncolf = 1;
  template <class Col>
  static void col_ints(const Col*, int, __m256i*) {}
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = f16_lanes([&](int c) { return static_cast<short>(a(c).d.bits); }); }
};

// q8_0: sum(w * a) over full-range bytes by sign extension and pmaddwd;
// value s * (dw * da).
struct q8_0_t : d_only<q8_0_t> {
  using W = formats::q8_0;
  using row = wide_bytes;
  using col = wide_bytes;
  static row prep_row(const W::block& b) { return widen(b.qs); }
  static col prep_col(const W::dot_type::block& b) { return widen(b.qs); }
  static __m256i pair(const row& w, const col& a) {
    return _mm256_add_epi32(_mm256_madd_epi16(w.lo, a.lo), _mm256_madd_epi16(w.hi, a.hi));
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_mul_ps(rf[0], cf[0]));
  }
};

// q4_0, q5_0: (u - off) * a with u the 4- or 5-bit codes, as u * a by pmaddubsw (pairs within
// +-(31 * 128 * 2) = +-7936) minus off * a (pmaddubsw by off, pairs within +-16 * 256), in 16
// bits, then pmaddwd. Value (s * dw) * da for q4_0, (dw * da) * s for q5_0.
struct a_with_off { __m256i a, off_a; };
template <class Fmt>
struct offset_t : d_only<offset_t<Fmt>> {
  using W = Fmt;
  static constexpr bool five = std::is_same_v<Fmt, formats::q5_0>;
  using row = __m256i;
  using col = a_with_off;
  static row prep_row(const typename W::block& b) {
    if constexpr (five) return codes5(b.qs, b.qh);
    else return nibbles32(b.qs);
  }
  static col prep_col(const typename W::dot_type::block& b) {
    const __m256i a = load(b.qs);
    return {a, _mm256_maddubs_epi16(_mm256_set1_epi8(five ? 16 : 8), a)};
  }
  static __m256i pair(const row& u, const col& a) {
    return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(u, a.a), a.off_a), _mm256_set1_epi16(1));
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    if constexpr (five) return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
    else return _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), rf[0]), cf[0]);
  }
};
using q4_0_t = offset_t<formats::q4_0>;
using q5_0_t = offset_t<formats::q5_0>;

// q4_1, q5_1: sum(u * a) (pairs within +-(31 * 128 * 2)) and the activation sum sa from the
// codes; value (dw * da) * s + m * (da * sa).
template <class Fmt, bool five>
struct affine_t : per_pair<affine_t<Fmt, five>> {
  using W = Fmt;
  static constexpr int nrowf = 2, ncolf = 2;
  using row = __m256i;
  using col = __m256i;
  static row prep_row(const typename W::block& b) {
    if constexpr (five) return codes5(b.qs, b.qh);
    else return nibbles32(b.qs);
  }
  static col prep_col(const typename W::dot_type::block& b) { return load(b.qs); }
  static __m256i pair(const row& u, const col& a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
  }
  // the columns' activation sums, lane c
  static void col_ints(const col* a, int C, __m256i* out) {
    __m256i v[8];
    for (int c = 0; c < 8; ++c) v[c] = c < C ? sum_i8(a[c]) : _mm256_setzero_si256();
    out[0] = hsum8_i32(v);
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); });
    f[1] = f16_lanes([&](int r) { return static_cast<short>(w(r).m.bits); });
  }
  template <class Ab>
  static void colf(Ab a, const __m256i* ints, __m256* f) {
    f[0] = f16_lanes([&](int c) { return static_cast<short>(a(c).d.bits); });
    f[1] = _mm256_mul_ps(f[0], _mm256_cvtepi32_ps(ints[0]));  // da * sa
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0])), _mm256_mul_ps(rf[1], cf[1]));
  }
};
using q4_1_t = affine_t<formats::q4_1, false>;
using q5_1_t = affine_t<formats::q5_1, true>;

// iq4_nl: codebook values split into positive and negative magnitudes (<= 113 and <= 127
// against bytes >= -128: pairs within +-32512, their difference taken in 32 bits);
// value s * (dw * da).
struct iq4_nl_t : d_only<iq4_nl_t> {
  using W = formats::iq4_nl;
  struct row { __m256i pos, neg; };
  using col = __m256i;
  static row prep_row(const W::block& b) {
    const split_table t = split(codebooks::kvalues_iq4nl);  // loop-invariant: hoisted
    const __m256i c = nibbles32(b.qs);
    return {_mm256_shuffle_epi8(t.pos, c), _mm256_shuffle_epi8(t.neg, c)};
  }
  static col prep_col(const W::dot_type::block& b) { return load(b.qs); }
  static __m256i pair(const row& w, const col& a) {
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w.pos, a), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w.neg, a), ones));
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_mul_ps(rf[0], cf[0]));
  }
};

// mxfp4: e2m1 codes as doubled integers split into positive and negative magnitudes (<= 12
// against bytes >= -128: pmaddubsw pairs within +-3072, their difference within +-6144 in
// 16 bits); value (da * h) * s with h the e8m0 scale's half.
struct mxfp4_t : per_pair<mxfp4_t> {
  using W = formats::mxfp4;
  static constexpr int nrowf = 1, ncolf = 1;
  struct row { __m256i pos, neg; };
  using col = __m256i;
  static row prep_row(const W::block& b) {
    const split_table t = split(fp4_values());  // loop-invariant: hoisted
    const __m256i c = nibbles32(b.qs);
    return {_mm256_shuffle_epi8(t.pos, c), _mm256_shuffle_epi8(t.neg, c)};
  }
  static col prep_col(const W::dot_type::block& b) { return load(b.qs); }
  static __m256i pair(const row& w, const col& a) {
    return _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(w.pos, a), _mm256_maddubs_epi16(w.neg, a)),
                             _mm256_set1_epi16(1));
  }
  template <class Col>
  static void col_ints(const Col*, int, __m256i*) {}
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    const __m256i e = _mm256_setr_epi32(w(0).e, w(1).e, w(2).e, w(3).e, w(4).e, w(5).e, w(6).e, w(7).e);
    // e8m0_to_f32_half: the bits 0x00200000 << e for e < 2, else (e - 1) << 23 (as the row dot)
    f[0] = _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e),
                                                  _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23),
                                                  _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1))));
  }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = f16_lanes([&](int c) { return static_cast<short>(a(c).d.bits); }); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(cf[0], rf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// ---- the weight blocks that span several q8_0 blocks, a float sum per sub-block -------
// Sub-block sums travel two per vector (halves): the columns' bytes are regrouped once per
// column so that one 32-byte vector holds 16 bytes of each of two sub-blocks, and the
// weights are unpacked in the same order.

// 16 bytes at p and 16 at q as one vector, p's in the low half.
inline __m256i halves16(const std::int8_t* p, const std::int8_t* q) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p)), load128(q), 1);
}

// q1_0: sum over 32 weights of +-a as 2 * (bit * a) - a. With the column's four q8_0
// blocks regrouped as x[0] = [a0 bytes 0-15 | a1 bytes 0-15], x[1] = [a0 16-31 | a1 16-31],
// x[2], x[3] the same of a2, a3, a pair's vector k is pmaddubsw(bits * 2, x[2k]) +
// pmaddubsw(bits * 2, x[2k + 1]) - pmaddubsw(1, both) (pairs within +-512 each, +-1024
// together; the column's sums +-512: within +-1536 in 16 bits), then pmaddwd: sub-block
// 2k in the low half, 2k + 1 in the high. Value dw * ((((0 + da0 * s0) + da1 * s1) +
// da2 * s2) + da3 * s3).
struct q1_0_t {
  using W = formats::q1_0;
  static constexpr int nint = 4, nrowf = 1, ncolf = 4;
  static constexpr bool halves = true;
  struct col { __m256i x[4], asum[2]; };
  static col prep_col(const formats::q8_0::block& y0) {
    const formats::q8_0::block* y = &y0;
    const __m256i ones8 = _mm256_set1_epi8(1);
    col c;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      c.x[2 * h] = halves16(y[2 * h].qs, y[2 * h + 1].qs);
      c.x[2 * h + 1] = halves16(y[2 * h].qs + 16, y[2 * h + 1].qs + 16);
      c.asum[h] = _mm256_add_epi16(_mm256_maddubs_epi16(ones8, c.x[2 * h]), _mm256_maddubs_epi16(ones8, c.x[2 * h + 1]));
    }
    return c;
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull)), two = _mm256_set1_epi8(2);
    const __m256i base =
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5);
    const __m256i q = _mm256_broadcastsi128_si256(load128(b.qs));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i m[2];
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        // x[2h + j]'s bytes: a_{2h}'s weights 16j .. 16j + 15 (qs[8h + 2j], qs[8h + 2j + 1]), then
        // a_{2h+1}'s (qs[8h + 4 + 2j], ...); byte t of a run of eight tests bit t
        const __m256i idx = _mm256_add_epi8(base, _mm256_set1_epi8(static_cast<char>(8 * h + 2 * j)));
        m[j] = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(q, idx), bit), bit), two);
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(m[0], cs[c].x[2 * h]), _mm256_maddubs_epi16(m[1], cs[c].x[2 * h + 1]));
        v[h][c] = _mm256_madd_epi16(_mm256_sub_epi16(p, cs[c].asum[h]), _mm256_set1_epi16(1));
      }
    }
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) f[k] = f16_lanes([&](int c) { return static_cast<short>((&a(c))[k].d.bits); });
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) sum = _mm256_add_ps(sum, _mm256_mul_ps(cf[k], _mm256_cvtepi32_ps(s[k])));
    return _mm256_mul_ps(rf[0], sum);
  }
};

// nvfp4: byte 8k + j holds sub-block k's weights j (low nibble) and j + 8 (high), so the
// low nibbles and high nibbles of its 32 bytes, interleaved by 64-bit words, are weights
// [0-15 | 32-47] and [16-31 | 48-63]: the column regrouped as x[0] = [a0 bytes 0-15 | a1
// 0-15], x[1] = [a0 16-31 | a1 16-31] lines up with them, vector 0 carrying sub-blocks 0
// and 2, vector 1 sub-blocks 1 and 3. The doubled e2m1 values v (-12 .. 12) go onto the
// activation's sign, |a| times sign(v, a) (pmaddubsw pairs within +-3072, exact for a =
// -128 too), then pmaddwd. Value (((0 + (da0 * h0) * s0) + (da0 * h1) * s1) + (da1 * h2) *
// s2) + (da1 * h3) * s3, h_k the half of sub-block k's ue4m3 scale. (h has at most four
// significant bits and |s| < 2^15, so h * s is exact and da * (h * s) would give the same
// bits; the definition's association is kept all the same.)
struct nvfp4_t {
  using W = formats::nvfp4;
  static constexpr int nint = 4, nrowf = 4, ncolf = 2;
  static constexpr bool halves = true;
  struct col { __m256i x[2], abs[2]; };
  static col prep_col(const formats::q8_0::block& y0) {
    const formats::q8_0::block* y = &y0;
    col c;
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      c.x[j] = halves16(y[0].qs + 16 * j, y[1].qs + 16 * j);
      c.abs[j] = _mm256_abs_epi8(c.x[j]);
    }
    return c;
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i values = _mm256_broadcastsi128_si256(load128(fp4_values()));  // loop-invariant: hoisted
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i q = load(b.qs);
    const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
    const __m256i u[2] = {_mm256_shuffle_epi8(values, _mm256_unpacklo_epi64(lo, hi)),
                          _mm256_shuffle_epi8(values, _mm256_unpackhi_epi64(lo, hi))};
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        v[j][c] = _mm256_madd_epi16(_mm256_maddubs_epi16(cs[c].abs[j], _mm256_sign_epi8(u[j], cs[c].x[j])), ones);
    }
  }
  // h_k of eight rows: ue4m3 code x with bit 7 dropped, shifted left by 7, is an f16 of x's
  // value times 2^-8, subnormals included, so h = f16(x << 7) * 128 exactly (vcvtph2ps is
  // exact; the product is a power-of-two step in the normal range). The byte 0x7f (E4M3's
  // NaN) is 0, as ue4m3_to_f32 reads it; it tests the whole byte, so 0xff is 480.
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    auto scales = [&](int r) {
      std::uint32_t d;
      std::memcpy(&d, w(r).d, 4);
      return static_cast<int>(d);
    };
    const __m256i d = _mm256_setr_epi32(scales(0), scales(1), scales(2), scales(3), scales(4), scales(5), scales(6), scales(7));
    const __m256i byte = _mm256_set1_epi32(0xff << 7), value_bits = _mm256_set1_epi16(0x7f << 7);
    auto code = [&](int k) {  // byte k of each row, shifted left by 7
      return _mm256_and_si256(k == 0 ? _mm256_slli_epi32(d, 7) : _mm256_srli_epi32(d, 8 * k - 7), byte);
    };
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      // words [k rows 0-3, k + 1 rows 0-3 | k rows 4-7, k + 1 rows 4-7], k = 2j, then rows in order
      __m256i p = _mm256_packus_epi32(code(2 * j), code(2 * j + 1));
      p = _mm256_and_si256(_mm256_andnot_si256(_mm256_cmpeq_epi16(p, value_bits), value_bits), p);
      p = _mm256_permute4x64_epi64(p, 0xd8);
      f[2 * j] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(p)), _mm256_set1_ps(128.0f));
      f[2 * j + 1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(p, 1)), _mm256_set1_ps(128.0f));
    }
  }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) {
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) f[j] = f16_lanes([&](int c) { return static_cast<short>((&a(c))[j].d.bits); });
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    // s: sub-blocks 0, 2 (vector 0's halves), 1, 3
    constexpr int at[4] = {0, 2, 1, 3};
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_mul_ps(cf[k / 2], rf[k]), _mm256_cvtepi32_ps(s[at[k]])));
    return sum;
  }
};

// ---- the 256-weight k-quants with q8_K activations (float d, sixteen 16-weight sums) ----

// q8_K's d of eight columns as lanes.
template <class Ab>
inline __m256 q8k_d(Ab a) {
  return _mm256_setr_ps(a(0).d, a(1).d, a(2).d, a(3).d, a(4).d, a(5).d, a(6).d, a(7).d);
}

// q4_K, q5_K: per 32-weight sub-block j, sum(u * a) (u <= 31 against bytes >= -128: pairs
// within +-7936) times the 6-bit scale_j by pmaddwd; the min term min_j * (bsums[2j] +
// bsums[2j+1]) by one pmaddwd of the bsums with each min twice (as the row dots). Value
// (d * yd) * sum_q - (dmin * yd) * sum_m.
template <class Fmt, bool five>
struct k45_t {
  using W = Fmt;
  static constexpr int nint = 2, nrowf = 2, ncolf = 1;
  static constexpr int rows_at_once = 4;  // see rows_at_once_of
  struct col { const std::int8_t* q; __m256i bsums; };
  static col prep_col(const formats::q8_K::block& y) { return {y.qs, load(y.bsums)}; }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const typename W::block& b, const col* cs, __m256i* const* v) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m128i sm = scales_mins_k4(b.scales);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[1][c] = _mm256_madd_epi16(cs[c].bsums, mins);
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
    __m256i qh;
    if constexpr (five) qh = load(b.qh);
#pragma GCC unroll 4
    for (int h = 0; h < 4; ++h) {  // 64 weights: sub-blocks 2h (low nibbles) and 2h + 1 (high)
      const __m256i q = load(b.qs + 32 * h);
      __m256i u0 = _mm256_and_si256(q, low4), u1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (five) {
        const __m256i hb = _mm256_srli_epi16(qh, 2 * h);
        u0 = _mm256_or_si256(u0, _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(1)), 4));
        u1 = _mm256_or_si256(u1, _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(2)), 3));
      }
      const __m256i s0 = words_jk(scales, 2 * h, 2 * h), s1 = words_jk(scales, 2 * h + 1, 2 * h + 1);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256i p0 = _mm256_maddubs_epi16(u0, load(cs[c].q + 64 * h));
        const __m256i p1 = _mm256_maddubs_epi16(u1, load(cs[c].q + 64 * h + 32));
        acc[c] = _mm256_add_epi32(acc[c], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = acc[c];
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); });
    f[1] = f16_lanes([&](int r) { return static_cast<short>(w(r).dmin.bits); });
  }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0])),
                         _mm256_mul_ps(_mm256_mul_ps(rf[1], cf[0]), _mm256_cvtepi32_ps(s[1])));
  }
};
using q4_K_t = k45_t<formats::q4_K, false>;
using q5_K_t = k45_t<formats::q5_K, true>;

// q6_K: sum_j sc_j * sum((u - 32) * a) over its sixteen 16-weight sub-blocks, as
// sum_j sc_j * sum(u * a) (u <= 63 against bytes >= -128: pairs within +-16128) minus 32 *
// sum_j sc_j * S_j, S_j the column's own 16-weight sums taken from its bytes (not from
// bsums, which the definition does not read), one pmaddwd per pair. The same integer
// total. Value (d * yd) * s.
struct q6_K_t {
  using W = formats::q6_K;
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  static constexpr int rows_at_once = 1;  // see rows_at_once_of
  // S_j in the order [S0, S2, ..., S14 | S1, S3, ..., S15] (16 bits: |S_j| <= 2048)
  struct col { const std::int8_t* q; __m256i sums; };
  static col prep_col(const formats::q8_K::block& y) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i m[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) m[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(y.qs + 32 * k)), ones16);
    // lane l of chunk k: four bytes' sum, l < 4 in its first 16 bytes; two hadds give
    // [S_{2k} for k = 0..3 | S_{2k+1} for k = 0..3]
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
    return {y.qs, _mm256_packs_epi32(a, b)};
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    // the scales in the columns' order: even sub-blocks, then odd
    const __m128i sc8 = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)),
                                         _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m256i sc = _mm256_cvtepi8_epi16(sc8);
    const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
    // scales 8h .. 8h + 7 as words in both 128-bit lanes, for words_jk
    const __m256i sc_h[2] = {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales)))),
                             _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales + 8))))};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load(b.ql + 64 * h), ql1 = load(b.ql + 64 * h + 32), qh = load(b.qh + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i ql = (k & 1) ? ql1 : ql0;
        const __m256i lo = (k >> 1) ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4) : _mm256_and_si256(ql, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), three);
        const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // 0..63
        // sub-blocks 8h + 2k (16-bit lanes 0-7) and 8h + 2k + 1 (8-15)
        const __m256i s = words_jk(sc_h[h], 2 * k, 2 * k + 1);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u, load(cs[c].q + 128 * h + 32 * k)), s));
      }
    }
    // sum_j sc_j * S'_j - 32 * sum_j sc_j * S_j folded here (|total| < 2^29): one vector a
    // row and column for the tile's horizontal sums, not two (2-4 % at one column)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = _mm256_sub_epi32(acc[c], _mm256_slli_epi32(_mm256_madd_epi16(cs[c].sums, sc), 5));
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// A q8_K column with its bytes' magnitudes (|a| <= 128 as unsigned bytes), for the
// formats that move the activation's sign onto a small signed weight value (psignb on the
// weight, whose magnitude stays <= 127: exact for every activation byte, -128 included).
struct col_abs {
  const std::int8_t* q;
  __m256i bsums;
  alignas(32) std::uint8_t abs[qk_k];
};
inline col_abs prep_col_abs(const formats::q8_K::block& y) {
  col_abs c{y.qs, load(y.bsums), {}};
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    _mm256_store_si256(reinterpret_cast<__m256i*>(c.abs + 32 * k), _mm256_abs_epi8(load(y.qs + 32 * k)));
  return c;
}

// q2_K: codes 0..3 against bytes >= -128 (pmaddubsw pairs within +-768) times the 4-bit
// scale of each 16-weight sub-block by pmaddwd; the min term bsums[j] * m_j by one pmaddwd.
// Value (yd * d) * isum - (yd * dmin) * summs.
struct q2_K_t {
  using W = formats::q2_K;
  static constexpr int nint = 2, nrowf = 2, ncolf = 1;
  static constexpr int rows_at_once = 2;  // see rows_at_once_of
  struct col { const std::int8_t* q; __m256i bsums; };
  static col prep_col(const formats::q8_K::block& y) { return {y.qs, load(y.bsums)}; }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i three = _mm256_set1_epi8(3);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i sc = load128(b.scales);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), low4));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[1][c] = _mm256_madd_epi16(cs[c].bsums, mins);
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, low4));
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load(b.qs + 32 * h);
      const __m256i s_h = _mm256_permute2x128_si256(s16, s16, h ? 0x11 : 0x00);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // weights 128h + 32k ..: sub-blocks 8h + 2k and 8h + 2k + 1
        const __m256i cd = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
        const __m256i s = words_jk(s_h, 2 * k, 2 * k + 1);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(cd, load(cs[c].q + 128 * h + 32 * k)), s));
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = acc[c];
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) {
    f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); });
    f[1] = f16_lanes([&](int r) { return static_cast<short>(w(r).dmin.bits); });
  }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(cf[0], rf[0]), _mm256_cvtepi32_ps(s[0])),
                         _mm256_mul_ps(_mm256_mul_ps(cf[0], rf[1]), _mm256_cvtepi32_ps(s[1])));
  }
};

// q3_K: code = lo - off in -4 .. 3 (lo the two low bits, off 4 where the hmask bit is
// clear), as |a| times sign(code, a) (pmaddubsw pairs within +-1024) times the 6-bit scale
// - 32 of each 16-weight sub-block by pmaddwd. Value (d * yd) * s.
struct q3_K_t {
  using W = formats::q3_K;
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  using col = col_abs;
  static col prep_col(const formats::q8_K::block& y) { return prep_col_abs(y); }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(scales_k3(b.scales), _mm_set1_epi8(32)));  // -32 .. 31
    const __m256i hm = load(b.hmask);
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load(b.qs + 32 * h);
      const __m256i s_h = _mm256_permute2x128_si256(s16, s16, h ? 0x11 : 0x00);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // weights 128h + 32k ..: sub-blocks 8h + 2k and 8h + 2k + 1
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)));
        const __m256i off = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero), four);
        const __m256i code = _mm256_sub_epi8(lo, off);
        const __m256i s = words_jk(s_h, 2 * k, 2 * k + 1);
        const int o = 128 * h + 32 * k;
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m256i p = _mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(cs[c].abs + o)),
                                                 _mm256_sign_epi8(code, load(cs[c].q + o)));
          acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(p, s));
        }
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = acc[c];
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// iq4_xs: codebook values (-127 .. 113) as |a| times sign(v, a) (pmaddubsw pairs within
// +-32512), times the 6-bit scale - 32 of each 32-weight sub-block by pmaddwd (as the row
// dot). Value (d * yd) * s.
struct iq4_xs_t {
  using W = formats::iq4_xs;
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  using col = col_abs;
  static col prep_col(const formats::q8_K::block& y) { return prep_col_abs(y); }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i values = _mm256_broadcastsi128_si256(load128(codebooks::kvalues_iq4nl));
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i scales = _mm256_broadcastsi128_si256(scales_iq4_xs(b));
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m128i q = load128(b.qs + 16 * g);
      // weights 32g .. 32g+15 are the low nibbles, 32g+16 .. 32g+31 the high ones
      const __m256i vals = _mm256_shuffle_epi8(values, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low4));
      const __m256i s = words_jk(scales, g, g);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256i p = _mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(cs[c].abs + 32 * g)),
                                               _mm256_sign_epi8(vals, load(cs[c].q + 32 * g)));
        acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(p, s));
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = acc[c];
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_mul_ps(rf[0], cf[0]), _mm256_cvtepi32_ps(s[0]));
  }
};

// tq2_0: (code - 1) * a, codes 0..3: code * a by pmaddubsw (pairs within +-768, the block's
// eight vectors within +-6144 in 16 bits) minus the column's byte sums (pairs within +-256,
// +-2048 over the block, taken once per column). Value s * (yd * d).
struct tq2_0_t {
  using W = formats::tq2_0;
  static constexpr int nint = 1, nrowf = 1, ncolf = 1;
  struct col { const std::int8_t* q; __m256i asum; };
  static col prep_col(const formats::q8_K::block& y) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(ones8, load(y.qs + 32 * k)));
    return {y.qs, s};
  }
  static void col_ints(const col*, int, __m256i*) {}
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i three = _mm256_set1_epi8(3);
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load(b.qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {  // weights 128h + 32k ..
        const __m256i cd = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), three);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(cd, load(cs[c].q + 128 * h + 32 * k)));
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = _mm256_madd_epi16(_mm256_sub_epi16(acc[c], cs[c].asum), _mm256_set1_epi16(1));
  }
  template <class Wb>
  static void rowf(Wb w, __m256* f) { f[0] = f16_lanes([&](int r) { return static_cast<short>(w(r).d.bits); }); }
  template <class Ab>
  static void colf(Ab a, const __m256i*, __m256* f) { f[0] = q8k_d(a); }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_mul_ps(cf[0], rf[0]));
  }
};

// tq1_0: trits t (0 .. 2) unpacked as the row dot does (times3_u8, top_trit), t * a by
// pmaddubsw (pairs within +-512, the block's eight vectors within +-4096 in 16 bits)
// minus the column's byte sums (tq2_0_t's, +-2048): within +-6144. Value s * (d * yd).
struct tq1_0_t : tq2_0_t {  // tq2_0's columns and scales
  using W = formats::tq1_0;
  template <int C>
  static void row_pairs(const W::block& b, const col* cs, __m256i* const* v) {
    const __m256i high_half = _mm256_set_m128i(_mm_set1_epi8(-1), _mm_setzero_si128());
    // qh byte i (= qh[i % 4]) times 3^(i / 4): trit i / 4 of qh[i % 4] is weight 240 + i
    const __m256i pow3_qh = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    __m256i acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_si256();
    auto add = [&](__m256i x, int o) {  // the trits of x against activation bytes o .. o + 31
      const __m256i t = top_trit(x);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(t, load(cs[c].q + o)));
    };
    __m256i x = load(b.qs);  // trit k of byte m is weight 32k + m
#pragma GCC unroll 5
    for (int k = 0; k < 5; ++k) {
      add(x, 32 * k);
      if (k < 4) x = times3_u8(x);
    }
    // trit k of byte 32 + m is weight 160 + 16k + m: halves carry trits (0, 1), (2, 3), (4, qh)
    const __m128i z = load128(b.qs + 32);
    __m256i zz = _mm256_set_m128i(z, z);
    zz = _mm256_add_epi8(zz, _mm256_and_si256(high_half, _mm256_add_epi8(zz, zz)));  // halves z, 3z
    add(zz, 160);
    zz = times3_u8(times3_u8(zz));  // 9z, 27z
    add(zz, 192);
    std::uint32_t qh32;
    std::memcpy(&qh32, b.qh, 4);
    const __m256i qh = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_set1_epi32(static_cast<int>(qh32))), pow3_qh),
                                        _mm256_set1_epi16(0xff));
    const __m128i qh8 = _mm_packus_epi16(_mm256_castsi256_si128(qh), _mm256_extracti128_si256(qh, 1));
    add(_mm256_inserti128_si256(times3_u8(times3_u8(zz)), qh8, 1), 224);  // 81z, qh
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) v[0][c] = _mm256_madd_epi16(_mm256_sub_epi16(acc[c], cs[c].asum), _mm256_set1_epi16(1));
  }
  static __m256 value(const __m256i* s, __m256i, const __m256* rf, const __m256* cf) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(s[0]), _mm256_mul_ps(rf[0], cf[0]));
  }
};

// Lane l of group g is pair 8g + l: row (8g + l) / C, column (8g + l) % C.
template <int C>
inline __m256i row_lanes(int g) {
  return _mm256_setr_epi32((8 * g + 0) / C, (8 * g + 1) / C, (8 * g + 2) / C, (8 * g + 3) / C, (8 * g + 4) / C,
                           (8 * g + 5) / C, (8 * g + 6) / C, (8 * g + 7) / C);
}
template <int C>
inline __m256i col_lanes() {
  return _mm256_setr_epi32(0 % C, 1 % C, 2 % C, 3 % C, 4 % C, 5 % C, 6 % C, 7 % C);
}

// A trait with `halves` gives nint / 2 vectors per pair, each carrying two of its integer
// sums: sum 2k in the low 128-bit half of vector k, sum 2k + 1 in the high half. Where a
// weight block spans several activation blocks (q1_0, nvfp4), its columns' bytes regrouped
// once per column put two sub-blocks' sums in one vector, and one hadd tree reduces
// sixteen sums instead of eight.
template <class F>
inline constexpr bool halves_of = requires { requires F::halves; };
template <class F>
inline constexpr int nvec_of = halves_of<F> ? F::nint / 2 : F::nint;
// How many rows a one-column tile takes per step of its row loop: F::rows_at_once where the
// trait says (1, 2 or 4; a loop GCC keeps rolled), else all eight unrolled. GCC 12 schedules
// the fully unrolled rows of the K-quants badly: it hoists all eight rows' scale work and
// spills it (tile<F, 1>'s stack ymm accesses: q6_K 168, q5_K 224, q4_K 186, q2_K 161). The
// one-column tile alone, 16-row tiles down 96 / 512 rows of 4096 (cache-resident), GFLOP/s,
// all eight -> the trait's: q6_K 46-47 / 41-42 -> 47-48 / 45 (one), q5_K 40.7 / 37.8 ->
// 44.5 / 42.2 (four), q4_K 53.8 / 48.9 -> 57.1 / 52.4 (four), q2_K 67.4 / 67.4 -> 71.2 /
// 70.5 (two). The others keep eight: iq4_xs 47 -> 42 at two, q3_K 42-44 -> 38-39 at two and
// level at four, tq1_0 level at four, q8_0 47 -> 38 and q4_0 41 -> 34 at one.
template <class F>
inline constexpr int rows_at_once_of = [] {
  if constexpr (requires { F::rows_at_once; }) return F::rows_at_once;
  else return 8;
}();

// Eight rows by C columns (C = 1, 2, 4, 8): out[r * C + c] = the definition's dot of w[r]
// with a[c] over n weights. Weight block i pairs with activation blocks i * per ..
// i * per + per - 1: prep_col and colf get a reference to the first of them.
template <class F, int C>
void tile(const typename F::W::block* const* w, const typename F::W::dot_type::block* const* a, std::int64_t n,
          float* out, const ahead& next = {}) {
  static_assert(C == 1 || C == 2 || C == 4 || C == 8);
  constexpr int G = kRows * C / 8, rows_per_group = 8 / C;
  constexpr int per = F::W::block_size / F::W::dot_type::block_size;
  const std::int64_t nb = n / F::W::block_size;
  __m256 acc[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  const __m256i cl = col_lanes<C>();
  for (std::int64_t i = 0; i < nb; ++i) {
    next.block(i);
    typename F::col cs[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) cs[c] = F::prep_col(a[c][i * per]);
    __m256i ci[1] = {_mm256_setzero_si256()};
    F::col_ints(cs, C, ci);
    __m256 rf[F::nrowf], cf[F::ncolf];
    F::rowf([&](int r) -> const typename F::W::block& { return w[r][i]; }, rf);
    F::colf([&](int c) -> const typename F::W::dot_type::block& { return a[c < C ? c : 0][i * per]; }, ci, cf);
    __m256 cfl[F::ncolf];
#pragma GCC unroll 4
    for (int k = 0; k < F::ncolf; ++k) cfl[k] = C == 8 ? cf[k] : _mm256_permutevar8x32_ps(cf[k], cl);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      __m256i v[nvec_of<F>][8];
      auto one_row = [&](int rr) {
        __m256i* vp[nvec_of<F>];
        for (int k = 0; k < nvec_of<F>; ++k) vp[k] = v[k] + rr * C;
        F::template row_pairs<C>(w[g * rows_per_group + rr][i], cs, vp);
      };
      if constexpr (C == 1 && rows_at_once_of<F> < rows_per_group) {
        constexpr int U = rows_at_once_of<F>;
#pragma GCC unroll 1
        for (int rr = 0; rr < rows_per_group; rr += U) {
#pragma GCC unroll 8
          for (int u = 0; u < U; ++u) one_row(rr + u);
        }
      } else {
#pragma GCC unroll 8
        for (int rr = 0; rr < rows_per_group; ++rr) one_row(rr);
      }
      __m256i s[F::nint];
      if constexpr (halves_of<F>) {
#pragma GCC unroll 2
        for (int k = 0; k < nvec_of<F>; ++k) hsum8_halves(v[k], s[2 * k], s[2 * k + 1]);
      } else {
#pragma GCC unroll 2
        for (int k = 0; k < F::nint; ++k) s[k] = hsum8_i32(v[k]);
      }
      __m256 rfl[F::nrowf];
      const __m256i rl = row_lanes<C>(g);
#pragma GCC unroll 4
      for (int k = 0; k < F::nrowf; ++k) rfl[k] = C == 1 ? rf[k] : _mm256_permutevar8x32_ps(rf[k], rl);
      acc[g] = _mm256_add_ps(acc[g], F::value(s, ci[0], rfl, cfl));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

// Any R <= 8 by any C: columns four at a time, then two, then one.
template <class F>
struct runner {
  using wblock = typename F::W::block;
  using ablock = typename F::W::dot_type::block;
  template <int R, int C>
  static void run(const wblock* const* w, const ablock* const* a, std::int64_t n, float* out, const ahead& next = {}) {
    static_assert(R >= 1 && R <= kRows);
    const wblock* rows[kRows];
    for (int r = 0; r < kRows; ++r) rows[r] = w[r < R ? r : 0];
    int c = 0;
    auto part = [&]<int P>() {
      float o[kRows * P];
      tile<F, P>(rows, a + c, n, o, C == 1 ? next : ahead{});
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < P; ++j) out[r * C + c + j] = o[r * P + j];
      c += P;
    };
    for (; c + 4 <= C;) part.template operator()<4>();
    if (c + 2 <= C) part.template operator()<2>();
    if (c < C) part.template operator()<1>();
  }
};

// dot_tile<W, avx2> by the pair tile of trait F (one column through it where Decode).
template <class F, bool Decode>
struct pair_tile_of {
  using W = typename F::W;
  static constexpr bool specialised = true, decode = Decode;
  static constexpr int rows = kRows, cols = 4;
  template <int R, int C>
  static void run(const typename W::block* const* w, const typename W::dot_type::block* const* a, std::int64_t n,
                  float* out, const void* next = nullptr, std::size_t next_bytes = 0) {
    runner<F>::template run<R, C>(w, a, n, out, {next, next_bytes, n / W::block_size});
  }
};

}  // namespace gk::simd::avx2_pair_tile

namespace gk {

#define GK_AVX2_PAIR_TILE(fmt, decodes) \
  template <>                            \
  struct dot_tile<formats::fmt, simd::avx2> : simd::avx2_pair_tile::pair_tile_of<simd::avx2_pair_tile::fmt##_t, decodes>, \
                                              simd::avx2_wide::prompt_rows<formats::fmt> {};


GK_AVX2_PAIR_TILE(q8_0, true)
GK_AVX2_PAIR_TILE(q5_0, true)
GK_AVX2_PAIR_TILE(q4_1, true)
GK_AVX2_PAIR_TILE(q5_1, true)
GK_AVX2_PAIR_TILE(q5_K, true)
GK_AVX2_PAIR_TILE(q2_K, true)
// q3_K registers in dot_tile_pairs_iq.hpp (decoded rows for prompts)
GK_AVX2_PAIR_TILE(iq4_xs, true)
// tq2_0 registers in dot_tile_pairs_iq.hpp (decoded rows for prompts)
// one column through the tile as well, gk/ref at N 1, one thread, row dots -> tile: q1_0
// 0.62 -> 1.19, nvfp4 0.72 -> 1.41, tq1_0 ~0.65 -> 0.89
GK_AVX2_PAIR_TILE(q1_0, true)
GK_AVX2_PAIR_TILE(nvfp4, true)
GK_AVX2_PAIR_TILE(tq1_0, true)

#undef GK_AVX2_PAIR_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
