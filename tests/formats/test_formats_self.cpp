// SPDX-License-Identifier: MIT
// Every format on its own (the reference comparisons live in tests/vs_ggml): zero rows
// decode to zero, encoding is deterministic, reconstruction error is within what the
// bits allow, and the scalar dot lands on the decoded truth.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gk/formats/all.hpp"

namespace {
std::vector<float> gaussian(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("format round trip, determinism and dot", "[formats]", gk::formats::all) {
  using W = TestType;
  using B = typename W::block;
  using A = typename W::dot_type;
  constexpr int n = 1024;
  const double bpw = 8.0 * sizeof(B) / W::block_size;
  INFO(gk::name(W::id) << ", " << bpw << " bits per weight");

  std::vector<B> q(n / W::block_size), q2(n / W::block_size);
  std::vector<float> y(n);
  const std::vector<float> zero(n, 0.0f);
  gk::encode_row<W>(zero.data(), q.data(), n);
  gk::decode_row<W>(q.data(), y.data(), n);
  for (float v : y) CHECK(v == 0.0f);

  const auto x = gaussian(n, 1);
  const auto imp = gaussian(n, 2);
  std::vector<float> w(n);
  for (int i = 0; i < n; ++i) w[i] = std::exp(imp[i]);
  gk::encode_row<W>(x.data(), q.data(), n, w.data());
  gk::encode_row<W>(x.data(), q2.data(), n, w.data());
  CHECK(std::memcmp(q.data(), q2.data(), q.size() * sizeof(B)) == 0);

  gk::encode_row<W>(x.data(), q.data(), n);
  gk::decode_row<W>(q.data(), y.data(), n);
  double err = 0, sig = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(std::isfinite(y[i]));
    err += (x[i] - y[i]) * (x[i] - y[i]);
    sig += x[i] * x[i];
  }
  // what b bits can be expected to give on a gaussian row, with room: 2^(2 - b)
  const double bound = W::id == gk::type::f32 ? 0.0 : std::pow(2.0, 2.0 - (W::id == gk::type::f16 ? 13.0 : W::id == gk::type::bf16 ? 10.0 : bpw));
  CHECK(std::sqrt(err / sig) <= bound);

  std::vector<typename A::block> a(n / A::block_size);
  std::vector<float> ad(n);
  const auto xa = gaussian(n, 3);
  gk::encode_row<A>(xa.data(), a.data(), n);
  gk::decode_row<A>(a.data(), ad.data(), n);
  double truth = 0, mag = 0;
  for (int i = 0; i < n; ++i) {
    truth += double(y[i]) * ad[i];
    mag += std::fabs(double(y[i]) * ad[i]);
  }
  const float got = gk::dot_row<W>(q.data(), a.data(), n);
  CHECK(std::fabs(got - truth) <= (n / W::block_size + 4) * std::ldexp(1.0, -24) * mag);
}
