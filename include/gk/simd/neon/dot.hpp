// SPDX-License-Identifier: MIT
// NEON (AArch64 Advanced SIMD) row dots of the 32-weight formats q8_0, q8_1, q4_0, q4_1,
// q5_0, q5_1, and the vocabulary the other NEON kernels share (see dot.hpp for the rules).
//
// Each block's codes become signed bytes (every format's codes and codebook values fit in
// int8, the largest magnitude being q8's 128), multiplied with the activations by vmull_s8
// (int8 * int8 always fits in int16) and widened pairwise into int32 lanes by vpadalq_s16,
// so every integer sum is exact for any input bytes; vdotq_s32 would do both in one step
// but is ARMv8.2 (optional), and the baseline here is every ARMv8-A core. The float part
// of each block is the scalar definition's expression, operand for operand, in scalar
// registers: one block's handful of multiplies is not worth a lane shuffle, and the sum
// over blocks is serial in the definition anyway.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// acc + the products w[i] * a[i] of 16 signed bytes, summed in pairs into 4 lanes; exact.
inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t w, int8x16_t a) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
  return vpadalq_s16(acc, vmull_high_s8(w, a));
}
inline int8x16_t load_i8(const std::int8_t* p) { return vld1q_s8(p); }
inline int32x4_t zero_i32() { return vdupq_n_s32(0); }

// the exact dot of 16 signed codes with the 16 activations at a, as four partial sums
inline int32x4_t dot16(int8x16_t w, const std::int8_t* a) { return dot_i8x16(zero_i32(), w, load_i8(a)); }

// sum of w[i] * a[i] over 32 bytes (the two halves of one block)
inline int dot_i8x32(int8x16_t w0, int8x16_t w1, const std::int8_t* a) {
  return vaddvq_s32(dot_i8x16(dot16(w0, a), w1, load_i8(a + 16)));
}

// sum of 32 signed bytes; pairwise widening, exact
inline int sum_i8x32(const std::int8_t* a) {
  const int16x8_t s = vaddq_s16(vpaddlq_s8(load_i8(a)), vpaddlq_s8(load_i8(a + 16)));
  return vaddlvq_s16(s);
}

// The 4-bit codes of a q4_0-style block: weights 0..15 are the low nibbles of its 16
// bytes, 16..31 the high ones.
struct nibbles { int8x16_t lo, hi; };
inline nibbles nibbles32(const std::uint8_t* qs) {
  const uint8x16_t q = vld1q_u8(qs);
  return {vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vreinterpretq_s8_u8(vshrq_n_u8(q, 4))};
}

// Byte j of 16 = set_to where bit j of the 16-bit little-endian word (b0, b1) is set, else 0.
inline uint8x16_t bits16(std::uint8_t b0, std::uint8_t b1, std::uint8_t set_to) {
  static constexpr std::uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t spread = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
  return vandq_u8(vtstq_u8(spread, vld1q_u8(bit)), vdupq_n_u8(set_to));
}

// The 5-bit codes (0..31) of a q5_0/q5_1 block: the q4_0 nibbles plus bit j of qh as 16.
inline nibbles codes5(const std::uint8_t* qs, const std::uint8_t* qh) {
  const nibbles c = nibbles32(qs);
  return {vorrq_s8(c.lo, vreinterpretq_s8_u8(bits16(qh[0], qh[1], 0x10))),
          vorrq_s8(c.hi, vreinterpretq_s8_u8(bits16(qh[2], qh[3], 0x10)))};
}

}  // namespace gk::simd::neon_ops

namespace gk {

template <>
struct dot_kernel<formats::q8_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q8_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const int s = dot_i8x32(load_i8(w[i].qs), load_i8(w[i].qs + 16), a[i].qs);
      sum += static_cast<float>(s) * (to_f32(w[i].d) * to_f32(a[i].d));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q8_1, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q8_1::block* w, const formats::q8_1::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const int s = dot_i8x32(load_i8(w[i].qs), load_i8(w[i].qs + 16), a[i].qs);
      sum += static_cast<float>(s) * (to_f32(w[i].d) * to_f32(a[i].d));
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q4_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q4_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t eight = vdupq_n_s8(8);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const nibbles c = nibbles32(w[i].qs);
      const int s = dot_i8x32(vsubq_s8(c.lo, eight), vsubq_s8(c.hi, eight), a[i].qs);
      sum += static_cast<float>(s) * to_f32(w[i].d) * to_f32(a[i].d);
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::q5_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q5_0::block* w, const formats::q8_0::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    const int8x16_t k16 = vdupq_n_s8(16);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / 32; ++i) {
      const nibbles c = codes5(w[i].qs, w[i].qh);
      const int s = dot_i8x32(vsubq_s8(c.lo, k16), vsubq_s8(c.hi, k16), a[i].qs);
      sum += to_f32(w[i].d) * to_f32(a[i].d) * static_cast<float>(s);
    }
    return sum;
  }
};

// q4_1 and q5_1: sum(c * qa) and the activation sum sa from the codes (not q8_1's s), then
// dw * da * sum + m * (da * sa), as the definition writes it.
namespace simd::neon_ops {
template <class W, class Codes>
inline float row_affine(const typename W::block* w, const formats::q8_1::block* a, std::int64_t n, Codes codes) {
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n / 32; ++i) {
    const nibbles c = codes(w[i]);
    const int s = dot_i8x32(c.lo, c.hi, a[i].qs), sa = sum_i8x32(a[i].qs);
    const float da = to_f32(a[i].d);
    sum += to_f32(w[i].d) * da * static_cast<float>(s) + to_f32(w[i].m) * (da * static_cast<float>(sa));
  }
  return sum;
}
}  // namespace simd::neon_ops

template <>
struct dot_kernel<formats::q4_1, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q4_1::block* w, const formats::q8_1::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    return row_affine<formats::q4_1>(w, a, n, [](const formats::q4_1::block& b) { return nibbles32(b.qs); });
  }
};

template <>
struct dot_kernel<formats::q5_1, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::q5_1::block* w, const formats::q8_1::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    return row_affine<formats::q5_1>(w, a, n, [](const formats::q5_1::block& b) { return codes5(b.qs, b.qh); });
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
