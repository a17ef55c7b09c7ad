// SPDX-License-Identifier: MIT
// AVX2 tiles of the float formats (f32, f16, bf16): R weight rows by C activation
// columns, each eight-element half of a sixteen-element weight segment loaded and widened
// once and used for all C columns, each activation half once for all R rows.
//
// Every (row, column) keeps its own pair of registers, the definition's lanes 0-7 and
// 8-15 (formats::float_row::dot), exactly as the row kernel (avx2/dot_float.hpp) does: per
// step a mul then an add (the region is GK_EXACT_FP; f16 by an FMA that gives the same
// bits, see step), the tail through the
// same zero-padded copies and blends, and the same reduction tree
// (avx2_ops::reduce_lanes16) per (row, column), so each output is the row dot's bits.
// 2 x 3 keeps twelve accumulators, two weight halves and one activation half in the
// sixteen ymm registers.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/avx2/dot_float.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_float_tile {

using namespace gk::simd::avx2_ops;

inline constexpr int max_acc = 12;  // accumulator registers (two per dot)

// acc + w * a for lanes of the definition; f16 by one FMA, the same bits (the product of two
// f16 values is exact in float: see avx512/dot_tile_float.hpp). bench_matmul built for
// x86-64-v3 (this tile), f16, N 64, 4096 x 4096, two runs: one thread 51.5 -> 84-86, two
// threads 99-105 -> 161-165 GFLOP/s. test_simd_dot_avx2 compares the tile's bits with the
// row dots (an FMA planted for f32 and bf16 instead gave 24 failures).
template <class B>
inline __m256 step(__m256 acc, __m256 w, __m256 a) {
  if constexpr (std::is_same_v<B, gk::f16>) return _mm256_fmadd_ps(w, a, acc);
  else return _mm256_add_ps(acc, _mm256_mul_ps(w, a));
}

// R x C with 2 * R * C <= max_acc: out[r * C + c] = float_row_dot(w[r], a[c], n), bit for bit.
template <class B, int R, int C>
inline void tile(const B* const* w, const B* const* a, std::int64_t n, float* out) {
  static_assert(2 * R * C <= max_acc && R >= 1 && C >= 1);
  __m256 lo[R * C], hi[R * C];  // lanes 0-7, 8-15 of dot r * C + c
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x8(w[r] + i);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m256 av = load_f32x8(a[c] + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) lo[r * C + c] = step<B>(lo[r * C + c], wv[r], av);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x8(w[r] + i + 8);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m256 av = load_f32x8(a[c] + i + 8);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) hi[r * C + c] = step<B>(hi[r * C + c], wv[r], av);
    }
  }
  if (const int rem = static_cast<int>(n - i); rem > 0) {
    // lanes at or past rem keep their sums untouched (blend, not an add of +0)
    const __m256i rv = _mm256_set1_epi32(rem);
    const __m256 in_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256 in_hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)));
    B wt[R][16] = {}, at[C][16] = {};
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) std::memcpy(wt[r], w[r] + i, static_cast<std::size_t>(rem) * sizeof(B));
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) std::memcpy(at[c], a[c] + i, static_cast<std::size_t>(rem) * sizeof(B));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        const int j = r * C + c;
        lo[j] = _mm256_blendv_ps(lo[j], step<B>(lo[j], load_f32x8(wt[r]), load_f32x8(at[c])), in_lo);
        hi[j] = _mm256_blendv_ps(hi[j], step<B>(hi[j], load_f32x8(wt[r] + 8), load_f32x8(at[c] + 8)), in_hi);
      }
  }
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) out[j] = reduce_lanes16(lo[j], hi[j]);
}

// Any R x C: column blocks of at most max_acc / (2 R) columns; rows in blocks of at most
// max_acc / 2 where one column is already too many.
template <class B>
struct runner {
  template <int R, int C>
  static void run(const B* const* w, const B* const* a, std::int64_t n, float* out) {
    if constexpr (2 * R * C <= max_acc) {
      tile<B, R, C>(w, a, n, out);
    } else if constexpr (2 * R <= max_acc) {
      constexpr int cb = max_acc / (2 * R);
      float o[R * cb];
      for (int c0 = 0; c0 < C; c0 += cb) {
        if (C - c0 >= cb) {
          tile<B, R, cb>(w, a + c0, n, o);
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < cb; ++c) out[r * C + c0 + c] = o[r * cb + c];
        } else {
          for (int c = c0; c < C; ++c) {
            tile<B, R, 1>(w, a + c, n, o);
            for (int r = 0; r < R; ++r) out[r * C + c] = o[r];
          }
        }
      }
    } else {
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) tile<B, 1, 1>(w + r, a + c, n, out + r * C + c);
    }
  }
};

}  // namespace gk::simd::avx2_float_tile

namespace gk {

#define GK_AVX2_FLOAT_TILE(fmt)                                                                               \
  template <>                                                                                                 \
  struct dot_tile<formats::fmt, simd::avx2> {                                                                 \
    static constexpr bool specialised = true;                                                                 \
    static constexpr int rows = 2, cols = 3;                                                                  \
    template <int R, int C>                                                                                   \
    static void run(const formats::fmt::block* const* w, const formats::fmt::block* const* a, std::int64_t n, \
                    float* out) {                                                                             \
      simd::avx2_float_tile::runner<formats::fmt::block>::run<R, C>(w, a, n, out);                            \
    }                                                                                                         \
  };

GK_AVX2_FLOAT_TILE(f32)
GK_AVX2_FLOAT_TILE(f16)
GK_AVX2_FLOAT_TILE(bf16)

#undef GK_AVX2_FLOAT_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
