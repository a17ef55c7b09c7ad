// SPDX-License-Identifier: MIT
// AVX2 row dots of the 32-weight and small-block formats (q8_0, q4_0, q5_0, q4_1, q5_1,
// iq4_nl, mxfp4, nvfp4, q1_0, q2_0) with q8_0/q8_1 activations (see dot.hpp for the rules kept here).
//
// Each block's integer sums are exact: the weights become small unsigned codes and the
// products go through pmaddubsw (the bound that keeps every pair sum from saturating is
// beside each use), then pmaddwd by ones. Signed codebook values are split into their
// positive and negative magnitudes rather than moved onto the activation with psignb, which
// would turn an activation of -128 into -128 instead of +128.
//
// Blocks go in groups of eight: the eight integer sums are reduced together (one hadd tree
// instead of eight horizontal sums), the f16 scales are converted by one vcvtph2ps, and the
// definition's per-block float products run lane-wise with the same operands in the same
// order, so each lane is the scalar result's bits. Only the sum over blocks is serial, as
// the definition adds the blocks in order.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_ops {

// The totals of eight vectors' low and high 128-bit halves apart: lane j of lo is v[j]'s
// low half's total, of hi its high half's (the pair tiles' `halves` traits use both).
inline void hsum8_halves(const __m256i* v, __m256i& lo, __m256i& hi) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
  // a = [v0..v3 low-lane sums | v0..v3 high-lane sums], b likewise for v4..v7
  lo = _mm256_permute2x128_si256(a, b, 0x20);
  hi = _mm256_permute2x128_si256(a, b, 0x31);
}
// The totals of eight vectors of eight 32-bit partial sums, in order: lane j is v[j]'s total.
inline __m256i hsum8_i32(const __m256i* v) {
  __m256i lo, hi;
  hsum8_halves(v, lo, hi);
  return _mm256_add_epi32(lo, hi);
}

// acc + v[0] + v[1] + ... + v[m-1], one add at a time: the definition's order.
inline float add_in_order(float acc, __m256 v, int m) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  for (int j = 0; j < m; ++j) acc += t[j];
  return acc;
}

// The f16 field d of m blocks (m <= 8) as floats; vcvtph2ps is exact, as to_f32 is.
template <class B, class Get>
[[gnu::always_inline]] inline __m256 f16x8(const B* b, int m, Get get) {
  auto at = [&](int j) { return static_cast<short>(j < m ? get(b[j]).bits : 0); };
  return _mm256_cvtph_ps(_mm_setr_epi16(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)));
}

// The 32 4-bit codes of a q4_0-style block: weights 0..15 are the low nibbles of its
// 16 bytes, 16..31 the high ones.
inline __m256i nibbles32(const std::uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

// Byte j = set_to where bit j of the little-endian 32-bit word at qh is set, else 0.
inline __m256i bits32(const std::uint8_t* qh, std::uint8_t set_to) {
  std::uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(h)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(static_cast<char>(set_to)));
}

// The 5-bit codes (0..31) of a q5_0/q5_1 block.
inline __m256i codes5(const std::uint8_t* qs, const std::uint8_t* qh) {
  return _mm256_or_si256(nibbles32(qs), bits32(qh, 0x10));
}

// The sum of 32 signed bytes, as eight 32-bit partial sums (pairs within +-256).
inline __m256i sum_i8(__m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), _mm256_set1_epi16(1));
}

// Per-code value tables for pshufb, split into positive and negative magnitudes.
struct split_table { __m256i pos, neg; };
inline split_table split(const std::int8_t* values) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  const __m256i z = _mm256_setzero_si256();
  return {_mm256_max_epi8(v, z), _mm256_max_epi8(_mm256_sub_epi8(z, v), z)};
}

// e2m1 codes as the doubled integers the fp4 dots multiply (0, +-1, +-2, +-3, +-4, +-6,
// +-8, +-12), from the format's own fp4_doubled.
inline const std::int8_t* fp4_values() {
  static constexpr auto table = [] {
    std::array<std::int8_t, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::int8_t>(formats::detail::fp4_doubled(static_cast<std::uint8_t>(c)));
    return t;
  }();
  return table.data();
}

// The fp4 dot of 32 codes with 32 activations as eight 32-bit partial sums: magnitudes
// <= 12 times bytes >= -128 keep each pmaddubsw pair within +-3072, the difference of the
// two within +-6144.
inline __m256i dot_fp4(const split_table& t, __m256i codes, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_shuffle_epi8(t.pos, codes), a);
  const __m256i n = _mm256_maddubs_epi16(_mm256_shuffle_epi8(t.neg, codes), a);
  return _mm256_madd_epi16(_mm256_sub_epi16(p, n), _mm256_set1_epi16(1));
}

}  // namespace gk::simd::avx2_ops

namespace gk {

namespace simd::avx2_ops {

// The row loop shared by the one-activation-block formats: groups of eight blocks, each
// block's integer partial sums from ints(i, out) (S vectors per block), reduced together,
// turned into the eight block results by floats(i0, m, totals), added in order.
template <int S, class Ints, class Floats>
inline float row_by_8(std::int64_t nb, Ints ints, Floats floats) {
  float sum = 0.0f;
  // Full: m == 8, known at compile time (the loop unrolled, nothing zeroed).
  auto group = [&]<bool Full>(std::int64_t i0, int m) {
    __m256i part[S][8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if (Full || j < m) {
        ints(i0 + j, part, j);
      } else {
        for (int s = 0; s < S; ++s) part[s][j] = _mm256_setzero_si256();
      }
    }
    __m256i tot[S];
    for (int s = 0; s < S; ++s) tot[s] = hsum8_i32(part[s]);
    sum = add_in_order(sum, floats(i0, Full ? 8 : m, tot), Full ? 8 : m);
  };
  std::int64_t i = 0;
  for (; i + 8 <= nb; i += 8) group.template operator()<true>(i, 8);
  if (i < nb) group.template operator()<false>(i, static_cast<int>(nb - i));
  return sum;
}

// row_by_8's floats for the blocks whose value is s * (dw * da) (q8_0, iq4_nl).
template <class WB, class AB>
inline auto s_dw_da(const WB* w, const AB* a) {
  return [w, a](std::int64_t i0, int m, const __m256i* tot) __attribute__((always_inline)) {
    const __m256 dw = f16x8(w + i0, m, [](const auto& b) { return b.d; });
    const __m256 da = f16x8(a + i0, m, [](const auto& b) { return b.d; });
    return _mm256_mul_ps(_mm256_cvtepi32_ps(tot[0]), _mm256_mul_ps(dw, da));
  };
}

}  // namespace simd::avx2_ops

// q8_0: sum(w * a) over full-range bytes by sign extension and pmaddwd (dot_i8x32); value
// s * (dw * da).
template <>
struct dot_kernel<formats::q8_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q8_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) { part[0][j] = dot_i8x32(load(w[i].qs), load(a[i].qs)); };
    return row_by_8<1>(n / 32, ints, s_dw_da(w, a));
  }
};

// q4_0: (c - 8) * a as c * a - 8 * a, c <= 15: pairs within +-3840 and +-2048, their
// difference within +-5888; value (s * dw) * da.
template <>
struct dot_kernel<formats::q4_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q4_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i k8 = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
    auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) {
      const __m256i ya = load(a[i].qs);
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32(w[i].qs), ya), _mm256_maddubs_epi16(k8, ya));
      part[0][j] = _mm256_madd_epi16(p, ones);
    };
    auto floats = [&](std::int64_t i0, int m, const __m256i* tot) __attribute__((always_inline)) {
      const __m256 dw = f16x8(w + i0, m, [](const auto& b) { return b.d; });
      const __m256 da = f16x8(a + i0, m, [](const auto& b) { return b.d; });
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(tot[0]), dw), da);  // (s * dw) * da
    };
    return row_by_8<1>(n / 32, ints, floats);
  }
};

template <>
struct dot_kernel<formats::q5_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q5_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i k16 = _mm256_set1_epi8(16), ones = _mm256_set1_epi16(1);
    auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) {
      const __m256i ya = load(a[i].qs);
      // (c - 16) * a as c * a - 16 * a, c <= 31: pairs within +-7936 and +-4096, their
      // difference within +-12032
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(codes5(w[i].qs, w[i].qh), ya), _mm256_maddubs_epi16(k16, ya));
      part[0][j] = _mm256_madd_epi16(p, ones);
    };
    auto floats = [&](std::int64_t i0, int m, const __m256i* tot) {
      const __m256 dw = f16x8(w + i0, m, [](const auto& b) { return b.d; });
      const __m256 da = f16x8(a + i0, m, [](const auto& b) { return b.d; });
      return _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(tot[0]));  // dw * da * s
    };
    return row_by_8<1>(n / 32, ints, floats);
  }
};

// q4_1 and q5_1: sum(c * qa) and the activation sum sa from the codes (not q8_1's s), then
// dw * da * sum + m * (da * sa), as the definition writes it.
namespace simd::avx2_ops {
template <class W, class Codes>
inline float row_affine(const typename W::block* w, const formats::q8_1::block* a, std::int64_t n, Codes codes) {
  const __m256i ones = _mm256_set1_epi16(1);
  auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) {
    const __m256i ya = load(a[i].qs);
    // codes <= 31 times bytes >= -128: pairs within +-7936
    part[0][j] = _mm256_madd_epi16(_mm256_maddubs_epi16(codes(w[i]), ya), ones);
    part[1][j] = sum_i8(ya);
  };
  auto floats = [&](std::int64_t i0, int m, const __m256i* tot) {
    const __m256 dw = f16x8(w + i0, m, [](const auto& b) { return b.d; });
    const __m256 mw = f16x8(w + i0, m, [](const auto& b) { return b.m; });
    const __m256 da = f16x8(a + i0, m, [](const auto& b) { return b.d; });
    const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(tot[0]));
    const __m256 t2 = _mm256_mul_ps(mw, _mm256_mul_ps(da, _mm256_cvtepi32_ps(tot[1])));
    return _mm256_add_ps(t1, t2);
  };
  return row_by_8<2>(n / 32, ints, floats);
}
}  // namespace simd::avx2_ops

template <>
struct dot_kernel<formats::q4_1, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q4_1::block* w, const formats::q8_1::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    return row_affine<formats::q4_1>(w, a, n, [](const formats::q4_1::block& b) { return nibbles32(b.qs); });
  }
};

template <>
struct dot_kernel<formats::q5_1, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q5_1::block* w, const formats::q8_1::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    return row_affine<formats::q5_1>(w, a, n, [](const formats::q5_1::block& b) { return codes5(b.qs, b.qh); });
  }
};

template <>
struct dot_kernel<formats::iq4_nl, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::iq4_nl::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const split_table t = split(codebooks::kvalues_iq4nl);
    const __m256i ones = _mm256_set1_epi16(1);
    auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) {
      const __m256i c = nibbles32(w[i].qs), ya = load(a[i].qs);
      // magnitudes <= 127 (negative) and <= 113 (positive) times bytes >= -128: pairs
      // within +-32512; their difference could pass 16 bits, so it is taken in 32
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(t.pos, c), ya), ones);
      const __m256i q = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_shuffle_epi8(t.neg, c), ya), ones);
      part[0][j] = _mm256_sub_epi32(p, q);
    };
    return row_by_8<1>(n / 32, ints, s_dw_da(w, a));
  }
};

template <>
struct dot_kernel<formats::mxfp4, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::mxfp4::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const split_table t = split(fp4_values());
    auto ints = [&](std::int64_t i, __m256i (*part)[8], int j) {
      part[0][j] = dot_fp4(t, nibbles32(w[i].qs), load(a[i].qs));
    };
    auto floats = [&](std::int64_t i0, int m, const __m256i* tot) {
      auto e = [&](int j) { return j < m ? static_cast<int>(w[i0 + j].e) : 0; };
      const __m256i ev = _mm256_setr_epi32(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7));
      // e8m0_to_f32_half: the bits 0x00200000 << e for e < 2, else (e - 1) << 23
      const __m256i hb = _mm256_blendv_epi8(_mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ev),
                                            _mm256_slli_epi32(_mm256_sub_epi32(ev, _mm256_set1_epi32(1)), 23),
                                            _mm256_cmpgt_epi32(ev, _mm256_set1_epi32(1)));
      const __m256 da = f16x8(a + i0, m, [](const auto& b) { return b.d; });
      return _mm256_mul_ps(_mm256_mul_ps(da, _mm256_castsi256_ps(hb)), _mm256_cvtepi32_ps(tot[0]));  // da * h * s
    };
    return row_by_8<1>(n / 32, ints, floats);
  }
};

// nvfp4: 64 weights, four sub-blocks of 16 with their own ue4m3 scale, two q8_0 blocks.
// A group is two weight blocks: eight sub-block sums, reduced together.
template <>
struct dot_kernel<formats::nvfp4, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::nvfp4::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    static constexpr auto half = [] {
      std::array<float, 256> t{};
      // as formats::nvfp4::half_scale, which is not constexpr
      for (int s = 0; s < 256; ++s) t[s] = ue4m3_to_f32(static_cast<std::uint8_t>(s)) * 0.5f;
      return t;
    }();
    const split_table t = split(fp4_values());
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const std::int64_t nb = n / 64;
    float sum = 0.0f;
    auto group = [&](std::int64_t i0, int m) {  // m = 1 or 2 weight blocks
      __m256i part[4];
      for (int j = 0; j < 2; ++j) {
        if (j < m) {
          const __m256i q = load(w[i0 + j].qs);
          const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
          // activation block b takes bytes 16b .. 16b+15: sub-block 2b's low then high
          // nibbles of its first eight, then sub-block 2b+1's
          const __m256i ul = _mm256_unpacklo_epi64(lo, hi), uh = _mm256_unpackhi_epi64(lo, hi);
          part[2 * j] = dot_fp4(t, _mm256_permute2x128_si256(ul, uh, 0x20), load(a[2 * (i0 + j)].qs));
          part[2 * j + 1] = dot_fp4(t, _mm256_permute2x128_si256(ul, uh, 0x31), load(a[2 * (i0 + j) + 1].qs));
        } else {
          part[2 * j] = part[2 * j + 1] = _mm256_setzero_si256();
        }
      }
      // lanes 0-3 of part[b] are sub-block 2b, lanes 4-7 sub-block 2b+1: after two hadds
      // lane b holds the first, lane 4+b the second; order them sub-block by sub-block
      const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(part[0], part[1]), _mm256_hadd_epi32(part[2], part[3]));
      const __m256 s = _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(h, order));
      alignas(32) float hs[8] = {};
      alignas(16) std::uint16_t dh[8] = {};
      for (int j = 0; j < m; ++j)
        for (int k = 0; k < 4; ++k) {
          hs[4 * j + k] = half[w[i0 + j].d[k]];
          dh[4 * j + k] = a[2 * (i0 + j) + k / 2].d.bits;
        }
      const __m256 da = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
      alignas(32) float tk[8];
      _mm256_store_ps(tk, _mm256_mul_ps(_mm256_mul_ps(da, _mm256_load_ps(hs)), s));  // da * h * s
      for (int j = 0; j < m; ++j) {
        float b = 0.0f;
        for (int k = 0; k < 4; ++k) b += tk[4 * j + k];
        sum += b;
      }
    };
    std::int64_t i = 0;
    for (; i + 2 <= nb; i += 2) group(i, 2);
    if (i < nb) group(i, 1);
    return sum;
  }
};

// q1_0 and q2_0: several q8_0 blocks per weight block, each with its own integer sum
// scaled by its d; a group is eight activation blocks (two q1_0 blocks, four q2_0 blocks).
namespace simd::avx2_ops {
template <class W, class Ints>
inline float row_multi(const typename W::block* w, const formats::q8_0::block* a, std::int64_t n, Ints ints) {
  constexpr int per = W::block_size / 32, wpg = 8 / per;  // activation blocks per weight block, weight blocks per group
  const std::int64_t nb = n / W::block_size;
  float sum = 0.0f;
  auto group = [&](std::int64_t i0, int m) {
    __m256i part[8];
    for (int j = 0; j < 8; ++j) part[j] = j < m * per ? ints(w[i0 + j / per], j % per, a[i0 * per + j]) : _mm256_setzero_si256();
    const __m256 da = f16x8(a + i0 * per, m * per, [](const auto& b) { return b.d; });
    alignas(32) float tk[8];
    _mm256_store_ps(tk, _mm256_mul_ps(da, _mm256_cvtepi32_ps(hsum8_i32(part))));  // da * s
    for (int j = 0; j < m; ++j) {
      float b = 0.0f;
      for (int k = 0; k < per; ++k) b += tk[per * j + k];
      sum += _cvtsh_ss(w[i0 + j].d.bits) * b;  // dw * sum
    }
  };
  std::int64_t i = 0;
  for (; i + wpg <= nb; i += wpg) group(i, wpg);
  if (i < nb) group(i, static_cast<int>(nb - i));
  return sum;
}
}  // namespace simd::avx2_ops

template <>
struct dot_kernel<formats::q1_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q1_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i ones8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1), two = _mm256_set1_epi8(2);
    const __m256i base =
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return row_multi<formats::q1_0>(w, a, n, [&](const formats::q1_0::block& b, int k, const formats::q8_0::block& y) {
      const __m256i ya = load(y.qs);
      // +-a as 2 * (bit * a) - a: pairs within +-512 and +-256
      // byte j: bit j % 8 of qs[4k + j / 8] (the 16 bytes broadcast once, shared by the four k)
      const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      const __m256i spread = _mm256_shuffle_epi8(q, _mm256_add_epi8(base, _mm256_set1_epi8(static_cast<char>(4 * k))));
      const __m256i set = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), two);
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(set, ya), _mm256_maddubs_epi16(ones8, ya));
      return _mm256_madd_epi16(p, ones);
    });
  }
};

template <>
struct dot_kernel<formats::q2_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static float row(const formats::q2_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::avx2_ops;
    const __m256i ones8 = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1), three = _mm256_set1_epi8(3);
    const __m256i shifts = _mm256_setr_epi64x(0, 2, 4, 6);
    // byte 8p + i of the codes below is weight 4i + p; gather the activations the same way
    const __m256i by_phase =
        _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    return row_multi<formats::q2_0>(w, a, n, [&](const formats::q2_0::block& b, int k, const formats::q8_0::block& y) {
      std::uint64_t x;
      std::memcpy(&x, b.qs + 8 * k, 8);
      const __m256i c = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(static_cast<long long>(x)), shifts), three);
      const __m256i ya = load(y.qs);
      const __m256i yt = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(ya, by_phase), order);
      // (c - 1) * a as c * a - a, c <= 3: pairs within +-768 and +-256
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(c, yt), _mm256_maddubs_epi16(ones8, ya));
      return _mm256_madd_epi16(p, ones);
    });
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
