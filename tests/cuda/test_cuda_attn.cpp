// SPDX-License-Identifier: MIT
// flash_attn_ext on CUDA against the CPU definition (harness.hpp).
//
// Bar: max |dev - cpu| <= 1e-5 on outputs of magnitude <= 1 (V in (-1, 1)); NaN classes
// must agree. The scores are the CPU's bits (same q encoding, same dot order), so what is
// left is the softmax order: the CPU streams keys one by one, the device takes a tile's
// max first and merges key splits, so exponentials and sums round differently (expected
// ~1e-7; the bar leaves a factor of ~50 for long rows).
// Covered: head dims 64, 80 (f16 K only: quantized K needs whole 32-blocks), 128 and 256;
// KV lengths 1, 7, 256, 1000; K f16/q8_0/q4_0 with V f16/q8_0/q4_0/f32; with and without
// mask, sinks, softcap, ALiBi; GQA (8 query heads on 2 KV heads); batch 2; K/V as strided
// views of a cache and Q permuted; fully masked rows; NaN in V rows whose keys are masked.
#include "harness.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace {

using gk_cuda_test::run_pair;

constexpr float inf = std::numeric_limits<float>::infinity();

template <class F>
void fill(gk::tensor* t, F&& value_at) {
  if (!t->data) return;
  const std::int64_t n = t->nelements();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = value_at(i);
    if (t->type == gk::type::f32) static_cast<float*>(t->data)[i] = v;
    else static_cast<gk::f16*>(t->data)[i] = gk::to_f16(v);
  }
}

float uniform(std::uint32_t i, std::uint32_t seed) {
  std::uint32_t x = i * 2654435761u ^ seed * 40503u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<float>(x & 0xffffff) / 8388608.0f - 1.0f;
}

struct attn_case {
  std::int64_t dk, dv, n_kv, n_q, heads, kv_heads, batch;
  gk::type kt, vt;
  bool mask, sinks, cache_view;
  float softcap, max_bias;
};

// q [dk, n_q, heads, batch] (permuted from [dk, heads, n_q]), k/v [d, n_kv, kv_heads, batch]
gk::tensor* build(gk::context& ctx, const attn_case& c) {
  gk::tensor* q = gk::permute(ctx, ctx.new_tensor_4d(gk::type::f32, c.dk, c.heads, c.n_q, c.batch), 0, 2, 1, 3);
  gk::tensor *k, *v;
  if (c.cache_view) {  // one cache row per position holding every KV head, as llama.cpp keeps it
    gk::tensor* kc = ctx.new_tensor_3d(c.kt, c.dk * c.kv_heads, c.n_kv, c.batch);
    gk::tensor* vc = ctx.new_tensor_3d(c.vt, c.dv * c.kv_heads, c.n_kv, c.batch);
    k = gk::permute(ctx, gk::view_4d(ctx, kc, c.dk, c.kv_heads, c.n_kv, c.batch, gk::row_size(c.kt, c.dk), kc->nb[1],
                                     kc->nb[2], 0),
                    0, 2, 1, 3);
    v = gk::permute(ctx, gk::view_4d(ctx, vc, c.dv, c.kv_heads, c.n_kv, c.batch, gk::row_size(c.vt, c.dv), vc->nb[1],
                                     vc->nb[2], 0),
                    0, 2, 1, 3);
  } else {
    k = ctx.new_tensor_4d(c.kt, c.dk, c.n_kv, c.kv_heads, c.batch);
    v = ctx.new_tensor_4d(c.vt, c.dv, c.n_kv, c.kv_heads, c.batch);
  }
  gk::tensor* mask = nullptr;
  if (c.mask) {
    // rows padded past n_q, as llama.cpp pads them; -inf on a causal band and a few
    // scattered keys; ALiBi reads the finite entries as (negative) distances
    const std::int64_t rows = c.n_q + 3;
    mask = ctx.new_tensor_2d(gk::type::f16, c.n_kv, rows)->set_name("#mask");
    fill(mask, [&](std::int64_t i) {
      const std::int64_t key = i % c.n_kv, row = i / c.n_kv;
      if (key > c.n_kv - c.n_q + row) return -inf;
      if (key % 5 == 3) return -inf;
      return c.max_bias > 0.0f ? -static_cast<float>(c.n_kv - key) : 0.5f * uniform(static_cast<std::uint32_t>(i), 17);
    });
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
  gk::tensor* r = gk::flash_attn_ext(ctx, q, k, v, mask, scale, c.max_bias, c.softcap);
  if (c.sinks) gk::flash_attn_ext_add_sinks(r, ctx.new_tensor_1d(gk::type::f32, c.heads));
  return r;
}

void check_case(const attn_case& c, unsigned seed = 1) {
  INFO("dk " << c.dk << " dv " << c.dv << " n_kv " << c.n_kv << " n_q " << c.n_q << " heads " << c.heads << "/"
             << c.kv_heads << " batch " << c.batch << " K " << gk::name(c.kt) << " V " << gk::name(c.vt) << " mask "
             << c.mask << " sinks " << c.sinks << " softcap " << c.softcap << " max_bias " << c.max_bias << " view "
             << c.cache_view);
  const auto p = run_pair([&](gk::context& ctx) { return build(ctx, c); }, seed);
  CHECK(p.max_abs() <= 1e-5);
}

}  // namespace

TEST_CASE("flash_attn_ext on CUDA: head dims x KV lengths, f16 K/V, each option in turn") {
  int variant = 0;
  for (std::int64_t d : {64, 80, 128})
    for (std::int64_t n_kv : {1, 7, 256, 1000}) {
      attn_case c{d, d, n_kv, 5, 8, 2, 1, gk::type::f16, gk::type::f16, false, false, false, 0.0f, 0.0f};
      check_case(c);  // plain
      // one option set per (d, n_kv), rotating, plus everything at once
      switch (variant++ % 4) {
        case 0: c.mask = true; break;
        case 1: c.mask = true, c.sinks = true; break;
        case 2: c.softcap = 30.0f, c.mask = true; break;
        default: c.mask = true, c.max_bias = 8.0f; break;
      }
      check_case(c);
      c.mask = c.sinks = true, c.softcap = 20.0f, c.max_bias = 4.0f, c.cache_view = true, c.batch = 2;
      check_case(c);
    }
}

TEST_CASE("flash_attn_ext on CUDA: quantized K and V decoded in the kernel") {
  for (gk::type kt : {gk::type::q8_0, gk::type::q4_0})
    for (gk::type vt : {gk::type::f16, gk::type::q8_0, gk::type::q4_0})
      for (std::int64_t d : {64, 128})
        for (std::int64_t n_kv : {7, 256, 1000}) {
          attn_case c{d, d, n_kv, 3, 8, 2, 1, kt, vt, true, false, n_kv == 256, 0.0f, 0.0f};
          check_case(c);
        }
  // decode: one query row, long cache, every option
  attn_case c{128, 128, 1000, 1, 32, 8, 1, gk::type::q8_0, gk::type::q8_0, true, true, true, 30.0f, 0.0f};
  check_case(c);
  c.kt = gk::type::q4_0;
  check_case(c);
}

TEST_CASE("flash_attn_ext on CUDA: f32 V, D_v != D_k, wide heads, many query rows, no GQA") {
  check_case({128, 64, 300, 2, 4, 4, 1, gk::type::f16, gk::type::f32, true, false, false, 0.0f, 0.0f});
  check_case({256, 256, 257, 9, 4, 1, 1, gk::type::f16, gk::type::f16, true, true, false, 0.0f, 0.0f});
  check_case({64, 64, 100, 70, 2, 2, 2, gk::type::f32, gk::type::f16, true, false, false, 0.0f, 0.0f});
  check_case({64, 64, 33, 1, 1, 1, 1, gk::type::bf16, gk::type::bf16, false, true, false, 0.0f, 0.0f});
}

TEST_CASE("flash_attn_ext on CUDA: fully masked rows give 0 (with or without a sink); masked NaN V is never read") {
  for (bool sinks : {false, true}) {
    INFO("sinks " << sinks);
    const std::int64_t dk = 64, n_kv = 40, n_q = 4, heads = 2;
    const auto p = run_pair([&](gk::context& ctx) {
      gk::tensor* q = ctx.new_tensor_3d(gk::type::f32, dk, n_q, heads);
      gk::tensor* k = ctx.new_tensor_3d(gk::type::f16, dk, n_kv, 1);
      gk::tensor* v = ctx.new_tensor_3d(gk::type::f16, dk, n_kv, 1)->set_name("#v");
      fill(v, [&](std::int64_t i) {  // keys 3 and 17 (always masked) have NaN value rows
        const std::int64_t key = i / dk;
        return key == 3 || key == 17 ? std::numeric_limits<float>::quiet_NaN() : uniform(static_cast<std::uint32_t>(i), 2);
      });
      gk::tensor* mask = ctx.new_tensor_2d(gk::type::f16, n_kv, n_q)->set_name("#mask");
      fill(mask, [&](std::int64_t i) {
        const std::int64_t key = i % n_kv, row = i / n_kv;
        if (row == 2 || key == 3 || key == 17) return -inf;  // row 2 sees nothing
        return 0.0f;
      });
      gk::tensor* r = gk::flash_attn_ext(ctx, q, k, v, mask, 0.125f, 0.0f, 0.0f);
      if (sinks) gk::flash_attn_ext_add_sinks(r, ctx.new_tensor_1d(gk::type::f32, heads));
      return r;
    });
    CHECK(p.max_abs() <= 1e-5);
    bool row2_zero = true;  // result [dk, heads, n_q]: row 2 is elements [2*dk*heads, 3*dk*heads)
    for (std::int64_t i = 2 * dk * heads; i < 3 * dk * heads; ++i) row2_zero = row2_zero && p.dev[static_cast<std::size_t>(i)] == 0.0;
    CHECK(row2_zero);
  }
}

TEST_CASE("flash_attn_ext on CUDA: a NaN in Q makes that row NaN, as on the CPU") {
  const auto p = run_pair([&](gk::context& ctx) {
    gk::tensor* q = ctx.new_tensor_3d(gk::type::f32, 64, 3, 2)->set_name("#q");
    fill(q, [&](std::int64_t i) { return i == 70 ? std::numeric_limits<float>::quiet_NaN() : uniform(static_cast<std::uint32_t>(i), 4); });
    gk::tensor* k = ctx.new_tensor_3d(gk::type::f16, 64, 50, 2);
    gk::tensor* v = ctx.new_tensor_3d(gk::type::f16, 64, 50, 2);
    return gk::flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
  });
  CHECK(p.max_abs() <= 1e-5);
}
