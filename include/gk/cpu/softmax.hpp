// SPDX-License-Identifier: MIT
// CPU kernels for soft_max (with mask, scale, ALiBi and sinks) and diag_mask_inf/zero.
// One row per work unit. f32 rows; the soft_max mask may be f32 or f16.
//
// soft_max row: w = x*scale, then w += slope*mask (one fused multiply-add),
// m = max(w, sink), e = exp(w - m) by
// gk::simd::exp_row<native> (1 ulp, vectorised; the reference calls its own expf
// approximation), sum = sequential double sum of e (+ exp(sink - m)), y = e * (float)(1/sum).
// The exponentials are where gk and the reference differ: a few ulp of each output.
//
// A row that is -inf everywhere (fully masked, no sink) has max -inf, so w - max is NaN
// and the row comes out NaN: the reference does the same, and gk keeps it rather than
// invent a value (a caller that can fully mask a row should add a sink or check).
// With a sink the max is finite and such a row is all zeros.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "gk/core/exact_fp.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/simd/math.hpp"
#include "gk/tensor.hpp"

GK_EXACT_FP_BEGIN

namespace gk::cpu::softmax {

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  if (!a || a->type != type::f32 || node->type != type::f32 || !a->same_shape(*node)) return false;
  if (node->op != op::soft_max) return true;
  const tensor* mask = node->src[1];
  const tensor* sinks = node->src[2];
  if (mask && mask->type != type::f32 && mask->type != type::f16) return false;
  if (sinks && sinks->type != type::f32) return false;
  return true;
}

// ALiBi slope of head h among n_head heads, for max_bias > 0 (else 1): heads below the
// largest power of two n_log2 <= n_head take m0^(h+1), the rest the odd powers of m1.
// powf as the reference has it, so the slopes are its bits.
struct alibi {
  float m0 = 1, m1 = 1;
  std::uint32_t n_log2 = 1;
  bool on = false;
  alibi(float max_bias, std::int64_t n_head) {
    on = max_bias > 0.0f;
    const auto nh = static_cast<std::uint32_t>(n_head);
    n_log2 = nh ? 1u << static_cast<std::uint32_t>(std::floor(std::log2(static_cast<double>(nh)))) : 1u;
    m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_log2));
    m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_log2));
  }
  float slope(std::uint32_t h) const noexcept {
    if (!on) return 1.0f;
    return h < n_log2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n_log2) + 1));
  }
};

namespace detail {

inline void soft_max(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* mask = node->src[1];
  const tensor* sinks = node->src[2];
  const std::int64_t n = a->ne[0];
  const float scale = node->param_f32(0);
  const float max_bias = node->param_f32(1);
  const alibi al(max_bias, a->ne[2]);
  float* in_buf = ex.scr->get<float>(0, static_cast<std::size_t>(n));
  float* wv = ex.scr->get<float>(1, static_cast<std::size_t>(n));
  float* mask_buf = ex.scr->get<float>(2, static_cast<std::size_t>(n));
  row_writer w(node, ex.scr->get<float>(3, static_cast<std::size_t>(n)));
  for_rows(a->ne, ex.begin(a->nrows()), ex.end(a->nrows()), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* x = row_read(a, i1, i2, i3, in_buf);
    for (std::int64_t i = 0; i < n; ++i) wv[i] = x[i] * scale;
    if (mask) {
      const float slope = al.slope(static_cast<std::uint32_t>(i2));
      const float* m = row_read(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3], mask_buf);
      for (std::int64_t i = 0; i < n; ++i) wv[i] = std::fma(slope, m[i], wv[i]);
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t i = 0; i < n; ++i) mx = wv[i] > mx ? wv[i] : mx;
    float sink = 0.0f;
    if (sinks) {
      sink = load_f32(sinks->type, static_cast<const char*>(sinks->data) + static_cast<std::size_t>(i2) * sinks->nb[0]);
      mx = sink > mx ? sink : mx;
    }
    for (std::int64_t i = 0; i < n; ++i) wv[i] -= mx;
    float* y = w.begin(i1, i2, i3);  // may be x's storage (in place); x is not read again
    simd::exp_row<simd::native>(wv, y, n);
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(y[i]);
    if (sinks) sum += static_cast<double>(simd::exp(sink - mx));
    const float inv = static_cast<float>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
    w.commit();
  });
}

// diag_mask: row i1 keeps elements i0 <= n_past + i1 and sets the rest to `value`.
inline void diag_mask(const exec& ex, tensor* node, float value) {
  const tensor* a = node->src[0];
  const std::int64_t n = a->ne[0];
  const std::int64_t n_past = node->param_i32(0);
  float* in_buf = ex.scr->get<float>(0, static_cast<std::size_t>(n));
  row_writer w(node, ex.scr->get<float>(1, static_cast<std::size_t>(n)));
  for_rows(a->ne, ex.begin(a->nrows()), ex.end(a->nrows()), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* x = row_read(a, i1, i2, i3, in_buf);
    float* y = w.begin(i1, i2, i3);
    for (std::int64_t i = 0; i < n; ++i) y[i] = i > n_past + i1 ? value : x[i];
    w.commit();
  });
}

}  // namespace detail

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node))
    throw error("gk: cpu: " + std::string(name(node->op)) + " takes f32 rows (mask f32 or f16, sinks f32); got " +
                describe(node) + " from " + describe(node->src[0]));
  switch (node->op) {
    case op::soft_max: return detail::soft_max(ex, node);
    case op::diag_mask_inf: return detail::diag_mask(ex, node, -std::numeric_limits<float>::infinity());
    case op::diag_mask_zero: return detail::diag_mask(ex, node, 0.0f);
    default: throw error("gk: cpu: softmax family has no op " + std::string(name(node->op)));
  }
}

}  // namespace gk::cpu::softmax

GK_EXACT_FP_END
