// SPDX-License-Identifier: MIT
// CPU kernel: flash_attn_ext. For one query row q (one head) it streams the keys once:
//   s_j = scale * (K_j . q), softcapped as c * tanh(s_j / c) when c != 0, plus slope * mask_j
//   out = sum_j exp(s_j - M) V_j / sum_j exp(s_j - M)        (M = running max of s)
// with the online softmax: when a key raises the max, the accumulator and the running sum
// are rescaled by exp(M_old - M_new) before the key is added, so nothing overflows and no
// [n_kv, n_q] score matrix exists.
//
// Arithmetic, chosen to be the reference's class: q is encoded once per row into K's
// activation format (W::dot_type: f16 for f16 K, q8_0 for q4_0/q8_0 K) and each K.q is
// dot_kernel<W, simd::native>::row; V rows are read as f32 and accumulated in f32 (the
// reference accumulates f16 V in f16 on its row path; gk does not round the sum).
// Exponentials are gk::simd::exp, the softcap's tanh is gk::simd::tanh.
//
// Contract for edge rows (the reference's rule):
//   - a key whose mask value is -inf is skipped (it adds nothing, not even exp(-inf) = 0);
//   - a row whose every key is masked has sum 0 and outputs 0 in every element;
//   - a sink logit s_h (add_sinks) joins the softmax sum with a zero value row, after the keys;
//     a fully masked row with a sink therefore also outputs 0.
// Each (query row, head, batch) is one unit of work, computed start to finish by one
// thread, so results are bit-identical at any thread count.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "gk/cpu/rows.hpp"
#include "gk/formats/all.hpp"
#include "gk/simd/dot.hpp"
#include "gk/simd/encode.hpp"
#include "gk/simd/math.hpp"
#include "gk/tensor.hpp"

namespace gk::cpu::attn {

namespace detail {

// K formats with a kernel. A KV cache is f16, bf16 or f32, or one of the 32-weight
// formats; each entry instantiates one dot kernel, so the list stays short on purpose.
template <class F>
bool visit_k(gk::type t, F&& f) {
  using namespace gk::formats;
  switch (t) {
    case type::f32: f(std::type_identity<formats::f32>{}); return true;
    case type::f16: f(std::type_identity<formats::f16>{}); return true;
    case type::bf16: f(std::type_identity<formats::bf16>{}); return true;
    case type::q4_0: f(std::type_identity<q4_0>{}); return true;
    case type::q4_1: f(std::type_identity<q4_1>{}); return true;
    case type::q5_0: f(std::type_identity<q5_0>{}); return true;
    case type::q5_1: f(std::type_identity<q5_1>{}); return true;
    case type::q8_0: f(std::type_identity<q8_0>{}); return true;
    case type::iq4_nl: f(std::type_identity<iq4_nl>{}); return true;
    default: return false;
  }
}

inline bool readable_v(gk::type t) noexcept {
  return t == type::f32 || t == type::f16 || t == type::bf16 || formats::visit(t, [](auto) {});
}

// ALiBi slope of head h, computed as the reference computes it (float pow, same operands).
struct alibi {
  float m0 = 1.0f, m1 = 1.0f;
  std::uint32_t n_head_log2 = 1;
  bool on = false;
  alibi(float max_bias, std::uint32_t n_head) : on(max_bias > 0.0f) {
    n_head_log2 = 1u << static_cast<std::uint32_t>(std::floor(std::log2(static_cast<double>(n_head))));
    m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_head_log2));
    m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_head_log2));
  }
  float slope(std::uint32_t h) const {
    if (!on) return 1.0f;
    return h < n_head_log2 ? std::pow(m0, static_cast<float>(h + 1))
                           : std::pow(m1, static_cast<float>(2 * (h - n_head_log2) + 1));
  }
};

template <class W>
void attend(const exec& ex, tensor* dst) {
  using D = typename W::dot_type;
  const tensor* q = dst->src[0];
  const tensor* k = dst->src[1];
  const tensor* v = dst->src[2];
  const tensor* mask = dst->src[3];
  const tensor* sinks = dst->src[4];
  const std::int64_t DK = k->ne[0], DV = v->ne[0], n_q = q->ne[1], n_head = q->ne[2], n_kv = k->ne[1];
  if (DK % W::block_size != 0 || DK % D::block_size != 0)
    throw error("gk: cpu: flash_attn_ext: head size " + std::to_string(DK) + " is not whole blocks of " +
                std::string(gk::name(W::id)) + " and its activation format");
  if (!k->rows_contiguous())
    throw error("gk: cpu: flash_attn_ext: rows of k " + describe(k) + " must be packed");
  if (dst->nb[0] != sizeof(float))
    throw error("gk: cpu: flash_attn_ext: the result " + describe(dst) + " must have packed rows");

  float scale = dst->param_f32(0);
  const float max_bias = dst->param_f32(1);
  const float softcap = dst->param_f32(2);
  if (softcap != 0.0f) scale /= softcap;
  const alibi ab(max_bias, static_cast<std::uint32_t>(n_head));
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();

  const std::int64_t rk2 = n_head / k->ne[2], rk3 = q->ne[3] / k->ne[3];
  const std::int64_t rv2 = n_head / v->ne[2], rv3 = q->ne[3] / v->ne[3];

  float* qbuf = ex.scr->get<float>(0, static_cast<std::size_t>(DK));
  auto* qenc = ex.scr->get<typename D::block>(1, static_cast<std::size_t>(DK / D::block_size));
  float* vbuf = ex.scr->get<float>(2, static_cast<std::size_t>(DV));
  float* acc = ex.scr->get<float>(3, static_cast<std::size_t>(DV));
  row_writer w(dst, acc);

  const std::int64_t nr = n_q * n_head * q->ne[3], r0 = ex.begin(nr), r1 = ex.end(nr);
  for (std::int64_t ir = r0; ir < r1; ++ir) {
    const std::int64_t iq1 = ir % n_q, iq2 = (ir / n_q) % n_head, iq3 = ir / (n_q * n_head);
    const std::int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3, iv2 = iq2 / rv2, iv3 = iq3 / rv3;
    const float slope = ab.slope(static_cast<std::uint32_t>(iq2));

    const float* qrow = row_read(q, iq1, iq2, iq3, qbuf);
    encode_kernel<D, simd::native>::row(qrow, qenc, DK);

    const std::uint16_t* mp = nullptr;
    if (mask)
      mp = reinterpret_cast<const std::uint16_t*>(mask->at(iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]));

    float* y = w.begin(iq2, iq1, iq3);  // the result is [DV, n_head, n_q, batch]
    for (std::int64_t d = 0; d < DV; ++d) acc[d] = 0.0f;
    float M = neg_inf, S = 0.0f;

    for (std::int64_t ic = 0; ic < n_kv; ++ic) {
      const float mv = mp ? slope * f16_to_f32(mp[ic]) : 0.0f;
      if (mv == neg_inf) continue;
      const auto* kb = reinterpret_cast<const typename W::block*>(k->at(ic, ik2, ik3));
      float s = dot_kernel<W, simd::native>::row(kb, qenc, DK) * scale;
      if (softcap != 0.0f) s = softcap * simd::tanh(s);
      s += mv;

      float ms = 1.0f, vs = 1.0f;
      if (s > M) {
        ms = M == neg_inf ? 0.0f : simd::exp(M - s);  // first key: nothing to rescale
        M = s;
        for (std::int64_t d = 0; d < DV; ++d) acc[d] *= ms;
      } else {
        vs = simd::exp(s - M);
      }
      const float* vr = row_read(v, ic, iv2, iv3, vbuf);
      for (std::int64_t d = 0; d < DV; ++d) acc[d] += vr[d] * vs;
      S = S * ms + vs;
    }

    if (sinks) {
      const float s = load_f32(type::f32, static_cast<const char*>(sinks->data) +
                                               static_cast<std::size_t>(iq2) * sinks->nb[0]);
      float ms = 1.0f, vs = 1.0f;
      if (s > M) {
        ms = M == neg_inf ? 0.0f : simd::exp(M - s);
        M = s;
        for (std::int64_t d = 0; d < DV; ++d) acc[d] *= ms;
      } else {
        vs = simd::exp(s - M);
      }
      S = S * ms + vs;
    }

    const float inv = S == 0.0f ? 0.0f : 1.0f / S;  // every key masked: output 0
    if (y != acc) {
      for (std::int64_t d = 0; d < DV; ++d) y[d] = acc[d] * inv;
    } else {
      for (std::int64_t d = 0; d < DV; ++d) acc[d] *= inv;
    }
    w.commit();
  }
}

}  // namespace detail

inline bool supports(const tensor* node) noexcept {
  if (node->op != op::flash_attn_ext || node->type != type::f32) return false;
  const tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3], *sinks = node->src[4];
  if (!q || !k || !v || q->type != type::f32) return false;
  if (mask && mask->type != type::f16) return false;
  if (sinks && sinks->type != type::f32) return false;
  return detail::visit_k(k->type, [](auto) {}) && detail::readable_v(v->type);
}

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node)) throw error("gk: cpu: no flash_attn_ext kernel for " + describe(node));
  detail::visit_k(node->src[1]->type, [&]<class W>(std::type_identity<W>) { detail::attend<W>(ex, node); });
}

}  // namespace gk::cpu::attn
