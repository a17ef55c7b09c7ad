// SPDX-License-Identifier: MIT
// The type table on its own: ids, names and geometry are consistent with each other.
#include <catch2/catch.hpp>

#include "gk/core/types.hpp"

static_assert(gk::block_size(gk::type::q4_K) == 256 && gk::type_size(gk::type::q4_K) == 144);
static_assert(gk::row_size(gk::type::q8_0, 4096) == 128 * 34);
static_assert(!gk::is_valid(static_cast<gk::type>(4)) && !gk::is_valid(static_cast<gk::type>(43)));
static_assert(gk::type_from_name("iq2_xxs") == gk::type::iq2_xxs);

TEST_CASE("names round-trip and every valid id has a geometry", "[types]") {
  int valid = 0;
  for (int i = -2; i < gk::type_count + 3; ++i) {
    const auto t = static_cast<gk::type>(i);
    if (!gk::is_valid(t)) {
      CHECK(gk::name(t).empty());
      CHECK(gk::block_size(t) == 0);
      continue;
    }
    ++valid;
    CHECK(gk::type_from_name(gk::name(t)) == t);
    CHECK(gk::block_size(t) >= 1);
    CHECK(gk::type_size(t) >= 1);
    CHECK(gk::is_quantized(t) == (gk::block_size(t) > 1));
  }
  CHECK(valid == 35);  // 43 ids minus the 8 GGUF has retired
  CHECK_FALSE(gk::type_from_name("q4_k").has_value());  // spelled as GGUF spells it
}
