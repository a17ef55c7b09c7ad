// SPDX-License-Identifier: MIT
// The elementwise family against the reference: every op on odd shapes, broadcast and
// non-contiguous sources, f16/bf16 where the reference's CPU backend has them; the same
// bits at 1, 2, 3 and 7 threads; bad shapes throw gk::error; planted controls (a wrong
// broadcast index, a perturbed GELU, a thread-dependent order) go red under the same checks.
// One line per op is printed with its measured error.
//
// Tolerances (the bars, defined once below with their reasons): exact, transc, cancel,
// table, table_glu, f16_out. Each printed line carries the measured figures; bar_ratio is
// the worst element's |g - r| / (abs + rel |r|), which must be <= 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

// ggml_add1 is deprecated upstream but still an op the compat layer must forward.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

using gk_test::diff;
using gk_test::op_pair;
using gk_test::tpair;
using builder = std::function<tpair(op_pair&)>;

constexpr std::size_t mem = 48u << 20;

void line(const std::string& what, const diff& d) { std::printf("  %-44s %s\n", what.c_str(), d.str().c_str()); }

using gk_test::raw_bytes;

struct outcome {
  diff d;
  std::vector<float> g, r;  // both outputs, i0 fastest
  bool threads_identical = true;
};

// Builds the case in a fresh pair per thread count (same seed, so the same inputs),
// compares 1 thread against the reference and 2/3/7 threads against 1 thread, bit for bit.
outcome check(const builder& build, std::uint64_t seed = 1) {
  outcome o;
  std::vector<unsigned char> first;
  for (int nt : {1, 2, 3, 7}) {
    op_pair p(mem, seed);
    const tpair y = build(p);
    REQUIRE(gk_test::same_shape(y));
    if (nt == 1) {
      o.d = p.run(y, 1);
      o.g = gk_test::read_all(y.g);
      o.r = gk_test::read_all(gk_test::as_gk(y.r));
      first = raw_bytes(y.g);
    } else {
      p.compute_gk(y, nt);
      if (raw_bytes(y.g) != first) o.threads_identical = false;
    }
  }
  return o;
}

// A bar: bit-exact (all zero), or max f32 ulps, or per element |g - r| <= abs + rel |r|.
struct tol {
  double ulps = 0;
  double abs = 0;
  double rel = 0;
  bool is_exact() const { return ulps == 0 && abs == 0 && rel == 0; }
  // max over elements of |g - r| / (abs + rel |r|): <= 1 passes
  double ratio(const std::vector<float>& g, const std::vector<float>& r) const {
    double w = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (std::isfinite(g[i]) && std::isfinite(r[i]))
        w = std::max(w, std::fabs(static_cast<double>(g[i]) - r[i]) / (abs + rel * std::fabs(static_cast<double>(r[i]))));
    return w;
  }
  bool ok(const diff& d, const std::vector<float>& g, const std::vector<float>& r) const {
    if (d.nan_mismatch) return false;
    if (is_exact()) return d.mismatches == 0;
    if (ulps > 0) return d.max_ulps <= ulps;
    return ratio(g, r) <= 1.0;
  }
};
void expect(const std::string& what, const builder& b, tol t, std::uint64_t seed = 1) {
  const outcome o = check(b, seed);
  std::string s = o.d.str();
  if (!t.is_exact() && t.ulps == 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " bar_ratio=%.2f", t.ratio(o.g, o.r));
    s += buf;
  }
  std::printf("  %-44s %s\n", what.c_str(), s.c_str());
  INFO(what << ": " << s);
  CHECK(t.ok(o.d, o.g, o.r));
  CHECK(o.threads_identical);
}

// ---- shapes: contiguous odd, permuted rows (dims 1 and 2 swapped), f16 in/out ----

enum class layout { packed, permuted };

tpair src(op_pair& p, gk::type t, std::array<std::int64_t, 4> ne, float lo, float hi, layout l) {
  if (l == layout::packed) return p.input(t, ne, lo, hi);
  // made [ne0, ne2, ne1, ne3], then permuted back to ne: rows packed, rows strided
  tpair a = p.input(t, {ne[0], ne[2], ne[1], ne[3]}, lo, hi);
  return {gk::permute(p.g, a.g, 0, 2, 1, 3), ggml_permute(p.r, a.r, 0, 2, 1, 3)};
}

struct unary_case {
  gk::unary_op u;
  float lo, hi;
  tol f32;
  tol f16;
};

// Arithmetic, comparisons, rounding, sqrt and the libm-backed log/sin/cos (both sides call
// the same libm): every bit equal.
constexpr tol exact{};
// gk's exp/tanh/silu (simd/math.hpp, 1-3 ulp) against libm expf/tanhf and the reference's
// own vector silu: measured <= 4 ulp (silu, swiglu), 2 (tanh, sigmoid), 1 (exp); bar 8.
constexpr tol transc{8};
// Results that are a difference of O(1) terms (expm1 and elu near 0, softplus and
// log(1 + e^x), gelu_erf and geglu_erf at x < 0 where 1 + erf cancels, xielu): a few ulp of
// the terms, so absolute 2^-20 plus 2^-21 relative. gk uses expm1/log1p here where the
// reference forms exp(x) - 1 and log(1 + exp(x)), so gk is the closer of the two.
constexpr tol cancel{0, 0x1p-20, 0x1p-21};
// The reference's f32 gelu and gelu_quick round x to f16 and read an f16 table: relative
// error up to 2^-11 from the result's rounding plus gelu'(x) |x - f16(x)| <= 1.13 * 2^-11 |x|
// from the input's. Bar: 2^-10 |r| + 2^-11 (|x| <= 6, and where the result is small, x < 0,
// |gelu'| <= 0.13 keeps the input term under 2^-11). geglu multiplies by |g| <= 5.
// The reference cannot tell tanh-GELU from erf-GELU at this bar (they differ by 5e-4), so
// the truth test below holds gk to 1e-5 against a double-precision GELU.
constexpr tol table{0, 0x1p-11, 0x1p-10};
constexpr tol table_glu{0, 5 * 0x1p-11, 0x1p-10};
// f16 outputs: both sides round an f32 result once (the reference's f16 gelu tables and
// geglu round twice), so 1 f16 ulp (2^-10 |r|) apart, plus 2^-14 absolute where the
// reference's f32 result itself cancels (softplus at x << 0).
constexpr tol f16_out{0, 0x1p-14, 0x1p-10};

}  // namespace

TEST_CASE("unary ops vs the reference", "[elementwise][unary]") {
  const std::vector<unary_case> cases = {
      {gk::unary_op::abs, -5, 5, exact, exact},
      {gk::unary_op::sgn, -5, 5, exact, exact},
      {gk::unary_op::neg, -5, 5, exact, exact},
      {gk::unary_op::step, -5, 5, exact, exact},
      {gk::unary_op::tanh, -6, 6, transc, f16_out},
      {gk::unary_op::elu, -5, 5, cancel, f16_out},
      {gk::unary_op::relu, -5, 5, exact, exact},
      {gk::unary_op::sigmoid, -12, 12, transc, f16_out},
      {gk::unary_op::gelu, -6, 6, table, f16_out},
      {gk::unary_op::gelu_quick, -6, 6, table, f16_out},
      {gk::unary_op::silu, -12, 12, transc, f16_out},
      {gk::unary_op::hardswish, -5, 5, exact, exact},
      {gk::unary_op::hardsigmoid, -5, 5, exact, exact},
      {gk::unary_op::exp, -10, 10, transc, f16_out},
      {gk::unary_op::expm1, -3, 3, cancel, f16_out},
      {gk::unary_op::softplus, -25, 25, cancel, f16_out},
      {gk::unary_op::gelu_erf, -5, 5, cancel, f16_out},
      {gk::unary_op::floor, -5, 5, exact, exact},
      {gk::unary_op::ceil, -5, 5, exact, exact},
      {gk::unary_op::round, -5, 5, exact, exact},
      {gk::unary_op::trunc, -5, 5, exact, exact},
  };
  for (const auto& c : cases) {
    const std::string nm(gk::name(c.u));
    for (auto l : {layout::packed, layout::permuted})
      expect("unary " + nm + (l == layout::packed ? " f32 [33,7,3]" : " f32 permuted [257,3,5,2]"),
             [&](op_pair& p) {
               const auto ne = l == layout::packed ? std::array<std::int64_t, 4>{33, 7, 3, 1}
                                                   : std::array<std::int64_t, 4>{257, 3, 5, 2};
               tpair a = src(p, gk::type::f32, ne, c.lo, c.hi, l);
               return op_pair::out(gk::unary(p.g, a.g, c.u), ggml_unary(p.r, a.r, static_cast<ggml_unary_op>(c.u)));
             },
             c.f32);
    expect("unary " + nm + " f16 [65,5]", [&](op_pair& p) {
      tpair a = p.input(gk::type::f16, {65, 5}, c.lo, c.hi);
      return op_pair::out(gk::unary(p.g, a.g, c.u), ggml_unary(p.r, a.r, static_cast<ggml_unary_op>(c.u)));
    }, c.f16);
  }
  expect("unary abs bf16 [65,5]", [&](op_pair& p) {
    tpair a = p.input(gk::type::bf16, {65, 5});
    return op_pair::out(gk::abs(p.g, a.g), ggml_abs(p.r, a.r));
  }, exact);
  expect("unary xielu f32 [33,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3}, -5, 5);
    return op_pair::out(gk::xielu(p.g, a.g, 0.8f, 0.6f, 0.5f, -1e-6f), ggml_xielu(p.r, a.r, 0.8f, 0.6f, 0.5f, -1e-6f));
  }, cancel);
  // in place: the result is a view of a
  expect("unary silu_inplace f32 [33,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7}, -8, 8);
    return op_pair::out(gk::silu_inplace(p.g, a.g), ggml_silu_inplace(p.r, a.r));
  }, transc);
}

// gk's GELUs against a double-precision truth, next to the reference's (its f16 table).
TEST_CASE("gelu accuracy against double truth", "[elementwise][gelu]") {
  op_pair p(mem, 3);
  tpair a = p.input(gk::type::f32, {4097}, -6, 6);
  for (auto u : {gk::unary_op::gelu, gk::unary_op::gelu_quick}) {
    tpair y{gk::unary(p.g, a.g, u), ggml_unary(p.r, a.r, static_cast<ggml_unary_op>(u))};
    p.run(y, 1);
    const auto x = gk_test::read_all(a.g), g = gk_test::read_all(y.g), r = gk_test::read_all(gk_test::as_gk(y.r));
    double eg = 0, er = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double t = u == gk::unary_op::gelu
                           ? 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v)))
                           : v / (1.0 + std::exp(-1.702 * v));
      eg = std::max(eg, std::fabs(g[i] - t));
      er = std::max(er, std::fabs(r[i] - t));
    }
    std::printf("  %-44s gk max_abs %.3g, reference (f16 table) max_abs %.3g\n",
                ("truth " + std::string(gk::name(u))).c_str(), eg, er);
    CHECK(eg < 1e-5);   // a few f32 ulps of |y| <= 6
    CHECK(eg * 10 < er);  // and well inside the table's error
  }
}

TEST_CASE("sqr sqrt log sin cos vs the reference", "[elementwise]") {
  struct c1 {
    const char* n;
    gk::tensor* (*g)(gk::context&, gk::tensor*);
    ggml_tensor* (*r)(ggml_context*, ggml_tensor*);
    float lo, hi;
  };
  const c1 cs[] = {{"sqr", gk::sqr, ggml_sqr, -5, 5},
                   {"sqrt", gk::sqrt, ggml_sqrt, 0, 50},
                   {"log", gk::log, ggml_log, 0.001f, 50},
                   {"sin", gk::sin, ggml_sin, -20, 20},
                   {"cos", gk::cos, ggml_cos, -20, 20}};
  for (const auto& c : cs) {
    for (auto l : {layout::packed, layout::permuted})
      expect(std::string(c.n) + (l == layout::packed ? " f32 [33,7,3]" : " f32 permuted [257,3,5,2]"),
             [&](op_pair& p) {
               const auto ne = l == layout::packed ? std::array<std::int64_t, 4>{33, 7, 3, 1}
                                                   : std::array<std::int64_t, 4>{257, 3, 5, 2};
               tpair a = src(p, gk::type::f32, ne, c.lo, c.hi, l);
               return op_pair::out(c.g(p.g, a.g), c.r(p.r, a.r));
             },
             exact);
    expect(std::string(c.n) + " f16 [65,5]", [&](op_pair& p) {
      tpair a = p.input(gk::type::f16, {65, 5}, c.lo, c.hi);
      return op_pair::out(c.g(p.g, a.g), c.r(p.r, a.r));
    }, exact);
  }
}

TEST_CASE("add sub mul div with broadcast vs the reference", "[elementwise][binary]") {
  struct c2 {
    const char* n;
    gk::tensor* (*g)(gk::context&, gk::tensor*, gk::tensor*);
    ggml_tensor* (*r)(ggml_context*, ggml_tensor*, ggml_tensor*);
  };
  const c2 cs[] = {{"add", gk::add, ggml_add}, {"sub", gk::sub, ggml_sub}, {"mul", gk::mul, ggml_mul},
                   {"div", gk::div, ggml_div}};
  struct shp {
    const char* n;
    std::array<std::int64_t, 4> a, b;
  };
  const shp shapes[] = {{"same [33,7,3,2]", {33, 7, 3, 2}, {33, 7, 3, 2}},
                        {"row bcast [33,7,3,2]+[33,1,1,1]", {33, 7, 3, 2}, {33, 1, 1, 1}},
                        {"bcast [66,7,6,2]+[33,7,3,1]", {66, 7, 6, 2}, {33, 7, 3, 1}},
                        {"scalar [257,3]+[1,1]", {257, 3, 1, 1}, {1, 1, 1, 1}},
                        {"[1,1]+[1,1]", {1, 1, 1, 1}, {1, 1, 1, 1}}};
  for (const auto& c : cs) {
    for (const auto& s : shapes)
      expect(std::string(c.n) + " f32 " + s.n, [&](op_pair& p) {
        tpair a = p.input(gk::type::f32, s.a, -3, 3);
        tpair b = p.input(gk::type::f32, s.b, 0.5f, 3);
        return op_pair::out(c.g(p.g, a.g, b.g), c.r(p.r, a.r, b.r));
      }, exact);
    // a: rows packed but permuted; b: transposed (strided along its rows)
    expect(std::string(c.n) + " f32 permuted a, transposed b [7,5,3]+[7,5]", [&](op_pair& p) {
      tpair a = src(p, gk::type::f32, {7, 5, 3, 1}, -3, 3, layout::permuted);
      tpair bt = p.input(gk::type::f32, {5, 7}, 0.5f, 3);
      tpair b{gk::transpose(p.g, bt.g), ggml_transpose(p.r, bt.r)};
      return op_pair::out(c.g(p.g, a.g, b.g), c.r(p.r, a.r, b.r));
    }, exact);
    for (auto ta : {gk::type::f16, gk::type::bf16})
      for (auto tb : {ta, gk::type::f32})
        expect(std::string(c.n) + " " + std::string(gk::name(ta)) + "+" + std::string(gk::name(tb)) + " [33,7]+[33]",
               [&](op_pair& p) {
                 tpair a = p.input(ta, {33, 7}, -3, 3);
                 tpair b = p.input(tb, {33}, 0.5f, 3);
                 return op_pair::out(c.g(p.g, a.g, b.g), c.r(p.r, a.r, b.r));
               },
               exact);
  }
  expect("add_inplace f32 [33,7]+[33,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7});
    tpair b = p.input(gk::type::f32, {33, 7});
    return op_pair::out(gk::add_inplace(p.g, a.g, b.g), ggml_add_inplace(p.r, a.r, b.r));
  }, exact);
  expect("add_cast f16+f32 -> f32 [33,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f16, {33, 7});
    tpair b = p.input(gk::type::f32, {33, 1});
    return op_pair::out(gk::add_cast(p.g, a.g, b.g, gk::type::f32), ggml_add_cast(p.r, a.r, b.r, GGML_TYPE_F32));
  }, exact);
}

TEST_CASE("add1 acc add_id vs the reference", "[elementwise]") {
  expect("add1 f32 [33,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3});
    tpair b = p.input(gk::type::f32, {1});
    return op_pair::out(gk::add1(p.g, a.g, b.g), ggml_add1(p.r, a.r, b.r));
  }, exact);
  expect("add1 f16+f32 [33,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f16, {33, 7});
    tpair b = p.input(gk::type::f32, {1});
    return op_pair::out(gk::add1(p.g, a.g, b.g), ggml_add1(p.r, a.r, b.r));
  }, exact);
  // b [5,3,2] into a [33,7,3] at rows 1.., columns 2..: strides of a, offset (1 row + 2)
  expect("acc f32 [33,7,3] += [5,3,2] window", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3});
    tpair b = p.input(gk::type::f32, {5, 3, 2});
    const std::size_t nb1 = 33 * 4, nb2 = 33 * 7 * 4, off = (33 + 2) * 4;
    return op_pair::out(gk::acc(p.g, a.g, b.g, nb1, nb2, nb2 * 3, off),
                        ggml_acc(p.r, a.r, b.r, nb1, nb2, nb2 * 3, off));
  }, exact);
  expect("acc_inplace f32 [257,3] += [100,2]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {257, 3});
    tpair b = p.input(gk::type::f32, {100, 2});
    return op_pair::out(gk::acc_inplace(p.g, a.g, b.g, 257 * 4, 257 * 8, 257 * 12, 150 * 4),
                        ggml_acc_inplace(p.r, a.r, b.r, 257 * 4, 257 * 8, 257 * 12, 150 * 4));
  }, exact);
  expect("add_id f32 [33,4,5] + [33,6][ids]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 4, 5});
    tpair b = p.input(gk::type::f32, {33, 6});
    tpair ids = p.input(gk::type::i32, {4, 5}, 0, 5);
    return op_pair::out(gk::add_id(p.g, a.g, b.g, ids.g), ggml_add_id(p.r, a.r, b.r, ids.r));
  }, exact);
}

TEST_CASE("glu ops vs the reference", "[elementwise][glu]") {
  struct gcase {
    gk::glu_op g;
    tol f32;
  };
  const gcase cs[] = {{gk::glu_op::reglu, exact},     {gk::glu_op::geglu, table_glu},
                      {gk::glu_op::swiglu, transc},   {gk::glu_op::geglu_erf, tol{0, 5 * 0x1p-20, 0x1p-21}},
                      {gk::glu_op::geglu_quick, table_glu}};
  for (const auto& c : cs) {
    const std::string nm(gk::name(c.g));
    for (bool swapped : {false, true})
      expect(nm + (swapped ? " swapped" : "") + " f32 [66,7,3]", [&](op_pair& p) {
        tpair a = p.input(gk::type::f32, {66, 7, 3}, -5, 5);
        return op_pair::out(gk::glu(p.g, a.g, c.g, swapped), ggml_glu(p.r, a.r, static_cast<ggml_glu_op>(c.g), swapped));
      }, c.f32);
    expect(nm + " split f32 [33,7,3]", [&](op_pair& p) {
      tpair a = p.input(gk::type::f32, {33, 7, 3}, -5, 5);
      tpair b = p.input(gk::type::f32, {33, 7, 3}, -5, 5);
      return op_pair::out(gk::glu_split(p.g, a.g, b.g, c.g), ggml_glu_split(p.r, a.r, b.r, static_cast<ggml_glu_op>(c.g)));
    }, c.f32);
    expect(nm + " f16 [66,5]", [&](op_pair& p) {
      tpair a = p.input(gk::type::f16, {66, 5}, -5, 5);
      return op_pair::out(gk::glu(p.g, a.g, c.g, false), ggml_glu(p.r, a.r, static_cast<ggml_glu_op>(c.g), false));
    }, c.g == gk::glu_op::reglu ? exact : f16_out);
  }
  expect("swiglu_oai split f32 [33,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3}, -9, 9);
    tpair b = p.input(gk::type::f32, {33, 7, 3}, -9, 9);
    return op_pair::out(gk::swiglu_oai(p.g, a.g, b.g, 1.702f, 7.0f), ggml_swiglu_oai(p.r, a.r, b.r, 1.702f, 7.0f));
  }, transc);
  expect("swiglu_oai halves f32 [66,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {66, 7}, -9, 9);
    return op_pair::out(gk::swiglu_oai(p.g, a.g, nullptr, 1.702f, 7.0f), ggml_swiglu_oai(p.r, a.r, nullptr, 1.702f, 7.0f));
  }, transc);
  expect("swiglu_clamp split f32 [33,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3}, -9, 9);
    tpair b = p.input(gk::type::f32, {33, 7, 3}, -9, 9);
    return op_pair::out(gk::swiglu_clamp(p.g, a.g, b.g, 7.0f), ggml_swiglu_clamp(p.r, a.r, b.r, 7.0f));
  }, transc);
  expect("swiglu_clamp f16 split [33,5]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f16, {33, 5}, -9, 9);
    tpair b = p.input(gk::type::f16, {33, 5}, -9, 9);
    return op_pair::out(gk::swiglu_clamp(p.g, a.g, b.g, 7.0f), ggml_swiglu_clamp(p.r, a.r, b.r, 7.0f));
  }, f16_out);
}

TEST_CASE("scale clamp leaky_relu fill tri arange cumsum vs the reference", "[elementwise]") {
  expect("scale f32 [33,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7, 3});
    return op_pair::out(gk::scale(p.g, a.g, 0.37f), ggml_scale(p.r, a.r, 0.37f));
  }, exact);
  expect("scale_bias f32 [257,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {257, 3});
    return op_pair::out(gk::scale_bias(p.g, a.g, 0.37f, -1.25f), ggml_scale_bias(p.r, a.r, 0.37f, -1.25f));
  }, exact);
  expect("scale_inplace f32 [33,7]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {33, 7});
    return op_pair::out(gk::scale_inplace(p.g, a.g, -3.0f), ggml_scale_inplace(p.r, a.r, -3.0f));
  }, exact);
  for (auto t : {gk::type::f32, gk::type::f16}) {
    const std::string tn(gk::name(t));
    expect("clamp " + tn + " [33,7,3]", [&](op_pair& p) {
      tpair a = p.input(t, {33, 7, 3}, -3, 3);
      return op_pair::out(gk::clamp(p.g, a.g, -0.5f, 1.25f), ggml_clamp(p.r, a.r, -0.5f, 1.25f));
    }, exact);
    expect("leaky_relu " + tn + " [33,7,3]", [&](op_pair& p) {
      tpair a = p.input(t, {33, 7, 3}, -3, 3);
      return op_pair::out(gk::leaky_relu(p.g, a.g, 0.1f, false), ggml_leaky_relu(p.r, a.r, 0.1f, false));
    }, exact);
    expect("fill " + tn + " [33,7,3]", [&](op_pair& p) {
      tpair a = p.input(t, {33, 7, 3});
      return op_pair::out(gk::fill(p.g, a.g, 2.5f), ggml_fill(p.r, a.r, 2.5f));
    }, exact);
  }
  for (int tt = 0; tt < 4; ++tt)
    expect("tri type " + std::to_string(tt) + " f32 [7,7,3]", [&](op_pair& p) {
      tpair a = p.input(gk::type::f32, {7, 7, 3});
      return op_pair::out(gk::tri(p.g, a.g, static_cast<gk::tri_type>(tt)), ggml_tri(p.r, a.r, static_cast<ggml_tri_type>(tt)));
    }, exact);
  expect("arange [-3.5, 40.2) step 0.37", [&](op_pair& p) {
    return op_pair::out(gk::arange(p.g, -3.5f, 40.2f, 0.37f), ggml_arange(p.r, -3.5f, 40.2f, 0.37f));
  }, exact);
  expect("cumsum f32 [257,7,3]", [&](op_pair& p) {
    tpair a = p.input(gk::type::f32, {257, 7, 3});
    return op_pair::out(gk::cumsum(p.g, a.g), ggml_cumsum(p.r, a.r));
  }, exact);
}

TEST_CASE("elementwise builders reject bad shapes", "[elementwise][builders]") {
  gk::context ctx({16u << 20, nullptr, false});
  auto* a = ctx.new_tensor_3d(gk::type::f32, 6, 4, 3);
  auto* b = ctx.new_tensor_3d(gk::type::f32, 4, 4, 3);
  auto* sq = ctx.new_tensor_3d(gk::type::f32, 5, 5, 2);
  const std::size_t before = ctx.used();
  CHECK_THROWS_AS(gk::add(ctx, a, b), gk::error);       // 6 % 4 != 0
  CHECK_THROWS_AS(gk::mul(ctx, b, a), gk::error);
  CHECK_THROWS_AS(gk::add1(ctx, a, b), gk::error);      // b not a scalar
  CHECK_THROWS_AS(gk::acc(ctx, b, a, 16, 64, 192, 0), gk::error);  // b bigger than a
  CHECK_THROWS_AS(gk::unary(ctx, gk::transpose(ctx, a), gk::unary_op::relu), gk::error);  // rows not packed
  CHECK_THROWS_AS(gk::glu_split(ctx, a, b, gk::glu_op::swiglu), gk::error);
  CHECK_THROWS_AS(gk::tri(ctx, a, gk::tri_type::lower), gk::error);  // not square
  CHECK_THROWS_AS(gk::arange(ctx, 5.0f, 1.0f, 1.0f), gk::error);
  CHECK_THROWS_AS(gk::cumsum(ctx, ctx.new_tensor_1d(gk::type::f16, 8)), gk::error);
  auto* ids = ctx.new_tensor_2d(gk::type::i32, 3, 3);
  CHECK_THROWS_AS(gk::add_id(ctx, a, a, ids), gk::error);
  try {
    gk::add(ctx, a, b);
  } catch (const gk::error& e) {
    const std::string m = e.what();
    CHECK(m.find("add") != std::string::npos);
    CHECK(m.find("[6, 4, 3, 1]") != std::string::npos);
  }
  CHECK(gk::tri(ctx, sq, gk::tri_type::lower) != nullptr);
  (void)before;
}

// ---- planted controls: broken variants through the same comparisons must go red ----

namespace {

// The binary kernel with b's row index taken as i1 % ne11 of the wrong dimension (ne12).
void planted_add_wrong_modulo(gk::tensor* y, const gk::tensor* a, const gk::tensor* b) {
  std::vector<float> xa(static_cast<std::size_t>(a->ne[0])), xb(static_cast<std::size_t>(b->ne[0]));
  for (std::int64_t i3 = 0; i3 < y->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < y->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < y->ne[1]; ++i1) {
        const float* x = gk::cpu::row_read(a, i1, i2, i3, xa.data());
        const float* g = gk::cpu::row_read(b, i1 % b->ne[2], i2 % b->ne[2], i3 % b->ne[3], xb.data());
        auto* out = reinterpret_cast<float*>(y->at(i1, i2, i3));
        for (std::int64_t i = 0; i < y->ne[0]; ++i) out[i] = x[i] + g[i % b->ne[0]];
      }
}

}  // namespace

TEST_CASE("planted controls go red", "[elementwise][planted]") {
  SECTION("broadcast with a wrong modulo index") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {66, 7, 6, 2}, -3, 3);
    tpair b = p.input(gk::type::f32, {33, 7, 3, 1}, -3, 3);
    tpair y{gk::add(p.g, a.g, b.g), ggml_add(p.r, a.r, b.r)};
    CHECK(p.run(y).mismatches == 0);  // the real kernel passes
    planted_add_wrong_modulo(y.g, a.g, b.g);
    const diff d = gk_test::compare(y.g, gk_test::as_gk(y.r));
    line("PLANTED add wrong modulo", d);
    CHECK(d.mismatches > 0);
  }
  SECTION("erf-GELU in place of tanh-GELU fails the truth bar") {
    op_pair p(mem, 3);
    tpair a = p.input(gk::type::f32, {4097}, -6, 6);
    tpair y{gk::gelu_erf(p.g, a.g), ggml_gelu(p.r, a.r)};  // the wrong GELU, against the reference's gelu
    const diff d = p.run(y);
    const auto x = gk_test::read_all(a.g), g = gk_test::read_all(y.g), r = gk_test::read_all(gk_test::as_gk(y.r));
    double et = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      et = std::max(et, std::fabs(g[i] - 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v)))));
    }
    std::printf("  %-44s %s bar_ratio=%.2f truth max_abs %.3g\n", "PLANTED erf-GELU as gelu", d.str().c_str(),
                table.ratio(g, r), et);
    // against the reference it sits at the edge of the table bar (ratio ~1.0): the table's
    // own error is as large as the tanh/erf difference. The truth bar separates them:
    CHECK_FALSE(et < 1e-5);
  }
  SECTION("gelu with a perturbed coefficient exceeds the table bar") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {257, 3}, -6, 6);
    tpair y{gk::gelu(p.g, a.g), ggml_gelu(p.r, a.r)};
    const diff d0 = p.run(y);
    CHECK(table.ok(d0, gk_test::read_all(y.g), gk_test::read_all(gk_test::as_gk(y.r))));
    const auto x = gk_test::read_all(a.g);
    auto* out = static_cast<float*>(y.g->data);
    for (std::size_t i = 0; i < x.size(); ++i)  // 0.044715 -> 0.05: a 12% error in the cubic term
      out[i] = 0.5f * x[i] * (1.0f + std::tanh(0.7978845608f * x[i] * (1.0f + 0.05f * x[i] * x[i])));
    const auto g = gk_test::read_all(y.g), r = gk_test::read_all(gk_test::as_gk(y.r));
    const diff d = gk_test::compare(y.g, gk_test::as_gk(y.r));
    std::printf("  %-44s %s bar_ratio=%.2f\n", "PLANTED gelu coefficient 0.05", d.str().c_str(), table.ratio(g, r));
    CHECK_FALSE(table.ok(d, g, r));
  }
  SECTION("one ulp in the last element is caught by the exact bar") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {33, 7}, -3, 3);
    tpair y{gk::relu(p.g, a.g), ggml_relu(p.r, a.r)};
    p.run(y);
    auto* out = static_cast<float*>(y.g->data);
    out[y.g->nelements() - 1] = std::nextafter(out[y.g->nelements() - 1], 10.0f);  // last element one ulp up
    const diff d = gk_test::compare(y.g, gk_test::as_gk(y.r));
    line("PLANTED relu last element +1 ulp", d);
    CHECK(d.mismatches == 1);
  }
  SECTION("a thread-count dependent order is caught by the byte comparison") {
    // a cumsum whose row is summed in nth chunks: what a split inside a row would do
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {1001}, -1, 1);
    const auto x = gk_test::read_all(a.g);
    auto chunked = [&](int nth) {
      float total = 0;
      for (int t = 0; t < nth; ++t) {
        float part = 0;
        for (std::size_t i = x.size() * t / nth; i < x.size() * (t + 1) / nth; ++i) part += x[i];
        total += part;
      }
      return total;
    };
    const float s1 = chunked(1);
    bool any_differs = false;
    for (int nt : {2, 3, 7}) {
      const float s = chunked(nt);
      any_differs |= std::memcmp(&s, &s1, 4) != 0;
    }
    std::printf("  %-44s chunked sums differ across 1/2/3/7: %s\n", "PLANTED thread-split row sum",
                any_differs ? "yes" : "no");
    CHECK(any_differs);
  }
}
