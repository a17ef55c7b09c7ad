// SPDX-License-Identifier: MIT
// What every op builder shares: the error that names the op, the shapes and the types,
// and the one call that makes the result node. A builder checks everything first, then
// calls new_op once, so a rejected call leaves the context as it found it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gk/context.hpp"
#include "gk/core/error.hpp"
#include "gk/tensor.hpp"

namespace gk::detail {

// "gk: mul_mat: a->ne[0] (4096) != b->ne[0] (4095); a: 'w' q4_0 [4096, ...], b: f32 [...]"
[[noreturn]] inline void op_error(op o, std::string_view why,
                                  std::initializer_list<std::pair<const char*, const tensor*>> srcs = {}) {
  std::string s = "gk: " + std::string(name(o)) + ": " + std::string(why);
  bool first = true;
  for (auto& [n, t] : srcs) {
    s += first ? "; " : ", ";
    s += std::string(n) + ": " + describe(t);
    first = false;
  }
  throw error(s);
}

inline void require(bool ok, op o, std::string_view why,
                    std::initializer_list<std::pair<const char*, const tensor*>> srcs = {}) {
  if (!ok) op_error(o, why, srcs);
}

inline void require_tensors(op o, std::initializer_list<std::pair<const char*, const tensor*>> srcs) {
  for (auto& [n, t] : srcs)
    if (!t) op_error(o, std::string(n) + " is null");
}

// Sets context::building for the duration of one builder, so an arena error names the op.
struct building_op {
  context& ctx;
  std::string_view saved;
  building_op(context& c, op o) : ctx(c), saved(c.building) { c.building = name(o); }
  ~building_op() { ctx.building = saved; }
};

// The result node: a fresh tensor (or, when inplace_of is given, a view of it that the op
// writes through), with op and sources set.
inline tensor* new_op(context& ctx, op o, gk::type t, const std::int64_t* ne, std::initializer_list<tensor*> srcs,
                      tensor* inplace_of = nullptr) {
  building_op guard(ctx, o);
  if (srcs.size() > static_cast<std::size_t>(max_src)) op_error(o, "too many sources");
  tensor* r = inplace_of ? ctx.view_tensor(inplace_of) : ctx.new_tensor(t, max_dims, ne);
  r->op = o;
  int i = 0;
  for (tensor* s : srcs) r->src[i++] = s;
  return r;
}

inline std::string dims(const tensor* t) { return shape_string(t->ne); }
inline std::string num(std::int64_t v) { return std::to_string(v); }

}  // namespace gk::detail
