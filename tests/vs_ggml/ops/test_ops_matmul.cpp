// SPDX-License-Identifier: MIT
// mul_mat, mul_mat_id and out_prod against the reference, measured against the truth:
// the weight decoded (decoding is exact in both libraries) and dotted with the f32
// activations in double. Both libraries encode activations to the weight's dot type, so
// both land away from the truth by what that encoding costs; the bar is that gk lands
// where the reference lands:
//   integer paths (q8_0 / q8_1 / q8_K activations): |err_gk / err_ref - 1| <= 0.01.
//     Both use the same max-abs activation encoders; measured, every format lands at
//     ratio 1.0000 (four digits). The exception is by design: q4_1 and q5_1 take the
//     activation block sum from the q8_1 codes, where the reference reads q8_1's f16 copy
//     of it, so gk lands 1-2% closer to the truth on prompts; for those two the bar is
//     one-sided (err_gk <= 1.01 err_ref).
//   float paths (f32, f16, bf16 weights): err_gk <= 1.1 * err_ref + 1e-7. f16/bf16
//     round the activations to the weight's type, as the reference does. For f32, gk's
//     row definition rounds each product before adding (16 lanes); the reference fuses
//     multiply-adds, so gk's error is measured 1.3-1.5x the reference's, both ~1e-7.
// Every format gk carries as a weight is covered, at decode (N = 1) and prompt shapes,
// with weight broadcast over dims 2/3 and a permuted (non-contiguous) activation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "harness.hpp"

using namespace gk;
using gk_test::op_pair;
using gk_test::tpair;

namespace {

struct errs {
  double gk = 0, ref = 0;
};

// Relative L2 error of both outputs against the truth sum_k w[k, m] * x[k, n] in double.
errs against_truth(const tpair& w, const tpair& x, const tpair& y, std::int64_t r2 = 1, std::int64_t r3 = 1) {
  const auto wv = gk_test::read_all(w.g);  // decoded weights (exact)
  const auto xv = gk_test::read_all(x.g);
  const auto yg = gk_test::read_all(y.g);
  const auto yr = gk_test::read_all(gk_test::as_gk(y.r));
  const std::int64_t k = w.g->ne[0], m = w.g->ne[1], n = x.g->ne[1];
  double se_g = 0, se_r = 0, st = 0;
  std::size_t idx = 0;
  for (std::int64_t i3 = 0; i3 < y.g->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < y.g->ne[2]; ++i2)
      for (std::int64_t c = 0; c < n; ++c)
        for (std::int64_t r = 0; r < m; ++r, ++idx) {
          const std::int64_t w2 = i2 / r2, w3 = i3 / r3;
          const float* wr = &wv[static_cast<std::size_t>(((w3 * w.g->ne[2] + w2) * m + r) * k)];
          const float* xr = &xv[static_cast<std::size_t>(((i3 * x.g->ne[2] + i2) * n + c) * k)];
          double t = 0;
          for (std::int64_t i = 0; i < k; ++i) t += static_cast<double>(wr[i]) * xr[i];
          se_g += (yg[idx] - t) * (yg[idx] - t);
          se_r += (yr[idx] - t) * (yr[idx] - t);
          st += t * t;
        }
  return {std::sqrt(se_g / st), std::sqrt(se_r / st)};
}

bool is_float_path(type t) { return t == type::f32 || t == type::f16 || t == type::bf16; }

void check_errs(type wt, const char* what, const errs& e) {
  std::string path;
  formats::visit(wt, [&]<class W>(std::type_identity<W>) {
    path = std::string(dot_kernel<W, simd::native>::served_by) + " dot, " +
           std::string(gk::name(W::dot_type::id)) + " activations";
  });
  std::printf("mul_mat %-8s %-22s err gk %.4e ref %.4e ratio %.4f  [gk: %s]\n", std::string(name(wt)).c_str(), what,
              e.gk, e.ref, e.gk / e.ref, path.c_str());
  INFO(name(wt) << " " << what << " err gk " << e.gk << " ref " << e.ref);
  if (is_float_path(wt)) {
    CHECK(e.gk <= 1.1 * e.ref + 1e-7);
  } else if (wt == type::q4_1 || wt == type::q5_1) {
    CHECK(e.gk / e.ref <= 1.01);
  } else {
    CHECK(std::fabs(e.gk / e.ref - 1.0) <= 0.01);
  }
}

// Formats the reference can use as a matmul weight (q8_1/q8_K are activation-only there).
std::vector<type> weight_types() {
  std::vector<type> v;
  for (int i = 0; i < type_count; ++i) {
    const auto t = static_cast<type>(i);
    if (!is_valid(t) || t == type::q8_1 || t == type::q8_K) continue;
    if (formats::visit(t, [](auto) {})) v.push_back(t);
  }
  return v;
}

}  // namespace

TEST_CASE("mul_mat lands where the reference lands, every weight format", "[ops][matmul]") {
  for (type wt : weight_types()) {
    struct shp {
      std::int64_t m, n, ne2, ne3, a2, a3;
      const char* what;
    };
    const shp shapes[] = {{37, 1, 1, 1, 1, 1, "decode N=1"},
                          {33, 19, 1, 1, 1, 1, "prompt N=19"},
                          {17, 5, 2, 3, 1, 3, "broadcast 2x3 over 1x3"}};
    for (const auto& s : shapes) {
      op_pair p(64u << 20, 11);
      const std::int64_t k = 512;
      auto w = p.input(wt, {k, s.m, s.a2, s.a3});
      auto x = p.input(type::f32, {k, s.n, s.ne2, s.ne3});
      auto y = op_pair::out(mul_mat(p.g, w.g, x.g), ggml_mul_mat(p.r, w.r, x.r));
      REQUIRE(gk_test::same_shape(y));
      p.compute_gk(y, 3);
      p.compute_ref(y, 1);
      check_errs(wt, s.what, against_truth(w, x, y, s.ne2 / s.a2, s.ne3 / s.a3));
    }
  }
}

TEST_CASE("mul_mat with a permuted activation and f16 activations", "[ops][matmul]") {
  for (type wt : {type::q4_0, type::q4_K, type::f16, type::f32}) {
    op_pair p(64u << 20, 5);
    const std::int64_t k = 256;
    auto w = p.input(wt, {k, 24});
    auto xs = p.input(type::f32, {k, 3, 6});  // permuted to [k, 6, 3]: rows are strided
    tpair x{permute(p.g, xs.g, 0, 2, 1, 3), ggml_permute(p.r, xs.r, 0, 2, 1, 3)};
    auto y = op_pair::out(mul_mat(p.g, w.g, x.g), ggml_mul_mat(p.r, w.r, x.r));
    p.compute_gk(y, 2);
    p.compute_ref(y, 1);
    // the truth reads x through its own strides
    const auto yg = gk_test::read_all(y.g), yr = gk_test::read_all(gk_test::as_gk(y.r));
    const auto wv = gk_test::read_all(w.g), xv = gk_test::read_all(x.g);
    double se_g = 0, se_r = 0, st = 0;
    for (std::int64_t c = 0; c < 18; ++c)
      for (std::int64_t r = 0; r < 24; ++r) {
        double t = 0;
        for (std::int64_t i = 0; i < k; ++i) t += static_cast<double>(wv[r * k + i]) * xv[c * k + i];
        const auto j = static_cast<std::size_t>(c * 24 + r);
        se_g += (yg[j] - t) * (yg[j] - t);
        se_r += (yr[j] - t) * (yr[j] - t);
        st += t * t;
      }
    check_errs(wt, "permuted activations", {std::sqrt(se_g / st), std::sqrt(se_r / st)});
  }
}

// The reference's quantized mul_mat takes f32 activations only; gk reads any float type
// through the row interface, so f16 activations must give exactly what the same values
// in f32 give.
TEST_CASE("mul_mat with f16 activations equals the same values in f32", "[ops][matmul]") {
  for (type wt : {type::q8_0, type::q4_K, type::iq2_xs}) {
    context ctx({16u << 20});
    tensor* w = ctx.new_tensor_2d(wt, 256, 9);
    tensor* x16 = ctx.new_tensor_2d(type::f16, 256, 4);
    tensor* x32 = ctx.new_tensor_2d(type::f32, 256, 4);
    std::vector<float> row(256);
    for (std::int64_t r = 0; r < 9; ++r) {
      for (int i = 0; i < 256; ++i) row[static_cast<std::size_t>(i)] = std::sin(static_cast<float>(r * 256 + i));
      formats::visit(wt, [&]<class W>(std::type_identity<W>) {
        encode_row<W>(row.data(), reinterpret_cast<typename W::block*>(w->at(r)), 256, nullptr);
      });
    }
    for (int i = 0; i < 1024; ++i) {
      const auto h = f32_to_f16(std::cos(static_cast<float>(i) * 0.37f));
      static_cast<std::uint16_t*>(x16->data)[i] = h;
      static_cast<float*>(x32->data)[i] = f16_to_f32(h);
    }
    tensor* y16 = mul_mat(ctx, w, x16);
    tensor* y32 = mul_mat(ctx, w, x32);
    graph g;
    g.build_forward_expand(y16);
    g.build_forward_expand(y32);
    cpu::compute(g, 2);
    CHECK(std::memcmp(y16->data, y32->data, y16->nbytes()) == 0);
  }
}

TEST_CASE("mul_mat_id matches the reference's expert routing", "[ops][matmul]") {
  for (type wt : {type::q4_0, type::q4_K, type::f32, type::mxfp4}) {
    op_pair p(64u << 20, 8);
    const std::int64_t k = 256, m = 21, n_as = 5, n_used = 3, n_tok = 6;
    auto as = p.input(wt, {k, m, n_as});
    auto b = p.input(type::f32, {k, 1, n_tok});
    auto ids = p.input(type::i32, {n_used, n_tok}, 0, 0);
    std::vector<std::int64_t> iv;
    for (std::int64_t i = 0; i < n_used * n_tok; ++i) iv.push_back((i * 2 + i / n_used) % n_as);
    p.set_ints(ids, iv);
    auto y = op_pair::out(mul_mat_id(p.g, as.g, b.g, ids.g), ggml_mul_mat_id(p.r, as.r, b.r, ids.r));
    REQUIRE(gk_test::same_shape(y));
    p.compute_gk(y, 3);
    p.compute_ref(y, 1);
    const auto yg = gk_test::read_all(y.g), yr = gk_test::read_all(gk_test::as_gk(y.r));
    const auto av = gk_test::read_all(as.g), bv = gk_test::read_all(b.g);
    double se_g = 0, se_r = 0, st = 0;
    for (std::int64_t t = 0; t < n_tok; ++t)
      for (std::int64_t e = 0; e < n_used; ++e) {
        const auto ex = iv[static_cast<std::size_t>(t * n_used + e)];
        for (std::int64_t r = 0; r < m; ++r) {
          double tr = 0;
          for (std::int64_t i = 0; i < k; ++i) tr += static_cast<double>(av[(ex * m + r) * k + i]) * bv[t * k + i];
          const auto j = static_cast<std::size_t>((t * n_used + e) * m + r);
          se_g += (yg[j] - tr) * (yg[j] - tr);
          se_r += (yr[j] - tr) * (yr[j] - tr);
          st += tr * tr;
        }
      }
    check_errs(wt, "mul_mat_id", {std::sqrt(se_g / st), std::sqrt(se_r / st)});
  }
}

TEST_CASE("out_prod matches the reference", "[ops][matmul]") {
  for (type at : {type::f32, type::q8_0}) {
    op_pair p(16u << 20, 9);
    auto a = p.input(at, {64, 7, 2});
    auto b = p.input(type::f32, {5, 7, 2});  // the reference's CPU kernel needs equal dim 2
    auto y = op_pair::out(out_prod(p.g, a.g, b.g), ggml_out_prod(p.r, a.r, b.r));
    REQUIRE(gk_test::same_shape(y));
    const auto d = p.run(y, 3);
    std::printf("out_prod %-5s %s\n", std::string(name(at)).c_str(), d.str().c_str());
    // 7-term sums; the reference may fuse multiply-adds, gk rounds each product
    CHECK(d.max_rel <= 1e-5);
    CHECK(d.max_abs <= 1e-5);
  }
}

TEST_CASE("planted control: a matmul that drops the last weight row's dot misses the bar", "[ops][matmul][control]") {
  op_pair p(16u << 20, 12);
  auto w = p.input(type::q4_0, {256, 16});
  auto x = p.input(type::f32, {256, 3});
  auto y = op_pair::out(mul_mat(p.g, w.g, x.g), ggml_mul_mat(p.r, w.r, x.r));
  p.compute_gk(y, 1);
  p.compute_ref(y, 1);
  for (std::int64_t c = 0; c < 3; ++c) reinterpret_cast<float*>(y.g->at(c))[15] = 0.0f;  // the broken kernel's output
  const errs e = against_truth(w, x, y);
  CHECK_FALSE(std::fabs(e.gk / e.ref - 1.0) <= 0.01);
}

TEST_CASE("matmul builders reject bad shapes", "[ops][matmul]") {
  context ctx({1u << 20});
  auto* a = ctx.new_tensor_2d(type::q4_0, 64, 8);
  auto* b = ctx.new_tensor_3d(type::f32, 64, 2, 3);
  auto* c = ctx.new_tensor_2d(type::f32, 32, 2);
  CHECK_THROWS_AS(mul_mat(ctx, a, c), gk::error);
  auto* a3 = ctx.new_tensor_3d(type::f32, 64, 8, 2);
  CHECK_THROWS_AS(mul_mat(ctx, a3, b), gk::error);  // 3 is not a multiple of 2
  CHECK_THROWS_AS(mul_mat(ctx, transpose(ctx, ctx.new_tensor_2d(type::f32, 8, 64)), b), gk::error);
  CHECK_THROWS_AS(out_prod(ctx, a, c), gk::error);
  auto* ids = ctx.new_tensor_2d(type::f32, 2, 3);
  CHECK_THROWS_AS(mul_mat_id(ctx, a3, b, ids), gk::error);  // ids must be i32
}
