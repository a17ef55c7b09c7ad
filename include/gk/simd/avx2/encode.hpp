// SPDX-License-Identifier: MIT
// AVX2 activation encoders (q8_0, q8_1, q8_K), byte for byte the scalar definitions'
// (see simd/encode.hpp for the rules). How each step matches:
//   - max|x|: vmaxps(|x|, m) returns m when |x| is NaN, as std::max(amax, |x|) keeps amax;
//     the maximum of non-NaN values does not depend on the order it is taken in.
//   - q8_0/q8_1 codes: vcvtps2dq rounds in the current (MXCSR) mode, as nearbyint does,
//     and gives 0x80000000 for NaN, Inf and out-of-range values, as the scalar path's
//     nearbyint + cvttss2si does; the code is then that int32's low byte (shift left and
//     arithmetic right by 24, then saturating packs that cannot saturate), as the scalar
//     float -> int8 cast keeps it. Only the NaN/Inf cases (an Inf in the block, or
//     max|x| so small that 1 / d overflows) reach that path; they give code 0.
//   - q8_K: nearest_clamped's two selects are vmaxps(lo, v) and vminps(hi, v), which
//     return v when v is NaN, as the ternaries do; then the same magic add, mantissa mask
//     and integer clamp. The largest magnitude's first index is found by comparing every
//     |x| with the maximum (the scalar strict > keeps the first of equals).
//   - d, 1 / d, d * sum, 1 / iscale and the f16 conversions are the scalar expressions.
// Compiles to nothing unless the translation unit targets AVX2 + FMA + F16C.
#pragma once

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx2_enc {

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

// the largest of the 8 lanes; no lane is NaN
inline float hmax(__m256 m) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ps(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// int32 lanes -> their low bytes sign-extended (the C++ int -> int8 conversion)
inline __m256i low_byte(__m256i q) { return _mm256_srai_epi32(_mm256_slli_epi32(q, 24), 24); }

// four vectors of int32 in [-128, 127] -> 32 bytes in lane order
inline __m256i pack4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// one q8_0/q8_1 block: the codes written to qs, their sum returned, d set
inline int q8_block(const float* x, std::int8_t* qs, float& d_out) {
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(abs_ps(v[i]), m);  // NaN |x| -> m, as std::max(amax, |x|)
  }
  const float amax = hmax(m);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 idv = _mm256_set1_ps(id);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) q[i] = low_byte(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], idv)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack4(q[0], q[1], q[2], q[3]));
  d_out = d;
  return hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
}

}  // namespace gk::simd::avx2_enc

namespace gk {

template <>
struct encode_kernel<formats::q8_0, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static void row(const float* x, formats::q8_0::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      (void)simd::avx2_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
    }
  }
};

template <>
struct encode_kernel<formats::q8_1, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static void row(const float* x, formats::q8_1::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      const int sum = simd::avx2_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
      out[i].s = to_f16(d * static_cast<float>(sum));
    }
  }
};

template <>
struct encode_kernel<formats::q8_K, simd::avx2> {
  static constexpr std::string_view served_by = simd::avx2::name;
  static void row(const float* x, formats::q8_K::block* out, std::int64_t n) {
    using namespace simd::avx2_enc;
    constexpr int qk = gk::qk_k;
    for (std::int64_t ib = 0; ib < n / qk; ++ib) {
      const float* xb = x + ib * qk;
      formats::q8_K::block& b = out[ib];
      __m256 m = _mm256_setzero_ps();
      for (int i = 0; i < qk; i += 8) m = _mm256_max_ps(abs_ps(_mm256_loadu_ps(xb + i)), m);
      const float amax = hmax(m);
      if (!(amax > 0.0f)) {
        std::memset(&b, 0, sizeof b);
        continue;
      }
      // the first x whose magnitude is amax (amax is finite or +Inf, never NaN)
      const __m256 av = _mm256_set1_ps(amax);
      int jm = 0;
      for (int i = 0; i < qk; i += 8) {
        const int mask = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(xb + i)), av, _CMP_EQ_OQ));
        if (mask) {
          jm = i + __builtin_ctz(static_cast<unsigned>(mask));
          break;
        }
      }
      const float xm = xb[jm];
      const float iscale = -127.0f / xm;
      const __m256 is = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
      const __m256 magic = _mm256_set1_ps(12582912.0f);
      const __m256i mant = _mm256_set1_epi32(0x7fffff), off = _mm256_set1_epi32(0x400000);
      const __m256i ilo = _mm256_set1_epi32(-127), ihi = _mm256_set1_epi32(127);
      for (int i = 0; i < qk; i += 32) {
        __m256i q[4];
        for (int k = 0; k < 4; ++k) {
          __m256 v = _mm256_mul_ps(is, _mm256_loadu_ps(xb + i + 8 * k));
          v = _mm256_max_ps(lo, v);  // v < lo ? lo : v (NaN stays)
          v = _mm256_min_ps(hi, v);  // v > hi ? hi : v (NaN stays)
          __m256i c = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(_mm256_add_ps(v, magic)), mant), off);
          q[k] = _mm256_min_epi32(_mm256_max_epi32(c, ilo), ihi);
        }
        const __m256i bytes = pack4(q[0], q[1], q[2], q[3]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + i), bytes);
        // 16-code sums: sad of (code + 128) over 8 bytes per 64-bit lane, less 8 * 128
        const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(bytes, _mm256_set1_epi8(static_cast<char>(0x80))),
                                            _mm256_setzero_si256());
        alignas(32) std::int64_t s[4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(s), sad);
        b.bsums[i / 16] = static_cast<std::int16_t>(s[0] + s[1] - 2048);
        b.bsums[i / 16 + 1] = static_cast<std::int16_t>(s[2] + s[3] - 2048);
      }
      b.d = 1.0f / iscale;
    }
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
