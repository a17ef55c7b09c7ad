// SPDX-License-Identifier: MIT
// Op builders for the softmax family: soft_max (plain and _ext, with an additive mask,
// a scale and ALiBi slopes), soft_max_add_sinks, and the causal masks diag_mask_inf /
// diag_mask_zero. Parameters sit where the reference puts them: soft_max has
// {scale, max_bias} as f32 in slots 0 and 1, src[1] the mask and src[2] the sinks;
// diag_mask_* has n_past as i32 in slot 0.
//
// soft_max_ext computes, per row of a (dims 0..3 indexed i0, i1, i2, i3):
//   w = a * scale + slope(i2) * mask[i0, i1, i2 % mask.ne2, i3 % mask.ne3]
//   y = exp(w - max w) / sum exp(w - max w)
// slope(h) is 1 unless max_bias > 0, when it is the ALiBi slope of head h among
// n_head = a.ne2 heads. The mask has a's row length, at least a.ne1 rows (rows past
// a.ne1 are padding) and broadcasts over dims 2 and 3.
#pragma once

#include "gk/ops/common.hpp"

namespace gk {

namespace detail {

inline tensor* soft_max_impl(context& ctx, tensor* a, tensor* mask, float scale, float max_bias, bool inplace) {
  const op o = op::soft_max;
  require_tensors(o, {{"a", a}});
  require(a->is_contiguous(), o, "a must be contiguous", {{"a", a}});
  if (mask) {
    require(mask->type == gk::type::f32 || mask->type == gk::type::f16, o, "the mask must be f32 or f16",
            {{"a", a}, {"mask", mask}});
    require(mask->is_contiguous(), o, "the mask must be contiguous", {{"a", a}, {"mask", mask}});
    require(mask->ne[0] == a->ne[0], o,
            "mask->ne[0] (" + num(mask->ne[0]) + ") != a->ne[0] (" + num(a->ne[0]) + ")",
            {{"a", a}, {"mask", mask}});
    require(mask->ne[1] >= a->ne[1], o,
            "the mask has " + num(mask->ne[1]) + " rows, fewer than a's " + num(a->ne[1]),
            {{"a", a}, {"mask", mask}});
    require(mask->ne[2] > 0 && mask->ne[3] > 0 && a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0, o,
            "the mask's dims 2 and 3 must divide a's (to broadcast)", {{"a", a}, {"mask", mask}});
  }
  require(!(max_bias > 0.0f) || mask, o, "max_bias > 0 (ALiBi) needs a mask", {{"a", a}});
  tensor* r = new_op(ctx, o, a->type, a->ne, {a, mask}, inplace ? a : nullptr);
  r->set_param_f32(0, scale);
  r->set_param_f32(1, max_bias);
  return r;
}

inline tensor* diag_mask_impl(context& ctx, op o, tensor* a, int n_past, bool inplace) {
  require_tensors(o, {{"a", a}});
  require(n_past >= 0, o, "n_past must be >= 0 (got " + num(n_past) + ")", {{"a", a}});
  tensor* r = new_op(ctx, o, a->type, a->ne, {a}, inplace ? a : nullptr);
  r->set_param_i32(0, n_past);
  return r;
}

}  // namespace detail

inline tensor* soft_max(context& ctx, tensor* a) { return detail::soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, false); }
inline tensor* soft_max_inplace(context& ctx, tensor* a) {
  return detail::soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, true);
}
inline tensor* soft_max_ext(context& ctx, tensor* a, tensor* mask, float scale, float max_bias) {
  return detail::soft_max_impl(ctx, a, mask, scale, max_bias, false);
}
inline tensor* soft_max_ext_inplace(context& ctx, tensor* a, tensor* mask, float scale, float max_bias) {
  return detail::soft_max_impl(ctx, a, mask, scale, max_bias, true);
}

// Attention sinks: one f32 logit per head (sinks->ne[0] == a->ne[2]) that joins every
// row's normalisation without an output of its own. Sets src[2] of an existing soft_max
// node, as the reference does; a null `sinks` removes them.
inline void soft_max_add_sinks(tensor* a, tensor* sinks) {
  const op o = op::soft_max;
  detail::require_tensors(o, {{"a", a}});
  if (!sinks) {
    a->src[2] = nullptr;
    return;
  }
  detail::require(a->op == op::soft_max, o, "sinks go on a soft_max node, not " + std::string(name(a->op)),
                  {{"a", a}, {"sinks", sinks}});
  detail::require(a->src[2] == nullptr, o, "this soft_max already has sinks", {{"a", a}, {"sinks", sinks}});
  detail::require(sinks->type == gk::type::f32, o, "sinks must be f32", {{"a", a}, {"sinks", sinks}});
  detail::require(a->src[0] && a->src[0]->ne[2] == sinks->ne[0], o,
                  "sinks->ne[0] (" + detail::num(sinks->ne[0]) + ") must equal the head count a->ne[2]",
                  {{"a", a->src[0]}, {"sinks", sinks}});
  a->src[2] = sinks;
}

// Causal masks: element i0 of row (i1, ...) becomes -inf (or 0) where i0 > n_past + i1.
inline tensor* diag_mask_inf(context& ctx, tensor* a, int n_past) {
  return detail::diag_mask_impl(ctx, op::diag_mask_inf, a, n_past, false);
}
inline tensor* diag_mask_inf_inplace(context& ctx, tensor* a, int n_past) {
  return detail::diag_mask_impl(ctx, op::diag_mask_inf, a, n_past, true);
}
inline tensor* diag_mask_zero(context& ctx, tensor* a, int n_past) {
  return detail::diag_mask_impl(ctx, op::diag_mask_zero, a, n_past, false);
}
inline tensor* diag_mask_zero_inplace(context& ctx, tensor* a, int n_past) {
  return detail::diag_mask_impl(ctx, op::diag_mask_zero, a, n_past, true);
}

}  // namespace gk
