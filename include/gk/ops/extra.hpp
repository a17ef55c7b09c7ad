// SPDX-License-Identifier: MIT
// Op builders for every op outside the core families: backward ops, convolution and
// pooling, resampling and padding, state-space and linear-attention recurrences, losses,
// optimiser steps and custom ops. The CPU pass does not compute these (compute.hpp
// reports them unsupported); the builders exist so a graph that names them can be built,
// planned and handed to a backend that does.
//
// Each builder keeps the reference's name, argument order, result type and shape, source
// slots and op_params layout (tests/vs_ggml/ops/test_builders.cpp compares all of them
// against the reference). Where the reference asserts, gk throws gk::error; gk also
// rejects a few inputs the reference lets through into nonsense, each marked "gk:" below
// (a zero stride that would divide by zero, a parameter that does not fit the int32 slot
// it is stored in, a result dimension that comes out negative).
//
// Composites the reference builds from several ops are not here when they need mul_mat
// (conv_1d, conv_1d_dw, conv_2d, conv_2d_dw, conv_3d and their _ph/_sk variants): they
// are im2col below plus mul_mat, reshape and permute, and belong with mul_mat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "gk/ops/common.hpp"

namespace gk {

// Pooling kind, as the reference's enum ggml_op_pool (stored in op_params[0]).
enum class pool_op : std::int32_t { max = 0, avg = 1, count };

// Resampling mode, as the reference's enum ggml_scale_mode; the low byte is the mode and
// the flags below may be or-ed into it (interpolate takes the combined word).
enum class scale_mode : std::uint32_t { nearest = 0, bilinear = 1, bicubic = 2, count };
inline constexpr std::uint32_t scale_flag_align_corners = 1u << 8;
inline constexpr std::uint32_t scale_flag_antialias = 1u << 9;

// The reference's GGML_N_TASKS_MAX: a custom op that runs on every thread.
inline constexpr int n_tasks_max = -1;

// Custom-op callbacks. gk::tensor is ggml_tensor byte for byte, so these are the
// reference's ggml_custom{1,2,3}_op_t / ggml_custom_op_t with gk's tensor type.
using custom1_fn = void (*)(tensor* dst, const tensor* a, int ith, int nth, void* userdata);
using custom2_fn = void (*)(tensor* dst, const tensor* a, const tensor* b, int ith, int nth, void* userdata);
using custom3_fn = void (*)(tensor* dst, const tensor* a, const tensor* b, const tensor* c, int ith, int nth,
                            void* userdata);
using custom_fn = void (*)(tensor* dst, int ith, int nth, void* userdata);

// What a custom op keeps in op_params, laid out as the reference's
// ggml_map_custom*_op_params / ggml_custom_op_params (24 bytes on LP64; gk zeroes the
// four padding bytes after n_tasks, the reference leaves them unspecified).
template <class Fn>
struct custom_params {
  Fn fun;
  int n_tasks;
  void* userdata;
};
static_assert(sizeof(custom_params<custom1_fn>) <= max_op_params);

namespace detail::extra {

using i64 = std::int64_t;

inline bool fits_i32(i64 v) {
  return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max();
}
inline bool is_vector(const tensor* t) { return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
inline bool is_matrix(const tensor* t) { return t->ne[2] == 1 && t->ne[3] == 1; }
inline bool is_3d(const tensor* t) { return t->ne[3] == 1; }
inline bool is_scalar(const tensor* t) { return t->ne[0] == 1 && is_vector(t); }
inline bool same(const tensor* a, const tensor* b) { return a->same_shape(*b); }

// Output length of a convolution over `ins` with kernel `ks`, stride s, padding p,
// dilation d (the reference's ggml_calc_conv_output_size).
inline i64 conv_out(i64 ins, i64 ks, int s, int p, int d) { return (ins + 2 * i64{p} - i64{d} * (ks - 1) - 1) / s + 1; }

// Output length of a pool. The reference computes it in float (p is a float) and
// truncates after adding 1; the same arithmetic is kept so sizes agree at every edge.
inline i64 pool_out(i64 ins, int ks, int s, float p) {
  return static_cast<i64>((static_cast<float>(ins) + 2 * p - static_cast<float>(ks)) / static_cast<float>(s) + 1);
}

inline std::string shape(const i64* ne) { return shape_string(ne); }

// The result node: type t, shape ne (all four dims), sources srcs; a view of inplace_of
// when given. Every builder calls this once, after all its checks.
inline tensor* make(context& ctx, op o, gk::type t, const i64* ne, std::initializer_list<tensor*> srcs,
                    tensor* inplace_of = nullptr) {
  for (int i = 0; i < max_dims; ++i)
    require(ne[i] >= 0, o, "the result shape " + shape(ne) + " has a negative dimension");
  return new_op(ctx, o, t, ne, srcs, inplace_of);
}

inline void set_i32s(tensor* r, std::initializer_list<std::int32_t> v) {
  int i = 0;
  for (std::int32_t x : v) r->set_param_i32(i++, x);
}

// The shared part of rope_ext_back / rope_multi_back: the reference builds a forward rope
// node and relabels it, so the checks and the 16 op_params slots are rope's.
inline tensor* rope_back(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, const int* sections, int mode,
                         int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                         float beta_fast, float beta_slow) {
  const op o = op::rope_back;
  require_tensors(o, {{"a", a}, {"b", b}});
  require((mode & 1) == 0, o, "mode & 1 is no longer supported (mode " + num(mode) + ")");
  require(is_vector(b) && b->type == gk::type::i32, o, "positions b must be an i32 vector", {{"a", a}, {"b", b}});
  const bool mrope = (mode & rope_type_mrope) != 0;
  require(mrope ? a->ne[2] * 4 == b->ne[0] : a->ne[2] == b->ne[0], o,
          mrope ? "multi-rope needs 4 positions per token: b->ne[0] must be 4 * a->ne[2]"
                : "b->ne[0] must equal a->ne[2] (one position per token)",
          {{"a", a}, {"b", b}});
  if (c)
    require(c->type == gk::type::f32 && c->ne[0] >= n_dims / 2, o,
            "frequency factors c must be f32 with at least n_dims/2 (" + num(n_dims / 2) + ") entries",
            {{"a", a}, {"c", c}});
  tensor* r = make(ctx, o, a->type, a->ne, {a, b, c});
  std::int32_t p[16] = {0, n_dims, mode, 0, n_ctx_orig};
  std::memcpy(p + 5, &freq_base, 4);
  std::memcpy(p + 6, &freq_scale, 4);
  std::memcpy(p + 7, &ext_factor, 4);
  std::memcpy(p + 8, &attn_factor, 4);
  std::memcpy(p + 9, &beta_fast, 4);
  std::memcpy(p + 10, &beta_slow, 4);
  if (mrope && sections) std::memcpy(p + 11, sections, 4 * sizeof(int));
  r->set_params(p, sizeof p);
  return r;
}

inline tensor* set_impl(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                        std::size_t offset, bool inplace) {
  const op o = op::set;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->nelements() >= b->nelements(), o, "b has more elements than a", {{"a", a}, {"b", b}});
  require(offset < (std::size_t{1} << 30), o, "offset " + num(static_cast<i64>(offset)) + " must be below 2^30");
  // gk: the strides are stored as int32 as the reference stores them; one that does not
  // fit would be silently cut there.
  for (std::size_t s : {nb1, nb2, nb3})
    require(s <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), o,
            "stride " + num(static_cast<i64>(s)) + " does not fit the int32 op parameter");
  // gk: b, laid out with a's element size and the given strides at offset, must stay in a.
  if (!b->is_empty() && gk::block_size(a->type) == 1) {
    const std::size_t span = gk::type_size(a->type) * static_cast<std::size_t>(b->ne[0]) +
                             (b->ne[1] - 1) * nb1 + (b->ne[2] - 1) * nb2 + (b->ne[3] - 1) * nb3;
    require(offset + span <= a->nbytes(), o,
            "b written at offset " + num(static_cast<i64>(offset)) + " with strides (" + num(static_cast<i64>(nb1)) +
                ", " + num(static_cast<i64>(nb2)) + ", " + num(static_cast<i64>(nb3)) + ") runs past a",
            {{"a", a}, {"b", b}});
  }
  tensor* r = make(ctx, o, a->type, a->ne, {a, b}, inplace ? a : nullptr);
  set_i32s(r, {static_cast<std::int32_t>(nb1), static_cast<std::int32_t>(nb2), static_cast<std::int32_t>(nb3),
               static_cast<std::int32_t>(offset), inplace ? 1 : 0});
  return r;
}

template <class Fn>
inline void store_custom(tensor* r, Fn fun, int n_tasks, void* userdata) {
  custom_params<Fn> p{};
  std::memset(&p, 0, sizeof p);
  p.fun = fun;
  p.n_tasks = n_tasks;
  p.userdata = userdata;
  r->set_params(&p, sizeof p);
}

inline void check_n_tasks(op o, int n_tasks) {
  require(n_tasks == n_tasks_max || n_tasks > 0, o,
          "n_tasks must be positive or n_tasks_max (-1), got " + num(n_tasks));
}

}  // namespace detail::extra

// ======================================================================================
// Backward ops
// ======================================================================================

// Sum a (the gradient of repeat(b)) back down to b's shape. Result: a's type, b's shape.
inline tensor* repeat_back(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::repeat_back, {{"a", a}, {"b", b}});
  require(b->can_repeat_to(*a), op::repeat_back, "a must be a whole repetition of b's shape", {{"a", a}, {"b", b}});
  return extra::make(ctx, op::repeat_back, a->type, b->ne, {a});
}

// Gradient of silu: a is the incoming gradient, b the forward input (same shapes).
inline tensor* silu_back(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  require_tensors(op::silu_back, {{"a", a}, {"b", b}});
  // gk: the reference's kernel asserts this; its builder does not.
  require(extra::same(a, b), op::silu_back, "a and b must have the same shape", {{"a", a}, {"b", b}});
  return extra::make(ctx, op::silu_back, a->type, a->ne, {a, b});
}

// Gradient of rms_norm: a is the incoming gradient, b the forward input. op_params: eps.
inline tensor* rms_norm_back(context& ctx, tensor* a, tensor* b, float eps) {
  using namespace detail;
  require_tensors(op::rms_norm_back, {{"a", a}, {"b", b}});
  require(extra::same(a, b), op::rms_norm_back, "a and b must have the same shape", {{"a", a}, {"b", b}});
  tensor* r = extra::make(ctx, op::rms_norm_back, a->type, a->ne, {a, b});
  r->set_param_f32(0, eps);
  return r;
}

// Gradient of get_rows: scatter-add the rows of a to positions b (i32) in a matrix shaped
// like c. Result: f32 [c->ne[0], c->ne[1]]; sources a, b (c only gives the shape).
inline tensor* get_rows_back(context& ctx, tensor* a, tensor* b, tensor* c) {
  using namespace detail;
  const op o = op::get_rows_back;
  require_tensors(o, {{"a", a}, {"b", b}, {"c", c}});
  require(extra::is_matrix(a) && extra::is_vector(b) && b->type == gk::type::i32, o,
          "a must be a matrix and b an i32 vector", {{"a", a}, {"b", b}});
  require(extra::is_matrix(c) && a->ne[0] == c->ne[0], o, "c must be a matrix with a's row length",
          {{"a", a}, {"c", c}});
  const std::int64_t ne[4] = {c->ne[0], c->ne[1], 1, 1};
  return extra::make(ctx, o, gk::type::f32, ne, {a, b});
}

// Gradient of soft_max_ext: a is the incoming gradient, b the forward output.
// op_params: scale, max_bias (f32).
inline tensor* soft_max_ext_back_impl(context& ctx, tensor* a, tensor* b, float scale, float max_bias, bool inplace) {
  using namespace detail;
  const op o = op::soft_max_back;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(extra::same(a, b), o, "a and b must have the same shape", {{"a", a}, {"b", b}});
  tensor* r = extra::make(ctx, o, a->type, a->ne, {a, b}, inplace ? a : nullptr);
  r->set_param_f32(0, scale);
  r->set_param_f32(1, max_bias);
  return r;
}
inline tensor* soft_max_ext_back(context& ctx, tensor* a, tensor* b, float scale, float max_bias) {
  return soft_max_ext_back_impl(ctx, a, b, scale, max_bias, false);
}
inline tensor* soft_max_ext_back_inplace(context& ctx, tensor* a, tensor* b, float scale, float max_bias) {
  return soft_max_ext_back_impl(ctx, a, b, scale, max_bias, true);
}

// Gradient of rope: rope's checks and op_params, op rope_back.
inline tensor* rope_ext_back(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, int mode, int n_ctx_orig,
                             float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                             float beta_slow) {
  return detail::extra::rope_back(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                                  attn_factor, beta_fast, beta_slow);
}
inline tensor* rope_multi_back(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, const int sections[4],
                               int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                               float attn_factor, float beta_fast, float beta_slow) {
  return detail::extra::rope_back(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale,
                                  ext_factor, attn_factor, beta_fast, beta_slow);
}

// Gradient of flash attention. The reference aborts in this builder ("adapt to
// flash_attn_ext changes") and keeps the old shape rules after the abort; gk builds the
// node by those rules so a graph can name it. The result packs the gradients of q, k and v,
// each padded to 16 bytes (the reference's GGML_MEM_ALIGN on 64-bit hosts), in one f32
// vector. op_params: masked (i32).
inline tensor* flash_attn_back(context& ctx, tensor* q, tensor* k, tensor* v, tensor* d, bool masked) {
  using namespace detail;
  const op o = op::flash_attn_back;
  require_tensors(o, {{"q", q}, {"k", k}, {"v", v}, {"d", d}});
  const std::int64_t D = q->ne[0], N = q->ne[1], M = k->ne[1], ne2 = q->ne[2], ne3 = q->ne[3], kvne2 = k->ne[2];
  require(k->ne[0] == D && kvne2 > 0 && k->ne[3] > 0 && ne2 % kvne2 == 0 && q->ne[3] % k->ne[3] == 0, o,
          "k must have q's head size and broadcast over q", {{"q", q}, {"k", k}});
  require(v->ne[0] == M && v->ne[1] == D && v->ne[2] == kvne2 && v->ne[3] == ne3 && k->ne[3] == ne3, o,
          "v must be [M, D, k->ne[2], q->ne[3]] (transposed values)", {{"k", k}, {"v", v}});
  require(d->ne[0] == D && d->ne[1] == N && d->ne[2] == ne2 && d->ne[3] == ne3, o, "d must have q's shape",
          {{"q", q}, {"d", d}});
  constexpr std::size_t align = 16, ts = sizeof(float);
  auto pad = [](std::size_t n) { return (n + align - 1) / align * align; };
  const std::size_t end = pad(static_cast<std::size_t>(q->nelements()) * ts) +
                          pad(static_cast<std::size_t>(k->nelements()) * ts) +
                          pad(static_cast<std::size_t>(v->nelements()) * ts);
  const std::int64_t ne[4] = {static_cast<std::int64_t>((end + ts - 1) / ts), 1, 1, 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {q, k, v, d});
  r->set_param_i32(0, masked ? 1 : 0);
  return r;
}

// Gradient of cross_entropy_loss: a the scalar loss gradient, b the logits, c the labels.
inline tensor* cross_entropy_loss_back(context& ctx, tensor* a, tensor* b, tensor* c) {
  using namespace detail;
  const op o = op::cross_entropy_loss_back;
  require_tensors(o, {{"a", a}, {"b", b}, {"c", c}});
  require(extra::is_scalar(a), o, "a (the loss gradient) must be a scalar", {{"a", a}});
  require(extra::same(b, c), o, "logits b and labels c must have the same shape", {{"b", b}, {"c", c}});
  return extra::make(ctx, o, b->type, b->ne, {a, b, c});
}

// ======================================================================================
// set, diag
// ======================================================================================

// Copy of a with b written into it at byte `offset` using strides nb1..nb3 (b's elements
// in a's type). op_params: nb1, nb2, nb3, offset, inplace (i32).
inline tensor* set(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                   std::size_t offset) {
  return detail::extra::set_impl(ctx, a, b, nb1, nb2, nb3, offset, false);
}
inline tensor* set_inplace(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                           std::size_t offset) {
  return detail::extra::set_impl(ctx, a, b, nb1, nb2, nb3, offset, true);
}
inline tensor* set_1d(context& ctx, tensor* a, tensor* b, std::size_t offset) {
  detail::require_tensors(op::set, {{"a", a}, {"b", b}});
  return detail::extra::set_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false);
}
inline tensor* set_1d_inplace(context& ctx, tensor* a, tensor* b, std::size_t offset) {
  detail::require_tensors(op::set, {{"a", a}, {"b", b}});
  return detail::extra::set_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true);
}
inline tensor* set_2d(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t offset) {
  detail::require_tensors(op::set, {{"a", a}, {"b", b}});
  return detail::extra::set_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false);
}
inline tensor* set_2d_inplace(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t offset) {
  detail::require_tensors(op::set, {{"a", a}, {"b", b}});
  return detail::extra::set_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true);
}

// A row vector a [n, 1, ne2, ne3] spread onto the diagonal of [n, n, ne2, ne3].
inline tensor* diag(context& ctx, tensor* a) {
  using namespace detail;
  require_tensors(op::diag, {{"a", a}});
  require(a->ne[1] == 1, op::diag, "a must be a row vector per matrix (ne[1] == 1)", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0], a->ne[0], a->ne[2], a->ne[3]};
  return extra::make(ctx, op::diag, a->type, ne, {a});
}

// ======================================================================================
// Convolution: im2col and the direct convolutions
// ======================================================================================

// Unfold b under kernel a into columns: 2D gives [IC*KH*KW, OW, OH, N], 1D gives
// [IC*K, OW, N, 1], in dst_type. op_params: s0, s1, p0, p1, d0, d1, is_2D (i32).
inline tensor* im2col(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D,
                      gk::type dst_type) {
  using namespace detail;
  const op o = op::im2col;
  require_tensors(o, {{"a", a}, {"b", b}});
  if (is_2D)
    require(a->ne[2] == b->ne[2], o, "kernel a and input b must have the same channel count (ne[2])",
            {{"a", a}, {"b", b}});
  else
    require(b->ne[1] == a->ne[1] && b->ne[3] == 1, o,
            "1D: kernel a and input b must have the same channel count (ne[1]) and b->ne[3] == 1", {{"a", a}, {"b", b}});
  // gk: a zero stride or dilation divides by zero in the size rule.
  require(s0 > 0 && d0 > 0 && (!is_2D || (s1 > 0 && d1 > 0)), o, "strides and dilations must be positive");
  const std::int64_t OH = is_2D ? extra::conv_out(b->ne[1], a->ne[1], s1, p1, d1) : 0;
  const std::int64_t OW = extra::conv_out(b->ne[0], a->ne[0], s0, p0, d0);
  require((!is_2D || OH > 0) && OW > 0, o, "input b is too small for kernel a", {{"a", a}, {"b", b}});
  const std::int64_t ne[4] = {is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0], OW,
                              is_2D ? OH : b->ne[2], is_2D ? b->ne[3] : 1};
  tensor* r = extra::make(ctx, o, dst_type, ne, {a, b});
  extra::set_i32s(r, {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0});
  return r;
}

// Gradient of im2col: a the column gradient, b the kernel, ne the input's shape (f32).
inline tensor* im2col_back(context& ctx, tensor* a, tensor* b, const std::int64_t* ne, int s0, int s1, int p0, int p1,
                           int d0, int d1, bool is_2D) {
  using namespace detail;
  const op o = op::im2col_back;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(ne != nullptr, o, "the input shape ne is null");
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a, b});
  extra::set_i32s(r, {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0});
  return r;
}

// 3D unfold: a [KW, KH, KD, OC*IC], b [IW, IH, ID, N*IC] -> [KW*KH*KD*IC, OW, OH, OD*N].
// op_params: s0, s1, s2, p0, p1, p2, d0, d1, d2, IC (i32).
inline tensor* im2col_3d(context& ctx, tensor* a, tensor* b, std::int64_t IC, int s0, int s1, int s2, int p0, int p1,
                         int p2, int d0, int d1, int d2, gk::type dst_type) {
  using namespace detail;
  const op o = op::im2col_3d;
  require_tensors(o, {{"a", a}, {"b", b}});
  // gk: the reference divides b->ne[3] by IC without checking; a remainder would drop images.
  require(IC > 0 && extra::fits_i32(IC) && b->ne[3] % IC == 0, o,
          "IC (" + num(IC) + ") must be positive, fit int32 and divide b->ne[3]", {{"b", b}});
  require(s0 > 0 && s1 > 0 && s2 > 0 && d0 > 0 && d1 > 0 && d2 > 0, o, "strides and dilations must be positive");
  const std::int64_t N = b->ne[3] / IC;
  const std::int64_t OD = extra::conv_out(b->ne[2], a->ne[2], s2, p2, d2);
  const std::int64_t OH = extra::conv_out(b->ne[1], a->ne[1], s1, p1, d1);
  const std::int64_t OW = extra::conv_out(b->ne[0], a->ne[0], s0, p0, d0);
  require(OD > 0 && OH > 0 && OW > 0, o, "input b is too small for kernel a", {{"a", a}, {"b", b}});
  const std::int64_t ne[4] = {a->ne[0] * a->ne[1] * a->ne[2] * IC, OW, OH, OD * N};
  tensor* r = extra::make(ctx, o, dst_type, ne, {a, b});
  extra::set_i32s(r, {s0, s1, s2, p0, p1, p2, d0, d1, d2, static_cast<std::int32_t>(IC)});
  return r;
}

// Fold columns back into a 1D signal: a [K*oc, T_in] -> [T_out, oc] with
// T_out = (T_in - 1)*s0 + K - 2*p0. op_params: s0, oc, p0 (i32).
inline tensor* col2im_1d(context& ctx, tensor* a, int s0, int oc, int p0) {
  using namespace detail;
  const op o = op::col2im_1d;
  require_tensors(o, {{"a", a}});
  require(extra::is_matrix(a) && a->is_contiguous(), o, "a must be a contiguous matrix", {{"a", a}});
  require(a->type == gk::type::f32 || a->type == gk::type::f16 || a->type == gk::type::bf16, o,
          "a must be f32, f16 or bf16", {{"a", a}});
  require(s0 > 0 && oc > 0 && p0 >= 0, o, "need s0 > 0, oc > 0, p0 >= 0");
  const std::int64_t K = a->ne[0] / oc;
  const std::int64_t T_out = (a->ne[1] - 1) * s0 + K - 2 * std::int64_t{p0};
  require(a->ne[0] == K * oc, o, "a->ne[0] must be a whole number of oc (" + num(oc) + ") blocks", {{"a", a}});
  require(K > 0 && T_out > 0, o, "the output length " + num(T_out) + " is not positive", {{"a", a}});
  const std::int64_t ne[4] = {T_out, oc, 1, 1};
  tensor* r = extra::make(ctx, o, a->type, ne, {a});
  extra::set_i32s(r, {s0, oc, p0});
  return r;
}

// 1D transposed convolution: a [K, OC, IC, 1], b [L, IC] -> f32 [(L-1)*s0 + K, OC, b->ne[2]].
// Only p0 == 0 and d0 == 1, as the reference. op_params: s0, p0, d0 (i32).
inline tensor* conv_transpose_1d(context& ctx, tensor* a, tensor* b, int s0, int p0, int d0) {
  using namespace detail;
  const op o = op::conv_transpose_1d;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(extra::is_matrix(b), o, "input b must be a matrix", {{"b", b}});
  require(a->ne[2] == b->ne[1] && a->ne[3] == 1, o, "kernel a must be [K, OC, IC, 1] with IC == b->ne[1]",
          {{"a", a}, {"b", b}});
  require(p0 == 0 && d0 == 1, o, "only p0 == 0 and d0 == 1 are supported");
  require(s0 > 0, o, "stride must be positive");  // gk
  const std::int64_t ne[4] = {(b->ne[0] - 1) * s0 + a->ne[0], a->ne[1], b->ne[2], 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a, b});
  extra::set_i32s(r, {s0, p0, d0});
  return r;
}

// Direct 2D convolution (op conv_2d): kernel a [KW, KH, IC, OC], input b [W, H, IC, N]
// -> [OW, OH, OC, N] in b's type. op_params: s0, s1, p0, p1, d0, d1 (i32).
inline tensor* conv_2d_direct(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
  using namespace detail;
  const op o = op::conv_2d;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[2] == b->ne[2], o, "kernel a and input b must have the same channel count (ne[2])",
          {{"a", a}, {"b", b}});
  require(s0 > 0 && s1 > 0 && d0 > 0 && d1 > 0, o, "strides and dilations must be positive");
  const std::int64_t ne[4] = {extra::conv_out(b->ne[0], a->ne[0], s0, p0, d0),
                              extra::conv_out(b->ne[1], a->ne[1], s1, p1, d1), a->ne[3], b->ne[3]};
  tensor* r = extra::make(ctx, o, b->type, ne, {a, b});
  extra::set_i32s(r, {s0, s1, p0, p1, d0, d1});
  return r;
}

// Direct 3D convolution (op conv_3d): kernel a [KW, KH, KD, c*oc], input b [W, H, D, c*n]
// -> f32 [OW, OH, OD, oc*n]. op_params: s0..s2, p0..p2, d0..d2, c, n, oc (i32).
inline tensor* conv_3d_direct(context& ctx, tensor* a, tensor* b, int s0, int s1, int s2, int p0, int p1, int p2,
                              int d0, int d1, int d2, int c, int n, int oc) {
  using namespace detail;
  const op o = op::conv_3d;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[3] == std::int64_t{c} * oc, o, "a->ne[3] must be c * oc (" + num(c) + " * " + num(oc) + ")",
          {{"a", a}});
  require(b->ne[3] == std::int64_t{c} * n, o, "b->ne[3] must be c * n (" + num(c) + " * " + num(n) + ")", {{"b", b}});
  require(s0 > 0 && s1 > 0 && s2 > 0 && d0 > 0 && d1 > 0 && d2 > 0, o, "strides and dilations must be positive");
  const std::int64_t ne[4] = {extra::conv_out(b->ne[0], a->ne[0], s0, p0, d0),
                              extra::conv_out(b->ne[1], a->ne[1], s1, p1, d1),
                              extra::conv_out(b->ne[2], a->ne[2], s2, p2, d2), std::int64_t{oc} * n};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a, b});
  extra::set_i32s(r, {s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc});
  return r;
}

// Direct depthwise 2D convolution (op conv_2d_dw): kernel a [KW, KH, 1, C], input b
// [W, H, C, N] -> [OW, OH, C, N] in b's type. When b is channels-innermost (a permuted
// CWHN tensor) the result is laid out the same way. op_params: s0, s1, p0, p1, d0, d1.
inline tensor* conv_2d_dw_direct(context& ctx, tensor* a, tensor* b, int stride0, int stride1, int pad0, int pad1,
                                 int dilation0, int dilation1) {
  using namespace detail;
  const op o = op::conv_2d_dw;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[2] == 1 && a->ne[3] == b->ne[2], o, "kernel a must be [KW, KH, 1, C] with C == b->ne[2]",
          {{"a", a}, {"b", b}});
  require(stride0 > 0 && stride1 > 0 && dilation0 > 0 && dilation1 > 0, o, "strides and dilations must be positive");
  const bool channels_inner =
      b->nb[0] > b->nb[2] && b->nb[1] > b->nb[0] && b->nb[2] == gk::type_size(b->type);
  if (channels_inner)
    require(gk::block_size(b->type) == 1, o, "a channels-innermost input must not be a block format", {{"b", b}});
  const std::int64_t ne[4] = {extra::conv_out(b->ne[0], a->ne[0], stride0, pad0, dilation0),
                              extra::conv_out(b->ne[1], a->ne[1], stride1, pad1, dilation1), b->ne[2], b->ne[3]};
  tensor* r = extra::make(ctx, o, b->type, ne, {a, b});
  if (channels_inner) {
    const std::size_t ts = gk::type_size(r->type);
    r->nb[0] = static_cast<std::size_t>(r->ne[2]) * ts;
    r->nb[1] = static_cast<std::size_t>(r->ne[0]) * r->nb[0];
    r->nb[2] = ts;
  }
  extra::set_i32s(r, {stride0, stride1, pad0, pad1, dilation0, dilation1});
  return r;
}

// 2D transposed convolution without padding: a [KW, KH, OC, IC], b [W, H, IC, N]
// -> f32 [(W-1)*s + KW, (H-1)*s + KH, OC, N]. op_params: stride (i32).
inline tensor* conv_transpose_2d_p0(context& ctx, tensor* a, tensor* b, int stride) {
  using namespace detail;
  const op o = op::conv_transpose_2d;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->ne[3] == b->ne[2], o, "kernel a->ne[3] must equal input b->ne[2] (input channels)", {{"a", a}, {"b", b}});
  require(stride > 0, o, "stride must be positive");  // gk
  const std::int64_t ne[4] = {(b->ne[0] - 1) * stride + a->ne[0], (b->ne[1] - 1) * stride + a->ne[1], a->ne[2],
                              b->ne[3]};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a, b});
  r->set_param_i32(0, stride);
  return r;
}

// ======================================================================================
// Pooling
// ======================================================================================

// op_params: op, k0, s0, p0 (i32). Result f32.
inline tensor* pool_1d(context& ctx, tensor* a, pool_op op_, int k0, int s0, int p0) {
  using namespace detail;
  const op o = op::pool_1d;
  require_tensors(o, {{"a", a}});
  require(s0 > 0, o, "stride must be positive");  // gk
  const std::int64_t ne[4] = {extra::pool_out(a->ne[0], k0, s0, static_cast<float>(p0)), a->ne[1], a->ne[2], a->ne[3]};
  require(ne[0] > 0, o, "the pooled length " + num(ne[0]) + " is not positive", {{"a", a}});
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a});
  extra::set_i32s(r, {static_cast<std::int32_t>(op_), k0, s0, p0});
  return r;
}

// op_params: op, k0, k1, s0, s1, p0, p1 (i32; the float paddings truncated, as the
// reference stores them). Result f32.
inline tensor* pool_2d(context& ctx, tensor* a, pool_op op_, int k0, int k1, int s0, int s1, float p0, float p1) {
  using namespace detail;
  const op o = op::pool_2d;
  require_tensors(o, {{"a", a}});
  require(s0 > 0 && s1 > 0, o, "strides must be positive");  // gk
  const std::int64_t ne[4] = {extra::pool_out(a->ne[0], k0, s0, p0), extra::pool_out(a->ne[1], k1, s1, p1), a->ne[2],
                              a->ne[3]};
  require(ne[0] > 0 && ne[1] > 0, o, "the pooled shape " + shape_string(ne) + " is not positive", {{"a", a}});
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a});
  extra::set_i32s(r, {static_cast<std::int32_t>(op_), k0, k1, s0, s1, static_cast<std::int32_t>(p0),
                      static_cast<std::int32_t>(p1)});
  return r;
}

// Gradient of pool_2d: a the output gradient, af the forward input (f32, af's shape).
inline tensor* pool_2d_back(context& ctx, tensor* a, tensor* af, pool_op op_, int k0, int k1, int s0, int s1, float p0,
                            float p1) {
  using namespace detail;
  const op o = op::pool_2d_back;
  require_tensors(o, {{"a", a}, {"af", af}});
  tensor* r = extra::make(ctx, o, gk::type::f32, af->ne, {a, af});
  extra::set_i32s(r, {static_cast<std::int32_t>(op_), k0, k1, s0, s1, static_cast<std::int32_t>(p0),
                      static_cast<std::int32_t>(p1)});
  return r;
}

// ======================================================================================
// Resampling, padding, rolling
// ======================================================================================

// Resample f32 a to [ne0, ne1, ne2, ne3]. op_params: mode (i32: mode | flags).
inline tensor* interpolate(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                           std::int64_t ne3, std::uint32_t mode) {
  using namespace detail;
  const op o = op::upscale;
  require_tensors(o, {{"a", a}});
  require((mode & 0xFF) < static_cast<std::uint32_t>(scale_mode::count), o,
          "unknown scale mode " + num(mode & 0xFF));
  require(!(mode & scale_flag_antialias) || (mode & 0xFF) == static_cast<std::uint32_t>(scale_mode::bilinear), o,
          "antialias is only implemented for bilinear");
  require(a->type == gk::type::f32, o, "a must be f32", {{"a", a}});
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  tensor* r = extra::make(ctx, o, a->type, ne, {a});
  r->set_param_i32(0, static_cast<std::int32_t>(mode));
  return r;
}
// Multiply the first two dimensions by scale_factor (> 1).
inline tensor* upscale(context& ctx, tensor* a, int scale_factor, scale_mode mode) {
  using namespace detail;
  require_tensors(op::upscale, {{"a", a}});
  require(scale_factor > 1, op::upscale, "scale_factor must be > 1, got " + num(scale_factor));
  return interpolate(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3],
                     static_cast<std::uint32_t>(mode));
}
inline tensor* upscale_ext(context& ctx, tensor* a, int ne0, int ne1, int ne2, int ne3, scale_mode mode) {
  return interpolate(ctx, a, ne0, ne1, ne2, ne3, static_cast<std::uint32_t>(mode));
}

// Pad each dimension with lp zeros before and rp after (circular: wrap around instead).
// op_params: lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular (i32).
inline tensor* pad_ext(context& ctx, tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3,
                       int rp3) {
  using namespace detail;
  const op o = op::pad;
  require_tensors(o, {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0] + lp0 + rp0, a->ne[1] + lp1 + rp1, a->ne[2] + lp2 + rp2,
                              a->ne[3] + lp3 + rp3};
  require(ne[0] >= 0 && ne[1] >= 0 && ne[2] >= 0 && ne[3] >= 0, o,
          "the padded shape " + shape_string(ne) + " has a negative dimension", {{"a", a}});
  tensor* r = extra::make(ctx, o, a->type, ne, {a});
  extra::set_i32s(r, {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, 0});
  return r;
}
inline tensor* pad_ext_circular(context& ctx, tensor* a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3,
                                int rp3) {
  tensor* r = pad_ext(ctx, a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3);
  r->set_param_i32(8, 1);
  return r;
}
inline tensor* pad(context& ctx, tensor* a, int p0, int p1, int p2, int p3) {
  return pad_ext(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}
inline tensor* pad_circular(context& ctx, tensor* a, int p0, int p1, int p2, int p3) {
  return pad_ext_circular(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}

// Mirror-pad dimension 0 by p0 before and p1 after (each < ne[0]). op_params: p0, p1.
inline tensor* pad_reflect_1d(context& ctx, tensor* a, int p0, int p1) {
  using namespace detail;
  const op o = op::pad_reflect_1d;
  require_tensors(o, {{"a", a}});
  require(p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0], o,
          "paddings (" + num(p0) + ", " + num(p1) + ") must be in [0, ne[0])", {{"a", a}});
  require(a->is_contiguous() && a->type == gk::type::f32, o, "a must be contiguous f32", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]};
  tensor* r = extra::make(ctx, o, a->type, ne, {a});
  extra::set_i32s(r, {p0, p1});
  return r;
}

// Rotate each dimension by shift_i (|shift_i| < ne[i]). op_params: the four shifts.
inline tensor* roll(context& ctx, tensor* a, int shift0, int shift1, int shift2, int shift3) {
  using namespace detail;
  const op o = op::roll;
  require_tensors(o, {{"a", a}});
  require(a->nb[0] == gk::type_size(a->type), o, "a's elements must be packed (nb[0] == element size)", {{"a", a}});
  const int sh[4] = {shift0, shift1, shift2, shift3};
  for (int i = 0; i < 4; ++i)
    require(std::abs(sh[i]) < a->ne[i], o, "|shift" + num(i) + "| = " + num(std::abs(sh[i])) + " must be < ne[" +
                                               num(i) + "]",
            {{"a", a}});
  tensor* r = extra::make(ctx, o, a->type, a->ne, {a});
  extra::set_i32s(r, {shift0, shift1, shift2, shift3});
  return r;
}

// Sinusoidal embedding of each timestep: f32 [dim, timesteps->ne[0]].
// op_params: dim, max_period (i32).
inline tensor* timestep_embedding(context& ctx, tensor* timesteps, int dim, int max_period) {
  using namespace detail;
  const op o = op::timestep_embedding;
  require_tensors(o, {{"timesteps", timesteps}});
  require(dim >= 0, o, "dim must not be negative");
  const std::int64_t ne[4] = {dim, timesteps->ne[0], 1, 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {timesteps});
  extra::set_i32s(r, {dim, max_period});
  return r;
}

// ======================================================================================
// Windows and relative positions (SAM)
// ======================================================================================

// Split f32 a [C, W, H, 1] into w x w windows (zero-padded): [C, w, w, npx*npy].
// op_params: npx, npy, w (i32).
inline tensor* win_part(context& ctx, tensor* a, int w) {
  using namespace detail;
  const op o = op::win_part;
  require_tensors(o, {{"a", a}});
  require(a->ne[3] == 1 && a->type == gk::type::f32, o, "a must be f32 with ne[3] == 1", {{"a", a}});
  require(w > 0, o, "window size must be positive");  // gk
  const std::int64_t px = (w - a->ne[1] % w) % w, py = (w - a->ne[2] % w) % w;
  const std::int64_t npx = (px + a->ne[1]) / w, npy = (py + a->ne[2]) / w;
  require(extra::fits_i32(npx * npy), o, "too many windows", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0], w, w, npx * npy};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a});
  extra::set_i32s(r, {static_cast<std::int32_t>(npx), static_cast<std::int32_t>(npy), w});
  return r;
}

// Reassemble windows into f32 [C, w0, h0]. op_params: w (i32).
inline tensor* win_unpart(context& ctx, tensor* a, int w0, int h0, int w) {
  using namespace detail;
  const op o = op::win_unpart;
  require_tensors(o, {{"a", a}});
  require(a->type == gk::type::f32, o, "a must be f32", {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0], w0, h0, 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {a});
  r->set_param_i32(0, w);
  return r;
}

// Relative position table: a [C, 2*qh - 1] -> f16 [C, kh, qh].
inline tensor* get_rel_pos(context& ctx, tensor* a, int qh, int kh) {
  using namespace detail;
  const op o = op::get_rel_pos;
  require_tensors(o, {{"a", a}});
  require(qh == kh, o, "qh (" + num(qh) + ") must equal kh (" + num(kh) + ")");
  require(2 * std::int64_t{qh} - 1 == a->ne[1], o, "a->ne[1] must be 2*qh - 1 = " + num(2 * std::int64_t{qh} - 1),
          {{"a", a}});
  const std::int64_t ne[4] = {a->ne[0], kh, qh, 1};
  return extra::make(ctx, o, gk::type::f16, ne, {a});
}

// a + the decomposed relative positions pw, ph. op_params: inplace (i32).
inline tensor* add_rel_pos_impl(context& ctx, tensor* a, tensor* pw, tensor* ph, bool inplace) {
  using namespace detail;
  const op o = op::add_rel_pos;
  require_tensors(o, {{"a", a}, {"pw", pw}, {"ph", ph}});
  require(extra::same(pw, ph), o, "pw and ph must have the same shape", {{"pw", pw}, {"ph", ph}});
  require(a->is_contiguous() && pw->is_contiguous() && ph->is_contiguous(), o, "a, pw and ph must be contiguous",
          {{"a", a}, {"pw", pw}, {"ph", ph}});
  require(pw->type == gk::type::f32 && ph->type == gk::type::f32, o, "pw and ph must be f32",
          {{"pw", pw}, {"ph", ph}});
  require(pw->ne[3] == a->ne[2] && pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1], o,
          "pw must be [k, q, q', a->ne[2]] with k*k == a->ne[0] and q*q' == a->ne[1]", {{"a", a}, {"pw", pw}});
  tensor* r = extra::make(ctx, o, a->type, a->ne, {a, pw, ph}, inplace ? a : nullptr);
  r->set_param_i32(0, inplace ? 1 : 0);
  return r;
}
inline tensor* add_rel_pos(context& ctx, tensor* a, tensor* pw, tensor* ph) {
  return add_rel_pos_impl(ctx, a, pw, ph, false);
}
inline tensor* add_rel_pos_inplace(context& ctx, tensor* a, tensor* pw, tensor* ph) {
  return add_rel_pos_impl(ctx, a, pw, ph, true);
}

// ======================================================================================
// State-space models and linear attention. Each recurrence returns its output rows
// followed by the new state, in one f32 tensor.
// ======================================================================================

// Mamba short convolution: sx [d_conv - 1 + n_t, d_inner, n_s], c [d_conv, d_inner]
// -> f32 [d_inner, n_t, n_s].
inline tensor* ssm_conv(context& ctx, tensor* sx, tensor* c) {
  using namespace detail;
  const op o = op::ssm_conv;
  require_tensors(o, {{"sx", sx}, {"c", c}});
  require(extra::is_3d(sx) && extra::is_matrix(c), o, "sx must be 3D and c a matrix", {{"sx", sx}, {"c", c}});
  const std::int64_t n_t = sx->ne[0] - c->ne[0] + 1;
  require(sx->ne[1] == c->ne[1] && n_t >= 0, o, "sx must be [d_conv - 1 + n_t, d_inner, n_s] for c [d_conv, d_inner]",
          {{"sx", sx}, {"c", c}});
  const std::int64_t ne[4] = {c->ne[1], n_t, sx->ne[2], 1};
  return extra::make(ctx, o, gk::type::f32, ne, {sx, c});
}

// Mamba selective scan. Result: f32 vector of y (x's elements) then K state snapshots.
// op_params: K (i32).
inline tensor* ssm_scan(context& ctx, tensor* s, tensor* x, tensor* dt, tensor* A, tensor* B, tensor* C, tensor* ids,
                        std::int64_t K) {
  using namespace detail;
  const op o = op::ssm_scan;
  require_tensors(o, {{"s", s}, {"x", x}, {"dt", dt}, {"A", A}, {"B", B}, {"C", C}, {"ids", ids}});
  require(K >= 1 && K <= std::numeric_limits<std::int32_t>::max(), o, "K (" + num(K) + ") must be in [1, 2^31)");
  require(s->is_contiguous() && dt->is_contiguous() && A->is_contiguous(), o, "s, dt and A must be contiguous",
          {{"s", s}, {"dt", dt}, {"A", A}});
  for (auto [n, t] : {std::pair<const char*, const tensor*>{"x", x}, {"B", B}, {"C", C}})
    require(t->nb[0] == gk::type_size(t->type) && t->nb[1] == static_cast<std::size_t>(t->ne[0]) * t->nb[0], o,
            std::string(n) + " must have packed rows and packed first two dims", {{n, t}});
  require(extra::same(B, C), o, "B and C must have the same shape", {{"B", B}, {"C", C}});
  require(ids->type == gk::type::i32, o, "ids must be i32", {{"ids", ids}});
  const std::int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_seq_tokens = x->ne[2],
                     n_seqs = x->ne[3];
  require(dt->ne[0] == n_head && dt->ne[1] == n_seq_tokens && dt->ne[2] == n_seqs && extra::is_3d(dt), o,
          "dt must be [n_head, n_seq_tokens, n_seqs]", {{"x", x}, {"dt", dt}});
  require(s->ne[1] == head_dim && s->ne[2] == n_head, o, "s must be [d_state, head_dim, n_head, ...]",
          {{"s", s}, {"x", x}});
  require(B->ne[0] == d_state && B->ne[2] == n_seq_tokens && B->ne[3] == n_seqs, o,
          "B must be [d_state, n_group, n_seq_tokens, n_seqs]", {{"s", s}, {"x", x}, {"B", B}});
  require(ids->ne[0] == n_seqs && extra::is_vector(ids), o, "ids must be a vector of n_seqs", {{"ids", ids}});
  require(A->ne[1] == n_head && extra::is_matrix(A), o, "A must be [1 or d_state, n_head]", {{"A", A}});
  if (A->ne[0] != 1)
    require(A->ne[0] == d_state && K == 1, o, "a per-state A (Mamba-1) needs A->ne[0] == d_state and K == 1",
            {{"A", A}, {"s", s}});
  const std::int64_t ne[4] = {x->nelements() + K * s->ne[0] * s->ne[1] * s->ne[2] * ids->ne[0], 1, 1, 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {s, x, dt, A, B, C, ids});
  r->set_param_i32(0, static_cast<std::int32_t>(K));
  return r;
}

namespace detail::extra {
// The RWKV-style recurrences share one shape rule: every per-token input is [S, H, T] and
// the state holds S*S*H*n_seqs values; the result is [S*H, T + S*n_seqs].
inline tensor* linear_attn(context& ctx, op o, std::initializer_list<std::pair<const char*, tensor*>> inputs,
                           std::string_view shape_exempt, tensor* k, tensor* state) {
  const std::int64_t S = k->ne[0], H = k->ne[1], T = k->ne[2], n_seqs = state->ne[1];
  for (auto& [n, t] : inputs) {
    require(t->is_contiguous(), o, std::string(n) + " must be contiguous", {{n, t}});
    if (t != k && n != shape_exempt)
      require(t->ne[0] == S && t->ne[1] == H && t->ne[2] == T, o,
              std::string(n) + " must be [S, H, n_tokens] like k", {{"k", k}, {n, t}});
  }
  require(state->is_contiguous(), o, "state must be contiguous", {{"state", state}});
  require(state->nelements() == S * S * H * n_seqs, o, "state must hold S*S*H*n_seqs values",
          {{"k", k}, {"state", state}});
  const std::int64_t ne[4] = {S * H, T + S * n_seqs, 1, 1};
  return make(ctx, o, gk::type::f32, ne, {});
}
}  // namespace detail::extra

inline tensor* rwkv_wkv6(context& ctx, tensor* k, tensor* v, tensor* r, tensor* tf, tensor* td, tensor* state) {
  using namespace detail;
  require_tensors(op::rwkv_wkv6, {{"k", k}, {"v", v}, {"r", r}, {"tf", tf}, {"td", td}, {"state", state}});
  tensor* y = extra::linear_attn(ctx, op::rwkv_wkv6, {{"k", k}, {"v", v}, {"r", r}, {"tf", tf}, {"td", td}}, "tf", k,
                                 state);
  tensor* const s[] = {k, v, r, tf, td, state};
  for (int i = 0; i < 6; ++i) y->src[i] = s[i];
  return y;
}

// op_params: scale (f32).
inline tensor* gated_linear_attn(context& ctx, tensor* k, tensor* v, tensor* q, tensor* g, tensor* state,
                                 float scale) {
  using namespace detail;
  require_tensors(op::gated_linear_attn, {{"k", k}, {"v", v}, {"q", q}, {"g", g}, {"state", state}});
  tensor* y = extra::linear_attn(ctx, op::gated_linear_attn, {{"k", k}, {"v", v}, {"q", q}, {"g", g}}, "", k, state);
  tensor* const s[] = {k, v, q, g, state};
  for (int i = 0; i < 5; ++i) y->src[i] = s[i];
  y->set_param_f32(0, scale);
  return y;
}

inline tensor* rwkv_wkv7(context& ctx, tensor* r, tensor* w, tensor* k, tensor* v, tensor* a, tensor* b,
                         tensor* state) {
  using namespace detail;
  require_tensors(op::rwkv_wkv7, {{"r", r}, {"w", w}, {"k", k}, {"v", v}, {"a", a}, {"b", b}, {"state", state}});
  // The reference checks w, k, v, a, b against k's shape (r only for contiguity).
  tensor* y = extra::linear_attn(ctx, op::rwkv_wkv7,
                                 {{"r", r}, {"w", w}, {"k", k}, {"v", v}, {"a", a}, {"b", b}}, "r", k, state);
  tensor* const s[] = {r, w, k, v, a, b, state};
  for (int i = 0; i < 7; ++i) y->src[i] = s[i];
  return y;
}

// Solve A X = B for lower-triangular A (the only variant the reference implements):
// a [n, n, ...], b [m, n, ...] -> f32 b's shape.
inline tensor* solve_tri(context& ctx, tensor* a, tensor* b, bool left, bool lower, bool uni) {
  using namespace detail;
  const op o = op::solve_tri;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(a->type == gk::type::f32 && b->type == gk::type::f32, o, "a and b must be f32", {{"a", a}, {"b", b}});
  require(a->ne[0] == a->ne[1] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3], o,
          "a must be square with b's row count and batch dims", {{"a", a}, {"b", b}});
  require(a->is_contiguous() && b->is_contiguous(), o, "a and b must be contiguous", {{"a", a}, {"b", b}});
  require(lower && left && !uni, o, "only left, lower, non-unit-diagonal is implemented");
  return extra::make(ctx, o, gk::type::f32, b->ne, {a, b});
}

// Gated delta rule (Qwen3-Next, Kimi). Result f32 [S_v*H, n_tokens*n_seqs + K*S_v*n_seqs].
// op_params: K (i32).
inline tensor* gated_delta_net(context& ctx, tensor* q, tensor* k, tensor* v, tensor* g, tensor* beta, tensor* state,
                               std::int64_t K) {
  using namespace detail;
  const op o = op::gated_delta_net;
  require_tensors(o, {{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"beta", beta}, {"state", state}});
  require(q->rows_contiguous() && k->rows_contiguous() && v->rows_contiguous(), o, "q, k and v rows must be packed",
          {{"q", q}, {"k", k}, {"v", v}});
  require(g->is_contiguous() && beta->is_contiguous() && state->is_contiguous(), o,
          "g, beta and state must be contiguous", {{"g", g}, {"beta", beta}, {"state", state}});
  for (const tensor* t : {q, k, v, g, beta, state})
    require(t->type == gk::type::f32, o, "every input must be f32", {{"input", t}});
  const std::int64_t S_v = v->ne[0], H = v->ne[1], T = v->ne[2], n_seqs = v->ne[3];
  require(g->ne[0] == 1 || g->ne[0] == S_v, o, "g->ne[0] must be 1 or S_v", {{"g", g}, {"v", v}});
  require(beta->ne[0] == 1, o, "beta->ne[0] must be 1", {{"beta", beta}});
  require(state->ne[0] == S_v && state->ne[1] == S_v && state->ne[2] == H && state->ne[3] == n_seqs, o,
          "state must be [S_v, S_v, H, n_seqs]", {{"v", v}, {"state", state}});
  require(K >= 1, o, "K must be >= 1");
  require(extra::fits_i32(K), o, "K does not fit the int32 op parameter");  // gk
  const std::int64_t ne[4] = {S_v * H, T * n_seqs + K * S_v * n_seqs, 1, 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {q, k, v, g, beta, state});
  r->set_param_i32(0, static_cast<std::int32_t>(K));
  return r;
}

// DeepSeek sparse-attention indexer scores: f32 [n_kv, n_batch, 1, ne3].
inline tensor* lightning_indexer(context& ctx, tensor* q, tensor* k, tensor* weights, tensor* mask) {
  using namespace detail;
  const op o = op::lightning_indexer;
  require_tensors(o, {{"q", q}, {"k", k}, {"weights", weights}, {"mask", mask}});
  require(q->type == gk::type::f32 && weights->type == gk::type::f32 && mask->type == gk::type::f16, o,
          "q and weights must be f32 and mask f16", {{"q", q}, {"weights", weights}, {"mask", mask}});
  require(q->ne[0] == k->ne[0] && k->ne[1] == 1 && q->ne[3] == k->ne[3], o, "k must be [q->ne[0], 1, n_kv, q->ne[3]]",
          {{"q", q}, {"k", k}});
  require(q->ne[1] == weights->ne[0] && q->ne[2] == weights->ne[1] && weights->ne[2] == 1 &&
              k->ne[3] == weights->ne[3],
          o, "weights must be [n_head, n_batch, 1, ne3]", {{"q", q}, {"weights", weights}});
  require(mask->ne[0] == k->ne[2] && mask->ne[1] == q->ne[2] && mask->ne[2] == 1 &&
              mask->ne[3] != 0 && weights->ne[3] % mask->ne[3] == 0,
          o, "mask must be [n_kv, n_batch, 1, a divisor of ne3]", {{"k", k}, {"mask", mask}});
  const std::int64_t ne[4] = {k->ne[2], q->ne[2], 1, q->ne[3]};
  return extra::make(ctx, o, gk::type::f32, ne, {q, k, weights, mask});
}

// DeepSeek V4 hyper-connections. hc_comb: mixes [(2+hc)*hc, T] (hc == 4), scale [>=3],
// base [(2+hc)*hc] -> f32 [hc, hc, T]. op_params: eps (f32), n_iter (i32).
inline tensor* dsv4_hc_comb(context& ctx, tensor* mixes, tensor* scale, tensor* base, float eps, std::int32_t n_iter) {
  using namespace detail;
  const op o = op::dsv4_hc_comb;
  require_tensors(o, {{"mixes", mixes}, {"scale", scale}, {"base", base}});
  require(mixes->type == gk::type::f32 && scale->type == gk::type::f32 && base->type == gk::type::f32, o,
          "mixes, scale and base must be f32", {{"mixes", mixes}, {"scale", scale}, {"base", base}});
  require(n_iter > 0, o, "n_iter must be positive");
  const std::int64_t dim = mixes->ne[0];
  std::int64_t hc = 0;
  for (std::int64_t i = 1; i * i + 2 * i <= dim; ++i)
    if ((2 + i) * i == dim) {
      hc = i;
      break;
    }
  require(hc == 4, o, "mixes->ne[0] must be (2 + hc)*hc with hc == 4 (24)", {{"mixes", mixes}});
  require(extra::is_matrix(mixes), o, "mixes must be a matrix", {{"mixes", mixes}});
  require(scale->ne[0] >= 3 && extra::is_vector(scale), o, "scale must be a vector of at least 3", {{"scale", scale}});
  require(base->ne[0] == dim && extra::is_vector(base), o, "base must be a vector of mixes->ne[0]", {{"base", base}});
  const std::int64_t ne[4] = {hc, hc, mixes->ne[1], 1};
  tensor* r = extra::make(ctx, o, gk::type::f32, ne, {mixes, scale, base});
  r->set_param_f32(0, eps);
  r->set_param_i32(1, n_iter);
  return r;
}

// hc_pre: x [n_embd, hc, T], weights [hc, T] -> f32 [n_embd, T].
inline tensor* dsv4_hc_pre(context& ctx, tensor* x, tensor* weights) {
  using namespace detail;
  const op o = op::dsv4_hc_pre;
  require_tensors(o, {{"x", x}, {"weights", weights}});
  require(x->type == gk::type::f32 && weights->type == gk::type::f32, o, "x and weights must be f32",
          {{"x", x}, {"weights", weights}});
  require(x->ne[1] > 0 && x->ne[3] == 1, o, "x must be [n_embd, hc > 0, n_tokens]", {{"x", x}});
  require(weights->ne[0] == x->ne[1] && weights->ne[1] == x->ne[2] && extra::is_matrix(weights), o,
          "weights must be [hc, n_tokens]", {{"x", x}, {"weights", weights}});
  const std::int64_t ne[4] = {x->ne[0], x->ne[2], 1, 1};
  return extra::make(ctx, o, gk::type::f32, ne, {x, weights});
}

// hc_post: x [n_embd, T], residual [n_embd, hc, T], post [hc, T], comb [hc, hc, T]
// -> f32 [n_embd, hc, T].
inline tensor* dsv4_hc_post(context& ctx, tensor* x, tensor* residual, tensor* post, tensor* comb) {
  using namespace detail;
  const op o = op::dsv4_hc_post;
  require_tensors(o, {{"x", x}, {"residual", residual}, {"post", post}, {"comb", comb}});
  for (const tensor* t : {x, residual, post, comb})
    require(t->type == gk::type::f32, o, "every input must be f32", {{"input", t}});
  const std::int64_t n_embd = x->ne[0], T = x->ne[1], hc = residual->ne[1];
  require(hc > 0 && extra::is_matrix(x), o, "x must be [n_embd, n_tokens] and residual->ne[1] > 0",
          {{"x", x}, {"residual", residual}});
  require(residual->ne[0] == n_embd && residual->ne[2] == T && residual->ne[3] == 1, o,
          "residual must be [n_embd, hc, n_tokens]", {{"x", x}, {"residual", residual}});
  require(post->ne[0] == hc && post->ne[1] == T && extra::is_matrix(post), o, "post must be [hc, n_tokens]",
          {{"post", post}, {"residual", residual}});
  require(comb->ne[0] == hc && comb->ne[1] == hc && comb->ne[2] == T && comb->ne[3] == 1, o,
          "comb must be [hc, hc, n_tokens]", {{"comb", comb}, {"residual", residual}});
  const std::int64_t ne[4] = {n_embd, hc, T, 1};
  return extra::make(ctx, o, gk::type::f32, ne, {x, residual, post, comb});
}

// ======================================================================================
// Loss and optimiser steps
// ======================================================================================

// Cross-entropy of logits a against labels b: a 1-element vector of a's type.
inline tensor* cross_entropy_loss(context& ctx, tensor* a, tensor* b) {
  using namespace detail;
  const op o = op::cross_entropy_loss;
  require_tensors(o, {{"a", a}, {"b", b}});
  require(extra::same(a, b), o, "logits a and labels b must have the same shape", {{"a", a}, {"b", b}});
  const std::int64_t ne[4] = {1, 1, 1, 1};
  return extra::make(ctx, o, a->type, ne, {a, b});
}

// AdamW step on parameter a (flag_param), in place. adamw_params: 7 f32 (alpha, beta1,
// beta2, eps, wd, beta1h, beta2h).
inline tensor* opt_step_adamw(context& ctx, tensor* a, tensor* grad, tensor* m, tensor* v, tensor* adamw_params) {
  using namespace detail;
  const op o = op::opt_step_adamw;
  require_tensors(o, {{"a", a}, {"grad", grad}, {"m", m}, {"v", v}, {"adamw_params", adamw_params}});
  require((a->flags & flag_param) != 0, o, "a must be flagged as a parameter", {{"a", a}});
  require(extra::same(a, grad) && extra::same(a, m) && extra::same(a, v), o, "grad, m and v must have a's shape",
          {{"a", a}, {"grad", grad}, {"m", m}, {"v", v}});
  require(adamw_params->type == gk::type::f32 && adamw_params->nelements() == 7, o, "adamw_params must be 7 f32",
          {{"adamw_params", adamw_params}});
  return extra::make(ctx, o, a->type, a->ne, {a, grad, m, v, adamw_params}, a);
}

// SGD step on parameter a (flag_param), in place. params: 2 f32 (alpha, wd).
inline tensor* opt_step_sgd(context& ctx, tensor* a, tensor* grad, tensor* params) {
  using namespace detail;
  const op o = op::opt_step_sgd;
  require_tensors(o, {{"a", a}, {"grad", grad}, {"params", params}});
  require((a->flags & flag_param) != 0, o, "a must be flagged as a parameter", {{"a", a}});
  require(extra::same(a, grad), o, "grad must have a's shape", {{"a", a}, {"grad", grad}});
  require(params->type == gk::type::f32 && params->nelements() == 2, o, "params must be 2 f32", {{"params", params}});
  return extra::make(ctx, o, a->type, a->ne, {a, grad, params}, a);
}

// ======================================================================================
// Custom ops
//
// The C-pointer forms store {fun, n_tasks, userdata} in op_params exactly as the
// reference does, so a compat layer forwards ggml_map_custom* here unchanged.
//
// The std::function forms differ from the reference in one way: op_params can hold only
// plain bytes, so they store a gk trampoline as `fun` and the ADDRESS of the caller's
// std::function as `userdata`. The caller keeps that std::function alive until the graph
// has been computed (the lifetime rule the reference already sets for userdata); passing
// a temporary is rejected at compile time.
// ======================================================================================

using custom1_function = std::function<void(tensor* dst, const tensor* a, int ith, int nth)>;
using custom2_function = std::function<void(tensor* dst, const tensor* a, const tensor* b, int ith, int nth)>;
using custom3_function =
    std::function<void(tensor* dst, const tensor* a, const tensor* b, const tensor* c, int ith, int nth)>;
using custom_function = std::function<void(tensor* dst, int ith, int nth)>;

namespace detail::extra {
inline void call1(tensor* d, const tensor* a, int ith, int nth, void* u) {
  (*static_cast<const custom1_function*>(u))(d, a, ith, nth);
}
inline void call2(tensor* d, const tensor* a, const tensor* b, int ith, int nth, void* u) {
  (*static_cast<const custom2_function*>(u))(d, a, b, ith, nth);
}
inline void call3(tensor* d, const tensor* a, const tensor* b, const tensor* c, int ith, int nth, void* u) {
  (*static_cast<const custom3_function*>(u))(d, a, b, c, ith, nth);
}
inline void call0(tensor* d, int ith, int nth, void* u) { (*static_cast<const custom_function*>(u))(d, ith, nth); }

inline tensor* map_custom(context& ctx, op o, std::initializer_list<std::pair<const char*, tensor*>> srcs,
                          bool has_fun, int n_tasks, bool inplace) {
  for (auto& [n, t] : srcs) require(t != nullptr, o, std::string(n) + " is null");
  require(has_fun, o, "the function is null");
  check_n_tasks(o, n_tasks);
  tensor* a = srcs.begin()[0].second;
  tensor* s[3] = {};
  int i = 0;
  for (auto& st : srcs) s[i++] = st.second;
  tensor* r = make(ctx, o, a->type, a->ne, {}, inplace ? a : nullptr);
  for (int j = 0; j < i; ++j) r->src[j] = s[j];
  return r;
}
}  // namespace detail::extra

inline tensor* map_custom1(context& ctx, tensor* a, custom1_fn fun, int n_tasks, void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom1, {{"a", a}}, fun != nullptr, n_tasks, false);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}
inline tensor* map_custom1_inplace(context& ctx, tensor* a, custom1_fn fun, int n_tasks, void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom1, {{"a", a}}, fun != nullptr, n_tasks, true);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}
inline tensor* map_custom2(context& ctx, tensor* a, tensor* b, custom2_fn fun, int n_tasks, void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom2, {{"a", a}, {"b", b}}, fun != nullptr, n_tasks, false);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}
inline tensor* map_custom2_inplace(context& ctx, tensor* a, tensor* b, custom2_fn fun, int n_tasks, void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom2, {{"a", a}, {"b", b}}, fun != nullptr, n_tasks, true);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}
inline tensor* map_custom3(context& ctx, tensor* a, tensor* b, tensor* c, custom3_fn fun, int n_tasks,
                           void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom3, {{"a", a}, {"b", b}, {"c", c}}, fun != nullptr,
                                        n_tasks, false);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}
inline tensor* map_custom3_inplace(context& ctx, tensor* a, tensor* b, tensor* c, custom3_fn fun, int n_tasks,
                                   void* userdata) {
  tensor* r = detail::extra::map_custom(ctx, op::map_custom3, {{"a", a}, {"b", b}, {"c", c}}, fun != nullptr,
                                        n_tasks, true);
  detail::extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}

// A new tensor of `type` and shape ne0..ne3 computed by fun from args (at most 9).
inline tensor* custom_4d(context& ctx, gk::type type, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                         std::int64_t ne3, tensor* const* args, int n_args, custom_fn fun, int n_tasks,
                         void* userdata) {
  using namespace detail;
  const op o = op::custom;
  require(n_args >= 0 && n_args < max_src, o, "n_args must be in [0, " + num(max_src) + ")");
  require(n_args == 0 || args != nullptr, o, "args is null");
  for (int i = 0; i < n_args; ++i) require(args[i] != nullptr, o, "args[" + num(i) + "] is null");
  require(fun != nullptr, o, "the function is null");
  const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
  tensor* r = extra::make(ctx, o, type, ne, {});
  for (int i = 0; i < n_args; ++i) r->src[i] = args[i];
  extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}

// fun writes into a (a view of a is the result); args become sources 1..n_args (at most 8).
inline tensor* custom_inplace(context& ctx, tensor* a, tensor* const* args, int n_args, custom_fn fun, int n_tasks,
                              void* userdata) {
  using namespace detail;
  const op o = op::custom;
  require_tensors(o, {{"a", a}});
  require(n_args >= 0 && n_args < max_src - 1, o, "n_args must be in [0, " + num(max_src - 1) + ")");
  require(n_args == 0 || args != nullptr, o, "args is null");
  for (int i = 0; i < n_args; ++i) require(args[i] != nullptr, o, "args[" + num(i) + "] is null");
  require(fun != nullptr, o, "the function is null");
  tensor* r = extra::make(ctx, o, a->type, a->ne, {a}, a);
  for (int i = 0; i < n_args; ++i) r->src[i + 1] = args[i];
  extra::store_custom(r, fun, n_tasks, userdata);
  return r;
}

// ---- std::function forms (see the note above) ----

inline tensor* map_custom1(context& ctx, tensor* a, const custom1_function& f, int n_tasks = n_tasks_max) {
  return map_custom1(ctx, a, &detail::extra::call1, n_tasks, const_cast<custom1_function*>(&f));
}
tensor* map_custom1(context&, tensor*, custom1_function&&, int = n_tasks_max) = delete;
inline tensor* map_custom2(context& ctx, tensor* a, tensor* b, const custom2_function& f, int n_tasks = n_tasks_max) {
  return map_custom2(ctx, a, b, &detail::extra::call2, n_tasks, const_cast<custom2_function*>(&f));
}
tensor* map_custom2(context&, tensor*, tensor*, custom2_function&&, int = n_tasks_max) = delete;
inline tensor* map_custom3(context& ctx, tensor* a, tensor* b, tensor* c, const custom3_function& f,
                           int n_tasks = n_tasks_max) {
  return map_custom3(ctx, a, b, c, &detail::extra::call3, n_tasks, const_cast<custom3_function*>(&f));
}
tensor* map_custom3(context&, tensor*, tensor*, tensor*, custom3_function&&, int = n_tasks_max) = delete;
inline tensor* custom_4d(context& ctx, gk::type type, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                         std::int64_t ne3, tensor* const* args, int n_args, const custom_function& f,
                         int n_tasks = n_tasks_max) {
  return custom_4d(ctx, type, ne0, ne1, ne2, ne3, args, n_args, &detail::extra::call0, n_tasks,
                   const_cast<custom_function*>(&f));
}
tensor* custom_4d(context&, gk::type, std::int64_t, std::int64_t, std::int64_t, std::int64_t, tensor* const*, int,
                  custom_function&&, int = n_tasks_max) = delete;
inline tensor* custom_inplace(context& ctx, tensor* a, tensor* const* args, int n_args, const custom_function& f,
                              int n_tasks = n_tasks_max) {
  return custom_inplace(ctx, a, args, n_args, &detail::extra::call0, n_tasks, const_cast<custom_function*>(&f));
}
tensor* custom_inplace(context&, tensor*, tensor* const*, int, custom_function&&, int = n_tasks_max) = delete;

}  // namespace gk
