// SPDX-License-Identifier: MIT
// NEON exp/erf/tanh/silu/gelu rows: the vocabulary math_detail's lane code is written in,
// 4 floats a register; the bits are the scalar definition's (gk/simd/math.hpp). min and
// max are a compare and a select rather than fmin/fmax, which return NaN for a NaN in
// either operand: the definition (minps's rule) keeps the second operand, so ±0 and NaN
// come out as they do on x86. vdivq_f32 and vfmaq_f32 are correctly rounded, as the
// definition's division and std::fma are.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/simd/math.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_math {

struct vec {
  using reg = float32x4_t;
  using ireg = int32x4_t;
  static constexpr int lanes = 4;
  static reg set1(float v) { return vdupq_n_f32(v); }
  static reg load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, reg v) { vst1q_f32(p, v); }
  static reg add(reg a, reg b) { return vaddq_f32(a, b); }
  static reg sub(reg a, reg b) { return vsubq_f32(a, b); }
  static reg mul(reg a, reg b) { return vmulq_f32(a, b); }
  static reg div(reg a, reg b) { return vdivq_f32(a, b); }
  static reg fma(reg a, reg b, reg c) { return vfmaq_f32(c, a, b); }  // a * b + c, one rounding
  static reg min(reg a, reg b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
  static reg max(reg a, reg b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
  static reg abs(reg a) { return vabsq_f32(a); }
  static reg neg_abs(reg a) { return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x80000000u))); }
  static reg copysign(reg mag, reg sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
  static reg select_lt(reg a, reg b, reg if_true, reg if_false) { return vbslq_f32(vcltq_f32(a, b), if_true, if_false); }
  static ireg bits(reg a) { return vreinterpretq_s32_f32(a); }
  static reg from_bits(ireg a) { return vreinterpretq_f32_s32(a); }
  static ireg iset1(std::int32_t v) { return vdupq_n_s32(v); }
  static ireg iadd(ireg a, ireg b) { return vaddq_s32(a, b); }
  static ireg isub(ireg a, ireg b) { return vsubq_s32(a, b); }
  static ireg isra1(ireg a) { return vshrq_n_s32(a, 1); }
  static ireg ishl23(ireg a) { return vshlq_n_s32(a, 23); }
};

}  // namespace gk::simd::neon_math

namespace gk::simd {

template <>
inline void exp_row<neon>(const float* x, float* y, std::int64_t n) { math_detail::rows<neon_math::vec>::exp(x, y, n); }
template <>
inline void erf_row<neon>(const float* x, float* y, std::int64_t n) { math_detail::rows<neon_math::vec>::erf(x, y, n); }
template <>
inline void tanh_row<neon>(const float* x, float* y, std::int64_t n) { math_detail::rows<neon_math::vec>::tanh(x, y, n); }
template <>
inline void silu_row<neon>(const float* x, float* y, std::int64_t n) { math_detail::rows<neon_math::vec>::silu(x, y, n); }
template <>
inline void gelu_row<neon>(const float* x, float* y, std::int64_t n) { math_detail::rows<neon_math::vec>::gelu(x, y, n); }

}  // namespace gk::simd

GK_EXACT_FP_END

#endif
