// SPDX-License-Identifier: MIT
// The type layer against the reference: every id, name, block size, type size, row size,
// dot pairing, and every block struct's size and field offsets.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gk/formats/all.hpp"
#include "gk/gk.h"

#define GK_SAME_ID(x, X)                                                           \
  static_assert(static_cast<int>(gk::type::x) == GGML_TYPE_##X, "gk::type::" #x); \
  static_assert(static_cast<int>(GK_TYPE_##X) == static_cast<int>(GGML_TYPE_##X), "GK_TYPE_" #X);
GK_SAME_ID(f32, F32) GK_SAME_ID(f16, F16) GK_SAME_ID(q4_0, Q4_0) GK_SAME_ID(q4_1, Q4_1)
GK_SAME_ID(q5_0, Q5_0) GK_SAME_ID(q5_1, Q5_1) GK_SAME_ID(q8_0, Q8_0) GK_SAME_ID(q8_1, Q8_1)
GK_SAME_ID(q2_K, Q2_K) GK_SAME_ID(q3_K, Q3_K) GK_SAME_ID(q4_K, Q4_K) GK_SAME_ID(q5_K, Q5_K)
GK_SAME_ID(q6_K, Q6_K) GK_SAME_ID(q8_K, Q8_K) GK_SAME_ID(iq2_xxs, IQ2_XXS) GK_SAME_ID(iq2_xs, IQ2_XS)
GK_SAME_ID(iq3_xxs, IQ3_XXS) GK_SAME_ID(iq1_s, IQ1_S) GK_SAME_ID(iq4_nl, IQ4_NL) GK_SAME_ID(iq3_s, IQ3_S)
GK_SAME_ID(iq2_s, IQ2_S) GK_SAME_ID(iq4_xs, IQ4_XS) GK_SAME_ID(i8, I8) GK_SAME_ID(i16, I16)
GK_SAME_ID(i32, I32) GK_SAME_ID(i64, I64) GK_SAME_ID(f64, F64) GK_SAME_ID(iq1_m, IQ1_M)
GK_SAME_ID(bf16, BF16) GK_SAME_ID(tq1_0, TQ1_0) GK_SAME_ID(tq2_0, TQ2_0) GK_SAME_ID(mxfp4, MXFP4)
GK_SAME_ID(nvfp4, NVFP4) GK_SAME_ID(q1_0, Q1_0) GK_SAME_ID(q2_0, Q2_0)
static_assert(gk::type_count == GGML_TYPE_COUNT && static_cast<int>(GK_TYPE_COUNT) == static_cast<int>(GGML_TYPE_COUNT));

// Block structs: same size and the same offset for every field the reference names.
#define GK_SAME_FIELD(f, g, field) static_assert(offsetof(gk::formats::f::block, field) == offsetof(g, field), #f "." #field);
#define GK_SAME_FIELD2(f, g, ours, theirs) static_assert(offsetof(gk::formats::f::block, ours) == offsetof(g, theirs), #f "." #ours);
#define GK_SAME_SIZE(f, g) static_assert(sizeof(gk::formats::f::block) == sizeof(g), #f " size");
GK_SAME_SIZE(q4_0, block_q4_0) GK_SAME_FIELD(q4_0, block_q4_0, qs)
GK_SAME_SIZE(q4_1, block_q4_1) GK_SAME_SIZE(q5_0, block_q5_0) GK_SAME_FIELD(q5_0, block_q5_0, qh) GK_SAME_FIELD(q5_0, block_q5_0, qs)
GK_SAME_SIZE(q5_1, block_q5_1) GK_SAME_FIELD(q5_1, block_q5_1, qh) GK_SAME_FIELD(q5_1, block_q5_1, qs)
GK_SAME_SIZE(q8_0, block_q8_0) GK_SAME_FIELD(q8_0, block_q8_0, qs)
GK_SAME_SIZE(q8_1, block_q8_1) GK_SAME_FIELD(q8_1, block_q8_1, qs)
GK_SAME_SIZE(q2_K, block_q2_K) GK_SAME_FIELD(q2_K, block_q2_K, scales) GK_SAME_FIELD(q2_K, block_q2_K, qs)
GK_SAME_SIZE(q3_K, block_q3_K) GK_SAME_FIELD(q3_K, block_q3_K, hmask) GK_SAME_FIELD(q3_K, block_q3_K, qs)
GK_SAME_FIELD(q3_K, block_q3_K, scales) GK_SAME_FIELD(q3_K, block_q3_K, d)
GK_SAME_SIZE(q4_K, block_q4_K) GK_SAME_FIELD(q4_K, block_q4_K, scales) GK_SAME_FIELD(q4_K, block_q4_K, qs)
GK_SAME_SIZE(q5_K, block_q5_K) GK_SAME_FIELD(q5_K, block_q5_K, scales) GK_SAME_FIELD(q5_K, block_q5_K, qh)
GK_SAME_FIELD(q5_K, block_q5_K, qs)
GK_SAME_SIZE(q6_K, block_q6_K) GK_SAME_FIELD(q6_K, block_q6_K, ql) GK_SAME_FIELD(q6_K, block_q6_K, qh)
GK_SAME_FIELD(q6_K, block_q6_K, scales) GK_SAME_FIELD(q6_K, block_q6_K, d)
GK_SAME_SIZE(q8_K, block_q8_K) GK_SAME_FIELD(q8_K, block_q8_K, d) GK_SAME_FIELD(q8_K, block_q8_K, qs)
GK_SAME_FIELD(q8_K, block_q8_K, bsums)
GK_SAME_SIZE(tq1_0, block_tq1_0) GK_SAME_FIELD(tq1_0, block_tq1_0, qs) GK_SAME_FIELD(tq1_0, block_tq1_0, qh)
GK_SAME_FIELD(tq1_0, block_tq1_0, d)
GK_SAME_SIZE(tq2_0, block_tq2_0) GK_SAME_FIELD(tq2_0, block_tq2_0, qs) GK_SAME_FIELD(tq2_0, block_tq2_0, d)
GK_SAME_SIZE(mxfp4, block_mxfp4) GK_SAME_FIELD(mxfp4, block_mxfp4, e) GK_SAME_FIELD(mxfp4, block_mxfp4, qs)
GK_SAME_SIZE(nvfp4, block_nvfp4) GK_SAME_FIELD(nvfp4, block_nvfp4, d) GK_SAME_FIELD(nvfp4, block_nvfp4, qs)
GK_SAME_SIZE(q1_0, block_q1_0) GK_SAME_FIELD(q1_0, block_q1_0, d) GK_SAME_FIELD(q1_0, block_q1_0, qs)
GK_SAME_SIZE(q2_0, block_q2_0) GK_SAME_FIELD(q2_0, block_q2_0, d) GK_SAME_FIELD(q2_0, block_q2_0, qs)
GK_SAME_SIZE(iq1_s, block_iq1_s) GK_SAME_FIELD(iq1_s, block_iq1_s, qs) GK_SAME_FIELD(iq1_s, block_iq1_s, qh)
GK_SAME_SIZE(iq1_m, block_iq1_m) GK_SAME_FIELD(iq1_m, block_iq1_m, qh) GK_SAME_FIELD(iq1_m, block_iq1_m, scales)
GK_SAME_SIZE(iq2_xxs, block_iq2_xxs) GK_SAME_FIELD(iq2_xxs, block_iq2_xxs, qs)
GK_SAME_SIZE(iq2_xs, block_iq2_xs) GK_SAME_FIELD(iq2_xs, block_iq2_xs, qs) GK_SAME_FIELD(iq2_xs, block_iq2_xs, scales)
GK_SAME_SIZE(iq2_s, block_iq2_s) GK_SAME_FIELD(iq2_s, block_iq2_s, qs) GK_SAME_FIELD(iq2_s, block_iq2_s, qh)
GK_SAME_FIELD(iq2_s, block_iq2_s, scales)
GK_SAME_SIZE(iq3_xxs, block_iq3_xxs) GK_SAME_FIELD(iq3_xxs, block_iq3_xxs, qs)
GK_SAME_SIZE(iq3_s, block_iq3_s) GK_SAME_FIELD(iq3_s, block_iq3_s, qs) GK_SAME_FIELD(iq3_s, block_iq3_s, qh)
GK_SAME_FIELD(iq3_s, block_iq3_s, signs) GK_SAME_FIELD(iq3_s, block_iq3_s, scales)
GK_SAME_SIZE(iq4_nl, block_iq4_nl) GK_SAME_FIELD(iq4_nl, block_iq4_nl, qs)
GK_SAME_SIZE(iq4_xs, block_iq4_xs) GK_SAME_FIELD(iq4_xs, block_iq4_xs, scales_h) GK_SAME_FIELD(iq4_xs, block_iq4_xs, scales_l)
GK_SAME_FIELD(iq4_xs, block_iq4_xs, qs)

TEST_CASE("every type id: name, block size, type size and row size as the reference has them", "[types]") {
  for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
    const auto t = static_cast<gk::type>(i);
    const auto g = static_cast<ggml_type>(i);
    INFO("type id " << i);
    if (ggml_blck_size(g) == 0) {  // retired in GGUF
      CHECK_FALSE(gk::is_valid(t));
      CHECK(gk_type_name(static_cast<gk_type>(i)) == nullptr);
      continue;
    }
    REQUIRE(gk::is_valid(t));
    CHECK(std::string(gk::name(t)) == ggml_type_name(g));
    CHECK(std::string(gk_type_name(static_cast<gk_type>(i))) == ggml_type_name(g));
    CHECK(gk::block_size(t) == ggml_blck_size(g));
    CHECK(gk::type_size(t) == ggml_type_size(g));
    CHECK(gk::is_quantized(t) == ggml_is_quantized(g));
    CHECK(gk_blck_size(static_cast<gk_type>(i)) == ggml_blck_size(g));
    CHECK(gk_type_size(static_cast<gk_type>(i)) == ggml_type_size(g));
    for (std::int64_t n : {std::int64_t(0), std::int64_t(256) * 3, std::int64_t(4096), std::int64_t(1) << 20})
      CHECK(gk_row_size(static_cast<gk_type>(i), n) == ggml_row_size(g, n));
  }
}

TEST_CASE("every format pairs with the activation format the reference pairs it with", "[types]") {
  ggml_cpu_init();
  int seen = 0;
  for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
    const auto t = static_cast<gk::type>(i);
    gk::formats::visit(t, [&]<class W>(std::type_identity<W>) {
      ++seen;
      INFO(gk::name(t));
      CHECK(static_cast<int>(W::dot_type::id) == ggml_get_type_traits_cpu(static_cast<ggml_type>(i))->vec_dot_type);
      CHECK(gk_vec_dot_type(static_cast<gk_type>(i)) == static_cast<int>(W::dot_type::id));
    });
  }
  CHECK(seen == static_cast<int>(std::tuple_size_v<gk::formats::all>));
}
