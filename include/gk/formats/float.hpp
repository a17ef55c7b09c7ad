// SPDX-License-Identifier: MIT
// The plain float rows as formats with a block of one: f32, f16, bf16. They pair with
// themselves for dots (as the reference pairs them). A row dot is not one running sum in
// index order (that is a single dependency chain no SIMD kernel can reproduce bit for bit):
// it is float_row::dot, lanes of independent float sums whose order depends only on n.
#pragma once

#include <cstdint>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats::float_row {

// The row dot of the float formats, the definition the SIMD kernels reproduce: product i is
// w[i] * a[i] rounded to float (never fused into the add), added to acc[i % lanes] in
// index order starting from +0; then a fixed pairwise tree, acc[j] += acc[j + lanes / 2],
// ... , acc[j] += acc[j + 1], and acc[0] is the dot. A NaN anywhere gives a NaN; its
// payload is not specified (x86 keeps the first NaN operand's, and lanes meet in a
// different order from the index order).
//
// 16 lanes: one AVX-512 register, two AVX2 registers, four NEON ones, so each target's
// kernel is a plain mul, add per register with the lanes where the definition has them,
// and the tail goes to its own lanes under a mask. What it costs: every lane is one serial
// chain of adds, so AVX-512 runs one chain (16 products per add latency), AVX2 two of 8.
// Measured (bench_dot, 4096-wide rows, one AMD EPYC thread, avx512): f32 at the
// reference (0.97-1.39x, run to run), f16 and bf16 at 0.5-0.7x: the reference keeps
// several registers of sums per row. More lanes would lift that, at the price of a
// wider scalar definition and short rows that are all tail.
inline constexpr int lanes = 16;

// product(i) is the rounded float product of element i.
template <class Product>
float dot(std::int64_t n, Product&& product) {
  float acc[lanes] = {};
  for (std::int64_t i = 0; i < n; ++i) acc[i % lanes] += product(i);
  for (int half = lanes / 2; half > 0; half /= 2)
    for (int j = 0; j < half; ++j) acc[j] += acc[j + half];
  return acc[0];
}

}  // namespace gk::formats::float_row

namespace gk::formats {

struct f32 {
  static constexpr type id = type::f32;
  static constexpr int block_size = 1;
  struct block { float v; };
  using dot_type = f32;
  static void decode(const block& b, float* out) { out[0] = b.v; }
  static void encode(const float* in, block& b, const float*) { b.v = in[0]; }
  static float dot(const block& w, const block* a) { return w.v * a->v; }
  static float dot_row(const block* w, const block* a, std::int64_t n) {
    return float_row::dot(n, [&](std::int64_t i) { return dot(w[i], a + i); });
  }
};

struct f16 {
  static constexpr type id = type::f16;
  static constexpr int block_size = 1;
  using block = gk::f16;
  using dot_type = f16;
  static void decode(const block& b, float* out) { out[0] = to_f32(b); }
  static void encode(const float* in, block& b, const float*) { b = to_f16(in[0]); }
  static float dot(const block& w, const block* a) { return to_f32(w) * to_f32(*a); }
  static float dot_row(const block* w, const block* a, std::int64_t n) {
    return float_row::dot(n, [&](std::int64_t i) { return dot(w[i], a + i); });
  }
};

struct bf16 {
  static constexpr type id = type::bf16;
  static constexpr int block_size = 1;
  using block = gk::bf16;
  using dot_type = bf16;
  static void decode(const block& b, float* out) { out[0] = to_f32(b); }
  static void encode(const float* in, block& b, const float*) { b = to_bf16(in[0]); }
  static float dot(const block& w, const block* a) { return to_f32(w) * to_f32(*a); }
  static float dot_row(const block* w, const block* a, std::int64_t n) {
    return float_row::dot(n, [&](std::int64_t i) { return dot(w[i], a + i); });
  }
};

static_assert(BlockFormat<f32> && BlockFormat<f16> && BlockFormat<bf16>);
static_assert(RowDotted<f32> && RowDotted<f16> && RowDotted<bf16>);


}  // namespace gk::formats

GK_EXACT_FP_END
