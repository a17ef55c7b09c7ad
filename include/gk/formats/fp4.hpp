// SPDX-License-Identifier: MIT
// The fp4 formats: 4-bit e2m1 codes under a shared power-of-two (mxfp4) or ue4m3 (nvfp4)
// scale, both paired with q8_0 activations.
//
// GGUF stores the e2m1 values doubled, as the integers 0, ±1, ±2, ±3, ±4, ±6, ±8, ±12,
// and halves the scale to match; decoding here does the same multiplications (doubled
// integer times half scale), so it is bit-identical to the reference and the integer dot
// sums are the same sums.
//
// A scale has few representable values near a block's range, so the encoders try every
// one that can matter (the power of two or ue4m3 code that puts the block's largest
// magnitude at the top code, and a few either side), each with the nearest code for
// every weight, and keep the least importance-weighted squared error: an exhaustive
// search, where the reference takes the first candidate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"
#include "gk/formats/legacy.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace detail {

// e2m1 code c as the doubled integer GGUF stores (2 * e2m1_to_f32(c)).
constexpr int fp4_doubled(std::uint8_t c) noexcept { return static_cast<int>(2.0f * e2m1_to_f32(c)); }

// The nearest e2m1 code to x / (2 h) for a half scale h > 0, and the error of that weight
// as decode reconstructs it (doubled code times h).
inline std::uint8_t fp4_nearest(float x, float h, float& y) noexcept {
  // midpoints between the doubled magnitudes 0 1 2 3 4 6 8 12
  constexpr float mid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
  const float a = std::fabs(x) / h;
  std::uint8_t c = 0;
  while (c < 7 && a > mid[c]) ++c;
  // the division rounds: settle a near-tie on the reconstructed values themselves
  if (c < 7) {
    const float lo = static_cast<float>(fp4_doubled(c)) * h, hi = static_cast<float>(fp4_doubled(c + 1)) * h;
    if (std::fabs(std::fabs(x) - hi) < std::fabs(std::fabs(x) - lo)) ++c;
  }
  if (c > 0) {
    const float lo = static_cast<float>(fp4_doubled(c - 1)) * h, at = static_cast<float>(fp4_doubled(c)) * h;
    if (std::fabs(std::fabs(x) - lo) < std::fabs(std::fabs(x) - at)) --c;
  }
  if (x < 0.0f && c != 0) c |= 8u;
  y = static_cast<float>(fp4_doubled(c)) * h;
  return c;
}

// Codes for n weights under the half scale h and their weighted error.
inline double fp4_codes(const float* x, const float* importance, int n, float h, std::uint8_t* c) noexcept {
  double err = 0.0;
  for (int j = 0; j < n; ++j) {
    float y;
    c[j] = fp4_nearest(x[j], h, y);
    const double e = static_cast<double>(x[j]) - y;
    err += (importance ? importance[j] : 1.0) * e * e;
  }
  return err;
}

}  // namespace detail

// mxfp4: 32 weights share an e8m0 exponent e; byte j holds weight j's e2m1 code in its
// low nibble and weight j + 16's in its high nibble; w = e2m1(code) * 2^(e - 127),
// computed as doubled code * 2^(e - 128). 17 bytes per block, 4.25 bits per weight.
struct mxfp4 {
  static constexpr type id = type::mxfp4;
  static constexpr int block_size = 32;
  struct block { std::uint8_t e; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float h = e8m0_to_f32_half(b.e);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>(detail::fp4_doubled(b.qs[j] & 0x0f)) * h;
      out[j + 16] = static_cast<float>(detail::fp4_doubled(b.qs[j] >> 4)) * h;
    }
  }
  // Exponents from the one that puts the largest magnitude in [4, 8) (doubled 8 .. 16,
  // past the top code 12) to three above it; e = 255 (infinite scale) is never written.
  static void encode(const float* x, block& b, const float* importance) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    std::uint8_t c[32], best_c[32] = {};
    b.e = 0;
    if (amax > 0.0f) {
      const int e0 = static_cast<int>(e8m0_floor_log2(amax)) - 2;
      double best = -1.0;
      for (int e = std::max(e0 - 1, 0); e <= std::min(e0 + 3, 254); ++e) {
        const double err = detail::fp4_codes(x, importance, 32, e8m0_to_f32_half(static_cast<std::uint8_t>(e)), c);
        if (best < 0.0 || err < best) {
          best = err;
          b.e = static_cast<std::uint8_t>(e);
          std::copy(c, c + 32, best_c);
        }
      }
    }
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(best_c[j] | (best_c[j + 16] << 4));
  }
  static float dot(const block& w, const q8_0::block* a) {
    int sum = 0;
    for (int j = 0; j < 16; ++j)
      sum += a->qs[j] * detail::fp4_doubled(w.qs[j] & 0x0f) + a->qs[j + 16] * detail::fp4_doubled(w.qs[j] >> 4);
    return to_f32(a->d) * e8m0_to_f32_half(w.e) * static_cast<float>(sum);
  }
};
static_assert(sizeof(mxfp4::block) == 17 && offsetof(mxfp4::block, e) == 0 && offsetof(mxfp4::block, qs) == 1);
static_assert(BlockFormat<mxfp4>);

// nvfp4: 64 weights in four sub-blocks of 16, each with a ue4m3 scale s = d[k]; byte
// 8k + j holds sub-block k's weight j in its low nibble and weight j + 8 in its high
// nibble, as e2m1 codes; w = e2m1(code) * s, computed as doubled code * (s / 2).
// 36 bytes per block, 4.5 bits per weight.
struct nvfp4 {
  static constexpr type id = type::nvfp4;
  static constexpr int block_size = 64;
  struct block { std::uint8_t d[4]; std::uint8_t qs[32]; };
  using dot_type = q8_0;

  // half the sub-block scale, as the doubled codes need (exact: a power-of-two step)
  static float half_scale(std::uint8_t s) noexcept { return ue4m3_to_f32(s) * 0.5f; }

  static void decode(const block& b, float* out) {
    for (int k = 0; k < 4; ++k) {
      const float h = half_scale(b.d[k]);
      for (int j = 0; j < 8; ++j) {
        out[16 * k + j] = static_cast<float>(detail::fp4_doubled(b.qs[8 * k + j] & 0x0f)) * h;
        out[16 * k + j + 8] = static_cast<float>(detail::fp4_doubled(b.qs[8 * k + j] >> 4)) * h;
      }
    }
  }
  // Per sub-block, the eight ue4m3 codes either side of the one nearest amax / 6 (one
  // octave each way; ue4m3 codes are monotone in value from 0x01 to 0x7e).
  static void encode(const float* x, block& b, const float* importance) {
    for (int k = 0; k < 4; ++k) {
      const float* xs = x + 16 * k;
      const float* is = importance ? importance + 16 * k : nullptr;
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(xs[j]));
      std::uint8_t c[16], best_c[16] = {};
      b.d[k] = 0;
      if (amax > 0.0f) {
        const int s0 = std::max<int>(f32_to_ue4m3(amax / 6.0f), 1);
        double best = -1.0;
        for (int s = std::max(s0 - 8, 1); s <= std::min(s0 + 8, 0x7e); ++s) {
          const double err = detail::fp4_codes(xs, is, 16, half_scale(static_cast<std::uint8_t>(s)), c);
          if (best < 0.0 || err < best) {
            best = err;
            b.d[k] = static_cast<std::uint8_t>(s);
            std::copy(c, c + 16, best_c);
          }
        }
      }
      for (int j = 0; j < 8; ++j) b.qs[8 * k + j] = static_cast<std::uint8_t>(best_c[j] | (best_c[j + 8] << 4));
    }
  }
  // Two q8_0 blocks per weight block; an integer sum per 16-weight sub-block, scaled by
  // the activation's d and the sub-block's half scale.
  static float dot(const block& w, const q8_0::block* a) {
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
      const q8_0::block& ak = a[k / 2];
      const int off = 16 * (k % 2);
      int s = 0;
      for (int j = 0; j < 8; ++j) {
        s += ak.qs[off + j] * detail::fp4_doubled(w.qs[8 * k + j] & 0x0f);
        s += ak.qs[off + j + 8] * detail::fp4_doubled(w.qs[8 * k + j] >> 4);
      }
      sum += to_f32(ak.d) * half_scale(w.d[k]) * static_cast<float>(s);
    }
    return sum;
  }
};
static_assert(sizeof(nvfp4::block) == 36 && offsetof(nvfp4::block, d) == 0 && offsetof(nvfp4::block, qs) == 4);
static_assert(BlockFormat<nvfp4>);

}  // namespace gk::formats

GK_EXACT_FP_END
