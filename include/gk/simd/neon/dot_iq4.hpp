// SPDX-License-Identifier: MIT
// NEON row dots of the 4-bit codebook formats: iq4_nl, iq4_xs (kvalues_iq4nl) and mxfp4,
// nvfp4 (e2m1 codes as the doubled integers 0, ±1 ... ±12). A 16-entry codebook of signed
// bytes is one register, so a code's value is one vqtbl1q_s8 lookup; the values are
// signed bytes (iq4: -127 .. 113), and the products go through neon/dot.hpp's exact
// vmull_s8 / vpadalq_s16 sums (no psignb-style trick needed: NEON multiplies signed
// bytes directly). The float part of each block is the definition's expression.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <array>
#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/fp4.hpp"
#include "gk/formats/iq4.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/simd/neon/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// e2m1 codes as the doubled integers the fp4 dots multiply, from the format's own fp4_doubled.
inline const std::int8_t* fp4_values() {
  static constexpr auto table = [] {
    std::array<std::int8_t, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = static_cast<std::int8_t>(formats::detail::fp4_doubled(static_cast<std::uint8_t>(c)));
    return t;
  }();
  return table.data();
}

// The codebook values of a q4_0-packed block of 32 codes (low nibbles, then high ones).
inline nibbles lookup32(int8x16_t table, const std::uint8_t* qs) {
  const nibbles c = nibbles32(qs);
  return {vqtbl1q_s8(table, vreinterpretq_u8_s8(c.lo)), vqtbl1q_s8(table, vreinterpretq_u8_s8(c.hi))};
}

}  // namespace gk::simd::neon_ops

namespace gk {

template <>
struct dot_kernel<formats::iq4_nl, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq4_nl::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t table = vld1q_s8(codebooks::kvalues_iq4nl);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const nibbles v = lookup32(table, w[i].qs);
      const int s = dot_i8x32(v.lo, v.hi, a[i].qs);
      sum += static_cast<float>(s) * (to_f32(w[i].d) * to_f32(a[i].d));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq4_xs, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq4_xs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t table = vld1q_s8(codebooks::kvalues_iq4nl);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      // group g: at most 32 * 127 * 128 per group times |scale| <= 32, eight groups: inside int32
      int32x4_t acc = zero_i32();
      for (int g = 0; g < 8; ++g) {
        const nibbles v = lookup32(table, b.qs + 16 * g);
        const int32x4_t s = dot_i8x16(dot16(v.lo, a[i].qs + 32 * g), v.hi,
                                      load_i8(a[i].qs + 32 * g + 16));
        acc = vmlaq_n_s32(acc, s, formats::iq4_xs::group_scale(b, g));
      }
      sum += to_f32(b.d) * a[i].d * static_cast<float>(vaddvq_s32(acc));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::mxfp4, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::mxfp4::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t table = vld1q_s8(fp4_values());
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const nibbles v = lookup32(table, w[i].qs);
      const int s = dot_i8x32(v.lo, v.hi, a[i].qs);
      sum += to_f32(a[i].d) * e8m0_to_f32_half(w[i].e) * static_cast<float>(s);
    }
    return sum;
  }
};

// nvfp4: 64 weights, four sub-blocks of 16 with their own ue4m3 scale; byte 8k + j holds
// sub-block k's weight j (low nibble) and j + 8 (high), against activation bytes 16(k % 2)
// + j and + j + 8 of q8_0 block k / 2. So sub-blocks 2m and 2m+1 are the 16 bytes 16m ..,
// their low nibbles interleaved with the high ones per 8 (vzip of the two 8-byte halves).
template <>
struct dot_kernel<formats::nvfp4, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::nvfp4::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t table = vld1q_s8(fp4_values());
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 64; ++i) {
      const auto& b = w[i];
      float block_sum = 0.0f;
      for (int m = 0; m < 2; ++m) {
        const formats::q8_0::block& y = a[2 * i + m];
        const nibbles v = lookup32(table, b.qs + 16 * m);  // lo: bytes' low nibbles, hi: high
        // sub-block 2m: low nibbles of bytes 0..7 then their high nibbles; 2m+1: bytes 8..15
        const int8x16_t s0 = vcombine_s8(vget_low_s8(v.lo), vget_low_s8(v.hi));
        const int8x16_t s1 = vcombine_s8(vget_high_s8(v.lo), vget_high_s8(v.hi));
        const int d0 = vaddvq_s32(dot16(s0, y.qs));
        const int d1 = vaddvq_s32(dot16(s1, y.qs + 16));
        block_sum += to_f32(y.d) * formats::nvfp4::half_scale(b.d[2 * m]) * static_cast<float>(d0);
        block_sum += to_f32(y.d) * formats::nvfp4::half_scale(b.d[2 * m + 1]) * static_cast<float>(d1);
      }
      sum += block_sum;
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
