// SPDX-License-Identifier: MIT
// AVX-512 tiles of the float formats (f32, f16, bf16): R weight rows by C activation
// columns, each sixteen-element weight segment loaded and widened once and used for all C
// columns, each activation segment once for all R rows.
//
// Every (row, column) keeps its own register of the definition's sixteen lanes
// (formats::float_row::dot), so each output is the row kernel's (avx512/dot_float.hpp)
// bits: per step a mul then an add (the region is GK_EXACT_FP; f16 by an FMA that gives
// the same bits, see step), the tail a masked load and a masked add into its own lanes,
// and the same reduction tree
// (avx512_ops::reduce_lanes16) per (row, column). R * C <= 16 accumulators plus R weight
// registers and one activation register fit the 32 zmm registers.
// Shape 4 x 4: measured one thread, 4096-wide rows, 64 weight rows by 8 columns
// (L2-resident), GFLOP/s rows / 2 x 8 / 4 x 4: f32 46 / 92 / 132, f16 49 / 112 / 122,
// bf16 47 / 111 / 119 (a step is 16 mul + 16 add against R + C widening loads; 4 x 4
// loads the fewest). The accumulators must stay in registers: every loop over them is
// unrolled (a rolled tail loop made GCC keep the array in memory, a store per update).
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/avx512/dot_float.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_float_tile {

using namespace gk::simd::avx512_ops;

// acc + w * a for lanes of the definition. f16 by one FMA: the product of two f16 values is
// exact in float (11 x 11 significand bits <= 24; |product| from 2^-48 to 2^32, all normal
// floats), so fma(w, a, acc) rounds once, exactly as the definition's add of the rounded
// (that is, exact) product does: the same bits, including zero signs. It halves the tile's
// floating-point operations, which bound it: one thread, N = 64, 4096 x 4096 (bench_matmul),
// f16 100 -> 151 GFLOP/s (0.73 -> 1.08-1.10 of the reference), two runs. Not for f32 (its
// products round) or bf16 (exact too, but a product below 2^-126 rounds in the definition
// and not in an FMA).
template <class B>
inline __m512 step(__m512 acc, __m512 w, __m512 a) {
  if constexpr (std::is_same_v<B, gk::f16>) return _mm512_fmadd_ps(w, a, acc);
  else return _mm512_add_ps(acc, _mm512_mul_ps(w, a));
}
template <class B>
inline __m512 step_masked(__m512 acc, __m512 w, __m512 a, __mmask16 m) {  // lanes off m keep acc
  if constexpr (std::is_same_v<B, gk::f16>) return _mm512_mask3_fmadd_ps(w, a, acc, m);
  else return _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(w, a));
}

// R x C with R * C <= 16: out[r * C + c] = float_row_dot(w[r], a[c], n), bit for bit.
template <class B, int R, int C>
inline void tile(const B* const* w, const B* const* a, std::int64_t n, float* out) {
  static_assert(R * C <= 16 && R >= 1 && C >= 1);
  __m512 acc[R * C];
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) acc[j] = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x16(w[r] + i, 0xffff);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 av = load_f32x16(a[c] + i, 0xffff);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r * C + c] = step<B>(acc[r * C + c], wv[r], av);
    }
  }
  if (const int rem = static_cast<int>(n - i); rem > 0) {
    const auto m = static_cast<__mmask16>((1u << rem) - 1);
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x16(w[r] + i, m);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 av = load_f32x16(a[c] + i, m);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r * C + c] = step_masked<B>(acc[r * C + c], wv[r], av, m);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) out[j] = reduce_lanes16(acc[j]);
}

// Any R x C: column blocks of at most 16 / R columns (R <= 16).
template <class B>
struct runner {
  template <int R, int C>
  static void run(const B* const* w, const B* const* a, std::int64_t n, float* out) {
    static_assert(R >= 1 && R <= 16);
    if constexpr (R * C <= 16) {
      tile<B, R, C>(w, a, n, out);
    } else {
      constexpr int cb = 16 / R;
      float o[R * cb];
      for (int c0 = 0; c0 < C; c0 += cb) {
        if (C - c0 >= cb) {
          tile<B, R, cb>(w, a + c0, n, o);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < cb; ++c) out[r * C + c0 + c] = o[r * cb + c];
        } else {
          for (int c = c0; c < C; ++c) {
            tile<B, R, 1>(w, a + c, n, o);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) out[r * C + c] = o[r];
          }
        }
      }
    }
  }
};

}  // namespace gk::simd::avx512_float_tile

namespace gk {

#define GK_AVX512_FLOAT_TILE(fmt, path)                                                                       \
  template <>                                                                                                 \
  struct dot_tile<formats::fmt, simd::avx512> {                                                               \
    static constexpr bool specialised = true, decode = path == decode_path::tile;                             \
    static constexpr bool decode_on_intel = path == decode_path::tile_on_intel;                               \
    static constexpr int rows = 4, cols = 4;                                                                  \
    template <int R, int C>                                                                                   \
    static void run(const formats::fmt::block* const* w, const formats::fmt::block* const* a, std::int64_t n, \
                    float* out, const void* = nullptr, std::size_t = 0) {                                     \
      simd::avx512_float_tile::runner<formats::fmt::block>::run<R, C>(w, a, n, out);                          \
    }                                                                                                         \
  };

// path: whether one column (N = 1) goes through the tile, 4 rows at a time, instead of row
// by row (decode_path; cpu/matmul.hpp). f32's row dot is one chain of dependent adds; four
// rows give four chains. bench_matmul, one column, two runs each, gk/ref, row dots -> tile:
// 4096 x 4096 one thread 1.08 -> 1.23-1.77, two 1.15-1.18 -> 1.37-1.55; from >= 1 GiB one
// thread 1.19-1.22 -> 1.33-1.46, two 1.03-1.19 -> 1.35-1.42. f16 and bf16 measured slower
// through it on an AMD EPYC (f16 from 1 GiB 0.91 -> 0.66-0.68, bf16 1.22-1.24 -> 0.76-0.87)
// and keep their row dots there; on an Intel Xeon (Emerald Rapids share, one thread) the
// tile was faster cache-resident (4096 x 4096, GFLOP/s: f16 26.2 -> 29.2, bf16 26.1 ->
// 30.9) and equal from memory (4096 x 65536: 11.8-12.2 against 11.7-12.0).
GK_AVX512_FLOAT_TILE(f32, decode_path::tile)
GK_AVX512_FLOAT_TILE(f16, decode_path::tile_on_intel)
GK_AVX512_FLOAT_TILE(bf16, decode_path::tile_on_intel)

#undef GK_AVX512_FLOAT_TILE

}  // namespace gk

GK_EXACT_FP_END

#endif
