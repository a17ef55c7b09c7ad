// SPDX-License-Identifier: MIT
// NEON row dots of the float formats (f32, f16, bf16), bit-identical to
// formats::float_row::dot: the definition's 16 lanes are four registers (lanes 0-3, 4-7,
// 8-11, 12-15), each step a vmulq then a vaddq (never vfmaq: the definition rounds the
// product), the tail goes to its own lanes through a zero-padded copy and a bit select,
// and the reduction is the definition's tree (registers 0+2 and 1+3, then those two, then
// the halves of one, then its first two lanes).
// f16 widens by fcvtl, which is exact and gives gk::f16_to_f32's bits for every code
// (with FPCR.DN clear, Linux's default, a NaN is quieted with its payload and sign kept);
// bf16 widens by a 16-bit shift.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// four consecutive elements of a float-format row, widened to f32
inline float32x4_t load_f32x4(const formats::f32::block* p) { return vld1q_f32(&p->v); }
inline float32x4_t load_f32x4(const gk::f16* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p))));
}
inline float32x4_t load_f32x4(const gk::bf16* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)), 16));
}

template <class B>
float float_row_dot(const B* w, const B* a, std::int64_t n) {
  static_assert(formats::float_row::lanes == 16, "the kernel keeps the definition's 16 lanes in four registers");
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) acc[k] = vaddq_f32(acc[k], vmulq_f32(load_f32x4(w + i + 4 * k), load_f32x4(a + i + 4 * k)));
  if (const int r = static_cast<int>(n - i); r > 0) {
    B wt[16] = {}, at[16] = {};
    std::memcpy(wt, w + i, static_cast<std::size_t>(r) * sizeof(B));
    std::memcpy(at, a + i, static_cast<std::size_t>(r) * sizeof(B));
    // lanes at or past r keep their sums untouched (a select, not an add of +0)
    static constexpr std::uint32_t index[4] = {0, 1, 2, 3};
    const uint32x4_t idx = vld1q_u32(index);
    for (int k = 0; k < 4; ++k) {
      const uint32x4_t in = vcltq_u32(vaddq_u32(idx, vdupq_n_u32(static_cast<std::uint32_t>(4 * k))),
                                      vdupq_n_u32(static_cast<std::uint32_t>(r)));
      const float32x4_t next = vaddq_f32(acc[k], vmulq_f32(load_f32x4(wt + 4 * k), load_f32x4(at + 4 * k)));
      acc[k] = vbslq_f32(in, next, acc[k]);
    }
  }
  const float32x4_t s0 = vaddq_f32(acc[0], acc[2]), s1 = vaddq_f32(acc[1], acc[3]);  // acc[j] += acc[j + 8]
  const float32x4_t s = vaddq_f32(s0, s1);                                           // acc[j] += acc[j + 4]
  const float32x2_t h = vadd_f32(vget_low_f32(s), vget_high_f32(s));                 // acc[j] += acc[j + 2]
  return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);                                  // acc[0] += acc[1]
}

}  // namespace gk::simd::neon_ops

namespace gk {

template <>
struct dot_kernel<formats::f32, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::f32::block* w, const formats::f32::block* a, std::int64_t n) {
    return simd::neon_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::f16, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::f16::block* w, const formats::f16::block* a, std::int64_t n) {
    return simd::neon_ops::float_row_dot(w, a, n);
  }
};

template <>
struct dot_kernel<formats::bf16, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::bf16::block* w, const formats::bf16::block* a, std::int64_t n) {
    return simd::neon_ops::float_row_dot(w, a, n);
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
