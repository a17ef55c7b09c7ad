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
// sixteen ymm registers. bf16 prompts run as tasks (below): the same tiles on columns widened
// once, by FMA where the weights' and columns' exponent ranges prove it the same bits.
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
#include "gk/simd/fma_range.hpp"
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
// Fma: by FMA (f16 always; bf16 where the task's ranges prove it the same bits), else mul, add.
template <bool Fma>
inline __m256 step(__m256 acc, __m256 w, __m256 a) {
  if constexpr (Fma) return _mm256_fmadd_ps(w, a, acc);
  else return _mm256_add_ps(acc, _mm256_mul_ps(w, a));
}
using avx2_ops::load_f32x8;
inline __m256 load_f32x8(const float* p) { return _mm256_loadu_ps(p); }  // a widened column

// R x C with 2 * R * C <= max_acc: out[r * C + c] = float_row_dot(w[r], a[c], n), bit for bit;
// a: the weights' own format, or (A = float) columns widened to f32.
template <class B, class A, int R, int C, bool Fma = std::is_same_v<B, gk::f16>>
inline void tile(const B* const* w, const A* const* a, std::int64_t n, float* out) {
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
      for (int r = 0; r < R; ++r) lo[r * C + c] = step<Fma>(lo[r * C + c], wv[r], av);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x8(w[r] + i + 8);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m256 av = load_f32x8(a[c] + i + 8);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) hi[r * C + c] = step<Fma>(hi[r * C + c], wv[r], av);
    }
  }
  if (const int rem = static_cast<int>(n - i); rem > 0) {
    // lanes at or past rem keep their sums untouched (blend, not an add of +0)
    const __m256i rv = _mm256_set1_epi32(rem);
    const __m256 in_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256 in_hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(rv, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)));
    B wt[R][16] = {};
    A at[C][16] = {};
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) std::memcpy(wt[r], w[r] + i, static_cast<std::size_t>(rem) * sizeof(B));
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) std::memcpy(at[c], a[c] + i, static_cast<std::size_t>(rem) * sizeof(A));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        const int j = r * C + c;
        lo[j] = _mm256_blendv_ps(lo[j], step<Fma>(lo[j], load_f32x8(wt[r]), load_f32x8(at[c])), in_lo);
        hi[j] = _mm256_blendv_ps(hi[j], step<Fma>(hi[j], load_f32x8(wt[r] + 8), load_f32x8(at[c] + 8)), in_hi);
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
      tile<B, B, R, C>(w, a, n, out);
    } else if constexpr (2 * R <= max_acc) {
      constexpr int cb = max_acc / (2 * R);
      float o[R * cb];
      for (int c0 = 0; c0 < C; c0 += cb) {
        if (C - c0 >= cb) {
          tile<B, B, R, cb>(w, a + c0, n, o);
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < cb; ++c) out[r * C + c0 + c] = o[r * cb + c];
        } else {
          for (int c = c0; c < C; ++c) {
            tile<B, B, R, 1>(w, a + c, n, o);
            for (int r = 0; r < R; ++r) out[r * C + c] = o[r];
          }
        }
      }
    } else {
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) tile<B, B, 1, 1>(w + r, a + c, n, out + r * C + c);
    }
  }
};


// ---- a whole task (cpu/matmul.hpp task_tile): 16 weight rows by 1 to 8 columns widened
// to f32 once per panel (widen), so the tiles widen only the weights; bf16 adds by FMA where
// the code ranges prove every product exact (simd/fma_range.hpp), else mul, add.

// The code range (simd/fma_range.hpp) of 16-bit float codes, sixteen at a time.
struct code_range {
  __m256i lo = _mm256_set1_epi16(-1), hi = _mm256_setzero_si256();
  void add(__m256i x) {  // zero codes (padding) drop out
    const __m256i mag = _mm256_and_si256(x, _mm256_set1_epi16(0x7fff));
    lo = _mm256_min_epu16(lo, _mm256_sub_epi16(mag, _mm256_set1_epi16(1)));
    hi = _mm256_max_epu16(hi, mag);
  }
  template <class B>
  void add_tail(const B* p, std::int64_t r) {  // r < 16 codes
    B t[16] = {};
    std::memcpy(t, p, static_cast<std::size_t>(r) * sizeof(B));
    add(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t)));
  }
  std::uint32_t packed() const {
    alignas(32) std::uint16_t l[16], h[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(h), hi);
    return fma_range::of_lanes(l, h, 16);
  }
};

template <class B>
inline std::uint32_t range_of(const B* p, std::int64_t n) {
  code_range r;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) r.add(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
  if (i < n) r.add_tail(p + i, n - i);
  return r.packed();
}

// n elements of a row widened to f32 at dst; returns their code range
template <class B>
inline std::uint32_t widen(const B* src, float* dst, std::int64_t n) {
  code_range r;
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    r.add(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm256_storeu_ps(dst + i, load_f32x8(src + i));
    _mm256_storeu_ps(dst + i + 8, load_f32x8(src + i + 8));
  }
  if (i < n) {
    r.add_tail(src + i, n - i);
    B t[16] = {};
    std::memcpy(t, src + i, static_cast<std::size_t>(n - i) * sizeof(B));
    alignas(32) float f[16];
    _mm256_store_ps(f, load_f32x8(t));
    _mm256_store_ps(f + 8, load_f32x8(t + 8));
    std::memcpy(dst + i, f, static_cast<std::size_t>(n - i) * sizeof(float));
  }
  return r.packed();
}

// out[r * nc + c] = float_row_dot(w[r], the column widened at a[c], n) for 16 rows and
// 1 <= nc <= 8, by the 2 x 3 tiles above reading the widened columns; fma: (bf16) every
// product exact
template <class B>
inline void task(const B* const* w, const float* const* a, int nc, std::int64_t n, float* out, bool fma) {
  auto rows2 = [&]<bool Fma>(int r) {
    float o[2 * 3];
    int c = 0;
    for (; c + 3 <= nc; c += 3) {
      tile<B, float, 2, 3, Fma>(w + r, a + c, n, o);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) out[(r + i) * nc + c + j] = o[i * 3 + j];
    }
    if (nc - c == 2) tile<B, float, 2, 2, Fma>(w + r, a + c, n, o);
    else if (nc - c == 1) tile<B, float, 2, 1, Fma>(w + r, a + c, n, o);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < nc - c; ++j) out[(r + i) * nc + c + j] = o[i * (nc - c) + j];
  };
  const bool by_fma = std::is_same_v<B, gk::f16> || (std::is_same_v<B, gk::bf16> && fma);
  for (int r = 0; r < 16; r += 2) {
    if (by_fma) rows2.template operator()<true>(r);
    else rows2.template operator()<false>(r);
  }
}

}  // namespace gk::simd::avx2_float_tile

namespace gk {

// bf16 takes its prompts as tasks (two or more columns), by FMA where the ranges allow: the
// standalone tile (/tmp harness, not committed; 16 rows by 8 columns of 4096, L2-resident,
// one thread, GFLOP/s) ran f32 47-49 / task 42-43 (mul, add either way), f16 75 / 67-68
// (FMA either way; widened columns read twice the bytes), bf16 34-35 / 67 (mul, add -> FMA):
// only bf16 gains, and only it is a task.
#define GK_AVX2_BF16_TASK                                                                                     \
  static constexpr bool task = true, ranged = true;                                                          \
  static std::uint32_t widen(const formats::bf16::block* col, float* dst, std::int64_t n) {                  \
    return simd::avx2_float_tile::widen(col, dst, n);                                                        \
  }                                                                                                          \
  static std::uint32_t rows_range(const formats::bf16::block* const* w, int nr, std::int64_t n) {            \
    std::uint32_t r = simd::fma_range::empty;                                                                \
    for (int i = 0; i < nr; ++i) r = simd::fma_range::merge(r, simd::avx2_float_tile::range_of(w[i], n));    \
    return r;                                                                                                \
  }                                                                                                          \
  static bool exact(std::uint32_t w, std::uint32_t a) { return simd::fma_range::exact(w, a); }              \
  static void run_task(const formats::bf16::block* const* w, const float* const* a, int nc, std::int64_t n,  \
                       float* out, bool fma) {                                                               \
    simd::avx2_float_tile::task(w, a, nc, n, out, fma);                                                      \
  }

#define GK_AVX2_FLOAT_TILE(fmt, extra)                                                                        \
  template <>                                                                                                 \
  struct dot_tile<formats::fmt, simd::avx2> {                                                                 \
    static constexpr bool specialised = true;                                                                 \
    static constexpr int rows = 2, cols = 3;                                                                  \
    template <int R, int C>                                                                                   \
    static void run(const formats::fmt::block* const* w, const formats::fmt::block* const* a, std::int64_t n, \
                    float* out) {                                                                             \
      simd::avx2_float_tile::runner<formats::fmt::block>::run<R, C>(w, a, n, out);                            \
    }                                                                                                         \
    extra                                                                                                     \
  };

GK_AVX2_FLOAT_TILE(f32, )
GK_AVX2_FLOAT_TILE(f16, )
GK_AVX2_FLOAT_TILE(bf16, GK_AVX2_BF16_TASK)

#undef GK_AVX2_FLOAT_TILE
#undef GK_AVX2_BF16_TASK

}  // namespace gk

GK_EXACT_FP_END

#endif
