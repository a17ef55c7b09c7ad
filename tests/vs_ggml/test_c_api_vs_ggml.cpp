// SPDX-License-Identifier: MIT
// libgk.so against the reference, through the C ABI only: what gk_quantize_row writes the
// reference decodes to what gk_dequantize_row gives; what the reference writes gk decodes
// as the reference does; gk_vec_dot lands on the truth where the reference's vec_dot does.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "gk/gk.h"
#include "harness.hpp"

TEST_CASE("C ABI: every carried format interoperates with the reference", "[c_api][vs_ggml]") {
  ggml_cpu_init();
  std::mt19937 rng(5);
  std::normal_distribution<float> g;
  for (int i = 0; i < GK_TYPE_COUNT; ++i) {
    const auto t = static_cast<gk_type>(i);
    if (gk_vec_dot_type(t) == GK_TYPE_COUNT) continue;
    const auto gt = static_cast<ggml_type>(i);
    INFO(gk_type_name(t));
    const std::int64_t n = 2048;
    std::vector<float> x(n), imp(n), y_gk(n), y_ref(n);
    for (auto& v : x) v = g(rng);
    for (auto& v : imp) v = std::exp(g(rng));
    std::vector<unsigned char> q(gk_row_size(t, n));
    REQUIRE(q.size() == ggml_row_size(gt, n));
    for (const float* im : {static_cast<const float*>(nullptr), static_cast<const float*>(imp.data())}) {
      REQUIRE(gk_quantize_row(t, x.data(), q.data(), n, im) == 0);
      REQUIRE(gk_dequantize_row(t, q.data(), y_gk.data(), n) == 0);
      gk_test::ref_decode(gt, q.data(), y_ref.data(), n);
      CHECK(std::memcmp(y_gk.data(), y_ref.data(), n * 4) == 0);
    }
    if (gt != GGML_TYPE_Q8_1 && gt != GGML_TYPE_Q8_K) {
      ggml_quantize_chunk(gt, x.data(), q.data(), 0, 1, n, imp.data());
      REQUIRE(gk_dequantize_row(t, q.data(), y_gk.data(), n) == 0);
      gk_test::ref_decode(gt, q.data(), y_ref.data(), n);
      CHECK(std::memcmp(y_gk.data(), y_ref.data(), n * 4) == 0);
    }
    // the dot: weights as the reference left them, activations encoded by gk
    const auto at = gk_vec_dot_type(t);
    std::vector<float> xa(n), ad(n);
    for (auto& v : xa) v = g(rng);
    std::vector<unsigned char> a(gk_row_size(at, n));
    REQUIRE(gk_quantize_row(at, xa.data(), a.data(), n, nullptr) == 0);
    REQUIRE(gk_dequantize_row(at, a.data(), ad.data(), n) == 0);
    REQUIRE(gk_dequantize_row(t, q.data(), y_gk.data(), n) == 0);
    double truth = 0, mag = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      truth += double(y_gk[j]) * ad[j];
      mag += std::fabs(double(y_gk[j]) * ad[j]);
    }
    float got = 0;
    REQUIRE(gk_vec_dot(t, n, q.data(), a.data(), &got) == 0);
    CHECK(std::fabs(got - truth) <= (n / gk_blck_size(t) + 4) * std::ldexp(1.0, -24) * mag);
    // The reference's dot reads gk's activation blocks (bsums included) to the same
    // truth. Its q4_1/q5_1 dots use q8_1's block sum s, stored as f16, so they only land
    // within that rounding (2^-11 of each block's offset term); they are left out here.
    const auto* cpu = ggml_get_type_traits_cpu(gt);
    if (cpu->vec_dot && at != GK_TYPE_Q8_1 && gt != GGML_TYPE_Q8_K) {
      float s = 0;
      cpu->vec_dot(static_cast<int>(n), &s, 0, q.data(), 0, a.data(), 0, 1);
      CHECK(std::fabs(s - truth) <= (n / gk_blck_size(t) + 4) * std::ldexp(1.0, -24) * mag);
    }
  }
}
