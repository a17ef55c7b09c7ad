// SPDX-License-Identifier: MIT
// norm, rms_norm, group_norm, l2_norm, soft_max (mask f32/f16, broadcast, scale, ALiBi,
// sinks) and diag_mask_inf/zero against the reference, at 1, 2, 3 and 7 threads.
//
// Bars, each set by what the two implementations do differently:
//   rms_norm, l2_norm, group_norm, diag_mask: bit-identical (same sums in the same order)
//   norm: 4 ulp on packed rows (the reference sums squared deviations in 16-lane float
//         chunks, gk in one sequential double sum; measured 0 on an AVX-512 machine).
//         On strided rows the reference sums in float: bar max_abs 1e-6 on outputs of
//         magnitude <= 3 (33 float terms, 33 * 2^-24 ~ 2e-6 relative in the variance,
//         half that in the output; measured 2.4e-7), with gk itself checked against a
//         double-precision truth there.
//   soft_max: 8 ulp relative (gk's exp is 1 ulp, the reference's ggml_v_expf a few; the
//         sum orders differ). Measured: see the log.
// Each bar has a planted control: a deliberately wrong kernel (in this file) whose
// output goes through the same comparison and must fail it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "run_case.hpp"

namespace {

using gk_test::op_pair;
using gk_test::tpair;

constexpr int thread_counts[] = {1, 2, 3, 7};

// A bar: how far gk may be from the reference.
struct bar {
  double ulps = 0;          // max distance in ulps (0: bit-identical)
  double rel = 0;           // or, when > 0, max |g - r| / |r| instead of ulps
  double abs = 0;           // or, when > 0, max |g - r|
  bool holds(const gk_test::diff& d) const {
    if (d.nan_mismatch) return false;
    if (abs > 0) return d.max_abs <= abs;
    if (rel > 0) return d.max_rel <= rel;
    return d.max_ulps <= ulps;
  }
  std::string str() const {
    char b[64];
    if (abs > 0) std::snprintf(b, sizeof b, "abs <= %.2g", abs);
    else if (rel > 0) std::snprintf(b, sizeof b, "rel <= %.2g", rel);
    else std::snprintf(b, sizeof b, "ulps <= %.0f", ulps);
    return b;
  }
};

constexpr bar exact{0, 0};
constexpr bar norm_bar{4, 0};
constexpr bar norm_strided_bar{0, 0, 1e-6};
constexpr bar softmax_bar{0, 8 * 0x1p-24 * 2};  // 8 ulp of a result in [0.5, 1) ~ 4.8e-7 relative

// Builds a case into a fresh pair (same seed, so same inputs), computes it at every
// thread count, checks the gk outputs are bit-identical across thread counts and returns
// the comparison at 1 thread. `name` is printed with the measured error.
using case_fn = std::function<tpair(op_pair&)>;

gk_test::diff run_case(const std::string& name, const case_fn& make, const bar& b, std::uint64_t seed = 11) {
  return gk_test::run_case_at_thread_counts(name, make, b, seed, thread_counts, 52);
}

// A planted control: runs the reference for `make`, computes `broken` from the input
// values into a gk tensor, and compares that with the reference under bar b.
using broken_fn = std::function<std::vector<float>(const std::vector<float>& in, const gk::tensor* a)>;

void planted(const std::string& name, const case_fn& make, const bar& b, const broken_fn& broken,
             std::uint64_t seed = 11) {
  op_pair p(64u << 20, seed);
  const tpair y = make(p);
  const gk::tensor* a = y.g->src[0];
  const std::vector<float> in = gk_test::read_all(a);
  p.compute_ref(y);
  gk::tensor* out = p.g.dup_tensor(y.g);  // fresh, packed f32
  const std::vector<float> v = broken(in, a);
  REQUIRE(static_cast<std::int64_t>(v.size()) == out->nelements());
  std::memcpy(out->data, v.data(), v.size() * sizeof(float));
  const auto d = gk_test::compare(out, gk_test::as_gk(y.r));
  std::printf("%-52s %s  -> %s\n", ("planted: " + name).c_str(), d.str().c_str(), b.holds(d) ? "PASSED (bad)" : "red");
  INFO("planted control " << name << " should fail its bar: " << d.str());
  CHECK_FALSE(b.holds(d));
}

}  // namespace

TEST_CASE("norm family against the reference", "[vs_ggml][norm]") {
  const std::vector<std::array<std::int64_t, 4>> shapes = {
      {1, 1, 1, 1}, {7, 3, 1, 1}, {33, 5, 2, 1}, {257, 3, 2, 2}, {4096, 2, 1, 1}};
  for (const auto& s : shapes) {
    const std::string sh = gk::shape_string(s.data());
    run_case("norm " + sh, [&](op_pair& p) {
      auto a = p.input(gk::type::f32, s, -3.0f, 5.0f);
      return op_pair::out(gk::norm(p.g, a.g, 1e-5f), ggml_norm(p.r, a.r, 1e-5f));
    }, norm_bar);
    run_case("rms_norm " + sh, [&](op_pair& p) {
      auto a = p.input(gk::type::f32, s, -3.0f, 5.0f);
      return op_pair::out(gk::rms_norm(p.g, a.g, 1e-6f), ggml_rms_norm(p.r, a.r, 1e-6f));
    }, exact);
    run_case("l2_norm " + sh, [&](op_pair& p) {
      auto a = p.input(gk::type::f32, s, -3.0f, 5.0f);
      return op_pair::out(gk::l2_norm(p.g, a.g, 1e-12f), ggml_l2_norm(p.r, a.r, 1e-12f));
    }, exact);
  }
  // zero rows: eps decides
  run_case("rms_norm zero rows", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {16, 3}, 0.0f, 0.0f);
    return op_pair::out(gk::rms_norm(p.g, a.g, 1e-6f), ggml_rms_norm(p.r, a.r, 1e-6f));
  }, exact);
  run_case("l2_norm zero rows", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {16, 3}, 0.0f, 0.0f);
    return op_pair::out(gk::l2_norm(p.g, a.g, 1e-6f), ggml_l2_norm(p.r, a.r, 1e-6f));
  }, exact);

  // strided inputs: transposed rows (dim 0 strided) for norm and l2_norm; rows packed but
  // permuted dims for rms_norm (the reference's rms_norm needs packed rows)
  run_case("norm transposed [33,5,3]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {5, 33, 3}, -2.0f, 2.0f);
    return op_pair::out(gk::norm(p.g, gk::permute(p.g, a.g, 1, 0, 2, 3), 1e-5f),
                        ggml_norm(p.r, ggml_permute(p.r, a.r, 1, 0, 2, 3), 1e-5f));
  }, norm_strided_bar);
  {  // ... and gk on those strided rows against double precision
    op_pair p(8u << 20, 11);
    auto a = p.input(gk::type::f32, {5, 33, 3}, -2.0f, 2.0f);
    gk::tensor* at = gk::permute(p.g, a.g, 1, 0, 2, 3);
    auto y = op_pair::out(gk::norm(p.g, at, 1e-5f), ggml_norm(p.r, ggml_permute(p.r, a.r, 1, 0, 2, 3), 1e-5f));
    p.compute_gk(y);
    const auto x = gk_test::read_all(at), g = gk_test::read_all(y.g);
    double worst = 0;
    for (std::size_t r = 0; r < x.size() / 33; ++r) {
      double s = 0, s2 = 0;
      for (std::size_t i = 0; i < 33; ++i) s += x[r * 33 + i];
      const double mean = s / 33;
      for (std::size_t i = 0; i < 33; ++i) s2 += (x[r * 33 + i] - mean) * (x[r * 33 + i] - mean);
      const double scale = 1 / std::sqrt(s2 / 33 + 1e-5);
      for (std::size_t i = 0; i < 33; ++i) worst = std::max(worst, std::fabs(g[r * 33 + i] - (x[r * 33 + i] - mean) * scale));
    }
    std::printf("%-52s max_abs vs double truth %.3g  [bar abs <= 4.8e-7, 2 ulp at 2..4]\n", "norm transposed (gk vs truth)", worst);
    CHECK(worst <= 4.8e-7);
  }
  run_case("l2_norm transposed [33,5,3]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {5, 33, 3}, -2.0f, 2.0f);
    return op_pair::out(gk::l2_norm(p.g, gk::permute(p.g, a.g, 1, 0, 2, 3), 1e-5f),
                        ggml_l2_norm(p.r, ggml_permute(p.r, a.r, 1, 0, 2, 3), 1e-5f));
  }, exact);
  run_case("rms_norm permuted [65,3,4]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {65, 4, 3}, -2.0f, 2.0f);
    return op_pair::out(gk::rms_norm(p.g, gk::permute(p.g, a.g, 0, 2, 1, 3), 1e-5f),
                        ggml_rms_norm(p.r, ggml_permute(p.r, a.r, 0, 2, 1, 3), 1e-5f));
  }, exact);

  // in place
  run_case("norm_inplace [65,4]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {65, 4}, -2.0f, 2.0f);
    return op_pair::out(gk::norm_inplace(p.g, a.g, 1e-5f), ggml_norm_inplace(p.r, a.r, 1e-5f));
  }, norm_bar);
  run_case("rms_norm_inplace [65,4]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {65, 4}, -2.0f, 2.0f);
    return op_pair::out(gk::rms_norm_inplace(p.g, a.g, 1e-5f), ggml_rms_norm_inplace(p.r, a.r, 1e-5f));
  }, exact);
  run_case("l2_norm_inplace [65,4]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {65, 4}, -2.0f, 2.0f);
    return op_pair::out(gk::l2_norm_inplace(p.g, a.g, 1e-5f), ggml_l2_norm_inplace(p.r, a.r, 1e-5f));
  }, exact);

  // group_norm: groups that divide the channels, that do not (short last group), more
  // groups than channels, batches
  struct gcase { std::array<std::int64_t, 4> ne; int groups; };
  for (const gcase& g : {gcase{{7, 5, 6, 1}, 3}, gcase{{9, 4, 7, 2}, 3}, gcase{{16, 2, 3, 1}, 5},
                         gcase{{33, 3, 32, 1}, 32}, gcase{{1, 1, 5, 3}, 2}}) {
    run_case("group_norm " + gk::shape_string(g.ne.data()) + " groups " + std::to_string(g.groups), [&](op_pair& p) {
      auto a = p.input(gk::type::f32, g.ne, -2.0f, 3.0f);
      return op_pair::out(gk::group_norm(p.g, a.g, g.groups, 1e-6f), ggml_group_norm(p.r, a.r, g.groups, 1e-6f));
    }, exact);
  }
  run_case("group_norm permuted [8,6,5,1] groups 2", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {8, 5, 6, 1}, -2.0f, 3.0f);
    return op_pair::out(gk::group_norm(p.g, gk::permute(p.g, a.g, 0, 2, 1, 3), 2, 1e-6f),
                        ggml_group_norm(p.r, ggml_permute(p.r, a.r, 0, 2, 1, 3), 2, 1e-6f));
  }, exact);
  run_case("group_norm_inplace [7,5,6] groups 4", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {7, 5, 6, 1}, -2.0f, 3.0f);
    return op_pair::out(gk::group_norm_inplace(p.g, a.g, 4, 1e-6f), ggml_group_norm_inplace(p.r, a.r, 4, 1e-6f));
  }, exact);
}

TEST_CASE("norm family: planted controls go red", "[vs_ggml][norm][planted]") {
  const auto norm_case = [](op_pair& p) {
    auto a = p.input(gk::type::f32, {33, 5, 2}, -3.0f, 5.0f);
    return op_pair::out(gk::norm(p.g, a.g, 1e-5f), ggml_norm(p.r, a.r, 1e-5f));
  };
  // norm with the sample variance (divides by n - 1)
  planted("norm dividing by n-1", norm_case, norm_bar, [](const std::vector<float>& in, const gk::tensor* a) {
    const std::int64_t n = a->ne[0];
    std::vector<float> out(in.size());
    for (std::size_t r = 0; r < in.size() / static_cast<std::size_t>(n); ++r) {
      const float* x = &in[r * static_cast<std::size_t>(n)];
      double s = 0;
      for (std::int64_t i = 0; i < n; ++i) s += x[i];
      const float mean = static_cast<float>(s) / static_cast<float>(n);
      double s2 = 0;
      for (std::int64_t i = 0; i < n; ++i) s2 += static_cast<double>((x[i] - mean) * (x[i] - mean));
      const float scale = 1.0f / std::sqrt(static_cast<float>(s2 / static_cast<double>(n - 1)) + 1e-5f);
      for (std::int64_t i = 0; i < n; ++i) out[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] = (x[i] - mean) * scale;
    }
    return out;
  });
  // rms_norm whose sum stops one element short (a dropped tail): must break bit-identity
  const auto rms_case = [](op_pair& p) {
    auto a = p.input(gk::type::f32, {257, 3, 2, 1}, -3.0f, 5.0f);
    return op_pair::out(gk::rms_norm(p.g, a.g, 1e-6f), ggml_rms_norm(p.r, a.r, 1e-6f));
  };
  planted("rms_norm dropping the last element of the sum", rms_case, exact,
          [](const std::vector<float>& in, const gk::tensor* a) {
            const std::int64_t n = a->ne[0];
            std::vector<float> out(in.size());
            for (std::size_t r = 0; r < in.size() / static_cast<std::size_t>(n); ++r) {
              const float* x = &in[r * static_cast<std::size_t>(n)];
              double s = 0;
              for (std::int64_t i = 0; i + 1 < n; ++i) s += static_cast<double>(x[i] * x[i]);
              const float scale = 1.0f / std::sqrt(static_cast<float>(s / static_cast<double>(n)) + 1e-6f);
              for (std::int64_t i = 0; i < n; ++i) out[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] = x[i] * scale;
            }
            return out;
          });
  // group_norm taking the mean per channel instead of per group
  const auto gn_case = [](op_pair& p) {
    auto a = p.input(gk::type::f32, {7, 5, 6, 1}, -2.0f, 3.0f);
    return op_pair::out(gk::group_norm(p.g, a.g, 3, 1e-6f), ggml_group_norm(p.r, a.r, 3, 1e-6f));
  };
  planted("group_norm normalising per channel", gn_case, exact, [](const std::vector<float>& in, const gk::tensor* a) {
    const std::size_t n = static_cast<std::size_t>(a->ne[0] * a->ne[1]);
    std::vector<float> out(in.size());
    for (std::size_t c = 0; c < in.size() / n; ++c) {
      double s = 0, s2 = 0;
      for (std::size_t i = 0; i < n; ++i) s += in[c * n + i];
      const float mean = static_cast<float>(s / static_cast<double>(n));
      for (std::size_t i = 0; i < n; ++i) s2 += static_cast<double>((in[c * n + i] - mean) * (in[c * n + i] - mean));
      const float scale = 1.0f / std::sqrt(static_cast<float>(s2 / static_cast<double>(n)) + 1e-6f);
      for (std::size_t i = 0; i < n; ++i) out[c * n + i] = (in[c * n + i] - mean) * scale;
    }
    return out;
  });
}

TEST_CASE("norm family: builders reject bad arguments", "[vs_ggml][norm][builders]") {
  gk::context ctx(gk::context_params{1u << 20, nullptr, false});
  gk::tensor* a = ctx.new_tensor_2d(gk::type::f32, 8, 2);
  CHECK_THROWS_AS(gk::norm(ctx, nullptr, 1e-5f), gk::error);
  CHECK_THROWS_AS(gk::rms_norm(ctx, a, -1.0f), gk::error);
  CHECK_THROWS_AS(gk::group_norm(ctx, a, 0, 1e-5f), gk::error);
  gk::tensor* y = gk::group_norm(ctx, a, 3, 0.5f);
  CHECK(y->param_i32(0) == 3);
  CHECK(y->param_f32(1) == 0.5f);
  CHECK(gk::l2_norm(ctx, a, 0.25f)->param_f32(0) == 0.25f);
  CHECK(gk::rms_norm_inplace(ctx, a, 0.25f)->view_src == a);
}

// ---------------------------------------------------------------------------------------

namespace {

// Fills a mask of shape ne with a causal pattern (0 where i0 <= n_past + i1, else -inf)
// plus small noise on the kept entries, so the mask's values matter.
std::vector<float> causal_mask(const std::array<std::int64_t, 4>& ne, std::int64_t n_past, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(ne[0] * ne[1] * ne[2] * ne[3]));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::size_t k = 0;
  for (std::int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (std::int64_t i0 = 0; i0 < ne[0]; ++i0)
          v[k++] = i0 > n_past + i1 ? -std::numeric_limits<float>::infinity() : d(rng);
  return v;
}

struct sm_case {
  std::array<std::int64_t, 4> a;
  std::array<std::int64_t, 4> mask;  // ne[0] == 0: no mask
  gk::type mask_type;
  float scale, max_bias;
};

tpair make_softmax(op_pair& p, const sm_case& c, bool inplace = false, float lo = -4.0f, float hi = 4.0f) {
  auto a = p.input(gk::type::f32, c.a, lo, hi);
  if (c.mask[0] == 0) {
    if (inplace) return op_pair::out(gk::soft_max_inplace(p.g, a.g), ggml_soft_max_inplace(p.r, a.r));
    if (c.scale == 1.0f) return op_pair::out(gk::soft_max(p.g, a.g), ggml_soft_max(p.r, a.r));
    return op_pair::out(gk::soft_max_ext(p.g, a.g, nullptr, c.scale, 0.0f),
                        ggml_soft_max_ext(p.r, a.r, nullptr, c.scale, 0.0f));
  }
  auto m = p.input(c.mask_type, c.mask);
  p.set(m, causal_mask(c.mask, 1, 5));
  if (inplace)
    return op_pair::out(gk::soft_max_ext_inplace(p.g, a.g, m.g, c.scale, c.max_bias),
                        ggml_soft_max_ext_inplace(p.r, a.r, m.r, c.scale, c.max_bias));
  return op_pair::out(gk::soft_max_ext(p.g, a.g, m.g, c.scale, c.max_bias),
                      ggml_soft_max_ext(p.r, a.r, m.r, c.scale, c.max_bias));
}

std::string describe_case(const sm_case& c) {
  std::string s = gk::shape_string(c.a.data());
  if (c.mask[0]) s += " mask " + std::string(gk::name(c.mask_type)) + gk::shape_string(c.mask.data());
  char b[64];
  std::snprintf(b, sizeof b, " scale %g bias %g", c.scale, c.max_bias);
  return s + b;
}

}  // namespace

TEST_CASE("soft_max against the reference", "[vs_ggml][softmax]") {
  const gk::type f32 = gk::type::f32, f16 = gk::type::f16;
  const std::vector<sm_case> cases = {
      {{1, 1, 1, 1}, {0}, f32, 1.0f, 0.0f},
      {{7, 3, 1, 1}, {0}, f32, 1.0f, 0.0f},
      {{33, 5, 2, 1}, {0}, f32, 0.3f, 0.0f},
      {{257, 4, 3, 1}, {0}, f32, 1.0f, 0.0f},
      {{4096, 2, 1, 1}, {0}, f32, 0.125f, 0.0f},
      // masks: padded rows, broadcast over heads and batch, f32 and f16
      {{33, 5, 4, 1}, {33, 8, 1, 1}, f32, 0.125f, 0.0f},
      {{33, 5, 4, 1}, {33, 8, 1, 1}, f16, 0.125f, 0.0f},
      {{64, 7, 6, 2}, {64, 7, 3, 2}, f32, 0.5f, 0.0f},
      {{64, 7, 6, 2}, {64, 9, 2, 1}, f16, 0.5f, 0.0f},
      {{257, 3, 4, 2}, {257, 3, 4, 2}, f32, 1.0f, 0.0f},
      // ALiBi: power-of-two and non-power-of-two head counts
      {{32, 4, 8, 1}, {32, 4, 1, 1}, f32, 0.125f, 8.0f},
      {{32, 4, 6, 1}, {32, 4, 1, 1}, f32, 0.125f, 8.0f},
      {{33, 3, 5, 2}, {33, 4, 5, 1}, f16, 1.0f, 8.0f},
      {{17, 2, 12, 1}, {17, 2, 1, 1}, f32, 1.0f, 3.5f},
  };
  for (const auto& c : cases) {
    run_case("soft_max " + describe_case(c), [&](op_pair& p) { return make_softmax(p, c); }, softmax_bar);
  }
  // large logits: only right with the max subtracted
  run_case("soft_max large values [257,4] in [-300,300]",
           [&](op_pair& p) { return make_softmax(p, {{257, 4, 1, 1}, {0}, f32, 1.0f, 0.0f}, false, -300.0f, 300.0f); },
           softmax_bar);
  // in place
  run_case("soft_max_inplace [33,5,2]",
           [&](op_pair& p) { return make_softmax(p, {{33, 5, 2, 1}, {0}, f32, 1.0f, 0.0f}, true); }, softmax_bar);
  run_case("soft_max_ext_inplace [64,7,6,2] mask f16",
           [&](op_pair& p) { return make_softmax(p, {{64, 7, 6, 2}, {64, 7, 3, 2}, f16, 0.5f, 2.0f}, true); },
           softmax_bar);
}

TEST_CASE("soft_max: sinks and fully masked rows", "[vs_ggml][softmax]") {
  // sinks: one logit per head, with and without a mask
  for (const bool with_mask : {false, true}) {
    run_case(std::string("soft_max sinks [40,5,6,2]") + (with_mask ? " mask f16" : ""), [&](op_pair& p) {
      auto a = p.input(gk::type::f32, {40, 5, 6, 2}, -3.0f, 3.0f);
      auto s = p.input(gk::type::f32, {6}, -2.0f, 4.0f);
      tpair y;
      if (with_mask) {
        auto m = p.input(gk::type::f16, {40, 5, 1, 1});
        p.set(m, causal_mask({40, 5, 1, 1}, 2, 9));
        y = op_pair::out(gk::soft_max_ext(p.g, a.g, m.g, 0.25f, 0.0f), ggml_soft_max_ext(p.r, a.r, m.r, 0.25f, 0.0f));
      } else {
        y = op_pair::out(gk::soft_max_ext(p.g, a.g, nullptr, 0.25f, 0.0f),
                         ggml_soft_max_ext(p.r, a.r, nullptr, 0.25f, 0.0f));
      }
      gk::soft_max_add_sinks(y.g, s.g);
      ggml_soft_max_add_sinks(y.r, s.r);
      return y;
    }, softmax_bar);
  }

  // A row the mask makes -inf everywhere. Rule (the reference's): without sinks the row
  // is NaN (max is -inf, -inf - -inf is NaN); with a sink it is all zeros.
  const auto fully_masked = [](bool sink) {
    return [sink](op_pair& p) {
      auto a = p.input(gk::type::f32, {16, 3, 2, 1}, -3.0f, 3.0f);
      auto m = p.input(gk::type::f32, {16, 3, 1, 1});
      std::vector<float> mv(48, 0.0f);
      for (int i = 16; i < 32; ++i) mv[static_cast<std::size_t>(i)] = -std::numeric_limits<float>::infinity();  // row 1
      p.set(m, mv);
      auto y = op_pair::out(gk::soft_max_ext(p.g, a.g, m.g, 1.0f, 0.0f), ggml_soft_max_ext(p.r, a.r, m.r, 1.0f, 0.0f));
      if (sink) {
        auto s = p.input(gk::type::f32, {2}, -1.0f, 1.0f);
        gk::soft_max_add_sinks(y.g, s.g);
        ggml_soft_max_add_sinks(y.r, s.r);
      }
      return y;
    };
  };
  for (const bool sink : {false, true}) {
    op_pair p(8u << 20, 3);
    auto y = fully_masked(sink)(p);
    const auto d = p.run(y);
    const auto g = gk_test::read_all(y.g), r = gk_test::read_all(gk_test::as_gk(y.r));
    for (int i = 16; i < 32; ++i) {
      INFO("fully masked row, sink " << sink << ", element " << i << ": gk " << g[static_cast<std::size_t>(i)]
                                     << " ref " << r[static_cast<std::size_t>(i)]);
      if (sink) {
        CHECK(g[static_cast<std::size_t>(i)] == 0.0f);
        CHECK(r[static_cast<std::size_t>(i)] == 0.0f);
      } else {
        CHECK(std::isnan(g[static_cast<std::size_t>(i)]));
        CHECK(std::isnan(r[static_cast<std::size_t>(i)]));
      }
    }
    std::printf("%-52s %s\n", sink ? "soft_max fully masked row + sink (zeros)" : "soft_max fully masked row (NaN)",
                d.str().c_str());
    CHECK(softmax_bar.holds(d));
  }
}

TEST_CASE("diag_mask against the reference", "[vs_ggml][softmax]") {
  for (const int n_past : {0, 2, 40}) {
    for (const bool inplace : {false, true}) {
      const std::string suffix = std::string(inplace ? "_inplace" : "") + " [9,7,3,2] n_past " + std::to_string(n_past);
      run_case("diag_mask_inf" + suffix, [&](op_pair& p) {
        auto a = p.input(gk::type::f32, {9, 7, 3, 2});
        return inplace ? op_pair::out(gk::diag_mask_inf_inplace(p.g, a.g, n_past),
                                      ggml_diag_mask_inf_inplace(p.r, a.r, n_past))
                       : op_pair::out(gk::diag_mask_inf(p.g, a.g, n_past), ggml_diag_mask_inf(p.r, a.r, n_past));
      }, exact);
      run_case("diag_mask_zero" + suffix, [&](op_pair& p) {
        auto a = p.input(gk::type::f32, {9, 7, 3, 2});
        return inplace ? op_pair::out(gk::diag_mask_zero_inplace(p.g, a.g, n_past),
                                      ggml_diag_mask_zero_inplace(p.r, a.r, n_past))
                       : op_pair::out(gk::diag_mask_zero(p.g, a.g, n_past), ggml_diag_mask_zero(p.r, a.r, n_past));
      }, exact);
    }
  }
  // the classic chain: scale, causal mask, softmax
  run_case("diag_mask_inf -> soft_max [32,32,4]", [&](op_pair& p) {
    auto a = p.input(gk::type::f32, {32, 32, 4, 1}, -5.0f, 5.0f);
    return op_pair::out(gk::soft_max(p.g, gk::diag_mask_inf(p.g, a.g, 0)),
                        ggml_soft_max(p.r, ggml_diag_mask_inf(p.r, a.r, 0)));
  }, softmax_bar);
}

TEST_CASE("soft_max family: planted controls go red", "[vs_ggml][softmax][planted]") {
  const sm_case big{{257, 4, 1, 1}, {0}, gk::type::f32, 1.0f, 0.0f};
  // softmax without the max subtraction on logits up to 300: exp overflows
  planted("soft_max skipping the max subtraction", [&](op_pair& p) { return make_softmax(p, big, false, -300.0f, 300.0f); },
          softmax_bar, [](const std::vector<float>& in, const gk::tensor* a) {
            const auto n = static_cast<std::size_t>(a->ne[0]);
            std::vector<float> out(in.size());
            for (std::size_t r = 0; r < in.size() / n; ++r) {
              double s = 0;
              for (std::size_t i = 0; i < n; ++i) s += (out[r * n + i] = std::exp(in[r * n + i]));
              for (std::size_t i = 0; i < n; ++i) out[r * n + i] = static_cast<float>(out[r * n + i] / s);
            }
            return out;
          });
  // ALiBi with slopes from a power-of-two count rounded up instead of down (8 for 6 heads)
  const sm_case alibi{{32, 4, 6, 1}, {32, 4, 1, 1}, gk::type::f32, 0.125f, 8.0f};
  planted("soft_max ALiBi with n_head rounded up to 8", [&](op_pair& p) { return make_softmax(p, alibi); }, softmax_bar,
          [&](const std::vector<float>& in, const gk::tensor* a) {
            const auto mask = causal_mask(alibi.mask, 1, 5);
            const auto n = static_cast<std::size_t>(a->ne[0]);
            std::vector<float> out(in.size());
            for (std::size_t r = 0; r < in.size() / n; ++r) {
              const std::size_t i1 = r % 4, h = r / 4;
              const float slope = std::pow(std::pow(2.0f, -8.0f / 8.0f), static_cast<float>(h + 1));
              std::vector<double> w(n);
              double mx = -INFINITY, s = 0;
              for (std::size_t i = 0; i < n; ++i) {
                w[i] = in[r * n + i] * 0.125f + slope * mask[i1 * n + i];
                mx = std::max(mx, w[i]);
              }
              for (std::size_t i = 0; i < n; ++i) s += (w[i] = std::exp(w[i] - mx));
              for (std::size_t i = 0; i < n; ++i) out[r * n + i] = static_cast<float>(w[i] / s);
            }
            return out;
          });
  // diag_mask off by one (masks i0 >= n_past + i1)
  planted("diag_mask_inf off by one", [](op_pair& p) {
    auto a = p.input(gk::type::f32, {9, 7, 3, 2});
    return op_pair::out(gk::diag_mask_inf(p.g, a.g, 2), ggml_diag_mask_inf(p.r, a.r, 2));
  }, exact, [](const std::vector<float>& in, const gk::tensor* a) {
    std::vector<float> out(in);
    const std::int64_t n0 = a->ne[0], n1 = a->ne[1];
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::int64_t i0 = static_cast<std::int64_t>(k) % n0, i1 = (static_cast<std::int64_t>(k) / n0) % n1;
      if (i0 >= 2 + i1) out[k] = -INFINITY;
    }
    return out;
  });
}

TEST_CASE("soft_max family: builders reject bad arguments", "[vs_ggml][softmax][builders]") {
  gk::context ctx(gk::context_params{1u << 20, nullptr, false});
  gk::tensor* a = ctx.new_tensor_4d(gk::type::f32, 16, 4, 6, 2);
  gk::tensor* m_short = ctx.new_tensor_2d(gk::type::f32, 16, 3);       // fewer rows than a
  gk::tensor* m_len = ctx.new_tensor_2d(gk::type::f32, 15, 4);         // wrong row length
  gk::tensor* m_heads = ctx.new_tensor_3d(gk::type::f32, 16, 4, 4);    // 4 does not divide 6
  gk::tensor* m_i32 = ctx.new_tensor_2d(gk::type::i32, 16, 4);
  gk::tensor* m_ok = ctx.new_tensor_3d(gk::type::f16, 16, 5, 3);
  CHECK_THROWS_AS(gk::soft_max_ext(ctx, a, m_short, 1.0f, 0.0f), gk::error);
  CHECK_THROWS_AS(gk::soft_max_ext(ctx, a, m_len, 1.0f, 0.0f), gk::error);
  CHECK_THROWS_AS(gk::soft_max_ext(ctx, a, m_heads, 1.0f, 0.0f), gk::error);
  CHECK_THROWS_AS(gk::soft_max_ext(ctx, a, m_i32, 1.0f, 0.0f), gk::error);
  CHECK_THROWS_AS(gk::soft_max_ext(ctx, a, nullptr, 1.0f, 8.0f), gk::error);  // ALiBi needs a mask
  CHECK_THROWS_AS(gk::soft_max(ctx, gk::transpose(ctx, a)), gk::error);       // not contiguous
  CHECK_THROWS_AS(gk::diag_mask_inf(ctx, a, -1), gk::error);
  gk::tensor* y = gk::soft_max_ext(ctx, a, m_ok, 0.5f, 8.0f);
  CHECK(y->param_f32(0) == 0.5f);
  CHECK(y->param_f32(1) == 8.0f);
  CHECK(y->src[1] == m_ok);
  gk::tensor* bad_sinks = ctx.new_tensor_1d(gk::type::f32, 5);
  CHECK_THROWS_AS(gk::soft_max_add_sinks(y, bad_sinks), gk::error);
  CHECK_THROWS_AS(gk::soft_max_add_sinks(gk::norm(ctx, a, 0.0f), ctx.new_tensor_1d(gk::type::f32, 6)), gk::error);
  gk::soft_max_add_sinks(y, ctx.new_tensor_1d(gk::type::f32, 6));
  CHECK(y->src[2] != nullptr);
  CHECK_THROWS_AS(gk::soft_max_add_sinks(y, ctx.new_tensor_1d(gk::type::f32, 6)), gk::error);  // already has sinks
  CHECK(gk::diag_mask_zero(ctx, a, 3)->param_i32(0) == 3);
}
