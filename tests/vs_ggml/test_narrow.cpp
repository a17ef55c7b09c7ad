// SPDX-License-Identifier: MIT
// Narrow floats bit for bit against the reference: every f16/bf16 pattern decoded, f32
// encoded over a sweep that covers every exponent, every rounding tie, subnormals, NaN
// and the infinities; every e8m0 and ue4m3 code; the e2m1 value table.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>

#define GGML_COMMON_DECL_CPP
#define GGML_COMMON_IMPL_CPP
#include "ggml-common.h"
#include "ggml-impl.h"
#include "ggml.h"
#include "gk/core/narrow.hpp"

namespace {

bool same(float a, float b) {
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// The f32 patterns the encoders are checked on: for every sign and exponent, every
// combination of the low 14 mantissa bits (all rounding positions and ties for f16 and
// bf16) under 8 settings of the high bits; plus every 251st pattern of the whole range.
template <class F>
std::int64_t sweep_f32(F&& visit) {
  std::int64_t n = 0;
  const std::uint32_t highs[8] = {0, 1, 2, 0x55, 0xaa, 0x100, 0x1fe, 0x1ff};
  for (std::uint32_t se = 0; se < 512; ++se)
    for (std::uint32_t h : highs)
      for (std::uint32_t lo = 0; lo < (1u << 14); ++lo, ++n) visit((se << 23) | (h << 14) | lo);
  for (std::uint64_t u = 0; u < (1ull << 32); u += 251, ++n) visit(static_cast<std::uint32_t>(u));
  return n;
}

// Mismatches between a decoder of 16-bit patterns and the reference's.
std::int64_t f16_decode_mismatches(const std::function<float(std::uint16_t)>& dec) {
  std::int64_t bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) bad += !same(dec(static_cast<std::uint16_t>(h)), ggml_fp16_to_fp32(static_cast<ggml_fp16_t>(h)));
  return bad;
}

std::int64_t e2m1_table_mismatches(const std::function<float(std::uint8_t)>& dec) {
  std::int64_t bad = 0;
  for (int c = 0; c < 16; ++c) bad += !same(dec(static_cast<std::uint8_t>(c)), 0.5f * kvalues_mxfp4[c]);
  return bad;
}

}  // namespace

TEST_CASE("f16: all 65536 patterns decode as the reference decodes them", "[narrow][f16]") {
  CHECK(f16_decode_mismatches([](std::uint16_t h) { return gk::f16_to_f32(h); }) == 0);
}

TEST_CASE("f16: f32 encodes as the reference encodes it (RNE, NaN, inf, subnormals)", "[narrow][f16]") {
  std::int64_t bad = 0;
  std::uint32_t first = 0;
  const auto n = sweep_f32([&](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    if (gk::f32_to_f16(f) != ggml_fp32_to_fp16(f) && bad++ == 0) first = u;
  });
  INFO("checked " << n << " patterns; first mismatch at f32 bits 0x" << std::hex << first);
  CHECK(bad == 0);
}

TEST_CASE("bf16: all patterns decode and f32 encodes as the reference does", "[narrow][bf16]") {
  std::int64_t bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    ggml_bf16_t b;
    b.bits = static_cast<std::uint16_t>(h);
    bad += !same(gk::bf16_to_f32(static_cast<std::uint16_t>(h)), ggml_bf16_to_fp32(b));
  }
  CHECK(bad == 0);
  std::uint32_t first = 0;
  sweep_f32([&](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    if (gk::f32_to_bf16(f) != ggml_fp32_to_bf16(f).bits && bad++ == 0) first = u;
  });
  INFO("first mismatch at f32 bits 0x" << std::hex << first);
  CHECK(bad == 0);
}

TEST_CASE("e8m0: all 256 codes decode as the reference decodes them (and the half scale)", "[narrow][e8m0]") {
  int bad = 0;
  for (int c = 0; c < 256; ++c) {
    bad += !same(gk::e8m0_to_f32(static_cast<std::uint8_t>(c)), ggml_e8m0_to_fp32(static_cast<std::uint8_t>(c)));
    bad += !same(gk::e8m0_to_f32_half(static_cast<std::uint8_t>(c)), ggml_e8m0_to_fp32_half(static_cast<std::uint8_t>(c)));
  }
  CHECK(bad == 0);
}

TEST_CASE("ue4m3: all 256 codes decode, and f32 encodes, as the reference does", "[narrow][ue4m3]") {
  int bad = 0;
  for (int c = 0; c < 256; ++c)  // the reference returns half the value (nvfp4 convention)
    bad += !same(0.5f * gk::ue4m3_to_f32(static_cast<std::uint8_t>(c)), ggml_ue4m3_to_fp32(static_cast<std::uint8_t>(c)));
  CHECK(bad == 0);
  std::int64_t enc_bad = 0, n = 0;
  std::uint32_t first = 0;
  auto check = [&](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    ++n;
    if (gk::f32_to_ue4m3(f) != ggml_fp32_to_ue4m3(f) && enc_bad++ == 0) first = u;
  };
  // every pattern from 2^-14 to 2^10 (all codes, ties and saturation), then the rest sparsely
  for (std::uint32_t u = 0x38800000u; u < 0x44800000u; u += 3) check(u);
  sweep_f32(check);
  INFO("checked " << n << " patterns; first mismatch at f32 bits 0x" << std::hex << first);
  CHECK(enc_bad == 0);
}

TEST_CASE("e2m1: the 16 codes equal the reference's fp4 value table", "[narrow][e2m1]") {
  CHECK(e2m1_table_mismatches([](std::uint8_t c) { return gk::e2m1_to_f32(c); }) == 0);
}

TEST_CASE("planted: a corrupted table entry and a corrupted decoder are caught", "[narrow][control]") {
  // one e2m1 entry off (code 5 reads as 2.5 instead of 3)
  CHECK(e2m1_table_mismatches([](std::uint8_t c) { return c == 5 ? 2.5f : gk::e2m1_to_f32(c); }) == 1);
  // an f16 decoder that flushes subnormals to zero
  CHECK(f16_decode_mismatches([](std::uint16_t h) {
          return (h & 0x7c00u) == 0 ? gk::f32_from_bits((h & 0x8000u) << 16) : gk::f16_to_f32(h);
        }) == 2 * 1023);
}
