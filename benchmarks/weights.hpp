// SPDX-License-Identifier: MIT
// The weight bytes the mul_mat benchmarks give both libraries: 64 rows of k weights
// (normal, sigma 0.05) encoded by gk, tiled to `rows` rows. Speed does not depend on the
// values, and encoding thousands of rows of the slow formats would take minutes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "gk/formats/all.hpp"

namespace gk_bench {

inline std::vector<unsigned char> weight_bytes(gk::type t, std::int64_t k, std::int64_t rows) {
  const std::size_t rb = gk::row_size(t, k);
  std::vector<unsigned char> out(rb * static_cast<std::size_t>(rows));
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 0.05f);
  std::vector<float> x(static_cast<std::size_t>(k));
  const std::int64_t distinct = std::min<std::int64_t>(64, rows);
  for (std::int64_t r = 0; r < distinct; ++r) {
    for (auto& v : x) v = g(rng);
    gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
      gk::encode_row<W>(x.data(), reinterpret_cast<typename W::block*>(out.data() + rb * static_cast<std::size_t>(r)),
                        k, nullptr);
    });
  }
  for (std::int64_t r = distinct; r < rows; ++r)
    std::memcpy(out.data() + rb * static_cast<std::size_t>(r), out.data() + rb * static_cast<std::size_t>(r % distinct),
                rb);
  return out;
}

}  // namespace gk_bench
