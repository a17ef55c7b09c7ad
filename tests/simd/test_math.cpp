// SPDX-License-Identifier: MIT
// gk::simd::exp/erf/tanh/silu/gelu: the scalar definitions against libm (double, rounded to
// float) in ulps, and this build's target rows against the scalar definitions bit for bit.
// Compiled once per target (scalar, avx2, avx512 flags); a binary whose target this CPU
// lacks checks only the definitions and warns.
//
// The sweep walks float bit patterns: every STRIDE-th magnitude (odd strides, so every
// binade, subnormals included, and every low-bit residue is hit), both signs, plus every
// pattern within 4096 ulps of the points where a definition switches branch or saturates,
// a coarse walk out to FLT_MAX and the specials (±0, ±inf, NaN, ±FLT_MAX, ±denorm_min).
// Strides 53 and 97 keep the scalar binary (libm fmaf calls) near 9 s of one core.
//
// Bounds; beside each, the maximum measured with GK_MATH_STRIDE=5 (2.2e9 points, every
// target; they are the scalar definition's):
//   exp  1 ulp  (1)                erf  1 ulp (1)              tanh 2 ulp (1)
//   silu 3 ulp  (3, at x = -1.87) for x >= -87; below, the result is subnormal and
//               exp(-|x|) already underflowed: absolute error < 2^-126, checked as such
//   gelu 2 ulp  (2, at x = 0.059) for x >= 0; for x < 0, 1 + erf cancels, so the bound
//               there is 2 ulp of x/2
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gk/simd/math.hpp"

namespace {

using gk::simd::native;
using row_fn = void (*)(const float*, float*, std::int64_t);

std::int64_t ordered(float f) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  return (b & 0x80000000u) ? -static_cast<std::int64_t>(b & 0x7fffffffu) : static_cast<std::int64_t>(b);
}

// Distance in representable floats (the subnormal grid included, ±0 the same point);
// NaN matches only NaN.
std::int64_t ulps(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : INT64_MAX;
  return std::llabs(ordered(got) - ordered(want));
}

float ulp_of(float v) {
  v = std::fabs(v);
  return std::nextafter(v, INFINITY) - v;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Calls visit(const float* xs, int count) on chunks covering the sweep of [-neg_max, pos_max].
template <class Visit>
void sweep(float neg_max, float pos_max, std::uint32_t stride, std::vector<float> dense_at, Visit&& visit) {
  std::vector<float> xs;
  xs.reserve(1 << 16);
  auto push = [&](float v) {
    xs.push_back(v);
    if (xs.size() == xs.capacity()) {
      visit(xs.data(), static_cast<int>(xs.size()));
      xs.clear();
    }
  };
  const float top = std::max(neg_max, pos_max);
  for (std::uint64_t b = 0; b <= bits(top); b += stride) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (v <= pos_max) push(v);
    if (v <= neg_max) push(-v);
  }
  for (float p : dense_at)
    for (std::int64_t d = -4096; d <= 4096; ++d) push(std::bit_cast<float>(static_cast<std::uint32_t>(bits(p) + d)));
  for (std::uint64_t b = bits(top); b <= bits(FLT_MAX); b += 65537) {
    push(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
    push(-std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  }
  for (float v : {0.0f, FLT_MAX, INFINITY, FLT_TRUE_MIN, 1e3f, 1e10f}) {
    push(v);
    push(-v);
  }
  push(std::numeric_limits<float>::quiet_NaN());
  visit(xs.data(), static_cast<int>(xs.size()));
}

struct report {
  std::int64_t max_ulps = 0;
  float worst_x = 0;
  double max_scaled = 0;        // for bounds stated in ulps of something else (see below)
  std::int64_t mismatches = 0;  // target row vs scalar definition
  std::int64_t count = 0;
};

// err(x, got, want) returns the error in the unit the bound is stated in.
template <class Scalar, class Ref, class Err>
report measure(const char* name, Scalar scalar, Ref ref, row_fn row, float neg_max, float pos_max,
               std::uint32_t stride, std::vector<float> dense_at, Err err) {
  report r;
  std::vector<float> y(1 << 16);
  sweep(neg_max, pos_max, stride, std::move(dense_at), [&](const float* xs, int n) {
    if (row) row(xs, y.data(), n);
    for (int i = 0; i < n; ++i) {
      const float s = scalar(xs[i]);
      const auto want = static_cast<float>(ref(static_cast<double>(xs[i])));
      const double e = err(xs[i], s, want);
      if (e > r.max_scaled) {
        r.max_scaled = e;
        r.worst_x = xs[i];
      }
      if (row) r.mismatches += !same_bits(s, y[i]);
    }
    r.count += n;
  });
  r.max_ulps = static_cast<std::int64_t>(r.max_scaled);
  std::printf("%-5s %s: %lld points, max error %.0f ulp at x = %a, row mismatches %lld\n", name,
              std::string(native::name).c_str(), static_cast<long long>(r.count), r.max_scaled,
              static_cast<double>(r.worst_x), static_cast<long long>(r.mismatches));
  return r;
}

double plain_ulps(float, float got, float want) { return static_cast<double>(ulps(got, want)); }

double ref_silu(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return x < 0 ? x * std::exp(x) / (1 + std::exp(x)) : x / (1 + std::exp(-x));
}
double ref_gelu(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}

row_fn target_row(row_fn r) { return native::available() ? r : nullptr; }

void note_target() {
  if (!native::available()) WARN("this CPU cannot run " << native::name << "; checking the scalar definitions only");
}

// GK_MATH_STRIDE=1 (or any odd number) overrides both strides, for an exhaustive run.
std::uint32_t stride_or(std::uint32_t fallback) {
  const char* s = std::getenv("GK_MATH_STRIDE");
  return s && std::atoi(s) > 0 ? static_cast<std::uint32_t>(std::atoi(s)) : fallback;
}
const std::uint32_t exp_stride = stride_or(53), act_stride = stride_or(97);

}  // namespace

TEST_CASE("exp: within 1 ulp of libm on [-104, 89] and specials; rows equal the definition", "[simd][math]") {
  note_target();
  const auto r = measure("exp", gk::simd::exp, [](double x) { return std::exp(x); },
                         target_row(gk::simd::exp_row<native>), 104.0f, 89.0f, exp_stride,
                         {88.72283f, -87.33654f, -103.97208f, 0.34657359f, -0.34657359f}, plain_ulps);
  CHECK(r.max_ulps <= 1);
  CHECK(r.mismatches == 0);
  CHECK(gk::simd::exp(-INFINITY) == 0.0f);
  CHECK(gk::simd::exp(INFINITY) == INFINITY);
  CHECK(std::isnan(gk::simd::exp(NAN)));
}

TEST_CASE("erf: within 1 ulp of libm, odd; rows equal the definition", "[simd][math]") {
  note_target();
  const auto r = measure("erf", gk::simd::erf, [](double x) { return std::erf(x); },
                         target_row(gk::simd::erf_row<native>), 20.0f, 20.0f, act_stride,
                         {0.921875f, -0.921875f, 3.9192059f, 4.0f}, plain_ulps);
  CHECK(r.max_ulps <= 1);
  CHECK(r.mismatches == 0);
  std::int64_t not_odd = 0;
  sweep(0.0f, 20.0f, act_stride, {}, [&](const float* xs, int n) {
    for (int i = 0; i < n; ++i) not_odd += !same_bits(gk::simd::erf(-xs[i]), -gk::simd::erf(xs[i]));
  });
  CHECK(not_odd == 0);
}

TEST_CASE("tanh: within 2 ulp of libm, odd, exactly ±1 once libm rounds to 1; rows equal the definition",
          "[simd][math]") {
  note_target();
  const auto r = measure("tanh", gk::simd::tanh, [](double x) { return std::tanh(x); },
                         target_row(gk::simd::tanh_row<native>), 20.0f, 20.0f, act_stride,
                         {0.625f, -0.625f, 9.010913f, 10.0f}, plain_ulps);
  CHECK(r.max_ulps <= 2);
  CHECK(r.mismatches == 0);
  std::int64_t not_odd = 0, not_saturated = 0;
  sweep(0.0f, 20.0f, act_stride, {9.010913f}, [&](const float* xs, int n) {
    for (int i = 0; i < n; ++i) {
      const float y = gk::simd::tanh(xs[i]);
      not_odd += !same_bits(gk::simd::tanh(-xs[i]), -y);
      if (!std::isnan(xs[i]) && static_cast<float>(std::tanh(static_cast<double>(xs[i]))) == 1.0f) not_saturated += y != 1.0f;
    }
  });
  CHECK(not_odd == 0);
  CHECK(not_saturated == 0);
  CHECK(gk::simd::tanh(INFINITY) == 1.0f);
  CHECK(gk::simd::tanh(-INFINITY) == -1.0f);
}

TEST_CASE("silu: within 3 ulp of x/(1+e^-x) where it is normal; rows equal the definition", "[simd][math]") {
  note_target();
  auto err = [](float x, float got, float want) {
    if (x >= -87.0f || std::isnan(x)) return plain_ulps(x, got, want);
    return std::fabs(static_cast<double>(got) - want) <= 0x1p-126 ? 0.0 : 1e9;
  };
  const auto r = measure("silu", gk::simd::silu, ref_silu, target_row(gk::simd::silu_row<native>), 20.0f, 20.0f,
                         act_stride, {0.0f, -87.0f, -104.0f}, err);
  CHECK(r.max_ulps <= 3);
  CHECK(r.mismatches == 0);
  CHECK(same_bits(gk::simd::silu(-INFINITY), -0.0f));
  CHECK(gk::simd::silu(INFINITY) == INFINITY);
}

TEST_CASE("gelu: within 2 ulp for x >= 0 and 2 ulp of x/2 below; rows equal the definition", "[simd][math]") {
  note_target();
  auto err = [](float x, float got, float want) {
    if (!(x < 0.0f)) return plain_ulps(x, got, want);
    return std::fabs(static_cast<double>(got) - want) / ulp_of(0.5f * x);
  };
  const auto r = measure("gelu", gk::simd::gelu, ref_gelu, target_row(gk::simd::gelu_row<native>), 20.0f, 20.0f,
                         act_stride, {1.3037586f, -1.3037586f, 5.656854f, -5.656854f}, err);
  CHECK(r.max_scaled <= 2.0);
  CHECK(r.mismatches == 0);
  CHECK(same_bits(gk::simd::gelu(-INFINITY), -0.0f));
}

TEST_CASE("rows: odd lengths, tails and in-place calls equal the definition", "[simd][math]") {
  if (!native::available()) return note_target();
  std::vector<float> x(67), y(67 + 8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(i) - 33.0f) * 0.37f;
  const row_fn rows[] = {gk::simd::exp_row<native>, gk::simd::erf_row<native>, gk::simd::tanh_row<native>,
                         gk::simd::silu_row<native>, gk::simd::gelu_row<native>};
  float (*const defs[])(float) = {gk::simd::exp, gk::simd::erf, gk::simd::tanh, gk::simd::silu, gk::simd::gelu};
  for (int f = 0; f < 5; ++f)
    for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 67}) {
      std::fill(y.begin(), y.end(), NAN);
      rows[f](x.data(), y.data(), n);
      std::int64_t bad = 0;
      for (int i = 0; i < n; ++i) bad += !same_bits(y[i], defs[f](x[i]));
      for (std::size_t i = n; i < y.size(); ++i) bad += !std::isnan(y[i]);  // guard: nothing past n
      std::vector<float> z(x.begin(), x.begin() + n);
      rows[f](z.data(), z.data(), n);
      for (int i = 0; i < n; ++i) bad += !same_bits(z[i], defs[f](x[i]));
      INFO("function " << f << ", n = " << n);
      CHECK(bad == 0);
    }
}

TEST_CASE("planted: an exp with one coefficient off by 2^-12 relative fails the ulp bound", "[simd][math][control]") {
  auto bad = gk::simd::math_detail::exp_poly;
  bad.c[2] *= 1.0f + 0x1p-12f;
  const auto r = measure("exp~", [&](float x) { return gk::simd::math_detail::exp_with(x, bad); },
                         [](double x) { return std::exp(x); }, nullptr, 104.0f, 89.0f, exp_stride * 7, {}, plain_ulps);
  CHECK(r.max_ulps > 1);
}

TEST_CASE("planted: a row with one flipped low bit is caught", "[simd][math][control]") {
  const row_fn flipped = [](const float* x, float* y, std::int64_t n) {
    gk::simd::exp_row<native>(x, y, n);
    if (n > 5) y[5] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(y[5]) ^ 1u);
  };
  const auto r = measure("exp^", gk::simd::exp, [](double x) { return std::exp(x); }, flipped, 104.0f, 89.0f,
                         exp_stride * 7, {}, plain_ulps);
  CHECK(r.mismatches > 0);
}
