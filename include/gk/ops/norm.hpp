// SPDX-License-Identifier: MIT
// Op builders for the norm family: norm (mean and variance), rms_norm, group_norm and
// l2_norm, each with its _inplace form. The result has the source's shape; op_params
// are the reference's: eps as f32 in slot 0 (group_norm: n_groups i32 in slot 0, eps
// f32 in slot 1). The CPU kernels (cpu/norm.hpp) take f32 rows.
#pragma once

#include "gk/ops/common.hpp"

namespace gk {

namespace detail {

inline tensor* norm_like(context& ctx, op o, tensor* a, float eps, bool inplace) {
  require_tensors(o, {{"a", a}});
  require(eps >= 0.0f, o, "eps must be >= 0 (got " + std::to_string(eps) + ")", {{"a", a}});
  tensor* r = new_op(ctx, o, a->type, a->ne, {a}, inplace ? a : nullptr);
  r->set_param_f32(0, eps);
  return r;
}

inline tensor* group_norm_impl(context& ctx, tensor* a, int n_groups, float eps, bool inplace) {
  require_tensors(op::group_norm, {{"a", a}});
  require(n_groups > 0, op::group_norm, "n_groups must be positive (got " + num(n_groups) + ")", {{"a", a}});
  require(eps >= 0.0f, op::group_norm, "eps must be >= 0 (got " + std::to_string(eps) + ")", {{"a", a}});
  tensor* r = new_op(ctx, op::group_norm, a->type, a->ne, {a}, inplace ? a : nullptr);
  r->set_param_i32(0, n_groups);
  r->set_param_f32(1, eps);
  return r;
}

}  // namespace detail

// Each row (dim 0) to zero mean and unit variance: (x - mean) / sqrt(var + eps).
inline tensor* norm(context& ctx, tensor* a, float eps) { return detail::norm_like(ctx, op::norm, a, eps, false); }
inline tensor* norm_inplace(context& ctx, tensor* a, float eps) {
  return detail::norm_like(ctx, op::norm, a, eps, true);
}

// Each row divided by its root mean square: x / sqrt(mean(x^2) + eps).
inline tensor* rms_norm(context& ctx, tensor* a, float eps) {
  return detail::norm_like(ctx, op::rms_norm, a, eps, false);
}
inline tensor* rms_norm_inplace(context& ctx, tensor* a, float eps) {
  return detail::norm_like(ctx, op::rms_norm, a, eps, true);
}

// norm over groups of channels: dim 2 is split into n_groups groups of ceil(ne2/n_groups)
// channels (the last may be short); mean and variance are taken over every element of a
// group (all of dims 0 and 1), separately for each index of dim 3.
inline tensor* group_norm(context& ctx, tensor* a, int n_groups, float eps) {
  return detail::group_norm_impl(ctx, a, n_groups, eps, false);
}
inline tensor* group_norm_inplace(context& ctx, tensor* a, int n_groups, float eps) {
  return detail::group_norm_impl(ctx, a, n_groups, eps, true);
}

// Each row divided by its Euclidean length, which is floored at eps: x / max(|x|, eps).
inline tensor* l2_norm(context& ctx, tensor* a, float eps) {
  return detail::norm_like(ctx, op::l2_norm, a, eps, false);
}
inline tensor* l2_norm_inplace(context& ctx, tensor* a, float eps) {
  return detail::norm_like(ctx, op::l2_norm, a, eps, true);
}

}  // namespace gk
