// SPDX-License-Identifier: MIT
// The plain float rows as formats with a block of one: f32, f16, bf16. They pair with
// themselves for dots (as the reference pairs them), so a dot is a plain float sum of
// products, accumulated in float in index order.
#pragma once

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

struct f32 {
  static constexpr type id = type::f32;
  static constexpr int block_size = 1;
  struct block { float v; };
  using dot_type = f32;
  static void decode(const block& b, float* out) { out[0] = b.v; }
  static void encode(const float* in, block& b, const float*) { b.v = in[0]; }
  static float dot(const block& w, const block* a) { return w.v * a->v; }
};

struct f16 {
  static constexpr type id = type::f16;
  static constexpr int block_size = 1;
  using block = gk::f16;
  using dot_type = f16;
  static void decode(const block& b, float* out) { out[0] = to_f32(b); }
  static void encode(const float* in, block& b, const float*) { b = to_f16(in[0]); }
  static float dot(const block& w, const block* a) { return to_f32(w) * to_f32(*a); }
};

struct bf16 {
  static constexpr type id = type::bf16;
  static constexpr int block_size = 1;
  using block = gk::bf16;
  using dot_type = bf16;
  static void decode(const block& b, float* out) { out[0] = to_f32(b); }
  static void encode(const float* in, block& b, const float*) { b = to_bf16(in[0]); }
  static float dot(const block& w, const block* a) { return to_f32(w) * to_f32(*a); }
};

static_assert(BlockFormat<f32> && BlockFormat<f16> && BlockFormat<bf16>);


}  // namespace gk::formats

GK_EXACT_FP_END
