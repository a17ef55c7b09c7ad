// SPDX-License-Identifier: MIT
// Narrow floats on their own (no reference needed): round trips, the rounding rule at
// every tie, and the conversions usable at compile time.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "gk/core/narrow.hpp"

static_assert(gk::f16_to_f32(0x3c00) == 1.0f && gk::f32_to_f16(65504.0f) == 0x7bff);
static_assert(gk::f32_to_f16(65520.0f) == 0x7c00);                      // the tie above max goes to inf
static_assert(gk::f32_to_bf16(1.0f) == 0x3f80 && gk::bf16_to_f32(0x4000) == 2.0f);
static_assert(gk::e8m0_to_f32(127) == 1.0f && gk::e8m0_floor_log2(3.9f) == 128);
static_assert(gk::ue4m3_to_f32(0x7e) == 448.0f && gk::f32_to_ue4m3(448.0f) == 0x7e);
static_assert(gk::e2m1_to_f32(7) == 6.0f && gk::f32_to_e2m1(-5.5f) == 0xf);

TEST_CASE("f16: every non-NaN pattern survives decode then encode", "[narrow]") {
  int bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = gk::f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      bad += (gk::f32_to_f16(f) & 0x7fffu) != 0x7e00u;
      continue;
    }
    bad += gk::f32_to_f16(f) != h;
  }
  CHECK(bad == 0);
}

TEST_CASE("f16: halfway between neighbours rounds to the even one", "[narrow]") {
  int bad = 0;
  for (std::uint32_t h = 0; h < 0x7bff; ++h) {  // positive finite, with a finite successor
    const double lo = gk::f16_to_f32(static_cast<std::uint16_t>(h));
    const double hi = gk::f16_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in f32
    bad += gk::f32_to_f16(mid) != ((h & 1u) ? h + 1 : h);
  }
  CHECK(bad == 0);
}

TEST_CASE("e2m1: encode is the nearest value, ties to the even code, saturating", "[narrow]") {
  int bad = 0;
  for (int i = -800; i <= 800; ++i) {
    const float x = i / 100.0f;
    int best = 0;
    for (int c = 0; c < 16; ++c) {
      const float e = std::fabs(gk::e2m1_to_f32(static_cast<std::uint8_t>(c)) - x);
      const float eb = std::fabs(gk::e2m1_to_f32(static_cast<std::uint8_t>(best)) - x);
      if (e < eb || (e == eb && (c & 1) == 0 && (best & 1) == 1)) best = c;
    }
    const std::uint8_t got = gk::f32_to_e2m1(x);
    bad += gk::e2m1_to_f32(got) != gk::e2m1_to_f32(static_cast<std::uint8_t>(best));
  }
  CHECK(bad == 0);
  CHECK(gk::f32_to_e2m1(NAN) == 0);
}

TEST_CASE("ue4m3: every code decodes to what encoding it gives back", "[narrow]") {
  // Codes 0x78..0x7d (256..416) are never produced: the reference's encoder saturates
  // its top binade to 448, and gk's matches it bit for bit.
  for (int c = 1; c < 0x78; ++c) CHECK(gk::f32_to_ue4m3(gk::ue4m3_to_f32(static_cast<std::uint8_t>(c))) == c);
  CHECK(gk::f32_to_ue4m3(300.0f) == 0x7e);
  CHECK(gk::f32_to_ue4m3(-1.0f) == 0);
}
