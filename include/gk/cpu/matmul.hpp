// SPDX-License-Identifier: MIT
// CPU matrix products: mul_mat, mul_mat_id, out_prod.
//
// mul_mat tiles the output on both axes: a tile is `tile_rows` weight rows by `tile_cols`
// activation columns of one (i2, i3) slab. Before a tile, the thread encodes its columns
// into the weight's activation format (W::dot_type: q8_0, q8_1, q8_K, or the float type)
// once, as a panel, and keeps the panels of a slab's column blocks while it works through
// the slab, since tiles are handed out a super-block of weight rows at a time, column block
// by column block (task_order). Each output element is one
// dot_kernel<W, T>::row of a weight row and a panel column, so the result does not depend
// on the tiling or on which thread took a tile: bit-identical at every thread count.
// Tiles are handed out through the node's shared counter (threads that finish early take
// more), which is safe for the same reason.
//
// The weight is read in place (whole packed blocks per row, any row stride); activations
// may be any float type with any strides; dst is packed f32 rows.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "gk/cpu/rows.hpp"
#include "gk/cpu/tiled.hpp"
#include "gk/formats/all.hpp"
#include "gk/simd/dot.hpp"
#include "gk/simd/encode.hpp"
#include "gk/simd/fma_range.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu::matmul {

// 16 weight rows x 8 columns: the 8-column panel of a 4096-wide row is 8 x 4.25 KiB of
// q8_0 (34 KiB, L1/L2-resident) and each weight row, once loaded, is dotted with all 8.
inline constexpr std::int64_t tile_rows = 16;
inline constexpr std::int64_t tile_cols = 8;
// Inside a tile of two or more columns, dots go dot_tile<W, T>::rows weight rows by
// dot_tile<W, T>::cols columns at a time (4 by 2 where the tile does not say), then
// leftover columns four, two and one at a time. A target specialises dot_tile where doing
// several dots together is faster: the avx512 32-weight formats (q4_0 ... q2_0, mxfp4,
// nvfp4, and tq1_0/tq2_0) take the whole 16 x 8 tile, one weight row per lane
// (avx512/dot_tile_legacy.hpp; q4_0 prompt, N = 64: 68 -> 285 GFLOP/s on one thread, 1.16
// of the reference's repacked path); the avx512 256-weight formats take it too, one weight
// row per lane, each block unpacked once for the panel's eight columns
// (avx512/dot_tile_kq16.hpp for q4_K/q5_K, avx512/dot_tile_iq16.hpp for q2_K/q3_K/q6_K and
// the lattice formats; iq2_xxs prompt 0.21 of the reference with row dots, 1.69-1.77 with
// the 16 x 8 tile, one thread).
template <class D>
concept shaped_tile = requires {
  { D::rows } -> std::convertible_to<int>;
  { D::cols } -> std::convertible_to<int>;
};
// A tile that one column (decode) goes through too, its rows at a time: `decode` true,
// and its run<rows, 1> takes the weight bytes to prefetch as it goes (see mul_mat).
template <class D>
concept decode_tile = requires { requires D::decode; };
// A tile that serves one column on Intel CPUs only (decode_path::tile_on_intel): q8_0's,
// q5_K's, and f16's and bf16's (avx512/dot_tile_float.hpp). Their row dots and their tiles
// give the same bits, so only speed chooses, and the two measured in opposite orders. On an
// AMD EPYC (Zen 5 share) from memory the tile ran 0.78-0.80 (q8_0) and 0.86-1.06 (q5_K) of
// the row dots. On an Intel Xeon (Emerald Rapids, a KVM share of two cores), one thread,
// 4096-wide rows (GFLOP/s at M 4096, cache-resident; GB/s from 2.3 GB of rows at M 131072),
// row dots -> tile: q8_0 25.5 -> 42.9, 6.1 -> 10.0; q5_K 37.4 -> 45.2, 5.4 -> 7.8; q6_K's
// went the other way (43.7 -> 31.6, 10.2 -> 8.3) and keeps its rows everywhere.
template <class D>
concept decode_tile_on_intel = requires { requires D::decode_on_intel; };
// A tile that may serve one column (whether it does is tile_decodes' run-time answer).
template <class D>
concept decode_tile_somewhere = decode_tile<D> || decode_tile_on_intel<D>;
// Those tiles' choice: on Intel CPUs, unless GK_CPU_DECODE_TILES=1 (the tile) or 0 (row dots)
// says otherwise for any CPU (read once; the tests run both ways).
inline bool decode_tiles_here() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("GK_CPU_DECODE_TILES");
    if (v && (v[0] == '0' || v[0] == '1') && v[1] == 0) return v[0] == '1';
    return simd::cpu_is_intel();
  }();
  return on;
}
// Whether one column goes through D: always, or where decode_tiles_here, or never.
template <class D>
bool tile_decodes() noexcept {
  if constexpr (decode_tile<D>) return true;
  else if constexpr (decode_tile_on_intel<D>) return decode_tiles_here();
  else return false;
}
// A tile that reads a group of sixteen rows stored tiled (cpu/tiled.hpp) as it lies:
// run_tiled<C>(group, columns, k, out[, next, next_bytes]).
template <class D>
concept tiled_tile = requires { requires D::tiled; };
// A tile that takes a whole task of tile_rows rows (two or more columns) from activations
// widened to f32 once per panel (avx512/dot_tile_float.hpp: f16, bf16): D::widen(col, dst,
// k) widens a column and returns its code range, D::rows_range(w, nr, k) a row block's,
// D::exact(w_range, a_range) says whether the tile may add by FMA (ranged: only bf16 asks),
// D::run_task(w, wide, nc, k, out, fma).
template <class D>
concept task_tile = requires { requires D::task; };
// A task_tile that also keeps each panel's columns in a form of its own, where
// D::pairs_now(): D::pair_dwords(k) 32-bit words a column, D::pair_column(col, dst, k)
// (avx512 bf16: pairs for vdpbf16ps).
template <class D>
concept pair_tile = task_tile<D> && requires(std::int64_t k) { D::pair_dwords(k); };
// A ranged task_tile that can also prove its products exact from the rows as it reads them,
// adding by FMA where that proves it and by mul, add where not:
// D::run_task_checked(w, wide, nc, k, out, panel_range). For a row block that meets one panel
// only, where a separate pass for the row block's range would read its rows twice.
template <class D>
concept checked_task_tile = task_tile<D> && requires { &D::run_task_checked; };
// A task_tile that takes a prompt's last nine columns (n % tile_cols == 1, n > tile_cols)
// as column blocks of 5 and 4 rather than 8 and 1 (avx512 bf16: see mul_mat's column_span).
template <class D>
concept even_tail_tile = task_tile<D> && requires { requires D::even_tail; };
// A tile that decodes a row block of tile_rows rows once (avx2/dot_tile_pairs_iq.hpp: the
// lattice formats, q3_K, tq2_0; avx2/dot_tile_wide.hpp: q8_0, q5_0, iq4_nl, iq4_xs;
// avx512/dot_tile_float.hpp: bf16 in pairs) for
// prompts of decoded_min_n columns or more: D::decoded_bytes(k) of scratch,
// D::decode_rows(w, k, dst), D::run_decoded<C>(dst, columns, k, out) (C = 1, 2, 4, 8).
template <class D>
concept decoded_tile = requires { requires D::decoded_rows_tile; };
// A decoded_tile that takes the whole panel (D::run_decoded_panel(dec, p, nc, k, out)) rather
// than column groups (avx512 bf16: its columns' pairs and its range).
template <class D>
concept decodes_panel = decoded_tile<D> && requires { requires D::decoded_panel; };
// Whether a decoded_tile decodes here (avx512 bf16: only where the CPU runs its pair dot).
template <class D>
bool decoded_now() {
  if constexpr (requires { D::decoded_now(); }) return D::decoded_now();
  else return true;
}
// A decoded_tile that decodes a group stored tiled as it lies: D::decode_tiled_rows(group,
// k, dst) (avx512/dot_tile_iq16.hpp).
template <class D>
concept decodes_tiled = requires(const void* g, std::int64_t k, void* d) { D::decode_tiled_rows(g, k, d); };
// Whether D puts a tiled group back into rows first (scratch `untiled`, tile_rows rows):
// a tile that reads plain rows only, or a decoded_tile that decodes from rows.
template <class D>
constexpr bool untiles = !tiled_tile<D> || (decoded_tile<D> && !decodes_tiled<D>);
template <class D>
struct tile_shape {
  static constexpr int rows = 4, cols = 2;
};
template <shaped_tile D>
struct tile_shape<D> {
  static constexpr int rows = D::rows, cols = D::cols;
  static_assert(rows >= 1 && cols >= 1 && cols <= tile_cols);
};

// Planted faults for the tiling test's controls (tests/cpu/test_matmul_tiling.cpp); gk
// itself only instantiates fault::none.
enum class fault { none, tile_offset, dropped_tail, panel_key_cb_only, unguarded_fma };

// Activation rows of b encoded as A blocks, or pointers straight into b when b already is
// packed rows of A.
// wide: for a task_tile, the columns widened to f32 (wide[0] null where not), range their
// code range merged; pairs: for a pair_tile, the columns' pairs (pairs[0] null where not).
template <class A>
struct panel {
  const typename A::block* col[tile_cols];
  const float* wide[tile_cols];
  const std::uint32_t* pairs[tile_cols];
  std::uint32_t range;
};

// The floats from one widened column to the next: k, rounded up to whole 64-byte lines, and
// where that is a multiple of 4 KiB (which puts every column's element i in the same L1
// set), 512 bytes more, so a chunk's lines of the eight columns spread over the sets.
// AMD EPYC (Zen 5, KVM, 2 cores), bench_matmul 4096 x 4096, gk/ref one / two threads, three
// rounds alternating binaries, k floats apart -> this stride: f16 N 6 0.96-0.99 / 0.95-0.99
// -> 0.98-1.03 / 0.99-1.01, N 8 1.14-1.18 / 1.13-1.14 -> 1.21-1.26 / 1.16-1.23, N 17
// 0.88-0.91 / 0.87-0.88 -> 0.93-0.95 / 0.89-0.92, N 64 0.89-0.91 / 0.85-0.87 -> 0.91-0.92 /
// 0.86-0.88; bf16 unchanged within the noise (N 64 1.17-1.19 / 1.07-1.23 -> 1.14-1.20 /
// 1.17-1.18).
inline std::size_t wide_stride(std::int64_t k) {
  const std::size_t s = (static_cast<std::size_t>(k) + 15) / 16 * 16;
  return s % 1024 == 0 ? s + 128 : s;
}

// The floats of a panel's widened store for a task_tile D: tile_cols columns of
// wide_stride(k) floats, then (a pair_tile) tile_cols columns of D::pair_dwords(k) words from
// a 64-byte boundary.
template <class D>
std::size_t wide_floats(std::int64_t k) {
  std::size_t f = 0;
  if constexpr (task_tile<D>) {
    f = tile_cols * wide_stride(k);
    if constexpr (pair_tile<D>) f += static_cast<std::size_t>(tile_cols * ((D::pair_dwords(k) + 15) / 16 * 16));
  }
  return f;
}

// Widens p's nc columns into store (wide_floats<D>(k) floats, 64-byte aligned) for a
// task_tile D, and forms their pairs there for a pair_tile, or marks p unwidened.
template <class D, class A>
inline void widen_panel(panel<A>& p, std::int64_t nc, std::int64_t k, float* store) {
  p.wide[0] = nullptr;
  p.pairs[0] = nullptr;
  if constexpr (task_tile<D>) {
    if (!store) return;
    std::uint32_t r = simd::fma_range::empty;
    for (std::int64_t c = 0; c < nc; ++c) {
      float* dst = store + static_cast<std::size_t>(c) * wide_stride(k);
      r = simd::fma_range::merge(r, D::widen(p.col[c], dst, k));
      p.wide[c] = dst;
    }
    p.range = r;
    if constexpr (pair_tile<D>) {
      if (D::pairs_now()) {
        auto* pairs = reinterpret_cast<std::uint32_t*>(store + tile_cols * wide_stride(k));
        const auto stride = static_cast<std::size_t>((D::pair_dwords(k) + 15) / 16 * 16);
        for (std::int64_t c = 0; c < nc; ++c) {
          std::uint32_t* dst = pairs + static_cast<std::size_t>(c) * stride;
          D::pair_column(p.col[c], dst, k);
          p.pairs[c] = dst;
        }
      }
    }
  }
}

// The bytes of a's weight rows [row0, row0 + tile_rows) (fewer at the end) of one matrix,
// from the first one's start to the last one's end.
inline std::size_t row_block_bytes(const tensor* a, std::int64_t row0) {
  const auto rows = static_cast<std::size_t>(std::min(tile_rows, a->ne[1] - row0));
  return (rows - 1) * a->nb[1] + gk::row_size(a->type, a->ne[0]);
}

template <class A>
inline bool b_is_native(const tensor* b) noexcept {
  return b->type == A::id && b->rows_contiguous();
}

// Column (i1, i2, i3) of b as A's blocks: b's own row when it already is one, else encoded
// into dst by target T's kernel (the scalar encoder's bytes on every target).
template <class A, simd::Target T>
inline const typename A::block* encode_column(const tensor* b, std::int64_t i1, std::int64_t i2, std::int64_t i3,
                                              typename A::block* dst, float* fbuf) {
  if (b_is_native<A>(b)) return reinterpret_cast<const typename A::block*>(b->at(i1, i2, i3));
  encode_kernel<A, T>::row(row_read(b, i1, i2, i3, fbuf), dst, b->ne[0]);
  return dst;
}

// Fill p with columns [c0, c0 + nc) of b at slab (i2, i3) (encode_column).
template <class A, simd::Target T>
inline void encode_panel(panel<A>& p, const tensor* b, std::int64_t c0, std::int64_t nc, std::int64_t i2,
                         std::int64_t i3, typename A::block* store, float* fbuf) {
  const std::size_t stride = gk::row_size(A::id, b->ne[0]) / sizeof(typename A::block);
  for (std::int64_t c = 0; c < nc; ++c)
    p.col[c] = encode_column<A, T>(b, c0 + c, i2, i3, store + static_cast<std::size_t>(c) * stride, fbuf);
}

// Prompt tasks go by super-blocks of weight rows: all column blocks of a slab are done
// against one super-block (superblock_bytes of weight rows, at least one row block) before
// the next starts, column block by column block, its row blocks inside, so the super-block
// stays in L2 (1 MiB a core on Zen 5) while each column block's panel is used against it.
// Row block fastest over the whole weight, as before, streams every weight row once per
// column block: at N = 64 eight passes over a 4096 x 4096 weight (64 MiB f32, 32 MiB f16)
// that no cache holds, and the float 4 x 4 tiles, 120-130 GFLOP/s on L2-resident data,
// ran the matmul at 47-90. bench_matmul, N = 64, Zen 5 share of two loaded cores, GFLOP/s
// (ratio to the reference), row block fastest -> super-blocks, three rounds alternating,
// one thread: f32 47-54 (0.81-0.90) -> 78-83 (1.38-1.40), f16 79-90 (0.56-0.63) -> 94-105
// (0.74-0.78), bf16 75-90 (0.43-0.48) -> 95-105 (0.53-0.61), q4_K 262-296 -> 291-378, q6_K
// 157-182 -> 183-250, q8_0 200-262 -> 230-281, q4_0 278-308 -> 231-313 (1.16-1.25 ->
// 1.13-1.28); two threads, once: f32 91 -> 132, f16 143 -> 181, q4_K 455 -> 508. 128-384
// KiB ran alike on a quiet machine; 256 because at 384 iq2_xxs fell from about 260 to
// 125-210 while another job shared the cores (likely its super-block, 23 x 16 rows, and
// eight q8_K panels, 388 + 299 KiB, no longer fitting what is left of L2), at 256 it did not.
inline constexpr std::size_t superblock_bytes = std::size_t{256} << 10;
// A thread comes back to each column block once per super-block, so it keeps the panels of
// all column blocks of its slab (of a group of them, as many as fit in panel_bytes of its
// scratch, which the pool keeps). Re-encoding one panel at a time instead, measured at
// N = 64 with 384 KiB super-blocks: f16 104-105 -> 71-76, q8_0 263-267 -> 185-229, q4_K
// 334-341 -> 264-270 GFLOP/s. Activations that already are packed rows of A are pointers.
inline constexpr std::size_t panel_bytes = std::size_t{4} << 20;

// The task order. A slab's tasks split into groups of `group` column blocks; within a
// group, super-blocks of `sr` row blocks; within a super-block, column block major. With
// one column block (decode) this is row block fastest, which decode's claim-ahead wants.
// Decode (one column block) on two or more threads takes the row blocks of a slab from its
// two halves in turn (task 2i: row block i, task 2i + 1: row block half + i), so two threads
// read two streams far apart rather than neighbouring 16-row blocks: from >= 1 GiB of
// weights, two threads (bench_matmul's decode table, same session, two runs each, gk/ref):
// f16 0.78-0.80 -> 0.98-0.99, q8_0 0.77-0.78 -> 1.10-1.12, q4_K 0.68-0.71 -> 0.82-0.85,
// q6_K 0.69-0.71 -> 0.98-1.02. One thread keeps the plain order.
struct task_order {
  std::int64_t n_rb, n_cb, ne2, group, sr;
  bool halves;
  struct task {
    std::int64_t rb, cb, i2, i3;
  };
  task operator()(std::int64_t t) const noexcept {
    const std::int64_t slab = t / (n_rb * n_cb);
    std::int64_t u = t - slab * n_rb * n_cb;
    const std::int64_t g = u / (n_rb * group);
    u -= g * n_rb * group;
    const std::int64_t g_cb = std::min(group, n_cb - g * group);
    const std::int64_t s = u / (sr * g_cb);
    u -= s * sr * g_cb;
    const std::int64_t s_rb = std::min(sr, n_rb - s * sr);
    std::int64_t rb = s * sr + u % s_rb;
    if (halves) rb = rb % 2 ? (n_rb + 1) / 2 + rb / 2 : rb / 2;  // a bijection of [0, n_rb)
    return {rb, g * group + u / s_rb, slab % ne2, slab / ne2};
  }
};

// Decode's claims on two or more threads: a thread takes the row blocks of its own half
// (even ith the first half, odd the second) through a counter per half, the two packed in
// the node's one counter (low and high 32 bits), then the other half's once its own is
// done. A single shared counter handed the halves out by task parity, which keeps two
// threads in a half each only while they claim in turn; decode's claim-ahead (two claims a
// task) mixed them, so each thread read both halves. From >= 1 GiB on two threads
// (bench_matmul, same session, the binary before and after alternating, two runs each,
// gk/ref): q4_0 0.96-0.97 -> 1.14-1.16, iq4_nl 0.97-1.00 -> 0.99-1.14, q4_K 0.84-0.99 ->
// 0.84-1.05, mxfp4 1.07-1.08 -> 1.05-1.11, q8_0 1.01-1.02 -> 1.06-1.12, q6_K 1.11-1.12 ->
// 1.10-1.32. Returns the task_order index, or n_tasks when none is left. Which thread
// takes a task never changes its result (a planted skip of each half's last task fails
// 601 assertions of the tiling test).
struct half_claims {
  std::atomic<std::int64_t>* counter;
  std::int64_t n_rb, n_tasks, per_slab[2], size[2];
  int home;
  bool done[2] = {false, false};
  half_claims(std::atomic<std::int64_t>* c, std::int64_t n_rb_, std::int64_t slabs, int ith)
      : counter(c), n_rb(n_rb_), n_tasks(n_rb_ * slabs), home(ith & 1) {
    per_slab[0] = (n_rb + 1) / 2;
    per_slab[1] = n_rb / 2;
    size[0] = per_slab[0] * slabs;
    size[1] = per_slab[1] * slabs;
  }
  std::int64_t next() {
    for (int i = 0; i < 2; ++i) {
      const int h = home ^ i;
      if (done[h]) continue;
      const std::int64_t old = counter->fetch_add(std::int64_t{1} << (32 * h), std::memory_order_relaxed);
      const std::int64_t j = (old >> (32 * h)) & 0xffffffff;
      if (j < size[h]) return (j / per_slab[h]) * n_rb + 2 * (j % per_slab[h]) + h;  // task_order's halves
      done[h] = true;
    }
    return n_tasks;
  }
};

// A row block stored as a tiled group (cpu/tiled.hpp): its bytes, and this thread's scratch
// of tile_rows plain rows for a target whose tile cannot read it (null group: plain rows).
struct tiled_group {
  const unsigned char* group = nullptr;
  unsigned char* scratch = nullptr;
};
static_assert(tile_rows == tiled::group_rows, "a task's row block is one tiled group");

// Columns 0 .. nc - 1 eight, four, two, one at a time through run<C>(c, o), which leaves
// tile_rows x C outputs (row j, column i at o[j * C + i]); the first nr rows go to
// ycol[c + i][row0 + j].
template <class Run>
void column_groups(std::int64_t nc, std::int64_t nr, float* const* ycol, std::int64_t row0, Run run) {
  auto part = [&]<int C>(std::int64_t c) {
    float o[tile_rows * C];
    run.template operator()<C>(c, o);
    for (std::int64_t j = 0; j < nr; ++j)
      for (int i = 0; i < C; ++i) ycol[c + i][row0 + j] = o[j * C + i];
  };
  std::int64_t c = 0;
  for (; c + 8 <= nc; c += 8) part.template operator()<8>(c);
  if (c + 4 <= nc) part.template operator()<4>(c), c += 4;
  if (c + 2 <= nc) part.template operator()<2>(c), c += 2;
  if (c < nc) part.template operator()<1>(c);
}

// A decoded_tile's row block (decoded at dec, tile_rows rows from row0) against the nc
// columns of panel p into ycol[c][row0 + j].
template <class D, class A>
void rows_block_decoded(const void* dec, const panel<A>& p, float* const* ycol, std::int64_t row0, std::int64_t nc,
                        std::int64_t k) {
  if constexpr (decodes_panel<D>) {
    float o[tile_rows * tile_cols];
    D::run_decoded_panel(dec, p, static_cast<int>(nc), k, o);
    for (std::int64_t j = 0; j < tile_rows; ++j)
      for (std::int64_t i = 0; i < nc; ++i) ycol[i][row0 + j] = o[j * nc + i];
  } else {
    column_groups(nc, tile_rows, ycol, row0,
                  [&]<int C>(std::int64_t c, float* o) { D::template run_decoded<C>(dec, p.col + c, k, o); });
  }
}

// Decodes the tile_rows weight rows from row0 of slab (i2, i3) of a into dec for the
// decoded_tile D: a tiled group through D::decode_tiled_rows where D reads groups as they
// lie, else back to rows in `untiled` first.
template <BlockFormat W, class D>
void decode_row_block(const tensor* a, std::int64_t row0, std::int64_t i2, std::int64_t i3, std::int64_t k,
                      unsigned char* untiled, void* dec) {
  const typename W::block* w[tile_rows];
  if constexpr (tiled::tiles_format(W::id)) {
    if (tiled::is_tiled(a)) {
      if constexpr (decodes_tiled<D>) {
        return D::decode_tiled_rows(a->at(row0, i2, i3), k, dec);
      } else {
        tiled::untile_group(reinterpret_cast<const unsigned char*>(a->at(row0, i2, i3)), untiled, k / W::block_size,
                            tiled::units_of<W>());
        for (std::int64_t j = 0; j < tile_rows; ++j)
          w[j] = reinterpret_cast<const typename W::block*>(untiled + static_cast<std::size_t>(j) * gk::row_size(W::id, k));
        return D::decode_rows(w, k, dec);
      }
    }
  }
  for (std::int64_t j = 0; j < tile_rows; ++j) w[j] = reinterpret_cast<const typename W::block*>(a->at(row0 + j, i2, i3));
  D::decode_rows(w, k, dec);
}

// Weight rows [row0, row0 + nr) (wrow(r): row r's blocks) against the nc columns of panel
// p into ycol[c][r]: W's tile where it serves (one column through a decode_tile, which
// prefetches next_bytes at next as it goes), then single row dots.
// A task_tile takes a whole row block of two or more columns from the panel's widened
// columns; wcache, where given, keeps the row block's code range (0: not known yet); where
// not, a checked_task_tile proves its products exact itself.
template <BlockFormat W, simd::Target T, fault F = fault::none, class Wrow>
void rows_block_plain(Wrow&& wrow, const panel<typename W::dot_type>& p, float* const* ycol, std::int64_t row0,
                      std::int64_t nr, std::int64_t nc, std::int64_t k, const char* next, std::size_t next_bytes,
                      std::uint32_t* wcache = nullptr) {
  using tile = dot_tile<W, T>;
  constexpr int tr = tile_shape<tile>::rows, tc = tile_shape<tile>::cols;
  if constexpr (task_tile<tile>) {
    if (nr == tile_rows && nc >= 2 && p.wide[0]) {
      const typename W::block* w[tile_rows];
      for (int j = 0; j < tile_rows; ++j) w[j] = wrow(row0 + j);
      float o[tile_rows * tile_cols];
      auto store = [&] {
        for (int j = 0; j < tile_rows; ++j)
          for (std::int64_t i = 0; i < nc; ++i) ycol[i][row0 + j] = o[j * nc + i];
      };
      if constexpr (checked_task_tile<tile>) {
        // also where the row block's range is cached, for a tile whose own checks pay
        // there (avx512 bf16 by pairs: tile::checks_itself)
        bool own = !wcache;
        if constexpr (requires { tile::checks_itself(0); }) own = own || tile::checks_itself(static_cast<int>(nc));
        if (own && F != fault::unguarded_fma) {
          tile::run_task_checked(w, p.wide, p.pairs, static_cast<int>(nc), k, o, p.range);
          return store();
        }
      }
      bool fma = true;
      if constexpr (tile::ranged) {
        std::uint32_t wr = wcache ? *wcache : 0;
        if (wr == 0) {
          wr = tile::rows_range(w, tile_rows, k);
          if (wcache) *wcache = wr;
        }
        fma = F == fault::unguarded_fma || tile::exact(wr, p.range);
      }
      tile::run_task(w, p.wide, static_cast<int>(nc), k, o, fma);
      return store();
    }
  }
  const bool decodes = tile_decodes<tile>();
  std::int64_t r = row0;
  // A task of nr rows runs as nr / tr tile calls: call j prefetches part j of the next
  // task's bytes, so they are asked for evenly over the task. Every call prefetching all of
  // them (as until 2026-12-03) asked for the next task's lines twice over for the 8-row
  // tiles and ran into the demand loads of the task's second half; from >= 1 GiB, one
  // thread, GB/s (a /tmp harness of gk's mul_mat, the two ways interleaved in one process,
  // best of 6 rounds): q3_K 6.42 -> 7.64, q2_K 8.29 -> 9.55; two threads q3_K 13.3 -> 15.3;
  // cache-resident, GFLOP/s, q3_K 35.3 -> 38.6, q2_K (two threads) 111 -> 121.
  const std::size_t pieces = static_cast<std::size_t>(std::max<std::int64_t>(nr / tr, 1));
  auto run = [&]<int C>(const typename W::block* const* w, std::int64_t c) {
    float o[tr * C];
    if constexpr (C == 1 && decode_tile_somewhere<tile>) {
      if (decodes && next) {
        const auto j = static_cast<std::size_t>((r - row0) / tr);
        const std::size_t lo = next_bytes * j / pieces, hi = next_bytes * (j + 1) / pieces;
        tile::template run<tr, 1>(w, p.col + c, k, o, next + lo, hi - lo);
      } else if (decodes) tile::template run<tr, 1>(w, p.col + c, k, o, nullptr, 0);
      else tile::template run<tr, 1>(w, p.col + c, k, o);
    } else {
      tile::template run<tr, C>(w, p.col + c, k, o);
    }
    for (int j = 0; j < tr; ++j)
      for (int i = 0; i < C; ++i) ycol[c + i][r + j] = o[j * C + i];
  };
  for (; (nc >= 2 || decodes) && r + tr <= row0 + nr; r += tr) {
    const typename W::block* w[tr];
    for (int j = 0; j < tr; ++j) w[j] = wrow(r + j);
    std::int64_t c = 0;
    for (; c + tc <= nc; c += tc) run.template operator()<tc>(w, c);
    if constexpr (tc > 4)
      for (; c + 4 <= nc; c += 4) run.template operator()<4>(w, c);
    if constexpr (tc > 2)
      for (; c + 2 <= nc; c += 2) run.template operator()<2>(w, c);
    for (; c < nc; ++c) run.template operator()<1>(w, c);
  }
  for (; r < row0 + nr; ++r)
    for (std::int64_t c = 0; c < nc; ++c) ycol[c][r] = dot_kernel<W, T>::row(wrow(r), p.col[c], k);
}

// rows_block_plain, or for a tiled group (tg): the whole group through a tiled_tile, every
// column count (its one column prefetching too), elsewhere converted back to rows in
// tg.scratch first.
template <BlockFormat W, simd::Target T, fault F = fault::none, class Wrow>
void rows_block(Wrow&& wrow, const panel<typename W::dot_type>& p, float* const* ycol, std::int64_t row0,
                std::int64_t nr, std::int64_t nc, std::int64_t k, const char* next, std::size_t next_bytes,
                tiled_group tg = {}, std::uint32_t* wcache = nullptr) {
  using tile = dot_tile<W, T>;
  if constexpr (tiled::tiles_format(W::id)) {
    if (tg.group) {
      if constexpr (tiled_tile<tile>) {
        static_assert(tile_shape<tile>::rows == tile_rows);
        return column_groups(nc, nr, ycol, row0, [&]<int C>(std::int64_t c, float* o) {
          if constexpr (C == 1) tile::template run_tiled<1>(tg.group, p.col + c, k, o, next, next_bytes);
          else tile::template run_tiled<C>(tg.group, p.col + c, k, o);
        });
      } else {
        const std::size_t row_bytes = gk::row_size(W::id, k);
        tiled::untile_group(tg.group, tg.scratch, k / W::block_size, tiled::units_of<W>());
        auto srow = [&](std::int64_t r) {
          return reinterpret_cast<const typename W::block*>(tg.scratch + static_cast<std::size_t>(r - row0) * row_bytes);
        };
        return rows_block_plain<W, T, F>(srow, p, ycol, row0, nr, nc, k, next, next_bytes, wcache);
      }
    }
  }
  rows_block_plain<W, T, F>(wrow, p, ycol, row0, nr, nc, k, next, next_bytes, wcache);
}

template <BlockFormat W, simd::Target T, fault F = fault::none>
void mul_mat(const exec& ex, tensor* dst) {
  using A = typename W::dot_type;
  const tensor* a = dst->src[0];
  const tensor* b = dst->src[1];
  const std::int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
  const std::int64_t ne2 = b->ne[2], ne3 = b->ne[3];
  const std::int64_t r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];
  const std::int64_t n_rb = (m + tile_rows - 1) / tile_rows;
  const std::int64_t n_cb = (n + tile_cols - 1) / tile_cols;
  const std::int64_t n_tasks = n_rb * n_cb * ne2 * ne3;

  using tile = dot_tile<W, T>;
  const std::size_t panel_size = static_cast<std::size_t>(tile_cols) * gk::row_size(A::id, k);
  // a task_tile's panels carry their columns widened too (prompts only)
  const bool widened = task_tile<tile> && n >= 2;
  const std::size_t wide_size = widened ? wide_floats<tile>(k) * sizeof(float) : 0;
  const std::int64_t group =
      b_is_native<A>(b) && !widened
          ? n_cb
          : std::clamp<std::int64_t>(static_cast<std::int64_t>(panel_bytes / (panel_size + wide_size)), 1, n_cb);
  const std::int64_t sr = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(superblock_bytes / (static_cast<std::size_t>(tile_rows) * gk::row_size(W::id, k))));
  const task_order order{n_rb, n_cb, ne2, group, sr, n_cb == 1 && ex.nth >= 2};

  // Column block cb's panel lives in slot cb % group; keys[3 * slot ..] say which (cb, i2, i3)
  // it holds (-1: none yet).
  auto* store = b_is_native<A>(b) ? nullptr
                                  : ex.scr->get<typename A::block>(0, static_cast<std::size_t>(group) * panel_size /
                                                                          sizeof(typename A::block));
  float* fbuf = ex.scr->get<float>(1, static_cast<std::size_t>(k));
  auto* panels = ex.scr->get<panel<A>>(2, static_cast<std::size_t>(group));
  auto* keys = ex.scr->get<std::int64_t>(3, 3 * static_cast<std::size_t>(group));
  std::fill(keys, keys + 3 * group, std::int64_t{-1});
  float* wide = widened ? ex.scr->get<float>(6, static_cast<std::size_t>(group) * wide_floats<tile>(k)) : nullptr;
  // a ranged task_tile's row block code ranges, by (row block, weight slab); 0: not known yet.
  // None where each row block meets one panel only (one column block, no broadcast slabs)
  // and the tile proves its products exact as it goes (checked_task_tile).
  const std::int64_t a_slabs = a->ne[2] * a->ne[3];
  std::uint32_t* wcache = nullptr;
  if constexpr (task_tile<tile>) {
    if (widened && tile::ranged && !(checked_task_tile<tile> && n_cb * r2 * r3 == 1)) {
      wcache = ex.scr->get<std::uint32_t>(7, static_cast<std::size_t>(n_rb * a_slabs));
      std::fill(wcache, wcache + n_rb * a_slabs, std::uint32_t{0});
    }
  }
  // One column (decode) goes row by row, or through a decode_tile where the tile says so.
  // Sixteen weight rows read side by side are sixteen short streams, which the hardware
  // prefetchers follow worse than the one stream of row-by-row dots (q4_K from 1 GiB, one
  // thread: 12-14 GB/s through the tile, 20-22 row by row); so decode claims each task one
  // ahead, and the tile prefetches that task's rows in address order while it dots this
  // one's. Measured on a Zen 5 share of two loaded cores (ranges of three runs, row dots
  // -> tile interleaved in one process), one thread: from 1 GiB, GB/s, q4_0 9.8-15.8 ->
  // 12.4-19.0, q4_K 12.6-20.5 -> 14.5-24.5, iq4_nl 7.1-10.8 -> 12.3-18.2, mxfp4 6.4-10.5
  // -> 10.8-16.7; cache-resident 4096 x 4096, GFLOP/s, q4_0 47-59 -> 79-108, q4_K 59-85
  // -> 113-124 (bench_matmul: q4_0 0.71-0.74 -> 1.24-1.27 of the reference, q4_K
  // 0.84-0.87 -> 1.24-1.40). q8_0's and q5_K's row dots, near the read bandwidth already,
  // stay there (from memory the tile ran 0.78-0.80 and 0.86-1.06 of them), but not on Intel
  // CPUs (decode_tile_on_intel). With one column block
  // task_order is row block fastest, and the next task's rows come from task_order too.
  // A weight stored tiled (cpu/tiled.hpp) goes by whole groups through a tiled_tile, one
  // column too, on any CPU: its codes need no unpack there. A decoded_tile untiles a group
  // before it decodes it (prompts), as does a tile that reads plain rows only.
  const bool w_tiled = tiled::is_tiled(a);
  const bool claim_ahead = (tile_decodes<tile>() || (w_tiled && tiled_tile<tile>)) && n == 1;
  unsigned char* untiled = w_tiled && untiles<tile>
                               ? ex.scr->get<unsigned char>(5, static_cast<std::size_t>(tile_rows) * gk::row_size(W::id, k))
                               : nullptr;
  half_claims halves(ex.counter, n_rb, ne2 * ne3, ex.ith);
  auto claim = [&] { return order.halves ? halves.next() : ex.counter->fetch_add(1, std::memory_order_relaxed); };

  // Column block cb's first column and column count: tile_cols each, the last fewer; an
  // even_tail_tile takes the last nine as 5 + 4 instead of 8 + 1, so no task reads its row
  // block for one column. AMD EPYC (Zen 5, KVM, 2 cores), bench_matmul 4096 x 4096, gk/ref one
  // / two threads, four rounds within one binary, 8 + 1 -> 5 + 4: bf16 N 9 0.82-0.90 /
  // 0.84-0.91 -> 0.91-0.94 / 0.87-0.92, N 17 0.89-0.95 / 0.89-0.97 -> 0.93-0.98 / 0.96-0.98;
  // f16 N 9 0.96-1.01 / 0.92-0.97 -> 0.89-0.92 / 0.83-0.91, N 17 0.90-0.97 / 0.88-0.91 ->
  // 0.91-0.95 / 0.89-0.91 (f16 does not take it; nor the quantized tiles, which lost at 5-6
  // columns in the 33rd session). Then against main's binary, three rounds: bf16 N 9
  // 0.82-0.91 / 0.83-0.86 -> 0.92-0.94 / 0.89-0.91, N 17 0.91-0.94 / 0.91-0.92 -> 0.93-0.95 /
  // 0.93-0.95. Not measured on Intel, where bf16 runs without the pair dot.
  auto column_span = [&](std::int64_t cb) -> std::pair<std::int64_t, std::int64_t> {
    if constexpr (even_tail_tile<tile>) {
      if (n > tile_cols && n % tile_cols == 1 && cb >= n_cb - 2)
        return cb == n_cb - 1 ? std::pair{(n_cb - 2) * tile_cols + 5, std::int64_t{4}}
                              : std::pair{(n_cb - 2) * tile_cols, std::int64_t{5}};
    }
    return {cb * tile_cols, std::min(tile_cols, n - cb * tile_cols)};
  };

  // One task: row block rb against column block cb of slab (i2, i3); rows_dec, where not
  // null, is the row block decoded by a decoded_tile.
  auto run_task = [&](std::int64_t rb, std::int64_t cb, std::int64_t i2, std::int64_t i3, const char* next,
                      std::size_t next_bytes, const void* rows_dec) {
    const auto [c0, ncols] = column_span(cb);
    std::int64_t nc = ncols;
    const std::int64_t row0 = rb * tile_rows + (F == fault::tile_offset && rb > 0 ? 1 : 0);
    std::int64_t nr = std::min(tile_rows, m - row0);
    if constexpr (F == fault::dropped_tail) {
      if (nr < tile_rows) --nr;
      if (nc < tile_cols) --nc;
    }
    const std::int64_t slot = cb % group;
    std::int64_t* key = keys + 3 * slot;  // cb, i2, i3
    const bool hit = F == fault::panel_key_cb_only ? key[0] == cb : (key[0] == cb && key[1] == i2 && key[2] == i3);
    panel<A>& p = panels[slot];
    if (!hit) {
      encode_panel<A, T>(p, b, c0, ncols, i2, i3,
                         store ? store + static_cast<std::size_t>(slot) * panel_size / sizeof(typename A::block)
                               : nullptr,
                         fbuf);
      widen_panel<tile>(p, ncols, k,
                        wide ? wide + static_cast<std::size_t>(slot) * wide_floats<tile>(k) : nullptr);
      key[0] = cb;
      key[1] = i2;
      key[2] = i3;
    }
    float* ycol[tile_cols];
    for (std::int64_t c = 0; c < nc; ++c) ycol[c] = reinterpret_cast<float*>(dst->at(c0 + c, i2, i3));
    if constexpr (decoded_tile<tile>) {
      if (rows_dec && nr == tile_rows) return rows_block_decoded<tile>(rows_dec, p, ycol, row0, nc, k);
    }
    auto wrow = [&](std::int64_t r) { return reinterpret_cast<const typename W::block*>(a->at(r, i2 / r2, i3 / r3)); };
    tiled_group tg{};
    if (w_tiled && row0 % tile_rows == 0 && row0 + tile_rows <= m)
      tg = {reinterpret_cast<const unsigned char*>(a->at(row0, i2 / r2, i3 / r3)), untiled};
    rows_block<W, T, F>(wrow, p, ycol, row0, nr, nc, k, next, next_bytes, tg,
                        wcache ? wcache + rb + n_rb * (i2 / r2 + a->ne[2] * (i3 / r3)) : nullptr);
  };

  // Prompts through a decoded_tile: a task is one row block against one group of column
  // blocks (row block fastest within a slab and group), its rows decoded once into this
  // thread's scratch and run against each column block in turn; the row block past the
  // last whole one goes through the tile as it is. Outputs are the same bits either way.
  if constexpr (decoded_tile<tile>) {
    static_assert(tile::decoded_rows == tile_rows);
    // (not for the control that adds by FMA unproved: a decoded_tile proves its own adds)
    if (n >= tile::decoded_min_n && decoded_now<tile>() && F != fault::unguarded_fma) {
      void* dec = ex.scr->get<unsigned char>(8, tile::decoded_bytes(k));
      const std::int64_t n_groups = (n_cb + group - 1) / group, per_slab = n_rb * n_groups;
      for (std::int64_t t = ex.counter->fetch_add(1, std::memory_order_relaxed); t < per_slab * ne2 * ne3;
           t = ex.counter->fetch_add(1, std::memory_order_relaxed)) {
        const std::int64_t slab = t / per_slab, g = t % per_slab / n_rb, rb = t % n_rb;
        const std::int64_t i2 = slab % ne2, i3 = slab / ne2, row0 = rb * tile_rows;
        const void* rows_dec = nullptr;
        if (row0 + tile_rows <= m) {
          decode_row_block<W, tile>(a, row0, i2 / r2, i3 / r3, k, untiled, dec);
          rows_dec = dec;
        }
        for (std::int64_t cb = g * group; cb < std::min(n_cb, (g + 1) * group); ++cb)
          run_task(rb, cb, i2, i3, nullptr, 0, rows_dec);
      }
      return;
    }
  }

  std::int64_t t = claim();
  while (t < n_tasks) {
    const std::int64_t t_next = claim_ahead ? claim() : n_tasks;
    const auto [rb, cb, i2, i3] = order(t);
    const char* next = nullptr;  // the next task's rows, where claimed ahead
    std::size_t next_bytes = 0;
    if (t_next < n_tasks) {
      const auto nt = order(t_next);
      next = a->at(nt.rb * tile_rows, nt.i2 / r2, nt.i3 / r3);
      next_bytes = row_block_bytes(a, nt.rb * tile_rows);
    }
    run_task(rb, cb, i2, i3, next, next_bytes, nullptr);
    t = claim_ahead ? t_next : claim();
  }
}

// mul_mat_id from more than 8 tokens (or 2, see mul_mat_id): the (token, slot) pairs
// grouped by expert, pairs in order within an expert (every thread works the same grouping
// out in its own scratch),
// then each expert's pairs run as mul_mat's columns against its weight: column blocks of
// tile_cols pairs, tasks in mul_mat's prompt order per expert (super-blocks of weight rows,
// each block's panel encoded once per thread and cached), so an expert's rows are read once
// per group of column blocks rather than once per pair. Every output is the same dot as
// one pair at a time gives (the tiles equal the row dots bit for bit). bench_matmul's
// mul_mat_id table (8 experts of 4096 x 4096, 2 a token, 64 tokens; gk/ref against the
// reference's plain path, one / two threads, pair at a time -> grouped): q4_0 1.84 / 1.56-
// 1.69 -> 3.70-3.75 / 3.41-3.45, q8_0 0.85 / 0.53 -> 2.95 / 2.74-2.77, q4_K 1.29-1.36 / 0.94-
// 0.97 -> 2.40-2.48 / 1.85-2.06, q6_K 0.80 / 0.51 -> 2.28-2.31 / 2.13, iq4_xs 0.77-0.82 /
// 0.66-0.72 -> 1.62-1.64 / 1.47-1.68, mxfp4 1.51-1.57 / 1.45-1.50 -> 3.57-3.63 / 2.94-3.43.
template <BlockFormat W, simd::Target T>
void mul_mat_id_grouped(const exec& ex, tensor* dst) {
  using A = typename W::dot_type;
  const tensor* as = dst->src[0];
  const tensor* b = dst->src[1];
  const tensor* ids = dst->src[2];
  const std::int64_t k = as->ne[0], m = as->ne[1], n_as = as->ne[2];
  const std::int64_t n_used = ids->ne[0], n_pairs = n_used * ids->ne[1];
  const std::int64_t n_rb = (m + tile_rows - 1) / tile_rows;

  // first[e] .. first[e + 1]: expert e's pairs in list; cbs[e]: its first column block
  auto* g = ex.scr->get<std::int64_t>(4, 2 * static_cast<std::size_t>(n_as + 1) + static_cast<std::size_t>(n_pairs));
  std::int64_t* first = g;
  std::int64_t* cbs = g + n_as + 1;
  std::int64_t* list = cbs + n_as + 1;
  auto expert_of = [&](std::int64_t pair) {
    std::int32_t x;
    std::memcpy(&x, ids->at(pair / n_used) + static_cast<std::size_t>(pair % n_used) * ids->nb[0], sizeof x);
    if (x < 0 || x >= n_as)
      throw error("gk: cpu: mul_mat_id: ids[" + std::to_string(pair % n_used) + ", " + std::to_string(pair / n_used) +
                  "] = " + std::to_string(x) + " is not an expert index (0.." + std::to_string(n_as - 1) + ")");
    return static_cast<std::int64_t>(x);
  };
  std::fill(first, first + n_as + 1, std::int64_t{0});
  for (std::int64_t q = 0; q < n_pairs; ++q) ++first[expert_of(q) + 1];
  for (std::int64_t e = 0; e < n_as; ++e) first[e + 1] += first[e];
  std::copy(first, first + n_as + 1, cbs);  // as cursors first
  for (std::int64_t q = 0; q < n_pairs; ++q) list[cbs[expert_of(q)]++] = q;
  cbs[0] = 0;
  for (std::int64_t e = 0; e < n_as; ++e) cbs[e + 1] = cbs[e] + (first[e + 1] - first[e] + tile_cols - 1) / tile_cols;
  const std::int64_t n_cb = cbs[n_as], n_tasks = n_cb * n_rb;

  const std::size_t stride = gk::row_size(A::id, k) / sizeof(typename A::block);
  using tile = dot_tile<W, T>;
  const std::size_t panel_size = static_cast<std::size_t>(tile_cols) * gk::row_size(A::id, k);
  const std::size_t wide_size = wide_floats<tile>(k) * sizeof(float);
  const std::int64_t group = std::clamp<std::int64_t>(static_cast<std::int64_t>(panel_bytes / (panel_size + wide_size)), 1,
                                                      std::max<std::int64_t>(n_cb, 1));
  const std::int64_t sr = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(superblock_bytes / (static_cast<std::size_t>(tile_rows) * gk::row_size(W::id, k))));
  auto* store = ex.scr->get<typename A::block>(0, static_cast<std::size_t>(group) * panel_size / sizeof(typename A::block));
  float* fbuf = ex.scr->get<float>(1, static_cast<std::size_t>(k));
  auto* panels = ex.scr->get<panel<A>>(2, static_cast<std::size_t>(group));
  auto* keys = ex.scr->get<std::int64_t>(3, static_cast<std::size_t>(group));
  std::fill(keys, keys + group, std::int64_t{-1});
  float* wide = task_tile<tile> ? ex.scr->get<float>(6, static_cast<std::size_t>(group) * wide_floats<tile>(k)) : nullptr;
  std::uint32_t* wcache = nullptr;  // as mul_mat's, by (row block, expert)
  if constexpr (task_tile<tile>) {
    if (tile::ranged) {
      wcache = ex.scr->get<std::uint32_t>(7, static_cast<std::size_t>(n_rb * n_as));
      std::fill(wcache, wcache + n_rb * n_as, std::uint32_t{0});
    }
  }
  const bool w_tiled = tiled::is_tiled(as);
  unsigned char* untiled = w_tiled && untiles<dot_tile<W, T>>
                               ? ex.scr->get<unsigned char>(5, static_cast<std::size_t>(tile_rows) * gk::row_size(W::id, k))
                               : nullptr;

  // Expert e's column block cb against row block rb (rows_dec: decoded by a decoded_tile).
  auto run_task = [&](std::int64_t e, std::int64_t rb, std::int64_t cb, const void* rows_dec) {
    const std::int64_t gcb = cbs[e] + cb, c0 = first[e] + cb * tile_cols;
    const std::int64_t nc = std::min(tile_cols, first[e + 1] - c0);
    const std::int64_t slot = gcb % group;
    panel<A>& p = panels[slot];
    float* ycol[tile_cols];
    for (std::int64_t c = 0; c < nc; ++c) {
      const std::int64_t pair = list[c0 + c], tok = pair / n_used, col = (pair % n_used) % b->ne[1];
      ycol[c] = reinterpret_cast<float*>(dst->at(pair % n_used, tok, 0));
      if (keys[slot] != gcb)
        p.col[c] = encode_column<A, T>(b, col, tok, 0,
                                       store + static_cast<std::size_t>(slot) * panel_size / sizeof(typename A::block) +
                                           static_cast<std::size_t>(c) * stride,
                                       fbuf);
    }
    if (keys[slot] != gcb)
      widen_panel<tile>(p, nc, k, wide ? wide + static_cast<std::size_t>(slot) * wide_floats<tile>(k) : nullptr);
    keys[slot] = gcb;
    const std::int64_t row0 = rb * tile_rows;
    if constexpr (decoded_tile<tile>) {
      if (rows_dec) return rows_block_decoded<tile>(rows_dec, p, ycol, row0, nc, k);
    }
    auto wrow = [&](std::int64_t r) { return reinterpret_cast<const typename W::block*>(as->at(r, e, 0)); };
    tiled_group tg{};
    if (w_tiled && row0 + tile_rows <= m) tg = {reinterpret_cast<const unsigned char*>(as->at(row0, e, 0)), untiled};
    rows_block<W, T>(wrow, p, ycol, row0, std::min(tile_rows, m - row0), nc, k, nullptr, 0, tg,
                     wcache ? wcache + rb + n_rb * e : nullptr);
  };

  // A decoded_tile: as mul_mat's prompts, a task is an expert's row block against one group
  // of its column blocks, the rows decoded once where the expert has decoded_min_n pairs or
  // more (gbs[e]: its first group, counted over the experts before it).
  if constexpr (decoded_tile<tile>) {
    if (decoded_now<tile>()) {
      void* dec = ex.scr->get<unsigned char>(8, tile::decoded_bytes(k));
      std::int64_t* gbs = ex.scr->get<std::int64_t>(9, static_cast<std::size_t>(n_as + 1));
      gbs[0] = 0;
      for (std::int64_t e = 0; e < n_as; ++e) gbs[e + 1] = gbs[e] + (cbs[e + 1] - cbs[e] + group - 1) / group;
      for (std::int64_t t = ex.counter->fetch_add(1, std::memory_order_relaxed); t < gbs[n_as] * n_rb;
           t = ex.counter->fetch_add(1, std::memory_order_relaxed)) {
        const std::int64_t e = std::upper_bound(gbs, gbs + n_as + 1, t / n_rb) - gbs - 1;
        const std::int64_t u = t - gbs[e] * n_rb, gi = u / n_rb, rb = u % n_rb, row0 = rb * tile_rows;
        const void* rows_dec = nullptr;
        if (first[e + 1] - first[e] >= tile::decoded_min_n && row0 + tile_rows <= m) {
          decode_row_block<W, tile>(as, row0, e, 0, k, untiled, dec);
          rows_dec = dec;
        }
        for (std::int64_t cb = gi * group; cb < std::min(cbs[e + 1] - cbs[e], (gi + 1) * group); ++cb)
          run_task(e, rb, cb, rows_dec);
      }
      return;
    }
  }

  for (std::int64_t t = ex.counter->fetch_add(1, std::memory_order_relaxed); t < n_tasks;
       t = ex.counter->fetch_add(1, std::memory_order_relaxed)) {
    // the expert: the last whose first column block is at or before this task's
    const std::int64_t e = std::upper_bound(cbs, cbs + n_as + 1, t / n_rb) - cbs - 1;
    const std::int64_t nb_e = cbs[e + 1] - cbs[e];
    const task_order order{n_rb, nb_e, 1, std::min(group, nb_e), sr, false};
    const auto [rb, cb, i2, i3] = order(t - cbs[e] * n_rb);
    run_task(e, rb, cb, nullptr);
  }
}

// mul_mat_id: one task per (token, slot) pair and block of weight rows; the "panel" is the
// single activation column, encoded once per pair. Grouped by expert instead
// (mul_mat_id_grouped): from 9 tokens; and from 2 for the formats whose one column goes row
// by row (no decode_tile), where a pair at a time read an expert's rows once per pair and
// grouped reads them once per column block. bench_matmul, GK_BENCH_MOE=only
// GK_BENCH_MOE_TOKENS=2,8 (8 experts of 4096 x 4096, 2 a token; gk/ref, one / two threads,
// pair at a time -> grouped, two runs): 8 tokens q8_0 1.01 / 0.67-0.70 -> 1.21-1.32 /
// 1.16-1.22, q6_K 1.02 / 0.69-0.73 -> 1.17-1.20 / 1.12-1.22, q5_K 1.21-1.22 / 0.78-0.79 ->
// 1.31-1.37 / 1.23-1.25, f16 0.70 / 0.55-0.56 -> 0.95 / 0.89; 2 tokens q8_0 1.07-1.09 /
// 0.78-0.82 -> 1.22-1.27 / 1.05-1.06. The decode-tile formats lost grouped below 9 tokens
// (no prefetch of the next rows there: q4_0 8 tokens 2.10 / 1.97-2.11 -> 1.42-1.54 / 1.51-
// 1.60, q4_K 1.54-1.56 / 1.28-1.61 -> 0.86-0.89 / 0.97-1.05) and keep the pairs.
template <BlockFormat W, simd::Target T>
void mul_mat_id(const exec& ex, tensor* dst) {
  using tile = dot_tile<W, T>;
  const tensor* ids = dst->src[2];
  const std::int64_t n_used = ids->ne[0], n_tok = ids->ne[1];
  const bool w_tiled = tiled::is_tiled(dst->src[0]);
  const bool decodes = tile_decodes<tile>() || (w_tiled && tiled_tile<tile>);
  if (n_tok > 8 || (!decodes && n_tok > 1)) return mul_mat_id_grouped<W, T>(ex, dst);
  using A = typename W::dot_type;
  const tensor* as = dst->src[0];
  const tensor* b = dst->src[1];
  const std::int64_t k = as->ne[0], m = as->ne[1], n_as = as->ne[2];
  const std::int64_t n_rb = (m + tile_rows - 1) / tile_rows;
  const std::int64_t n_tasks = n_rb * n_used * n_tok;

  auto* store = ex.scr->get<typename A::block>(0, gk::row_size(A::id, k) / sizeof(typename A::block) + 1);
  float* fbuf = ex.scr->get<float>(1, static_cast<std::size_t>(k));
  unsigned char* untiled = w_tiled && untiles<tile>
                               ? ex.scr->get<unsigned char>(5, static_cast<std::size_t>(tile_rows) * gk::row_size(W::id, k))
                               : nullptr;
  panel<A> p{};
  std::int64_t key = -1;
  constexpr int tr = tile_shape<tile>::rows;
  auto expert_of = [&](std::int64_t pair) {
    std::int32_t x;
    std::memcpy(&x, ids->at(pair / n_used) + static_cast<std::size_t>(pair % n_used) * ids->nb[0], sizeof x);
    return x;
  };
  std::int64_t t = ex.counter->fetch_add(1, std::memory_order_relaxed);
  while (t < n_tasks) {
    // as mul_mat's decode: the next task claimed ahead for the tile to prefetch its rows
    const std::int64_t t_next = decodes ? ex.counter->fetch_add(1, std::memory_order_relaxed) : n_tasks;
    const std::int64_t rb = t % n_rb;
    const std::int64_t pair = t / n_rb;
    const std::int64_t e = pair % n_used, tok = pair / n_used;
    const std::int32_t expert = expert_of(pair);
    if (expert < 0 || expert >= n_as)
      throw error("gk: cpu: mul_mat_id: ids[" + std::to_string(e) + ", " + std::to_string(tok) + "] = " +
                  std::to_string(expert) + " is not an expert index (0.." + std::to_string(n_as - 1) + ")");
    if (key != pair) {
      encode_panel<A, T>(p, b, e % b->ne[1], 1, tok, 0, store, fbuf);
      key = pair;
    }
    const std::int64_t row0 = rb * tile_rows, nr = std::min(tile_rows, m - row0);
    auto* y = reinterpret_cast<float*>(dst->at(e, tok, 0));
    auto wrow = [&](std::int64_t r) { return reinterpret_cast<const typename W::block*>(as->at(r, expert, 0)); };
    std::int64_t r = row0;
    const char* next = nullptr;  // the next task's rows, where claimed ahead
    std::size_t next_bytes = 0;
    if (decodes) {
      const std::int64_t rb_n = t_next % n_rb, expert_n = t_next < n_tasks ? expert_of(t_next / n_rb) : -1;
      if (expert_n >= 0 && expert_n < n_as) {
        next = as->at(rb_n * tile_rows, expert_n, 0);
        next_bytes = row_block_bytes(as, rb_n * tile_rows);
      }
    }
    if (w_tiled && nr == tile_rows) {  // a tiled group, as mul_mat's
      float* ycol[1] = {y};
      rows_block<W, T>(wrow, p, ycol, row0, nr, 1, k, next, next_bytes,
                       {reinterpret_cast<const unsigned char*>(as->at(row0, expert, 0)), untiled});
      r = row0 + nr;
    }
    if constexpr (decode_tile_somewhere<tile>) {
      if (decodes) {  // as mul_mat's one column; the rest row by row
        for (; r + tr <= row0 + nr; r += tr) {
          const typename W::block* w[tr];
          for (int j = 0; j < tr; ++j) w[j] = wrow(r + j);
          tile::template run<tr, 1>(w, p.col, k, y + r, next, next_bytes);
        }
      }
    }
    for (; r < row0 + nr; ++r) y[r] = dot_kernel<W, T>::row(wrow(r), p.col[0], k);
    t = decodes ? t_next : ex.counter->fetch_add(1, std::memory_order_relaxed);
  }
}

// out_prod: dst row (i1, i2, i3) = sum over j of b[i1, j, i2, i3] * a[:, j], j ascending;
// one row per thread share. a may be any decodable type (rows decoded), b any float type.
inline void out_prod(const exec& ex, tensor* dst) {
  const tensor* a = dst->src[0];
  const tensor* b = dst->src[1];
  const std::int64_t n0 = dst->ne[0], nj = a->ne[1];
  const std::int64_t r2 = dst->ne[2] / a->ne[2], r3 = dst->ne[3] / a->ne[3];
  float* abuf = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  const std::int64_t nrows = dst->nrows();
  for_rows(dst->ne, ex.begin(nrows), ex.end(nrows), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    auto* y = reinterpret_cast<float*>(dst->at(i1, i2, i3));
    std::fill(y, y + n0, 0.0f);
    for (std::int64_t j = 0; j < nj; ++j) {
      const float bj = load_f32(b->type, b->at(j, i2, i3) + static_cast<std::size_t>(i1) * b->nb[0]);
      const float* x = row_read(a, j, i2 / r2, i3 / r3, abuf);
      for (std::int64_t i = 0; i < n0; ++i) y[i] += x[i] * bj;
    }
  });
}

// ---- weight formats registered at run time (gk::register_format, cpu/compute.hpp) ----
// The kernels above instantiated for W in the registering translation unit, on its target,
// and found by type id. gk's own formats never reach the table: compute() dispatches them
// at compile time and looks here only when that finds nothing.
struct user_kernels {
  void (*mul_mat)(const exec&, tensor*);
  void (*mul_mat_id)(const exec&, tensor*);
};

namespace detail {
template <BlockFormat W, simd::Target T>
inline constexpr user_kernels user_kernels_of{&matmul::mul_mat<W, T>, &matmul::mul_mat_id<W, T>};
inline std::atomic<const user_kernels*> user_kernel_table[user_type_max];
}  // namespace detail

inline const user_kernels* find_user_kernels(gk::type t) noexcept {
  if (!is_user_type(t)) return nullptr;
  return detail::user_kernel_table[static_cast<int>(t) - user_type_first].load(std::memory_order_acquire);
}

// The first registration of an id wins: a second one for another format or target throws.
template <BlockFormat W, simd::Target T>
void register_kernels() {
  static_assert(is_user_type(W::id), "register_kernels: only formats with a user id are registered");
  const user_kernels* expected = nullptr;
  auto& slot = detail::user_kernel_table[static_cast<int>(W::id) - user_type_first];
  if (!slot.compare_exchange_strong(expected, &detail::user_kernels_of<W, T>, std::memory_order_acq_rel) &&
      expected != &detail::user_kernels_of<W, T>)
    throw error("gk: cpu: register_format " + std::string(gk::name(W::id)) +
                ": the id already has matmul kernels of another format or target");
}

inline bool dst_ok(const tensor* d) noexcept { return d->type == type::f32 && d->nb[0] == sizeof(float); }

inline bool weight_ok(const tensor* a) noexcept {
  return a->type != type::q8_K && (gk::formats::visit(a->type, [](auto) {}) || find_user_kernels(a->type)) &&
         a->rows_contiguous();
}

inline bool float_type(gk::type t) noexcept {
  return t == type::f32 || t == type::f16 || t == type::bf16;
}

inline bool supports(const tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  if (!a || !b || !dst_ok(node)) return false;
  switch (node->op) {
    case op::mul_mat:
      return weight_ok(a) && (float_type(b->type) || b->type == a->type);
    case op::mul_mat_id:
      return weight_ok(a) && float_type(b->type) && node->src[2] && node->src[2]->type == type::i32;
    case op::out_prod:
      return (float_type(a->type) || gk::formats::visit(a->type, [](auto) {}) || user_codec(a->type)) &&
             a->type != type::q8_K && float_type(b->type);
    default:
      return false;
  }
}

inline void compute(const exec& ex, tensor* node) {
  if (node->op == op::out_prod) return out_prod(ex, node);
  const bool ok = formats::visit(node->src[0]->type, [&]<class W>(std::type_identity<W>) {
    if constexpr (W::id == type::q8_K) {
      throw error("gk: cpu: q8_K is an activation format, not a weight format");
    } else if (node->op == op::mul_mat) {
      mul_mat<W, simd::native>(ex, node);
    } else {
      mul_mat_id<W, simd::native>(ex, node);
    }
  });
  if (ok) return;
  if (const user_kernels* k = find_user_kernels(node->src[0]->type))
    return node->op == op::mul_mat ? k->mul_mat(ex, node) : k->mul_mat_id(ex, node);
  throw error("gk: cpu: no matmul for weight type " + type_label(node->src[0]->type));
}

}  // namespace gk::cpu::matmul
