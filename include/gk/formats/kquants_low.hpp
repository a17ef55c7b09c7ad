// SPDX-License-Identifier: MIT
// The low-bit k-quants, q2_K and q3_K: 256 weights in 16 sub-blocks of 16, each sub-block
// with its own small integer scale (q2_K also a min) that multiplies an f16 super-block
// scale. Dots pair them with q8_K activations.
//
// Encoding is gk's own search for the least weighted squared error sum imp_i*(x_i - w_i)^2
// (imp = 1 without importance). The coarse integer sub-block scales (4 bits in q2_K) cost
// more error than the 2- or 3-bit codes, so most of the work goes into choosing them:
//   1. per sub-block, the best real scale (q2_K: and min) with codes by rounding, from a
//      sweep of starting scales each refined by least squares on its codes. The error has
//      two families of local optima (which end of the range the extreme code takes), and
//      the best of each is kept;
//   2. candidate f16 super-block scales, ranked by how well integer multiples of them meet
//      the sub-block targets, each miss weighted by how fast that sub-block's error grows;
//   3. for the best few, every sub-block tries the integer scales (and mins) near either of
//      its two targets, re-chooses its codes for each and keeps the least error; then the
//      super-block scales are refitted by least squares to those integers and codes,
//      rounded to f16 and the choice repeated while the error falls.
// Keeping the runner-up family in step 3 is worth 2-3% rms error on q2_K. The search needs
// no row statistics, so both formats encode block by block.
// Measured against the reference's encoders (1000 rows of 1024 from each of 10
// distributions, with and without importance): sqrt(error ratio) 0.29-0.996; about 2 ms
// (q2_K) and 1.5 ms (q3_K) per 4096-weight row here, the reference's 0.02-0.5 ms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace kq_low {

inline constexpr int sub = 16;             // weights per sub-block
inline constexpr int n_sub = qk_k / sub;   // sub-blocks per super-block
inline constexpr float f16_max = 65504.0f;

// Round v to the nearest integer in [lo, hi]. Clamping first keeps the cast in range (a
// NaN, from 0 * inf when a scale underflows, goes to lo), and truncating the shifted,
// non-negative value rounds half up: a tie is rare and either neighbour is as good.
inline int round_clamped(float v, int lo, int hi) {
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  v = v > flo ? v : flo;
  v = v < fhi ? v : fhi;
  return static_cast<int>(v - flo + 0.5f) + lo;
}

// The value an f16 field will hold, clamped so that finite inputs never store infinity.
inline float to_f16_value(float v) {
  return to_f32(to_f16(std::min(std::max(v, -f16_max), f16_max)));
}

// The weights of the error the search minimises: the importance, or 1 without it. A tiny
// floor (1e-6 of the mean) keeps a sub-block of zero importance well defined, and a block
// with no positive importance at all is weighted uniformly.
inline void error_weights(const float* importance, float* w) {
  double sum = 0;
  if (importance)
    for (int i = 0; i < qk_k; ++i) sum += importance[i] > 0 ? importance[i] : 0.0f;
  if (!(sum > 0)) {
    std::fill(w, w + qk_k, 1.0f);
    return;
  }
  const float floor = static_cast<float>(1e-6 * sum / qk_k);
  for (int i = 0; i < qk_k; ++i) w[i] = (importance[i] > 0 ? importance[i] : 0.0f) + floor;
}

// Whether a fit with error e and scale a beats the best so far. Errors within tol are a
// tie, and the smaller scale wins it: an outlier alone in a sub-block is exact at several
// codes (the rest rounding to 0 either way), and the smallest of those scales lets the
// super-block scale, and so every other sub-block, be finer.
inline bool better_fit(double e, float a, double best_e, float best_a, double tol) {
  return e < best_e - tol || (e <= best_e + tol && std::fabs(a) < std::fabs(best_a));
}

// 2-bit codes, shared by q2_K (whole code) and q3_K (low two bits): weight i of a block
// lives in byte 32*(i/128) + i%32, at bit 2*((i/32)%4).
inline int code2(const std::uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

inline void pack2(const std::uint8_t* codes, std::uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t* c = codes + 128 * h + l;
      qs[32 * h + l] = static_cast<std::uint8_t>(c[0] | (c[32] << 2) | (c[64] << 4) | (c[96] << 6));
    }
}

// Weighted least squares for x ~ a*q + b over one sub-block with fixed codes q. Returns the
// error; a is kept >= 0 (a negative a would reverse the code order). With every code equal,
// a = 0 and b is the weighted mean.
struct affine { float a, b; double err; };

inline affine fit_affine_codes(const float* x, const float* w, const std::uint8_t* q) {
  double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0, sxx = 0;
  for (int i = 0; i < sub; ++i) {
    const double wi = w[i], xi = x[i], qi = q[i];
    sw += wi; sq += wi * qi; sqq += wi * qi * qi;
    sx += wi * xi; sxq += wi * xi * qi; sxx += wi * xi * xi;
  }
  double a = 0, b = sw > 0 ? sx / sw : 0;
  const double det = sw * sqq - sq * sq;
  if (det > 1e-12 * sw * sqq) {
    a = (sw * sxq - sq * sx) / det;
    b = (sqq * sx - sq * sxq) / det;
    if (a < 0) { a = 0; b = sx / sw; }
  }
  const double err = sxx - 2 * a * sxq - 2 * b * sx + a * a * sqq + 2 * a * b * sq + b * b * sw;
  return {static_cast<float>(a), static_cast<float>(b), std::max(err, 0.0)};
}

// Step 1 for q2_K: real a >= 0 and b with codes in [0, 3] for one sub-block. Candidate
// scales spread the range over 2 to 4 code steps from either end: anchored at the minimum
// (the top may clip) or at the maximum (the bottom may clip). Those are two families of
// local optima; each is refined by re-rounding the codes against its fit until the error
// stops falling, and both are kept, because after the scale and min become integers the
// runner-up is sometimes the better one. best[0] is the better family.
inline void fit_affine(const float* x, const float* w, affine* best) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < sub; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
  std::uint8_t q[sub];
  if (!(mx > mn)) {
    std::fill(q, q + sub, std::uint8_t{0});
    best[0] = best[1] = fit_affine_codes(x, w, q);
    return;
  }
  double sxx = 0;
  for (int i = 0; i < sub; ++i) sxx += static_cast<double>(w[i]) * x[i] * x[i];
  const double tol = 1e-6 * sxx;
  for (int end = 0; end < 2; ++end) {
    affine& b = best[end];
    b = {0, 0, std::numeric_limits<double>::infinity()};
    for (int k = -10; k <= 10; ++k) {
      const float is = (3.0f + 0.1f * static_cast<float>(k)) / (mx - mn);
      for (int i = 0; i < sub; ++i)
        q[i] = static_cast<std::uint8_t>(end ? 3 - round_clamped((mx - x[i]) * is, 0, 3)
                                             : round_clamped((x[i] - mn) * is, 0, 3));
      const affine f = fit_affine_codes(x, w, q);
      if (better_fit(f.err, f.a, b.err, b.a, tol)) b = f;
    }
    for (int it = 0; it < 4 && b.a > 0; ++it) {
      const float ia = 1.0f / b.a;
      for (int i = 0; i < sub; ++i) q[i] = static_cast<std::uint8_t>(round_clamped((x[i] - b.b) * ia, 0, 3));
      const affine f = fit_affine_codes(x, w, q);
      if (!(f.err < b.err - tol)) break;
      b = f;
    }
  }
  if (better_fit(best[1].err, best[1].a, best[0].err, best[0].a, tol)) std::swap(best[0], best[1]);
}

// Step 1 for q3_K: real scales a with codes in [-4, 3], the best of each sign: the
// largest magnitude goes to the -4 end or to the +3 end, which are two families of local
// optima. Each is scanned and refined; after the scale is made an integer the runner-up
// is sometimes the better one, so both are kept.
struct scaled { float a; double err; };

inline scaled fit_scale_codes(const float* x, const float* w, const int* q) {
  double sxq = 0, sqq = 0, sxx = 0;
  for (int i = 0; i < sub; ++i) {
    const double wi = w[i], xi = x[i], qi = q[i];
    sxq += wi * xi * qi; sqq += wi * qi * qi; sxx += wi * xi * xi;
  }
  if (!(sqq > 0)) return {0.0f, sxx};
  return {static_cast<float>(sxq / sqq), std::max(sxx - sxq * sxq / sqq, 0.0)};
}

// best[0]: the better family, best[1]: the other
inline void fit_scale(const float* x, const float* w, scaled* best) {
  float xm = 0;
  for (int i = 0; i < sub; ++i)
    if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
  int q[sub] = {};
  if (xm == 0) { best[0] = best[1] = fit_scale_codes(x, w, q); return; }
  double sxx = 0;
  for (int i = 0; i < sub; ++i) sxx += static_cast<double>(w[i]) * x[i] * x[i];
  const double tol = 1e-6 * sxx;
  for (int end = 0; end < 2; ++end) {
    scaled& b = best[end];
    b = {0, std::numeric_limits<double>::infinity()};
    for (int k = -10; k <= 10; ++k) {
      const float step = 0.1f * static_cast<float>(k);
      const float is = (end ? -(4.0f + step) : (3.0f + step)) / xm;
      for (int i = 0; i < sub; ++i) q[i] = round_clamped(x[i] * is, -4, 3);
      const scaled f = fit_scale_codes(x, w, q);
      if (better_fit(f.err, f.a, b.err, b.a, tol)) b = f;
    }
    for (int it = 0; it < 4 && b.a != 0; ++it) {
      const float ia = 1.0f / b.a;
      for (int i = 0; i < sub; ++i) q[i] = round_clamped(x[i] * ia, -4, 3);
      const scaled f = fit_scale_codes(x, w, q);
      if (!(f.err < b.err - tol)) break;
      b = f;
    }
  }
  if (better_fit(best[1].err, best[1].a, best[0].err, best[0].a, tol)) std::swap(best[0], best[1]);
}

// Step 2: candidate f16 super-scales for integer multiples s_j in [lo, hi] of one scale
// that should meet targets v_j, the miss of each weighted by c_j. Each candidate maps the
// largest positive or the most negative v_j to a point near or beyond an end of the range
// (beyond: that sub-block is clipped so the others get finer steps), then is refitted by
// least squares on the rounded multiples and rounded to f16. Writes the `keep` distinct
// values with the least weighted miss (and returns how many), best first.
template <int keep>
inline int super_scales(const float* v, const double* c, int lo, int hi, float* out) {
  float anchor[2] = {0, 0};
  for (int j = 0; j < n_sub; ++j) { anchor[0] = std::max(anchor[0], v[j]); anchor[1] = std::min(anchor[1], v[j]); }
  float cand[keep];
  double cerr[keep];
  int n = 0;
  for (const float vm : anchor)
    for (const int top : {lo, hi}) {
      if (vm == 0 || top == 0) continue;
      for (int k = -8; k <= 40; ++k) {
        const float is = static_cast<float>(top) * (1.0f + 0.02f * static_cast<float>(k)) / vm;
        double num = 0, den = 0;
        for (int j = 0; j < n_sub; ++j) {
          const int s = round_clamped(v[j] * is, lo, hi);
          num += c[j] * v[j] * s; den += c[j] * static_cast<double>(s) * s;
        }
        if (!(den > 0)) continue;
        const float d = to_f16_value(static_cast<float>(num / den));
        if (d == 0) continue;
        bool dup = false;
        for (int m = 0; m < n; ++m) dup |= cand[m] == d;
        if (dup) continue;
        const float inv = 1.0f / d;
        double e = 0;
        for (int j = 0; j < n_sub; ++j) {
          const float r = v[j] - d * static_cast<float>(round_clamped(v[j] * inv, lo, hi));
          e += c[j] * r * r;
        }
        int pos = n < keep ? n++ : keep;  // insert in order; past the end drops the worst
        for (; pos > 0 && cerr[pos - 1] > e; --pos)
          if (pos < keep) { cand[pos] = cand[pos - 1]; cerr[pos] = cerr[pos - 1]; }
        if (pos < keep) { cand[pos] = d; cerr[pos] = e; }
      }
    }
  if (n == 0) { out[0] = 0; return 1; }
  std::copy(cand, cand + n, out);
  return n;
}

}  // namespace kq_low

// q2_K: 16 sub-blocks of 16 weights. Byte j of scales holds sub-block j's 4-bit scale s
// (low nibble) and 4-bit min m (high nibble); d and dmin are f16 super-block scales. Each
// weight is a 2-bit code q, w = (d*s)*q - (dmin*m). 84 bytes per 256 weights, 2.625 bits
// per weight. Codes are stored as kq_low::code2 describes.
struct q2_K {
  static constexpr type id = type::q2_K;
  static constexpr int block_size = qk_k;
  struct block {
    std::uint8_t scales[16];
    std::uint8_t qs[64];
    gk::f16 d;
    gk::f16 dmin;
  };
  using dot_type = q8_K;

  // The reference computes dl*q - ml with two roundings. Here dl*q is formed as dl*0, dl,
  // dl+dl, (dl+dl)+dl, each equal to the rounded product (the first three are exact), so
  // no product stands beside the subtraction to be fused: the result holds even where
  // GK_EXACT_FP cannot stop contraction (clang with an explicit -ffp-contract=fast).
  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d), dmin = to_f32(b.dmin);
    for (int j = 0; j < kq_low::n_sub; ++j) {
      const float dl = d * static_cast<float>(b.scales[j] & 0xF);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      const float twice = dl + dl;
      const float level[4] = {dl * 0.0f, dl, twice, twice + dl};
      for (int l = 0; l < kq_low::sub; ++l) out[16 * j + l] = level[kq_low::code2(b.qs, 16 * j + l)] - ml;
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    using namespace kq_low;
    float w[qk_k];
    error_weights(importance, w);

    // step 1: real scale and min per sub-block (min = -offset), and the error weights of
    // their misses: sum w q^2 for the scale, sum w for the min
    float a[2 * n_sub], m[2 * n_sub];  // the best fits, then the runners-up
    double ca[n_sub], cm[n_sub];
    for (int j = 0; j < n_sub; ++j) {
      affine fits[2];
      fit_affine(x + 16 * j, w + 16 * j, fits);
      const affine f = fits[0];
      a[j] = f.a; m[j] = -f.b;
      a[n_sub + j] = fits[1].a; m[n_sub + j] = -fits[1].b;
      std::uint8_t q[sub];
      const float ia = f.a > 0 ? 1.0f / f.a : 0.0f;
      double sq2 = 0, sw = 0;
      for (int i = 0; i < sub; ++i) {
        q[i] = static_cast<std::uint8_t>(round_clamped((x[16 * j + i] + m[j]) * ia, 0, 3));
        sq2 += static_cast<double>(w[16 * j + i]) * q[i] * q[i];
        sw += w[16 * j + i];
      }
      ca[j] = sq2; cm[j] = sw;
    }

    // step 2: candidate d (multiples 0..15) and dmin (0..15, either sign: a negative dmin
    // is a positive offset, the better choice when every sub-block lies above zero)
    float ds[2], ms[3];
    const int nd = super_scales<2>(a, ca, 0, 15, ds);
    int nm = super_scales<2>(m, cm, 0, 15, ms);
    if (ms[0] != 0) ms[nm++] = 0;

    // step 3: per-sub-block integer choice with codes re-chosen, then least-squares refit
    std::uint8_t sc[n_sub], codes[qk_k];
    float best_d = 0, best_m = 0;
    double best = std::numeric_limits<double>::infinity();
    std::uint8_t try_sc[n_sub], try_codes[qk_k];
    for (int kd = 0; kd < nd; ++kd)
      for (int km = 0; km < nm; ++km) {
        const double e = choose(x, w, a, m, ds[kd], ms[km], try_sc, try_codes);
        if (e < best) {
          best = e; best_d = ds[kd]; best_m = ms[km];
          std::copy(try_sc, try_sc + n_sub, sc);
          std::copy(try_codes, try_codes + qk_k, codes);
        }
      }
    for (int it = 0; it < 3; ++it) {
      float d = best_d, dm = best_m;
      if (!refit(x, w, sc, codes, d, dm)) break;
      const double e = choose(x, w, a, m, d, dm, try_sc, try_codes);
      if (!(e < best)) break;
      best = e; best_d = d; best_m = dm;
      std::copy(try_sc, try_sc + n_sub, sc);
      std::copy(try_codes, try_codes + qk_k, codes);
    }

    b.d = to_f16(best_d);
    b.dmin = to_f16(best_m);
    std::copy(sc, sc + n_sub, b.scales);
    pack2(codes, b.qs);
  }

  static float dot(const block& w, const q8_K::block* a) {
    int summs = 0;  // the min term: sum over sub-blocks of m_j * (sum of its activations)
    for (int j = 0; j < kq_low::n_sub; ++j) summs += a->bsums[j] * (w.scales[j] >> 4);
    int isum = 0;
    for (int j = 0; j < kq_low::n_sub; ++j) {
      int s = 0;
      for (int l = 0; l < kq_low::sub; ++l) s += a->qs[16 * j + l] * kq_low::code2(w.qs, 16 * j + l);
      isum += (w.scales[j] & 0xF) * s;
    }
    const float dall = a->d * to_f32(w.d), dmin = a->d * to_f32(w.dmin);
    return dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }

 private:
  // For super-scales d and dmin: each sub-block tries the scale and min codes within one of
  // either of its two targets (a[j], m[j] and a[n_sub + j], m[n_sub + j]), codes re-chosen
  // by rounding, and keeps the lowest error. Returns the total.
  static double choose(const float* x, const float* w, const float* a, const float* m, float d, float dmin,
                       std::uint8_t* sc, std::uint8_t* codes) {
    using namespace kq_low;
    const float inv_d = d != 0 ? 1.0f / d : 0.0f, inv_m = dmin != 0 ? 1.0f / dmin : 0.0f;
    double total = 0;
    for (int j = 0; j < n_sub; ++j) {
      const float* xj = x + 16 * j;
      const float* wj = w + 16 * j;
      const int s0 = round_clamped(a[j] * inv_d, 0, 15), t0 = round_clamped(m[j] * inv_m, 0, 15);
      const int s1 = round_clamped(a[n_sub + j] * inv_d, 0, 15), t1 = round_clamped(m[n_sub + j] * inv_m, 0, 15);
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < 18; ++k) {
        const int s = (k < 9 ? s0 : s1) + (k % 9) / 3 - 1, t = (k < 9 ? t0 : t1) + k % 3 - 1;
        if (s < 0 || s > 15 || t < 0 || t > 15) continue;
        if ((d == 0 && s != 0) || (dmin == 0 && t != 0)) continue;
        if (k >= 9 && std::abs(s - s0) <= 1 && std::abs(t - t0) <= 1) continue;  // tried already
        const float dl = d * static_cast<float>(s), ml = dmin * static_cast<float>(t);
        const float il = dl != 0 ? 1.0f / dl : 0.0f;
        std::uint8_t q[sub];
        double e = 0;
        for (int i = 0; i < sub; ++i) {
          q[i] = static_cast<std::uint8_t>(round_clamped((xj[i] + ml) * il, 0, 3));
          const float r = xj[i] - (dl * static_cast<float>(q[i]) - ml);
          e += static_cast<double>(wj[i]) * (r * r);
        }
        if (e < best) {
          best = e;
          sc[j] = static_cast<std::uint8_t>(s | (t << 4));
          std::copy(q, q + sub, codes + 16 * j);
        }
      }
      total += best;
    }
    return total;
  }

  // Least squares for d and dmin with the integer scales, mins and codes fixed:
  // x ~ d*(s*q) - dmin*t. Returns false when the system is singular.
  static bool refit(const float* x, const float* w, const std::uint8_t* sc, const std::uint8_t* codes, float& d,
                    float& dmin) {
    double suu = 0, suv = 0, svv = 0, sxu = 0, sxv = 0;
    for (int i = 0; i < qk_k; ++i) {
      const double u = static_cast<double>((sc[i / 16] & 0xF) * codes[i]), v = -static_cast<double>(sc[i / 16] >> 4);
      const double wi = w[i];
      suu += wi * u * u; suv += wi * u * v; svv += wi * v * v;
      sxu += wi * x[i] * u; sxv += wi * x[i] * v;
    }
    const double det = suu * svv - suv * suv;
    if (det > 1e-12 * suu * svv) {
      d = kq_low::to_f16_value(static_cast<float>((sxu * svv - sxv * suv) / det));
      dmin = kq_low::to_f16_value(static_cast<float>((sxv * suu - sxu * suv) / det));
    } else if (suu > 0 && svv == 0) {
      d = kq_low::to_f16_value(static_cast<float>(sxu / suu));
    } else if (svv > 0 && suu == 0) {
      dmin = kq_low::to_f16_value(static_cast<float>(sxv / svv));
    } else {
      return false;
    }
    return d >= 0;
  }
};
static_assert(sizeof(q2_K::block) == 84 && offsetof(q2_K::block, scales) == 0 && offsetof(q2_K::block, qs) == 16 &&
              offsetof(q2_K::block, d) == 80 && offsetof(q2_K::block, dmin) == 82);
static_assert(BlockFormat<q2_K>);

// q3_K: 16 sub-blocks of 16 weights, each with a 6-bit scale u stored with an offset of 32
// (s = u - 32, in [-32, 31]) times the f16 super-block scale d. Each weight is a 3-bit code:
// its low two bits in qs (as kq_low::code2 describes), its high bit in hmask (weight i at
// byte i%32, bit i/32); the code minus 4 gives q in [-4, 3], and w = (d*s)*q. Scale u_j keeps
// its low four bits in scales[j] (j < 8) or the high nibble of scales[j-8] (j >= 8), and its
// top two bits in scales[8 + j%4] at bit 2*(j/4). 110 bytes per 256 weights, 3.4375 bits per
// weight.
struct q3_K {
  static constexpr type id = type::q3_K;
  static constexpr int block_size = qk_k;
  struct block {
    std::uint8_t hmask[32];
    std::uint8_t qs[64];
    std::uint8_t scales[12];
    gk::f16 d;
  };
  using dot_type = q8_K;

  static int scale(const block& b, int j) {  // s_j in [-32, 31]
    const int low = j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4;
    const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
  }
  static int code(const block& b, int i) {  // q_i in [-4, 3]
    return kq_low::code2(b.qs, i) - ((b.hmask[i % 32] >> (i / 32)) & 1 ? 0 : 4);
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < kq_low::n_sub; ++j) {
      const float dl = d * static_cast<float>(scale(b, j));
      for (int l = 0; l < kq_low::sub; ++l) out[16 * j + l] = dl * static_cast<float>(code(b, 16 * j + l));
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    using namespace kq_low;
    float w[qk_k];
    error_weights(importance, w);

    // step 1: real scale per sub-block and the error weight of its miss, sum w q^2
    float a[2 * n_sub];  // the best scales, then the runners-up
    double ca[n_sub];
    for (int j = 0; j < n_sub; ++j) {
      scaled fits[2];
      fit_scale(x + 16 * j, w + 16 * j, fits);
      const scaled f = fits[0];
      a[j] = f.a;
      a[n_sub + j] = fits[1].a;
      const float ia = f.a != 0 ? 1.0f / f.a : 0.0f;
      double sq2 = 0;
      for (int i = 0; i < sub; ++i) {
        const int q = round_clamped(x[16 * j + i] * ia, -4, 3);
        sq2 += static_cast<double>(w[16 * j + i]) * q * q;
      }
      ca[j] = sq2;
    }

    // steps 2 and 3
    float ds[6];
    const int nd = super_scales<6>(a, ca, -32, 31, ds);
    std::int8_t s[n_sub], try_s[n_sub], q[qk_k], try_q[qk_k];
    float best_d = 0;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < nd; ++k) {
      const double e = choose(x, w, a, ds[k], try_s, try_q);
      if (e < best) {
        best = e; best_d = ds[k];
        std::copy(try_s, try_s + n_sub, s);
        std::copy(try_q, try_q + qk_k, q);
      }
    }
    for (int it = 0; it < 3; ++it) {
      double num = 0, den = 0;
      for (int i = 0; i < qk_k; ++i) {
        const double u = s[i / 16] * q[i];
        num += w[i] * x[i] * u; den += w[i] * u * u;
      }
      if (!(den > 0)) break;
      const float d = to_f16_value(static_cast<float>(num / den));
      if (d == best_d) break;
      const double e = choose(x, w, a, d, try_s, try_q);
      if (!(e < best)) break;
      best = e; best_d = d;
      std::copy(try_s, try_s + n_sub, s);
      std::copy(try_q, try_q + qk_k, q);
    }

    b.d = to_f16(best_d);
    std::fill(b.scales, b.scales + 12, std::uint8_t{0});
    for (int j = 0; j < n_sub; ++j) {
      const int u = s[j] + 32;
      b.scales[j % 8] |= static_cast<std::uint8_t>((u & 0xF) << (4 * (j / 8)));
      b.scales[8 + j % 4] |= static_cast<std::uint8_t>((u >> 4) << (2 * (j / 4)));
    }
    std::uint8_t low[qk_k];
    std::fill(b.hmask, b.hmask + 32, std::uint8_t{0});
    for (int i = 0; i < qk_k; ++i) {
      const int c = q[i] + 4;
      low[i] = static_cast<std::uint8_t>(c & 3);
      b.hmask[i % 32] |= static_cast<std::uint8_t>((c >> 2) << (i / 32));
    }
    pack2(low, b.qs);
  }

  static float dot(const block& w, const q8_K::block* a) {
    int isum = 0;
    for (int j = 0; j < kq_low::n_sub; ++j) {
      int s = 0;
      for (int l = 0; l < kq_low::sub; ++l) s += a->qs[16 * j + l] * code(w, 16 * j + l);
      isum += scale(w, j) * s;
    }
    return (to_f32(w.d) * a->d) * static_cast<float>(isum);
  }

 private:
  // For super-scale d: each sub-block tries the integer scales near its two targets (a[j]
  // and a[n_sub + j]), codes re-chosen by rounding, and keeps the lowest error. Returns
  // the total.
  static double choose(const float* x, const float* w, const float* a, float d, std::int8_t* s_out,
                       std::int8_t* q_out) {
    using namespace kq_low;
    const float inv_d = d != 0 ? 1.0f / d : 0.0f;
    double total = 0;
    for (int j = 0; j < n_sub; ++j) {
      const float* xj = x + 16 * j;
      const float* wj = w + 16 * j;
      const int s0 = round_clamped(a[j] * inv_d, -32, 31), s1 = round_clamped(a[n_sub + j] * inv_d, -32, 31);
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < 10; ++k) {  // within two of either target
        const int s = k < 5 ? s0 - 2 + k : s1 - 7 + k;
        if (s < -32 || s > 31 || (k >= 5 && std::abs(s - s0) <= 2)) continue;
        const float dl = d * static_cast<float>(s);
        const float il = dl != 0 ? 1.0f / dl : 0.0f;
        std::int8_t q[sub];
        double e = 0;
        for (int i = 0; i < sub; ++i) {
          q[i] = static_cast<std::int8_t>(round_clamped(xj[i] * il, -4, 3));
          const float r = xj[i] - dl * static_cast<float>(q[i]);
          e += static_cast<double>(wj[i]) * (r * r);
        }
        if (e < best) {
          best = e;
          s_out[j] = static_cast<std::int8_t>(s);
          std::copy(q, q + sub, q_out + 16 * j);
        }
      }
      total += best;
    }
    return total;
  }
};
static_assert(sizeof(q3_K::block) == 110 && offsetof(q3_K::block, hmask) == 0 && offsetof(q3_K::block, qs) == 32 &&
              offsetof(q3_K::block, scales) == 96 && offsetof(q3_K::block, d) == 108);
static_assert(BlockFormat<q3_K>);

}  // namespace gk::formats

GK_EXACT_FP_END
