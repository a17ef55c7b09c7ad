// SPDX-License-Identifier: MIT
// q3_f16: a block format defined outside gk, written the way a user of gk would add one.
//
// 32 weights share one f16 scale d; each weight is a 3-bit code q, w = d * (q - 4), so a
// block holds the eight levels -4d .. 3d. 14 bytes per block, 3.5 bits per weight. The
// codes are stored split, low two bits apart from the high bit, because that makes the
// SIMD unpacking a shift and a mask: the low bits of weight j are bits 2*(j/8), 2*(j/8)+1
// of ql[j % 8], its high bit is bit j % 8 of qh[j / 8].
//
// What gk needs is all here: the BlockFormat members (decode is the definition of the
// bits, dot the scalar definition every SIMD kernel is checked against), an id in gk's
// user range, and one avx2 dot kernel (q3_f16_avx2.hpp). avx512 gets none on purpose:
// gk's fallback chain serves it with the avx2 one. gk::register_format<q3_f16>("q3_f16")
// then makes the id a type that gk's CPU pass multiplies, gathers and encodes like its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <gk/gk.hpp>

GK_EXACT_FP_BEGIN  // decode and the dots are definitions: no a*b+c fused behind our back

namespace example {

struct q3_f16 {
  static constexpr gk::type id = gk::user_type(0);
  static constexpr int block_size = 32;
  struct block {
    gk::f16 d;
    std::uint8_t ql[8];  // low two bits of each code
    std::uint8_t qh[4];  // high bit of each code
  };
  using dot_type = gk::formats::q8_0;

  static int code(const block& b, int j) noexcept {
    return ((b.ql[j % 8] >> (2 * (j / 8))) & 3) | (((b.qh[j / 8] >> (j % 8)) & 1) << 2);
  }

  static void decode(const block& b, float* out) {
    const float d = gk::to_f32(b.d);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(code(b, j) - 4);
  }

  // A small search of our own: scales that put the largest-magnitude weight on an outer
  // level (-3 .. -4.5 or 2.5 .. 3.5 steps of d, in eighths), each rounded to f16 as it will
  // be decoded, codes by nearest level; then one weighted least-squares refit of d for the
  // best codes. The least weighted squared error wins.
  static void encode(const float* x, block& b, const float* importance) {
    float vmax = 0.0f;  // the weight of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > std::fabs(vmax)) vmax = x[j];
    auto weight = [&](int j) { return importance ? double(importance[j]) : 1.0; };
    std::uint8_t best_q[32];
    std::fill(best_q, best_q + 32, std::uint8_t{4});
    std::uint16_t best_d = 0;
    double best_err = INFINITY;
    auto try_d = [&](float d_wanted) {
      const std::uint16_t h = gk::f32_to_f16(d_wanted);
      const float d = gk::f16_to_f32(h);
      if (d == 0.0f || !std::isfinite(d)) return;
      std::uint8_t q[32];
      double err = 0.0;
      for (int j = 0; j < 32; ++j) {
        const float l = std::clamp(std::nearbyint(x[j] / d), -4.0f, 3.0f);
        q[j] = static_cast<std::uint8_t>(l + 4.0f);
        const double e = double(x[j]) - double(d) * l;
        err += weight(j) * e * e;
      }
      if (err < best_err) {
        best_err = err;
        best_d = h;
        std::copy(q, q + 32, best_q);
      }
    };
    if (vmax != 0.0f) {
      for (int t = 0; t <= 12; ++t) try_d(vmax / -(3.0f + 0.125f * static_cast<float>(t)));
      for (int t = 0; t <= 8; ++t) try_d(vmax / (2.5f + 0.125f * static_cast<float>(t)));
      double sxl = 0.0, sll = 0.0;
      for (int j = 0; j < 32; ++j) {
        const double l = double(best_q[j]) - 4.0;
        sxl += weight(j) * x[j] * l;
        sll += weight(j) * l * l;
      }
      if (sll > 0.0) try_d(static_cast<float>(sxl / sll));
    }
    b.d = gk::f16{best_d};
    std::memset(b.ql, 0, sizeof b.ql);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int j = 0; j < 32; ++j) {
      b.ql[j % 8] = static_cast<std::uint8_t>(b.ql[j % 8] | (best_q[j] & 3) << (2 * (j / 8)));
      b.qh[j / 8] = static_cast<std::uint8_t>(b.qh[j / 8] | (best_q[j] >> 2) << (j % 8));
    }
  }

  // The float part of a block dot, shared by every kernel so that they round alike: the
  // exact integer sum times the product of the two scales.
  static float scaled(int isum, const block& w, const dot_type::block& a) noexcept {
    return static_cast<float>(isum) * (gk::to_f32(w.d) * gk::to_f32(a.d));
  }

  static float dot(const block& w, const dot_type::block* a) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += (code(w, j) - 4) * a->qs[j];
    return scaled(isum, w, *a);
  }
};
static_assert(sizeof(q3_f16::block) == 14 && offsetof(q3_f16::block, ql) == 2 && offsetof(q3_f16::block, qh) == 10);
static_assert(gk::BlockFormat<q3_f16>);

}  // namespace example

GK_EXACT_FP_END
