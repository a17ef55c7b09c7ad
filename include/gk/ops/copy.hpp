// SPDX-License-Identifier: MIT
// Op builders: data movement. dup/cpy/cont copy elements in flat order (i0 fastest) from
// one shape and type to another with the same element count; get_rows gathers rows by
// index, set_rows scatters them; repeat tiles a tensor; concat joins two along one axis.
// None of these does arithmetic beyond a type conversion or a block encode/decode.
#pragma once

#include <cstdint>
#include <string>

#include "gk/ops/common.hpp"

namespace gk {

namespace detail {

inline void name_copy(tensor* r, const tensor* a, std::string_view suffix) {
  r->set_name(std::string(a->get_name()) + " (" + std::string(suffix) + ")");
}

}  // namespace detail

// ---- dup: a fresh copy of a (same type and shape, packed) ----

inline tensor* dup(context& ctx, tensor* a) {
  detail::require_tensors(op::dup, {{"a", a}});
  return detail::new_op(ctx, op::dup, a->type, a->ne, {a});
}
// The result aliases a; computing it copies a onto itself.
inline tensor* dup_inplace(context& ctx, tensor* a) {
  detail::require_tensors(op::dup, {{"a", a}});
  return detail::new_op(ctx, op::dup, a->type, a->ne, {a}, a);
}

// ---- cpy: copy a's elements into b (converting to b's type); the result is a view of b ----

inline tensor* cpy(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::cpy, {{"a", a}, {"b", b}});
  require(a->nelements() == b->nelements(), op::cpy,
          "a has " + num(a->nelements()) + " elements and b " + num(b->nelements()), {{"a", a}, {"b", b}});
  tensor* r = new_op(ctx, op::cpy, b->type, b->ne, {a, b}, b);
  if (b->name[0]) r->set_name(std::string(b->get_name()) + " (copy of " + std::string(a->get_name()) + ")");
  else name_copy(r, a, "copy");
  return r;
}

// a converted to type t, as a fresh tensor. src[1] is the result itself, as the
// reference records it, so backends see the same (source, destination) pair as cpy.
inline tensor* cast(context& ctx, tensor* a, gk::type t) {
  using namespace detail;
  require_tensors(op::cpy, {{"a", a}});
  require(is_valid(t), op::cpy, "unknown destination type id " + num(static_cast<int>(t)), {{"a", a}});
  require(a->ne[0] % gk::block_size(t) == 0, op::cpy,
          "ne0 " + num(a->ne[0]) + " is not whole blocks of " + std::string(gk::name(t)), {{"a", a}});
  tensor* r = new_op(ctx, op::cpy, t, a->ne, {a});
  r->src[1] = r;
  name_copy(r, a, "copy");
  return r;
}

// ---- cont: a packed copy of a, optionally with a new shape of the same element count ----

inline tensor* cont_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                       std::int64_t ne3) {
  using namespace detail;
  require_tensors(op::cont, {{"a", a}});
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  require(ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0 && ne0 * ne1 * ne2 * ne3 == a->nelements(), op::cont,
          "cannot lay " + num(a->nelements()) + " elements out as " + shape_string(ne), {{"a", a}});
  require(ne0 % gk::block_size(a->type) == 0, op::cont,
          "ne0 " + num(ne0) + " is not whole blocks of " + std::string(gk::name(a->type)), {{"a", a}});
  tensor* r = new_op(ctx, op::cont, a->type, ne, {a});
  name_copy(r, a, "cont");
  return r;
}
inline tensor* cont(context& ctx, tensor* a) {
  detail::require_tensors(op::cont, {{"a", a}});
  return cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}
inline tensor* cont_1d(context& ctx, tensor* a, std::int64_t ne0) { return cont_4d(ctx, a, ne0, 1, 1, 1); }
inline tensor* cont_2d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1) {
  return cont_4d(ctx, a, ne0, ne1, 1, 1);
}
inline tensor* cont_3d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2) {
  return cont_4d(ctx, a, ne0, ne1, ne2, 1);
}

// ---- get_rows: result[:, i, j, k] = a[:, b[i, j, k], j, k] ----
// b is i32 [n, a->ne[2], a->ne[3]]; the result is [a->ne[0], n, a->ne[2], a->ne[3]] in f32
// whatever a's type (rows are decoded), except i32 rows, which stay i32 (the reference's rule).

inline tensor* get_rows(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::get_rows, {{"a", a}, {"b", b}});
  require(b->type == gk::type::i32, op::get_rows, "indices b must be i32", {{"a", a}, {"b", b}});
  require(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1, op::get_rows,
          "b must be [n, a->ne[2], a->ne[3], 1]", {{"a", a}, {"b", b}});
  const gk::type t = a->type == gk::type::i32 ? gk::type::i32 : gk::type::f32;
  const std::int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[1], b->ne[2]};
  return new_op(ctx, op::get_rows, t, ne, {a, b});
}

// ---- set_rows: a[:, c[i, j%c1, k%c2], j, k] = b[:, i, j, k]; the result is a view of a ----
// b is f32 or f16 [a->ne[0], n, a->ne[2], a->ne[3]]; c is i64 or i32 [n, c1, c2] with c1 | b->ne[2]
// and c2 | b->ne[3] (index rows broadcast over heads and batches). Rows of a that no index
// names keep their contents; when two indices name one row, the later source row wins.

inline tensor* set_rows(context& ctx, tensor* a, tensor* b, tensor* c) {
  using namespace detail;
  require_tensors(op::set_rows, {{"a", a}, {"b", b}, {"c", c}});
  auto srcs = {std::pair<const char*, const tensor*>{"a", a}, {"b", b}, {"c", c}};
  require(b->type == gk::type::f32 || b->type == gk::type::f16, op::set_rows, "source rows b must be f32 or f16",
          srcs);
  require(c->type == gk::type::i64 || c->type == gk::type::i32, op::set_rows, "indices c must be i64 or i32", srcs);
  require(a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3], op::set_rows,
          "b must be [a->ne[0], n, a->ne[2], a->ne[3]]", srcs);
  require(b->ne[1] == c->ne[0] && c->ne[1] > 0 && c->ne[2] > 0 && b->ne[2] % c->ne[1] == 0 &&
              b->ne[3] % c->ne[2] == 0 && c->ne[3] == 1,
          op::set_rows, "c must be [b->ne[1], a divisor of b->ne[2], a divisor of b->ne[3], 1]", srcs);
  require(a->rows_contiguous() && b->rows_contiguous(), op::set_rows, "rows of a and b must be packed", srcs);
  tensor* r = new_op(ctx, op::set_rows, a->type, a->ne, {b, c, a}, a);
  return r;
}

// ---- repeat: tile a to the shape of b (or to ne0..ne3); each dim must be a multiple ----

inline tensor* repeat_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                         std::int64_t ne3) {
  using namespace detail;
  require_tensors(op::repeat, {{"a", a}});
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  const bool ok = a->is_empty() || (ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0 && ne0 % a->ne[0] == 0 &&
                                    ne1 % a->ne[1] == 0 && ne2 % a->ne[2] == 0 && ne3 % a->ne[3] == 0);
  require(ok, op::repeat, "cannot repeat to " + shape_string(ne) + ": every dimension must be a multiple of a's",
          {{"a", a}});
  return new_op(ctx, op::repeat, a->type, ne, {a});
}
inline tensor* repeat(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::repeat, {{"a", a}, {"b", b}});
  require(a->can_repeat_to(*b), op::repeat, "a cannot be repeated to b's shape", {{"a", a}, {"b", b}});
  return new_op(ctx, op::repeat, a->type, b->ne, {a});
}

// ---- concat: a and b joined along dim; the other dims must agree ----

inline tensor* concat(context& ctx, tensor* a, tensor* b, int dim) {
  using namespace detail;
  require_tensors(op::concat, {{"a", a}, {"b", b}});
  require(dim >= 0 && dim < max_dims, op::concat, "dim " + num(dim) + " is not 0..3", {{"a", a}, {"b", b}});
  require(a->type == b->type, op::concat, "a and b must have one type", {{"a", a}, {"b", b}});
  std::int64_t ne[4];
  for (int d = 0; d < max_dims; ++d) {
    if (d == dim) {
      ne[d] = a->ne[d] + b->ne[d];
      continue;
    }
    require(a->ne[d] == b->ne[d], op::concat, "a and b differ in dim " + num(d) + " (not the concat dim)",
            {{"a", a}, {"b", b}});
    ne[d] = a->ne[d];
  }
  tensor* r = new_op(ctx, op::concat, a->type, ne, {a, b});
  r->set_param_i32(0, dim);
  return r;
}

}  // namespace gk
