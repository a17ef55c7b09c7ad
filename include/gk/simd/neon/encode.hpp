// SPDX-License-Identifier: MIT
// NEON activation encoders (q8_0, q8_1, q8_K), byte for byte the scalar definitions' (see
// simd/encode.hpp for the rules). How each step matches on AArch64:
//   - max|x|: a compare and select, (m < |x|) ? |x| : m, which is std::max(amax, |x|) with
//     its NaN rule (vmaxq/vmaxnmq would not do: one propagates NaN, the other a signalling
//     NaN); the maximum of non-NaN values does not depend on the order it is taken in.
//   - q8_0/q8_1 codes: frinti (vrndiq: the current rounding mode, nearbyint's) then fcvtzs
//     (vcvtq_s32_f32: saturating, NaN -> 0), the scalar path's own two instructions, then
//     the low byte (vmovn twice), as the float -> int8 cast keeps it. So where x / d is
//     +Inf (max|x| so small that 1 / d overflows) the code is -1 here and 0 on x86: each
//     platform's scalar encoder is what is matched.
//   - q8_K: nearest_clamped's ternaries as compare-and-select (NaN stays), the same magic
//     add, mantissa mask and integer clamp; the first index of the largest magnitude.
//   - d, 1 / d, d * sum, 1 / iscale and the f16 conversions are the scalar expressions.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_enc {

// (m < a) ? a : m, lane-wise: std::max(m, a)
inline float32x4_t max_keep(float32x4_t m, float32x4_t a) { return vbslq_f32(vcltq_f32(m, a), a, m); }

// one q8_0/q8_1 block: the codes written to qs, their sum returned, d set
inline int q8_block(const float* x, std::int8_t* qs, float& d_out) {
  float32x4_t v[8];
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < 8; ++i) {
    v[i] = vld1q_f32(x + 4 * i);
    m = max_keep(m, vabsq_f32(v[i]));
  }
  const float amax = vmaxvq_f32(m);  // no lane is NaN
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float32x4_t idv = vdupq_n_f32(id);
  int8x16_t c[2];
  for (int h = 0; h < 2; ++h) {
    int16x4_t w[4];
    for (int k = 0; k < 4; ++k) w[k] = vmovn_s32(vcvtq_s32_f32(vrndiq_f32(vmulq_f32(v[4 * h + k], idv))));
    c[h] = vcombine_s8(vmovn_s16(vcombine_s16(w[0], w[1])), vmovn_s16(vcombine_s16(w[2], w[3])));
    vst1q_s8(qs + 16 * h, c[h]);
  }
  d_out = d;
  return vaddlvq_s8(c[0]) + vaddlvq_s8(c[1]);
}

}  // namespace gk::simd::neon_enc

namespace gk {

template <>
struct encode_kernel<formats::q8_0, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static void row(const float* x, formats::q8_0::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      (void)simd::neon_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
    }
  }
};

template <>
struct encode_kernel<formats::q8_1, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static void row(const float* x, formats::q8_1::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      const int sum = simd::neon_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
      out[i].s = to_f16(d * static_cast<float>(sum));
    }
  }
};

template <>
struct encode_kernel<formats::q8_K, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static void row(const float* x, formats::q8_K::block* out, std::int64_t n) {
    using namespace simd::neon_enc;
    constexpr int qk = gk::qk_k;
    for (std::int64_t ib = 0; ib < n / qk; ++ib) {
      const float* xb = x + ib * qk;
      formats::q8_K::block& b = out[ib];
      float32x4_t m = vdupq_n_f32(0.0f);
      for (int i = 0; i < qk; i += 4) m = max_keep(m, vabsq_f32(vld1q_f32(xb + i)));
      const float amax = vmaxvq_f32(m);
      if (!(amax > 0.0f)) {
        std::memset(&b, 0, sizeof b);
        continue;
      }
      // the first x whose magnitude is amax (amax is finite or +Inf, never NaN)
      const float32x4_t av = vdupq_n_f32(amax);
      int jm = 0;
      for (int i = 0; i < qk; i += 4) {
        if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(xb + i)), av))) {
          jm = i;
          while (!(std::fabs(xb[jm]) == amax)) ++jm;
          break;
        }
      }
      const float xm = xb[jm];
      const float iscale = -127.0f / xm;
      const float32x4_t is = vdupq_n_f32(iscale), lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
      const float32x4_t magic = vdupq_n_f32(12582912.0f);
      const int32x4_t mant = vdupq_n_s32(0x7fffff), off = vdupq_n_s32(0x400000);
      const int32x4_t ilo = vdupq_n_s32(-127), ihi = vdupq_n_s32(127);
      for (int i = 0; i < qk; i += 16) {
        int16x4_t w[4];
        for (int k = 0; k < 4; ++k) {
          float32x4_t v = vmulq_f32(is, vld1q_f32(xb + i + 4 * k));
          v = vbslq_f32(vcltq_f32(v, lo), lo, v);  // v < lo ? lo : v
          v = vbslq_f32(vcgtq_f32(v, hi), hi, v);  // v > hi ? hi : v
          int32x4_t c = vsubq_s32(vandq_s32(vreinterpretq_s32_f32(vaddq_f32(v, magic)), mant), off);
          c = vminq_s32(vmaxq_s32(c, ilo), ihi);
          w[k] = vmovn_s32(c);
        }
        const int8x16_t codes = vcombine_s8(vmovn_s16(vcombine_s16(w[0], w[1])), vmovn_s16(vcombine_s16(w[2], w[3])));
        vst1q_s8(b.qs + i, codes);
        b.bsums[i / 16] = static_cast<std::int16_t>(vaddlvq_s8(codes));
      }
      b.d = 1.0f / iscale;
    }
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
