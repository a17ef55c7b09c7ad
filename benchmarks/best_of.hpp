// SPDX-License-Identifier: MIT
// The one timing rule every benchmark uses: the best time of f over a time budget (0.3 s
// by default), so both sides of a comparison get the same chance on a noisy machine.
#pragma once

#include <algorithm>
#include <chrono>

namespace gk_bench {

template <class F>
double best_seconds(F&& f, double budget = 0.3) {
  using clock_type = std::chrono::steady_clock;
  double best = 1e30;
  const auto start = clock_type::now();
  do {
    const auto t0 = clock_type::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count());
  } while (std::chrono::duration<double>(clock_type::now() - start).count() < budget);
  return best;
}

}  // namespace gk_bench
