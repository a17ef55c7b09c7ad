// SPDX-License-Identifier: MIT
// One composed transformer block (rms_norm, four projections, rope, a KV cache written
// with set_rows and read through strided per-head views, attention as flash_attn_ext or
// as mul_mat + soft_max_ext + mul_mat, a SwiGLU FFN, two residual adds) built with the
// same code in gk and the reference (tests/common/transformer_block.hpp), same inputs,
// compared on the block's output.
//
// Bars (relative L2 distance between the two outputs), with what sets them:
//   f32 weights, soft_max attention: 2e-6. Float dots summed in different orders and 1-4
//     ulp exp differences; measured 2-3e-7.
//   f32 weights, flash attention with the f16 cache: 1e-3. The reference accumulates f16
//     V rows in f16 (gk in f32); its own distance from the truth is 4.5e-4..1.6e-3 on
//     attention outputs (tests/vs_ggml/ops/test_ops_attn.cpp). Measured 2.1-2.3e-4.
//   quantized weights: 1e-2, or 3e-2 behind the reference's f16 V sum (flash attention
//     on the f16 cache). Every projection encodes its activations to 8 bits, and that
//     encoding is discontinuous: a 1-ulp difference upstream (an exp, a float sum, the
//     reference's f16 V sum) can move one code by a whole step. With identical upstream
//     values the two libraries agree to 1e-7 (soft_max path, measured 1.0e-7 on q8_0 and
//     q4_0); with one flipped code 3.8e-3 (q4_K); behind the reference's f16 V sum
//     7.4e-3..1.3e-2 (flash path). The quantized controls run on the f32 cache (bar 1e-2).
// The planted controls perturb one weight of the gk graph and must exceed the bar.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "block_pair.hpp"

using namespace gk;
using gk_test::op_pair;
using gk_test::tpair;

namespace {

double rel_l2(const tensor* a, const tensor* b) {
  const auto x = gk_test::read_all(a), y = gk_test::read_all(b);
  double se = 0, s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    se += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    s += static_cast<double>(y[i]) * y[i];
  }
  return std::sqrt(se / s);
}

double bar(type wt, bool flash, type cache) {
  if (wt != type::f32) return cache == type::f16 && flash ? 3e-2 : 1e-2;
  return flash && cache == type::f16 ? 1e-3 : 2e-6;
}

}  // namespace

TEST_CASE("a transformer block matches the reference", "[ops][block]") {
  const std::pair<type, type> cases[] = {{type::f32, type::f16},  {type::f32, type::f32}, {type::q8_0, type::f16},
                                         {type::q8_0, type::f32}, {type::q4_K, type::f16}, {type::q4_K, type::f32},
                                         {type::q4_0, type::f16}};
  for (auto [wt, cache] : cases) {
    for (bool flash : {true, false}) {
      for (std::int64_t tokens : {1, 9}) {
        gk_test::block_dims bd;
        bd.d = 256;
        bd.heads = 4;
        bd.kv_heads = 2;
        bd.ffn = 512;
        bd.tokens = tokens;
        bd.n_past = 6;
        gk_test::block_pair bp(wt, bd, cache);
        tpair y = bp.build(flash);
        REQUIRE(gk_test::same_shape(y));
        bp.p.compute_gk(y, 3);
        bp.p.compute_ref(y, 2);
        const double d = rel_l2(y.g, gk_test::as_gk(y.r));
        std::printf("block %-5s cache %-4s %-9s tokens=%lld  rel L2 gk vs ref %.3e (bar %.0e)\n",
                    std::string(name(wt)).c_str(), std::string(name(cache)).c_str(), flash ? "flash" : "soft_max",
                    static_cast<long long>(tokens), d, bar(wt, flash, cache));
        INFO(name(wt) << " cache " << name(cache) << (flash ? " flash" : " soft_max") << " tokens " << tokens);
        CHECK(d <= bar(wt, flash, cache));
      }
    }
  }
}

TEST_CASE("planted control: one perturbed f32 weight exceeds the float bar", "[ops][block][control]") {
  gk_test::block_dims bd;
  bd.tokens = 9;
  gk_test::block_pair bp(type::f32, bd);
  static_cast<float*>(bp.g.w_down->data)[3] += 0.01f;
  tpair y = bp.build(false);
  bp.p.compute_gk(y, 2);
  bp.p.compute_ref(y, 1);
  const double d = rel_l2(y.g, gk_test::as_gk(y.r));
  std::printf("control: one f32 weight +0.01: rel L2 %.3e (bar %.0e)\n", d, bar(type::f32, false, type::f16));
  CHECK(d > bar(type::f32, false, type::f16));
}

TEST_CASE("planted control: one perturbed weight row scale exceeds the quantized bar", "[ops][block][control]") {
  gk_test::block_dims bd;
  bd.tokens = 9;
  gk_test::block_pair bp(type::q8_0, bd, type::f32);
  // every block of one output row of w_down (the row a kernel with a wrong row offset
  // would read for its neighbour): scales x1.5
  auto* blk = reinterpret_cast<formats::q8_0::block*>(bp.g.w_down->at(5));
  for (std::int64_t i = 0; i < bd.ffn / 32; ++i) blk[i].d = to_f16(to_f32(blk[i].d) * 1.5f);
  tpair y = bp.build(true);
  bp.p.compute_gk(y, 2);
  bp.p.compute_ref(y, 1);
  const double d = rel_l2(y.g, gk_test::as_gk(y.r));
  std::printf("control: one q8_0 row's scales x1.5: rel L2 %.3e (bar %.0e)\n", d, bar(type::q8_0, true, type::f32));
  CHECK(d > bar(type::q8_0, true, type::f32));
}
