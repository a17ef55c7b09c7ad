// SPDX-License-Identifier: MIT
// Matrix products, in ggml's convention: a weight `a` is stored one output row per
// tensor row (ne[0] = K inputs, ne[1] = M outputs), activations `b` one token per row
// (ne[0] = K, ne[1] = N), and mul_mat(a, b) is the [M, N] result y[m, n] = a[:, m] . b[:, n],
// broadcast over dims 2 and 3 (b's batch must be a whole multiple of a's).
#pragma once

#include <cstdint>

#include "gk/ops/common.hpp"

namespace gk {

// y = a^T b: [a.ne1, b.ne1, b.ne2, b.ne3], f32.
inline tensor* mul_mat(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  constexpr op o = op::mul_mat;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[0] == b->ne[0], o, "a->ne[0] (" + num(a->ne[0]) + ") must equal b->ne[0] (" + num(b->ne[0]) + ")",
          {{"a", a}, {"b", b}});
  require(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, o,
          "b's dims 2,3 must be whole multiples of a's (broadcast)", {{"a", a}, {"b", b}});
  require(!a->is_transposed(), o, "a must not be transposed (nb[0] > nb[1]); cont() it first", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
  return new_op(ctx, o, type::f32, ne, {a, b});
}

// Ask for f32 accumulation where a backend would otherwise use less (op_params[0]).
inline void mul_mat_set_prec(tensor* t, prec p) {
  detail::require(t && t->op == op::mul_mat, op::mul_mat, "mul_mat_set_prec needs a mul_mat node");
  t->set_param_i32(0, static_cast<std::int32_t>(p));
}

// Mixture of experts: as [K, M, n_as] (one matrix per expert), b [K, n_b, n_tokens],
// ids i32 [n_used, n_tokens]. y[:, e, t] = as[ids[e, t]]^T b[:, e % n_b, t]:
// [M, n_used, n_tokens, 1], f32.
inline tensor* mul_mat_id(context& ctx, tensor* as, tensor* b, tensor* ids) {
  using namespace detail;
  constexpr op o = op::mul_mat_id;
  require_tensors(o, {{"as", as}, {"b", b}, {"ids", ids}});
  auto all = std::initializer_list<std::pair<const char*, const tensor*>>{{"as", as}, {"b", b}, {"ids", ids}};
  require(!as->is_transposed(), o, "as must not be transposed", all);
  require(ids->type == type::i32, o, "ids must be i32", all);
  require(as->ne[3] == 1, o, "as must be 3-d (one matrix per expert)", all);
  require(b->ne[3] == 1, o, "b must be 3-d", all);
  require(ids->ne[2] == 1 && ids->ne[3] == 1, o, "ids must be 2-d", all);
  require(ids->ne[1] == b->ne[2], o, "ids needs one expert list per token: ids->ne[1] must equal b->ne[2]", all);
  require(as->ne[0] == b->ne[0], o, "as->ne[0] must equal b->ne[0]", all);
  require(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0, o, "ids->ne[0] must be a multiple of b->ne[1]", all);
  const std::int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
  return new_op(ctx, o, type::f32, ne, {as, b, ids});
}

// Outer products summed over dim 1: y[i, j] = sum_k a[i, k] b[j, k]: [a.ne0, b.ne0, b.ne2, b.ne3], f32.
inline tensor* out_prod(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  constexpr op o = op::out_prod;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[1] == b->ne[1], o, "a->ne[1] (" + num(a->ne[1]) + ") must equal b->ne[1] (" + num(b->ne[1]) + ")",
          {{"a", a}, {"b", b}});
  require(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, o,
          "b's dims 2,3 must be whole multiples of a's (broadcast)", {{"a", a}, {"b", b}});
  require(!a->is_transposed(), o, "a must not be transposed", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[2], b->ne[3]};
  return new_op(ctx, o, type::f32, ne, {a, b});
}

}  // namespace gk
