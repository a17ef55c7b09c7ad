// SPDX-License-Identifier: MIT
// The independent liveness check the allocator and scheduler tests share: given each
// planned slot's life [from, to] in execution steps, count the pairs of slots in one
// memory that share bytes while both are alive. A slot taken over in place (the later
// one starts exactly where the earlier one ends, at the same offset, and the caller's
// in_place(early, late) says the later step reads the earlier tensor) is not a conflict.
#pragma once

#include <cstddef>
#include <vector>

#include "gk/alloc.hpp"

namespace gk_test {

struct slot_life {
  const gk::tensor* t;
  int from, to;  // first and last step that needs the bytes (from -1: before the first step)
  gk::alloc_plan::slot s;
};

template <class InPlace>
int count_conflicts(const std::vector<slot_life>& lives, InPlace in_place) {
  int conflicts = 0;
  for (std::size_t a = 0; a < lives.size(); ++a)
    for (std::size_t b = a + 1; b < lives.size(); ++b) {
      const auto& x = lives[a];
      const auto& y = lives[b];
      if (x.s.memory != y.s.memory || x.s.offset + x.s.size <= y.s.offset || y.s.offset + y.s.size <= x.s.offset)
        continue;
      const auto& early = x.from <= y.from ? x : y;
      const auto& late = x.from <= y.from ? y : x;
      const bool taken_over = late.from == early.to && early.s.offset == late.s.offset && in_place(early, late);
      if (early.to >= late.from && !taken_over) ++conflicts;
    }
  return conflicts;
}

}  // namespace gk_test
