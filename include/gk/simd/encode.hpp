// SPDX-License-Identifier: MIT
// encode_kernel<A, T>: a row of floats encoded into activation format A (q8_0, q8_1, q8_K:
// what the matmul and flash attention encode their inputs into before the integer dots) on
// target T. The primary template forwards to T::fallback; for simd::scalar it is the
// definition, gk::encode_row<A> (the format's own encoder, block by block). A
// specialisation must write the definition's bytes for every input, NaN, Inf and
// subnormal ones included: it vectorises the max-magnitude search and the per-weight
// scale-and-round, keeps the definition's float operations (a division where it divides, a
// multiplication by the reciprocal where it multiplies, nearbyint's current-mode rounding
// or nearest_clamped's magic-number add), its NaN rules (std::max ignores a NaN, a strict
// > keeps the first of equal magnitudes), its float -> int8 conversion (the platform's
// float -> int32 conversion, then the low byte), and computes the per-block scalars
// (d, s = d * sum, 1 / iscale) with the definition's scalar expressions.
// Only n / A::block_size whole blocks are written, as encode_row does.
#pragma once

#include <cstdint>
#include <string_view>

#include "gk/formats/all.hpp"
#include "gk/simd/target.hpp"

namespace gk {

template <class A, simd::Target T>
struct encode_kernel {
  static constexpr std::string_view served_by = encode_kernel<A, typename T::fallback>::served_by;
  static void row(const float* x, typename A::block* out, std::int64_t n) {
    encode_kernel<A, typename T::fallback>::row(x, out, n);
  }
};

template <class A>
struct encode_kernel<A, simd::scalar> {
  static constexpr std::string_view served_by = simd::scalar::name;
  static void row(const float* x, typename A::block* out, std::int64_t n) { encode_row<A>(x, out, n, nullptr); }
};

}  // namespace gk

// Target specialisations; each file compiles to nothing unless its target is enabled.
#include "gk/simd/avx2/encode.hpp"
#include "gk/simd/avx512/encode.hpp"
#include "gk/simd/neon/encode.hpp"
