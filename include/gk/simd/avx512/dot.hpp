// SPDX-License-Identifier: MIT
// AVX-512 (F/BW/VL/DQ + VNNI) row dots. Same rule as the AVX2 ones: only the exact integer
// part of a block is vectorised, the scalar definition's float operations run in its order.
//
// Legacy formats (32-weight blocks): sixteen blocks at a time. Their integer sums land in
// one vector of sixteen int32 (a transpose-and-add reduction), their scales are converted
// sixteen at a time by vcvtph2ps (the same conversion as to_f32, NaN payloads included),
// and each block's float term is formed lane-wise with the definition's operations; the
// sixteen terms are then added to the running sum one by one, in block order, since the
// definition's sum over blocks is sequential.
//
// vpdpbusd multiplies an unsigned byte by a signed byte and adds four products into an
// int32 lane without saturation: with both factors bytes a lane gains at most
// 4 * 255 * 128 = 130560 per call, far from int32 overflow, so it is exact for any bytes.
// Signed weights are made unsigned by an offset (q8_0: w ^ 0x80 = w + 128; q4_0: the raw
// code, weight + 8) and the offset times the activation sum is taken off with a second
// vpdpbusd over the same activation bytes (q4_1's activation sum is that vpdpbusd by 1).
// Activation bytes may be anything, -128 included: no activation is ever negated.
//
// K-quants (256-weight blocks): one block at a time; its float term is one add per 256
// weights, so nothing is batched. pmaddubsw (int16 pair sums, saturating) is used only
// with small unsigned codes, its bound named at each use; vpdpwssd then applies the int16
// sub-block scales (int16 * int16 pairs into int32, exact for these ranges).
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/avx2/dot_kquants.hpp"
#include "gk/simd/prefetch.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_ops {

using gk::simd::prefetch;  // simd/prefetch.hpp

inline __m512i load(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Two 32-byte runs as one vector: p in bytes 0-31, q in 32-63.
inline __m512i load2x32(const void* p, const void* q) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p)), load256(q), 1);
}

// v[k] holds the int32 partial sums of blocks 2k (lanes 0-7) and 2k+1 (lanes 8-15),
// k = 0..7; returns the sixteen block totals, block i in lane i. Exact (int32 adds).
inline __m512i block_sums16(const __m512i* v) {
  __m512i a[4], b[2];
  for (int k = 0; k < 4; ++k)  // per 128-bit lane: [v2k 0+2, v2k+1 0+2, v2k 1+3, v2k+1 1+3]
    a[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                            _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 2; ++k)  // per 128-bit lane: the lane's total of v4k .. v4k+3
    b[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * k], a[2 * k + 1]),
                            _mm512_unpackhi_epi64(a[2 * k], a[2 * k + 1]));
  // b[k] lanes: 0-3 first half of blocks 8k+{0,2,4,6}, 4-7 their second half,
  // 8-11 first half of 8k+{1,3,5,7}, 12-15 their second half
  const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // s lanes hold blocks 0 2 4 6 1 3 5 7 8 10 12 14 9 11 13 15
  const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  return _mm512_permutexvar_epi32(order, s);
}

// The f16 at byte 0 of sixteen records `stride` bytes apart, as floats (vcvtph2ps: exact,
// NaN made quiet with its payload kept, as to_f32 converts). Sixteen word loads: a
// vpgatherdd here cost a third of q8_0's speed on Zen 4.
template <std::size_t stride>
inline __m512 f16x16(const void* base) {
  const auto* p = static_cast<const unsigned char*>(base);
  auto h = [p](int i) {
    std::uint16_t v;
    std::memcpy(&v, p + i * stride, 2);
    return static_cast<short>(v);
  };
  return _mm512_cvtph_ps(_mm256_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7), h(8), h(9), h(10), h(11),
                                           h(12), h(13), h(14), h(15)));
}

// sum += t[0]; sum += t[1]; ... in lane order, as the definition adds blocks.
inline float add_in_order(float sum, __m512 t) {
  alignas(64) float v[16];
  _mm512_store_ps(v, t);
  for (int j = 0; j < 16; ++j) sum += v[j];
  return sum;
}

// How far ahead of its reads a row dot that decode runs row by row prefetches the weights,
// in bytes (float_row_dot, q6_K's row). The definition's one chain of adds per lane leaves
// a single row's dot few loads in flight, and decode from memory ran at the bandwidth a
// short run-ahead gets. Standalone on an AMD EPYC (Zen 5 share), one thread, f16, 4096-wide
// rows, GB/s: 33 MB of rows 35-38 -> 53-54 at 12 KiB ahead (4 KiB 44, 8 KiB 50, 16 KiB 54),
// 134 MB 32 -> 43-44; through gk (mul_mat, 4096 x 16384, alternating builds) f16 / bf16 one
// thread 34 / 34.5 -> 36 / 45 GB/s, two 66.5 / 68 -> 96 / 92; q6_K 33 -> 44 (one thread), 63
// -> 81 (two), and cache-resident (4096 x 4096) unchanged. Not taken: q8_0's and q5_K's
// rows (from memory +2-6%, cache-resident q8_0 75 -> 60 GFLOP/s: their loops are bound by
// instructions, and the prefetches add to them). A prefetch does not fault, so running past
// the tensor is harmless.
inline constexpr std::size_t row_prefetch_bytes = 12 << 10;

// R weight rows by C activation columns of a 32-weight format whose kernel K gives the
// float terms of sixteen blocks (K::group) and of one block (K::tail): out[r * C + c] is
// the row dot of w[r] and a[c], each sum taken in block order exactly as one row's is.
// The definition's sum is a chain of dependent adds (one per block, about 4 cycles each);
// a tile runs R * C such chains side by side, lane by lane, so their latencies overlap
// instead of adding up: that chain, not the integer work, bounds one row at a time.
template <class K, int R, int C>
inline void chain_tile(const typename K::block* const* w, const typename K::ablock* const* a, std::int64_t n,
                       float* out) {
  const std::int64_t nb = n / 32;
  float sum[R * C];
  for (int j = 0; j < R * C; ++j) sum[j] = 0.0f;
  std::int64_t i = 0;
  for (; i + 16 <= nb; i += 16) {
    alignas(64) float t[R * C][16];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) _mm512_store_ps(t[r * C + c], K::group(w[r] + i, a[c] + i));
    for (int l = 0; l < 16; ++l)
      for (int j = 0; j < R * C; ++j) sum[j] += t[j][l];
  }
  for (; i < nb; ++i)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) sum[r * C + c] += K::tail(w[r][i], a[c][i]);
  for (int j = 0; j < R * C; ++j) out[j] = sum[j];
}

inline int hsum(__m512i v) { return _mm512_reduce_add_epi32(v); }

// The totals of q (16 lanes) and m (8 lanes), reduced together.
inline void hsum2(__m512i q, __m256i m, int& sq, int& sm) {
  const __m256i t = _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));
  __m256i x = _mm256_add_epi32(_mm256_unpacklo_epi32(t, m), _mm256_unpackhi_epi32(t, m));  // q m q m per 128
  __m128i y = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  y = _mm_add_epi32(y, _mm_unpackhi_epi64(y, y));
  sq = _mm_cvtsi128_si32(y);
  sm = _mm_extract_epi32(y, 1);
}

inline float half_to_f32(gk::f16 h) { return _cvtsh_ss(h.bits); }  // = to_f32 (F16C)

}  // namespace gk::simd::avx512_ops

namespace gk {

template <>
struct dot_kernel<formats::q8_0, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  using block = formats::q8_0::block;
  using ablock = formats::q8_0::block;
  // sum w*a = sum (w + 128) * a - 128 * sum a; w ^ 0x80 is w + 128 as an unsigned byte
  static __m512i pair(const block* w, const block* a) {
    using namespace simd::avx512_ops;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i x = _mm512_xor_si512(load2x32(w[0].qs, w[1].qs), flip);
    const __m512i y = load2x32(a[0].qs, a[1].qs);
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, y));
  }
  // The float terms of sixteen blocks, block j in lane j: float(s) * (dw * da).
  static __m512 group(const block* w, const block* a) {
    using namespace simd::avx512_ops;
    __m512i v[8];
    for (int k = 0; k < 8; ++k) v[k] = pair(w + 2 * k, a + 2 * k);
    const __m512 s = _mm512_cvtepi32_ps(block_sums16(v));
    const __m512 dw = f16x16<sizeof(block)>(&w[0].d), da = f16x16<sizeof(block)>(&a[0].d);
    return _mm512_mul_ps(s, _mm512_mul_ps(dw, da));
  }
  // One block's float term.
  static float tail(const block& w, const block& a) {
    using namespace simd::avx512_ops;
    const __m256i x = _mm256_xor_si256(load256(w.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
    const __m256i y = load256(a.qs);
    const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)), y));
    const int s = simd::avx2_ops::hsum_i32(p);
    return static_cast<float>(s) * (half_to_f32(w.d) * half_to_f32(a.d));
  }
  static float row(const block* w, const block* a, std::int64_t n) {
    float out;
    simd::avx512_ops::chain_tile<dot_kernel, 1, 1>(&w, &a, n, &out);
    return out;
  }
};

template <>
struct dot_kernel<formats::q4_0, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  using block = formats::q4_0::block;
  using ablock = formats::q8_0::block;
  // codes c in 0..15 (weight c - 8): sum (c - 8) * a = sum c * a - 8 * sum a
  static __m512i pair(const block* w, const ablock* a) {
    using namespace simd::avx512_ops;
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
    // 128-bit lanes [q0, q0, q1, q1], shifted by [0, 4, 0, 4]: weights 0-15, 16-31 of each block
    const __m512i qq = _mm512_shuffle_i64x2(_mm512_castsi256_si512(q), _mm512_castsi256_si512(q), _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                         0x0004000400040004);
    const __m512i c = _mm512_and_si512(_mm512_srlv_epi16(qq, sh), _mm512_set1_epi8(0x0f));
    const __m512i y = load2x32(a[0].qs, a[1].qs);
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c, y),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), y));
  }
  // The float terms of sixteen blocks, block j in lane j: float(s) * dw * da.
  static __m512 group(const block* w, const ablock* a) {
    using namespace simd::avx512_ops;
    __m512i v[8];
    for (int k = 0; k < 8; ++k) v[k] = pair(w + 2 * k, a + 2 * k);
    const __m512 s = _mm512_cvtepi32_ps(block_sums16(v));
    const __m512 dw = f16x16<sizeof(block)>(&w[0].d), da = f16x16<sizeof(ablock)>(&a[0].d);
    return _mm512_mul_ps(_mm512_mul_ps(s, dw), da);
  }
  static float tail(const block& w, const ablock& a) {
    using namespace simd::avx512_ops;
    const __m128i q = load128(w.qs);
    const __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
    const __m256i y = load256(a.qs);
    const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), c, y),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), y));
    return static_cast<float>(simd::avx2_ops::hsum_i32(p)) * half_to_f32(w.d) * half_to_f32(a.d);
  }
  static float row(const block* w, const ablock* a, std::int64_t n) {
    float out;
    simd::avx512_ops::chain_tile<dot_kernel, 1, 1>(&w, &a, n, &out);
    return out;
  }
};

template <>
struct dot_kernel<formats::q4_1, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  using block = formats::q4_1::block;
  using ablock = formats::q8_1::block;
  // codes c in 0..15 of two blocks, weights 0-15 and 16-31 of each (as q4_0's pair)
  static __m512i codes(const block* w) {
    using namespace simd::avx512_ops;
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(w[0].qs)), load128(w[1].qs), 1);
    const __m512i qq = _mm512_shuffle_i64x2(_mm512_castsi256_si512(q), _mm512_castsi256_si512(q), _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                         0x0004000400040004);
    return _mm512_and_si512(_mm512_srlv_epi16(qq, sh), _mm512_set1_epi8(0x0f));
  }
  static float row(const block* w, const ablock* a, std::int64_t n) {
    using namespace simd::avx512_ops;
    const __m512i one = _mm512_set1_epi8(1);
    const std::int64_t nb = n / 32;
    float sum = 0.0f;
    std::int64_t i = 0;
    for (; i + 16 <= nb; i += 16) {
      __m512i vq[8], va[8];
      for (int k = 0; k < 8; ++k) {  // sum(c * a) and sum(a), each lane at most 4 * 255 * 128
        const __m512i y = load2x32(a[i + 2 * k].qs, a[i + 2 * k + 1].qs);
        vq[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes(w + i + 2 * k), y);
        va[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), one, y);
      }
      const __m512 s = _mm512_cvtepi32_ps(block_sums16(vq)), sa = _mm512_cvtepi32_ps(block_sums16(va));
      const __m512 dw = f16x16<sizeof(block)>(&w[i].d), mw = f16x16<sizeof(block)>(&w[i].m);
      const __m512 da = f16x16<sizeof(ablock)>(&a[i].d);
      // dw * da * float(sum) + mw * (da * float(sa))
      sum = add_in_order(sum, _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(dw, da), s), _mm512_mul_ps(mw, _mm512_mul_ps(da, sa))));
    }
    for (; i < nb; ++i) {
      const __m128i q = load128(w[i].qs);
      const __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
      const __m256i y = load256(a[i].qs);
      const int sq = simd::avx2_ops::hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), c, y));
      const int sa = simd::avx2_ops::hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), y));
      const float da = half_to_f32(a[i].d);
      sum += half_to_f32(w[i].d) * da * static_cast<float>(sq) + half_to_f32(w[i].m) * (da * static_cast<float>(sa));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q6_K, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::q6_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx512_ops;
    const __m512i low4 = _mm512_set1_epi8(0x0f), three = _mm512_set1_epi8(3), k32 = _mm512_set1_epi8(32);
    // 64 weights per vector = four 16-weight sub-blocks, one per 128-bit lane
    const __m512i lane_word = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                               1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    // qh shifts: bits 0/2 (k = 0, 1) for the low-nibble vector, 4/6 (k = 2, 3) for the high one
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      {
        const char* ahead = reinterpret_cast<const char*>(w + i) + row_prefetch_bytes;
#pragma GCC unroll 4
        for (std::size_t l = 0; l < (sizeof(w[i]) + 63) / 64; ++l) prefetch<0>(ahead + 64 * l);
      }
      const auto& b = w[i];
      const auto& y = a[i];
      const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(load128(b.scales)));
      __m512i acc = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = load(b.ql + 64 * h);  // weights 128h + 0..63 (low nibbles), + 64..127 (high)
        const __m512i qh = _mm512_broadcast_i64x4(load256(b.qh + 32 * h));
        for (int k2 = 0; k2 < 2; ++k2) {
          const __m512i lo = k2 ? _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4) : _mm512_and_si512(ql, low4);
          const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, k2 ? sh_hi : sh_lo), three);
          const __m512i u = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));  // 0..63
          // (u - 32) * a as u * a - 32 * a: pairs within +-16128 and +-8192, no saturation;
          // the difference's pairs are within +-8192
          const __m512i ya = load(y.qs + 128 * h + 64 * k2);
          const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(u, ya), _mm512_maddubs_epi16(k32, ya));
          const int j = 8 * h + 4 * k2;  // sub-blocks j .. j+3, one per 128-bit lane
          const __m512i sc = _mm512_permutexvar_epi16(_mm512_add_epi16(lane_word, _mm512_set1_epi16(static_cast<short>(j))), sc16);
          acc = _mm512_dpwssd_epi32(acc, p, sc);  // |total| <= 256 * 32 * 128 * 128 < 2^31
        }
      }
      sum += half_to_f32(b.d) * y.d * static_cast<float>(hsum(acc));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q4_K, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::q4_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx512_ops;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i sh = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i half_word = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      // scales bytes 0-7, mins 8-15; unpacked in general registers, which are idle here (a
      // vector unpack measured 10% slower: the vector ports are this loop's bound)
      const __m128i sm = simd::avx2_ops::scales_mins_k4(b.scales);
      const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));  // words 0-7 scales, 8-15 mins
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // two chains: latency, not ports, bounds this loop
      for (int c = 0; c < 4; ++c) {  // 64 weights: sub-blocks 2c (low nibbles) and 2c+1 (high)
        const __m512i q = _mm512_srlv_epi16(_mm512_broadcast_i64x4(load256(b.qs + 32 * c)), sh);
        const __m512i u = _mm512_and_si512(q, low4);
        // codes <= 15 times bytes >= -128: pairs stay within +-3840, no saturation
        const __m512i p = _mm512_maddubs_epi16(u, load(y.qs + 64 * c));
        const __m512i sc = _mm512_permutexvar_epi16(_mm512_add_epi16(half_word, _mm512_set1_epi16(static_cast<short>(2 * c))), sc16);
        acc[c & 1] = _mm512_dpwssd_epi32(acc[c & 1], p, sc);  // |total| <= 256 * 15 * 128 * 63 < 2^31
      }
      // min term: mins[j] * (bsums[2j] + bsums[2j+1]) by pmaddwd with each min twice
      const __m256i mins2 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
      int sum_q, sum_m;
      hsum2(_mm512_add_epi32(acc[0], acc[1]), _mm256_madd_epi16(load256(y.bsums), mins2), sum_q, sum_m);
      sum += half_to_f32(b.d) * y.d * static_cast<float>(sum_q) - half_to_f32(b.dmin) * y.d * static_cast<float>(sum_m);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q5_K, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static float row(const formats::q5_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::avx512_ops;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i sh = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i half_word = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      // scales bytes 0-7, mins 8-15; unpacked in general registers, which are idle here (a
      // vector unpack measured 10% slower: the vector ports are this loop's bound)
      const __m128i sm = simd::avx2_ops::scales_mins_k4(b.scales);
      const __m512i qh = _mm512_broadcast_i64x4(load256(b.qh));
      const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));  // words 0-7 scales, 8-15 mins
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // two chains: latency, not ports, bounds this loop
      for (int c = 0; c < 4; ++c) {  // 64 weights: sub-blocks 2c (low nibbles) and 2c+1 (high)
        const __m512i q = _mm512_srlv_epi16(_mm512_broadcast_i64x4(load256(b.qs + 32 * c)), sh);
        // fifth bit: bit 2c of qh[l] for weight 64c + l, bit 2c+1 for weight 64c + 32 + l,
        // shifted down to bit 0 of each byte and up to bit 4
        const __m512i hb = _mm512_slli_epi16(_mm512_srlv_epi16(qh, _mm512_add_epi16(half_word, _mm512_set1_epi16(static_cast<short>(2 * c)))), 4);
        const __m512i u = _mm512_or_si512(_mm512_and_si512(q, low4), _mm512_and_si512(hb, _mm512_set1_epi8(16)));
        // codes <= 31 times bytes >= -128: pairs stay within +-7936, no saturation
        const __m512i p = _mm512_maddubs_epi16(u, load(y.qs + 64 * c));
        const __m512i sc = _mm512_permutexvar_epi16(_mm512_add_epi16(half_word, _mm512_set1_epi16(static_cast<short>(2 * c))), sc16);
        acc[c & 1] = _mm512_dpwssd_epi32(acc[c & 1], p, sc);  // |total| <= 256 * 31 * 128 * 63 < 2^31
      }
      // min term: mins[j] * (bsums[2j] + bsums[2j+1]) by pmaddwd with each min twice
      const __m256i mins2 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
      int sum_q, sum_m;
      hsum2(_mm512_add_epi32(acc[0], acc[1]), _mm256_madd_epi16(load256(y.bsums), mins2), sum_q, sum_m);
      sum += half_to_f32(b.d) * y.d * static_cast<float>(sum_q) - half_to_f32(b.dmin) * y.d * static_cast<float>(sum_m);
    }
    return sum;
  }
};

// The tiles of the 32-weight formats (dot_tile) are in avx512/dot_tile_legacy.hpp.

}  // namespace gk

GK_EXACT_FP_END

#endif
