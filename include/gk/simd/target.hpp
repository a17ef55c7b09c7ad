// SPDX-License-Identifier: MIT
// SIMD targets as empty tag types: template arguments that carry facts about an ISA level
// and the target to fall back to. A kernel is specialised per (format, target) only where
// that target is faster; anything unspecialised forwards to T::fallback, so a missing
// avx512 kernel means the avx2 one, never a silent drop to scalar.
//
// simd::native is the best target this translation unit is compiled for (from the
// compiler's own macros); available() says whether the running CPU can execute it,
// which is a separate question from whether it was compiled in.
#pragma once

#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gk::simd {

struct scalar {
  static constexpr std::string_view name = "scalar";
  static constexpr int vector_bytes = 4, registers = 16;
  using fallback = void;
  static bool available() noexcept { return true; }
};

// x86-64-v3: AVX2 + FMA + F16C (every x86 CPU since 2013-2015).
struct avx2 : scalar {
  static constexpr std::string_view name = "avx2";
  static constexpr int vector_bytes = 32, registers = 16;
  using fallback = scalar;
  static bool available() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    // F16C is CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c")
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
    return false;
#endif
  }
};

// AVX-512 F/BW/VL/DQ plus VNNI (Ice Lake, Zen 4 and later).
struct avx512 : avx2 {
  static constexpr std::string_view name = "avx512";
  static constexpr int vector_bytes = 64, registers = 32;
  using fallback = avx2;
  static bool available() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return avx2::available() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
  }
};

// AArch64 Advanced SIMD (every ARMv8-A core).
struct neon : scalar {
  static constexpr std::string_view name = "neon";
  static constexpr int vector_bytes = 16, registers = 32;
  using fallback = scalar;
  static bool available() noexcept {
#if defined(__aarch64__)
    return true;
#else
    return false;
#endif
  }
};

// Whether the running CPU is Intel's (CPUID leaf 0 reads "GenuineIntel"). Not a feature:
// a few kernels whose two bit-identical forms measured in opposite orders on Intel and AMD
// cores choose by it (cpu/matmul.hpp, tile_decodes).
inline bool cpu_is_intel() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
  }();
  return intel;
#else
  return false;
#endif
}

template <class T>
concept Target = requires {
  { T::name } -> std::convertible_to<std::string_view>;
  { T::vector_bytes } -> std::convertible_to<int>;
  typename T::fallback;
  { T::available() } -> std::same_as<bool>;
};

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
using native = avx512;
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
using native = avx2;
#elif defined(__aarch64__) && defined(__ARM_NEON)
using native = neon;
#else
using native = scalar;
#endif

static_assert(Target<scalar> && Target<avx2> && Target<avx512> && Target<neon>);

}  // namespace gk::simd
