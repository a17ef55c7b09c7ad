// SPDX-License-Identifier: MIT
// CPU kernels: the elementwise family. Every op here maps source rows to one destination
// row, so work splits by destination row (ex.begin/end) and each element's arithmetic is
// the same whoever computes it: results are bit-identical at any thread count. Rows come
// in through row_read (f16/bf16 widened to f32, strided rows gathered) and go out through
// row_writer (rounded once to the destination type), so one f32 body serves f32, f16 and
// bf16 tensors, and permuted or viewed sources need no copy.
//
// Transcendentals use gk's own row functions (simd/math.hpp: exp, tanh, erf, silu, gelu,
// 1-3 ulp, the same bits on every target) where the reference uses libm or, for the
// tanh and quick GELUs, a table of f16 results indexed by the f16-rounded input. So gk's
// gelu and gelu_quick are more accurate than the reference's, by the table's ~2^-11
// relative error; tests state each tolerance against that.
//
// Scratch slots: 0 first source row, 1 second source row, 2 destination row, 3 temporary.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "gk/core/exact_fp.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/simd/math.hpp"
#include "gk/tensor.hpp"

GK_EXACT_FP_BEGIN

namespace gk::cpu::elementwise {

using simd_target = simd::native;

inline bool is_float(gk::type t) noexcept { return t == type::f32 || t == type::f16 || t == type::bf16; }

// ---- row functions: y[0..n) = f(x[0..n)); x and y may be the same buffer ----

namespace rowfn {

inline constexpr float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
inline constexpr float gelu_coef_a = 0.044715f;
inline constexpr float gelu_quick_coef = -1.702f;

// GELU, tanh form: x/2 (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))). Beyond |x| >= 10 the
// tanh is +-1 to f32 precision; the reference returns exactly x and 0 there, and so does
// this (0.5 x (1 + 1) = x; 0.5 x (1 - 1) = 0).
inline void gelu_tanh(const float* x, float* y, std::int64_t n, float* tmp) {
  for (std::int64_t i = 0; i < n; ++i) tmp[i] = sqrt_2_over_pi * x[i] * (1.0f + gelu_coef_a * x[i] * x[i]);
  simd::tanh_row<simd_target>(tmp, tmp, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + tmp[i]);
}

// x sigmoid(1.702 x) = x / (1 + exp(-1.702 x)).
inline void gelu_quick(const float* x, float* y, std::int64_t n, float* tmp) {
  for (std::int64_t i = 0; i < n; ++i) tmp[i] = gelu_quick_coef * x[i];
  simd::exp_row<simd_target>(tmp, tmp, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + tmp[i]);
}

// 1 / (1 + exp(-x)).
inline void sigmoid(const float* x, float* y, std::int64_t n, float* tmp) {
  for (std::int64_t i = 0; i < n; ++i) tmp[i] = -x[i];
  simd::exp_row<simd_target>(tmp, tmp, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + tmp[i]);
}

// log(1 + e^x), x itself above 20 (as the reference; there log1p(e^x) - x < 2^-28).
// log1p keeps the small results for x << 0 accurate where log(1 + e^x) rounds to 0.
inline void softplus(const float* x, float* y, std::int64_t n, float* tmp) {
  simd::exp_row<simd_target>(x, tmp, n);
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log1p(tmp[i]);
}

inline float xielu(float x, float alpha_n, float alpha_p, float beta, float eps) {
  if (x > 0.0f) return alpha_p * x * x + beta * x;
  return (std::expm1(std::fmin(x, eps)) - x) * alpha_n + beta * x;  // fmin: NaN x gives eps, as the reference
}

template <class F>
inline void map(const float* x, float* y, std::int64_t n, F f) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// One unary_op over a row. p: the node's op_params (xielu reads four floats).
inline void unary(unary_op u, const float* x, float* y, std::int64_t n, float* tmp, const tensor* node) {
  switch (u) {
    case unary_op::abs: return map(x, y, n, [](float v) { return std::fabs(v); });
    case unary_op::sgn: return map(x, y, n, [](float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); });
    case unary_op::neg: return map(x, y, n, [](float v) { return -v; });
    case unary_op::step: return map(x, y, n, [](float v) { return v > 0.0f ? 1.0f : 0.0f; });
    case unary_op::tanh: return simd::tanh_row<simd_target>(x, y, n);
    case unary_op::elu: return map(x, y, n, [](float v) { return v > 0.0f ? v : std::expm1(v); });
    case unary_op::relu: return map(x, y, n, [](float v) { return v > 0.0f ? v : 0.0f; });
    case unary_op::sigmoid: return sigmoid(x, y, n, tmp);
    case unary_op::gelu: return gelu_tanh(x, y, n, tmp);
    case unary_op::gelu_quick: return gelu_quick(x, y, n, tmp);
    case unary_op::silu: return simd::silu_row<simd_target>(x, y, n);
    case unary_op::hardswish:
      return map(x, y, n, [](float v) { return v * std::fmin(1.0f, std::fmax(0.0f, (v + 3.0f) / 6.0f)); });
    case unary_op::hardsigmoid:
      return map(x, y, n, [](float v) { return std::fmin(1.0f, std::fmax(0.0f, (v + 3.0f) / 6.0f)); });
    case unary_op::exp: return simd::exp_row<simd_target>(x, y, n);
    // expm1 itself, not exp(x) - 1 (the reference's form, which loses every digit near 0).
    case unary_op::expm1: return map(x, y, n, [](float v) { return std::expm1(v); });
    case unary_op::softplus: return softplus(x, y, n, tmp);
    case unary_op::gelu_erf: return simd::gelu_row<simd_target>(x, y, n);
    case unary_op::xielu: {
      const float an = node->param_f32(1), ap = node->param_f32(2), beta = node->param_f32(3),
                  eps = node->param_f32(4);
      return map(x, y, n, [=](float v) { return xielu(v, an, ap, beta, eps); });
    }
    case unary_op::floor: return map(x, y, n, [](float v) { return std::floor(v); });
    case unary_op::ceil: return map(x, y, n, [](float v) { return std::ceil(v); });
    case unary_op::round: return map(x, y, n, [](float v) { return std::round(v); });  // halves away from 0
    case unary_op::trunc: return map(x, y, n, [](float v) { return std::trunc(v); });
    default: throw error("gk: cpu: unary op " + std::to_string(static_cast<int>(u)) + " has no kernel");
  }
}

// act(x) * g for one glu_op.
inline void glu(const tensor* node, glu_op g, const float* x, const float* gate, float* y, std::int64_t n,
                float* tmp) {
  switch (g) {
    case glu_op::reglu:
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] * gate[i] : 0.0f;
      return;
    case glu_op::geglu: gelu_tanh(x, tmp, n, y); break;
    case glu_op::swiglu: simd::silu_row<simd_target>(x, tmp, n); break;
    case glu_op::geglu_erf: simd::gelu_row<simd_target>(x, tmp, n); break;
    case glu_op::geglu_quick: gelu_quick(x, tmp, n, y); break;
    case glu_op::swiglu_oai: {
      // min(x, limit) sigmoid(alpha min(x, limit)) (clamp(g, -limit, limit) + 1)
      const float alpha = node->param_f32(2), limit = node->param_f32(3);
      for (std::int64_t i = 0; i < n; ++i) tmp[i] = -alpha * std::min(x[i], limit);
      simd::exp_row<simd_target>(tmp, tmp, n);
      for (std::int64_t i = 0; i < n; ++i) {
        const float xc = std::min(x[i], limit);
        const float gc = std::clamp(gate[i], -limit, limit);
        y[i] = xc / (1.0f + tmp[i]) * (gc + 1.0f);
      }
      return;
    }
    case glu_op::swiglu_clamp: {
      const float limit = node->param_f32(3);
      for (std::int64_t i = 0; i < n; ++i) tmp[i] = std::min(x[i], limit);
      simd::silu_row<simd_target>(tmp, tmp, n);
      for (std::int64_t i = 0; i < n; ++i) y[i] = tmp[i] * std::clamp(gate[i], -limit, limit);
      return;
    }
    default: throw error("gk: cpu: glu op " + std::to_string(static_cast<int>(g)) + " has no kernel");
  }
  for (std::int64_t i = 0; i < n; ++i) y[i] = tmp[i] * gate[i];
}

}  // namespace rowfn

// ---- what is implemented ----

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const gk::type d = node->type;
  switch (node->op) {
    case op::add: case op::sub: case op::mul: case op::div:
      // the reference's CPU pairs: all one float type, or f16/bf16 a with f32 b (dst a's or f32)
      if (!a || !b || !is_float(a->type)) return false;
      if (a->type == type::f32) return b->type == type::f32 && d == type::f32;
      return (b->type == a->type && d == a->type) || (b->type == type::f32 && (d == a->type || d == type::f32));
    case op::add1:
      return a && b && is_float(a->type) && d == a->type && (b->type == a->type || b->type == type::f32);
    case op::acc:
      return a && b && a->type == type::f32 && b->type == type::f32 && d == type::f32;
    case op::add_id:
      return a && b && node->src[2] && a->type == type::f32 && b->type == type::f32 && d == type::f32 &&
             node->src[2]->type == type::i32;
    case op::sqr: case op::sqrt: case op::log: case op::sin: case op::cos: case op::unary: case op::clamp:
    case op::leaky_relu: case op::scale:
      if (node->op == op::unary &&
          (node->op_params[0] < 0 || node->op_params[0] >= static_cast<int>(unary_op::count)))
        return false;
      return a && is_float(a->type) && is_float(d);
    case op::glu:
      if (node->op_params[0] < 0 || node->op_params[0] >= static_cast<int>(glu_op::count)) return false;
      return a && is_float(a->type) && d == a->type && (!b || b->type == a->type);
    case op::fill: case op::tri: case op::cumsum:
      return a && is_float(a->type) && is_float(d);
    case op::arange: return d == type::f32;
    default: return false;
  }
}

// ---- kernels ----

namespace detail {

// Rows [r0, r1) of node, each computed as f(y, i1, i2, i3) into a destination row.
template <class F>
inline void each_dst_row(const exec& ex, tensor* node, F&& f) {
  const std::int64_t nr = node->nrows();
  row_writer w(node, ex.scr->get<float>(2, static_cast<std::size_t>(node->ne[0])));
  for_rows(node->ne, ex.begin(nr), ex.end(nr), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    float* y = w.begin(i1, i2, i3);
    f(y, i1, i2, i3);
    w.commit();
  });
}

// y = f(row of src0) for nodes shaped like their source.
template <class F>
inline void map_rows(const exec& ex, tensor* node, F&& f) {
  const tensor* a = node->src[0];
  const auto n = static_cast<std::size_t>(a->ne[0]);
  float* xa = ex.scr->get<float>(0, n);
  float* tmp = ex.scr->get<float>(3, n);
  each_dst_row(ex, node, [&](float* y, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    f(row_read(a, i1, i2, i3, xa), y, a->ne[0], tmp);
  });
}

template <class Op>
inline void binary(const exec& ex, tensor* node, Op o) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const std::int64_t n0 = node->ne[0], nb0 = b->ne[0];
  float* xa = ex.scr->get<float>(0, static_cast<std::size_t>(n0));
  float* xb = ex.scr->get<float>(1, static_cast<std::size_t>(nb0));
  each_dst_row(ex, node, [&](float* y, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* x = row_read(a, i1, i2, i3, xa);
    const float* g = row_read(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3], xb);
    // b's row repeats along the row: n0 is a whole number of nb0-long pieces
    for (std::int64_t k = 0; k < n0; k += nb0)
      for (std::int64_t i = 0; i < nb0; ++i) y[k + i] = o(x[k + i], g[i]);
  });
}

inline void check_same_shape(const tensor* node, const tensor* a) {
  if (!node->same_shape(*a))
    throw error("gk: cpu: " + std::string(name(node->op)) + ": result " + describe(node) + " and source " +
                describe(a) + " differ in shape");
}

// dst = a, then b added into the window (nb1, nb2, nb3, offset) of it. Every thread owns
// the destination rows ex.begin..end of the contiguous result; it copies them, then adds
// the part of each b row that falls inside them, in b's row order. So each element is
// written by one thread, in one order, at any thread count (the reference copies on one
// thread and meets at a barrier instead).
inline void acc(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  if (!node->is_contiguous() || !a->is_contiguous())
    throw error("gk: cpu: acc: a and the result must be contiguous; result " + describe(node));
  const std::size_t nb1 = static_cast<std::uint32_t>(node->param_i32(0));
  const std::size_t nb2 = static_cast<std::uint32_t>(node->param_i32(1));
  const std::size_t nb3 = static_cast<std::uint32_t>(node->param_i32(2));
  const std::size_t offset = static_cast<std::uint32_t>(node->param_i32(3));
  const std::int64_t nr = node->nrows(), row = node->ne[0];
  const std::int64_t e0 = ex.begin(nr) * row, e1 = ex.end(nr) * row;  // element range this thread owns
  auto* y = static_cast<float*>(node->data);
  if (node->data != a->data) std::memcpy(y + e0, static_cast<const float*>(a->data) + e0, static_cast<std::size_t>(e1 - e0) * 4);
  float* xb = ex.scr->get<float>(1, static_cast<std::size_t>(b->ne[0]));
  for (std::int64_t i3 = 0; i3 < b->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < b->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < b->ne[1]; ++i1) {
        const std::size_t byte = offset + static_cast<std::size_t>(i1) * nb1 + static_cast<std::size_t>(i2) * nb2 +
                                 static_cast<std::size_t>(i3) * nb3;
        if (byte % 4) throw error("gk: cpu: acc: window offset/strides are not multiples of 4 bytes");
        const auto start = static_cast<std::int64_t>(byte / 4);
        const std::int64_t lo = std::max(start, e0), hi = std::min(start + b->ne[0], e1);
        if (lo >= hi) continue;
        const float* x = row_read(b, i1, i2, i3, xb);
        for (std::int64_t e = lo; e < hi; ++e) y[e] = y[e] + x[e - start];
      }
}

inline void add_id(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const tensor* ids = node->src[2];
  float* xa = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
  float* xb = ex.scr->get<float>(1, static_cast<std::size_t>(b->ne[0]));
  each_dst_row(ex, node, [&](float* y, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    std::int32_t id;
    std::memcpy(&id, static_cast<const char*>(ids->data) + i1 * static_cast<std::int64_t>(ids->nb[0]) +
                         i2 * static_cast<std::int64_t>(ids->nb[1]), 4);
    if (id < 0 || id >= b->ne[1])
      throw error("gk: cpu: add_id: ids[" + std::to_string(i1) + ", " + std::to_string(i2) + "] = " +
                  std::to_string(id) + " is outside b's " + std::to_string(b->ne[1]) + " rows");
    const float* x = row_read(a, i1, i2, i3, xa);
    const float* g = row_read(b, id, 0, 0, xb);
    for (std::int64_t i = 0; i < node->ne[0]; ++i) y[i] = x[i] + g[i];
  });
}

inline void glu(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const auto g = static_cast<glu_op>(node->param_i32(0));
  const bool swapped = node->param_i32(1) != 0;
  const std::int64_t nc = node->ne[0];
  if (a->ne[0] < (b ? nc : 2 * nc) || node->nrows() != a->nrows())
    throw error("gk: cpu: glu: result " + describe(node) + " does not fit source " + describe(a));
  float* xa = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
  float* xb = ex.scr->get<float>(1, static_cast<std::size_t>(nc));
  float* tmp = ex.scr->get<float>(3, static_cast<std::size_t>(nc));
  each_dst_row(ex, node, [&](float* y, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    const float* ra = row_read(a, i1, i2, i3, xa);
    const float* x = ra;
    const float* gate;
    if (b) {
      gate = row_read(b, i1, i2, i3, xb);
    } else {
      x = ra + (swapped ? nc : 0);
      gate = ra + (swapped ? 0 : nc);
    }
    rowfn::glu(node, g, x, gate, y, nc, tmp);
  });
}

inline void arange(const exec& ex, tensor* node) {
  const float start = node->param_f32(0), step = node->param_f32(2);
  const std::int64_t n = node->ne[0];
  auto* y = static_cast<char*>(node->data);
  for (std::int64_t i = ex.begin(n); i < ex.end(n); ++i)
    // start + step i rounded once (the reference's compiler contracts it to the same fma)
    store_f32(node->type, y + static_cast<std::size_t>(i) * node->nb[0], std::fma(step, static_cast<float>(i), start));
}

}  // namespace detail

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node))
    throw error("gk: cpu: no elementwise kernel for " + std::string(name(node->op)) + " -> " + describe(node) +
                (node->src[0] ? ", src0 " + describe(node->src[0]) : std::string()) +
                (node->src[1] ? ", src1 " + describe(node->src[1]) : std::string()));
  using namespace detail;
  const tensor* a = node->src[0];
  switch (node->op) {
    case op::add: check_same_shape(node, a); return binary(ex, node, [](float x, float y) { return x + y; });
    case op::sub: check_same_shape(node, a); return binary(ex, node, [](float x, float y) { return x - y; });
    case op::mul: check_same_shape(node, a); return binary(ex, node, [](float x, float y) { return x * y; });
    case op::div: check_same_shape(node, a); return binary(ex, node, [](float x, float y) { return x / y; });
    case op::add1: {
      check_same_shape(node, a);
      const float v = load_f32(node->src[1]->type, static_cast<const char*>(node->src[1]->data));
      return map_rows(ex, node, [v](const float* x, float* y, std::int64_t n, float*) {
        for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] + v;
      });
    }
    case op::acc: return acc(ex, node);
    case op::add_id: return add_id(ex, node);
    case op::sqr:
      check_same_shape(node, a);
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) { rowfn::map(x, y, n, [](float v) { return v * v; }); });
    case op::sqrt:
      check_same_shape(node, a);
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) { rowfn::map(x, y, n, [](float v) { return std::sqrt(v); }); });
    case op::log:
      check_same_shape(node, a);
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) { rowfn::map(x, y, n, [](float v) { return std::log(v); }); });
    case op::sin:
      check_same_shape(node, a);
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) { rowfn::map(x, y, n, [](float v) { return std::sin(v); }); });
    case op::cos:
      check_same_shape(node, a);
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) { rowfn::map(x, y, n, [](float v) { return std::cos(v); }); });
    case op::unary: {
      check_same_shape(node, a);
      const auto u = static_cast<unary_op>(node->param_i32(0));
      return map_rows(ex, node, [u, node](const float* x, float* y, std::int64_t n, float* tmp) {
        rowfn::unary(u, x, y, n, tmp, node);
      });
    }
    case op::glu: return glu(ex, node);
    case op::scale: {
      check_same_shape(node, a);
      const float s = node->param_f32(0), b = node->param_f32(1);
      // b == 0 is a plain product (as the reference: no fma, so -0 and the rounding match)
      if (b == 0.0f)
        return map_rows(ex, node, [s](const float* x, float* y, std::int64_t n, float*) {
          for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
        });
      return map_rows(ex, node, [s, b](const float* x, float* y, std::int64_t n, float*) {
        for (std::int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], s, b);
      });
    }
    case op::clamp: {
      check_same_shape(node, a);
      const float lo = node->param_f32(0), hi = node->param_f32(1);
      // min first, then max, with the reference's comparisons: NaN comes out as max(hi, lo)
      return map_rows(ex, node, [lo, hi](const float* x, float* y, std::int64_t n, float*) {
        for (std::int64_t i = 0; i < n; ++i) {
          const float m = x[i] < hi ? x[i] : hi;
          y[i] = m > lo ? m : lo;
        }
      });
    }
    case op::leaky_relu: {
      check_same_shape(node, a);
      const float ns = node->param_f32(0);
      // positive part plus slope times negative part: -0 and 0 both give +0, as the reference
      return map_rows(ex, node, [ns](const float* x, float* y, std::int64_t n, float*) {
        for (std::int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.0f ? x[i] : 0.0f) + ns * (x[i] < 0.0f ? x[i] : 0.0f);
      });
    }
    case op::fill: {
      const float c = node->param_f32(0);
      return each_dst_row(ex, node, [&](float* y, std::int64_t, std::int64_t, std::int64_t) {
        std::fill(y, y + node->ne[0], c);
      });
    }
    case op::tri: {
      check_same_shape(node, a);
      const auto t = static_cast<tri_type>(node->param_i32(0));
      float* xa = ex.scr->get<float>(0, static_cast<std::size_t>(a->ne[0]));
      return each_dst_row(ex, node, [&](float* y, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
        const float* x = row_read(a, i1, i2, i3, xa);
        for (std::int64_t i0 = 0; i0 < node->ne[0]; ++i0) {
          bool keep = false;
          switch (t) {
            case tri_type::lower: keep = i0 < i1; break;
            case tri_type::lower_diag: keep = i0 <= i1; break;
            case tri_type::upper: keep = i0 > i1; break;
            case tri_type::upper_diag: keep = i0 >= i1; break;
          }
          y[i0] = keep ? x[i0] : 0.0f;
        }
      });
    }
    case op::arange: return arange(ex, node);
    case op::cumsum:
      check_same_shape(node, a);
      // one running f32 sum left to right: the definition of a prefix sum in f32
      return map_rows(ex, node, [](const float* x, float* y, std::int64_t n, float*) {
        float s = 0.0f;
        for (std::int64_t i = 0; i < n; ++i) y[i] = s = s + x[i];
      });
    default: throw error("gk: cpu: op " + std::string(name(node->op)) + " is not in the elementwise family");
  }
}

}  // namespace gk::cpu::elementwise

GK_EXACT_FP_END
