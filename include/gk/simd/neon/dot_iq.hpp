// SPDX-License-Identifier: MIT
// NEON row dots of the lattice i-quants iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s with q8_K
// activations. A group of 8 weights is one grid point (8 unsigned bytes, every coordinate
// below 64) and 8 sign bits: the point goes into a register as it is, the signs become a
// byte mask m (vtst against the bit of each lane), and (v ^ m) - m negates the lanes that
// are set, exact since |v| < 128. Two groups make 16 signed bytes for neon/dot.hpp's exact
// vmull_s8 / vpadalq_s16 sum; a sub-block's partial sums are scaled by its odd integer
// scale with vmlaq_n_s32 (the definition's int sums, below 2^26 a block), and the
// block's float expression is the definition's.
// Compiles to nothing unless the translation unit targets AArch64 with NEON.
#pragma once

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/iq2.hpp"
#include "gk/formats/iq3.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/simd/neon/dot.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::neon_ops {

// The 8 coordinates of a grid point (byte j is coordinate j), negated where bit j of signs is set.
inline int8x8_t signed_point(std::uint64_t point, unsigned signs) {
  static constexpr std::uint8_t bit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
  const int8x8_t m = vreinterpret_s8_u8(vtst_u8(vdup_n_u8(static_cast<std::uint8_t>(signs)), vld1_u8(bit)));
  return vsub_s8(veor_s8(vreinterpret_s8_u64(vcreate_u64(point)), m), m);
}

// acc + the exact dot of two signed groups (16 weights) with the 16 activations at a
inline int32x4_t dot_groups(int32x4_t acc, int8x8_t g0, int8x8_t g1, const std::int8_t* a) {
  return dot_i8x16(acc, vcombine_s8(g0, g1), load_i8(a));
}

// an iq3 point as two 4-coordinate grid entries
inline std::uint64_t pair(std::uint32_t lo, std::uint32_t hi) { return lo | static_cast<std::uint64_t>(hi) << 32; }

}  // namespace gk::simd::neon_ops

namespace gk {

template <>
struct dot_kernel<formats::iq2_xxs, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq2_xxs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    using formats::iq2::signs_of;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const std::int8_t* q8 = a[i].qs;
      int32x4_t acc = zero_i32();
      for (int k = 0; k < 8; ++k) {  // 32 weights: four groups, one 4-bit scale
        const std::uint32_t idx = formats::iq2_xxs::word(b, 2 * k), aux = formats::iq2_xxs::word(b, 2 * k + 1);
        int8x8_t g[4];
        for (int l = 0; l < 4; ++l)
          g[l] = signed_point(codebooks::iq2xxs_grid[(idx >> (8 * l)) & 0xffu], signs_of((aux >> (7 * l)) & 127u));
        const int32x4_t s = dot_groups(dot_groups(zero_i32(), g[0], g[1], q8 + 32 * k), g[2], g[3], q8 + 32 * k + 16);
        acc = vmlaq_n_s32(acc, s, static_cast<int>(2 * (aux >> 28) + 1));
      }
      sum += (to_f32(b.d) * a[i].d) * static_cast<float>(vaddvq_s32(acc)) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq2_xs, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq2_xs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    using formats::iq2::signs_of;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 16; ++h) {  // 16 weights: two groups, one 4-bit scale
        const unsigned q0 = b.qs[2 * h], q1 = b.qs[2 * h + 1];
        const int32x4_t s = dot_groups(zero_i32(), signed_point(codebooks::iq2xs_grid[q0 & 511u], signs_of(q0 >> 9)),
                                       signed_point(codebooks::iq2xs_grid[q1 & 511u], signs_of(q1 >> 9)), a[i].qs + 16 * h);
        acc = vmlaq_n_s32(acc, s, 2 * ((b.scales[h / 2] >> (4 * (h & 1))) & 0xf) + 1);
      }
      sum += (to_f32(b.d) * a[i].d) * static_cast<float>(vaddvq_s32(acc)) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq2_s, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq2_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      int32x4_t acc = zero_i32();
      for (int h = 0; h < 16; ++h) {  // groups 2h and 2h + 1, one 4-bit scale
        const int g = 2 * h;
        const int32x4_t s = dot_groups(zero_i32(), signed_point(formats::iq2_s::point(b, g), b.qs[32 + g]),
                                       signed_point(formats::iq2_s::point(b, g + 1), b.qs[32 + g + 1]), a[i].qs + 8 * g);
        acc = vmlaq_n_s32(acc, s, 2 * ((b.scales[h / 2] >> (4 * (h & 1))) & 0xf) + 1);
      }
      sum += (to_f32(b.d) * a[i].d) * static_cast<float>(vaddvq_s32(acc)) * 0.125f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq3_xxs, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq3_xxs::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const std::int8_t* q8 = a[i].qs;
      int32x4_t acc = zero_i32();
      for (int j = 0; j < 8; ++j) {  // 32 weights: four groups of two 4-coordinate grid entries
        const std::uint32_t aux = formats::iq3_xxs::word(b, j);
        int8x8_t g[4];
        for (int l = 0; l < 4; ++l) {
          const std::uint64_t p = pair(codebooks::iq3xxs_grid[b.qs[8 * j + 2 * l]], codebooks::iq3xxs_grid[b.qs[8 * j + 2 * l + 1]]);
          g[l] = signed_point(p, codebooks::ksigns_iq2xs[(aux >> (7 * l)) & 127u]);
        }
        const int32x4_t s = dot_groups(dot_groups(zero_i32(), g[0], g[1], q8 + 32 * j), g[2], g[3], q8 + 32 * j + 16);
        acc = vmlaq_n_s32(acc, s, static_cast<int>(2 * (aux >> 28) + 1));
      }
      sum += to_f32(b.d) * a[i].d * static_cast<float>(vaddvq_s32(acc)) * 0.25f;
    }
    return sum;
  }
};

template <>
struct dot_kernel<formats::iq3_s, simd::neon> {
  static constexpr std::string_view served_by = simd::neon::name;
  static float row(const formats::iq3_s::block* w, const formats::q8_K::block* a, std::int64_t n) {
    using namespace simd::neon_ops;
    using W = formats::iq3_s;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < n / qk_k; ++i) {
      const auto& b = w[i];
      const std::int8_t* q8 = a[i].qs;
      int32x4_t acc = zero_i32();
      for (int j = 0; j < 8; ++j) {  // 32 weights: groups l = 0..3 of grid entries 2l, 2l + 1
        int8x8_t g[4];
        for (int l = 0; l < 4; ++l)
          g[l] = signed_point(pair(W::point(b, j, 2 * l), W::point(b, j, 2 * l + 1)), b.signs[4 * j + l]);
        const int32x4_t s = dot_groups(dot_groups(zero_i32(), g[0], g[1], q8 + 32 * j), g[2], g[3], q8 + 32 * j + 16);
        acc = vmlaq_n_s32(acc, s, 1 + 2 * W::scale(b, j));
      }
      sum += to_f32(b.d) * a[i].d * static_cast<float>(vaddvq_s32(acc));
    }
    return sum;
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
