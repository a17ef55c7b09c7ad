// SPDX-License-Identifier: MIT
// exp and silu rows, gk beside libm, same inputs, same run, one thread: 4096-wide rows
// (a transformer's hidden or FFN row), 256 of them per pass, inputs in [-10, 10]; best time
// of a 0.3 s budget per side; Gelem/s and the ratio gk / libm. Built with -march=native,
// gk runs exp_row<simd::native> and silu_row<simd::native>; the baseline is a loop over
// std::exp(float) (glibc expf), and x / (1 + expf(-x)) as the reference's silu writes it.
// Reports, never fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "best_of.hpp"
#include "gk/simd/math.hpp"

namespace {

using gk_bench::best_seconds;

volatile float sink;

template <class Gk, class Ref>
void bench(const char* name, Gk gk_row, Ref ref_one) {
  constexpr int rows = 256, n = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  std::vector<float> x(static_cast<std::size_t>(rows) * n), y(x.size());
  for (auto& v : x) v = u(rng);
  const double t_gk = best_seconds([&] {
    for (int r = 0; r < rows; ++r) gk_row(x.data() + static_cast<std::size_t>(r) * n, y.data() + static_cast<std::size_t>(r) * n, n);
    sink = y[y.size() / 2];
  });
  const double t_ref = best_seconds([&] {
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = ref_one(x[i]);
    sink = y[y.size() / 2];
  });
  const double elems = static_cast<double>(x.size());
  std::printf("%-5s gk %7.3f Gelem/s   libm %7.3f Gelem/s   gk/libm %5.2fx\n", name, elems / t_gk * 1e-9,
              elems / t_ref * 1e-9, t_ref / t_gk);
}

}  // namespace

int main() {
  std::printf("target %s, 1 thread, rows of 4096, best of 0.3 s\n", std::string(gk::simd::native::name).c_str());
  bench("exp", gk::simd::exp_row<gk::simd::native>, [](float v) { return std::exp(v); });
  bench("silu", gk::simd::silu_row<gk::simd::native>, [](float v) { return v / (1.0f + std::exp(-v)); });
}
