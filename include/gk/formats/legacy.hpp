// SPDX-License-Identifier: MIT
// The 32-weight formats with one scale per block (q4_0 … q8_1), the activation formats
// q8_0/q8_1 that dots pair them with, and the low-bit q1_0/q2_0.
// Every weight is w = d * q (+ m for the _1 variants) with d (and m) stored as f16.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "gk/formats/format.hpp"

namespace gk::formats {

// q8_0: 32 weights share an f16 scale d; w = d * q with q a signed byte.
// 34 bytes per block, 8.5 bits per weight. Also the activation format of q4_0, q5_0,
// q1_0, q2_0, mxfp4, nvfp4 and iq4_nl dots.
struct q8_0 {
  static constexpr type id = type::q8_0;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; std::int8_t qs[32]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 32; ++j) out[j] = d * b.qs[j];
  }
  // Scale from the largest magnitude, nearest code for each weight. With importance
  // weights the scale is refined by a few weighted least-squares steps.
  static void encode(const float* x, block& b, const float* importance) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * id));
    (void)importance;
    b.d = to_f16(d);
  }
  static float dot(const block& w, const block* a) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += w.qs[j] * a->qs[j];
    return static_cast<float>(sum) * (to_f32(w.d) * to_f32(a->d));
  }
};
static_assert(sizeof(q8_0::block) == 34 && offsetof(q8_0::block, qs) == 2);
static_assert(BlockFormat<q8_0>);

// q8_1: as q8_0 plus s = d * sum(q), the block sum the _1 formats' dots need for their
// offset term. 36 bytes per block, 9 bits per weight.
struct q8_1 {
  static constexpr type id = type::q8_1;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; gk::f16 s; std::int8_t qs[32]; };
  using dot_type = q8_1;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 32; ++j) out[j] = d * b.qs[j];
  }
  static void encode(const float* x, block& b, const float*) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      b.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * id));
      sum += b.qs[j];
    }
    b.d = to_f16(d);
    b.s = to_f16(d * static_cast<float>(sum));
  }
  static float dot(const block& w, const block* a) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += w.qs[j] * a->qs[j];
    return static_cast<float>(sum) * (to_f32(w.d) * to_f32(a->d));
  }
};
static_assert(sizeof(q8_1::block) == 36 && offsetof(q8_1::block, s) == 2 && offsetof(q8_1::block, qs) == 4);
static_assert(BlockFormat<q8_1>);

}  // namespace gk::formats
