// SPDX-License-Identifier: MIT
// CUDA elementwise family against the CPU definition (harness.hpp): add sub mul div with
// broadcast and f32/f16/bf16 mixes, add1, add_id, sqr sqrt log sin cos, the 22 unary ops,
// the 7 gated units (fused, swapped, split), scale (with bias), clamp, leaky_relu, fill,
// arange. Odd row lengths (1, 31, 33, 257, 4097), several rows, 2-4 dims, permuted and
// windowed views, and inputs with NaN, +-inf, +-0 and subnormals.
//
// Bars: bit-identical (NaN matching any NaN: payloads are not part of gk's definition)
// everywhere the CPU's arithmetic is reproduced, which is every op but those that call
// libm on the CPU: log, sin, cos, elu, expm1, xielu (expm1f) and softplus (log1pf) are
// within 1 ulp (the device rounds the double result once; glibc's float functions are
// within 1 ulp of the truth, usually correctly rounded).
#include "harness.hpp"

namespace {

using gk_cuda_test::pair;
using gk_cuda_test::run_pair;
using gk_cuda_test::same;


// The largest distance in f32 ulps (NaN against a number, or unequal infinities: huge).
std::int64_t max_ulps(const pair& p) {
  auto ord = [](float f) {
    std::int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<std::int64_t>(INT32_MIN) - i : static_cast<std::int64_t>(i);
  };
  std::int64_t m = 0;
  for (std::size_t i = 0; i < p.cpu.size(); ++i) {
    const float a = static_cast<float>(p.cpu[i]), b = static_cast<float>(p.dev[i]);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return INT64_MAX;
      continue;
    }
    const std::int64_t d = std::llabs(ord(a) - ord(b));
    if (d > m) {
      m = d;
      UNSCOPED_INFO(p.what << ": element " << i << ": cpu " << a << " device " << b << " (" << d << " ulp)");
    }
  }
  return m;
}

// Values for a leaf: uniform in [lo, hi] with specials mixed in (every 7th element one of
// NaN, +-inf, +-0, a subnormal, a large value) when `specials`.
void fill_leaf(gk::tensor* t, unsigned seed, float lo, float hi, bool specials) {
  if (!t->data) return;  // the device side: the harness uploads the CPU's bytes
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f, 1e4f, -2e4f, 88.5f, -90.0f, 20.5f};
  std::vector<float> row(static_cast<std::size_t>(t->ne[0]));
  std::size_t k = 0;
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
        for (auto& v : row) {
          v = u(rng);
          if (specials && ++k % 7 == 0) v = sp[(k / 7) % (sizeof sp / sizeof sp[0])];
        }
        gk::cpu::row_writer w(t, row.data());
        float* d = w.begin(i1, i2, i3);
        if (d != row.data()) std::memcpy(d, row.data(), row.size() * 4);
        w.commit();
      }
}

gk::tensor* leaf(gk::context& ctx, gk::type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2, std::int64_t ne3,
                 unsigned seed, float lo = -1.0f, float hi = 1.0f, bool specials = true) {
  gk::tensor* x = ctx.new_tensor_4d(t, ne0, ne1, ne2, ne3);
  x->set_name("#leaf");
  fill_leaf(x, seed, lo, hi, specials);
  return x;
}

const std::int64_t row_lengths[] = {1, 31, 33, 257, 4097};

}  // namespace

TEST_CASE("cuda add sub mul div: broadcast, type mixes, views, specials bit-identical", "[cuda][elementwise]") {
  using gk::type;
  struct mix { type a, b, d; };
  const mix mixes[] = {{type::f32, type::f32, type::f32}, {type::f16, type::f16, type::f16},
                       {type::bf16, type::bf16, type::bf16}, {type::f16, type::f32, type::f16},
                       {type::bf16, type::f32, type::bf16}, {type::f16, type::f32, type::f32}};
  const gk::op ops[] = {gk::op::add, gk::op::sub, gk::op::mul, gk::op::div};
  for (const gk::op o : ops)
    for (const mix& m : mixes)
      for (const std::int64_t n0 : row_lengths) {
        // b broadcast in rows and dim 3 ({n0, 1, 3, 1}), or a single column repeated along the row
        for (int shape = 0; shape < 2; ++shape) {
          if (m.d != m.a && o != gk::op::add) continue;  // a result type other than a's: add_cast only
          const auto p = run_pair([&](gk::context& ctx) {
            gk::tensor* a = leaf(ctx, m.a, n0, 5, 3, 2, 11);
            gk::tensor* b = shape == 0 ? leaf(ctx, m.b, n0, 1, 3, 1, 12) : leaf(ctx, m.b, 1, 5, 3, 2, 13);
            if (m.d != m.a) return gk::add_cast(ctx, a, shape == 0 ? b : leaf(ctx, m.b, n0, 5, 1, 1, 14), m.d);
            switch (o) {
              case gk::op::add: return gk::add(ctx, a, b);
              case gk::op::sub: return gk::sub(ctx, a, b);
              case gk::op::mul: return gk::mul(ctx, a, b);
              default: return gk::div(ctx, a, b);
            }
          });
          CHECK(same(p));
        }
      }
}

TEST_CASE("cuda binary ops on permuted and windowed sources", "[cuda][elementwise]") {
  for (int variant = 0; variant < 3; ++variant) {
    const auto p = run_pair([&](gk::context& ctx) {
      gk::tensor* big = leaf(ctx, gk::type::f32, 40, 33, 6, 1, 21);
      // a: [33, 40, 6] transposed; b: a window of rows 2.. of another tensor, broadcast over dim 2
      gk::tensor* a = gk::permute(ctx, big, 1, 0, 2, 3);
      gk::tensor* other = leaf(ctx, gk::type::f32, 50, 45, 1, 1, 22);
      gk::tensor* b = gk::view_2d(ctx, other, 33, 40, other->nb[1], 2 * other->nb[1] + 8);
      if (variant == 0) return gk::add(ctx, a, b);
      if (variant == 1) return gk::mul(ctx, b, gk::view_2d(ctx, a, 33, 40, a->nb[1], 0));
      return gk::div(ctx, gk::transpose(ctx, b), leaf(ctx, gk::type::f32, 40, 1, 1, 1, 23));
    });
    CHECK(same(p));
  }
}

TEST_CASE("cuda add1, add_id, sqr, sqrt, log, sin, cos", "[cuda][elementwise]") {
  for (const gk::type t : {gk::type::f32, gk::type::f16, gk::type::bf16})
    for (const std::int64_t n0 : {1, 33, 4097}) {
      CHECK(same(run_pair([&](gk::context& ctx) {
        return gk::add1(ctx, leaf(ctx, t, n0, 3, 2, 1, 31), leaf(ctx, gk::type::f32, 1, 1, 1, 1, 32, -1, 1, false));
      })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::sqr(ctx, leaf(ctx, t, n0, 3, 2, 1, 33, -300, 300)); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::sqrt(ctx, leaf(ctx, t, n0, 3, 2, 1, 34, -1, 100)); })));
      if (t != gk::type::f32) continue;
      CHECK(max_ulps(run_pair([&](gk::context& ctx) { return gk::log(ctx, leaf(ctx, t, n0, 3, 2, 1, 35, -0.1f, 100)); })) <= 1);
      CHECK(max_ulps(run_pair([&](gk::context& ctx) { return gk::sin(ctx, leaf(ctx, t, n0, 3, 2, 1, 36, -100, 100)); })) <= 1);
      CHECK(max_ulps(run_pair([&](gk::context& ctx) { return gk::cos(ctx, leaf(ctx, t, n0, 3, 2, 1, 37, -100, 100)); })) <= 1);
    }
  // add_id: a [n0, 4, 3] + b[:, ids[i1, i2]], b with 5 rows
  for (const std::int64_t n0 : {1, 31, 257}) {
    const auto p = run_pair([&](gk::context& ctx) {
      gk::tensor* a = leaf(ctx, gk::type::f32, n0, 4, 3, 1, 41);
      gk::tensor* b = leaf(ctx, gk::type::f32, n0, 5, 1, 1, 42);
      gk::tensor* ids = ctx.new_tensor_2d(gk::type::i32, 4, 3);
      ids->set_name("#ids");
      if (ids->data)
        for (int i = 0; i < 12; ++i) static_cast<std::int32_t*>(ids->data)[i] = (i * 3 + 1) % 5;
      return gk::add_id(ctx, a, b, ids);
    });
    CHECK(same(p));
  }
}

TEST_CASE("cuda unary: all 22 ops, f32 and narrow types, views, specials", "[cuda][elementwise][unary]") {
  using u = gk::unary_op;
  for (int k = 0; k < static_cast<int>(u::count); ++k) {
    const auto op = static_cast<u>(k);
    const bool libm = op == u::elu || op == u::expm1 || op == u::xielu || op == u::softplus;
    INFO("unary " << gk::name(op));
    auto build = [&](gk::tensor* a, gk::context& ctx) {
      if (op == u::xielu) return gk::xielu(ctx, a, 0.8f, 0.8f, 0.5f, -1e-6f);
      return gk::unary(ctx, a, op);
    };
    for (const std::int64_t n0 : row_lengths) {
      const auto p = run_pair([&](gk::context& ctx) { return build(leaf(ctx, gk::type::f32, n0, 3, 2, 1, 50 + k, -12, 12), ctx); });
      if (libm) CHECK(max_ulps(p) <= 1);
      else CHECK(same(p));
    }
    if (libm) continue;
    // f16 and bf16 in and out, and a window of a wider tensor (rows strided)
    for (const gk::type t : {gk::type::f16, gk::type::bf16}) {
      CHECK(same(run_pair([&](gk::context& ctx) { return build(leaf(ctx, t, 33, 4, 2, 1, 80 + k, -8, 8), ctx); })));
    }
    CHECK(same(run_pair([&](gk::context& ctx) {
      gk::tensor* big = leaf(ctx, gk::type::f32, 70, 9, 3, 1, 90 + k, -6, 6);
      return build(gk::view_3d(ctx, big, 33, 9, 3, big->nb[1], big->nb[2], 4 * 5), ctx);
    })));
  }
}

TEST_CASE("cuda glu: 7 ops, fused, swapped and split, f32 and f16", "[cuda][elementwise][glu]") {
  using g = gk::glu_op;
  for (int k = 0; k < static_cast<int>(g::count); ++k) {
    const auto op = static_cast<g>(k);
    INFO("glu " << gk::name(op));
    for (const gk::type t : {gk::type::f32, gk::type::f16})
      for (const std::int64_t nc : {1, 31, 257}) {
        for (int form = 0; form < 3; ++form) {  // fused, swapped, split
          const bool special = op == g::swiglu_oai || op == g::swiglu_clamp;
          if (special && form == 1) continue;  // the builders have no swapped form for these
          const auto p = run_pair([&](gk::context& ctx) -> gk::tensor* {
            // fused rows one longer than 2 nc: the odd last element is unused
            gk::tensor* a = leaf(ctx, t, form == 2 ? nc : 2 * nc + 1, 3, 2, 1, 100 + k, -9, 9);
            gk::tensor* b = form == 2 ? leaf(ctx, t, nc, 3, 2, 1, 120 + k, -9, 9) : nullptr;
            if (op == g::swiglu_oai) return gk::swiglu_oai(ctx, a, b, 1.702f, 7.0f);
            if (op == g::swiglu_clamp) return gk::swiglu_clamp(ctx, a, b, 7.0f);
            if (form == 2) return gk::glu_split(ctx, a, b, op);
            return gk::glu(ctx, a, op, form == 1);
          });
          CHECK(same(p));
        }
      }
  }
}

TEST_CASE("cuda scale, scale with bias, clamp, leaky_relu, fill, arange", "[cuda][elementwise]") {
  for (const gk::type t : {gk::type::f32, gk::type::f16, gk::type::bf16})
    for (const std::int64_t n0 : {1, 31, 4097}) {
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::scale(ctx, leaf(ctx, t, n0, 3, 2, 1, 200), -0.37f); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::scale_bias(ctx, leaf(ctx, t, n0, 3, 2, 1, 201), 1.3f, -0.1f); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::clamp(ctx, leaf(ctx, t, n0, 3, 2, 1, 202), -0.25f, 0.5f); })));
      CHECK(same(run_pair([&](gk::context& ctx) { return gk::leaky_relu(ctx, leaf(ctx, t, n0, 3, 2, 1, 203), 0.01f, false); })));
      if (t != gk::type::bf16)
        CHECK(same(run_pair([&](gk::context& ctx) { return gk::fill(ctx, leaf(ctx, t, n0, 3, 2, 1, 204), 0.3f); })));
    }
  CHECK(same(run_pair([](gk::context& ctx) { return gk::arange(ctx, -3.5f, 1000.0f, 0.37f); })));
  CHECK(same(run_pair([](gk::context& ctx) { return gk::arange(ctx, 0.0f, 1.0f, 1.0f); })));
}
