// SPDX-License-Identifier: MIT
// Views: reshape, view_1d..4d, permute, transpose. Each is a node that aliases its
// source's storage (view_src, view_offs) with new ne/nb, made at build time; computing it
// does nothing. A view of a view points at the base tensor, so lifetimes and offsets
// resolve in one step. Every view is checked to stay inside the storage it aliases.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gk/ops/common.hpp"

namespace gk {

namespace detail {

// Bytes spanned by a view of `t`'s type with shape ne and strides nb (the nbytes rule).
inline std::size_t span_bytes(gk::type t, const std::int64_t* ne, const std::size_t* nb) {
  for (int i = 0; i < max_dims; ++i)
    if (ne[i] <= 0) return 0;
  const auto bs = static_cast<std::size_t>(gk::block_size(t));
  std::size_t n = bs == 1 ? gk::type_size(t) : static_cast<std::size_t>(ne[0]) * nb[0] / bs;
  for (int i = bs == 1 ? 0 : 1; i < max_dims; ++i) n += static_cast<std::size_t>(ne[i] - 1) * nb[i];
  return n;
}

inline tensor* make_view(context& ctx, op o, tensor* a, const std::int64_t* ne, const std::size_t* nb,
                         std::size_t offset) {
  require_tensors(o, {{"a", a}});
  const tensor* base = a->view_src ? a->view_src : a;
  const std::size_t base_offs = a->view_src ? a->view_offs : 0;
  const std::size_t need = span_bytes(a->type, ne, nb);
  if (need && base_offs + offset + need > base->nbytes())
    op_error(o,
             "the view " + shape_string(ne) + " at offset " + num(static_cast<std::int64_t>(offset)) + " spans " +
                 num(static_cast<std::int64_t>(need)) + " bytes, past the end of its storage (" +
                 num(static_cast<std::int64_t>(base->nbytes() - base_offs)) + " bytes from the view's start)",
             {{"a", a}});
  building_op guard(ctx, o);
  tensor* r = ctx.new_tensor(a->type, max_dims, ne, a, offset);
  for (int i = 0; i < max_dims; ++i) r->nb[i] = nb[i];
  r->op = o;
  r->src[0] = a;
  return r;
}

inline void name_view(tensor* r, const tensor* a, std::string_view suffix) {
  std::string n = std::string(a->get_name()) + " (" + std::string(suffix) + ")";
  r->set_name(n);
}

}  // namespace detail

// ---- reshape: same elements, new shape; the source must be contiguous ----

inline tensor* reshape_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                          std::int64_t ne3) {
  using namespace detail;
  require_tensors(op::reshape, {{"a", a}});
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  require(a->is_contiguous(), op::reshape, "the source must be contiguous (cont() it first)", {{"a", a}});
  require(ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0 && ne0 * ne1 * ne2 * ne3 == a->nelements(), op::reshape,
          "cannot reshape " + num(a->nelements()) + " elements to " + shape_string(ne), {{"a", a}});
  require(ne0 % gk::block_size(a->type) == 0, op::reshape,
          "ne0 " + num(ne0) + " is not whole blocks of " + std::string(gk::name(a->type)), {{"a", a}});
  std::size_t nb[4];
  nb[0] = gk::type_size(a->type);
  nb[1] = gk::row_size(a->type, ne0);
  nb[2] = nb[1] * static_cast<std::size_t>(ne1);
  nb[3] = nb[2] * static_cast<std::size_t>(ne2);
  tensor* r = make_view(ctx, op::reshape, a, ne, nb, 0);
  name_view(r, a, "reshaped");
  return r;
}
inline tensor* reshape_1d(context& ctx, tensor* a, std::int64_t ne0) { return reshape_4d(ctx, a, ne0, 1, 1, 1); }
inline tensor* reshape_2d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1) {
  return reshape_4d(ctx, a, ne0, ne1, 1, 1);
}
inline tensor* reshape_3d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2) {
  return reshape_4d(ctx, a, ne0, ne1, ne2, 1);
}
// Reshape `a` to the shape of `b` (b's layout does not matter).
inline tensor* reshape(context& ctx, tensor* a, const tensor* b) {
  detail::require_tensors(op::reshape, {{"a", a}, {"b", b}});
  return reshape_4d(ctx, a, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}

// ---- view_Nd: a window of `a` with explicit strides, `offset` bytes from a's start ----

inline tensor* view_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                       std::int64_t ne3, std::size_t nb1, std::size_t nb2, std::size_t nb3, std::size_t offset) {
  using namespace detail;
  require_tensors(op::view, {{"a", a}});
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  require(ne0 >= 0 && ne1 >= 0 && ne2 >= 0 && ne3 >= 0, op::view, "negative dimension in " + shape_string(ne),
          {{"a", a}});
  require(ne0 % gk::block_size(a->type) == 0, op::view,
          "ne0 " + num(ne0) + " is not whole blocks of " + std::string(gk::name(a->type)), {{"a", a}});
  const std::size_t nb[4] = {gk::type_size(a->type), nb1, nb2, nb3};
  tensor* r = make_view(ctx, op::view, a, ne, nb, offset);
  std::memcpy(r->op_params, &offset, sizeof offset);
  name_view(r, a, "view");
  return r;
}
inline tensor* view_1d(context& ctx, tensor* a, std::int64_t ne0, std::size_t offset) {
  const std::size_t rb = gk::row_size(a ? a->type : gk::type::f32, ne0);
  return view_4d(ctx, a, ne0, 1, 1, 1, rb, rb, rb, offset);
}
inline tensor* view_2d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::size_t nb1,
                       std::size_t offset) {
  return view_4d(ctx, a, ne0, ne1, 1, 1, nb1, nb1 * static_cast<std::size_t>(ne1),
                 nb1 * static_cast<std::size_t>(ne1), offset);
}
inline tensor* view_3d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                       std::size_t nb1, std::size_t nb2, std::size_t offset) {
  return view_4d(ctx, a, ne0, ne1, ne2, 1, nb1, nb2, nb2 * static_cast<std::size_t>(ne2), offset);
}

// ---- permute: source axis i becomes axis (axis_i) of the result ----

inline tensor* permute(context& ctx, tensor* a, int axis0, int axis1, int axis2, int axis3) {
  using namespace detail;
  require_tensors(op::permute, {{"a", a}});
  const int ax[4] = {axis0, axis1, axis2, axis3};
  bool seen[4] = {};
  for (int v : ax) {
    require(v >= 0 && v < 4 && !seen[v], op::permute,
            "axes (" + num(axis0) + ", " + num(axis1) + ", " + num(axis2) + ", " + num(axis3) +
                ") are not a permutation of 0..3",
            {{"a", a}});
    seen[v] = true;
  }
  std::int64_t ne[4];
  std::size_t nb[4];
  for (int i = 0; i < 4; ++i) {
    ne[ax[i]] = a->ne[i];
    nb[ax[i]] = a->nb[i];
  }
  building_op guard(ctx, op::permute);
  tensor* r = ctx.view_tensor(a);
  for (int i = 0; i < 4; ++i) {
    r->ne[i] = ne[i];
    r->nb[i] = nb[i];
  }
  r->op = op::permute;
  r->src[0] = a;
  const std::int32_t p[4] = {axis0, axis1, axis2, axis3};
  r->set_params(p, sizeof p);
  name_view(r, a, "permuted");
  return r;
}

// ---- transpose: swap the first two axes ----

inline tensor* transpose(context& ctx, tensor* a) {
  using namespace detail;
  require_tensors(op::transpose, {{"a", a}});
  building_op guard(ctx, op::transpose);
  tensor* r = ctx.view_tensor(a);
  r->ne[0] = a->ne[1];
  r->ne[1] = a->ne[0];
  r->nb[0] = a->nb[1];
  r->nb[1] = a->nb[0];
  r->op = op::transpose;
  r->src[0] = a;
  name_view(r, a, "transposed");
  return r;
}

}  // namespace gk
