// SPDX-License-Identifier: MIT
// One Catch2 test case per format and per planted control; included by the per-family
// test files so each family compiles in its own translation unit.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>

#include "harness.hpp"

namespace gk_test {
// Rows per (distribution, importance) in the quality check; GK_QUALITY_ROWS overrides.
inline int quality_rows() {
  const char* e = std::getenv("GK_QUALITY_ROWS");
  return e ? std::atoi(e) : 1000;
}
}  // namespace gk_test

#define GK_FORMAT_CASE(W) \
  TEST_CASE(#W ": interop exact, quality <= 1.02, dot vs truth", "[vs_ggml][" #W "]") { GK_CHECK_FORMAT(gk::formats::W, gk_test::quality_rows()); }

// The checks above must be able to fail: each control breaks one thing and must go red.
#define GK_CONTROL_DECODER(W)                                                                  \
  TEST_CASE("planted: " #W " decoders with a dropped tail or a wrong index are caught", "[control]") { \
    CHECK(gk_test::check_interop<gk::formats::W>().ok());                                     \
    CHECK_FALSE(gk_test::check_interop<gk_test::tail_dropped<gk::formats::W>>(8).ok());        \
    CHECK_FALSE(gk_test::check_interop<gk_test::swapped_pair<gk::formats::W>>(8).ok());        \
  }
#define GK_CONTROL_ENCODER(W)                                                                  \
  TEST_CASE("planted: a " #W " encoder with a 3% scale error fails the quality bar", "[control]") { \
    const auto q = gk_test::check_quality<gk_test::skewed_encoder<gk::formats::W>>(100);      \
    bool any_red = false;                                                                      \
    for (const auto& r : q) any_red |= r.ratio > 1.02;                                         \
    CHECK(any_red);                                                                            \
  }
#define GK_CONTROL_DOT(W)                                                                      \
  TEST_CASE("planted: a " #W " dot that drops the last block misses the truth", "[control]") { \
    CHECK(gk_test::check_dot<gk::formats::W>(8).ok());                                        \
    CHECK_FALSE(gk_test::check_dot<gk::formats::W>(8, 1024, &gk_test::short_row_dot<gk::formats::W>).ok()); \
  }
