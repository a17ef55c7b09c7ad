// SPDX-License-Identifier: MIT
// Op builders: fused attention. flash_attn_ext computes, for every query row and head,
// softmax(scale * K q + slope * mask) V in one pass (no [n_kv, n_q] score matrix is kept),
// as the reference's ggml_flash_attn_ext. Shapes (ne order):
//   q     [D_k, n_q, n_head, batch]        f32
//   k     [D_k, n_kv, n_head_kv, batch_kv] n_head % n_head_kv == 0 (grouped-query heads)
//   v     [D_v, n_kv, n_head_v, batch_v]   same rule as k
//   mask  [>= n_kv, >= n_q, n_head / m, batch / m'] f16, packed, broadcast over heads/batch
//   sinks [n_head] f32 (add_sinks): one extra logit per head whose value row is zero
//   result [D_v, n_head, n_q, batch] f32: q's dims 1 and 2 swapped (the reference's layout)
// op_params: f32 scale, f32 max_bias (ALiBi), f32 logit_softcap, i32 precision, i32 n_kv_max.
#pragma once

#include <cstdint>

#include "gk/ops/common.hpp"

namespace gk {

inline tensor* flash_attn_ext(context& ctx, tensor* q, tensor* k, tensor* v, tensor* mask, float scale,
                              float max_bias, float logit_softcap) {
  using namespace detail;
  constexpr op o = op::flash_attn_ext;
  require_tensors(o, {{"q", q}, {"k", k}, {"v", v}});
  auto all = {std::pair<const char*, const tensor*>{"q", q}, {"k", k}, {"v", v}, {"mask", mask}};
  require(k->ne[0] == q->ne[0], o, "k->ne[0] (head size) must equal q->ne[0]", all);
  require(k->ne[2] > 0 && k->ne[3] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] % k->ne[3] == 0, o,
          "k's heads and batches must divide q's", all);
  require(q->ne[3] == k->ne[3] && q->ne[3] == v->ne[3], o, "q, k and v must have one batch size (ne[3])", all);
  require(v->ne[1] == k->ne[1], o, "v and k must have one n_kv (ne[1])", all);
  require(v->ne[2] > 0 && q->ne[2] % v->ne[2] == 0, o, "v's heads must divide q's", all);
  if (mask) {
    require(mask->type == gk::type::f16, o, "the mask must be f16", all);
    require(mask->is_contiguous(), o, "the mask must be contiguous", all);
    require(mask->ne[0] >= k->ne[1] && mask->ne[1] >= q->ne[1], o,
            "the mask must cover [n_kv, n_q] = [" + num(k->ne[1]) + ", " + num(q->ne[1]) + "]", all);
    require(mask->ne[2] > 0 && mask->ne[3] > 0 && q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0, o,
            "the mask's dims 2 and 3 must divide q's heads and batches", all);
  }
  require(!(max_bias > 0.0f) || mask, o, "ALiBi (max_bias > 0) needs a mask", all);
  const std::int64_t ne[4] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
  tensor* r = new_op(ctx, o, gk::type::f32, ne, {q, k, v, mask});
  r->set_param_f32(0, scale);
  r->set_param_f32(1, max_bias);
  r->set_param_f32(2, logit_softcap);
  return r;
}

// Accumulator precision request (op_params[3]); the CPU accumulates in f32 either way.
inline void flash_attn_ext_set_prec(tensor* a, gk::prec p) {
  detail::require(a && a->op == op::flash_attn_ext, op::flash_attn_ext, "set_prec needs a flash_attn_ext node");
  a->set_param_i32(3, static_cast<std::int32_t>(p));
}
inline gk::prec flash_attn_ext_get_prec(const tensor* a) {
  detail::require(a && a->op == op::flash_attn_ext, op::flash_attn_ext, "get_prec needs a flash_attn_ext node");
  return static_cast<gk::prec>(a->param_i32(3));
}

// A hint for backends that size work by the keys in use (op_params[4]); the CPU reads all n_kv.
inline void flash_attn_ext_set_n_kv_max(tensor* a, std::int32_t n_kv_max) {
  detail::require(a && a->op == op::flash_attn_ext && n_kv_max >= 0, op::flash_attn_ext,
                  "set_n_kv_max needs a flash_attn_ext node and n_kv_max >= 0");
  a->set_param_i32(4, n_kv_max);
}

// Attach per-head sink logits (null detaches them).
inline void flash_attn_ext_add_sinks(tensor* a, tensor* sinks) {
  using namespace detail;
  if (!sinks) {
    if (a) a->src[4] = nullptr;
    return;
  }
  require(a && a->op == op::flash_attn_ext, op::flash_attn_ext, "add_sinks needs a flash_attn_ext node");
  require(a->src[4] == nullptr, op::flash_attn_ext, "sinks are already attached", {{"sinks", sinks}});
  require(sinks->type == gk::type::f32 && sinks->ne[0] == a->src[0]->ne[2], op::flash_attn_ext,
          "sinks must be f32 with one value per q head (" + num(a->src[0]->ne[2]) + ")",
          {{"q", a->src[0]}, {"sinks", sinks}});
  a->src[4] = sinks;
}

}  // namespace gk
