// SPDX-License-Identifier: MIT
// Whole graphs on the CUDA backend: a llama-style transformer block (tests/common) with
// its weights and inputs in device memory, computed through the scheduler, against the
// CPU's compute of the same graph.
//  - every node of the block is one the device computes (no silent CPU fallback);
//  - the output agrees with the CPU within the stated tolerance (the CPU's integer paths
//    quantize activations to 8 bits, the device's float paths do not: the difference is
//    the CPU's own quantization error, about 1% of the output's scale);
//  - the same graph computed twice on the device gives the same bytes (no atomics, no
//    order that depends on timing).
#include <cmath>

#include "harness.hpp"

namespace {

using gk_test::block_dims;

// The block's tensors; the positions, cache rows and mask are filled here (names '#...')
// when the context allocates, the rest by the harness.
gk::tensor* block(gk::context& ctx, gk::type wt, bool flash) {
  block_dims bd;
  bd.tokens = 7;
  bd.n_past = 5;
  gk_test::block_tensors<gk::tensor*> w{};
  const std::int64_t kvd = bd.hd() * bd.kv_heads;
  auto weight = [&](std::int64_t k, std::int64_t m) { return ctx.new_tensor_2d(wt, k, m); };
  w.attn_norm = ctx.new_tensor_1d(gk::type::f32, bd.d);
  w.ffn_norm = ctx.new_tensor_1d(gk::type::f32, bd.d);
  w.wq = weight(bd.d, bd.d);
  w.wk = weight(bd.d, kvd);
  w.wv = weight(bd.d, kvd);
  w.wo = weight(bd.d, bd.d);
  w.w_gate = weight(bd.d, bd.ffn);
  w.w_up = weight(bd.d, bd.ffn);
  w.w_down = weight(bd.ffn, bd.d);
  w.x = ctx.new_tensor_2d(gk::type::f32, bd.d, bd.tokens);
  w.pos = ctx.new_tensor_1d(gk::type::i32, bd.tokens);
  w.kv_idx = ctx.new_tensor_1d(gk::type::i64, bd.tokens);
  w.mask = ctx.new_tensor_2d(gk::type::f16, bd.n_kv(), bd.tokens);
  w.k_cache = ctx.new_tensor_2d(gk::type::f16, kvd, bd.n_kv());
  w.v_cache = ctx.new_tensor_2d(gk::type::f16, kvd, bd.n_kv());
  std::snprintf(w.pos->name, sizeof w.pos->name, "#pos");
  std::snprintf(w.kv_idx->name, sizeof w.kv_idx->name, "#kv_idx");
  std::snprintf(w.mask->name, sizeof w.mask->name, "#mask");
  // weights as in a model (|w| <= 0.1), not the harness's uniform(-1, 1): with unit weights
  // the attention scores reach the hundreds and softmax turns any rounding difference
  // (the CPU's 8-bit activations) into a different attention pattern
  std::mt19937 rng(11);
  for (gk::tensor* t : {w.wq, w.wk, w.wv, w.wo, w.w_gate, w.w_up, w.w_down}) {
    std::snprintf(t->name, sizeof t->name, "#weight");
    if (t->data) gk_test::fill_random(t, rng, -0.1f, 0.1f);
  }
  if (w.pos->data) {
    for (std::int64_t i = 0; i < bd.tokens; ++i) {
      static_cast<std::int32_t*>(w.pos->data)[i] = static_cast<std::int32_t>(bd.n_past + i);
      static_cast<std::int64_t*>(w.kv_idx->data)[i] = bd.n_past + i;
    }
    const auto m = gk_test::causal_mask(bd);
    for (std::size_t i = 0; i < m.size(); ++i) static_cast<std::uint16_t*>(w.mask->data)[i] = gk::f32_to_f16(m[i]);
  }
  gk_test::gk_lib l{ctx};
  return gk_test::build_block(l, bd, w, flash);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace

TEST_CASE("a transformer block runs wholly on the device and matches the CPU") {
  for (gk::type wt : {gk::type::f16, gk::type::q8_0, gk::type::q4_K})
    for (bool flash : {false, true}) {
      // every node served by the device
      gk::context c{gk::context_params{64u << 20, nullptr, true}};
      gk::graph g;
      g.build_forward_expand(block(c, wt, flash));
      int refused = 0;
      for (gk::tensor* n : g.nodes())
        if (!gk_cuda_test::cuda_backend().supports_op(n)) {
          ++refused;
          UNSCOPED_INFO("refused: " << gk::describe(n));
        }
      CAPTURE(gk::name(wt), flash);
      CHECK(refused == 0);

      const auto p = gk_cuda_test::run_pair([&](gk::context& ctx) { return block(ctx, wt, flash); }, 3);
      const double scale = max_abs(p.cpu);
      INFO("max |cpu| " << scale << ", max |dev - cpu| " << p.max_abs());
      CHECK(scale > 0.1);
      CHECK(p.max_abs() <= 0.02 * scale);
      const auto q = gk_cuda_test::run_pair([&](gk::context& ctx) { return block(ctx, wt, flash); }, 3);
      CHECK(q.dev_bytes == p.dev_bytes);
    }
}
