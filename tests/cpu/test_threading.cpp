// SPDX-License-Identifier: MIT
// Same inputs, same bits at every thread count. Two graphs — a transformer block (in both
// attention forms) and a graph touching the rest of the core op set — are computed at 1,
// 2, 3, 4, 5, 7, 8, 16 and 64 threads, and every node's output must equal the 1-thread
// run byte for byte. The planted control is a row sum split into one chunk per thread
// (the thing kernels must not do): run through the same comparison it must differ.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "../common/transformer_block.hpp"
#include "gk/gk.hpp"

using namespace gk;

namespace {

const int thread_counts[] = {2, 3, 4, 5, 7, 8, 16, 64};

using gk_test::differing_nodes;
using gk_test::fill_random;
using gk_test::make_block;
using gk_test::snapshot;

void check_all_thread_counts(const graph& g) {
  cpu::compute(g, 1);
  const auto want = snapshot(g);
  for (int nth : thread_counts) {
    cpu::compute(g, nth);
    INFO("threads = " << nth);
    CHECK(differing_nodes(want, snapshot(g)) == 0);
  }
}

}  // namespace

TEST_CASE("a transformer block is bit-identical at every thread count", "[cpu][threads]") {
  for (type wt : {type::q4_K, type::q8_0, type::f16}) {
    for (bool flash : {true, false}) {
      context ctx({64u << 20});
      std::mt19937 rng(42);
      gk_test::block_dims bd;
      bd.tokens = 9;
      bd.n_past = 4;
      auto w = make_block(ctx, bd, wt, rng);
      gk_test::gk_lib l{ctx};
      graph g;
      g.build_forward_expand(gk_test::build_block(l, bd, w, flash));
      INFO(name(wt) << (flash ? " flash attention" : " soft_max attention"));
      check_all_thread_counts(g);
    }
  }
}

TEST_CASE("the rest of the core op set is bit-identical at every thread count", "[cpu][threads]") {
  context ctx({64u << 20});
  std::mt19937 rng(7);
  tensor* a = ctx.new_tensor_3d(type::f32, 96, 13, 3);
  tensor* b = ctx.new_tensor_3d(type::f32, 96, 1, 3);
  fill_random(a, rng);
  fill_random(b, rng);
  tensor* q = ctx.new_tensor_2d(type::q4_K, 256, 11);
  fill_random(q, rng);
  tensor* ids = ctx.new_tensor_1d(type::i32, 5);
  for (int i = 0; i < 5; ++i) static_cast<std::int32_t*>(ids->data)[i] = (i * 7) % 11;

  std::vector<tensor*> outs = {
      soft_max(ctx, a),
      norm(ctx, a, 1e-5f),
      group_norm(ctx, reshape_4d(ctx, a, 96, 13, 3, 1), 3, 1e-5f),
      l2_norm(ctx, a, 1e-6f),
      gelu(ctx, a),
      silu(ctx, cont(ctx, permute(ctx, a, 1, 0, 2, 3))),
      sum_rows(ctx, a),
      mean(ctx, a),
      cumsum(ctx, a),
      argsort(ctx, a, sort_order::desc),
      top_k(ctx, a, 5),
      argmax(ctx, reshape_2d(ctx, a, 96, 39)),
      div(ctx, a, b),
      cpy(ctx, a, ctx.new_tensor_3d(type::q4_0, 96, 13, 3)),
      cpy(ctx, a, ctx.new_tensor_3d(type::f16, 96, 13, 3)),
      get_rows(ctx, q, ids),
      concat(ctx, a, b, 1),
      repeat(ctx, b, a),
      diag_mask_inf(ctx, a, 2),
      scale(ctx, clamp(ctx, a, -0.5f, 0.5f), 3.0f),
      sum(ctx, a),
      out_prod(ctx, a, reshape_3d(ctx, cont(ctx, view_3d(ctx, a, 5, 13, 3, a->nb[1], a->nb[2], 0)), 5, 13, 3)),
  };
  graph g;
  for (tensor* t : outs) g.build_forward_expand(t);
  check_all_thread_counts(g);
}

TEST_CASE("planted control: a row sum split per thread changes with the thread count", "[cpu][threads][control]") {
  // The forbidden pattern, computed the way a bad kernel would: each thread sums its own
  // chunk of the row, and the partial sums are added in thread order.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(4097);
  for (auto& v : x) v = u(rng) * 1000.0f;
  auto chunked = [&](int nth) {
    float total = 0.0f;
    for (int t = 0; t < nth; ++t) {
      float part = 0.0f;
      for (std::size_t i = x.size() * t / nth; i < x.size() * (t + 1) / nth; ++i) part += x[i];
      total += part;
    }
    std::vector<unsigned char> bytes(4);
    std::memcpy(bytes.data(), &total, 4);
    return std::vector<std::vector<unsigned char>>{bytes};
  };
  const auto want = chunked(1);
  std::int64_t differing = 0;
  for (int nth : thread_counts) differing += differing_nodes(want, chunked(nth));
  CHECK(differing > 0);
}
