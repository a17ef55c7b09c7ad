// SPDX-License-Identifier: MIT
// Narrow floats as constexpr bit conversions: f16, bf16, e8m0, ue4m3, e2m1.
// Each is a tag-free function pair over the raw bits, written on integers only so it is
// constexpr, identical on every compiler and target, and checkable exhaustively:
// decoding every code and encoding every float pattern is what the tests do.
//
// Rounding: f16, bf16 and e2m1 round to nearest, ties to even. NaN encodes to the quiet
// NaN of the format with the sign kept (f16: 0x7e00, bf16: the top bits with the quiet bit
// forced), as GGUF writers do; overflow goes to infinity (f16, bf16) or saturates to the
// largest finite code (ue4m3, e2m1, which have no infinity).
// ue4m3 (nvfp4's block scale) rounds half-up on the first dropped bit, because that is
// how the scales in published nvfp4 files were produced; it is the one exception.
#pragma once

#include <bit>
#include <cstdint>

namespace gk {

// A 16-bit IEEE half, stored as its bits. Layout-identical to GGUF's f16.
struct f16 { std::uint16_t bits; };
// bfloat16: the top half of an f32. Layout-identical to GGUF's bf16.
struct bf16 { std::uint16_t bits; };

constexpr std::uint32_t f32_bits(float f) noexcept { return std::bit_cast<std::uint32_t>(f); }
constexpr float f32_from_bits(std::uint32_t u) noexcept { return std::bit_cast<float>(u); }

// ---- f16 ------------------------------------------------------------------------------

constexpr float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  if (exp == 0x1f)  // inf, or NaN made quiet (payload kept), as hardware converts it
    return f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return f32_from_bits(sign);
  // subnormal: normalise the mantissa
  int e = 113;
  while (!(man & 0x400u)) { man <<= 1; --e; }
  return f32_from_bits(sign | (static_cast<std::uint32_t>(e) << 23) | ((man & 0x3ffu) << 13));
}

constexpr std::uint16_t f32_to_f16(float f) noexcept {
  const std::uint32_t x = f32_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;        // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;       // >= 65520 rounds to infinity
  if (a >= 0x38800000u) {                            // normal half (>= 2^-14)
    const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return sign | static_cast<std::uint16_t>((r - 0x38000000u) >> 13);
  }
  if (a <= 0x33000000u) return sign;                 // <= 2^-25: ties to even give zero
  const std::uint32_t e = a >> 23;                   // subnormal half: value * 2^24, RNE
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - e;               // 14 .. 24
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | static_cast<std::uint16_t>(q);
}

constexpr float to_f32(f16 h) noexcept { return f16_to_f32(h.bits); }
constexpr f16 to_f16(float f) noexcept { return f16{f32_to_f16(f)}; }

// ---- bf16 -----------------------------------------------------------------------------

constexpr float bf16_to_f32(std::uint16_t h) noexcept { return f32_from_bits(static_cast<std::uint32_t>(h) << 16); }

constexpr std::uint16_t f32_to_bf16(float f) noexcept {
  const std::uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float to_f32(bf16 h) noexcept { return bf16_to_f32(h.bits); }
constexpr bf16 to_bf16(float f) noexcept { return bf16{f32_to_bf16(f)}; }

// ---- e8m0: a power of two, 2^(code-127) ----------------------------------------------
// Code 0 is 2^-127 (a float subnormal); code 255 decodes to +inf, as the reference's
// decoder does (the MX specification's NaN is never written by encoders).

constexpr float e8m0_to_f32(std::uint8_t e) noexcept {
  return f32_from_bits(e == 0 ? 0x00400000u : static_cast<std::uint32_t>(e) << 23);
}
// Half of e8m0_to_f32, exactly (mxfp4 stores its values doubled, see formats/fp4.hpp).
constexpr float e8m0_to_f32_half(std::uint8_t e) noexcept {
  return f32_from_bits(e < 2 ? (0x00200000u << e) : static_cast<std::uint32_t>(e - 1) << 23);
}
// The exponent of x as an e8m0 code: floor(log2|x|) + 127, clamped to [0, 254]; 0 for
// zero and NaN. This is the scale rule of the OCP MX specification.
constexpr std::uint8_t e8m0_floor_log2(float x) noexcept {
  const std::uint32_t a = f32_bits(x) & 0x7fffffffu;
  if (a == 0 || a > 0x7f800000u) return 0;
  int e = static_cast<int>(a >> 23);
  if (e == 0) {  // float subnormal
    std::uint32_t m = a;
    e = 1;
    while (!(m & 0x800000u)) { m <<= 1; --e; }
  }
  return static_cast<std::uint8_t>(e < 0 ? 0 : (e > 254 ? 254 : e));
}

// ---- ue4m3: unsigned e4m3 (4 exponent bits, bias 7, 3 mantissa bits) -----------------
// Only the low 7 bits carry the value (bit 7 is ignored, as the reference decodes it);
// 0x00 and 0x7f (E4M3's NaN) decode to 0. Largest finite value 448 (0x7e).

constexpr float ue4m3_to_f32(std::uint8_t x) noexcept {
  if (x == 0 || x == 0x7f) return 0.0f;
  const std::uint32_t exp = (x >> 3) & 0xfu, man = x & 0x7u;
  if (exp == 0) return static_cast<float>(man) * f32_from_bits(0x3b000000u);  // man * 2^-9
  return f32_from_bits(((exp + 120) << 23) | (man << 20));
}

constexpr std::uint8_t f32_to_ue4m3(float x) noexcept {
  if (!(x > 0.0f)) return 0;             // zero, negatives and NaN
  if (x >= 448.0f) return 0x7e;          // saturate
  const std::uint32_t b = f32_bits(x);
  const int e = static_cast<int>(b >> 23) - 127 + 7;
  if (e <= 0) {                          // subnormal code: round(x * 2^9), half up, max 7
    const float s = x * 512.0f + 0.5f;
    const int m = s >= 8.0f ? 7 : static_cast<int>(s);
    return static_cast<std::uint8_t>(m);
  }
  int man = static_cast<int>((b >> 20) & 7u) + static_cast<int>((b >> 19) & 1u);
  int ex = e;
  if (man > 7) { man = 0; ++ex; }
  if (ex >= 15) return 0x7e;
  return static_cast<std::uint8_t>((ex << 3) | man);
}

// ---- e2m1: fp4 (1 sign, 2 exponent, 1 mantissa) --------------------------------------
// Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign. No inf or NaN: encoding
// saturates at ±6 and sends NaN to +0. Code 8 (negative zero) decodes to +0, as GGUF
// readers decode it: a block of -0 codes is a block of +0.0f.

constexpr float e2m1_to_f32(std::uint8_t c) noexcept {
  constexpr float v[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                           0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return v[c & 15u];
}

constexpr std::uint8_t f32_to_e2m1(float x) noexcept {
  if (x != x) return 0;
  const std::uint8_t sign = (f32_bits(x) >> 28) & 8u;
  const float a = x < 0 ? -x : x;
  // Midpoints between neighbouring magnitudes; at a midpoint the even code wins
  // (codes 0, 2, 4, 6 have mantissa bit 0).
  constexpr float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  std::uint8_t c = 0;
  while (c < 7 && (a > mid[c] || (a == mid[c] && (c & 1u)))) ++c;
  return sign | c;
}

}  // namespace gk
