// SPDX-License-Identifier: MIT
// Op builders: the elementwise family. Binary arithmetic (b broadcast onto a by the
// repeat rule: every dimension of a is a whole multiple of b's), the unary ops and their
// named forms, the gated linear units, scale/clamp/leaky_relu, and the generators fill,
// tri, arange and cumsum. Each builder mirrors the reference's name, argument order, shape
// rule and op_params layout, so a ggml call forwards here unchanged; the result has a's
// type and shape unless the op says otherwise, and an _inplace form writes through a view
// of a.
#pragma once

#include <cmath>
#include <cstdint>

#include "gk/ops/common.hpp"
#include "gk/ops/view.hpp"

namespace gk {

namespace detail {

// Rows packed and dims 1..3 packed above them (the reference's ggml_is_padded_1d).
inline bool padded_1d(const tensor* t) noexcept {
  return t->nb[0] == gk::type_size(t->type) && t->nb[2] == t->nb[1] * static_cast<std::size_t>(t->ne[1]) &&
         t->nb[3] == t->nb[2] * static_cast<std::size_t>(t->ne[2]);
}
inline bool is_scalar(const tensor* t) noexcept { return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }

inline tensor* same_as(context& ctx, op o, tensor* a, std::initializer_list<tensor*> srcs, bool inplace) {
  return new_op(ctx, o, a->type, a->ne, srcs, inplace ? a : nullptr);
}

inline tensor* binary(context& ctx, op o, tensor* a, tensor* b, bool inplace) {
  require_tensors(o, {{"a", a}, {"b", b}});
  require(b->can_repeat_to(*a), o,
          "b " + dims(b) + " does not broadcast onto a " + dims(a) + " (each of a's dims must be a multiple of b's)",
          {{"a", a}, {"b", b}});
  return same_as(ctx, o, a, {a, b}, inplace);
}

inline tensor* unary_like(context& ctx, op o, tensor* a, bool inplace) {
  require_tensors(o, {{"a", a}});
  return same_as(ctx, o, a, {a}, inplace);
}

// softplus as the reference computes it when it folds xielu's parameters (build time).
inline float softplus_param(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

}  // namespace detail

// ---- binary arithmetic: a op broadcast(b) ----

inline tensor* add(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::add, a, b, false); }
inline tensor* add_inplace(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::add, a, b, true); }
inline tensor* sub(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::sub, a, b, false); }
inline tensor* sub_inplace(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::sub, a, b, true); }
inline tensor* mul(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::mul, a, b, false); }
inline tensor* mul_inplace(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::mul, a, b, true); }
inline tensor* div(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::div, a, b, false); }
inline tensor* div_inplace(context& ctx, tensor* a, tensor* b) { return detail::binary(ctx, op::div, a, b, true); }

// a + b with the result in `type` (f16/bf16 a, rows of b repeat whole).
inline tensor* add_cast(context& ctx, tensor* a, tensor* b, gk::type type) {
  using namespace detail;
  require_tensors(op::add, {{"a", a}, {"b", b}});
  require(b->ne[0] == a->ne[0] && b->can_repeat_to(*a), op::add,
          "add_cast: b " + dims(b) + " must have a's row length and broadcast onto a " + dims(a), {{"a", a}, {"b", b}});
  require(gk::is_quantized(a->type) || a->type == type::f16 || a->type == type::bf16, op::add,
          "add_cast: a must be f16, bf16 or a block format", {{"a", a}, {"b", b}});
  return new_op(ctx, op::add, type, a->ne, {a, b});
}

// a[:, i1, i2] + b[:, ids[i1, i2]]: a per-row bias chosen by an index (expert biases).
inline tensor* add_id(context& ctx, tensor* a, tensor* b, tensor* ids) {
  using namespace detail;
  require_tensors(op::add_id, {{"a", a}, {"b", b}, {"ids", ids}});
  require(a->ne[0] == b->ne[0], op::add_id, "a->ne[0] " + num(a->ne[0]) + " != b->ne[0] " + num(b->ne[0]),
          {{"a", a}, {"b", b}, {"ids", ids}});
  require(a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1], op::add_id,
          "ids " + dims(ids) + " must be [a->ne[1], a->ne[2]] = [" + num(a->ne[1]) + ", " + num(a->ne[2]) + "]",
          {{"a", a}, {"b", b}, {"ids", ids}});
  require(ids->type == type::i32, op::add_id, "ids must be i32", {{"ids", ids}});
  return new_op(ctx, op::add_id, a->type, a->ne, {a, b, ids});
}

// a + b where b holds one element.
inline tensor* add1_impl(context& ctx, tensor* a, tensor* b, bool inplace) {
  using namespace detail;
  require_tensors(op::add1, {{"a", a}, {"b", b}});
  require(is_scalar(b), op::add1, "b must hold one element", {{"a", a}, {"b", b}});
  require(padded_1d(a), op::add1, "a must have packed rows and packed dims above them", {{"a", a}, {"b", b}});
  return same_as(ctx, op::add1, a, {a, b}, inplace);
}
inline tensor* add1(context& ctx, tensor* a, tensor* b) { return add1_impl(ctx, a, b, false); }
inline tensor* add1_inplace(context& ctx, tensor* a, tensor* b) { return add1_impl(ctx, a, b, true); }

// a copy of a with b added into the window of a that has strides nb1..nb3 (bytes) and
// starts `offset` bytes in; op_params {nb1, nb2, nb3, offset, inplace} as int32.
inline tensor* acc_impl(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                        std::size_t offset, bool inplace) {
  using namespace detail;
  require_tensors(op::acc, {{"a", a}, {"b", b}});
  require(b->nelements() <= a->nelements(), op::acc, "b has more elements than a", {{"a", a}, {"b", b}});
  require(a->is_contiguous(), op::acc, "a must be contiguous", {{"a", a}, {"b", b}});
  require(a->type == type::f32 && b->type == type::f32, op::acc, "a and b must be f32", {{"a", a}, {"b", b}});
  std::size_t last = offset;
  const std::size_t st[4] = {sizeof(float), nb1, nb2, nb3};
  for (int i = 0; i < 4; ++i) last += static_cast<std::size_t>(b->ne[i] > 0 ? b->ne[i] - 1 : 0) * st[i];
  require(b->is_empty() || last + sizeof(float) <= a->nbytes(), op::acc,
          "the window (strides " + num(static_cast<std::int64_t>(nb1)) + ", " + num(static_cast<std::int64_t>(nb2)) +
              ", " + num(static_cast<std::int64_t>(nb3)) + ", offset " + num(static_cast<std::int64_t>(offset)) +
              ") runs past a",
          {{"a", a}, {"b", b}});
  tensor* r = same_as(ctx, op::acc, a, {a, b}, inplace);
  r->set_param_i32(0, static_cast<std::int32_t>(nb1));
  r->set_param_i32(1, static_cast<std::int32_t>(nb2));
  r->set_param_i32(2, static_cast<std::int32_t>(nb3));
  r->set_param_i32(3, static_cast<std::int32_t>(offset));
  r->set_param_i32(4, inplace ? 1 : 0);
  return r;
}
inline tensor* acc(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                   std::size_t offset) {
  return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, false);
}
inline tensor* acc_inplace(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                           std::size_t offset) {
  return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, true);
}

// ---- ops of their own with one source ----

inline tensor* sqr(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sqr, a, false); }
inline tensor* sqr_inplace(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sqr, a, true); }
inline tensor* sqrt(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sqrt, a, false); }
inline tensor* sqrt_inplace(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sqrt, a, true); }
inline tensor* log(context& ctx, tensor* a) { return detail::unary_like(ctx, op::log, a, false); }
inline tensor* log_inplace(context& ctx, tensor* a) { return detail::unary_like(ctx, op::log, a, true); }
inline tensor* sin(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sin, a, false); }
inline tensor* sin_inplace(context& ctx, tensor* a) { return detail::unary_like(ctx, op::sin, a, true); }
inline tensor* cos(context& ctx, tensor* a) { return detail::unary_like(ctx, op::cos, a, false); }
inline tensor* cos_inplace(context& ctx, tensor* a) { return detail::unary_like(ctx, op::cos, a, true); }

// ---- op::unary: op_params[0] is the unary_op ----

inline tensor* unary_impl(context& ctx, tensor* a, unary_op u, bool inplace) {
  using namespace detail;
  require_tensors(op::unary, {{"a", a}});
  require(static_cast<int>(u) >= 0 && u < unary_op::count, op::unary,
          "unknown unary op " + num(static_cast<int>(u)), {{"a", a}});
  require(a->rows_contiguous(), op::unary, "a's rows must be packed (" + std::string(name(u)) + ")", {{"a", a}});
  tensor* r = same_as(ctx, op::unary, a, {a}, inplace);
  r->set_param_i32(0, static_cast<std::int32_t>(u));
  return r;
}
inline tensor* unary(context& ctx, tensor* a, unary_op u) { return unary_impl(ctx, a, u, false); }
inline tensor* unary_inplace(context& ctx, tensor* a, unary_op u) { return unary_impl(ctx, a, u, true); }

#define GK_UNARY_BUILDER(fn)                                                                          \
  inline tensor* fn(context& ctx, tensor* a) { return unary_impl(ctx, a, unary_op::fn, false); }     \
  inline tensor* fn##_inplace(context& ctx, tensor* a) { return unary_impl(ctx, a, unary_op::fn, true); }
GK_UNARY_BUILDER(abs)
GK_UNARY_BUILDER(sgn)
GK_UNARY_BUILDER(neg)
GK_UNARY_BUILDER(step)
GK_UNARY_BUILDER(tanh)
GK_UNARY_BUILDER(elu)
GK_UNARY_BUILDER(relu)
GK_UNARY_BUILDER(sigmoid)
GK_UNARY_BUILDER(gelu)
GK_UNARY_BUILDER(gelu_quick)
GK_UNARY_BUILDER(silu)
GK_UNARY_BUILDER(exp)
GK_UNARY_BUILDER(expm1)
GK_UNARY_BUILDER(softplus)
GK_UNARY_BUILDER(gelu_erf)
GK_UNARY_BUILDER(floor)
GK_UNARY_BUILDER(ceil)
GK_UNARY_BUILDER(round)
GK_UNARY_BUILDER(trunc)
#undef GK_UNARY_BUILDER
// The reference has no in-place hardswish or hardsigmoid.
inline tensor* hardswish(context& ctx, tensor* a) { return unary_impl(ctx, a, unary_op::hardswish, false); }
inline tensor* hardsigmoid(context& ctx, tensor* a) { return unary_impl(ctx, a, unary_op::hardsigmoid, false); }

// xIELU: x > 0: alpha_p x^2 + beta x; else (expm1(min(x, eps)) - x) alpha_n + beta x, with the
// reference's folding of the parameters at build time: op_params {xielu, beta + softplus(alpha_n),
// softplus(alpha_p), beta, eps}.
inline tensor* xielu(context& ctx, tensor* a, float alpha_n, float alpha_p, float beta, float eps) {
  using namespace detail;
  require_tensors(op::unary, {{"a", a}});
  tensor* r = same_as(ctx, op::unary, a, {a}, false);
  r->set_param_i32(0, static_cast<std::int32_t>(unary_op::xielu));
  r->set_param_f32(1, beta + softplus_param(alpha_n));
  r->set_param_f32(2, softplus_param(alpha_p));
  r->set_param_f32(3, beta);
  r->set_param_f32(4, eps);
  return r;
}

// ---- gated linear units: act(x) * g; op_params {glu_op, swapped, (alpha), (limit)} ----
// One source: x and g are the two halves of each row of a (x first unless swapped), the
// result has ne[0] = a->ne[0] / 2 (an odd last element is unused, as in the reference).
// Two sources (split): x is a, g is b, same shape and type.

inline tensor* glu_impl(context& ctx, tensor* a, tensor* b, glu_op g, bool swapped) {
  using namespace detail;
  require_tensors(op::glu, {{"a", a}});
  require(static_cast<int>(g) >= 0 && g < glu_op::count, op::glu, "unknown glu op " + num(static_cast<int>(g)),
          {{"a", a}});
  require(a->is_contiguous(1), op::glu, "a's rows must be packed (" + std::string(name(g)) + ")", {{"a", a}});
  if (b) {
    require(b->is_contiguous(1), op::glu, "b's rows must be packed (" + std::string(name(g)) + ")", {{"a", a}, {"b", b}});
    require(a->same_shape(*b), op::glu, "a " + dims(a) + " and b " + dims(b) + " must have the same shape",
            {{"a", a}, {"b", b}});
    require(a->type == b->type, op::glu, "a and b must have the same type", {{"a", a}, {"b", b}});
  }
  std::int64_t ne[4] = {b ? a->ne[0] : a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
  tensor* r = b ? new_op(ctx, op::glu, a->type, ne, {a, b}) : new_op(ctx, op::glu, a->type, ne, {a});
  r->set_param_i32(0, static_cast<std::int32_t>(g));
  r->set_param_i32(1, swapped ? 1 : 0);
  return r;
}
inline tensor* glu(context& ctx, tensor* a, glu_op g, bool swapped) { return glu_impl(ctx, a, nullptr, g, swapped); }
inline tensor* glu_split(context& ctx, tensor* a, tensor* b, glu_op g) {
  detail::require_tensors(op::glu, {{"b", b}});
  return glu_impl(ctx, a, b, g, false);
}

#define GK_GLU_BUILDER(fn)                                                                                  \
  inline tensor* fn(context& ctx, tensor* a) { return glu_impl(ctx, a, nullptr, glu_op::fn, false); }      \
  inline tensor* fn##_swapped(context& ctx, tensor* a) { return glu_impl(ctx, a, nullptr, glu_op::fn, true); } \
  inline tensor* fn##_split(context& ctx, tensor* a, tensor* b) { return glu_split(ctx, a, b, glu_op::fn); }
GK_GLU_BUILDER(reglu)
GK_GLU_BUILDER(geglu)
GK_GLU_BUILDER(swiglu)
GK_GLU_BUILDER(geglu_erf)
GK_GLU_BUILDER(geglu_quick)
#undef GK_GLU_BUILDER

// gpt-oss: x' = min(x, limit), g' = clamp(g, -limit, limit), x' sigmoid(alpha x') (g' + 1).
// b may be null (halves of a).
inline tensor* swiglu_oai(context& ctx, tensor* a, tensor* b, float alpha, float limit) {
  tensor* r = glu_impl(ctx, a, b, glu_op::swiglu_oai, false);
  r->set_param_f32(2, alpha);
  r->set_param_f32(3, limit);
  return r;
}
// silu(min(x, limit)) * clamp(g, -limit, limit). b may be null (halves of a).
inline tensor* swiglu_clamp(context& ctx, tensor* a, tensor* b, float limit) {
  tensor* r = glu_impl(ctx, a, b, glu_op::swiglu_clamp, false);
  r->set_param_f32(3, limit);
  return r;
}

// ---- scale, clamp, leaky_relu ----

// a * s + b; op_params {s, b} as f32.
inline tensor* scale_impl(context& ctx, tensor* a, float s, float b, bool inplace) {
  using namespace detail;
  require_tensors(op::scale, {{"a", a}});
  require(padded_1d(a), op::scale, "a must have packed rows and packed dims above them", {{"a", a}});
  tensor* r = same_as(ctx, op::scale, a, {a}, inplace);
  r->set_param_f32(0, s);
  r->set_param_f32(1, b);
  return r;
}
inline tensor* scale(context& ctx, tensor* a, float s) { return scale_impl(ctx, a, s, 0.0f, false); }
inline tensor* scale_inplace(context& ctx, tensor* a, float s) { return scale_impl(ctx, a, s, 0.0f, true); }
inline tensor* scale_bias(context& ctx, tensor* a, float s, float b) { return scale_impl(ctx, a, s, b, false); }
inline tensor* scale_bias_inplace(context& ctx, tensor* a, float s, float b) { return scale_impl(ctx, a, s, b, true); }

// op_params {min, max} as f32.
inline tensor* clamp_impl(context& ctx, tensor* a, float lo, float hi, bool inplace) {
  tensor* r = detail::unary_like(ctx, op::clamp, a, inplace);
  r->set_param_f32(0, lo);
  r->set_param_f32(1, hi);
  return r;
}
inline tensor* clamp(context& ctx, tensor* a, float lo, float hi) { return clamp_impl(ctx, a, lo, hi, false); }
inline tensor* clamp_inplace(context& ctx, tensor* a, float lo, float hi) { return clamp_impl(ctx, a, lo, hi, true); }

// op_params {negative_slope} as f32; the reference takes `inplace` as an argument.
inline tensor* leaky_relu(context& ctx, tensor* a, float negative_slope, bool inplace) {
  tensor* r = detail::unary_like(ctx, op::leaky_relu, a, inplace);
  r->set_param_f32(0, negative_slope);
  return r;
}

// ---- generators ----

// Every element c (a supplies shape and type); op_params {c} as f32.
inline tensor* fill_impl(context& ctx, tensor* a, float c, bool inplace) {
  using namespace detail;
  require_tensors(op::fill, {{"a", a}});
  require(a->type == type::f32 || a->type == type::f16, op::fill, "a must be f32 or f16", {{"a", a}});
  require(a->is_contiguous(), op::fill, "a must be contiguous", {{"a", a}});
  tensor* r = same_as(ctx, op::fill, a, {a}, inplace);
  r->set_param_f32(0, c);
  return r;
}
inline tensor* fill(context& ctx, tensor* a, float c) { return fill_impl(ctx, a, c, false); }
inline tensor* fill_inplace(context& ctx, tensor* a, float c) { return fill_impl(ctx, a, c, true); }

// Keeps the triangle of each square matrix named by `t` (i0 column, i1 row: lower keeps
// i0 < i1, lower_diag i0 <= i1, upper i0 > i1, upper_diag i0 >= i1), zero elsewhere.
inline tensor* tri(context& ctx, tensor* a, tri_type t) {
  using namespace detail;
  require_tensors(op::tri, {{"a", a}});
  require(a->type == type::f32, op::tri, "a must be f32", {{"a", a}});
  require(a->is_contiguous(), op::tri, "a must be contiguous", {{"a", a}});
  require(a->ne[0] == a->ne[1], op::tri, "a must be square in dims 0 and 1, got " + dims(a), {{"a", a}});
  require(static_cast<int>(t) >= 0 && static_cast<int>(t) <= 3, op::tri, "unknown tri type", {{"a", a}});
  tensor* r = same_as(ctx, op::tri, a, {a}, false);
  r->set_param_i32(0, static_cast<std::int32_t>(t));
  return r;
}

// start, start + step, ... below stop: ceil((stop - start) / step) f32 values;
// op_params {start, stop, step} as f32.
inline tensor* arange(context& ctx, float start, float stop, float step) {
  using namespace detail;
  require(stop > start, op::arange, "stop " + std::to_string(stop) + " must exceed start " + std::to_string(start));
  const float n = std::ceil((stop - start) / step);
  require(n >= 1.0f && n < 9.0e18f, op::arange, "step " + std::to_string(step) + " gives no finite count");
  const std::int64_t ne[4] = {static_cast<std::int64_t>(n), 1, 1, 1};
  tensor* r = new_op(ctx, op::arange, type::f32, ne, {});
  r->set_param_f32(0, start);
  r->set_param_f32(1, stop);
  r->set_param_f32(2, step);
  return r;
}

// Running sum along each row.
inline tensor* cumsum(context& ctx, tensor* a) {
  using namespace detail;
  require_tensors(op::cumsum, {{"a", a}});
  require(a->type == type::f32, op::cumsum, "a must be f32", {{"a", a}});
  return same_as(ctx, op::cumsum, a, {a}, false);
}

}  // namespace gk
