// SPDX-License-Identifier: MIT
// NEON row dots of the 1- and 2-bit formats: q1_0, q2_0 (q8_0 activations), the ternary
// tq1_0, tq2_0 and the lattice iq1_s, iq1_m (q8_K activations). Codes become signed
// bytes (±1; -1 .. 2; iq1s_grid's coordinates are already the signed bytes -1, 0, 1) for
// neon/dot.hpp's exact vmull_s8 / vpadalq_s16 sums, integer scales go on with vmlaq_n_s32,
// and each block's float expression is the definition's.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq1.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/formats/ternary.hpp"
#include "gk/simd/neon/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// Byte j of 16 = bits (shift_j .. shift_j + 1) of byte pick_j of the 16 bytes q (the
// 2-bit code of a q2_0-style packing: four codes a byte, lowest bits first).
inline uint8x16_t codes2_by_byte(uint8x16_t q, int first_byte) {
  static constexpr std::uint8_t pick[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
  static constexpr std::int8_t shift[16] = {0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6};
  const uint8x16_t bytes = vqtbl1q_u8(q, vaddq_u8(vld1q_u8(pick), vdupq_n_u8(static_cast<std::uint8_t>(first_byte))));
  return vandq_u8(vshlq_u8(bytes, vld1q_s8(shift)), vdupq_n_u8(3));
}

// Trits of 16 bytes, lane j the trit of byte j at the power pow_j = 3^k (formats::detail::trit:
// the byte times 3^k mod 256, times 3, top 8 bits of 16).
inline uint8x16_t trits(uint8x16_t bytes, uint8x16_t pow) {
  const uint8x16_t shifted = vmulq_u8(bytes, pow);
  const uint8x16_t three = vdupq_n_u8(3);
  return vcombine_u8(vshrn_n_u16(vmull_u8(vget_low_u8(shifted), vget_low_u8(three)), 8),
                     vshrn_n_u16(vmull_high_u8(shifted, three), 8));
}

inline int8x8_t grid_point(std::uint64_t point) { return vreinterpret_s8_u64(vcreate_u64(point)); }

}  // namespace gk::simd::neon_ops

namespace gk {

template <>
struct dot_kernel<formats::q1_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q1_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    static constexpr std::uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bits = vld1q_u8(bit);
    const int8x16_t one = vdupq_n_s8(1), two = vdupq_n_s8(2);
    float total = 0.0f;
    for (std::int64_t i = 0; i < n / 128; ++i) {
      const auto& b = w[i];
      float sum = 0.0f;
      for (int k = 0; k < 4; ++k) {  // activation block k: weight j is bit j % 8 of qs[4k + j / 8]
        const formats::q8_0::block& y = a[4 * i + k];
        int32x4_t s = zero_i32();
        for (int h = 0; h < 2; ++h) {
          const std::uint8_t* q = b.qs + 4 * k + 2 * h;
          const int8x16_t set = vreinterpretq_s8_u8(vtstq_u8(vcombine_u8(vdup_n_u8(q[0]), vdup_n_u8(q[1])), bits));
          const int8x16_t sign = vsubq_s8(vandq_s8(set, two), one);  // +1 where set, else -1
          s = dot_i8x16(s, sign, load_i8(y.qs + 16 * h));
        }
        sum += to_f32(y.d) * static_cast<float>(vaddvq_s32(s));
      }
      total += to_f32(b.d) * sum;
    }
    return total;
  }
};

template <>
struct dot_kernel<formats::q2_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q2_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t one = vdupq_n_s8(1);
    float total = 0.0f;
    for (std::int64_t i = 0; i < n / 64; ++i) {
      const auto& b = w[i];
      const uint8x16_t q = vld1q_u8(b.qs);
      float sum = 0.0f;
      for (int k = 0; k < 2; ++k) {  // activation block k: weights 32k + j, bytes 8k + j / 4
        const formats::q8_0::block& y = a[2 * i + k];
        int32x4_t s = zero_i32();
        for (int h = 0; h < 2; ++h)
          s = dot_i8x16(s, vsubq_s8(vreinterpretq_s8_u8(codes2_by_byte(q, 8 * k + 4 * h)), one), load_i8(y.qs + 16 * h));
        sum += to_f32(y.d) * static_cast<float>(vaddvq_s32(s));
      }
      total += to_f32(b.d) * sum;
    }
    return total;
  }
};

template <>
struct dot_kernel<formats::tq2_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::tq2_0::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t one = vdupq_n_s8(1);
    const uint8x16_t three = vdupq_n_u8(3);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 256; ++i) {
      const auto& b = w[i];
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 2; ++h)  // weight 128h + 32k + m: bits 2k of byte 32h + m
        for (int half = 0; half < 2; ++half) {
          const uint8x16_t q = vld1q_u8(b.qs + 32 * h + 16 * half);
          for (int k = 0; k < 4; ++k) {
            const uint8x16_t c = vandq_u8(vshlq_u8(q, vdupq_n_s8(static_cast<std::int8_t>(-2 * k))), three);
            acc = dot_i8x16(acc, vsubq_s8(vreinterpretq_s8_u8(c), one), load_i8(a[i].qs + 128 * h + 32 * k + 16 * half));
          }
        }
      sum += static_cast<float>(vaddvq_s32(acc)) * (a[i].d * to_f32(b.d));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::tq1_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::tq1_0::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    static constexpr std::uint8_t pow3[5] = {1, 3, 9, 27, 81};
    // the last 16 weights: lane 4k + j is trit k of qh[j]
    static constexpr std::uint8_t qh_pow[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    static constexpr std::uint8_t qh_pick[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    const int8x16_t one = vdupq_n_s8(1);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 256; ++i) {
      const auto& b = w[i];
      const std::int8_t* y = a[i].qs;
      auto t1 = [&](uint8x16_t bytes, uint8x16_t pow) { return vsubq_s8(vreinterpretq_s8_u8(trits(bytes, pow)), one); };
      int32x4_t acc = zero_i32();
      const uint8x16_t q0 = vld1q_u8(b.qs), q1 = vld1q_u8(b.qs + 16), q2 = vld1q_u8(b.qs + 32);
      for (int k = 0; k < 5; ++k) {
        const uint8x16_t p = vdupq_n_u8(pow3[k]);
        acc = dot_i8x16(acc, t1(q0, p), load_i8(y + 32 * k));        // weights 32k + m, m < 16
        acc = dot_i8x16(acc, t1(q1, p), load_i8(y + 32 * k + 16));   // m = 16 .. 31
        acc = dot_i8x16(acc, t1(q2, p), load_i8(y + 160 + 16 * k));  // 160 + 16k + m
      }
      std::uint8_t qh16[16] = {b.qh[0], b.qh[1], b.qh[2], b.qh[3]};
      const uint8x16_t h = vqtbl1q_u8(vld1q_u8(qh16), vld1q_u8(qh_pick));
      acc = dot_i8x16(acc, t1(h, vld1q_u8(qh_pow)), load_i8(y + 240));
      sum += static_cast<float>(vaddvq_s32(acc)) * (to_f32(b.d) * a[i].d);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq1_s, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq1_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    using W = formats::iq1_s;
    float total = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      int32x4_t acc = zero_i32();
      int sum_shift = 0;
      for (int ib = 0; ib < 8; ++ib) {
        const int ls = 2 * ((b.qh[ib] >> 12) & 7) + 1;
        int8x8_t g[4];
        for (int l = 0; l < 4; ++l) g[l] = grid_point(codebooks::iq1s_grid[W::index(b, ib, l)]);
        const int32x4_t s = dot_i8x16(dot16(vcombine_s8(g[0], g[1]), y.qs + 32 * ib),
                                      vcombine_s8(g[2], g[3]), load_i8(y.qs + 32 * ib + 16));
        acc = vmlaq_n_s32(acc, s, ls);
        sum_shift += ls * ((b.qh[ib] & 0x8000) ? -1 : 1) * (y.bsums[2 * ib] + y.bsums[2 * ib + 1]);
      }
      const int sum = vaddvq_s32(acc);
      total += to_f32(b.d) * y.d * (static_cast<float>(8 * sum + sum_shift) * codebooks::iq1s_delta);
    }
    return total;
  }
};

template <>
struct dot_kernel<formats::iq1_m, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq1_m::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    using W = formats::iq1_m;
    float total = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const auto& y = a[i];
      int32x4_t acc = zero_i32();
      int sum_shift = 0;
      for (int j = 0; j < 16; ++j) {
        const int ls = W::sub_scale(b, j);
        const int8x16_t g = vcombine_s8(grid_point(codebooks::iq1s_grid[W::index(b, j, 0)]),
                                        grid_point(codebooks::iq1s_grid[W::index(b, j, 1)]));
        acc = vmlaq_n_s32(acc, dot16(g, y.qs + 16 * j), ls);
        const int sa0 = vaddlv_s8(vld1_s8(y.qs + 16 * j)), sa1 = vaddlv_s8(vld1_s8(y.qs + 16 * j + 8));
        const int sh = (W::neg(b, j, 0) ? -sa0 : sa0) + (W::neg(b, j, 1) ? -sa1 : sa1);
        sum_shift += ls * sh;
      }
      const int sum = vaddvq_s32(acc);
      total += W::scale(b) * y.d * (static_cast<float>(8 * sum + sum_shift) * codebooks::iq1m_delta);
    }
    return total;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
