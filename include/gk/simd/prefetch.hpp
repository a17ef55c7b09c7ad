// SPDX-License-Identifier: MIT
// Software prefetch for the x86 tiles: prefetch<Level> and `ahead`, the weight bytes a
// one-column tile prefetches as it goes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gk::simd {

// A prefetch into L1 (T0) or L2 (T1) that the compiler keeps. GCC 12 deleted _mm_prefetch
// calls where ipa-modref took a function that only prefetches for one without effects:
// the one-column tile's prefetches were in some builds of it and not in others (found in
// a benchmark of the tile alone, where no prefetch instruction was left in the binary).
template <int Level>
inline void prefetch(const void* p) {
  static_assert(Level == 0 || Level == 1);
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (Level == 0) asm volatile("prefetcht0 %0" ::"m"(*static_cast<const char*>(p)));
  else asm volatile("prefetcht1 %0" ::"m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, Level == 0 ? 3 : 2);
#endif
}

// The weight bytes a one-column tile prefetches as it goes, [p, p + bytes): `step` of them,
// in address order, per weight block of its own rows (see cpu/matmul.hpp for why), into L2
// (T1): see avx512/dot_tile_legacy.hpp for the measurements.
struct ahead {
  const char* p = nullptr;
  std::size_t bytes = 0, step = 0;
  ahead() = default;
  ahead(const void* next, std::size_t next_bytes, std::int64_t blocks)
      : p(blocks > 0 ? static_cast<const char*>(next) : nullptr), bytes(next_bytes),
        step(blocks > 0 ? (next_bytes + static_cast<std::size_t>(blocks) - 1) / static_cast<std::size_t>(blocks) : 0) {}
  // Part i of `parts` equal parts of the bytes, at the same pace per block: a task run as
  // `parts` tile calls one after another gives call i part i, so the next task's bytes are
  // asked for evenly over the whole task (see cpu/matmul.hpp, rows_block_plain).
  ahead part(std::size_t i, std::size_t parts) const {
    ahead h = *this;
    if (!p) return h;
    const std::size_t lo = bytes * i / parts, hi = bytes * (i + 1) / parts;
    h.p = p + lo;
    h.bytes = hi - lo;
    h.step = (step + parts - 1) / parts;
    return h;
  }
  void block(std::int64_t i) const {
    if (!p) return;
    const std::size_t lo = static_cast<std::size_t>(i) * step, hi = lo + step < bytes ? lo + step : bytes;
    for (std::size_t o = lo & ~std::size_t{63}; o < hi; o += 64) prefetch<1>(p + o);
  }
};

}  // namespace gk::simd
