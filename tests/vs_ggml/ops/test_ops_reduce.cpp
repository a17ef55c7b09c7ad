// SPDX-License-Identifier: MIT
// The reduce family against the reference and against a double-precision truth: sum,
// sum_rows, mean, argmax, count_equal, argsort, top_k. Odd shapes, permuted sources,
// f16/bf16 inputs; the same bits at 1, 2, 3 and 7 threads; bad shapes throw gk::error;
// planted controls (a sum that drops the last element, an argsort that sorts the wrong
// way, a top_k that keeps the wrong end) go red under the same checks.
//
// Bars, stated once:
//  - sum/sum_rows/mean of f32: the reference sums in double left to right, gk in double
//    over 8 lanes; both are the true sum to well under an f32 ulp, rounded once. Bar: 1 ulp
//    of the result against the reference, and 1 ulp (0.5 ulp rounding plus the double
//    error) against a long-double truth.
//  - f16/bf16 rows: the reference sums in f32 (its error grows with the row), gk in double.
//    Bar against truth: 1 ulp of the result type; against the reference: its own f32 error,
//    n * 2^-24 * sum|x|, plus one rounding of the result type.
//  - argmax, count_equal, argsort, top_k: exact (with distinct values; ties are checked
//    against gk's stated rule, since the reference leaves argsort/top_k ties open).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using gk_test::diff;
using gk_test::op_pair;
using gk_test::tpair;
using builder = std::function<tpair(op_pair&)>;

constexpr std::size_t mem = 48u << 20;

using gk_test::raw_bytes;

// Integer-exact read of an i32/i64 tensor.
std::vector<std::int64_t> read_ints(const gk::tensor* t) {
  std::vector<std::int64_t> out;
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (std::int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
          const char* p = t->at(i1, i2, i3) + static_cast<std::size_t>(i0) * t->nb[0];
          if (t->type == gk::type::i64) {
            std::int64_t v;
            std::memcpy(&v, p, 8);
            out.push_back(v);
          } else {
            std::int32_t v;
            std::memcpy(&v, p, 4);
            out.push_back(v);
          }
        }
  return out;
}

// Runs the case at 1 thread (gk and reference) and at 2/3/7 threads (gk, fresh pair with
// the same seed); `inspect` sees the 1-thread pair after compute.
bool threads_identical(const builder& build, const std::function<void(op_pair&, const tpair&)>& inspect,
                       std::uint64_t seed = 1) {
  std::vector<unsigned char> first;
  bool same = true;
  for (int nt : {1, 2, 3, 7}) {
    op_pair p(mem, seed);
    const tpair y = build(p);
    REQUIRE(gk_test::same_shape(y));
    if (nt == 1) {
      p.compute_gk(y, 1);
      p.compute_ref(y, 1);
      inspect(p, y);
      first = raw_bytes(y.g);
    } else {
      p.compute_gk(y, nt);
      same = same && raw_bytes(y.g) == first;
    }
  }
  return same;
}

double ulp_of(float v, gk::type t) {
  const int e = v == 0 ? -126 : std::ilogb(v);
  const int mant = t == gk::type::f32 ? 23 : t == gk::type::f16 ? 10 : 7;
  return std::ldexp(1.0, std::max(e, t == gk::type::f16 ? -14 : -126) - mant);
}

// Row sums in long double, i0 fastest over the rows of `a` (the truth).
std::vector<long double> truth_row_sums(const gk::tensor* a) {
  const auto x = gk_test::read_all(a);
  std::vector<long double> s(static_cast<std::size_t>(a->nrows()), 0.0L);
  for (std::size_t i = 0; i < x.size(); ++i) s[i / static_cast<std::size_t>(a->ne[0])] += x[i];
  return s;
}
std::vector<long double> abs_row_sums(const gk::tensor* a) {
  const auto x = gk_test::read_all(a);
  std::vector<long double> s(static_cast<std::size_t>(a->nrows()), 0.0L);
  for (std::size_t i = 0; i < x.size(); ++i) s[i / static_cast<std::size_t>(a->ne[0])] += std::fabs(x[i]);
  return s;
}

// Worst |v - truth| in ulps of the result type.
double worst_ulps(const std::vector<float>& v, const std::vector<long double>& truth, gk::type t) {
  double w = 0;
  for (std::size_t i = 0; i < v.size(); ++i)
    w = std::max(w, static_cast<double>(std::fabs(static_cast<long double>(v[i]) - truth[i])) /
                        ulp_of(static_cast<float>(truth[i]), t));
  return w;
}

enum class layout { packed, permuted };
tpair src(op_pair& p, gk::type t, std::array<std::int64_t, 4> ne, float lo, float hi, layout l) {
  if (l == layout::packed) return p.input(t, ne, lo, hi);
  tpair a = p.input(t, {ne[0], ne[2], ne[1], ne[3]}, lo, hi);
  return {gk::permute(p.g, a.g, 0, 2, 1, 3), ggml_permute(p.r, a.r, 0, 2, 1, 3)};
}

}  // namespace

TEST_CASE("sum_rows and mean vs the reference and the truth", "[reduce][sum]") {
  struct shp {
    std::array<std::int64_t, 4> ne;
    layout l;
    const char* n;
  };
  const shp shapes[] = {{{1, 7, 1, 1}, layout::packed, "[1,7]"},
                        {{33, 7, 3, 1}, layout::packed, "[33,7,3]"},
                        {{4097, 5, 1, 1}, layout::packed, "[4097,5]"},
                        {{257, 3, 5, 2}, layout::permuted, "permuted [257,3,5,2]"}};
  for (bool is_mean : {false, true})
    for (const auto& s : shapes) {
      const std::string what = std::string(is_mean ? "mean" : "sum_rows") + " f32 " + s.n;
      double vs_ref = 0, vs_truth = 0, ref_vs_truth = 0;
      const bool same = threads_identical(
          [&](op_pair& p) {
            tpair a = src(p, gk::type::f32, s.ne, -1, 2, s.l);
            return is_mean ? op_pair::out(gk::mean(p.g, a.g), ggml_mean(p.r, a.r))
                           : op_pair::out(gk::sum_rows(p.g, a.g), ggml_sum_rows(p.r, a.r));
          },
          [&](op_pair& p, const tpair& y) {
            auto truth = truth_row_sums(y.g->src[0]);
            if (is_mean)
              for (auto& t : truth) t /= static_cast<long double>(s.ne[0]);
            const auto g = gk_test::read_all(y.g), r = gk_test::read_all(gk_test::as_gk(y.r));
            vs_truth = worst_ulps(g, truth, gk::type::f32);
            ref_vs_truth = worst_ulps(r, truth, gk::type::f32);
            const diff d = gk_test::compare(y.g, gk_test::as_gk(y.r));
            vs_ref = d.max_ulps;
            (void)p;
          });
      std::printf("  %-40s vs ref %.0f ulp, vs truth %.2f ulp (reference vs truth %.2f ulp)\n", what.c_str(), vs_ref,
                  vs_truth, ref_vs_truth);
      CHECK(vs_ref <= 1);
      CHECK(vs_truth <= 1.0);
      CHECK(same);
    }
}

TEST_CASE("sum vs the reference and the truth", "[reduce][sum]") {
  struct cs {
    gk::type t;
    std::array<std::int64_t, 4> ne;
  };
  const cs cases[] = {{gk::type::f32, {33, 7, 3, 1}}, {gk::type::f32, {4097, 9, 1, 1}}, {gk::type::f32, {1, 1, 1, 1}},
                      {gk::type::f16, {257, 7, 1, 1}}, {gk::type::bf16, {257, 7, 1, 1}}};
  for (const auto& c : cases) {
    const std::string what = "sum " + std::string(gk::name(c.t)) + " " + gk::shape_string(c.ne.data());
    long double truth = 0, abs_sum = 0;
    float g = 0, r = 0;
    const bool same = threads_identical(
        [&](op_pair& p) {
          tpair a = p.input(c.t, c.ne, -1, 2);
          return op_pair::out(gk::sum(p.g, a.g), ggml_sum(p.r, a.r));
        },
        [&](op_pair&, const tpair& y) {
          for (auto v : truth_row_sums(y.g->src[0])) truth += v;
          for (auto v : abs_row_sums(y.g->src[0])) abs_sum += v;
          g = gk_test::read_all(y.g)[0];
          r = gk_test::read_all(gk_test::as_gk(y.r))[0];
        });
    const double u = ulp_of(static_cast<float>(truth), c.t);
    const double g_truth = static_cast<double>(std::fabs(g - truth)) / u;
    const double r_truth = static_cast<double>(std::fabs(r - truth)) / u;
    const auto n = static_cast<double>(c.ne[0] * c.ne[1] * c.ne[2] * c.ne[3]);
    std::printf("  %-40s gk %.9g ref %.9g truth %.9Lg: gk vs truth %.2f ulp, ref vs truth %.2f ulp\n", what.c_str(), g,
                r, truth, g_truth, r_truth);
    CHECK(g_truth <= 1.0);
    if (c.t == gk::type::f32) CHECK(std::fabs(g - r) <= u);
    else CHECK(std::fabs(g - r) <= n * 0x1p-24 * static_cast<double>(abs_sum) + u);  // the reference's f32 sum
    CHECK(same);
  }
}

// The reference has no f16/bf16 sum_rows on the CPU: gk against the truth only.
TEST_CASE("sum_rows of f16 and bf16 rows against the truth", "[reduce][sum]") {
  for (auto t : {gk::type::f16, gk::type::bf16}) {
    std::vector<unsigned char> first;
    bool same = true;
    double vs_truth = 0;
    for (int nt : {1, 2, 3, 7}) {
      op_pair p(mem, 5);
      tpair a = p.input(t, {257, 7, 3}, -1, 2);
      gk::tensor* y = gk::sum_rows(p.g, a.g);
      gk::graph gg;
      gg.build_forward_expand(y);
      gk::cpu::compute(gg, nt);
      if (nt == 1) {
        first = raw_bytes(y);
        vs_truth = worst_ulps(gk_test::read_all(y), truth_row_sums(a.g), t);
      } else {
        same = same && raw_bytes(y) == first;
      }
    }
    std::printf("  %-40s vs truth %.2f ulp of %s\n", ("sum_rows " + std::string(gk::name(t)) + " [257,7,3]").c_str(),
                vs_truth, std::string(gk::name(t)).c_str());
    CHECK(vs_truth <= 0.5 + 1e-3);  // one rounding of a (double-accurate) sum
    CHECK(same);
  }
}

TEST_CASE("argmax and count_equal vs the reference", "[reduce]") {
  for (auto t : {gk::type::f32}) {
    for (std::array<std::int64_t, 4> ne : {std::array<std::int64_t, 4>{1, 5, 1, 1}, {33, 7, 1, 1}, {4097, 3, 1, 1}}) {
      std::int64_t bad = -1;
      const bool same = threads_identical(
          [&](op_pair& p) {
            tpair a = p.input(t, ne, -1, 1);
            return op_pair::out(gk::argmax(p.g, a.g), ggml_argmax(p.r, a.r));
          },
          [&](op_pair&, const tpair& y) {
            const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
            bad = 0;
            for (std::size_t i = 0; i < g.size(); ++i) bad += g[i] != r[i];
          });
      std::printf("  %-40s index mismatches %lld\n", ("argmax f32 " + gk::shape_string(ne.data())).c_str(),
                  static_cast<long long>(bad));
      CHECK(bad == 0);
      CHECK(same);
    }
  }
  // ties and a NaN: the reference's rule (last maximum; a NaN restarts the run)
  {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {6, 3});
    p.set(a, {1, 3, 2, 3, 0, 3, /**/ 5, 1, 5, 2, 2, 1, /**/ 9, NAN, 1, 4, 4, 2});
    tpair y{gk::argmax(p.g, a.g), ggml_argmax(p.r, a.r)};
    p.compute_gk(y);
    p.compute_ref(y);
    const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
    std::printf("  %-40s gk {%lld %lld %lld} ref {%lld %lld %lld}\n", "argmax ties and NaN", (long long)g[0],
                (long long)g[1], (long long)g[2], (long long)r[0], (long long)r[1], (long long)r[2]);
    CHECK(g == r);
    CHECK(g == std::vector<std::int64_t>{5, 2, 4});
  }
  // count_equal: 2-d against the reference; 3-d against a direct count (the reference's
  // CPU kernel indexes rows wrongly when ne2 > 1, so it is not a witness there)
  for (std::array<std::int64_t, 4> ne : {std::array<std::int64_t, 4>{33, 7, 1, 1}, {257, 3, 1, 1}, {7, 5, 3, 2}}) {
    std::int64_t g = -1, r = -1, truth = 0;
    const bool same = threads_identical(
        [&](op_pair& p) {
          tpair a = p.input(gk::type::i32, ne, 0, 3);
          tpair b = p.input(gk::type::i32, ne, 0, 3);
          return op_pair::out(gk::count_equal(p.g, a.g, b.g), ggml_count_equal(p.r, a.r, b.r));
        },
        [&](op_pair&, const tpair& y) {
          g = read_ints(y.g)[0];
          r = read_ints(gk_test::as_gk(y.r))[0];
          const auto va = read_ints(y.g->src[0]), vb = read_ints(y.g->src[1]);
          truth = 0;
          for (std::size_t i = 0; i < va.size(); ++i) truth += va[i] == vb[i];
        });
    std::printf("  %-40s gk %lld ref %lld truth %lld\n", ("count_equal i32 " + gk::shape_string(ne.data())).c_str(),
                (long long)g, (long long)r, (long long)truth);
    CHECK(g == truth);
    if (ne[2] == 1) CHECK(g == r);
    CHECK(same);
  }
}

namespace {

// Distinct values per row (a random permutation of a grid), so every sort has one answer.
std::vector<float> distinct_values(std::size_t n, std::size_t row, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (std::size_t r0 = 0; r0 < n; r0 += row) {
    std::vector<float> g(row);
    for (std::size_t i = 0; i < row; ++i) g[i] = static_cast<float>(i) * 0.25f - 3.0f;
    std::shuffle(g.begin(), g.end(), rng);
    std::copy(g.begin(), g.end(), v.begin() + static_cast<std::ptrdiff_t>(r0));
  }
  return v;
}

}  // namespace

TEST_CASE("argsort and top_k vs the reference", "[reduce][sort]") {
  for (auto order : {gk::sort_order::asc, gk::sort_order::desc})
    for (std::array<std::int64_t, 4> ne : {std::array<std::int64_t, 4>{1, 3, 1, 1}, {33, 7, 3, 1}, {257, 5, 1, 1}}) {
      std::int64_t bad = -1;
      const bool same = threads_identical(
          [&](op_pair& p) {
            tpair a = p.input(gk::type::f32, ne);
            p.set(a, distinct_values(static_cast<std::size_t>(ne[0] * ne[1] * ne[2] * ne[3]), static_cast<std::size_t>(ne[0]), 7));
            return op_pair::out(gk::argsort(p.g, a.g, order), ggml_argsort(p.r, a.r, static_cast<ggml_sort_order>(order)));
          },
          [&](op_pair&, const tpair& y) {
            const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
            bad = 0;
            for (std::size_t i = 0; i < g.size(); ++i) bad += g[i] != r[i];
          });
      const std::string what = std::string("argsort ") + (order == gk::sort_order::asc ? "asc " : "desc ") +
                               gk::shape_string(ne.data());
      std::printf("  %-40s index mismatches %lld\n", what.c_str(), static_cast<long long>(bad));
      CHECK(bad == 0);
      CHECK(same);
    }
  // top_k: the reference's order is open (it swaps the first two on purpose): compare sets
  for (int k : {1, 2, 5, 33})
    for (std::array<std::int64_t, 4> ne : {std::array<std::int64_t, 4>{33, 7, 3, 1}, {257, 5, 1, 1}}) {
      std::int64_t bad_sets = -1, bad_order = -1;
      const bool same = threads_identical(
          [&](op_pair& p) {
            tpair a = p.input(gk::type::f32, ne);
            p.set(a, distinct_values(static_cast<std::size_t>(ne[0] * ne[1] * ne[2] * ne[3]), static_cast<std::size_t>(ne[0]), 9));
            return op_pair::out(gk::top_k(p.g, a.g, k), ggml_top_k(p.r, a.r, k));
          },
          [&](op_pair&, const tpair& y) {
            const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
            const auto x = gk_test::read_all(y.g->src[0]);
            bad_sets = 0;
            bad_order = 0;
            for (std::size_t row = 0; row < g.size() / static_cast<std::size_t>(k); ++row) {
              std::set<std::int64_t> sg(g.begin() + static_cast<std::ptrdiff_t>(row * k), g.begin() + static_cast<std::ptrdiff_t>((row + 1) * k));
              std::set<std::int64_t> sr(r.begin() + static_cast<std::ptrdiff_t>(row * k), r.begin() + static_cast<std::ptrdiff_t>((row + 1) * k));
              bad_sets += sg != sr;
              for (int i = 1; i < k; ++i)  // gk's rule: largest first
                bad_order += !(x[row * static_cast<std::size_t>(ne[0]) + static_cast<std::size_t>(g[row * k + i - 1])] >
                               x[row * static_cast<std::size_t>(ne[0]) + static_cast<std::size_t>(g[row * k + i])]);
            }
          });
      const std::string what = "top_k k=" + std::to_string(k) + " " + gk::shape_string(ne.data());
      std::printf("  %-40s rows with a different set %lld, out-of-order pairs %lld\n", what.c_str(),
                  static_cast<long long>(bad_sets), static_cast<long long>(bad_order));
      CHECK(bad_sets == 0);
      CHECK(bad_order == 0);
      CHECK(same);
    }
  // ties: gk keeps index order (stable); NaN sorts last both ways
  {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {6, 1});
    p.set(a, {2, 1, 2, NAN, 1, 2});
    gk::tensor* asc = gk::argsort(p.g, a.g, gk::sort_order::asc);
    gk::tensor* desc = gk::argsort(p.g, a.g, gk::sort_order::desc);
    gk::tensor* top = gk::top_k(p.g, a.g, 4);
    gk::graph gg;
    gg.build_forward_expand(asc);
    gg.build_forward_expand(desc);
    gg.build_forward_expand(top);
    gk::cpu::compute(gg, 2);
    CHECK(read_ints(asc) == std::vector<std::int64_t>{1, 4, 0, 2, 5, 3});
    CHECK(read_ints(desc) == std::vector<std::int64_t>{0, 2, 5, 1, 4, 3});
    CHECK(read_ints(top) == std::vector<std::int64_t>{0, 2, 5, 1});
  }
  // argsort_top_k is a view of a descending argsort
  {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {33, 4});
    p.set(a, distinct_values(33 * 4, 33, 11));
    tpair y{gk::argsort_top_k(p.g, a.g, 5), ggml_argsort_top_k(p.r, a.r, 5)};
    p.compute_gk(y);
    p.compute_ref(y);
    CHECK(read_ints(y.g) == read_ints(gk_test::as_gk(y.r)));
  }
}

TEST_CASE("reduce builders reject bad shapes", "[reduce][builders]") {
  gk::context ctx({4u << 20, nullptr, false});
  auto* a3 = ctx.new_tensor_3d(gk::type::f32, 6, 4, 3);
  auto* a2 = ctx.new_tensor_2d(gk::type::f32, 6, 4);
  auto* i1 = ctx.new_tensor_2d(gk::type::i32, 6, 4);
  auto* i2 = ctx.new_tensor_2d(gk::type::i32, 6, 5);
  CHECK_THROWS_AS(gk::argmax(ctx, a3), gk::error);
  CHECK_THROWS_AS(gk::count_equal(ctx, i1, i2), gk::error);
  CHECK_THROWS_AS(gk::top_k(ctx, a2, 7), gk::error);
  CHECK_THROWS_AS(gk::argsort_top_k(ctx, a2, 7), gk::error);
  CHECK_THROWS_AS(gk::argsort(ctx, a2, static_cast<gk::sort_order>(5)), gk::error);
  CHECK(gk::top_k(ctx, a2, 6)->ne[0] == 6);
  CHECK(gk::mean(ctx, gk::permute(ctx, a3, 0, 2, 1, 3))->ne[1] == 3);
}

// ---- planted controls ----

TEST_CASE("planted controls go red", "[reduce][planted]") {
  SECTION("a row sum that drops the last element") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {257, 7}, -1, 2);
    tpair y{gk::sum_rows(p.g, a.g), ggml_sum_rows(p.r, a.r)};
    p.compute_gk(y);
    p.compute_ref(y);
    CHECK(gk_test::compare(y.g, gk_test::as_gk(y.r)).max_ulps <= 1);
    auto* out = static_cast<float*>(y.g->data);
    for (std::int64_t r = 0; r < 7; ++r) {
      const auto* x = reinterpret_cast<const float*>(a.g->at(r));
      double s = 0;
      for (std::int64_t i = 0; i + 1 < 257; ++i) s += x[i];  // the planted bug
      out[r] = static_cast<float>(s);
    }
    const diff d = gk_test::compare(y.g, gk_test::as_gk(y.r));
    std::printf("  %-40s %s\n", "PLANTED sum_rows drops last element", d.str().c_str());
    CHECK_FALSE(d.max_ulps <= 1);
  }
  SECTION("argsort in the wrong direction") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {33, 3});
    p.set(a, distinct_values(99, 33, 3));
    tpair y{gk::argsort(p.g, a.g, gk::sort_order::desc), ggml_argsort(p.r, a.r, GGML_SORT_ORDER_ASC)};
    p.compute_gk(y);
    p.compute_ref(y);
    const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < g.size(); ++i) bad += g[i] != r[i];
    std::printf("  %-40s index mismatches %lld\n", "PLANTED argsort desc vs asc", static_cast<long long>(bad));
    CHECK(bad > 0);
  }
  SECTION("top_k keeping the smallest") {
    op_pair p(mem, 1);
    tpair a = p.input(gk::type::f32, {33, 3});
    p.set(a, distinct_values(99, 33, 3));
    tpair asc{gk::argsort(p.g, a.g, gk::sort_order::asc), nullptr};
    tpair y{gk::view_2d(p.g, asc.g, 5, 3, asc.g->nb[1], 0), ggml_top_k(p.r, a.r, 5)};
    gk::graph gg;
    gg.build_forward_expand(y.g);
    gk::cpu::compute(gg, 1);
    p.compute_ref(y);
    const auto g = read_ints(y.g), r = read_ints(gk_test::as_gk(y.r));
    std::int64_t bad_sets = 0;
    for (std::size_t row = 0; row < 3; ++row)
      bad_sets += std::set<std::int64_t>(g.begin() + static_cast<std::ptrdiff_t>(row * 5), g.begin() + static_cast<std::ptrdiff_t>(row * 5 + 5)) !=
                  std::set<std::int64_t>(r.begin() + static_cast<std::ptrdiff_t>(row * 5), r.begin() + static_cast<std::ptrdiff_t>(row * 5 + 5));
    std::printf("  %-40s rows with a different set %lld\n", "PLANTED top_k smallest", static_cast<long long>(bad_sets));
    CHECK(bad_sets == 3);
  }
}
