// SPDX-License-Identifier: MIT
// Op builders: the reduce family. Sums (whole tensor, per row, mean per row), argmax per
// row, count of equal elements, argsort and top-k per row. Shapes, result types and
// op_params follow the reference: sum keeps a's type, mean is f32, indices are i32, the
// count is i64.
#pragma once

#include <cstdint>

#include "gk/ops/common.hpp"
#include "gk/ops/view.hpp"

namespace gk {

// Sum of every element: one element of a's type.
inline tensor* sum(context& ctx, tensor* a) {
  detail::require_tensors(op::sum, {{"a", a}});
  const std::int64_t ne[4] = {1, 1, 1, 1};
  return detail::new_op(ctx, op::sum, a->type, ne, {a});
}

// Sum of each row: [1, ne1, ne2, ne3] of a's type.
inline tensor* sum_rows(context& ctx, tensor* a) {
  detail::require_tensors(op::sum_rows, {{"a", a}});
  const std::int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
  return detail::new_op(ctx, op::sum_rows, a->type, ne, {a});
}

// Mean of each row: [1, ne1, ne2, ne3] f32.
inline tensor* mean(context& ctx, tensor* a) {
  detail::require_tensors(op::mean, {{"a", a}});
  const std::int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
  return detail::new_op(ctx, op::mean, type::f32, ne, {a});
}

// Index of the largest element of each row of a matrix: [ne1] i32. Ties go to the last
// such index, as in the reference.
inline tensor* argmax(context& ctx, tensor* a) {
  using namespace detail;
  require_tensors(op::argmax, {{"a", a}});
  require(a->ne[2] == 1 && a->ne[3] == 1, op::argmax, "a must be a matrix, got " + dims(a), {{"a", a}});
  require(a->ne[0] <= INT32_MAX, op::argmax, "rows longer than INT32_MAX", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[1], 1, 1, 1};
  return new_op(ctx, op::argmax, type::i32, ne, {a});
}

// How many elements of a and b are equal: one i64.
inline tensor* count_equal(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::count_equal, {{"a", a}, {"b", b}});
  require(a->same_shape(*b), op::count_equal, "a " + dims(a) + " and b " + dims(b) + " must have the same shape",
          {{"a", a}, {"b", b}});
  const std::int64_t ne[4] = {1, 1, 1, 1};
  return new_op(ctx, op::count_equal, type::i64, ne, {a, b});
}

// The permutation that sorts each row: a's shape, i32; op_params {order}. Equal values
// keep their index order.
inline tensor* argsort(context& ctx, tensor* a, sort_order order) {
  using namespace detail;
  require_tensors(op::argsort, {{"a", a}});
  require(a->ne[0] <= INT32_MAX, op::argsort, "rows longer than INT32_MAX", {{"a", a}});
  require(order == sort_order::asc || order == sort_order::desc, op::argsort, "unknown sort order", {{"a", a}});
  tensor* r = new_op(ctx, op::argsort, type::i32, a->ne, {a});
  r->set_param_i32(0, static_cast<std::int32_t>(order));
  return r;
}

// The first k columns of a descending argsort (a view of it).
inline tensor* argsort_top_k(context& ctx, tensor* a, int k) {
  using namespace detail;
  require_tensors(op::argsort, {{"a", a}});
  require(k >= 0 && a->ne[0] >= k, op::argsort, "k " + num(k) + " must be in [0, a->ne[0]]", {{"a", a}});
  tensor* s = argsort(ctx, a, sort_order::desc);
  return view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}

// Indices of the k largest elements of each row: [k, ne1, ne2, ne3] i32. gk orders them
// by value, largest first, equal values by index (the reference leaves the order open).
inline tensor* top_k(context& ctx, tensor* a, int k) {
  using namespace detail;
  require_tensors(op::top_k, {{"a", a}});
  require(k >= 0 && a->ne[0] >= k, op::top_k, "k " + num(k) + " must be in [0, a->ne[0]]", {{"a", a}});
  const std::int64_t ne[4] = {k, a->ne[1], a->ne[2], a->ne[3]};
  return new_op(ctx, op::top_k, type::i32, ne, {a});
}

}  // namespace gk
