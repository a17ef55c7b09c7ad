// SPDX-License-Identifier: MIT
// A transformer block's weights and inputs made once with identical bytes in gk and the
// reference (tests/common/transformer_block.hpp builds the graph on each side): used by
// tests/vs_ggml/ops/test_ops_block.cpp and benchmarks/block.cpp.
#pragma once

#include <initializer_list>
#include <vector>

#include "../../common/transformer_block.hpp"
#include "ggml_lib.hpp"
#include "harness.hpp"

namespace gk_test {

struct block_pair {
  op_pair p;
  block_dims bd;
  block_tensors<gk::tensor*> g{};
  block_tensors<ggml_tensor*> r{};

  // wscale: weights uniform in [-wscale, wscale]; mem: each side's arena bytes;
  // distinct_rows > 0: weights repeat that many encoded rows (benchmarks: speed does not
  // depend on the values, and encoding 200M weights would dominate the run).
  block_pair(gk::type wt, block_dims d, gk::type cache = gk::type::f16, float wscale = 0.1f,
             std::size_t mem = 256u << 20, std::int64_t distinct_rows = 0)
      : p(mem, 21), bd(d) {
    auto both = [&](gk::tensor*& gt, ggml_tensor*& rt, gk::type t, std::initializer_list<std::int64_t> ne, float lo,
                    float hi) {
      tpair x = p.input(t, ne, lo, hi, t == wt ? distinct_rows : 0);
      gt = x.g;
      rt = x.r;
    };
    const std::int64_t kvd = bd.hd() * bd.kv_heads;
    both(g.attn_norm, r.attn_norm, gk::type::f32, {bd.d}, 0.5f, 1.5f);
    both(g.ffn_norm, r.ffn_norm, gk::type::f32, {bd.d}, 0.5f, 1.5f);
    both(g.wq, r.wq, wt, {bd.d, bd.d}, -wscale, wscale);
    both(g.wk, r.wk, wt, {bd.d, kvd}, -wscale, wscale);
    both(g.wv, r.wv, wt, {bd.d, kvd}, -wscale, wscale);
    both(g.wo, r.wo, wt, {bd.d, bd.d}, -wscale, wscale);
    both(g.w_gate, r.w_gate, wt, {bd.d, bd.ffn}, -wscale, wscale);
    both(g.w_up, r.w_up, wt, {bd.d, bd.ffn}, -wscale, wscale);
    both(g.w_down, r.w_down, wt, {bd.ffn, bd.d}, -wscale, wscale);
    both(g.x, r.x, gk::type::f32, {bd.d, bd.tokens}, -1.0f, 1.0f);
    both(g.k_cache, r.k_cache, cache, {kvd, bd.n_kv()}, -1.0f, 1.0f);
    both(g.v_cache, r.v_cache, cache, {kvd, bd.n_kv()}, -1.0f, 1.0f);
    both(g.pos, r.pos, gk::type::i32, {bd.tokens}, 0, 0);
    both(g.kv_idx, r.kv_idx, gk::type::i64, {bd.tokens}, 0, 0);
    both(g.mask, r.mask, gk::type::f16, {bd.n_kv(), bd.tokens}, 0, 0);
    std::vector<std::int64_t> pos;
    for (std::int64_t i = 0; i < bd.tokens; ++i) pos.push_back(bd.n_past + i);
    p.set_ints({g.pos, r.pos}, pos);
    p.set_ints({g.kv_idx, r.kv_idx}, pos);
    p.set({g.mask, r.mask}, causal_mask(bd));
  }

  tpair build(bool flash) {
    gk_lib gl{p.g};
    ggml_lib rl{p.r};
    return {build_block(gl, bd, g, flash), build_block(rl, bd, r, flash)};
  }
};

}  // namespace gk_test
