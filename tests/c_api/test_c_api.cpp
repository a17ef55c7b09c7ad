// SPDX-License-Identifier: MIT
// libgk.so's type-layer ABI on its own: geometry, clear errors on bad input, no write
// past gk_row_size, rows at any address, and encode -> decode -> dot consistency for
// every format it carries.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gk/gk.h"

namespace {

std::vector<gk_type> carried() {
  std::vector<gk_type> v;
  for (int i = 0; i < GK_TYPE_COUNT; ++i)
    if (gk_vec_dot_type(static_cast<gk_type>(i)) != GK_TYPE_COUNT) v.push_back(static_cast<gk_type>(i));
  return v;
}

std::vector<float> gaussian(std::int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

bool error_names(const std::string& what) { return std::string(gk_last_error()).find(what) != std::string::npos; }

}  // namespace

TEST_CASE("geometry of a few types", "[c_api]") {
  CHECK(std::string(gk_type_name(GK_TYPE_Q4_K)) == "q4_K");
  CHECK(gk_blck_size(GK_TYPE_Q4_0) == 32);
  CHECK(gk_type_size(GK_TYPE_Q4_0) == 18);
  CHECK(gk_row_size(GK_TYPE_Q6_K, 512) == 420);
  CHECK(gk_row_size(GK_TYPE_Q6_K, 100) == 0);
  CHECK(gk_type_name(static_cast<gk_type>(4)) == nullptr);
  CHECK(gk_type_name(static_cast<gk_type>(-1)) == nullptr);
  CHECK(gk_type_name(static_cast<gk_type>(1000)) == nullptr);
  CHECK(gk_vec_dot_type(GK_TYPE_Q4_K) == GK_TYPE_Q8_K);
  CHECK(gk_vec_dot_type(GK_TYPE_I32) == GK_TYPE_COUNT);
  CHECK(carried().size() >= 21);
}

TEST_CASE("bad input is refused with a message naming the type and n", "[c_api]") {
  std::vector<float> x(256, 1.0f), y(256);
  std::vector<unsigned char> q(4096);
  float out = 0;
  CHECK(gk_quantize_row(static_cast<gk_type>(5), x.data(), q.data(), 256, nullptr) != 0);
  CHECK(error_names("id 5"));
  CHECK(gk_quantize_row(GK_TYPE_Q4_0, x.data(), q.data(), 33, nullptr) != 0);
  CHECK(error_names("q4_0"));
  CHECK(error_names("n=33"));
  CHECK(gk_quantize_row(GK_TYPE_Q4_K, nullptr, q.data(), 256, nullptr) != 0);
  CHECK(error_names("src is NULL"));
  CHECK(gk_quantize_row(GK_TYPE_Q4_K, x.data(), nullptr, 256, nullptr) != 0);
  CHECK(error_names("dst is NULL"));
  CHECK(gk_quantize_row(GK_TYPE_I32, x.data(), q.data(), 256, nullptr) != 0);
  CHECK(error_names("i32"));
  CHECK(gk_quantize_row(GK_TYPE_Q4_0, x.data(), q.data(), -32, nullptr) != 0);
  CHECK(gk_dequantize_row(GK_TYPE_Q8_0, q.data(), y.data(), 48) != 0);
  CHECK(error_names("n=48"));
  CHECK(gk_dequantize_row(GK_TYPE_Q8_0, nullptr, y.data(), 64) != 0);
  CHECK(gk_vec_dot(GK_TYPE_Q8_0, 64, q.data(), q.data(), nullptr) != 0);
  CHECK(error_names("out is NULL"));
  CHECK(gk_vec_dot(GK_TYPE_Q2_K, 100, q.data(), q.data(), &out) != 0);
  CHECK(error_names("q2_K"));
  x[17] = std::nanf("");
  CHECK(gk_quantize_row(GK_TYPE_Q5_K, x.data(), q.data(), 256, nullptr) != 0);
  CHECK(error_names("src[17]"));
  x[17] = 1.0f;
  std::vector<float> imp(256, 1.0f);
  imp[3] = -1.0f;
  CHECK(gk_quantize_row(GK_TYPE_Q5_K, x.data(), q.data(), 256, imp.data()) != 0);
  CHECK(error_names("imatrix[3]"));
  // a good call after a bad one succeeds and n = 0 is a no-op
  CHECK(gk_quantize_row(GK_TYPE_Q5_K, x.data(), q.data(), 256, nullptr) == 0);
  CHECK(gk_quantize_row(GK_TYPE_Q5_K, nullptr, nullptr, 0, nullptr) == 0);
}

TEST_CASE("every format: no byte written past the row, any alignment, decode and dot agree", "[c_api]") {
  for (gk_type t : carried()) {
    INFO(gk_type_name(t));
    const std::int64_t n = gk_blck_size(t) == 1 ? 1000 : 4 * 256;
    const std::size_t rs = gk_row_size(t, n);
    const auto x = gaussian(n, 7);
    for (std::size_t offset : {0u, 1u, 3u}) {  // misaligned rows must work the same
      std::vector<unsigned char> buf(rs + offset + 64, 0xA5);
      REQUIRE(gk_quantize_row(t, x.data(), buf.data() + offset, n, nullptr) == 0);
      for (std::size_t i = 0; i < offset; ++i) CHECK(buf[i] == 0xA5);
      for (std::size_t i = offset + rs; i < buf.size(); ++i) CHECK(buf[i] == 0xA5);
      std::vector<float> y(n + 8, std::nanf(""));
      REQUIRE(gk_dequantize_row(t, buf.data() + offset, y.data(), n) == 0);
      for (std::int64_t i = n; i < n + 8; ++i) CHECK(std::isnan(y[i]));
      double err = 0, sig = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        err += (x[i] - y[i]) * (x[i] - y[i]);
        sig += x[i] * x[i];
      }
      CHECK(std::sqrt(err / sig) < 0.7);  // a sanity bound; quality is checked against the reference
      // dot with activations encoded in the paired format, against the decoded truth
      const gk_type at = gk_vec_dot_type(t);
      const auto xa = gaussian(n, 8);
      std::vector<unsigned char> act(gk_row_size(at, n) + offset);
      REQUIRE(gk_quantize_row(at, xa.data(), act.data() + offset, n, nullptr) == 0);
      std::vector<float> ad(n);
      REQUIRE(gk_dequantize_row(at, act.data() + offset, ad.data(), n) == 0);
      double truth = 0, mag = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        truth += double(y[i]) * ad[i];
        mag += std::fabs(double(y[i]) * ad[i]);
      }
      float got = 0;
      REQUIRE(gk_vec_dot(t, n, buf.data() + offset, act.data() + offset, &got) == 0);
      CHECK(std::fabs(got - truth) <= 1e-5 * mag);
    }
  }
}
