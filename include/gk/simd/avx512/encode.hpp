// SPDX-License-Identifier: MIT
// AVX-512 activation encoders (q8_0, q8_1, q8_K), byte for byte the scalar definitions'.
// The same steps as the AVX2 ones (avx2/encode.hpp says how each matches the definition)
// in 16-lane vectors: vmaxps(|x|, m) ignores a NaN |x| as std::max does, vcvtps2dq gives
// the nearest (current mode) or 0x80000000 for NaN/Inf as nearbyint + the scalar cast do,
// and vpmovdb keeps each int32's low byte, as the float -> int8 cast does.
// Compiles to nothing unless the translation unit targets the avx512 tag's feature set.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"
#include "gk/simd/target.hpp"

GK_EXACT_FP_BEGIN

namespace gk::simd::avx512_enc {

// The all-lanes masked forms throughout: the plain intrinsics pass _mm512_undefined_*() as
// the source, which GCC 12 reports as maybe-uninitialized (as in avx512/math.hpp).
constexpr __mmask16 all = 0xffff;

inline __m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }
// vmaxps / vminps: a > b ? a : b and a < b ? a : b, b when either is NaN
inline __m512 max_ps(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, all, a, b); }
inline __m512 min_ps(__m512 a, __m512 b) { return _mm512_mask_min_ps(a, all, a, b); }
inline __m512i cvt_nearest(__m512 v) { return _mm512_maskz_cvtps_epi32(all, v); }  // current rounding mode
inline __m128i low_bytes(__m512i q) { return _mm512_maskz_cvtepi32_epi8(all, q); }  // vpmovdb: truncating
inline __m512i sext_low_byte(__m512i q) { return _mm512_maskz_srai_epi32(all, _mm512_maskz_slli_epi32(all, q, 24), 24); }

// the largest of the 16 lanes; no lane is NaN
inline float hmax(__m512 m) {
  const __m256 h = _mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xff, m, 0), _mm512_maskz_extractf32x8_ps(0xff, m, 1));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ps(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_maskz_extracti32x8_epi32(0xff, v, 0), _mm512_maskz_extracti32x8_epi32(0xff, v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// one q8_0/q8_1 block: the codes written to qs, their sum returned, d set
inline int q8_block(const float* x, std::int8_t* qs, float& d_out) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const __m512 m = max_ps(abs_ps(v1), max_ps(abs_ps(v0), _mm512_setzero_ps()));  // NaN |x| -> m
  const float amax = hmax(m);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m512 idv = _mm512_set1_ps(id);
  const __m512i q0 = cvt_nearest(_mm512_mul_ps(v0, idv)), q1 = cvt_nearest(_mm512_mul_ps(v1, idv));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), low_bytes(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), low_bytes(q1));
  d_out = d;
  // the codes as stored (low bytes, sign-extended) summed
  return hsum_i32(_mm512_add_epi32(sext_low_byte(q0), sext_low_byte(q1)));
}

}  // namespace gk::simd::avx512_enc

namespace gk {

template <>
struct encode_kernel<formats::q8_0, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static void row(const float* x, formats::q8_0::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      (void)simd::avx512_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
    }
  }
};

template <>
struct encode_kernel<formats::q8_1, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static void row(const float* x, formats::q8_1::block* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n / 32; ++i) {
      float d;
      const int sum = simd::avx512_enc::q8_block(x + 32 * i, out[i].qs, d);
      out[i].d = to_f16(d);
      out[i].s = to_f16(d * static_cast<float>(sum));
    }
  }
};

template <>
struct encode_kernel<formats::q8_K, simd::avx512> {
  static constexpr std::string_view served_by = simd::avx512::name;
  static void row(const float* x, formats::q8_K::block* out, std::int64_t n) {
    using namespace simd::avx512_enc;
    constexpr int qk = gk::qk_k;
    for (std::int64_t ib = 0; ib < n / qk; ++ib) {
      const float* xb = x + ib * qk;
      formats::q8_K::block& b = out[ib];
      __m512 m = _mm512_setzero_ps();
      for (int i = 0; i < qk; i += 16) m = max_ps(abs_ps(_mm512_loadu_ps(xb + i)), m);
      const float amax = hmax(m);
      if (!(amax > 0.0f)) {
        std::memset(&b, 0, sizeof b);
        continue;
      }
      // the first x whose magnitude is amax (amax is finite or +Inf, never NaN)
      const __m512 av = _mm512_set1_ps(amax);
      int jm = 0;
      for (int i = 0; i < qk; i += 16) {
        const __mmask16 k = _mm512_cmp_ps_mask(abs_ps(_mm512_loadu_ps(xb + i)), av, _CMP_EQ_OQ);
        if (k) {
          jm = i + __builtin_ctz(static_cast<unsigned>(k));
          break;
        }
      }
      const float xm = xb[jm];
      const float iscale = -127.0f / xm;
      const __m512 is = _mm512_set1_ps(iscale), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
      const __m512 magic = _mm512_set1_ps(12582912.0f);
      const __m512i mant = _mm512_set1_epi32(0x7fffff), off = _mm512_set1_epi32(0x400000);
      const __m512i ilo = _mm512_set1_epi32(-127), ihi = _mm512_set1_epi32(127);
      for (int i = 0; i < qk; i += 16) {
        __m512 v = _mm512_mul_ps(is, _mm512_loadu_ps(xb + i));
        v = max_ps(lo, v);  // v < lo ? lo : v (NaN stays)
        v = min_ps(hi, v);  // v > hi ? hi : v (NaN stays)
        __m512i c = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(_mm512_add_ps(v, magic)), mant), off);
        c = _mm512_maskz_min_epi32(all, _mm512_maskz_max_epi32(all, c, ilo), ihi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + i), low_bytes(c));
        b.bsums[i / 16] = static_cast<std::int16_t>(hsum_i32(c));
      }
      b.d = 1.0f / iscale;
    }
  }
};

}  // namespace gk

GK_EXACT_FP_END

#endif
