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
#include <cstdlib>
#include <type_traits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/float.hpp"
#include "gk/simd/avx512/dot_float.hpp"
#include "gk/simd/fma_range.hpp"
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
template <bool Fma>
inline __m512 step(__m512 acc, __m512 w, __m512 a) {
  if constexpr (Fma) return _mm512_fmadd_ps(w, a, acc);
  else return _mm512_add_ps(acc, _mm512_mul_ps(w, a));
}
template <bool Fma>
inline __m512 step_masked(__m512 acc, __m512 w, __m512 a, __mmask16 m) {  // lanes off m keep acc
  if constexpr (Fma) return _mm512_mask3_fmadd_ps(w, a, acc, m);
  else return _mm512_mask_add_ps(acc, m, acc, _mm512_mul_ps(w, a));
}
// an activation vector: a column of the format itself, or one widened to f32 (task_small)
template <class B>
inline __m512 act16(const B* p, __mmask16 m) { return load_f32x16(p, m); }
inline __m512 act16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

// R x C with R * C <= 16: out[r * C + c] = float_row_dot(w[r], a[c], n), bit for bit.
// One column (decode) of f16 or bf16 prefetches each row row_prefetch_bytes ahead, as the
// row dot does. Intel Xeon (Emerald Rapids, KVM), bench_matmul N 1, old and new binaries
// alternating, GB/s from >= 1 GiB, one / two threads: f16 8.5-10.2 / 15.5-18.0 -> 10.2-12.0
// / 17.7-22.9 (gk/ref 0.78-0.88 -> 0.91-1.01 / 0.78-0.88 -> 0.85-1.00, four runs), bf16
// 8.5-10.8 / 15.7-18.9 -> 9.3-12.1 / 20.0-23.3 (two runs); cache-resident (4096 x 4096,
// GFLOP/s) f16 21.7-25.7 / 43.9-50.5 -> 21.6-24.6 / 43.9-50.5, bf16 25.0-26.1 / 47.7-50.0
// -> 20.1-21.5 / 42.5-42.6: the prefetches cost instructions where the rows are in cache.
// Decode of a model reads its weights from memory, so they are taken. Not f32 (from memory
// 9.8-13.8 / 18.0-24.6 -> 12.9-13.2 / 20.3-26.3, cache-resident two threads 24.0-24.5 ->
// 21.4-21.8).
// The loop behind tile and task_small: Fma says how a product is added (f16 always; bf16
// where its ranges allow), Prefetch whether each row is prefetched ahead, AT is the
// activations' type (B, or f32 widened once per panel).
template <class B, int R, int C, bool Fma, bool Prefetch, class AT>
inline void rows_tile(const B* const* w, const AT* const* a, std::int64_t n, float* out) {
  static_assert(R * C <= 16 && R >= 1 && C >= 1);
  constexpr std::int64_t line = 64 / sizeof(B);  // elements a cache line
  static_assert(line % 16 == 0);
  __m512 acc[R * C];
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) acc[j] = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if constexpr (Prefetch) {
      if (i % line == 0)
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) prefetch<0>(reinterpret_cast<const char*>(w[r] + i) + row_prefetch_bytes);
    }
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x16(w[r] + i, 0xffff);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 av = act16(a[c] + i, 0xffff);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r * C + c] = step<Fma>(acc[r * C + c], wv[r], av);
    }
  }
  if (const int rem = static_cast<int>(n - i); rem > 0) {
    const auto m = static_cast<__mmask16>((1u << rem) - 1);
    __m512 wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = load_f32x16(w[r] + i, m);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 av = act16(a[c] + i, m);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r * C + c] = step_masked<Fma>(acc[r * C + c], wv[r], av, m);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < R * C; ++j) out[j] = reduce_lanes16(acc[j]);
}
template <class B, int R, int C>
inline void tile(const B* const* w, const B* const* a, std::int64_t n, float* out) {
  rows_tile<B, R, C, std::is_same_v<B, gk::f16>, C == 1 && sizeof(B) == 2>(w, a, n, out);
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

// A whole task (cpu/matmul.hpp task_tile): 16 weight rows by up to 8 columns whose
// activations were widened to f32 once per panel (widen), so the tile widens only the
// weights, once per chunk of task_kc elements into a buffer the 4 x 4 steps read from L1.
// The old tile widened each weight vector once per 4 columns and each activation vector
// once per 4 rows (8 widening loads per 16 mul-adds); here 1 per 16 (weights) or none.
// The accumulators live in memory between chunks (16 x 8 registers), loaded and stored once
// per chunk and 4 x 4 group: each output still adds its products lane by lane in index
// order, chunks in order, so the bits are the old tile's (the row kernel's).
//
// bf16 by FMA too, where it gives the same bits (simd/fma_range.hpp); the tile adds by mul,
// add where the ranges cannot prove it. f16 always (see step).
// The row block's range is worked out once per thread and matmul (cpu/matmul.hpp's wcache),
// the panel's when it is widened.
// Measured (Intel Xeon, Emerald Rapids KVM share; bench_matmul N 64, 4096 x 4096, GFLOP/s,
// one / two threads, the old 4 x 4 tile -> the task, two runs alternating binaries): f16
// 60-64 / 109-129 -> 85-86 / 141-144 (0.87-0.93 -> 1.00-1.25 of the reference's AMX path),
// bf16 44-45 / 82-89 -> 61-85 / 130-135 (0.70-0.75 -> 0.90-1.07). Standalone on L2-resident
// data the task runs 87-109 (bf16 by mul, add: 66-81); task_kc 128 or 512 and bf16 widened
// by one vpermw instead of a zero-extend and shift measured the same.
inline constexpr int task_kc = 256;
inline std::int64_t chunks(std::int64_t n) { return (n + task_kc - 1) / task_kc; }  // of task_kc

// The code range (simd/fma_range.hpp) of a run of 16-bit float codes.
struct code_range {
  __m512i lo = _mm512_set1_epi16(-1), hi = _mm512_setzero_si512();
  void add(__m512i x) {  // 32 codes; masked-off codes loaded as 0 drop out
    const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi16(0x7fff));
    lo = _mm512_min_epu16(lo, _mm512_sub_epi16(mag, _mm512_set1_epi16(1)));
    hi = _mm512_max_epu16(hi, mag);
  }
  template <class B>
  void add_run(const B* p, std::int64_t n) {  // n codes at p
    std::int64_t i = 0;
    for (; i + 32 <= n; i += 32) add(_mm512_loadu_si512(p + i));
    if (i < n) add(_mm512_maskz_loadu_epi16(static_cast<__mmask32>((std::uint64_t{1} << (n - i)) - 1), p + i));
  }
  std::uint32_t packed() const {
    alignas(64) std::uint16_t l[32], h[32];
    _mm512_store_si512(l, lo);
    _mm512_store_si512(h, hi);
    return fma_range::of_lanes(l, h, 32);
  }
};
template <class B>
inline std::uint32_t range_of(const B* p, std::int64_t n) {
  code_range r;
  r.add_run(p, n);
  return r.packed();
}

// n codes of a row widened to f32 at dst; returns their code_range
template <class B>
inline std::uint32_t widen(const B* src, float* dst, std::int64_t n) {
  code_range r;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    r.add(_mm512_loadu_si512(src + i));
    _mm512_storeu_ps(dst + i, load_f32x16(src + i, 0xffff));
    _mm512_storeu_ps(dst + i + 16, load_f32x16(src + i + 16, 0xffff));
  }
  if (i < n) {
    r.add(_mm512_maskz_loadu_epi16(static_cast<__mmask32>((std::uint64_t{1} << (n - i)) - 1), src + i));
    for (; i < n; i += 16) {
      const auto m = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(dst + i, m, load_f32x16(src + i, m));
    }
  }
  return r.packed();
}

// x kept in a register as loaded: GCC (12) otherwise loads each weight vector again for
// every FMA and takes the activation as the FMA's memory operand, two loads an FMA, which
// bound the task at half the FMA rate on an AMD EPYC (Zen 5; perf annotate of task<f16>).
template <class V>
inline void pin(V& x) {  // __m512 or __m512i
  asm("" : "+v"(x));
}

// 16 nv + rem codes of a row at src widened into dst (whole vectors, the tail's lanes zero)
template <class B>
inline void widen_chunk(const B* src, int nv, int rem, float* dst) {
  for (int v = 0; v < nv; ++v) _mm512_store_ps(dst + 16 * v, load_f32x16(src + 16 * v, 0xffff));
  if (rem) _mm512_store_ps(dst + 16 * nv, load_f32x16(src + 16 * nv, static_cast<__mmask16>((1u << rem) - 1)));
}

// 4 weight rows (wl(r, v, m): row r's elements [16 v, 16 v + 16) of the chunk as floats,
// lanes off m zero) by C widened columns a[c], elements [0, 16 nv) plus a tail of rem under
// a mask, into acc[r * 8 + c]
template <int C, bool Fma, class Wl>
inline void task_step(Wl&& wl, const float* const* a, std::int64_t i0, int nv, int rem, __m512* acc) {
  __m512 s[4 * C];
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) s[r * C + c] = acc[r * 8 + c];
  for (int v = 0; v < nv; ++v) {
    __m512 wv[4];
#pragma GCC unroll 8
    for (int r = 0; r < 4; ++r) {
      wv[r] = wl(r, v, static_cast<__mmask16>(0xffff));
      pin(wv[r]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512 av = _mm512_loadu_ps(a[c] + i0 + 16 * v);
      pin(av);
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r)
        s[r * C + c] = Fma ? _mm512_fmadd_ps(wv[r], av, s[r * C + c]) : _mm512_add_ps(s[r * C + c], _mm512_mul_ps(wv[r], av));
    }
  }
  if (rem) {
    const auto m = static_cast<__mmask16>((1u << rem) - 1);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 av = _mm512_maskz_loadu_ps(m, a[c] + i0 + 16 * nv);
#pragma GCC unroll 8
      for (int r = 0; r < 4; ++r) {
        const __m512 wv = wl(r, nv, m);
        s[r * C + c] = Fma ? _mm512_mask3_fmadd_ps(wv, av, s[r * C + c], m)
                           : _mm512_mask_add_ps(s[r * C + c], m, s[r * C + c], _mm512_mul_ps(wv, av));
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r * 8 + c] = s[r * C + c];
}
// A chunk of 16 rows by nc columns, 4 rows at a time (wlg(r0): the task_step loader of rows
// r0, r0 + 1, ...)
template <bool Fma, class Wlg>
inline void chunk_of(Wlg&& wlg, const float* const* a, int nc, std::int64_t i0, int nv, int rem, __m512* acc) {
  for (int r0 = 0; r0 < 16; r0 += 4) {
    auto wl = wlg(r0);
    __m512* ac = acc + r0 * 8;
    int c = 0;
    for (; c + 4 <= nc; c += 4) task_step<4, Fma>(wl, a + c, i0, nv, rem, ac + c);
    switch (nc - c) {
      case 3: task_step<3, Fma>(wl, a + c, i0, nv, rem, ac + c); break;
      case 2: task_step<2, Fma>(wl, a + c, i0, nv, rem, ac + c); break;
      case 1: task_step<1, Fma>(wl, a + c, i0, nv, rem, ac + c); break;
      default: break;
    }
  }
}
// ... from the rows widened into wb (task_kc floats apart)
template <bool Fma>
inline void task_chunk(const float* wb, const float* const* a, int nc, std::int64_t i0, int nv, int rem, __m512* acc) {
  chunk_of<Fma>(
      [wb](int r0) {
        return [w = wb + r0 * task_kc](int r, int v, __mmask16) { return _mm512_load_ps(w + r * task_kc + 16 * v); };
      },
      a, nc, i0, nv, rem, acc);
}
// ... from the rows w as they lie, each 16 codes widened as loaded, the rows' next chunk
// prefetched (n: the row length)
template <bool Fma, class B>
inline void task_chunk_rows(const B* const* w, const float* const* a, int nc, std::int64_t i0, int nv, int rem,
                            std::int64_t n, __m512* acc) {
  constexpr int line = 64 / sizeof(B);
  if (i0 + task_kc < n)
    for (int r = 0; r < 16; ++r)
      for (int i = 0; i < task_kc; i += line) prefetch<0>(reinterpret_cast<const char*>(w[r] + i0 + task_kc + i));
  chunk_of<Fma>(
      [w, i0](int r0) {
        return [wr = w + r0, i0](int r, int v, __mmask16 m) { return load_f32x16(wr[r] + i0 + 16 * v, m); };
      },
      a, nc, i0, nv, rem, acc);
}
// A task of 2-4 columns goes 4 rows at a time through rows_tile (the rows read as they lie
// and prefetched ahead, the columns widened once per panel) instead of widening
// its 16 rows a chunk at a time: with so few columns, the chunk's 16 rows of 512 bytes
// each were 16 short streams, and the loads that widened them waited on memory (perf
// record: half of the task's samples on the stores after those loads); the chunk buffer
// with a prefetch of the next chunk, or chunks of 1024 and 4096, measured slower. Intel Xeon
// (Sapphire Rapids class, KVM, 2 cores), bench_matmul 4096 x 4096, gk/ref, one / two
// threads, two rounds alternating binaries: f16 N 2 0.66-0.67 / 0.68-0.71 -> 0.83-0.84 /
// 0.85-0.86, N 3 0.66-0.67 / 0.70-0.72 -> 0.87-0.90 / 0.87-0.94, N 4 0.77-0.78 / 0.80-0.81
// -> 0.94-0.97 / 0.99-1.00; bf16 N 2 0.47-0.51 / 0.52 -> 0.62-0.65 / 0.64, N 3 0.49 / 0.50-
// 0.52 -> 0.62-0.63 / 0.65, N 4 0.60-0.62 / 0.62-0.65 -> 0.68-0.69 / 0.71. Below 1.0 still:
// the reference (its sgemm, 4 x 2 register tiles on the 16-bit activations) reads 16-bit
// columns, half the bytes of ours widened; reading the panel's 16-bit columns here and
// widening them per vector measured f16 N 2 0.87-0.91 (bf16 worse, 0.58-0.62): not taken.
// Two rows a call measured the same at N 2 and slower at N 3-4; prefetching into L2, or
// 6 KiB or 24 KiB ahead, the same. No prefetch at all (2026-12-07, three rounds) was faster
// where the rows sit in L3 (4096 x 4096, one thread: f16 N 2 0.83-0.88 -> 0.94-0.95, N 4
// 0.95-0.96 -> 1.05-1.08; bf16 N 2 0.76-0.82 -> 0.86-0.87) and slower from memory (>= 1 GiB,
// bench_matmul GK_BENCH_MEM_N=2 / 4, one / two threads, two rounds: f16 N 2 1.07-1.08 /
// 1.09-1.10 -> 0.98-1.00 / 0.90-1.00, N 4 0.99-1.04 / 0.97-1.04 -> 0.78 / 0.79-0.81; bf16
// N 2 0.98-1.00 / 1.01-1.02 -> 0.92-0.93 / 0.89-0.95): a model's weights come from memory,
// so the prefetch stays.
// How a task adds its products: by mul, add; by FMA (f16, or bf16 where the row block's and
// the panel's ranges proved every product exact); or `checked` (bf16 where the row block
// meets one panel only, cpu/matmul.hpp): by the AVX512_BF16 pair dot where the CPU has it
// (pair_dot, 2-8 columns), else a task of 5-8 columns by FMA chunk by chunk where the
// chunk's codes, taken as they are widened, prove it against the panel's range `a`, else by
// mul, add, and one of 2-4 columns by mul, add. A separate pass over the row block for its
// range read its rows twice: perf record (bf16 N 2, 4096 x 4096) put 11% of the run on it
// against 13% on the task. Intel Xeon (Sapphire Rapids class, KVM), bench_matmul, gk/ref,
// one / two threads, two rounds alternating binaries, that pass -> checked: N 6 0.69-0.72 /
// 0.73 -> 0.84 / 0.86, N 8 0.83-0.84 / 0.84-0.85 -> 1.00-1.01 / 1.01-1.02, N 64 (two column
// blocks and more keep the pass, once per matmul) the same. At 2-4 columns the tile is bound
// by its vector instructions: by FMA with no range at all (not exact, measured as a bound)
// 0.80-0.91, mul, add 0.66-0.81, by FMA with the rows' range taken in the same loop (4
// instructions per 32 codes and row) 0.68-0.77; the pass -> mul, add: N 2 0.63-0.70 /
// 0.66-0.73 -> 0.75-0.78 / 0.78-0.81, N 3 0.60-0.63 / 0.64-0.67 -> 0.66-0.69 / 0.71-0.74, N 4
// 0.69-0.74 / 0.72-0.77 -> 0.70-0.72 / 0.72-0.75.
struct adding {
  enum how_t { mul_add, fma, checked } how;
  std::uint32_t a = 0;  // checked: the panel's code range
  const std::uint32_t* const* pairs = nullptr;  // checked bf16: the columns' pairs (pair_dot), if formed
};

template <class B, int C>
inline void task_direct(const B* const* w, const float* const* a, std::int64_t n, float* out, adding add) {
  constexpr int R = 4;
  for (int r0 = 0; r0 < 16; r0 += R) {
    if (add.how == adding::fma) rows_tile<B, R, C, true, true>(w + r0, a, n, out + r0 * C);
    else rows_tile<B, R, C, false, true>(w + r0, a, n, out + r0 * C);
  }
}
template <class B>
inline bool task_small(const B* const* w, const float* const* a, int nc, std::int64_t n, float* out, adding add) {
  switch (nc) {
    case 2: task_direct<B, 2>(w, a, n, out, add); return true;
    case 3: task_direct<B, 3>(w, a, n, out, add); return true;
    case 4: task_direct<B, 4>(w, a, n, out, add); return true;
    default: return false;
  }
}

// bf16 prompts of 2 columns and more by the AVX512_BF16 pair dot, where the CPU has it
// (pair_dot; 2-4 columns only where the row block meets one panel, `checked`). vdpbf16ps
// adds, per 32-bit lane, the product of the pair's high halves and then that of the low
// halves. With element j of each 32 in the high half and element j + 16 in the low half,
// lane j adds the products of elements j, j + 16, j + 32, ... in index order: the
// definition's lane j (float_row::dot). Each add is one FMA of an exact product,
// so it is the definition's add wherever fma_range::pair_exact holds (no subnormal codes,
// products multiples of 2^-126); a 256-element chunk goes this way where its 16 rows' codes
// prove it against the panel's range and every chunk before it went so too, otherwise as
// `task` adds it (by FMA where fma_range::exact proves that, else mul, add).
// The columns go into pairs (vpermw) once a panel (cpu/matmul.hpp pair_tile). The rows go
// into pairs and are ranged a chunk at a time: per task for 2-8 columns (`task`), once per
// row block for all its column blocks from 9 columns (`decode_rows`, `run_decoded`).
// AMD EPYC (Zen 5, KVM, 2 cores), bench_matmul GK_BENCH_FORMATS=bf16, gk/ref one / two
// threads, two rounds each: pairs off (GK_CPU_BF16_PAIRS=0) | pairs, rows not prefetched |
// pairs with the prefetch below: N 6 0.53-0.57 / 0.79-0.82 | 0.55-0.77 / 0.62-1.17 | 1.01 /
// 0.83-0.94; N 8 0.59 / 0.58-0.74 | 0.59-0.77 / 1.04-1.11 | 0.93-1.01 / 0.94-0.97; N 64
// 0.57-0.59 / 0.58-0.59 | 0.66-0.68 / 0.60-0.67 | 0.64-0.66 / 0.63; mul_mat_id (8 experts,
// 64 tokens) 1.30-1.32 / 1.21 | 1.06-1.12 / 0.95-1.06 | 1.46-1.48 / 1.43. Then (2026-12-07,
// two rounds alternating binaries) columns once a panel and rows once a row block, from
// rows and columns once a task: N 6 1.05-1.09 / 0.96-1.01 -> 1.13-1.22 / 1.15-1.23, N 8
// 1.06-1.09 / 1.00 -> 1.10-1.15 / 1.17-1.20, N 17 0.68 / 0.65-0.67 -> 0.93-0.94 / 0.89, N 64
// 0.66-0.67 / 0.63-0.65 -> 1.17-1.21 / 1.12-1.20, mul_mat_id 1.48-1.49 / 1.37-1.43 -> 1.80 /
// 1.73-1.78. N 17 (column blocks of 8, 8 and 1) stays below: a block of one column reads
// its rows for 4 products a load.
#if defined(__GNUC__)
#define GK_PAIR_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,fma,f16c")))
#else
#define GK_PAIR_TARGET
#endif
namespace pair_dot {
// vpermw index: word 2j of the result is word j + 16 of the source, word 2j + 1 word j
alignas(64) inline constexpr std::uint16_t interleave[32] = {16, 0, 17, 1, 18, 2, 19, 3, 20, 4, 21, 5,
                                                             22, 6, 23, 7, 24, 8, 25, 9, 26, 10, 27, 11,
                                                             28, 12, 29, 13, 30, 14, 31, 15};
inline constexpr int dwords = task_kc / 2;  // a chunk's pairs a row

// 4 rows (w[r], dwords apart) by C columns (ac[c]) of interleaved pairs, ng groups of 16
template <int C>
GK_PAIR_TARGET inline void step(const std::uint32_t* w, const std::uint32_t* const* ac, int ng, __m512* acc) {
  __m512 s[4 * C];
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) s[r * C + c] = acc[r * 8 + c];
  for (int g = 0; g < ng; ++g) {
    __m512i wv[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      wv[r] = _mm512_load_si512(w + r * dwords + 16 * g);
      pin(wv[r]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m512i av = _mm512_load_si512(ac[c] + 16 * g);
      pin(av);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
        s[r * C + c] = _mm512_dpbf16_ps(s[r * C + c], reinterpret_cast<__m512bh>(wv[r]), reinterpret_cast<__m512bh>(av));
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r * 8 + c] = s[r * C + c];
}

// A column's pairs (pair_dwords(n) 32-bit words at dst, 64-byte aligned) from its n bf16
// codes: per 32 codes, word j holds code j in its high half and code j + 16 in its low
// half (vpermw by `interleave`); codes past n are zero.
inline std::int64_t pair_dwords(std::int64_t n) { return (n + 31) / 32 * 16; }
GK_PAIR_TARGET inline void pair_column(const gk::bf16* col, std::uint32_t* dst, std::int64_t n) {
  const __m512i perm = _mm512_load_si512(interleave);
  for (std::int64_t i = 0; i < n; i += 32) {
    const auto m = static_cast<__mmask32>(n - i >= 32 ? ~0u : (1u << (n - i)) - 1);
    _mm512_store_si512(dst + i / 2, _mm512_permutexvar_epi16(perm, _mm512_maskz_loadu_epi16(m, col + i)));
  }
}

// Chunk i0 (len codes) of 16 rows w[r] interleaved into wi (row r at wi + r * dwords), the
// next chunk's lines prefetched; returns the chunk's code range.
GK_PAIR_TARGET inline std::uint32_t interleave_chunk(const gk::bf16* const* w, std::int64_t i0, int len, std::int64_t n,
                                                     std::uint32_t* wi) {
  const __m512i perm = _mm512_load_si512(interleave);
  const int ng = (len + 31) / 32;
  code_range cr;
  for (int r = 0; r < 16; ++r)
    for (int g = 0; g < ng; ++g) {
      const int left = len - 32 * g;
      const auto m = static_cast<__mmask32>(left >= 32 ? ~0u : (1u << left) - 1);
      const __m512i x = _mm512_maskz_loadu_epi16(m, w[r] + i0 + 32 * g);
      // the row's next chunk, a line a group: 16 short streams otherwise wait on memory
      if (i0 + task_kc + 32 * g < n) prefetch<0>(reinterpret_cast<const char*>(w[r] + i0 + task_kc + 32 * g));
      cr.add(x);
      _mm512_store_si512(wi + r * dwords + 16 * g, _mm512_permutexvar_epi16(perm, x));
    }
  return cr.packed();
}

// 16 rows w against nc <= 8 columns (a: widened, ap: their pairs) into out[r * nc + c],
// chunk by chunk: rows(i0, len, wi) gives chunk i0's interleaved rows (the chunk's code
// range in *wr). a_range: the panel's code range.
template <class Rows>
GK_PAIR_TARGET inline void run(Rows&& rows, const gk::bf16* const* w, const float* const* a,
                               const std::uint32_t* const* ap, int nc, std::int64_t n, float* out,
                               std::uint32_t a_range) {
  alignas(64) float wb[16 * task_kc];
  __m512 acc[16 * 8];
#pragma GCC unroll 16
  for (int j = 0; j < 16 * 8; ++j) acc[j] = _mm512_setzero_ps();
  bool pairs = true;
  for (std::int64_t i0 = 0; i0 < n; i0 += task_kc) {
    const int len = static_cast<int>(n - i0 < task_kc ? n - i0 : task_kc), ng = (len + 31) / 32;
    std::uint32_t wr;
    const std::uint32_t* wi = rows(i0, len, &wr);
    // pairs = every chunk so far went by pairs, so each running sum is a multiple of 2^-126
    // (zero or normal): vdpbf16ps reads a subnormal sum as zero, and an earlier chunk
    // added another way may have left one (test_matmul_tiling's bf16 case 6)
    pairs = pairs && fma_range::pair_exact(wr, a_range);
    if (pairs) {
      const std::uint32_t* ac[8];
      for (int c = 0; c < nc; ++c) ac[c] = ap[c] + i0 / 2;
      for (int rg = 0; rg < 4; ++rg) {
        const std::uint32_t* wg = wi + 4 * rg * dwords;
        __m512* ag = acc + 4 * rg * 8;
        int c = 0;
        for (; c + 4 <= nc; c += 4) step<4>(wg, ac + c, ng, ag + c);
        switch (nc - c) {
          case 3: step<3>(wg, ac + c, ng, ag + c); break;
          case 2: step<2>(wg, ac + c, ng, ag + c); break;
          case 1: step<1>(wg, ac + c, ng, ag + c); break;
          default: break;
        }
      }
    } else {
      const int nv = len / 16, rem = len % 16;
      for (int r = 0; r < 16; ++r) widen_chunk(w[r] + i0, nv, rem, wb + r * task_kc);
      if (fma_range::exact(wr, a_range)) task_chunk<true>(wb, a, nc, i0, nv, rem, acc);
      else task_chunk<false>(wb, a, nc, i0, nv, rem, acc);
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < nc; ++c) out[r * nc + c] = reduce_lanes16(acc[r * 8 + c]);
}

// out[r * nc + c] as task's, 16 rows, 1 <= nc <= 8, the rows interleaved a chunk at a time
GK_PAIR_TARGET inline void task(const gk::bf16* const* w, const float* const* a, const std::uint32_t* const* ap,
                                int nc, std::int64_t n, float* out, std::uint32_t a_range) {
  alignas(64) std::uint32_t wi[16 * dwords];
  run([&](std::int64_t i0, int len, std::uint32_t* wr) { *wr = interleave_chunk(w, i0, len, n, wi); return wi; }, w,
      a, ap, nc, n, out, a_range);
}

// A row block decoded once for all its column blocks (cpu/matmul.hpp decoded_tile): the 16
// row pointers (a chunk that cannot go by pairs reads its rows as they are), each chunk's
// code range, then the chunks interleaved (chunk q's row r at chunk q + r * dwords).
struct decoded_head {
  const gk::bf16* rows[16];
};
inline std::size_t ranges_bytes(std::int64_t n) { return (static_cast<std::size_t>(chunks(n)) * 4 + 63) / 64 * 64; }
inline std::size_t decoded_bytes(std::int64_t n) {
  return sizeof(decoded_head) + ranges_bytes(n) + static_cast<std::size_t>(chunks(n)) * 16 * dwords * 4;
}
GK_PAIR_TARGET inline void decode_rows(const gk::bf16* const* w, std::int64_t n, void* dst) {
  auto* head = static_cast<decoded_head*>(dst);
  auto* range = reinterpret_cast<std::uint32_t*>(head + 1);
  auto* wi = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(range) + ranges_bytes(n));
  for (int r = 0; r < 16; ++r) head->rows[r] = w[r];
  for (std::int64_t q = 0; q < chunks(n); ++q) {
    const std::int64_t i0 = q * task_kc;
    range[q] = interleave_chunk(w, i0, static_cast<int>(n - i0 < task_kc ? n - i0 : task_kc), n, wi + q * 16 * dwords);
  }
}
GK_PAIR_TARGET inline void run_decoded(const void* dec, const float* const* a, const std::uint32_t* const* ap, int nc,
                                       std::int64_t n, float* out, std::uint32_t a_range) {
  const auto* head = static_cast<const decoded_head*>(dec);
  const auto* range = reinterpret_cast<const std::uint32_t*>(head + 1);
  const auto* wi = reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const char*>(range) + ranges_bytes(n));
  run(
      [&](std::int64_t i0, int, std::uint32_t* wr) {
        *wr = range[i0 / task_kc];
        return wi + i0 / task_kc * 16 * dwords;
      },
      head->rows, a, ap, nc, n, out, a_range);
}

// Whether vdpbf16ps runs here as pair_dot assumes. A CPU with AVX512_BF16 (CPUID leaf 7,
// subleaf 1, EAX bit 5) whose instruction gives, on a set of sums that round at every
// step, (acc + p_odd) + p_even bit for bit (one rounding for the three, or the other
// order, differs: 1 + 2^-24 + 2^-24 is 1 two adds at a time and 1 + 2^-23 at once).
// Taken on CPUs other than Intel's unless GK_CPU_BF16_PAIRS=1: on an Intel Xeon (Sapphire
// Rapids class, KVM; the 29th session's /tmp microbenchmark) vdpbf16ps issued one every
// two cycles or so, 43 G products a second against FMA's 88, so pairs would not beat the
// FMA path there. GK_CPU_BF16_PAIRS=0 turns it off everywhere (benchmarks compare so).
GK_PAIR_TARGET inline bool probe() {
  alignas(64) std::uint16_t x[32], y[32];
  alignas(64) float acc[16], got[16];
  std::uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  auto f32 = [](std::uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; };
  for (int trial = 0; trial < 64; ++trial) {
    for (int i = 0; i < 32; ++i) {
      x[i] = static_cast<std::uint16_t>((next() >> 31) << 15 | (117 + next() % 20) << 7 | (next() & 127));
      y[i] = static_cast<std::uint16_t>((next() >> 31) << 15 | (117 + next() % 20) << 7 | (next() & 127));
    }
    for (int j = 0; j < 16; ++j) acc[j] = f32((next() >> 31) << 31 | (117 + next() % 20) << 23 | (next() & 0x7fffff));
    if (trial == 0) {  // the tie: 1 + 2^-24 + 2^-24
      acc[0] = 1.0f;
      x[0] = x[1] = 0x3380;  // 2^-24
      y[0] = y[1] = 0x3f80;  // 1
    }
    _mm512_store_ps(got, _mm512_dpbf16_ps(_mm512_load_ps(acc), reinterpret_cast<__m512bh>(_mm512_load_si512(x)),
                                          reinterpret_cast<__m512bh>(_mm512_load_si512(y))));
    for (int j = 0; j < 16; ++j) {
      const float hi = f32(std::uint32_t{x[2 * j + 1]} << 16) * f32(std::uint32_t{y[2 * j + 1]} << 16);
      const float lo = f32(std::uint32_t{x[2 * j]} << 16) * f32(std::uint32_t{y[2 * j]} << 16);
      const float want = (acc[j] + hi) + lo;
      if (__builtin_memcmp(&want, &got[j], 4) != 0) return false;
    }
  }
  return true;
}
inline bool available() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!avx512::available() || !__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5))) return false;
    const char* e = std::getenv("GK_CPU_BF16_PAIRS");
    if (e && e[0] == '0') return false;
    if (!(e && e[0] == '1') && cpu_is_intel()) return false;
    return probe();
  }();
  return ok;
}
}  // namespace pair_dot

// f16, 5-8 columns: chunk by chunk (task_kc) as the chunk buffer below, but each weight
// vector widened as loaded from the rows (no buffer, whose widening stores took about 20%
// of the samples), the rows' next chunk prefetched, 4 rows by 4 columns at a time (the bits
// of rows_tile: each output one lane set in index order, by FMA). AMD EPYC (Zen 5, KVM, 2
// cores), bench_matmul f16 4096 x 4096, gk/ref one / two threads, two rounds alternating
// binaries: the chunk buffer (to bc0018c) -> rows_tile over the whole row, 4 x 4 and 4 x
// (nc - 4) (bc0018c): N 6 0.63-0.69 / 0.70-0.78 -> 0.86-0.87 / 0.86-0.96, N 8 0.64-0.73 /
// 0.87-0.90 -> 0.99-1.00 / 1.02-1.04, N 64 0.72-0.73 / 0.64-0.68 -> 0.76-0.78 / 0.71-0.74;
// mul_mat_id (8 experts, 64 tokens) 1.38 / 1.24-1.26 -> 1.68-1.69 / 1.56-1.59. Then
// (2026-12-07) rows_tile -> chunks: N 6 0.85-0.93 / 0.82-1.06 -> 0.93-1.03 / 0.94-1.21, N 8
// 0.95 / 0.99-1.14 -> 1.04-1.19 / 1.10-1.44, N 64 0.75-0.78 / 0.70-0.73 -> 0.87-0.90 /
// 0.84-0.88, mul_mat_id 1.66-1.71 / 1.57-1.64 -> 1.73-1.76 / 1.62-1.70 (rows_tile streamed
// its 4 columns' floats, whole rows of them, through L1 once for each 4 rows). Measured and
// not kept: 2 rows by 5-8 columns (N 64 0.82 / 0.77-0.79), 6 rows by 4 columns for 12 of
// the 16 rows (N 64 0.87-0.89 / 0.83-0.85), rows widened to floats once per row block for
// all its column blocks (decoded_tile: N 64 0.85-0.86 / 0.81-0.83, N 17 0.76-0.79 /
// 0.73-0.74 against the chunks' 0.88-0.89 / 0.85-0.87; their floats come from L2 at twice
// the bytes). As a bound, chunks whose weights need no widening (the panel's floats read as
// rows): N 64 1.00 / 0.99-1.00, N 8 1.54-1.58 / 1.50-1.57.
template <class B>
inline void task_f16_chunks(const B* const* w, const float* const* a, int nc, std::int64_t n, float* out) {
  __m512 acc[16 * 8];
#pragma GCC unroll 16
  for (int j = 0; j < 16 * 8; ++j) acc[j] = _mm512_setzero_ps();
  for (std::int64_t i0 = 0; i0 < n; i0 += task_kc) {
    const int len = static_cast<int>(n - i0 < task_kc ? n - i0 : task_kc);
    task_chunk_rows<true>(w, a, nc, i0, len / 16, len % 16, n, acc);
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < nc; ++c) out[r * nc + c] = reduce_lanes16(acc[r * 8 + c]);
}


// out[r * nc + c] = float_row_dot(w[r], the activation column widened at a[c], n), 16 rows,
// 1 <= nc <= 8, adding as `add` says (f16 always by FMA)
template <class B>
inline void task(const B* const* w, const float* const* a, int nc, std::int64_t n, float* out, adding add) {
  if constexpr (std::is_same_v<B, gk::f16>) add.how = adding::fma;
  // bf16 by pairs where checked (2-8 columns); 2-4 columns of one panel went through
  // rows_tile, adding by mul, add, before the 35th session: AMD EPYC (Zen 5, KVM, 2 cores),
  // bench_matmul bf16 4096 x 4096, gk/ref one / two threads, three
  // rounds alternating binaries, rows_tile -> pairs: N 2 0.78-0.85 / 0.84-0.85 (one 1.21) ->
  // 0.85-0.94 / 0.93-1.00, N 3 0.85-0.93 / 0.88-0.92 -> 1.01-1.07 / 1.01-1.08, N 4 0.90-0.98 /
  // 0.93-0.95 -> 1.16-1.18 / 1.17-1.21 (N 6, by pairs either way, the same). The 4-column
  // block of a prompt over several panels (N 9, 12, 17, 20; checks_itself from 2 columns)
  // measured the same both ways and keeps the row block's range pass.
  if constexpr (std::is_same_v<B, gk::bf16>) {
    if (nc >= 2 && add.how == adding::checked && add.pairs && add.pairs[0])
      return pair_dot::task(w, a, add.pairs, nc, n, out, add.a);
  }
  if (task_small<B>(w, a, nc, n, out, add)) return;
  if constexpr (std::is_same_v<B, gk::f16>) {
    if (nc >= 5) return task_f16_chunks(w, a, nc, n, out);
  }
  alignas(64) float wb[16 * task_kc];
  __m512 acc[16 * 8];
#pragma GCC unroll 16
  for (int j = 0; j < 16 * 8; ++j) acc[j] = _mm512_setzero_ps();
  for (std::int64_t i0 = 0; i0 < n; i0 += task_kc) {
    const int len = static_cast<int>(n - i0 < task_kc ? n - i0 : task_kc), nv = len / 16, rem = len % 16;
    code_range cr;
    for (int r = 0; r < 16; ++r) {
      const B* src = w[r] + i0;
      widen_chunk(src, nv, rem, wb + r * task_kc);
      if (add.how == adding::checked) cr.add_run(src, len);  // the chunk's codes, just read: from L1
    }
    // each chunk by FMA where its own products are proved exact
    if (add.how == adding::fma || (add.how == adding::checked && fma_range::exact(cr.packed(), add.a)))
      task_chunk<true>(wb, a, nc, i0, nv, rem, acc);
    else
      task_chunk<false>(wb, a, nc, i0, nv, rem, acc);
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < nc; ++c) out[r * nc + c] = reduce_lanes16(acc[r * 8 + c]);
}

}  // namespace gk::simd::avx512_float_tile

namespace gk {

// The task interface (cpu/matmul.hpp task_tile) of f16 and bf16; f32 has none (its
// products round, and its activations need no widening).
#define GK_AVX512_FLOAT_TASK(fmt)                                                                            \
  static constexpr bool task = true;                                                                         \
  static constexpr bool ranged = std::is_same_v<formats::fmt, formats::bf16>;                                \
  static constexpr bool even_tail = std::is_same_v<formats::fmt, formats::bf16>;                             \
  static std::uint32_t widen(const formats::fmt::block* col, float* dst, std::int64_t n) {                  \
    return simd::avx512_float_tile::widen(col, dst, n);                                                     \
  }                                                                                                         \
  static std::uint32_t rows_range(const formats::fmt::block* const* w, int nr, std::int64_t n) {            \
    std::uint32_t r = simd::fma_range::empty;                                                               \
    for (int i = 0; i < nr; ++i)                                                                            \
      r = simd::fma_range::merge(r, simd::avx512_float_tile::range_of(w[i], n));                            \
    return r;                                                                                               \
  }                                                                                                         \
  static bool exact(std::uint32_t w, std::uint32_t a) {                                                     \
    return !ranged || simd::fma_range::exact(w, a);                                                         \
  }                                                                                                         \
  static void run_task(const formats::fmt::block* const* w, const float* const* a, int nc, std::int64_t n,  \
                       float* out, bool fma) {                                                               \
    using simd::avx512_float_tile::adding;                                                                  \
    simd::avx512_float_tile::task(w, a, nc, n, out, adding{fma ? adding::fma : adding::mul_add});           \
  }                                                                                                         \
  static bool checks_itself(int nc) {                                                                        \
    return ranged && nc >= 5 && simd::avx512_float_tile::pair_dot::available();                              \
  }                                                                                                         \
  static void run_task_checked(const formats::fmt::block* const* w, const float* const* a,                  \
                               const std::uint32_t* const* pairs, int nc, std::int64_t n, float* out,      \
                               std::uint32_t a_range) {                                                    \
    using simd::avx512_float_tile::adding;                                                                  \
    simd::avx512_float_tile::task(w, a, nc, n, out, adding{adding::checked, a_range, pairs});               \
  }

// bf16's pair dot (pair_dot) where the CPU runs it: each panel's columns in pairs once
// (cpu/matmul.hpp pair_tile), and for 9 columns and more each row block interleaved once for
// all its column blocks (decoded_tile) rather than once a task. AMD EPYC (Zen 5, KVM, 2
// cores), bench_matmul bf16 4096 x 4096 N 64, one / two threads, as a bound: 170 / 319-332
// GFLOP/s with rows and columns interleaved per task, 278-282 / 549 with the rows' work
// skipped, 403-405 / 799-810 with the columns' skipped too (the reference: 257-269 /
// 516-542).
#define GK_AVX512_BF16_PAIRS                                                                                   \
  static bool pairs_now() { return simd::avx512_float_tile::pair_dot::available(); }                           \
  static std::int64_t pair_dwords(std::int64_t n) { return simd::avx512_float_tile::pair_dot::pair_dwords(n); } \
  static void pair_column(const formats::bf16::block* col, std::uint32_t* dst, std::int64_t n) {               \
    simd::avx512_float_tile::pair_dot::pair_column(col, dst, n);                                               \
  }                                                                                                            \
  static constexpr bool decoded_rows_tile = true, decoded_panel = true;                                        \
  static constexpr std::int64_t decoded_rows = 16, decoded_min_n = 9;                                          \
  static bool decoded_now() { return pairs_now(); }                                                            \
  static std::size_t decoded_bytes(std::int64_t k) { return simd::avx512_float_tile::pair_dot::decoded_bytes(k); } \
  static void decode_rows(const formats::bf16::block* const* w, std::int64_t k, void* dst) {                   \
    simd::avx512_float_tile::pair_dot::decode_rows(w, k, dst);                                                 \
  }                                                                                                            \
  template <class P>                                                                                           \
  static void run_decoded_panel(const void* dec, const P& p, int nc, std::int64_t k, float* out) {             \
    simd::avx512_float_tile::pair_dot::run_decoded(dec, p.wide, p.pairs, nc, k, out, p.range);                 \
  }

#define GK_AVX512_FLOAT_TILE(fmt, path, nr, extra)                                                                    \
  template <>                                                                                                 \
  struct dot_tile<formats::fmt, simd::avx512> {                                                               \
    static constexpr bool specialised = true, decode = path == decode_path::tile;                             \
    static constexpr bool decode_on_intel = path == decode_path::tile_on_intel;                               \
    static constexpr int rows = nr, cols = 4;                                                                 \
    template <int R, int C>                                                                                   \
    static void run(const formats::fmt::block* const* w, const formats::fmt::block* const* a, std::int64_t n, \
                    float* out, const void* = nullptr, std::size_t = 0) {                                     \
      simd::avx512_float_tile::runner<formats::fmt::block>::run<R, C>(w, a, n, out);                          \
    }                                                                                                         \
    extra                                                                                                     \
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
// nr: the rows a tile takes (a column of decode goes nr rows at a time; f32's prompt tiles
// are nr x 4 too, f16's and bf16's take whole tasks, GK_AVX512_FLOAT_TASK). f16 and bf16
// take 2: each row is still its own chain of adds, and two chains of 16 lanes outrun the
// rows' arrival, from L3 as from memory, with half the streams in flight. Intel Xeon
// (Sapphire Rapids class, KVM, 2 cores), bench_matmul N 1, gk/ref, 4 -> 2 rows, two rounds
// of three binaries alternating, one / two threads: 4096 x 4096 f16 0.91-0.94 / 0.94-0.96
// -> 1.00 / 1.03-1.04, bf16 0.91-0.99 / 0.91-0.96 -> 1.07-1.11 / 1.07-1.10; from >= 1 GiB
// f16 0.89-0.91 / 0.89-0.91 -> 0.92-0.94 / 0.93-0.94, bf16 1.16-1.28 -> 1.22-1.24. f32 at 2
// rows lost its prompt (N 64, 0.98-1.05 -> 0.75-0.83) and from memory (0.97-1.03 -> 0.92-
// 0.95), so it keeps 4. Each row's prefetch carried on into the next call's row once its
// own row ends (instead of 12 KiB ahead in memory order) measured no better.
GK_AVX512_FLOAT_TILE(f32, decode_path::tile, 4, )
GK_AVX512_FLOAT_TILE(f16, decode_path::tile_on_intel, 2, GK_AVX512_FLOAT_TASK(f16))
GK_AVX512_FLOAT_TILE(bf16, decode_path::tile_on_intel, 2, GK_AVX512_FLOAT_TASK(bf16) GK_AVX512_BF16_PAIRS)

#undef GK_AVX512_FLOAT_TILE
#undef GK_AVX512_FLOAT_TASK
#undef GK_AVX512_BF16_PAIRS

}  // namespace gk

GK_EXACT_FP_END

#endif
