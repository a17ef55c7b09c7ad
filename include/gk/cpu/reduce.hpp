// SPDX-License-Identifier: MIT
// CPU kernels: the reduce family (sum, sum_rows, mean, argmax, count_equal, argsort,
// top_k). A row is always reduced by one thread, in an order fixed by the row length
// alone, so results do not depend on the thread count.
//
// Sums accumulate in double over 8 independent lanes (element i goes to lane i % 8; the
// lanes are added pairwise at the end of the row) and round to the result type once. That
// is as accurate as the reference's sequential double sum for f32 (both within half an
// ulp of the true sum but for rare double-rounding cases) and more accurate than its f32
// sum for f16/bf16 rows; the 8 lanes let the compiler keep 8 adds in flight.
//
// Sorting is std::stable_sort over indices with a total order: NaN after every number in
// both directions, equal values (and -0 against +0) in index order. The reference uses
// std::sort, whose order of equal values is unspecified.
//
// Scratch slots: 0 source row, 1 second source row, 4 index buffer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "gk/core/exact_fp.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/tensor.hpp"

GK_EXACT_FP_BEGIN

namespace gk::cpu::reduce {

inline bool is_float(gk::type t) noexcept { return t == type::f32 || t == type::f16 || t == type::bf16; }

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  if (!a) return false;
  switch (node->op) {
    case op::sum: case op::sum_rows: return is_float(a->type) && is_float(node->type);
    case op::mean: return is_float(a->type) && node->type == type::f32;
    case op::argmax: case op::argsort: case op::top_k: return is_float(a->type) && node->type == type::i32;
    case op::count_equal:
      return node->src[1] && a->type == type::i32 && node->src[1]->type == type::i32 && node->type == type::i64;
    default: return false;
  }
}

namespace detail {

inline constexpr int sum_lanes = 8;

// The sum of x[0..n) in double: 8 lanes, then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
inline double sum_row(const float* x, std::int64_t n) {
  double l[sum_lanes] = {};
  std::int64_t i = 0;
  for (; i + sum_lanes <= n; i += sum_lanes)
    for (int j = 0; j < sum_lanes; ++j) l[j] += static_cast<double>(x[i + j]);
  for (int j = 0; i < n; ++i, ++j) l[j] += static_cast<double>(x[i]);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

inline void write_i32(tensor* t, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3, std::int32_t v) {
  std::memcpy(t->at(i1, i2, i3) + static_cast<std::size_t>(i0) * t->nb[0], &v, 4);
}

// Whole-tensor sum. One thread: the result is one number, and a split across threads
// would need a second barrier inside the node to combine the parts.
inline void sum(const exec& ex, tensor* node) {
  if (ex.ith != 0) return;
  const tensor* a = node->src[0];
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
  double total = 0.0;
  for (std::int64_t i3 = 0; i3 < a->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < a->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < a->ne[1]; ++i1) total += sum_row(row_read(a, i1, i2, i3, buf), a->ne[0]);
  store_f32(node->type, static_cast<char*>(node->data), static_cast<float>(total));
}

// sum_rows and mean: one row per output element, split by rows.
inline void row_sums(const exec& ex, tensor* node, bool mean) {
  const tensor* a = node->src[0];
  if (node->ne[0] != 1 || node->ne[1] != a->ne[1] || node->ne[2] != a->ne[2] || node->ne[3] != a->ne[3])
    throw error("gk: cpu: " + std::string(name(node->op)) + ": result " + describe(node) + " does not match " +
                describe(a));
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
  const std::int64_t nr = a->nrows();
  for_rows(a->ne, ex.begin(nr), ex.end(nr), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    float s = static_cast<float>(sum_row(row_read(a, i1, i2, i3, buf), a->ne[0]));
    if (mean) s /= static_cast<float>(a->ne[0]);
    store_f32(node->type, node->at(i1, i2, i3), s);
  });
}

// The reference's rule: a running max m = (m > x ? m : x) and the index of the last x equal
// to it, so ties go to the last index; a NaN breaks the run (m becomes NaN, then the next
// element), so the result after a NaN is the last maximum of what follows it.
inline void argmax(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  if (a->ne[2] != 1 || a->ne[3] != 1 || node->ne[0] != a->ne[1])
    throw error("gk: cpu: argmax: result " + describe(node) + " does not match " + describe(a));
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
  const std::int64_t nr = a->ne[1];
  for (std::int64_t i1 = ex.begin(nr); i1 < ex.end(nr); ++i1) {
    const float* x = row_read(a, i1, 0, 0, buf);
    float m = -INFINITY;
    std::int32_t idx = 0;
    for (std::int64_t i = 0; i < a->ne[0]; ++i) {
      m = m > x[i] ? m : x[i];
      if (m == x[i]) idx = static_cast<std::int32_t>(i);
    }
    write_i32(node, i1, 0, 0, 0, idx);
  }
}

// One thread: a single count (integer, so any order would give the same number).
inline void count_equal(const exec& ex, tensor* node) {
  if (ex.ith != 0) return;
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  if (!a->same_shape(*b)) throw error("gk: cpu: count_equal: " + describe(a) + " and " + describe(b) + " differ in shape");
  std::int64_t count = 0;
  for (std::int64_t i3 = 0; i3 < a->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < a->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < a->ne[1]; ++i1) {
        const char* pa = a->at(i1, i2, i3);
        const char* pb = b->at(i1, i2, i3);
        for (std::int64_t i0 = 0; i0 < a->ne[0]; ++i0) {
          std::int32_t va, vb;
          std::memcpy(&va, pa + static_cast<std::size_t>(i0) * a->nb[0], 4);
          std::memcpy(&vb, pb + static_cast<std::size_t>(i0) * b->nb[0], 4);
          count += va == vb;
        }
      }
  std::memcpy(node->data, &count, 8);
}

// x[i] before x[j] in the order asked for; NaN after every number either way.
struct before {
  const float* x;
  bool desc;
  bool operator()(std::int32_t i, std::int32_t j) const {
    const float a = x[i], b = x[j];
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return !na && nb;
    return desc ? a > b : a < b;
  }
};

// argsort (k = ne0, stable) and top_k (k = node->ne[0], largest first, ties by index).
inline void sort_rows(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const bool topk = node->op == op::top_k;
  const std::int64_t n = a->ne[0], k = node->ne[0];
  if (node->ne[1] != a->ne[1] || node->ne[2] != a->ne[2] || node->ne[3] != a->ne[3] || k > n || (!topk && k != n))
    throw error("gk: cpu: " + std::string(name(node->op)) + ": result " + describe(node) + " does not match " +
                describe(a));
  const bool desc = topk || static_cast<sort_order>(node->param_i32(0)) == sort_order::desc;
  float* buf = ex.scr->get<float>(0, static_cast<std::size_t>(n));
  auto* idx = ex.scr->get<std::int32_t>(4, static_cast<std::size_t>(n));
  const std::int64_t nr = a->nrows();
  for_rows(a->ne, ex.begin(nr), ex.end(nr), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* x = row_read(a, i1, i2, i3, buf);
    for (std::int64_t i = 0; i < n; ++i) idx[i] = static_cast<std::int32_t>(i);
    const before cmp{x, desc};
    if (topk) {
      // partial_sort is not stable: break ties by index to make the order total
      std::partial_sort(idx, idx + k, idx + n, [&](std::int32_t i, std::int32_t j) {
        return cmp(i, j) || (!cmp(j, i) && i < j);
      });
    } else {
      std::stable_sort(idx, idx + n, cmp);
    }
    for (std::int64_t i = 0; i < k; ++i) write_i32(node, i, i1, i2, i3, idx[i]);
  });
}

}  // namespace detail

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node))
    throw error("gk: cpu: no reduce kernel for " + std::string(name(node->op)) + " -> " + describe(node) +
                (node->src[0] ? ", src0 " + describe(node->src[0]) : std::string()));
  switch (node->op) {
    case op::sum: return detail::sum(ex, node);
    case op::sum_rows: return detail::row_sums(ex, node, false);
    case op::mean: return detail::row_sums(ex, node, true);
    case op::argmax: return detail::argmax(ex, node);
    case op::count_equal: return detail::count_equal(ex, node);
    case op::argsort: case op::top_k: return detail::sort_rows(ex, node);
    default: throw error("gk: cpu: op " + std::string(name(node->op)) + " is not in the reduce family");
  }
}

}  // namespace gk::cpu::reduce

GK_EXACT_FP_END
