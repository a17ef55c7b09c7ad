// SPDX-License-Identifier: MIT
// NEON row dots of the K-quants q2_K ... q6_K with q8_K activations (see neon/dot.hpp for
// the integer scheme). Every code becomes a signed byte (q2_K 0..3, q3_K -4..3, q4_K
// 0..15, q5_K 0..31, q6_K -32..31); a sub-block's exact 32-bit partial sums are scaled
// by its integer scale with vmlaq_n_s32 (a block's total is at most 2^27 in magnitude, q6_K's
// 128 * 32 * 128 * 256 the largest: inside int32, as the definition's int sums), so the
// block's integer totals are the definition's and its float expression is the definition's.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/kquants_low.hpp"
#include "gk/simd/neon/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// The 2-bit fields at bit 2k of 16 bytes (k = 0..3), as bytes 0..3.
inline uint8x16_t field2(uint8x16_t q, int k) {
  return vandq_u8(vshlq_u8(q, vdupq_n_s8(static_cast<std::int8_t>(-2 * k))), vdupq_n_u8(3));
}

}  // namespace gk::simd::neon_ops

namespace gk {

// q2_K: sixteen sub-blocks of 16, codes 0..3 (kq_low::code2), 4-bit scale and min each.
template <>
struct dot_kernel<formats::q2_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q2_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      int summs = 0;
      for (int j = 0; j < 16; ++j) summs += y.bsums[j] * (b.scales[j] >> 4);
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t q0 = vld1q_u8(b.qs + 32 * h), q1 = vld1q_u8(b.qs + 32 * h + 16);
        for (int k = 0; k < 4; ++k) {  // weights 128h + 32k + l: sub-blocks j (l < 16) and j + 1
          const int j = 8 * h + 2 * k;
          acc = vmlaq_n_s32(acc, dot16(vreinterpretq_s8_u8(field2(q0, k)), y.qs + 16 * j), b.scales[j] & 0xF);
          acc = vmlaq_n_s32(acc, dot16(vreinterpretq_s8_u8(field2(q1, k)), y.qs + 16 * j + 16), b.scales[j + 1] & 0xF);
        }
      }
      const int isum = vaddvq_s32(acc);
      const float dall = y.d * to_f32(b.d), dmin = y.d * to_f32(b.dmin);
      sum += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
    }
    return sum;
  }
};

// q3_K: q2_K's 2-bit fields less 4 where the hmask bit is clear; 6-bit signed scales.
template <>
struct dot_kernel<formats::q3_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q3_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const uint8x16_t four = vdupq_n_u8(4);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      const uint8x16_t m0 = vld1q_u8(b.hmask), m1 = vld1q_u8(b.hmask + 16);
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t q0 = vld1q_u8(b.qs + 32 * h), q1 = vld1q_u8(b.qs + 32 * h + 16);
        for (int k = 0; k < 4; ++k) {
          const int j = 8 * h + 2 * k;
          const uint8x16_t bit = vdupq_n_u8(static_cast<std::uint8_t>(1u << (4 * h + k)));  // bit i / 32 of hmask[i % 32]
          // code | (set ? 4 : 0), then - 4: the fields are 0..3, so the or is an add
          const int8x16_t c0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(field2(q0, k), vandq_u8(vtstq_u8(m0, bit), four))), vdupq_n_s8(4));
          const int8x16_t c1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(field2(q1, k), vandq_u8(vtstq_u8(m1, bit), four))), vdupq_n_s8(4));
          acc = vmlaq_n_s32(acc, dot16(c0, y.qs + 16 * j), formats::q3_K::scale(b, j));
          acc = vmlaq_n_s32(acc, dot16(c1, y.qs + 16 * j + 16), formats::q3_K::scale(b, j + 1));
        }
      }
      const int isum = vaddvq_s32(acc);
      sum += (to_f32(b.d) * y.d) * static_cast<float>(isum);
    }
    return sum;
  }
};

// q4_K and q5_K: eight sub-blocks of 32, 6-bit scale and min each (kq::get_scale_min);
// sub-block 2c is the low nibbles of qs[32c .. 32c+31], 2c+1 the high ones; q5_K's fifth
// bit of weight 32j + l is bit j of qh[l].
namespace simd::neon_ops {
template <class W, bool FifthBit>
inline float row_scale_min(const typename W::block* w, const formats::q8_K::block* a, std::int64_t n) {
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n / qk_k; ++i) {
    const auto& b = w[i];
    const auto& y = a[i];
    int32x4_t acc = zero_i32();
    int sum_m = 0;
    for (int j = 0; j < 8; ++j) {
      const formats::kq::scale_min sm = formats::kq::get_scale_min(b.scales, j);
      int32x4_t s = zero_i32();
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t q = vld1q_u8(b.qs + 32 * (j / 2) + 16 * half);
        uint8x16_t c = (j & 1) ? vshrq_n_u8(q, 4) : vandq_u8(q, low4);
        if constexpr (FifthBit) {
          const uint8x16_t h = vld1q_u8(b.qh + 16 * half);
          c = vorrq_u8(c, vandq_u8(vtstq_u8(h, vdupq_n_u8(static_cast<std::uint8_t>(1u << j))), vdupq_n_u8(0x10)));
        }
        s = dot_i8x16(s, vreinterpretq_s8_u8(c), load_i8(y.qs + 32 * j + 16 * half));
      }
      acc = vmlaq_n_s32(acc, s, sm.scale);
      sum_m += sm.min * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    }
    const int sum_q = vaddvq_s32(acc);
    sum += to_f32(b.d) * y.d * static_cast<float>(sum_q) - to_f32(b.dmin) * y.d * static_cast<float>(sum_m);
  }
  return sum;
}
}  // namespace simd::neon_ops

template <>
struct dot_kernel<formats::q4_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q4_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    return simd::neon_ops::row_scale_min<formats::q4_K, false>(w, a, n);
  }
};

template <>
struct dot_kernel<formats::q5_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q5_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    return simd::neon_ops::row_scale_min<formats::q5_K, true>(w, a, n);
  }
};

// q6_K: sixteen sub-blocks of 16 with signed 8-bit scales; weight 128h + 32k + l has its
// low nibble in ql[64h + l + 32(k & 1)] (high half for k >= 2) and its top two bits at bit
// 2k of qh[32h + l]; the code is that 6-bit u less 32.
template <>
struct dot_kernel<formats::q6_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q6_K::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int8x16_t k32 = vdupq_n_s8(32);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
          for (int half = 0; half < 2; ++half) {  // l = 16 half .. 16 half + 15: sub-block 8h + 2k + half
            const uint8x16_t ql = vld1q_u8(b.ql + 64 * h + 32 * (k & 1) + 16 * half);
            const uint8x16_t qh = vld1q_u8(b.qh + 32 * h + 16 * half);
            const uint8x16_t lo = (k >> 1) ? vshrq_n_u8(ql, 4) : vandq_u8(ql, low4);
            const uint8x16_t u = vorrq_u8(lo, vshlq_n_u8(field2(qh, k), 4));
            const int j = 8 * h + 2 * k + half;
            acc = vmlaq_n_s32(acc, dot16(vsubq_s8(vreinterpretq_s8_u8(u), k32), y.qs + 16 * j), b.scales[j]);
          }
      sum += to_f32(b.d) * y.d * static_cast<float>(vaddvq_s32(acc));
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
