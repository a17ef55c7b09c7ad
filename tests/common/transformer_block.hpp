// SPDX-License-Identifier: MIT
// One llama-style transformer block, written once over a small "library" adapter so the
// same code builds the graph in gk (gk_lib) and, in tests and benchmarks that link the
// reference, in ggml (a ggml_lib with the same member names):
//
//   h = rms_norm(x) * attn_norm
//   q, k, v = wq h, wk h, wv h  -> rope(q), rope(k); k, v written into the f16 KV cache
//             at the new positions (set_rows), attention over the whole cache with a
//             causal mask (flash_attn_ext, or mul_mat + soft_max_ext + mul_mat)
//   x2 = x + wo attn
//   out = x2 + w_down swiglu(w_gate h2, w_up h2),  h2 = rms_norm(x2) * ffn_norm
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gk/gk.hpp"

namespace gk_test {

struct block_dims {
  std::int64_t d = 256;       // hidden size
  std::int64_t heads = 4;     // query heads
  std::int64_t kv_heads = 2;  // key/value heads (grouped-query attention)
  std::int64_t ffn = 512;     // feed-forward size
  std::int64_t tokens = 7;    // new tokens this step
  std::int64_t n_past = 5;    // tokens already in the cache
  std::int64_t hd() const { return d / heads; }
  std::int64_t n_kv() const { return n_past + tokens; }
};

template <class T>
struct block_tensors {
  // weights
  T attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  // inputs: x [d, tokens] f32, pos i32 [tokens], mask f16 [n_kv, tokens],
  // k_cache/v_cache f16 [hd * kv_heads, n_kv] as llama.cpp keeps them, one row per position
  // (rows n_past.. are overwritten), kv_idx i64 [tokens]
  T x, pos, mask, k_cache, v_cache, kv_idx;
};

// The causal mask: query i (position n_past + i) sees keys 0 .. n_past + i.
inline std::vector<float> causal_mask(const block_dims& bd) {
  std::vector<float> m(static_cast<std::size_t>(bd.n_kv() * bd.tokens));
  for (std::int64_t i = 0; i < bd.tokens; ++i)
    for (std::int64_t j = 0; j < bd.n_kv(); ++j)
      m[static_cast<std::size_t>(i * bd.n_kv() + j)] = j <= bd.n_past + i ? 0.0f : -INFINITY;
  return m;
}

template <class L>
typename L::T build_block(L& l, const block_dims& bd, const block_tensors<typename L::T>& w, bool flash) {
  using T = typename L::T;
  const float eps = 1e-5f;
  const std::int64_t hd = bd.hd(), n_tok = bd.tokens, n_kv = bd.n_kv();
  T h = l.mul(l.rms_norm(w.x, eps), w.attn_norm);
  T q = l.reshape_3d(l.mul_mat(w.wq, h), hd, bd.heads, n_tok);
  T k = l.reshape_3d(l.mul_mat(w.wk, h), hd, bd.kv_heads, n_tok);
  T v = l.reshape_3d(l.mul_mat(w.wv, h), hd, bd.kv_heads, n_tok);
  q = l.rope_ext(q, w.pos, hd, 2, 10000.0f);
  k = l.rope_ext(k, w.pos, hd, 2, 10000.0f);
  // write the new keys/values into cache rows n_past.., then view the cache per head:
  // [hd, n_kv, kv_heads] with the heads strided inside each row (not contiguous)
  T kc = l.set_rows(w.k_cache, l.reshape_2d(k, hd * bd.kv_heads, n_tok), w.kv_idx);
  T vc = l.set_rows(w.v_cache, l.reshape_2d(v, hd * bd.kv_heads, n_tok), w.kv_idx);
  T kk = l.cache_heads(kc, hd, bd.kv_heads, n_kv);
  T vv = l.cache_heads(vc, hd, bd.kv_heads, n_kv);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  T attn;
  T qp = l.permute(q, 0, 2, 1, 3);  // [hd, n_tok, heads]
  if (flash) {
    attn = l.flash_attn_ext(qp, kk, vv, w.mask, scale);  // [hd, heads, n_tok]
    attn = l.reshape_2d(attn, bd.d, n_tok);
  } else {
    T kq = l.mul_mat(kk, qp);                            // [n_kv, n_tok, heads]
    kq = l.soft_max_ext(kq, w.mask, scale);
    T vt = l.cont(l.transpose(vv));                      // [n_kv, hd, kv_heads]
    T kqv = l.mul_mat(vt, kq);                           // [hd, n_tok, heads]
    attn = l.cont_2d(l.permute(kqv, 0, 2, 1, 3), bd.d, n_tok);
  }
  T x2 = l.add(w.x, l.mul_mat(w.wo, attn));
  T h2 = l.mul(l.rms_norm(x2, eps), w.ffn_norm);
  T ff = l.swiglu_split(l.mul_mat(w.w_gate, h2), l.mul_mat(w.w_up, h2));
  return l.add(x2, l.mul_mat(w.w_down, ff));
}

// Random values in [lo, hi] in every element of t (any type gk can write rows of).
inline void fill_random(gk::tensor* t, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> row(static_cast<std::size_t>(t->ne[0]));
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
        for (auto& v : row) v = u(rng);
        gk::cpu::row_writer w(t, row.data());
        float* d = w.begin(i1, i2, i3);
        if (d != row.data()) std::memcpy(d, row.data(), row.size() * 4);
        w.commit();
      }
}

// Every node's output bytes, read through its buffer where it has one (device memory).
inline std::vector<std::vector<unsigned char>> snapshot(const gk::graph& g) {
  std::vector<std::vector<unsigned char>> out;
  for (const gk::tensor* n : g.nodes()) {
    std::vector<unsigned char> b(n->nbytes());
    if (gk::backend_buffer* buf = gk::buffer_of(n)) buf->get_tensor(n, b.data(), 0, b.size());
    else if (!b.empty()) std::memcpy(b.data(), n->data, b.size());
    out.push_back(std::move(b));
  }
  return out;
}

// How many nodes' bytes differ between two snapshots (-1: different node counts).
inline std::int64_t differing_nodes(const std::vector<std::vector<unsigned char>>& a,
                                    const std::vector<std::vector<unsigned char>>& b) {
  if (a.size() != b.size()) return -1;
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
  return bad;
}

// Weights, caches and inputs of one block with random contents, in ctx (which must allocate).
inline block_tensors<gk::tensor*> make_block(gk::context& ctx, const block_dims& bd, gk::type wt, std::mt19937& rng) {
  block_tensors<gk::tensor*> w{};
  auto weight = [&](std::int64_t k, std::int64_t m) {
    gk::tensor* t = ctx.new_tensor_2d(wt, k, m);
    fill_random(t, rng, -0.1f, 0.1f);
    return t;
  };
  auto vec = [&](std::int64_t n) {
    gk::tensor* t = ctx.new_tensor_1d(gk::type::f32, n);
    fill_random(t, rng, 0.5f, 1.5f);
    return t;
  };
  const std::int64_t kvd = bd.hd() * bd.kv_heads;
  w.attn_norm = vec(bd.d);
  w.ffn_norm = vec(bd.d);
  w.wq = weight(bd.d, bd.d);
  w.wk = weight(bd.d, kvd);
  w.wv = weight(bd.d, kvd);
  w.wo = weight(bd.d, bd.d);
  w.w_gate = weight(bd.d, bd.ffn);
  w.w_up = weight(bd.d, bd.ffn);
  w.w_down = weight(bd.ffn, bd.d);
  w.x = ctx.new_tensor_2d(gk::type::f32, bd.d, bd.tokens);
  fill_random(w.x, rng);
  w.pos = ctx.new_tensor_1d(gk::type::i32, bd.tokens);
  w.kv_idx = ctx.new_tensor_1d(gk::type::i64, bd.tokens);
  for (std::int64_t i = 0; i < bd.tokens; ++i) {
    static_cast<std::int32_t*>(w.pos->data)[i] = static_cast<std::int32_t>(bd.n_past + i);
    static_cast<std::int64_t*>(w.kv_idx->data)[i] = bd.n_past + i;
  }
  w.mask = ctx.new_tensor_2d(gk::type::f16, bd.n_kv(), bd.tokens);
  const auto m = causal_mask(bd);
  for (std::size_t i = 0; i < m.size(); ++i) static_cast<std::uint16_t*>(w.mask->data)[i] = gk::f32_to_f16(m[i]);
  w.k_cache = ctx.new_tensor_2d(gk::type::f16, kvd, bd.n_kv());
  w.v_cache = ctx.new_tensor_2d(gk::type::f16, kvd, bd.n_kv());
  fill_random(w.k_cache, rng);
  fill_random(w.v_cache, rng);
  return w;
}

// The adapter for gk.
struct gk_lib {
  using T = gk::tensor*;
  gk::context& c;
  T mul(T a, T b) { return gk::mul(c, a, b); }
  T add(T a, T b) { return gk::add(c, a, b); }
  T rms_norm(T a, float eps) { return gk::rms_norm(c, a, eps); }
  T mul_mat(T a, T b) { return gk::mul_mat(c, a, b); }
  T reshape_2d(T a, std::int64_t n0, std::int64_t n1) { return gk::reshape_2d(c, a, n0, n1); }
  T reshape_3d(T a, std::int64_t n0, std::int64_t n1, std::int64_t n2) { return gk::reshape_3d(c, a, n0, n1, n2); }
  T rope_ext(T a, T pos, std::int64_t n_dims, int mode, float base) {
    return gk::rope_ext(c, a, pos, nullptr, static_cast<int>(n_dims), mode, 0, base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  }
  T set_rows(T a, T b, T idx) { return gk::set_rows(c, a, b, idx); }
  T cache_heads(T kc, std::int64_t hd, std::int64_t kvh, std::int64_t n_kv) {
    return gk::view_3d(c, kc, hd, n_kv, kvh, kc->nb[1], gk::row_size(kc->type, hd), 0);
  }
  T permute(T a, int x0, int x1, int x2, int x3) { return gk::permute(c, a, x0, x1, x2, x3); }
  T transpose(T a) { return gk::transpose(c, a); }
  T cont(T a) { return gk::cont(c, a); }
  T cont_2d(T a, std::int64_t n0, std::int64_t n1) { return gk::cont_2d(c, a, n0, n1); }
  T flash_attn_ext(T q, T k, T v, T mask, float scale) { return gk::flash_attn_ext(c, q, k, v, mask, scale, 0.0f, 0.0f); }
  T soft_max_ext(T a, T mask, float scale) { return gk::soft_max_ext(c, a, mask, scale, 0.0f); }
  T swiglu_split(T a, T b) { return gk::swiglu_split(c, a, b); }
};

}  // namespace gk_test
