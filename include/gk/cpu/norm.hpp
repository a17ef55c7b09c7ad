// SPDX-License-Identifier: MIT
// CPU kernels for the norm family: norm, rms_norm, l2_norm (one row at a time) and
// group_norm (one (group, i3) block of rows at a time). f32 in and out, any strides.
//
// Sums run sequentially in double over float terms, the order depending only on the row
// length. For rms_norm, l2_norm and group_norm that is the reference's own order and
// rounding, so those three give its bits (on packed rows). The reference's norm sums its
// squared deviations in 16-lane float chunks (AVX-512) before adding them in double, and
// on strided rows sums in float; gk keeps the one sequential double sum everywhere, so
// norm differs from it by about an ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "gk/core/exact_fp.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/tensor.hpp"

GK_EXACT_FP_BEGIN

namespace gk::cpu::norm {

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  return a && a->type == type::f32 && node->type == type::f32 && a->same_shape(*node);
}

namespace detail {

// sum of float squares, in double: the reference's rms_norm / l2_norm accumulation
inline double sum_squares(const float* x, std::int64_t n) noexcept {
  double s = 0.0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
  return s;
}

inline void norm_rows(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const std::int64_t n = a->ne[0];
  const float eps = node->param_f32(0);
  float* in_buf = ex.scr->get<float>(0, static_cast<std::size_t>(n));
  row_writer w(node, ex.scr->get<float>(1, static_cast<std::size_t>(n)));
  for_rows(a->ne, ex.begin(a->nrows()), ex.end(a->nrows()), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* x = row_read(a, i1, i2, i3, in_buf);
    float* y = w.begin(i1, i2, i3);  // may alias x (in place): each element is read before it is written
    switch (node->op) {
      case op::norm: {
        double s = 0.0;
        for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
        const float mean = static_cast<float>(s) / static_cast<float>(n);
        double s2 = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float v = x[i] - mean;
          s2 += static_cast<double>(v * v);
        }
        const float variance = static_cast<float>(s2 / static_cast<double>(n));
        const float scale = 1.0f / std::sqrt(variance + eps);
        for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * scale;
        break;
      }
      case op::rms_norm: {
        const float mean = static_cast<float>(sum_squares(x, n) / static_cast<double>(n));
        const float scale = 1.0f / std::sqrt(mean + eps);
        for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
        break;
      }
      default: {  // l2_norm: the length is rounded to float before the square root, as the reference does
        const float len = std::sqrt(static_cast<float>(sum_squares(x, n)));
        const float scale = 1.0f / std::fmax(len, eps);
        for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
        break;
      }
    }
    w.commit();
  });
}

// Work unit: one group of channels (a range of i2) at one i3. Three passes over its
// rows: the sum, the sum of squared deviations, then the write.
inline void group_norm(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const std::int64_t n0 = a->ne[0], n1 = a->ne[1], n2 = a->ne[2], n3 = a->ne[3];
  const std::int64_t n_groups = node->param_i32(0);
  const float eps = node->param_f32(1);
  const std::int64_t per_group = (n2 + n_groups - 1) / n_groups;
  float* in_buf = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  row_writer w(node, ex.scr->get<float>(1, static_cast<std::size_t>(n0)));
  const std::int64_t units = n_groups * n3;
  for (std::int64_t u = ex.begin(units); u < ex.end(units); ++u) {
    const std::int64_t g = u % n_groups, i3 = u / n_groups;
    const std::int64_t c0 = g * per_group, c1 = std::min(c0 + per_group, n2);
    if (c0 >= c1) continue;  // more groups than channels: this group is empty
    const double count = static_cast<double>(n0 * n1 * (c1 - c0));
    double s = 0.0;
    for (std::int64_t i2 = c0; i2 < c1; ++i2)
      for (std::int64_t i1 = 0; i1 < n1; ++i1) {
        const float* x = row_read(a, i1, i2, i3, in_buf);
        double sr = 0.0;
        for (std::int64_t i = 0; i < n0; ++i) sr += static_cast<double>(x[i]);
        s += sr;
      }
    const float mean = static_cast<float>(s / count);
    double s2 = 0.0;
    for (std::int64_t i2 = c0; i2 < c1; ++i2)
      for (std::int64_t i1 = 0; i1 < n1; ++i1) {
        const float* x = row_read(a, i1, i2, i3, in_buf);
        double sr = 0.0;
        for (std::int64_t i = 0; i < n0; ++i) {
          const float v = x[i] - mean;
          sr += static_cast<double>(v * v);
        }
        s2 += sr;
      }
    const float variance = static_cast<float>(s2 / count);
    const float scale = 1.0f / std::sqrt(variance + eps);
    for (std::int64_t i2 = c0; i2 < c1; ++i2)
      for (std::int64_t i1 = 0; i1 < n1; ++i1) {
        const float* x = row_read(a, i1, i2, i3, in_buf);
        float* y = w.begin(i1, i2, i3);
        for (std::int64_t i = 0; i < n0; ++i) y[i] = (x[i] - mean) * scale;
        w.commit();
      }
  }
}

}  // namespace detail

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node))
    throw error("gk: cpu: " + std::string(name(node->op)) + " takes f32 rows of one shape; got " + describe(node) +
                " from " + describe(node->src[0]));
  if (node->op == op::group_norm) return detail::group_norm(ex, node);
  detail::norm_rows(ex, node);
}

}  // namespace gk::cpu::norm

GK_EXACT_FP_END
