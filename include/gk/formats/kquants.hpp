// SPDX-License-Identifier: MIT
// The k-quants q4_K, q5_K, q6_K and their activation format q8_K. A 256-weight
// super-block is cut into sub-blocks; each sub-block has its own scale (and min), and
// those are themselves small integers times one or two f16 super-block scales.
//
// Encoding is gk's own search and minimises the stored error sum imp_i * (x_i - w_i)^2
// itself (imp_i = 1 without importance), in three steps:
//   1. each sub-block gets the best continuous scale (and min): a sweep of starting scales,
//      each refined by alternating "nearest codes" and "weighted least squares for those
//      codes";
//   2. the super-block scale(s) are chosen from a few candidates, each f16-rounded first,
//      and every sub-block picks, among the integer scales either side of its fit (and,
//      for each, the integer mins either side of the min that suits it), the pair whose
//      re-chosen codes give the smallest error;
//   3. the super-block scale(s) are refitted by least squares to the chosen integers,
//      f16-rounded and re-evaluated while the error falls.
// The re-choice of codes against the final, quantised scales is what buys most of the
// error back; the steps are the reusable pieces in namespace kq (kquants_low.hpp has its
// own searches for q2_K and q3_K, tuned to their 16-weight sub-blocks).
// Measured against the reference's encoders (1000 rows of 1024 from each of 13
// distributions, with and without importance): sqrt(error ratio) 0.40-0.99, about
// 1.5 ms per 4096-weight row here against the reference's 0.1-0.4 ms.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gk/formats/float.hpp"
#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace kq {

// ---- 6-bit scales and mins of q4_K / q5_K -------------------------------------------
// Twelve bytes hold eight (scale, min) pairs of 6 bits. Sub-blocks 0-3 keep theirs in the
// low 6 bits of bytes j (scale) and j+4 (min); sub-blocks 4-7 keep their low 4 bits in
// byte j+4 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits
// of bytes j-4 (scale) and j (min).

struct scale_min { int scale, min; };

constexpr scale_min get_scale_min(const std::uint8_t* packed, int j) noexcept {
  if (j < 4) return {packed[j] & 63, packed[j + 4] & 63};
  return {(packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4)};
}

// Writes only the bits of sub-block j, so pairs may be set in any order.
constexpr void set_scale_min(std::uint8_t* packed, int j, int scale, int min) noexcept {
  const auto s = static_cast<unsigned>(scale) & 63u, m = static_cast<unsigned>(min) & 63u;
  if (j < 4) {
    packed[j] = static_cast<std::uint8_t>((packed[j] & 0xc0u) | s);
    packed[j + 4] = static_cast<std::uint8_t>((packed[j + 4] & 0xc0u) | m);
  } else {
    packed[j + 4] = static_cast<std::uint8_t>((s & 0xfu) | ((m & 0xfu) << 4));
    packed[j - 4] = static_cast<std::uint8_t>((packed[j - 4] & 0x3fu) | ((s >> 4) << 6));
    packed[j] = static_cast<std::uint8_t>((packed[j] & 0x3fu) | ((m >> 4) << 6));
  }
}

// ---- small numeric pieces -----------------------------------------------------------

// Nearest integer, ties to even, of v clamped to [lo, hi]. Clamping first keeps the
// float in the range where adding 1.5 * 2^23 leaves the integer in the low mantissa bits,
// which is several times faster than std::nearbyint without SSE4.1 and immune to
// -ffast-math (the sum's bits are read, not subtracted back).
inline int nearest_clamped(float v, int lo, int hi) noexcept {
  v = v < static_cast<float>(lo) ? static_cast<float>(lo) : v;
  v = v > static_cast<float>(hi) ? static_cast<float>(hi) : v;
  const int q = static_cast<int>(std::bit_cast<std::uint32_t>(v + 12582912.0f) & 0x7fffffu) - 0x400000;
  return q < lo ? lo : (q > hi ? hi : q);  // NaN lands anywhere in range; keep it there
}

// f32 -> f16 rounding that never makes an infinity out of a finite scale.
inline float f16_round(float v) noexcept {
  constexpr float f16_max = 65504.0f;
  v = v > f16_max ? f16_max : (v < -f16_max ? -f16_max : v);
  return to_f32(to_f16(v));
}

// Per-weight error weights for one super-block of n values: the importance scaled to a
// mean of 1 (so sums stay well inside float range), or all ones without it. Negative,
// NaN or all-zero importance counts as absent.
inline void error_weights(const float* importance, int n, float* w) noexcept {
  double sum = 0.0;
  if (importance)
    for (int i = 0; i < n; ++i) sum += importance[i] > 0.0f ? importance[i] : 0.0f;
  if (!(sum > 0.0) || !std::isfinite(sum)) {
    std::fill(w, w + n, 1.0f);
    return;
  }
  const float k = static_cast<float>(n / sum);
  for (int i = 0; i < n; ++i) w[i] = importance[i] > 0.0f ? importance[i] * k : 0.0f;
}

// ---- codes for fixed scales: the error they leave ---------------------------------------
// A weight decodes as scale*q - min (the q4_K/q5_K/q2_K form, 0 <= q <= nmax) or as
// scale*q (q6_K/q3_K, lo <= q <= hi), computed in float exactly as the decoders do. The
// nearest code per weight is optimal for fixed scales, so these are the error of the
// scales themselves. L may be null when only the error is wanted.

inline float codes_scale_min(const float* x, const float* w, int n, int nmax, float scale, float min,
                             std::uint8_t* L) noexcept {
  float err = 0.0f;
  if (scale == 0.0f) {
    for (int i = 0; i < n; ++i) {
      const float diff = -min - x[i];
      err += w[i] * diff * diff;
      if (L) L[i] = 0;
    }
    return err;
  }
  const float inv = 1.0f / scale;
  for (int i = 0; i < n; ++i) {
    const int q = nearest_clamped((x[i] + min) * inv, 0, nmax);
    const float diff = scale * static_cast<float>(q) - min - x[i];
    err += w[i] * diff * diff;
    if (L) L[i] = static_cast<std::uint8_t>(q);
  }
  return err;
}

inline float codes_scale(const float* x, const float* w, int n, int lo, int hi, float scale,
                         std::int8_t* L) noexcept {
  float err = 0.0f;
  if (scale == 0.0f) {
    for (int i = 0; i < n; ++i) {
      err += w[i] * x[i] * x[i];
      if (L) L[i] = 0;
    }
    return err;
  }
  const float inv = 1.0f / scale;
  for (int i = 0; i < n; ++i) {
    const int q = nearest_clamped(x[i] * inv, lo, hi);
    const float diff = scale * static_cast<float>(q) - x[i];
    err += w[i] * diff * diff;
    if (L) L[i] = static_cast<std::int8_t>(q);
  }
  return err;
}

// ---- one sub-block, continuous scales -------------------------------------------------

struct scale_min_fit { float scale, min, err; };  // x ~ scale*q - min, scale >= 0, min >= 0
struct scale_fit { float scale, err; };           // x ~ scale*q, scale of either sign

// Best (scale, min) for n weights with codes 0..nmax under error weights w. Starting
// scales sweep range/(nmax-1) .. range/(nmax+1) over [min(x, 0), max(x)], each started
// twice: code 0 on the lowest value, and code nmax on the highest (the error surface has
// several valleys when one value stands far out, and each anchor finds a different one).
// From each start, `passes` rounds of nearest codes then weighted least squares (min kept
// >= 0). Every pair is scored by its true error with codes re-chosen; the best is kept.
inline scale_min_fit search_scale_min(const float* x, const float* w, int n, int nmax, int passes = 3) noexcept {
  float lo = x[0], hi = x[0], sw = 0.0f, swx = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sw += w[i];
    swx += w[i] * x[i];
  }
  if (lo > 0.0f) lo = 0.0f;
  if (!(hi > lo)) return {0.0f, -lo, codes_scale_min(x, w, n, nmax, 0.0f, -lo, nullptr)};
  scale_min_fit best{0.0f, -lo, codes_scale_min(x, w, n, nmax, 0.0f, -lo, nullptr)};
  for (int start = 0; start < 2 * 11; ++start) {
    float scale = (hi - lo) / (static_cast<float>(nmax) + 0.2f * static_cast<float>(start / 2 - 5));
    float min = (start & 1) ? std::max(0.0f, static_cast<float>(nmax) * scale - hi) : -lo;
    for (int pass = 0; pass < passes; ++pass) {
      const float inv = 1.0f / scale;
      float err = 0.0f, sq = 0.0f, sq2 = 0.0f, sqx = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float q = static_cast<float>(nearest_clamped((x[i] + min) * inv, 0, nmax));
        const float diff = scale * q - min - x[i];
        err += w[i] * diff * diff;
        sq += w[i] * q;
        sq2 += w[i] * q * q;
        sqx += w[i] * q * x[i];
      }
      if (err < best.err) best = {scale, min, err};
      if (pass + 1 == passes) break;
      // least squares for these codes: x ~ scale*q + b, b = -min <= 0
      const float det = sw * sq2 - sq * sq;
      float ns = 0.0f, nb = 0.0f;
      if (det > 0.0f) {
        ns = (sw * sqx - swx * sq) / det;
        nb = (sq2 * swx - sq * sqx) / det;
      }
      if (!(det > 0.0f) || nb > 0.0f) {
        nb = 0.0f;
        ns = sq2 > 0.0f ? sqx / sq2 : 0.0f;
      }
      if (!(ns > 0.0f) || !std::isfinite(ns)) break;
      scale = ns;
      min = -nb;
    }
  }
  return best;
}

// Best scale for n weights with signed codes lo..hi (lo < 0 < hi) under error weights w.
// The largest-magnitude weight is aimed at either end of the code range (the ends differ
// when lo = -hi-1, and either may fit better), starting scales sweep a unit either side
// of each end in steps of 0.2, then as above.
inline scale_fit search_scale(const float* x, const float* w, int n, int lo, int hi, int passes = 3) noexcept {
  float amax = 0.0f, xm = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) { amax = std::fabs(x[i]); xm = x[i]; }
  scale_fit best{0.0f, codes_scale(x, w, n, lo, hi, 0.0f, nullptr)};
  if (!(amax > 0.0f)) return best;
  for (const int end : {lo, hi}) {
    const float e = static_cast<float>(end), dir = end < 0 ? -1.0f : 1.0f;
    for (int step = -5; step <= 5; ++step) {
      float scale = xm / (e + dir * 0.2f * static_cast<float>(step));
      for (int pass = 0; pass < passes; ++pass) {
        const float inv = 1.0f / scale;
        float err = 0.0f, sq2 = 0.0f, sqx = 0.0f;
        for (int i = 0; i < n; ++i) {
          const float q = static_cast<float>(nearest_clamped(x[i] * inv, lo, hi));
          const float diff = scale * q - x[i];
          err += w[i] * diff * diff;
          sq2 += w[i] * q * q;
          sqx += w[i] * q * x[i];
        }
        if (err < best.err) best = {scale, err};
        if (pass + 1 == passes || !(sq2 > 0.0f)) break;
        const float ns = sqx / sq2;
        if (ns == 0.0f || !std::isfinite(ns)) break;
        scale = ns;
      }
    }
  }
  return best;
}

// The min (>= 0) that best suits a fixed scale, by one least-squares step from min0:
// codes chosen for (scale, min0), then min = weighted mean of scale*q - x.
inline float best_min(const float* x, const float* w, int n, int nmax, float scale, float min0) noexcept {
  float sw = 0.0f, sr = 0.0f;
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < n; ++i) {
    const float q = scale != 0.0f ? static_cast<float>(nearest_clamped((x[i] + min0) * inv, 0, nmax)) : 0.0f;
    sw += w[i];
    sr += w[i] * (scale * q - x[i]);
  }
  const float min = sw > 0.0f ? sr / sw : min0;
  return min > 0.0f ? min : 0.0f;
}

// ---- a whole super-block -----------------------------------------------------------------

// Affine super-block (q4_K, q5_K, q2_K): n_sub <= 16 sub-blocks of sub_size <= 32 weights,
// weight = (d*ls[j]) * q - (dmin*lm[j]) with 0 <= q <= nmax and 0 <= ls, lm <= smax.
// Fills ls, lm and the codes L (n_sub*sub_size, in weight order); returns d, dmin (both
// exactly representable in f16, both >= 0).
struct affine_scales { gk::f16 d, dmin; };

inline affine_scales fit_affine_superblock(const float* x, const float* w, int n_sub, int sub_size, int nmax,
                                           int smax, std::uint8_t* ls, std::uint8_t* lm, std::uint8_t* L) noexcept {
  float s[16], m[16];
  float s_hi = 0.0f, m_hi = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    const scale_min_fit f = search_scale_min(x + j * sub_size, w + j * sub_size, sub_size, nmax);
    s[j] = f.scale;
    m[j] = f.min;
    s_hi = std::max(s_hi, s[j]);
    m_hi = std::max(m_hi, m[j]);
  }

  // Error of (d, dmin) with each sub-block taking the better of the integer scales and
  // mins either side of its continuous fit. Writes the choice to cls, clm.
  auto evaluate = [&](float d, float dmin, std::uint8_t* cls, std::uint8_t* clm) {
    float total = 0.0f;
    for (int j = 0; j < n_sub; ++j) {
      const float* xj = x + j * sub_size;
      const float* wj = w + j * sub_size;
      const float ts = d > 0.0f ? s[j] / d : 0.0f;
      const int a0 = std::clamp(static_cast<int>(std::floor(std::min(ts, 1e6f))), 0, smax);
      const int a1 = std::min(a0 + 1, smax);
      float best = std::numeric_limits<float>::infinity();
      for (int a = a0; a <= a1; ++a) {
        // the min that suits this integer scale: one least-squares step from the fitted one
        const float tm = dmin > 0.0f ? best_min(xj, wj, sub_size, nmax, d * static_cast<float>(a), m[j]) / dmin : 0.0f;
        const int b0 = std::clamp(static_cast<int>(std::floor(std::min(tm, 1e6f))), 0, smax);
        const int b1 = std::min(b0 + 1, smax);
        for (int b = b0; b <= b1; ++b) {
          const float e = codes_scale_min(xj, wj, sub_size, nmax, d * static_cast<float>(a),
                                          dmin * static_cast<float>(b), nullptr);
          if (e < best) { best = e; cls[j] = static_cast<std::uint8_t>(a); clm[j] = static_cast<std::uint8_t>(b); }
        }
      }
      total += best;
    }
    return total;
  };

  std::uint8_t cls[16], clm[16];
  float best_err = std::numeric_limits<float>::infinity(), best_d = 0.0f, best_dmin = 0.0f;
  auto consider = [&](float d, float dmin) {
    const float e = evaluate(d, dmin, cls, clm);
    if (e < best_err) {
      best_err = e; best_d = d; best_dmin = dmin;
      std::copy(cls, cls + n_sub, ls);
      std::copy(clm, clm + n_sub, lm);
      return true;
    }
    return false;
  };

  // Candidates put the largest continuous scale (min) at or near the top integer. Whole
  // divisors below the top each give their own f16 rounding, which is what decides the
  // error of constant sub-blocks; the reference's single choice gets no second draw.
  const float fs = static_cast<float>(smax);
  const float d_div[] = {fs - 2.0f, fs - 1.0f, fs, fs + 0.5f, fs + 1.0f};
  const float m_div[] = {fs - 1.0f, fs};
  for (const float dd : d_div)
    for (const float dm : m_div) {
      consider(f16_round(s_hi / dd), f16_round(m_hi / dm));
      if (m_hi == 0.0f) break;
    }

  // Least squares for d, dmin with the integers fixed: x ~ d*(ls*q) - dmin*lm.
  for (int iter = 0; iter < 4; ++iter) {
    double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
    std::uint8_t q[32];
    for (int j = 0; j < n_sub; ++j) {
      const float* xj = x + j * sub_size;
      const float* wj = w + j * sub_size;
      codes_scale_min(xj, wj, sub_size, nmax, best_d * ls[j], best_dmin * lm[j], q);
      for (int i = 0; i < sub_size; ++i) {
        const double a = static_cast<double>(ls[j]) * q[i], b = lm[j], wi = wj[i], xi = xj[i];
        saa += wi * a * a; sab += wi * a * b; sbb += wi * b * b;
        sax += wi * a * xi; sbx += wi * b * xi;
      }
    }
    double d = 0, dmin = 0;
    const double det = saa * sbb - sab * sab;
    if (det > 0) {
      d = (sax * sbb - sbx * sab) / det;
      dmin = (sax * sab - sbx * saa) / det;
    }
    if (!(det > 0) || dmin < 0) { dmin = 0; d = saa > 0 ? sax / saa : 0; }
    if (d < 0) { d = 0; dmin = sbb > 0 ? std::max(0.0, -sbx / sbb) : 0; }
    const float nd = f16_round(static_cast<float>(d)), ndmin = f16_round(static_cast<float>(dmin));
    if ((nd == best_d && ndmin == best_dmin) || !consider(nd, ndmin)) break;
  }

  for (int j = 0; j < n_sub; ++j)
    codes_scale_min(x + j * sub_size, w + j * sub_size, sub_size, nmax, best_d * ls[j], best_dmin * lm[j],
                    L + j * sub_size);
  return {to_f16(best_d), to_f16(best_dmin)};
}

// Signed super-block (q6_K, q3_K): n_sub <= 16 sub-blocks of sub_size <= 32 weights,
// weight = (d*sc[j]) * q with lo <= q <= hi and sc_lo <= sc[j] <= sc_hi. Fills sc and the
// codes L; returns d (exactly representable in f16; its sign is free).
inline gk::f16 fit_signed_superblock(const float* x, const float* w, int n_sub, int sub_size, int lo, int hi,
                                     int sc_lo, int sc_hi, std::int8_t* sc, std::int8_t* L) noexcept {
  float s[16], s_big = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    s[j] = search_scale(x + j * sub_size, w + j * sub_size, sub_size, lo, hi).scale;
    if (std::fabs(s[j]) > std::fabs(s_big)) s_big = s[j];
  }

  auto evaluate = [&](float d, std::int8_t* csc) {
    float total = 0.0f;
    for (int j = 0; j < n_sub; ++j) {
      const float t = d != 0.0f ? std::clamp(s[j] / d, -1e6f, 1e6f) : 0.0f;
      const int a0 = std::clamp(static_cast<int>(std::floor(t)), sc_lo, sc_hi);
      const int a1 = std::min(a0 + 1, sc_hi);
      float best = std::numeric_limits<float>::infinity();
      for (int a = a0; a <= a1; ++a) {
        const float e = codes_scale(x + j * sub_size, w + j * sub_size, sub_size, lo, hi, d * static_cast<float>(a),
                                    nullptr);
        if (e < best) { best = e; csc[j] = static_cast<std::int8_t>(a); }
      }
      total += best;
    }
    return total;
  };

  std::int8_t csc[16];
  float best_err = std::numeric_limits<float>::infinity(), best_d = 0.0f;
  auto consider = [&](float d) {
    const float e = evaluate(d, csc);
    if (e < best_err) {
      best_err = e; best_d = d;
      for (int j = 0; j < n_sub; ++j) sc[j] = csc[j];
      return true;
    }
    return false;
  };

  if (s_big == 0.0f) {
    consider(0.0f);
  } else {
    // The largest sub-block scale goes to (or just inside) either end of the scale range.
    const float flo = static_cast<float>(sc_lo), fhi = static_cast<float>(sc_hi);
    for (const float t : {0.0f, 0.5f, 1.0f, 1.5f}) {
      consider(f16_round(s_big / (flo + t)));
      consider(f16_round(s_big / (fhi - t)));
    }
    // Least squares for d with the integers fixed: x ~ d*(sc*q).
    for (int iter = 0; iter < 4; ++iter) {
      double saa = 0, sax = 0;
      std::int8_t q[32];
      for (int j = 0; j < n_sub; ++j) {
        const float* xj = x + j * sub_size;
        const float* wj = w + j * sub_size;
        codes_scale(xj, wj, sub_size, lo, hi, best_d * sc[j], q);
        for (int i = 0; i < sub_size; ++i) {
          const double a = static_cast<double>(sc[j]) * q[i];
          saa += wj[i] * a * a;
          sax += wj[i] * a * xj[i];
        }
      }
      if (!(saa > 0)) break;
      const float nd = f16_round(static_cast<float>(sax / saa));
      if (nd == best_d || !consider(nd)) break;
    }
  }

  for (int j = 0; j < n_sub; ++j)
    codes_scale(x + j * sub_size, w + j * sub_size, sub_size, lo, hi, best_d * sc[j], L + j * sub_size);
  return to_f16(best_d);
}

}  // namespace kq

// q8_K: 256 weights share an f32 scale d; w = d * q with q a signed byte in [-127, 127]
// (never -128: the dots of other formats rely on |q| <= 127). bsums[k] is the sum of the
// 16 codes k*16 .. k*16+15, for the min terms of the weight formats' dots. 292 bytes per
// block, 9.125 bits per weight. The activation format of the k-quant dots.
struct q8_K {
  static constexpr type id = type::q8_K;
  static constexpr int block_size = qk_k;
  struct block { float d; std::int8_t qs[qk_k]; std::int16_t bsums[qk_k / 16]; };
  using dot_type = f32;

  static void decode(const block& b, float* out) {
    for (int j = 0; j < qk_k; ++j) out[j] = b.d * b.qs[j];
  }
  // The largest-magnitude value becomes code -127 exactly (d carries the opposite sign),
  // the reference's rule, so activations encode to the same bytes in gk and ggml.
  static void encode(const float* x, block& b, const float*) {
    float amax = 0.0f, xm = 0.0f;
    for (int j = 0; j < qk_k; ++j)
      if (std::fabs(x[j]) > amax) { amax = std::fabs(x[j]); xm = x[j]; }
    if (!(amax > 0.0f)) {
      std::memset(&b, 0, sizeof b);
      return;
    }
    const float iscale = -127.0f / xm;
    for (int j = 0; j < qk_k; ++j) b.qs[j] = static_cast<std::int8_t>(kq::nearest_clamped(iscale * x[j], -127, 127));
    for (int k = 0; k < qk_k / 16; ++k) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * k + j];
      b.bsums[k] = static_cast<std::int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
  // Weights decoded, times f32 activations, summed in float in index order.
  static float dot(const block& w, const f32::block* a) {
    float sum = 0.0f;
    for (int j = 0; j < qk_k; ++j) sum += (w.d * w.qs[j]) * a[j].v;
    return sum;
  }
};
static_assert(sizeof(q8_K::block) == 292 && offsetof(q8_K::block, qs) == 4 && offsetof(q8_K::block, bsums) == 260);
static_assert(BlockFormat<q8_K>);

namespace kq {

// Decode and dot shared by q4_K and q5_K, which differ only in how a code is stored
// (W::code). Decoding keeps the reference's float order: d*ls and dmin*lm first, then
// (d*ls)*q - dmin*lm, so it matches bit for bit.
template <class W>
void decode_scale_min(const typename W::block& b, float* out) {
  const float d = to_f32(b.d), dmin = to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    const scale_min sm = get_scale_min(b.scales, j);
    const float dl = d * static_cast<float>(sm.scale), ml = dmin * static_cast<float>(sm.min);
    for (int l = 0; l < 32; ++l) out[32 * j + l] = dl * static_cast<float>(W::code(b, 32 * j + l)) - ml;
  }
}

// Per sub-block an integer sum of code * activation times the integer scale; the min term
// from q8_K's 16-weight sums times the integer mins. The two integer totals are scaled
// once each, in float (at most 63 * 31 * 127 * 256, well inside int).
template <class W>
float dot_scale_min(const typename W::block& w, const q8_K::block& a) {
  int sum_q = 0, sum_m = 0;
  for (int j = 0; j < 8; ++j) {
    const scale_min sm = get_scale_min(w.scales, j);
    int s = 0;
    for (int l = 0; l < 32; ++l) s += W::code(w, 32 * j + l) * a.qs[32 * j + l];
    sum_q += sm.scale * s;
    sum_m += sm.min * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return to_f32(w.d) * a.d * static_cast<float>(sum_q) - to_f32(w.dmin) * a.d * static_cast<float>(sum_m);
}

}  // namespace kq

// q4_K: eight sub-blocks of 32 weights, each with a 6-bit scale ls and 6-bit min lm
// (packed in 12 bytes, see kq::get_scale_min) against the f16 super-block scales d and
// dmin; each weight is a 4-bit code q, w = (d*ls) * q - (dmin*lm). Byte qs[32c + l] holds
// weight 64c + l in its low nibble and weight 64c + 32 + l in its high nibble.
// 144 bytes per block, 4.5 bits per weight.
struct q4_K {
  static constexpr type id = type::q4_K;
  static constexpr int block_size = qk_k;
  struct block { gk::f16 d; gk::f16 dmin; std::uint8_t scales[12]; std::uint8_t qs[qk_k / 2]; };
  using dot_type = q8_K;

  // the 4-bit code of weight i (0..255)
  static int code(const block& b, int i) { return (b.qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 0xf; }

  static void decode(const block& b, float* out) { kq::decode_scale_min<q4_K>(b, out); }
  static void encode(const float* x, block& b, const float* importance) {
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    std::uint8_t ls[8], lm[8], L[qk_k];
    const kq::affine_scales sc = kq::fit_affine_superblock(x, w, 8, 32, 15, 63, ls, lm, L);
    b.d = sc.d;
    b.dmin = sc.dmin;
    std::memset(b.scales, 0, sizeof b.scales);
    for (int j = 0; j < 8; ++j) kq::set_scale_min(b.scales, j, ls[j], lm[j]);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] = static_cast<std::uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
  static float dot(const block& w, const q8_K::block* a) { return kq::dot_scale_min<q4_K>(w, *a); }
};
static_assert(sizeof(q4_K::block) == 144 && offsetof(q4_K::block, dmin) == 2 && offsetof(q4_K::block, scales) == 4 &&
              offsetof(q4_K::block, qs) == 16);
static_assert(BlockFormat<q4_K>);

// q5_K: q4_K with a fifth code bit: eight sub-blocks of 32 weights, 6-bit scale ls and
// min lm each (packed as in q4_K), f16 d and dmin; w = (d*ls) * q - (dmin*lm) with q in
// 0..31. The low 4 bits of q sit in qs exactly as in q4_K; the top bit of weight 64c + l
// is bit 2c of qh[l], that of weight 64c + 32 + l is bit 2c+1.
// 176 bytes per block, 5.5 bits per weight.
struct q5_K {
  static constexpr type id = type::q5_K;
  static constexpr int block_size = qk_k;
  struct block {
    gk::f16 d; gk::f16 dmin; std::uint8_t scales[12]; std::uint8_t qh[qk_k / 8]; std::uint8_t qs[qk_k / 2];
  };
  using dot_type = q8_K;

  // the 5-bit code of weight i (0..255)
  static int code(const block& b, int i) {
    const int low = (b.qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 0xf;
    return low | (((b.qh[i % 32] >> (i / 32)) & 1) << 4);
  }

  static void decode(const block& b, float* out) { kq::decode_scale_min<q5_K>(b, out); }
  static void encode(const float* x, block& b, const float* importance) {
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    std::uint8_t ls[8], lm[8], L[qk_k];
    const kq::affine_scales sc = kq::fit_affine_superblock(x, w, 8, 32, 31, 63, ls, lm, L);
    b.d = sc.d;
    b.dmin = sc.dmin;
    std::memset(b.scales, 0, sizeof b.scales);
    for (int j = 0; j < 8; ++j) kq::set_scale_min(b.scales, j, ls[j], lm[j]);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        b.qs[32 * c + l] = static_cast<std::uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
        b.qh[l] |= static_cast<std::uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
  static float dot(const block& w, const q8_K::block* a) { return kq::dot_scale_min<q5_K>(w, *a); }
};
static_assert(sizeof(q5_K::block) == 176 && offsetof(q5_K::block, dmin) == 2 && offsetof(q5_K::block, scales) == 4 &&
              offsetof(q5_K::block, qh) == 16 && offsetof(q5_K::block, qs) == 48);
static_assert(BlockFormat<q5_K>);

// q6_K: sixteen sub-blocks of 16 weights, each with a signed 8-bit scale sc against the
// f16 super-block scale d; each weight is a 6-bit code u, w = (d*sc) * (u - 32). In each
// 128-weight half h, weight 128h + 32k + l (k = 0..3, l = 0..31) has its low 4 bits in
// ql[64h + l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top 2 bits at
// bit 2k of qh[32h + l]. 210 bytes per block, 6.5625 bits per weight.
struct q6_K {
  static constexpr type id = type::q6_K;
  static constexpr int block_size = qk_k;
  struct block { std::uint8_t ql[qk_k / 2]; std::uint8_t qh[qk_k / 4]; std::int8_t scales[qk_k / 16]; gk::f16 d; };
  using dot_type = q8_K;

  // the signed code u - 32 of weight i (0..255)
  static int code(const block& b, int i) {
    const int h = i / 128, k = (i / 32) & 3, l = i % 32;
    const int low = (b.ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xf;
    const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
    return (low | (high << 4)) - 32;
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(b.scales[j]);
      for (int l = 0; l < 16; ++l) out[16 * j + l] = dl * static_cast<float>(code(b, 16 * j + l));
    }
  }
  static void encode(const float* x, block& b, const float* importance) {
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    std::int8_t L[qk_k];
    b.d = kq::fit_signed_superblock(x, w, 16, 16, -32, 31, -128, 127, b.scales, L);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int i = 0; i < qk_k; ++i) {
      const int u = L[i] + 32, h = i / 128, k = (i / 32) & 3, l = i % 32;
      std::uint8_t& lo = b.ql[64 * h + l + 32 * (k & 1)];
      if (k < 2) lo = static_cast<std::uint8_t>(u & 0xf);
      else lo = static_cast<std::uint8_t>(lo | ((u & 0xf) << 4));
      b.qh[32 * h + l] = static_cast<std::uint8_t>(b.qh[32 * h + l] | ((u >> 4) << (2 * k)));
    }
  }
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += code(w, 16 * j + l) * a->qs[16 * j + l];
      sum += w.scales[j] * s;
    }
    return to_f32(w.d) * a->d * static_cast<float>(sum);
  }
};
static_assert(sizeof(q6_K::block) == 210 && offsetof(q6_K::block, qh) == 128 && offsetof(q6_K::block, scales) == 192 &&
              offsetof(q6_K::block, d) == 208);
static_assert(BlockFormat<q6_K>);


}  // namespace gk::formats

GK_EXACT_FP_END
