// SPDX-License-Identifier: MIT
// dot_kernel<W, T>: the row dot of weight format W with its activation format on target T.
// The primary template forwards to T::fallback; for simd::scalar it is the definition,
// gk::dot_row<W>: the format's row definition where it has one (RowDotted: the float
// formats' fixed lanes, formats::float_row::dot), otherwise blocks summed in order, in
// float. A specialisation must return the definition's bits: it may vectorise the exact
// integer part of each block, or put the float formats' lanes in registers, but keeps the
// definition's float operations and their order.
#pragma once

#include <cstdint>

#include "gk/formats/all.hpp"
#include "gk/simd/target.hpp"

namespace gk {

template <BlockFormat W, simd::Target T>
struct dot_kernel {
  static constexpr std::string_view served_by = dot_kernel<W, typename T::fallback>::served_by;
  static float row(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
    return dot_kernel<W, typename T::fallback>::row(w, a, n);
  }
};

template <BlockFormat W>
struct dot_kernel<W, simd::scalar> {
  static constexpr std::string_view served_by = simd::scalar::name;
  static float row(const typename W::block* w, const typename W::dot_type::block* a, std::int64_t n) {
    return dot_row<W>(w, a, n);
  }
};

// How a target's tile serves one column (decode; cpu/matmul.hpp): row dots instead, the
// tile, or the tile on Intel CPUs and row dots elsewhere (the two measured in opposite
// orders there). A tile says it with `decode` (tile) or `decode_on_intel`.
enum class decode_path { rows, tile, tile_on_intel };

// R weight rows by C activation columns at once: out[r * C + c] is exactly
// dot_kernel<W, T>::row(w[r], a[c], n). The primary template is that loop; a target
// specialises it where doing several dots together is faster (the matmul's tiles call
// it), and must keep every dot's bits.
template <BlockFormat W, simd::Target T>
struct dot_tile {
  static constexpr bool specialised = false;
  template <int R, int C>
  static void run(const typename W::block* const* w, const typename W::dot_type::block* const* a, std::int64_t n,
                  float* out) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * C + c] = dot_kernel<W, T>::row(w[r], a[c], n);
  }
};

}  // namespace gk

// Target specialisations; each file compiles to nothing unless its target is enabled.
#include "gk/simd/avx2/dot.hpp"
#include "gk/simd/avx2/dot_float.hpp"
#include "gk/simd/avx2/dot_iq.hpp"
#include "gk/simd/avx2/dot_kquants.hpp"
#include "gk/simd/avx2/dot_legacy.hpp"
#include "gk/simd/avx512/dot_float.hpp"
#include "gk/simd/avx512/dot.hpp"
#include "gk/simd/neon/dot.hpp"
#include "gk/simd/neon/dot_float.hpp"
#include "gk/simd/neon/dot_iq.hpp"
#include "gk/simd/neon/dot_iq4.hpp"
#include "gk/simd/neon/dot_kquants.hpp"
#include "gk/simd/neon/dot_low.hpp"
#include "gk/simd/avx512/dot_tile_float.hpp"
#include "gk/simd/avx512/dot_tile_iq16.hpp"
#include "gk/simd/avx512/dot_tile_kq16.hpp"
#include "gk/simd/avx512/dot_tile_legacy.hpp"
#include "gk/simd/avx2/dot_tile_float.hpp"
#include "gk/simd/avx2/dot_tile_pairs.hpp"
#include "gk/simd/avx2/dot_tile_pairs_iq.hpp"
#include "gk/simd/avx2/dot_tile_tiled.hpp"
