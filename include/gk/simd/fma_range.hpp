// SPDX-License-Identifier: MIT
// When a 16-bit float row (bf16) may be dotted by FMA and keep the definition's bits.
// A product of two bf16 values has at most 16 significant bits, so it is exact in float
// unless it falls below 2^-126 or reaches 2^128; the float tiles (avx512/ and
// avx2/dot_tile_float.hpp) bound every product of a row block and a panel from the codes'
// exponent fields and add by FMA only where this proves the products exact.
//
// A range is packed (lo << 16 | hi): lo the least of (magnitude code - 1) over the codes (a
// zero's wraps to 0xffff and drops out; a subnormal's is below 128), hi the greatest
// magnitude code. Never 0, which callers use for "not known yet"; 0xffff0000 is the range
// of nothing.
#pragma once

#include <cstdint>

namespace gk::simd::fma_range {

inline constexpr std::uint32_t empty = 0xffff0000u;

inline std::uint32_t merge(std::uint32_t x, std::uint32_t y) {
  const std::uint32_t lo = (x >> 16) < (y >> 16) ? (x >> 16) : (y >> 16);
  const std::uint32_t hi = (x & 0xffff) > (y & 0xffff) ? (x & 0xffff) : (y & 0xffff);
  return lo << 16 | hi;
}

// The range of n lanes' partial ranges: l the lanes' least (magnitude - 1), h their greatest
// magnitude (the vector code_range of each float tile, stored).
inline std::uint32_t of_lanes(const std::uint16_t* l, const std::uint16_t* h, int n) {
  std::uint32_t a = 0xffff, b = 0;
  for (int i = 0; i < n; ++i) {
    a = l[i] < a ? l[i] : a;
    b = h[i] > b ? h[i] : b;
  }
  return a << 16 | b;
}

// Whether every product of a value under range w and one under range a is exact in float.
// A normal code with exponent field e has magnitude in [2^(e - 127), 2^(e - 126)); the
// field of (magnitude - 1) is e or e - 1, so lo >> 7 never exceeds the least nonzero
// value's field (a subnormal's is 0, which fails). Products >= 2^-126 need the fields to sum
// to at least 128; products < 2^128 need the greatest fields to sum to at most 380. Infinite
// or NaN codes (field 255) may pass: their products are infinite or NaN by mul, add and by
// FMA alike.
inline bool exact(std::uint32_t w, std::uint32_t a) {
  return (w >> 23) + (a >> 23) >= 128 && ((w & 0xffff) >> 7) + ((a & 0xffff) >> 7) <= 380;
}

// Whether adding every product of a value under range w and one under range a by the
// AVX512_BF16 pair dot (vdpbf16ps: per lane acc + p_odd, then + p_even, each one FMA
// rounded to nearest even, subnormal inputs read as zero and subnormal results flushed to
// zero) gives exactly the definition's adds. Stronger than exact: no subnormal code on
// either side (lo's field at least 1), and every product a multiple of 2^-126 (a bf16
// value with field e is an integer times 2^(e - 134), so the fields must sum to at least
// 142), which keeps every running sum a multiple of 2^-126 too: zero or normal, never
// flushed. Products < 2^128 as in exact.
inline bool pair_exact(std::uint32_t w, std::uint32_t a) {
  return (w >> 23) >= 1 && (a >> 23) >= 1 && (w >> 23) + (a >> 23) >= 142 &&
         ((w & 0xffff) >> 7) + ((a & 0xffff) >> 7) <= 380;
}

}  // namespace gk::simd::fma_range
