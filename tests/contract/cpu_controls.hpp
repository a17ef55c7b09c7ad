// SPDX-License-Identifier: MIT
// The planted CPU controls: real kernels, each wrong in exactly the way one gate exists to
// catch (a row max by fmax drops a NaN; atomic adds in a racing order; a sum kept in its
// input; a tail that loses its last element; a dot summed in half precision). A run where
// any of them passes its gate fails.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "gk/core/narrow.hpp"
#include "specs.hpp"

namespace gk_contract {

inline control_kernels cpu_controls() {
  control_kernels k;
  k.row_max_fmax = [](const std::vector<void*>& in, void* out, const dims& d) {
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out);
    for (std::int64_t r = 0; r < d[1]; ++r) {
      float m = -INFINITY;
      for (std::int64_t i = 0; i < d[0]; ++i) m = std::fmax(m, x[r * d[0] + i]);
      y[r] = m;
    }
  };
  // four threads race fetch_adds into one std::atomic<float> per row, each walking its share
  // of a permutation that changes every run: the order of the adds is never the same twice
  k.row_sum_atomic = [](const std::vector<void*>& in, void* out, const dims& d) {
    static unsigned run = 0;
    const float* x = static_cast<const float*>(in[0]);
    std::vector<std::atomic<float>> acc(static_cast<std::size_t>(d[1]));
    for (auto& a : acc) a.store(0.0f);
    std::vector<std::int64_t> order(static_cast<std::size_t>(d[0] * d[1]));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(++run));
    std::vector<std::thread> th;
    for (int t = 0; t < 4; ++t)
      th.emplace_back([&, t] {
        for (std::size_t i = static_cast<std::size_t>(t); i < order.size(); i += 4)
          acc[static_cast<std::size_t>(order[i] / d[0])].fetch_add(x[order[i]]);
      });
    for (auto& t : th) t.join();
    for (std::int64_t r = 0; r < d[1]; ++r) static_cast<float*>(out)[r] = acc[static_cast<std::size_t>(r)].load();
  };
  // the sum accumulates in element 0 of its input row
  k.row_sum_inplace = [](const std::vector<void*>& in, void* out, const dims& d) {
    float* x = static_cast<float*>(in[0]);
    for (std::int64_t r = 0; r < d[1]; ++r) {
      float* row = x + r * d[0];
      for (std::int64_t i = 1; i < d[0]; ++i) row[0] += row[i];
      static_cast<float*>(out)[r] = row[0];
    }
  };
  // tiles of 32; a partial last tile loses its last element
  k.row_sum_tail_drop = [](const std::vector<void*>& in, void* out, const dims& d) {
    const float* x = static_cast<const float*>(in[0]);
    const std::int64_t n = d[0], end = n % 32 == 0 ? n : n - 1;
    for (std::int64_t r = 0; r < d[1]; ++r) {
      float s = 0.0f;
      for (std::int64_t i = 0; i < end; ++i) s += x[r * n + i];
      static_cast<float*>(out)[r] = s;
    }
  };
  // a dot whose products and running sum are rounded to f16
  k.dot_half = [](const std::vector<void*>& in, void* out, const dims& d) {
    const float* w = static_cast<const float*>(in[0]);
    const float* x = static_cast<const float*>(in[1]);
    auto h = [](float v) { return gk::f16_to_f32(gk::f32_to_f16(v)); };
    for (std::int64_t m = 0; m < d[1]; ++m) {
      float acc = 0.0f;
      for (std::int64_t i = 0; i < d[0]; ++i) acc = h(acc + h(w[m * d[0] + i] * x[i]));
      static_cast<float*>(out)[m] = acc;
    }
  };
  return k;
}

}  // namespace gk_contract
