// SPDX-License-Identifier: MIT
// rope in every mode (normal, neox, mrope, imrope, vision) against the reference: full
// and partial rotation, odd pair counts, frequency factors, YaRN, f16 rows, strided
// inputs, in place, offsets; at 1, 2, 3 and 7 threads. Also rope_yarn_corr_dims.
//
// Bar: gk's arithmetic is the reference's scalar arithmetic (cpu/rope.hpp), so neox,
// multi, vision and f16 rows must be bit-identical. In normal mode the reference
// vectorises, and on short rows its vector loop rounds x0*c and x1*s separately where gk
// fuses one of them; the outputs then differ by at most one product rounding (2^-25 for
// |product| < 1) plus the two final roundings (2^-24 each for |y| < 2): the bar is
// max_abs <= 1.5 * 2^-23 = 1.8e-7 (inputs in [-1, 1]). Measured: 1.19e-7 (see the log).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "run_case.hpp"

namespace {

using gk_test::op_pair;
using gk_test::tpair;

constexpr int thread_counts[] = {1, 2, 3, 7};

struct bar {
  double abs = 0;  // 0: bit-identical
  bool holds(const gk_test::diff& d) const {
    if (d.nan_mismatch) return false;
    return abs == 0 ? d.mismatches == 0 : d.max_abs <= abs;
  }
  std::string str() const {
    char b[48];
    std::snprintf(b, sizeof b, "abs <= %.3g", abs);
    return abs == 0 ? "bit-identical" : b;
  }
};
constexpr bar exact{0};
constexpr bar one_ulp{1.5 * 0x1p-23};  // normal mode, inputs in [-1, 1]

using case_fn = std::function<tpair(op_pair&)>;

gk_test::diff run_case(const std::string& name, const case_fn& make, const bar& b, std::uint64_t seed = 17) {
  return gk_test::run_case_at_thread_counts(name, make, b, seed, thread_counts, 64);
}

// Positions: random tokens in [0, 5000) (4 per token for the multi modes).
tpair positions(op_pair& p, std::int64_t n) { return p.input(gk::type::i32, {n}, 0.0f, 4999.0f); }

struct rope_case {
  std::array<std::int64_t, 4> ne;  // head_dim, heads, tokens, batch
  int n_dims;
  int mode;
  gk::type type = gk::type::f32;
  bool freq_factors = false;
  bool yarn = false;
  std::array<int, 4> sections{};
  int n_offs = 0;
};

std::string describe_case(const rope_case& c) {
  const char* m = c.mode == 0 ? "normal" : c.mode == 2 ? "neox" : c.mode == 8 ? "mrope" : c.mode == 24 ? "vision" : "imrope";
  std::string s = std::string("rope ") + m + " " + std::string(gk::name(c.type)) + gk::shape_string(c.ne.data()) +
                  " n_dims " + std::to_string(c.n_dims);
  if (c.mode & 8)
    s += " sect " + std::to_string(c.sections[0]) + "," + std::to_string(c.sections[1]) + "," +
         std::to_string(c.sections[2]) + "," + std::to_string(c.sections[3]);
  if (c.freq_factors) s += " ff";
  if (c.yarn) s += " yarn";
  if (c.n_offs) s += " offs " + std::to_string(c.n_offs);
  return s;
}

// input_view: 0 packed, 1 a view of every other head of a wider tensor (strided rows),
// 2 a permuted tensor ([hd, tok, heads] stored, heads and tokens swapped)
tpair make_rope(op_pair& p, const rope_case& c, bool inplace = false, int input_view = 0) {
  tpair a;
  if (input_view == 1) {
    auto big = p.input(c.type, {c.ne[0], 2 * c.ne[1], c.ne[2], c.ne[3]});
    const std::size_t nb1 = 2 * big.g->nb[1];
    a.g = gk::view_4d(p.g, big.g, c.ne[0], c.ne[1], c.ne[2], c.ne[3], nb1, big.g->nb[2], big.g->nb[3], big.g->nb[1]);
    a.r = ggml_view_4d(p.r, big.r, c.ne[0], c.ne[1], c.ne[2], c.ne[3], nb1, big.r->nb[2], big.r->nb[3], big.r->nb[1]);
  } else if (input_view == 2) {
    auto t = p.input(c.type, {c.ne[0], c.ne[2], c.ne[1], c.ne[3]});
    a.g = gk::permute(p.g, t.g, 0, 2, 1, 3);
    a.r = ggml_permute(p.r, t.r, 0, 2, 1, 3);
  } else {
    a = p.input(c.type, c.ne);
  }
  const bool multi = (c.mode & 8) != 0;
  auto pos = positions(p, (multi ? 4 : 1) * c.ne[2]);
  tpair ff{};
  if (c.freq_factors) {
    const std::int64_t nf = c.mode == 24 ? c.n_dims : c.n_dims / 2;
    ff = p.input(gk::type::f32, {nf}, 0.5f, 4.0f);
  }
  const float base = c.yarn ? 500000.0f : 10000.0f;
  const float freq_scale = c.yarn ? 0.25f : 1.0f, ext = c.yarn ? 1.0f : 0.0f, attn = c.yarn ? 1.1f : 1.0f;
  const float beta_fast = 32.0f, beta_slow = 1.0f;
  const int n_ctx_orig = c.yarn ? 4096 : 0;
  tpair y;
  if (multi) {
    int s[4] = {c.sections[0], c.sections[1], c.sections[2], c.sections[3]};
    if (inplace)
      y = op_pair::out(gk::rope_multi_inplace(p.g, a.g, pos.g, ff.g, c.n_dims, s, c.mode, n_ctx_orig, base, freq_scale,
                                              ext, attn, beta_fast, beta_slow),
                       ggml_rope_multi_inplace(p.r, a.r, pos.r, ff.r, c.n_dims, s, c.mode, n_ctx_orig, base,
                                               freq_scale, ext, attn, beta_fast, beta_slow));
    else
      y = op_pair::out(gk::rope_multi(p.g, a.g, pos.g, ff.g, c.n_dims, s, c.mode, n_ctx_orig, base, freq_scale, ext,
                                      attn, beta_fast, beta_slow),
                       ggml_rope_multi(p.r, a.r, pos.r, ff.r, c.n_dims, s, c.mode, n_ctx_orig, base, freq_scale, ext,
                                       attn, beta_fast, beta_slow));
  } else if (!c.freq_factors && !c.yarn) {
    y = inplace ? op_pair::out(gk::rope_inplace(p.g, a.g, pos.g, c.n_dims, c.mode),
                               ggml_rope_inplace(p.r, a.r, pos.r, c.n_dims, c.mode))
                : op_pair::out(gk::rope(p.g, a.g, pos.g, c.n_dims, c.mode), ggml_rope(p.r, a.r, pos.r, c.n_dims, c.mode));
  } else {
    y = inplace ? op_pair::out(gk::rope_ext_inplace(p.g, a.g, pos.g, ff.g, c.n_dims, c.mode, n_ctx_orig, base,
                                                    freq_scale, ext, attn, beta_fast, beta_slow),
                               ggml_rope_ext_inplace(p.r, a.r, pos.r, ff.r, c.n_dims, c.mode, n_ctx_orig, base,
                                                     freq_scale, ext, attn, beta_fast, beta_slow))
                : op_pair::out(gk::rope_ext(p.g, a.g, pos.g, ff.g, c.n_dims, c.mode, n_ctx_orig, base, freq_scale, ext,
                                            attn, beta_fast, beta_slow),
                               ggml_rope_ext(p.r, a.r, pos.r, ff.r, c.n_dims, c.mode, n_ctx_orig, base, freq_scale, ext,
                                             attn, beta_fast, beta_slow));
  }
  if (c.n_offs) {
    gk::rope_set_offset(y.g, c.n_offs);
    ggml_rope_set_offset(y.r, c.n_offs);
  }
  return y;
}

// The bar for a case: exact except normal mode on f32, where the reference vectorises.
bar bar_for(const rope_case& c) { return c.mode == 0 && c.type == gk::type::f32 ? one_ulp : exact; }

}  // namespace

TEST_CASE("rope normal and neox against the reference", "[vs_ggml][rope]") {
  std::vector<rope_case> cases;
  for (int mode : {0, 2}) {
    cases.push_back({{2, 1, 1, 1}, 2, mode});
    cases.push_back({{6, 3, 7, 1}, 6, mode});       // 3 pairs
    cases.push_back({{18, 5, 4, 2}, 18, mode});     // 9 pairs
    cases.push_back({{18, 5, 4, 2}, 10, mode});     // partial: 5 of 9 pairs
    cases.push_back({{64, 4, 5, 1}, 64, mode});
    cases.push_back({{128, 3, 6, 1}, 32, mode});    // partial, 16 of 64 pairs
    cases.push_back({{80, 5, 3, 1}, 80, mode});     // head dim 80: 40 pairs
    cases.push_back({{34, 3, 9, 1}, 34, mode, gk::type::f32, true});          // freq factors
    cases.push_back({{128, 2, 7, 1}, 128, mode, gk::type::f32, true, true});  // factors + YaRN
    cases.push_back({{96, 3, 5, 1}, 64, mode, gk::type::f32, false, true});   // partial + YaRN
    cases.push_back({{64, 4, 5, 1}, 64, mode, gk::type::f16});
    cases.push_back({{34, 3, 9, 1}, 18, mode, gk::type::f16, true, true});
    cases.push_back({{64, 2, 3, 1}, 32, mode, gk::type::f32, false, false, {}, 16});  // offset
  }
  for (const auto& c : cases) run_case(describe_case(c), [&](op_pair& p) { return make_rope(p, c); }, bar_for(c));
  // strided inputs and in place
  for (int mode : {0, 2}) {
    const rope_case c{{64, 3, 5, 2}, 48, mode, gk::type::f32, false, true};
    run_case(describe_case(c) + " (view, strided rows)", [&](op_pair& p) { return make_rope(p, c, false, 1); },
             bar_for(c));
    run_case(describe_case(c) + " (permuted)", [&](op_pair& p) { return make_rope(p, c, false, 2); }, bar_for(c));
    run_case(describe_case(c) + " (in place)", [&](op_pair& p) { return make_rope(p, c, true); }, bar_for(c));
    const rope_case h{{64, 3, 5, 2}, 48, mode, gk::type::f16};
    run_case(describe_case(h) + " (view, strided rows)", [&](op_pair& p) { return make_rope(p, h, false, 1); },
             bar_for(h));
    run_case(describe_case(h) + " (in place)", [&](op_pair& p) { return make_rope(p, h, true); }, bar_for(h));
  }
}

TEST_CASE("rope multi modes against the reference", "[vs_ggml][rope]") {
  const std::vector<rope_case> cases = {
      {{128, 2, 5, 1}, 128, 8, gk::type::f32, false, false, {16, 24, 24, 0}},   // qwen2-vl sections
      {{128, 2, 5, 1}, 96, 8, gk::type::f32, false, false, {16, 16, 16, 0}},    // partial
      {{36, 3, 4, 1}, 36, 8, gk::type::f32, true, true, {5, 7, 4, 2}},          // e axis, ff, YaRN
      {{128, 2, 5, 1}, 128, 40, gk::type::f32, false, false, {24, 20, 20, 0}},  // imrope (qwen3-vl)
      {{66, 3, 4, 1}, 66, 40, gk::type::f32, true, false, {11, 11, 11, 0}},
      {{64, 3, 4, 1}, 32, 24, gk::type::f32, false, false, {8, 8, 0, 0}},       // vision
      {{40, 2, 6, 1}, 20, 24, gk::type::f32, true, true, {5, 5, 0, 0}},
      {{64, 2, 5, 1}, 64, 8, gk::type::f16, false, false, {8, 12, 12, 0}},
      {{64, 3, 4, 1}, 32, 24, gk::type::f16, false, false, {8, 8, 0, 0}},
  };
  for (const auto& c : cases) run_case(describe_case(c), [&](op_pair& p) { return make_rope(p, c); }, bar_for(c));
  const rope_case c{{64, 3, 5, 2}, 64, 40, gk::type::f32, false, false, {10, 11, 11, 0}};
  run_case(describe_case(c) + " (in place)", [&](op_pair& p) { return make_rope(p, c, true); }, bar_for(c));
  run_case(describe_case(c) + " (view)", [&](op_pair& p) { return make_rope(p, c, false, 1); }, bar_for(c));
}

TEST_CASE("rope_yarn_corr_dims equals the reference", "[vs_ggml][rope]") {
  for (int n_dims : {32, 64, 80, 128})
    for (int n_ctx : {2048, 4096, 32768})
      for (float base : {10000.0f, 500000.0f, 1e6f})
        for (auto [bf, bs] : {std::pair{32.0f, 1.0f}, std::pair{4.0f, 2.0f}}) {
          float g[2], r[2];
          gk::rope_yarn_corr_dims(n_dims, n_ctx, base, bf, bs, g);
          ggml_rope_yarn_corr_dims(n_dims, n_ctx, base, bf, bs, r);
          CHECK(std::memcmp(g, r, sizeof g) == 0);
        }
}

TEST_CASE("rope: op_params match the reference's layout", "[vs_ggml][rope]") {
  op_pair p(8u << 20, 1);
  auto a = p.input(gk::type::f32, {64, 2, 5, 1});
  auto pos = p.input(gk::type::i32, {20}, 0, 10);
  auto ff = p.input(gk::type::f32, {32});
  int s[4] = {8, 12, 12, 0};
  auto y = op_pair::out(gk::rope_multi(p.g, a.g, pos.g, ff.g, 64, s, 8, 4096, 1e6f, 0.5f, 1.0f, 1.1f, 32.0f, 1.0f),
                        ggml_rope_multi(p.r, a.r, pos.r, ff.r, 64, s, 8, 4096, 1e6f, 0.5f, 1.0f, 1.1f, 32.0f, 1.0f));
  CHECK(std::memcmp(y.g->op_params, y.r->op_params, sizeof y.g->op_params) == 0);
  auto pos1 = p.input(gk::type::i32, {5}, 0, 10);
  auto z = op_pair::out(gk::rope_ext(p.g, a.g, pos1.g, nullptr, 32, 2, 0, 1e4f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f),
                        ggml_rope_ext(p.r, a.r, pos1.r, nullptr, 32, 2, 0, 1e4f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f));
  gk::rope_set_offset(z.g, 8);
  ggml_rope_set_offset(z.r, 8);
  CHECK(std::memcmp(z.g->op_params, z.r->op_params, sizeof z.g->op_params) == 0);
  CHECK(z.g->src[2] == nullptr);
}

TEST_CASE("rope: builders reject bad arguments", "[vs_ggml][rope][builders]") {
  gk::context ctx(gk::context_params{1u << 20, nullptr, false});
  gk::tensor* a = ctx.new_tensor_3d(gk::type::f32, 64, 4, 5);
  gk::tensor* pos = ctx.new_tensor_1d(gk::type::i32, 5);
  gk::tensor* pos4 = ctx.new_tensor_1d(gk::type::i32, 20);
  gk::tensor* pos_f = ctx.new_tensor_1d(gk::type::f32, 5);
  gk::tensor* pos_short = ctx.new_tensor_1d(gk::type::i32, 4);
  gk::tensor* ff_short = ctx.new_tensor_1d(gk::type::f32, 15);
  int s[4] = {8, 12, 12, 0}, s_zero[4] = {0, 0, 0, 4}, s_big[4] = {40, 40, 0, 0};
  CHECK_THROWS_AS(gk::rope(ctx, a, pos_f, 64, 0), gk::error);      // positions not i32
  CHECK_THROWS_AS(gk::rope(ctx, a, pos_short, 64, 0), gk::error);  // one per token
  CHECK_THROWS_AS(gk::rope(ctx, a, pos, 63, 0), gk::error);        // odd n_dims
  CHECK_THROWS_AS(gk::rope(ctx, a, pos, 66, 0), gk::error);        // n_dims > ne0
  CHECK_THROWS_AS(gk::rope(ctx, a, pos, 64, 1), gk::error);        // mode & 1
  CHECK_THROWS_AS(gk::rope(ctx, a, pos, 64, 8), gk::error);        // mrope needs 4 positions per token
  CHECK_THROWS_AS(gk::rope_ext(ctx, a, pos, ff_short, 32, 0, 0, 1e4f, 1, 0, 1, 0, 0), gk::error);
  CHECK_THROWS_AS(gk::rope_multi(ctx, a, pos4, nullptr, 64, s, 2, 0, 1e4f, 1, 0, 1, 0, 0), gk::error);  // not multi
  CHECK_THROWS_AS(gk::rope_multi(ctx, a, pos4, nullptr, 64, s_zero, 8, 0, 1e4f, 1, 0, 1, 0, 0), gk::error);
  CHECK_THROWS_AS(gk::rope_multi(ctx, a, pos4, nullptr, 64, s_big, 8, 0, 1e4f, 1, 0, 1, 0, 0), gk::error);
  CHECK_THROWS_AS(gk::rope_multi(ctx, a, pos4, nullptr, 64, s, 24, 0, 1e4f, 1, 0, 1, 0, 0), gk::error);  // vision: n_dims = ne0/2
  gk::tensor* y = gk::rope(ctx, a, pos, 32, 0);
  CHECK_THROWS_AS(gk::rope_set_offset(y, 3), gk::error);   // odd
  CHECK_THROWS_AS(gk::rope_set_offset(y, 34), gk::error);  // past the row
  CHECK_THROWS_AS(gk::rope_set_offset(gk::norm(ctx, a, 0), 2), gk::error);
  CHECK(gk::rope_set_offset(y, 32)->param_i32(15) == 32);
}

TEST_CASE("rope: planted controls go red", "[vs_ggml][rope][planted]") {
  // A copy of gk's kernel with one thing wrong, computed from the same cos/sin table,
  // compared with the reference under the same bar.
  struct variant {
    const char* name;
    rope_case c;
    int bug;  // 1 neox pair partner off by one, 2 normal mode given neox pairs, 3 theta from k+1
  };
  const variant variants[] = {
      {"neox pair (k, k + n/2 + 1)", {{64, 3, 5, 1}, 64, 2}, 1},
      {"normal mode rotating neox pairs", {{64, 3, 5, 1}, 64, 0}, 2},
      {"neox with theta of the next pair", {{64, 3, 5, 1}, 64, 2}, 3},
  };
  for (const auto& v : variants) {
    op_pair p(16u << 20, 17);
    const tpair y = make_rope(p, v.c);
    p.compute_ref(y);
    const gk::tensor* a = y.g->src[0];
    const auto* pos = static_cast<const std::int32_t*>(y.g->src[1]->data);
    const auto x = gk_test::read_all(a);
    const gk::cpu::rope::params prm(y.g);
    const gk::cpu::rope::yarn yr(prm);
    const std::int64_t n0 = a->ne[0], nd = prm.n_dims, np = nd / 2;
    const float theta_scale = std::pow(prm.freq_base, -2.0f / static_cast<float>(nd));
    std::vector<float> cache(static_cast<std::size_t>(nd + 4)), out(x);
    for (std::int64_t r = 0; r < a->nrows(); ++r) {
      const std::int64_t i2 = (r / a->ne[1]) % a->ne[2];
      gk::cpu::rope::detail::fill_cache(prm, yr, theta_scale, pos, a->ne[2], nullptr, np + 1, i2, cache.data());
      const float* xr = &x[static_cast<std::size_t>(r * n0)];
      float* yr_out = &out[static_cast<std::size_t>(r * n0)];
      for (std::int64_t k = 0; k < np; ++k) {
        std::int64_t j0 = k, j1 = k + np;
        if (v.bug == 1) j1 = std::min(k + np + 1, n0 - 1);
        std::int64_t ck = v.bug == 3 ? k + 1 : k;
        gk::cpu::rope::detail::rotate(xr[j0], xr[j1], cache[2 * ck], cache[2 * ck + 1], yr_out[j0], yr_out[j1]);
      }
    }
    gk::tensor* o = p.g.dup_tensor(y.g);
    std::memcpy(o->data, out.data(), out.size() * sizeof(float));
    const auto d = gk_test::compare(o, gk_test::as_gk(y.r));
    const bar b = bar_for(v.c);
    std::printf("%-64s %s  -> %s\n", (std::string("planted: rope ") + v.name).c_str(), d.str().c_str(),
                b.holds(d) ? "PASSED (bad)" : "red");
    INFO("planted control " << v.name << ": " << d.str());
    CHECK_FALSE(b.holds(d));
  }
}
