// SPDX-License-Identifier: MIT
// Op builders for rotary position embedding (rope): rope, rope_ext, rope_multi (M-RoPE,
// interleaved M-RoPE and the vision variant), their _inplace forms, rope_set_offset and
// the YaRN helper rope_yarn_corr_dims.
//
// a is [head_dim, n_head, n_tokens, batch]; b holds one i32 position per token (four per
// token for the multi modes: all t, then all h, w, e); c, optional, holds f32 frequency
// divisors per rotated pair. Pair k of a row turns by theta_k = p * base^(-2k/n_dims)
// (YaRN-corrected); which two elements form pair k is the mode:
//   normal (0)       (2k, 2k+1)                   for 2k < n_dims
//   neox (2), multi  (k, k + n_dims/2)            for k < n_dims/2
//   vision (24)      (k, k + n_dims), n_dims = ne0/2, every element turns
// Elements outside the rotated span are copied. op_params are the reference's 16 i32
// slots: 0 n_past (0), 1 n_dims, 2 mode, 3 n_ctx (0), 4 n_ctx_orig, 5..10 freq_base,
// freq_scale, ext_factor, attn_factor, beta_fast, beta_slow (f32), 11..14 sections (multi
// modes, else 0), 15 n_offs (first rotated element; rope_set_offset).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "gk/ops/common.hpp"

namespace gk {

inline constexpr int mrope_sections = 4;

namespace detail {

inline bool rope_mode_known(int mode) noexcept {
  return mode == rope_type_normal || mode == rope_type_neox || mode == rope_type_mrope ||
         mode == rope_type_vision || mode == rope_type_imrope;
}

inline tensor* rope_impl(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, const int* sections, int mode,
                         int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                         float beta_fast, float beta_slow, bool inplace) {
  const op o = op::rope;
  require_tensors(o, {{"a", a}, {"b (positions)", b}});
  require(rope_mode_known(mode), o,
          "unknown mode " + num(mode) + " (normal 0, neox 2, mrope 8, vision 24, imrope 40)", {{"a", a}});
  require(b->type == gk::type::i32 && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1, o,
          "positions must be an i32 vector", {{"a", a}, {"b (positions)", b}});
  const bool multi = (mode & rope_type_mrope) != 0;
  require(b->ne[0] == (multi ? 4 : 1) * a->ne[2], o,
          multi ? "the multi modes need 4 positions per token: b->ne[0] must be 4 * a->ne[2] (" +
                      num(4 * a->ne[2]) + ")"
                : "b->ne[0] must be a->ne[2] (one position per token, " + num(a->ne[2]) + ")",
          {{"a", a}, {"b (positions)", b}});
  require(n_dims >= 0 && n_dims % 2 == 0 && n_dims <= a->ne[0], o,
          "n_dims " + num(n_dims) + " must be even and at most a->ne[0]", {{"a", a}});
  if (mode == rope_type_vision)
    require(2 * static_cast<std::int64_t>(n_dims) == a->ne[0], o,
            "vision mode rotates (k, k + n_dims) over the whole row: n_dims must be a->ne[0]/2", {{"a", a}});
  if (multi) {
    require(sections != nullptr, o, "the multi modes need sections", {{"a", a}});
    require(sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0 &&
                (sections[0] > 0 || sections[1] > 0 || sections[2] > 0),
            o, "sections must be >= 0 with one of the first three positive", {{"a", a}});
    const std::int64_t s = std::int64_t{sections[0]} + sections[1] + sections[2] + sections[3];
    require(s <= a->ne[0], o, "the sections add up to " + num(s) + ", more than a->ne[0]", {{"a", a}});
  }
  if (c) {
    // vision rotates ne0/2 = n_dims pairs, each with its own factor
    const std::int64_t need = mode == rope_type_vision ? n_dims : n_dims / 2;
    require(c->type == gk::type::f32, o, "freq_factors must be f32", {{"a", a}, {"c (freq_factors)", c}});
    require(c->ne[0] >= need, o, "freq_factors needs " + num(need) + " entries", {{"a", a}, {"c (freq_factors)", c}});
  }
  tensor* r = new_op(ctx, o, a->type, a->ne, {a, b, c}, inplace ? a : nullptr);
  r->set_param_i32(0, 0);
  r->set_param_i32(1, n_dims);
  r->set_param_i32(2, mode);
  r->set_param_i32(3, 0);
  r->set_param_i32(4, n_ctx_orig);
  r->set_param_f32(5, freq_base);
  r->set_param_f32(6, freq_scale);
  r->set_param_f32(7, ext_factor);
  r->set_param_f32(8, attn_factor);
  r->set_param_f32(9, beta_fast);
  r->set_param_f32(10, beta_slow);
  for (int i = 0; i < mrope_sections; ++i) r->set_param_i32(11 + i, multi && sections ? sections[i] : 0);
  r->set_param_i32(15, 0);
  return r;
}

}  // namespace detail

// Plain rope: base 10000, no scaling.
inline tensor* rope(context& ctx, tensor* a, tensor* b, int n_dims, int mode) {
  return detail::rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f,
                           false);
}
inline tensor* rope_inplace(context& ctx, tensor* a, tensor* b, int n_dims, int mode) {
  return detail::rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f,
                           true);
}

// Rope with frequency factors (c, may be null), base and YaRN context extension.
inline tensor* rope_ext(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, int mode, int n_ctx_orig,
                        float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                        float beta_slow) {
  return detail::rope_impl(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, false);
}
inline tensor* rope_ext_inplace(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, int mode,
                                int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                float attn_factor, float beta_fast, float beta_slow) {
  return detail::rope_impl(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, true);
}

// Multi-axis rope (mode mrope, imrope or vision): rotated pair k takes its position
// from axis t, h, w or e by the sections (counts of pairs per axis).
inline tensor* rope_multi(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, const int sections[4],
                          int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                          float attn_factor, float beta_fast, float beta_slow) {
  detail::require(mode & rope_type_mrope, op::rope, "rope_multi needs an mrope, imrope or vision mode");
  return detail::rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, false);
}
inline tensor* rope_multi_inplace(context& ctx, tensor* a, tensor* b, tensor* c, int n_dims, const int sections[4],
                                  int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                  float attn_factor, float beta_fast, float beta_slow) {
  detail::require(mode & rope_type_mrope, op::rope, "rope_multi needs an mrope, imrope or vision mode");
  return detail::rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, true);
}

// Rotate the n_dims elements starting at n_offs instead of at 0 (not for vision).
inline tensor* rope_set_offset(tensor* a, int n_offs) {
  detail::require_tensors(op::rope, {{"a", a}});
  detail::require(a->op == op::rope || a->op == op::rope_back, op::rope, "rope_set_offset needs a rope node", {{"a", a}});
  const int n_dims = a->param_i32(1), mode = a->param_i32(2);
  detail::require(mode != rope_type_vision, op::rope, "vision rope has no offset", {{"a", a}});
  detail::require(n_offs >= 0 && n_offs % 2 == 0 && std::int64_t{n_offs} + n_dims <= a->ne[0], op::rope,
                  "n_offs " + detail::num(n_offs) + " must be even, >= 0 and leave n_dims " + detail::num(n_dims) +
                      " inside the row",
                  {{"a", a}});
  a->set_param_i32(15, n_offs);
  return a;
}

// YaRN: the first and last rotated dims [dims[0], dims[1]] between which rotation turns
// from extrapolated to interpolated, for pairs that complete beta_fast and beta_slow
// turns over n_ctx_orig positions. Float arithmetic as the reference's, so a caller
// passing these dims on gets the reference's bits.
inline void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                                float dims[2]) {
  const auto corr_dim = [&](float n_rot) {
    const float two_pi = 2 * static_cast<float>(std::numbers::pi);
    return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * two_pi)) /
           (2 * std::log(freq_base));
  };
  const float start = std::floor(corr_dim(beta_fast));
  const float end = std::ceil(corr_dim(beta_slow));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_dims - 1), end);
}

}  // namespace gk
