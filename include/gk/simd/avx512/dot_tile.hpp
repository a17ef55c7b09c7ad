// SPDX-License-Identifier: MIT
// AVX-512 VNNI tiles for the 256-weight (q8_K) formats: R weight rows by C activation
// columns, each weight block unpacked once and dotted with all C columns.
//
// The idea: every such format's block integer is sum_j sc_j * (sum over sub-block j of
// w_i * q_i) [+ a second integer from q8_K's bsums], with small signed weights w_i and
// integer sub-block scales sc_j, then a few float operations. So each format supplies
//   unpack(block) -> 256 signed bytes w (|w| <= 64), a scale per 16 weights, optionally
//                    a bsums multiplier per 16 weights, and the row's float scales;
//   combine(...)   -> the definition's float term of a block, lane by lane;
// and one kernel here does the integer work for all of them. Integer sums are exact in
// any order; the float term is formed per (row, column) lane with the definition's
// operations in its order, and added to that lane's running sum block by block, so every
// output is the row dot's bits.
//
// The integer kernel: activations are made unsigned by a ^ 0x80 = a + 128, so
//   sum w*a = sum w*(a + 128) - 128 * sum w,
// the second term depending on the weight row only (computed at unpack, once per block).
// pmaddubsw(a + 128, w) pairs are at most 2 * 255 * 64 = 32640 in magnitude for |w| <= 64
// (no saturation); vpdpwssd applies the int16 sub-block scale (|sc| <= 128) into int32:
// a block's total is within 256 * 255 * 64 * 128 < 2^31. Any activation byte works,
// -128 included. Formats whose codes are unsigned and at most 31 (q2_K) skip the bias:
// pmaddubsw(code, a) directly. Each accumulator holds two dots (32 weights of
// each in its halves), so a block's 16 totals come out of one transpose-and-add
// (block_sums16); the bsums terms (q2_K, iq1_s, whose definitions read bsums) the same way.
//
// Shape: 2 rows x 8 columns (the matmul's whole panel) for every format here. Measured
// one thread, 4096-wide rows, L1/L2-resident, GFLOP/s tile vs row-by-row: iq2_xxs 83 vs 20,
// q4_K 167 vs 63 (4 x 4: 122), q6_K 173 vs 79 (4 x 4: 127): the unpack is the costly part,
// so it is shared by as many columns as the panel holds. (q4_K and q5_K have since moved to
// the 16-row tiles of avx512/dot_tile_kq16.hpp.)
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq1.hpp"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/simd/avx2/dot_iq.hpp"
#include "gk/simd/avx2/dot_kquants.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_tile {

using namespace gk::simd::avx512_ops;

// One weight block as the kernel reads it.
struct unpacked {
  alignas(64) std::int8_t q[qk_k];    // the signed weights, |w| <= 64
  alignas(64) std::int16_t sc[qk_k / 2];  // the scale of each pair of weights (16 per 32 weights)
  alignas(32) std::int16_t s16[16];   // the scale of each 16 weights (unpack fills it)
  alignas(32) std::int16_t m16[16];   // bsums multipliers (formats with has_mins)
  int corr;                           // 128 * sum sc * w
  float f0, f1;                       // the row's float scales (d, dmin)
};

// sc and corr from q and s16 (corr only where the kernel biases the activations).
template <bool with_corr>
inline void finish(unpacked& u) {
  const __m512i s = _mm512_zextsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(u.s16)));
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc = _mm512_setzero_si512();
  for (int v = 0; v < 4; ++v) {  // pairs 32v .. 32v+31: weights 64v .. 64v+63, groups 4v + p/8
    const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(4 * v)),
                                         _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
                                                                            13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                           3));
    const __m512i sc = _mm512_permutexvar_epi16(idx, s);
    _mm512_store_si512(u.sc + 32 * v, sc);
    if constexpr (with_corr) acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k80, _mm512_load_si512(u.q + 64 * v)), sc);
  }
  u.corr = with_corr ? _mm512_reduce_add_epi32(acc) : 0;
}

inline void set_s16(unpacked& u, __m128i bytes16, bool is_signed) {
  const __m256i w = is_signed ? _mm256_cvtepi8_epi16(bytes16) : _mm256_cvtepu8_epi16(bytes16);
  _mm256_store_si256(reinterpret_cast<__m256i*>(u.s16), w);
}

// p in bytes 0-31, q in 32-63 (as avx512_ops::load2x32; zero-extending, which GCC 12 does
// not warn about)
inline __m512i halves(const void* p, const void* q) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(load256(p)), load256(q), 1);
}

// out lanes j = r * C + c: the row's or the column's value
template <int R, int C>
inline __m512i row_index() {
  alignas(64) int v[16];
  for (int j = 0; j < 16; ++j) v[j] = j < R * C ? j / C : 0;
  return _mm512_load_si512(v);
}
template <int R, int C>
inline __m512i col_index() {
  alignas(64) int v[16];
  for (int j = 0; j < 16; ++j) v[j] = j < R * C ? j % C : 0;
  return _mm512_load_si512(v);
}

// The tile: R * C <= 16, C even (column pairs) or C == 1 with R even (row pairs).
template <class F, int R, int C>
inline void tile(const typename F::block* const* w, const formats::q8_K::block* const* a, std::int64_t n, float* out) {
  static_assert(R * C <= 16 && R * C % 2 == 0 && (C % 2 == 0 || C == 1));
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  // signed weights: activations + 128 (unsigned) times weights; unsigned codes (<= 31):
  // codes times the activations as they are, pairs within 2 * 31 * 128, no correction
  auto bias = [&](__m512i y) { return F::unsigned_codes ? y : _mm512_xor_si512(y, k80); };
  auto pairs = [](__m512i y, __m512i wq) {
    return F::unsigned_codes ? _mm512_maddubs_epi16(wq, y) : _mm512_maddubs_epi16(y, wq);
  };
  const __m512i ri = row_index<R, C>(), ci = col_index<R, C>();
  unpacked u[R];
  __m512 sum = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    alignas(64) float f0[16] = {}, f1[16] = {}, da[16] = {};
    alignas(64) int corr[16] = {};
    for (int r = 0; r < R; ++r) {
      F::unpack(w[r][i], u[r]);
      finish<!F::unsigned_codes>(u[r]);
      f0[r] = u[r].f0;
      f1[r] = u[r].f1;
      corr[r] = u[r].corr;
    }
    for (int c = 0; c < C; ++c) da[c] = a[c][i].d;
    __m512i acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {  // weights 32t .. 32t+31
      if constexpr (C % 2 == 0) {
        __m512i y[C / 2];
#pragma GCC unroll 8
        for (int p = 0; p < C / 2; ++p) y[p] = bias(halves(a[2 * p][i].qs + 32 * t, a[2 * p + 1][i].qs + 32 * t));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i wq = _mm512_broadcast_i64x4(load256(u[r].q + 32 * t));
          const __m512i sc = _mm512_broadcast_i64x4(load256(u[r].sc + 16 * t));
#pragma GCC unroll 8
          for (int p = 0; p < C / 2; ++p)
            acc[r * (C / 2) + p] = _mm512_dpwssd_epi32(acc[r * (C / 2) + p], pairs(y[p], wq), sc);
        }
      } else {
        const __m512i y = bias(_mm512_broadcast_i64x4(load256(a[0][i].qs + 32 * t)));
#pragma GCC unroll 8
        for (int p = 0; p < R / 2; ++p) {
          const __m512i wq = halves(u[2 * p].q + 32 * t, u[2 * p + 1].q + 32 * t);
          const __m512i sc = halves(u[2 * p].sc + 16 * t, u[2 * p + 1].sc + 16 * t);
          acc[p] = _mm512_dpwssd_epi32(acc[p], pairs(y, wq), sc);
        }
      }
    }
    const __m512i q = _mm512_sub_epi32(block_sums16(acc), _mm512_permutexvar_epi32(ri, _mm512_load_si512(corr)));
    __m512i m = _mm512_setzero_si512();
    if constexpr (F::has_mins) {
      __m512i v[8];
      for (int k = 0; k < 8; ++k) v[k] = _mm512_setzero_si512();
      if constexpr (C % 2 == 0) {
        for (int p = 0; p < C / 2; ++p) {
          const __m512i bs = halves(a[2 * p][i].bsums, a[2 * p + 1][i].bsums);
          for (int r = 0; r < R; ++r)  // |bsum| <= 2^15 times |m| <= 63, pairs within int32
            v[r * (C / 2) + p] = _mm512_madd_epi16(bs, _mm512_broadcast_i64x4(load256(u[r].m16)));
        }
      } else {
        const __m512i bs = _mm512_broadcast_i64x4(load256(a[0][i].bsums));
        for (int p = 0; p < R / 2; ++p) v[p] = _mm512_madd_epi16(bs, halves(u[2 * p].m16, u[2 * p + 1].m16));
      }
      m = block_sums16(v);
    }
    const __m512 vf0 = _mm512_permutexvar_ps(ri, _mm512_load_ps(f0));
    const __m512 vf1 = _mm512_permutexvar_ps(ri, _mm512_load_ps(f1));
    const __m512 vda = _mm512_permutexvar_ps(ci, _mm512_load_ps(da));
    sum = _mm512_add_ps(sum, F::combine(vf0, vf1, vda, q, m));
  }
  alignas(64) float s[16];
  _mm512_store_ps(s, sum);
  for (int j = 0; j < R * C; ++j) out[j] = s[j];
}

inline __m512 cvt(__m512i v) { return _mm512_cvtepi32_ps(v); }

// signed bytes g where the mask byte m is 0, -g where it is 0xff
inline __m512i apply_signs(__m512i g, __m512i m) { return _mm512_sub_epi8(_mm512_xor_si512(g, m), m); }

// ---- the formats ------------------------------------------------------------------------

struct iq2_xxs {
  using block = formats::iq2_xxs::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq2xxs_grid;
    alignas(64) std::uint64_t m[32];
    alignas(16) std::uint8_t s[16];
    for (int k = 0; k < 8; ++k) {
      const std::uint32_t idx = formats::iq2_xxs::word(b, 2 * k), aux = formats::iq2_xxs::word(b, 2 * k + 1);
      for (int l = 0; l < 4; ++l) {
        std::memcpy(u.q + 32 * k + 8 * l, &grid[(idx >> (8 * l)) & 0xffu], 8);
        m[4 * k + l] = avx2_ops::ksigns_mask[(aux >> (7 * l)) & 127u];
      }
      s[2 * k] = s[2 * k + 1] = static_cast<std::uint8_t>(2 * (aux >> 28) + 1);
    }
    for (int h = 0; h < 4; ++h)
      _mm512_store_si512(u.q + 64 * h, apply_signs(_mm512_load_si512(u.q + 64 * h), _mm512_load_si512(m + 8 * h)));
    set_s16(u, _mm_load_si128(reinterpret_cast<const __m128i*>(s)), false);
    u.f0 = to_f32(b.d);
  }
  // (to_f32(w.d) * a->d) * float(bsum) * 0.125f
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(f0, da), cvt(q)), _mm512_set1_ps(0.125f));
  }
};

// the sixteen 4-bit scales of iq2_xs / iq2_s (nibble h of the 8 bytes) as 2s+1
inline __m128i nibble_odd_scales(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  const __m128i x = _mm_set1_epi64x(static_cast<long long>(v)), m4 = _mm_set1_epi8(0x0f);
  const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
  return _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1));
}

struct iq2_xs {
  using block = formats::iq2_xs::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq2xs_grid;
    alignas(64) std::uint64_t m[32];
    for (int g = 0; g < 32; ++g) {
      const unsigned q = b.qs[g];
      std::memcpy(u.q + 8 * g, &grid[q & 511u], 8);
      m[g] = avx2_ops::ksigns_mask[q >> 9];
    }
    for (int h = 0; h < 4; ++h)
      _mm512_store_si512(u.q + 64 * h, apply_signs(_mm512_load_si512(u.q + 64 * h), _mm512_load_si512(m + 8 * h)));
    set_s16(u, nibble_odd_scales(b.scales), false);
    u.f0 = to_f32(b.d);
  }
  static __m512 combine(__m512 f0, __m512 f1, __m512 da, __m512i q, __m512i m) { return iq2_xxs::combine(f0, f1, da, q, m); }
};

struct iq2_s {
  using block = formats::iq2_s::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq2s_grid;
    for (int g = 0; g < 32; ++g)
      std::memcpy(u.q + 8 * g, &grid[b.qs[g] | ((b.qh[g / 4] >> (2 * (g % 4))) & 3u) << 8], 8);
    for (int h = 0; h < 4; ++h) {
      std::uint64_t bits;
      std::memcpy(&bits, b.qs + 32 + 8 * h, 8);
      _mm512_store_si512(u.q + 64 * h, apply_signs(_mm512_load_si512(u.q + 64 * h), _mm512_movm_epi8(bits)));
    }
    set_s16(u, nibble_odd_scales(b.scales), false);
    u.f0 = to_f32(b.d);
  }
  static __m512 combine(__m512 f0, __m512 f1, __m512 da, __m512i q, __m512i m) { return iq2_xxs::combine(f0, f1, da, q, m); }
};

struct iq3_xxs {
  using block = formats::iq3_xxs::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq3xxs_grid;
    alignas(64) std::uint64_t m[32];
    alignas(16) std::uint8_t s[16];
    for (int k = 0; k < 64; ++k) std::memcpy(u.q + 4 * k, &grid[b.qs[k]], 4);
    for (int j = 0; j < 8; ++j) {
      const std::uint32_t aux = formats::iq3_xxs::word(b, j);
      for (int l = 0; l < 4; ++l) m[4 * j + l] = avx2_ops::ksigns_mask[(aux >> (7 * l)) & 127u];
      s[2 * j] = s[2 * j + 1] = static_cast<std::uint8_t>(2 * (aux >> 28) + 1);
    }
    for (int h = 0; h < 4; ++h)
      _mm512_store_si512(u.q + 64 * h, apply_signs(_mm512_load_si512(u.q + 64 * h), _mm512_load_si512(m + 8 * h)));
    set_s16(u, _mm_load_si128(reinterpret_cast<const __m128i*>(s)), false);
    u.f0 = to_f32(b.d);
  }
  // to_f32(w.d) * a->d * float(sum) * 0.25f
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(f0, da), cvt(q)), _mm512_set1_ps(0.25f));
  }
};

struct iq3_s {
  using block = formats::iq3_s::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq3s_grid;
    alignas(16) std::uint8_t s[16];
    for (int j = 0; j < 8; ++j) {
      const unsigned qh = b.qh[j];
      for (int k = 0; k < 8; ++k) std::memcpy(u.q + 32 * j + 4 * k, &grid[b.qs[8 * j + k] | (((qh >> k) & 1u) << 8)], 4);
      s[2 * j] = s[2 * j + 1] = static_cast<std::uint8_t>(1 + 2 * formats::iq3_s::scale(b, j));
    }
    for (int h = 0; h < 4; ++h) {
      std::uint64_t bits;
      std::memcpy(&bits, b.signs + 8 * h, 8);
      _mm512_store_si512(u.q + 64 * h, apply_signs(_mm512_load_si512(u.q + 64 * h), _mm512_movm_epi8(bits)));
    }
    set_s16(u, _mm_load_si128(reinterpret_cast<const __m128i*>(s)), false);
    u.f0 = to_f32(b.d);
  }
  // to_f32(w.d) * a->d * float(sum)
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(f0, da), cvt(q));
  }
};

struct iq1_s {
  using block = formats::iq1_s::block;
  static constexpr bool has_mins = true;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq1s_grid;
    for (int ib = 0; ib < 8; ++ib)  // coordinates -1, 0, 1
      for (int l = 0; l < 4; ++l) std::memcpy(u.q + 32 * ib + 8 * l, &grid[formats::iq1_s::index(b, ib, l)], 8);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = 2 * ((b.qh[ib] >> 12) & 7) + 1;
      u.s16[2 * ib] = u.s16[2 * ib + 1] = static_cast<std::int16_t>(ls);
      u.m16[2 * ib] = u.m16[2 * ib + 1] = static_cast<std::int16_t>((b.qh[ib] & 0x8000) ? -ls : ls);
    }
    u.f0 = to_f32(b.d);
  }
  // to_f32(w.d) * a->d * (float(8 * sum + sum_shift) * iq1s_delta)
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i m) {
    const __m512i s = _mm512_add_epi32(_mm512_slli_epi32(q, 3), m);
    return _mm512_mul_ps(_mm512_mul_ps(f0, da), _mm512_mul_ps(cvt(s), _mm512_set1_ps(codebooks::iq1s_delta)));
  }
};

struct iq1_m {
  using block = formats::iq1_m::block;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static constexpr int rows = 2, cols = 8;
  // w = 8 * coordinate + (neg ? -1 : 1): sum_j ls_j sum w q = 8 * sum + sum_shift exactly
  static void unpack(const block& b, unpacked& u) {
    const auto& grid = codebooks::iq1s_grid;
    alignas(64) std::uint64_t sh[32];
    for (int g = 0; g < 32; ++g) {
      std::memcpy(u.q + 8 * g, &grid[formats::iq1_m::index(b, g / 2, g % 2)], 8);
      sh[g] = formats::iq1_m::neg(b, g / 2, g % 2) ? ~std::uint64_t{0} : 0x0101010101010101ull;
    }
    for (int h = 0; h < 4; ++h) {
      __m512i v = _mm512_load_si512(u.q + 64 * h);
      v = _mm512_add_epi8(v, v);
      v = _mm512_add_epi8(v, v);
      v = _mm512_add_epi8(v, v);
      _mm512_store_si512(u.q + 64 * h, _mm512_add_epi8(v, _mm512_load_si512(sh + 8 * h)));
    }
    for (int j = 0; j < 16; ++j) u.s16[j] = static_cast<std::int16_t>(formats::iq1_m::sub_scale(b, j));
    u.f0 = formats::iq1_m::scale(b);
  }
  // scale(w) * a->d * (float(8 * sum + sum_shift) * iq1m_delta)
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(f0, da), _mm512_mul_ps(cvt(q), _mm512_set1_ps(codebooks::iq1m_delta)));
  }
};

struct q6_K {
  using block = formats::q6_K::block;
  static constexpr int rows = 2, cols = 8;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static void unpack(const block& b, unpacked& u) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), three = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load256(b.qh + 32 * h));
      for (int k2 = 0; k2 < 2; ++k2) {  // weights 128h + 64k2 + (0..63): k = 2k2, 2k2+1
        const __m512i lo = k2 ? _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4) : _mm512_and_si512(ql, low4);
        const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(4 * k2)), _mm256_set1_epi16(static_cast<short>(4 * k2 + 2)), 1);
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, sh), three);
        _mm512_store_si512(u.q + 128 * h + 64 * k2, _mm512_sub_epi8(_mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)), k32));
      }
    }
    set_s16(u, load128(b.scales), true);
    u.f0 = to_f32(b.d);
  }
  // to_f32(w.d) * a->d * float(sum)
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(f0, da), cvt(q));
  }
};

// q2_K / q3_K 2-bit codes of weights 128h + 32k + l: (qs[32h + l] >> 2k) & 3
inline __m512i k2_codes(const std::uint8_t* qs, int h, int k2) {
  const __m512i q = _mm512_broadcast_i64x4(load256(qs + 32 * h));
  const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(4 * k2)), _mm256_set1_epi16(static_cast<short>(4 * k2 + 2)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(q, sh), _mm512_set1_epi8(3));
}

struct q3_K {
  using block = formats::q3_K::block;
  static constexpr int rows = 2, cols = 8;
  static constexpr bool has_mins = false;
  static constexpr bool unsigned_codes = false;
  static void unpack(const block& b, unpacked& u) {
    // hmask bit i/32 of byte i%32 clear: code - 4. Weights 64v + (0..63) read bits 2v, 2v+1
    const __m512i hm = _mm512_broadcast_i64x4(load256(b.hmask));
    const __m512i four = _mm512_set1_epi8(4), one = _mm512_set1_epi8(1);
    for (int v = 0; v < 4; ++v) {
      const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * v)), _mm256_set1_epi16(static_cast<short>(2 * v + 1)), 1);
      const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hm, sh), one);
      // code2 - 4 + 4 * bit
      const __m512i c = _mm512_sub_epi8(k2_codes(b.qs, v / 2, v % 2), _mm512_sub_epi8(four, _mm512_slli_epi16(bit, 2)));
      _mm512_store_si512(u.q + 64 * v, c);
    }
    set_s16(u, _mm_sub_epi8(avx2_ops::scales_k3(b.scales), _mm_set1_epi8(32)), true);
    u.f0 = to_f32(b.d);
  }
  // (to_f32(w.d) * a->d) * float(isum)
  static __m512 combine(__m512 f0, __m512, __m512 da, __m512i q, __m512i) {
    return _mm512_mul_ps(_mm512_mul_ps(f0, da), cvt(q));
  }
};

struct q2_K {
  using block = formats::q2_K::block;
  static constexpr int rows = 2, cols = 8;
  static constexpr bool has_mins = true;
  static constexpr bool unsigned_codes = true;  // codes 0..31
  static void unpack(const block& b, unpacked& u) {
    for (int v = 0; v < 4; ++v) _mm512_store_si512(u.q + 64 * v, k2_codes(b.qs, v / 2, v % 2));
    const __m128i s = load128(b.scales);
    set_s16(u, _mm_and_si128(s, _mm_set1_epi8(0x0f)), false);
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.m16), _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f))));
    u.f0 = to_f32(b.d);
    u.f1 = to_f32(b.dmin);
  }
  // dall = a->d * to_f32(w.d), dmin = a->d * to_f32(w.dmin); dall * float(isum) - dmin * float(summs)
  static __m512 combine(__m512 f0, __m512 f1, __m512 da, __m512i q, __m512i m) {
    return _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(da, f0), cvt(q)), _mm512_mul_ps(_mm512_mul_ps(da, f1), cvt(m)));
  }
};

// A dot_tile for format F: R x C runs as tiles of at most 16 dots.
template <class F>
struct k_tile {
  template <int R, int C>
  static void run(const typename F::block* const* w, const formats::q8_K::block* const* a, std::int64_t n, float* out) {
    if constexpr (C == 1 && R % 2 == 0 && R <= 16) {
      tile<F, R, 1>(w, a, n, out);
    } else if constexpr (C % 2 == 0 && R * C <= 16) {
      tile<F, R, C>(w, a, n, out);
    } else {  // column by column
      float o[R];
      for (int c = 0; c < C; ++c) {
        const formats::q8_K::block* col[1] = {a[c]};
        if constexpr (R % 2 == 0 && R <= 16) {
          tile<F, R, 1>(w, col, n, o);
        } else {
          for (int r = 0; r < R; ++r) {
            const typename F::block* row[2] = {w[r], w[r]};
            float o2[2];
            tile<F, 2, 1>(row, col, n, o2);
            o[r] = o2[0];
          }
        }
        for (int r = 0; r < R; ++r) out[r * C + c] = o[r];
      }
    }
  }
};

}  // namespace gk::simd::avx512_tile

namespace gk {

#define GK_AVX512_K_TILE(fmt)                                                                                      \
  template <>                                                                                                      \
  struct dot_tile<formats::fmt, simd::avx512> {                                                                    \
    static constexpr bool specialised = true;                                                                      \
    static constexpr int rows = simd::avx512_tile::fmt::rows, cols = simd::avx512_tile::fmt::cols;                \
    template <int R, int C>                                                                                        \
    static void run(const formats::fmt::block* const* w, const formats::q8_K::block* const* a, std::int64_t n,     \
                    float* out) {                                                                                  \
      simd::avx512_tile::k_tile<simd::avx512_tile::fmt>::run<R, C>(w, a, n, out);                                  \
    }                                                                                                              \
  };

GK_AVX512_K_TILE(iq2_xxs)
GK_AVX512_K_TILE(iq2_xs)
GK_AVX512_K_TILE(iq2_s)
GK_AVX512_K_TILE(iq3_xxs)
GK_AVX512_K_TILE(iq3_s)
GK_AVX512_K_TILE(iq1_s)
GK_AVX512_K_TILE(iq1_m)
GK_AVX512_K_TILE(q2_K)
GK_AVX512_K_TILE(q3_K)
GK_AVX512_K_TILE(q6_K)

#undef GK_AVX512_K_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
