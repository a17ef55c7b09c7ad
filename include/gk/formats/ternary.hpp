// SPDX-License-Identifier: MIT
// The ternary formats of BitNet b1.58 and TriLM models: 256 weights, one f16 scale d,
// each weight d * t with t in {-1, 0, 1} (tq2_0 can also hold 2). Dots pair them with
// q8_K activations; the integer sum of t * a is exact, then scaled once in float.
//
// The encoders run the weighted least-squares scale search of the legacy formats
// (formats/legacy.hpp, detail::fit_scale) over the whole 256-weight block: a grid of 1/d
// finds the best fit's neighbourhood, where the search is exact (as 1/d grows each
// weight's nearest code changes at known points, every assignment along the way gets its
// least-squares d), and the best few are rounded to f16 with the codes chosen again.
// The reference instead sets d = max |x|, which leaves most small weights at 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace detail {

// Trit k (0 = most significant) of a byte holding five trits as ceil(v * 256 / 243):
// multiplying by 3^k (mod 256) drops the trits above k, and the top of the byte times 3
// is trit k.
inline int trit(std::uint8_t b, int k) noexcept {
  constexpr std::uint8_t pow3[5] = {1, 3, 9, 27, 81};
  const std::uint8_t shifted = static_cast<std::uint8_t>(b * pow3[k]);
  return (shifted * 3) >> 8;
}
// Five trits t[0] (most significant) .. t[4], each 0 .. 2, as the byte trit() reads.
inline std::uint8_t pack_trits(const int* t) noexcept {
  int v = 0;
  for (int k = 0; k < 5; ++k) v = v * 3 + t[k];
  return static_cast<std::uint8_t>((v * 256 + 242) / 243);
}

}  // namespace detail

// tq1_0: 256 weights, f16 scale d; each weight a trit t in 0 .. 2 (w = d * (t - 1)), five
// trits per byte in base 3 (first trit most significant) stored as ceil(v * 256 / 243).
// qs[0 .. 32) carry weights 0 .. 160 (trit k of byte m is weight 32k + m), qs[32 .. 48)
// weights 160 .. 240 (trit k of byte 32 + m is weight 160 + 16k + m), qh[0 .. 4) weights
// 240 .. 256 in their first four trits (trit k of byte j is weight 240 + 4k + j).
// 54 bytes per block, 1.6875 bits per weight.
struct tq1_0 {
  static constexpr type id = type::tq1_0;
  static constexpr int block_size = 256;
  struct block { std::uint8_t qs[48]; std::uint8_t qh[4]; gk::f16 d; };
  using dot_type = q8_K;

  // weight index -> (byte, trit) is the layout above; decode and dot walk it the same way
  template <class F>
  static void for_each_trit(const block& b, F&& f) {
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 32; ++m) f(32 * k + m, detail::trit(b.qs[m], k));
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 16; ++m) f(160 + 16 * k + m, detail::trit(b.qs[32 + m], k));
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) f(240 + 4 * k + j, detail::trit(b.qh[j], k));
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for_each_trit(b, [&](int i, int t) { out[i] = static_cast<float>(t - 1) * d; });
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::int8_t q[256];
    b.d.bits = detail::fit_scale<256, -1, 1>(x, importance, q);
    int t[5];
    for (int m = 0; m < 32; ++m) {
      for (int k = 0; k < 5; ++k) t[k] = q[32 * k + m] + 1;
      b.qs[m] = detail::pack_trits(t);
    }
    for (int m = 0; m < 16; ++m) {
      for (int k = 0; k < 5; ++k) t[k] = q[160 + 16 * k + m] + 1;
      b.qs[32 + m] = detail::pack_trits(t);
    }
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 4; ++k) t[k] = q[240 + 4 * k + j] + 1;
      t[4] = 0;
      b.qh[j] = detail::pack_trits(t);
    }
  }
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0;
    for_each_trit(w, [&](int i, int t) { sum += (t - 1) * a->qs[i]; });
    return static_cast<float>(sum) * (to_f32(w.d) * a->d);
  }
};
static_assert(sizeof(tq1_0::block) == 54 && offsetof(tq1_0::block, qs) == 0 && offsetof(tq1_0::block, qh) == 48 &&
              offsetof(tq1_0::block, d) == 52);
static_assert(BlockFormat<tq1_0>);

// tq2_0: 256 weights, f16 scale d; each weight a 2-bit code q (w = d * (q - 1), so w/d is
// -1, 0, 1 or 2); weight 128h + 32k + m is bits 2k .. 2k+1 of byte 32h + m.
// 66 bytes per block, 2.0625 bits per weight.
struct tq2_0 {
  static constexpr type id = type::tq2_0;
  static constexpr int block_size = 256;
  struct block { std::uint8_t qs[64]; gk::f16 d; };
  using dot_type = q8_K;

  static int code(const block& b, int i) noexcept { return (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int i = 0; i < 256; ++i) out[i] = static_cast<float>(code(b, i) - 1) * d;
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::int8_t q[256];
    b.d.bits = detail::fit_scale<256, -1, 2>(x, importance, q);
    for (int j = 0; j < 64; ++j) {
      const int h = j / 32, m = j % 32;
      std::uint8_t bits = 0;
      for (int k = 0; k < 4; ++k) bits |= static_cast<std::uint8_t>((q[128 * h + 32 * k + m] + 1) << (2 * k));
      b.qs[j] = bits;
    }
  }
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0;
    for (int i = 0; i < 256; ++i) sum += (code(w, i) - 1) * a->qs[i];
    return static_cast<float>(sum) * (a->d * to_f32(w.d));
  }
};
static_assert(sizeof(tq2_0::block) == 66 && offsetof(tq2_0::block, qs) == 0 && offsetof(tq2_0::block, d) == 64);
static_assert(BlockFormat<tq2_0>);

}  // namespace gk::formats

GK_EXACT_FP_END
