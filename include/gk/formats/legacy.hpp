// SPDX-License-Identifier: MIT
// The 32-weight formats with one scale per block (q4_0 … q8_1), the activation formats
// q8_0/q8_1 that dots pair them with, and the low-bit q1_0/q2_0.
// Every weight is w = d * q (+ m for the _1 variants) with d (and m) stored as f16.
//
// Encoders are searches for the least importance-weighted squared error, not max-abs
// rules. For w = d * q with q in a range of integers: a vectorised grid of 1/d finds the
// neighbourhood of the best fit, and there the search is exact: as 1/d grows, each
// weight's nearest code changes at known points, so sweeping those points in order visits
// every assignment nearest rounding can produce, and each gets its least-squares d. The
// best few d are then rounded to f16 (and the halves either side tried), with the codes
// chosen again for the rounded d, since that is the d decoded. The affine _1 formats
// search a grid of scales around (max - min) / qmax instead, the best few refined by
// weighted least squares on (d, m) and re-rounded. ~0.1-0.3 ms per 4096 weights.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

// q8_0: 32 weights share an f16 scale d; w = d * q with q a signed byte.
// 34 bytes per block, 8.5 bits per weight. Also the activation format of q4_0, q5_0,
// q1_0, q2_0, mxfp4, nvfp4 and iq4_nl dots.
struct q8_0 {
  static constexpr type id = type::q8_0;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; std::int8_t qs[32]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 32; ++j) out[j] = d * b.qs[j];
  }
  // Scale from the largest magnitude, nearest code for each weight: the activation
  // encoder runs on every matmul input, so it stays this cheap. Importance is not used
  // (at 8 bits the reference ignores it too, and the error is already ~1/400 of the range).
  static void encode(const float* x, block& b, const float* importance) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * id));
    (void)importance;
    b.d = to_f16(d);
  }
  static float dot(const block& w, const block* a) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += w.qs[j] * a->qs[j];
    return static_cast<float>(sum) * (to_f32(w.d) * to_f32(a->d));
  }
};
static_assert(sizeof(q8_0::block) == 34 && offsetof(q8_0::block, qs) == 2);
static_assert(BlockFormat<q8_0>);

// q8_1: as q8_0 plus s = d * sum(q), the block sum the _1 formats' dots need for their
// offset term. 36 bytes per block, 9 bits per weight.
struct q8_1 {
  static constexpr type id = type::q8_1;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; gk::f16 s; std::int8_t qs[32]; };
  using dot_type = q8_1;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 32; ++j) out[j] = d * b.qs[j];
  }
  static void encode(const float* x, block& b, const float*) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      b.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * id));
      sum += b.qs[j];
    }
    b.d = to_f16(d);
    b.s = to_f16(d * static_cast<float>(sum));
  }
  static float dot(const block& w, const block* a) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += w.qs[j] * a->qs[j];
    return static_cast<float>(sum) * (to_f32(w.d) * to_f32(a->d));
  }
};
static_assert(sizeof(q8_1::block) == 36 && offsetof(q8_1::block, s) == 2 && offsetof(q8_1::block, qs) == 4);
static_assert(BlockFormat<q8_1>);

// ---- the searches the encoders share -------------------------------------------------

namespace detail {

// The f16 bits of d, held to the largest finite half so that no block of finite inputs
// decodes to infinity.
inline std::uint16_t f16_finite(float d) noexcept {
  std::uint16_t h = f32_to_f16(d);
  if ((h & 0x7fffu) > 0x7bffu) h = static_cast<std::uint16_t>((h & 0x8000u) | 0x7bffu);
  return h;
}

// The half `step` units of magnitude away from h (same sign); false off the finite range.
inline bool f16_step(std::uint16_t h, int step, std::uint16_t& out) noexcept {
  const int m = static_cast<int>(h & 0x7fffu) + step;
  if (m < 0 || m > 0x7bff) return false;
  out = static_cast<std::uint16_t>((h & 0x8000u) | static_cast<unsigned>(m));
  return true;
}

// Importance weights of a block divided by their largest, so that no sum below can leave
// the float range whatever the importance's scale (scaling does not change which fit is
// best). All 1 when none are given or none is positive and finite; negative ones count as
// 0, and ones under 2^-60 of the largest too (they change nothing but would run at
// subnormal speed).
template <int N>
std::array<float, N> weights_of(const float* importance) noexcept {
  std::array<float, N> w;
  float wmax = 0.0f;
  if (importance)
    for (int i = 0; i < N; ++i) wmax = std::max(wmax, importance[i]);
  if (!(wmax > 0.0f && wmax <= std::numeric_limits<float>::max())) {
    w.fill(1.0f);
    return w;
  }
  for (int i = 0; i < N; ++i) {
    const float r = std::max(importance[i], 0.0f) / wmax;
    w[i] = r >= 0x1p-60f ? r : 0.0f;
  }
  return w;
}

// The nearest integer to v, ties to even, for |v| <= 2^22: nearbyint in the default
// rounding mode, written as an add and a subtract so that the candidate loops vectorise
// (for x86-64 without SSE4.1 nearbyint is a libm call, several times the cost of the rest).
inline float round_code(float v) noexcept {
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23: the sum's last bit is the units
  return (v + magic) - magic;
}
// The code nearest v in [lo, hi], |v| <= 2^22. The clamp of the rounded (integral) value
// is 0.5 (|c - lo| - |c - hi| + lo + hi), exact, because GCC will not if-convert float
// comparisons (they may trap), which would keep a min/max clamp scalar; this form was ~20%
// faster than an integer clamp with SSE2.
template <int lo, int hi>
inline float nearest_code(float v) noexcept {
  const float c = round_code(v);
  return 0.5f * (std::fabs(c - lo) - std::fabs(c - hi) + static_cast<float>(lo + hi));
}

// The K scales with the largest explained energy (sum w x q)^2 / sum w q^2 seen so far.
template <int K>
struct best_scales {
  float d[K];
  double score[K];
  int n = 0;
  void offer(float dd, double s) noexcept {
    int at = n < K ? n : K;
    while (at > 0 && score[at - 1] < s) --at;
    if (at >= K) return;
    for (int k = (n < K ? n : K - 1); k > at; --k) { d[k] = d[k - 1]; score[k] = score[k - 1]; }
    d[at] = dd;
    score[at] = s;
    if (n < K) ++n;
  }
};

// The search for w = d * q, q in [lo, hi], runs on y = x / max|x| (so |y| <= 1 and no
// input, 3e38 or 1e-40, can overflow it) over inverse scales t: q_i = clamp(round(t y_i)).
// Each assignment's least-squares d is sum w y q / sum w q^2 and it explains
// (sum w y q)^2 / sum w q^2 of the energy; the best assignment explains the most.
//
// Step 1 scores a geometric grid of G values of t. The loop runs over candidates
// innermost, so each candidate's sums are an independent lane the compiler vectorises
// without reordering any sum. The grid spans 0.75 (m + 0.5) .. U (M + 0.5), m and M the
// smaller and larger code magnitude, so the largest weight is clipped to no less than 1/U
// of itself: U = 2 for 32 weights, 4 for 64 (at 2, q2_0 heavy/imp lost 0.9%), 16 for 256
// (the bulk of a heavy-tailed block sits far below its largest weight). G = 32 for the
// 4- and 5-bit codes (at 16, or at U = 4 with 32, q5_0 lost up to 0.8% rmse against the
// exact sweep over all t); 16 for the 2-level and 3-level codes, exact to 0.03% there.
// Step 2 (below) makes the search exact between the best grid point's neighbours.
template <int N, int lo, int hi>
struct scale_grid {
  static constexpr int G = hi - lo >= 15 ? 32 : 16;
  static constexpr float m = static_cast<float>(-lo < hi ? -lo : hi), M = static_cast<float>(-lo < hi ? hi : -lo);
  static constexpr float U = N >= 256 ? 16.0f : N >= 64 ? 4.0f : 2.0f;
  float t[G];
  scale_grid() noexcept {
    const double t0 = 0.75 * (m + 0.5), t1 = U * (M + 0.5);
    for (int j = 0; j < G; ++j) t[j] = static_cast<float>(t0 * std::pow(t1 / t0, j / (G - 1.0)));
  }
};

template <int N, int lo, int hi, int G>
int best_on_grid(const float* y, const float* w, const float* t) noexcept {
  float sxq[G] = {}, sqq[G] = {};
  for (int i = 0; i < N; ++i) {
    const float yi = y[i], wi = w[i], wy = w[i] * y[i];
    for (int j = 0; j < G; ++j) {
      const float c = nearest_code<lo, hi>(t[j] * yi);
      sxq[j] += wy * c;
      sqq[j] += wi * c * c;
    }
  }
  int best = -1;
  float top = 0.0f;
  for (int j = 0; j < G; ++j)
    if (sqq[j] > 0.0f && sxq[j] > 0.0f && sxq[j] * sxq[j] / sqq[j] > top) { top = sxq[j] * sxq[j] / sqq[j]; best = j; }
  return best;
}

// Step 2, exact between two grid points ta < tb: as t grows, element i changes code where
// t y_i crosses a half-integer, so sweeping those crossings in order visits every
// assignment rounding can produce in [ta, tb], and each offers its least-squares d.
// Between neighbouring grid points each weight crosses about one boundary, so this sorts
// ~N events, not the N * (hi - lo) of a sweep from t = 0.
template <int N, int lo, int hi, int K>
void sweep_window(const float* y, const float* w, float ta, float tb, best_scales<K>& out) {
  struct crossing { float t; std::uint16_t i; std::int8_t to; };
  std::array<crossing, N * (hi - lo)> ev;
  std::array<std::int8_t, N> cur;
  double sxq = 0.0, sqq = 0.0;
  int ne = 0;
  for (int i = 0; i < N; ++i) {
    int c = static_cast<int>(round_code(std::min(std::max(ta * y[i], static_cast<float>(lo)), static_cast<float>(hi))));
    cur[i] = static_cast<std::int8_t>(c);
    sxq += static_cast<double>(w[i]) * y[i] * c;
    sqq += static_cast<double>(w[i]) * c * c;
    // the sums follow cur, so an event that float rounding puts at or before ta is harmless
    if (y[i] > 0.0f)
      for (; c < hi; ++c) {
        const float t = (c + 0.5f) / y[i];
        if (!(t <= tb)) break;
        ev[ne++] = {t, static_cast<std::uint16_t>(i), static_cast<std::int8_t>(c + 1)};
      }
    else if (y[i] < 0.0f)
      for (; c > lo; --c) {
        const float t = (c - 0.5f) / y[i];
        if (!(t <= tb)) break;
        ev[ne++] = {t, static_cast<std::uint16_t>(i), static_cast<std::int8_t>(c - 1)};
      }
  }
  if (sqq > 0.0 && sxq > 0.0) out.offer(static_cast<float>(sxq / sqq), sxq * sxq / sqq);
  std::sort(ev.begin(), ev.begin() + ne,
            [](const crossing& a, const crossing& b) { return a.t < b.t || (a.t == b.t && a.i < b.i); });
  for (int k = 0; k < ne; ++k) {
    const int i = ev[k].i, from = cur[i], to = ev[k].to;
    sxq += static_cast<double>(w[i]) * y[i] * (to - from);
    sqq += static_cast<double>(w[i]) * (to * to - from * from);
    cur[i] = static_cast<std::int8_t>(to);
    if (sqq > 0.0 && sxq > 0.0) out.offer(static_cast<float>(sxq / sqq), sxq * sxq / sqq);
  }
}

// Codes in [lo, hi] for the decoded scale d != 0 and their weighted error (+inf when d is
// not tried). The codes are the nearest to y r with r = max|x| / d, which vectorises and
// differs from the nearest to x / d only where float rounding breaks an exact tie; the
// error is that of the decoded d * q. A d under 2^-22 of the largest weight (r > 2^22)
// would clip it to under 2^-17 of itself and is not tried.
template <int N, int lo, int hi>
double codes_for_scale(const float* x, const float* y, const float* w, float amax, float d, std::int8_t* q) noexcept {
  const float r = amax / d;
  if (!(std::fabs(r) <= 0x1p22f)) return std::numeric_limits<double>::infinity();
  float c[N];
  for (int i = 0; i < N; ++i) c[i] = nearest_code<lo, hi>(y[i] * r);
  double err = 0.0;
  for (int i = 0; i < N; ++i) {
    q[i] = static_cast<std::int8_t>(c[i]);
    const double e = static_cast<double>(x[i]) - c[i] * d;
    err += w[i] * e * e;
  }
  return err;
}

// w = d * q, q in [lo, hi], d an f16: the scale and codes of least weighted error found.
// Steps 1 and 2 above, for d > 0 and, when the range is not symmetric, for d < 0 (as
// d' = -d on -y); then step 3: the best K = 3 scales are rounded to f16, the halves
// either side tried too, with the codes chosen again for each decoded d. A constant block
// instead tries d = x / k for every code k: its best fit is whichever f16 multiple lands
// nearest, which the grid does not reach (q4_0 constant rows went 0.52 -> 0.95 without).
// Against the exact sweep over all t (sorting N (hi - lo) crossings) this is 12-25x
// faster and within 0.4% rmse on the test's rows (q5_0 with importance the worst).
// Returns d's bits; q gets the codes.
template <int N, int lo, int hi>
std::uint16_t fit_scale(const float* x, const float* importance, std::int8_t* q) {
  const auto w = weights_of<N>(importance);
  std::fill(q, q + N, std::int8_t{0});
  float amax = 0.0f;
  bool constant = true;
  for (int i = 0; i < N; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    constant = constant && x[i] == x[0];
  }
  if (!(amax > 0.0f)) return 0;
  std::array<float, N> y, ny;
  for (int i = 0; i < N; ++i) { y[i] = x[i] / amax; ny[i] = -y[i]; }

  constexpr int M = -lo > hi ? -lo : hi, K = 3;
  float cand[K > 2 * M ? K : 2 * M];
  int nc = 0;
  if (constant) {
    for (int k = lo; k <= hi; ++k)
      if (k != 0) cand[nc++] = x[0] / static_cast<float>(k);
  } else {
    static const scale_grid<N, lo, hi> grid;
    constexpr int G = scale_grid<N, lo, hi>::G;
    best_scales<K> best_d;
    auto search = [&](const float* yy, float sign) {
      const int g = best_on_grid<N, lo, hi, G>(yy, w.data(), grid.t);
      if (g < 0) return;
      best_scales<K> part;
      sweep_window<N, lo, hi>(yy, w.data(), grid.t[std::max(g - 1, 0)], grid.t[std::min(g + 1, G - 1)], part);
      for (int k = 0; k < part.n; ++k) best_d.offer(sign * part.d[k] * amax, part.score[k]);
    };
    search(y.data(), 1.0f);
    if constexpr (lo != -hi) search(ny.data(), -1.0f);  // codes for -y are -q: d < 0
    for (int k = 0; k < best_d.n; ++k) cand[nc++] = best_d.d[k];
  }

  std::uint16_t best_h = 0;
  double best = 0.0;
  for (int i = 0; i < N; ++i) best += static_cast<double>(w[i]) * x[i] * x[i];  // d = 0
  std::array<std::int8_t, N> tmp;
  std::uint16_t tried[3 * (K > 2 * M ? K : 2 * M)];
  int ntried = 0;
  for (int k = 0; k < nc; ++k) {
    const std::uint16_t h0 = f16_finite(cand[k]);
    for (int step = -1; step <= 1; ++step) {
      std::uint16_t h;
      if (!f16_step(h0, step, h) || (h & 0x7fffu) == 0) continue;
      if (std::find(tried, tried + ntried, h) != tried + ntried) continue;
      tried[ntried++] = h;
      const double err = codes_for_scale<N, lo, hi>(x, y.data(), w.data(), amax, f16_to_f32(h), tmp.data());
      if (err < best) {
        best = err;
        best_h = h;
        std::copy(tmp.begin(), tmp.end(), q);
      }
    }
  }
  return best_h;
}

// w = d * q + m, q in [0, qmax], d and m f16: the codes and halves of least weighted
// error found in three steps.
// 1. A grid of scales d0 = (0.8 .. 1.1) (max - min) / qmax, the low end of the codes
//    anchored at the minimum, the maximum or between: each candidate's codes and their
//    weighted least-squares (d, m). As in fit_scale the candidates are the innermost loop,
//    on y = (x - min) / (max - min), so that it vectorises.
// 2. The K with least error are rounded to f16 and refined twice: codes for the decoded
//    halves, least squares on them, rounded again.
// 3. The best is polished over the neighbouring halves of d and m.
// Against 25 scales with three refinements each (225 scalar passes) this is ~20x faster
// and within 0.75% rmse on the test's rows; 12 scales and K = 3 lost up to 1% on q5_1.
template <int N, int qmax>
void fit_affine(const float* x, const float* importance, std::uint8_t* q, std::uint16_t& dh, std::uint16_t& mh) {
  const auto w = weights_of<N>(importance);
  float mn = x[0], mx = x[0];
  for (int i = 1; i < N; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
  double sw = 0, swx = 0;
  for (int i = 0; i < N; ++i) { sw += w[i]; swx += static_cast<double>(w[i]) * x[i]; }
  const float range = mx - mn;
  std::array<float, N> y{};  // (x - min) / range, in [0, 1]
  const bool spread = range > 0.0f && range < std::numeric_limits<float>::infinity();
  if (spread)
    for (int i = 0; i < N; ++i) y[i] = (x[i] - mn) / range;
  std::array<std::uint8_t, N> tmp;
  // codes for the decoded (d, m), decoding as decode does: their weighted error, and the
  // weighted least-squares (nd, nm) for those codes (ok false where there is none). The
  // codes are the nearest to (x - m) / d = y a + b, which vectorises (it differs only
  // where float rounding breaks an exact tie); with a or b past 2^21 (never a good fit)
  // or no spread they come from x / d directly.
  struct pass { double err, nd, nm; bool ok; };
  auto run = [&](float d, float m, std::uint8_t* qq) {
    float cs[N];
    const float a = spread && d != 0.0f ? range / d : 0.0f, b = spread && d != 0.0f ? (mn - m) / d : 0.0f;
    if (spread && std::fabs(a) <= 0x1p21f && std::fabs(b) <= 0x1p21f)
      for (int i = 0; i < N; ++i) cs[i] = nearest_code<0, qmax>(y[i] * a + b);
    else
      for (int i = 0; i < N; ++i)
        cs[i] = round_code(d != 0.0f ? std::min(std::max((x[i] - m) / d, 0.0f), static_cast<float>(qmax)) : 0.0f);
    double err = 0.0, swq = 0.0, swqq = 0.0, swxq = 0.0;
    for (int i = 0; i < N; ++i) {
      const float c = cs[i];
      qq[i] = static_cast<std::uint8_t>(c);
      const double e = static_cast<double>(x[i]) - (c * d + m);
      err += w[i] * e * e;
      swq += w[i] * c;
      swqq += w[i] * c * c;
      swxq += w[i] * static_cast<double>(x[i]) * c;
    }
    const double det = sw * swqq - swq * swq;
    pass p{err, 0.0, 0.0, det > 0.0};
    if (p.ok) {
      p.nd = (sw * swxq - swq * swx) / det;
      p.nm = (swqq * swx - swq * swxq) / det;
      p.ok = p.nd > 0.0;
    }
    return p;
  };
  mh = f16_finite(mn);
  dh = 0;
  double best = run(0.0f, f16_to_f32(mh), q).err;
  auto consider = [&](std::uint16_t hd, std::uint16_t hm) {
    const pass p = run(f16_to_f32(hd), f16_to_f32(hm), tmp.data());
    if (p.err < best) { best = p.err; dh = hd; mh = hm; std::copy(tmp.begin(), tmp.end(), q); }
    return p;
  };
  if (mx == mn) {  // constant: m carries the value, d * q what rounding m to f16 lost
    const float r = mn - f16_to_f32(mh);
    if (r != 0.0f)
      for (int c = 1; c <= qmax; ++c) consider(f16_finite(r / static_cast<float>(c)), mh);
    return;
  }
  if (!spread) return;  // past float: keep m alone

  // step 1: S scales x 3 anchors; 16 scales lost nothing against 25 on the test rows
  constexpr int S = 16, C = 3 * S, K = 4;
  float it[C], b[C];  // codes round(clamp(y * it + b, 0, qmax))
  for (int s = 0; s < S; ++s) {
    const float d0 = (0.8f + 0.3f * s / (S - 1)) / qmax, slack = 1.0f - d0 * qmax;
    for (int a = 0; a < 3; ++a) {
      const float m0 = a == 0 ? 0.0f : a == 1 ? slack : 0.5f * slack;
      it[3 * s + a] = 1.0f / d0;
      b[3 * s + a] = -m0 / d0;
    }
  }
  float swq[C] = {}, swqq[C] = {}, swyq[C] = {};
  float swy = 0.0f, swyy = 0.0f, swf = 0.0f;
  for (int i = 0; i < N; ++i) {
    const float yi = y[i], wi = w[i], wy = w[i] * y[i];
    swf += wi; swy += wy; swyy += wy * yi;
    for (int j = 0; j < C; ++j) {
      const float c = nearest_code<0, qmax>(yi * it[j] + b[j]);
      swq[j] += wi * c;
      swqq[j] += wi * c * c;
      swyq[j] += wy * c;
    }
  }
  // least squares per candidate; its error is swyy - d swyq - m swy
  double top_err[K];
  float top_d[K], top_m[K];
  int nt = 0;
  for (int j = 0; j < C; ++j) {
    const double det = static_cast<double>(swf) * swqq[j] - static_cast<double>(swq[j]) * swq[j];
    if (!(det > 0.0)) continue;
    const double d = (static_cast<double>(swf) * swyq[j] - static_cast<double>(swq[j]) * swy) / det;
    const double m = (static_cast<double>(swqq[j]) * swy - static_cast<double>(swq[j]) * swyq[j]) / det;
    if (!(d > 0.0)) continue;
    const double e = swyy - d * swyq[j] - m * swy;
    int at = nt < K ? nt : K;
    while (at > 0 && top_err[at - 1] > e) --at;
    if (at >= K) continue;
    for (int k = (nt < K ? nt : K - 1); k > at; --k) { top_err[k] = top_err[k - 1]; top_d[k] = top_d[k - 1]; top_m[k] = top_m[k - 1]; }
    top_err[at] = e;
    top_d[at] = static_cast<float>(d * range);
    top_m[at] = static_cast<float>(mn + m * range);
    if (nt < K) ++nt;
  }
  // step 2
  for (int k = 0; k < nt; ++k) {
    float d = top_d[k], m = top_m[k];
    for (int r = 0; r < 3; ++r) {
      const std::uint16_t hd = f16_finite(d), hm = f16_finite(m);
      if ((hd & 0x7fffu) == 0) break;
      const pass p = consider(hd, hm);
      if (r == 2 || !p.ok) break;
      d = static_cast<float>(p.nd);
      m = static_cast<float>(p.nm);
    }
  }
  // step 3
  const std::uint16_t bd = dh, bm = mh;
  for (int sd = -1; sd <= 1; ++sd)
    for (int sm = -1; sm <= 1; ++sm) {
      std::uint16_t hd, hm;
      if ((sd || sm) && f16_step(bd, sd, hd) && f16_step(bm, sm, hm)) consider(hd, hm);
    }
}

// 5-bit codes as the _0/_1 32-weight formats store them: low nibbles in qs (weight j
// and j + 16 share byte j), the fifth bits in qh, bit j of the little-endian word.
inline void pack_5bit(const std::uint8_t* c, std::uint8_t* qs, std::uint8_t* qh) noexcept {
  std::uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<std::uint8_t>((c[j] & 0x0f) | ((c[j + 16] & 0x0f) << 4));
    h |= static_cast<std::uint32_t>(c[j] >> 4) << j;
    h |= static_cast<std::uint32_t>(c[j + 16] >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<std::uint8_t>(h >> (8 * k));
}
inline void unpack_5bit(const std::uint8_t* qs, const std::uint8_t* qh, int* c) noexcept {
  std::uint32_t h = 0;
  for (int k = 0; k < 4; ++k) h |= static_cast<std::uint32_t>(qh[k]) << (8 * k);
  for (int j = 0; j < 16; ++j) {
    c[j] = (qs[j] & 0x0f) | static_cast<int>(((h >> j) & 1u) << 4);
    c[j + 16] = (qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1u) << 4);
  }
}

}  // namespace detail

// ---- the weight formats ----------------------------------------------------------------

// q4_0: 32 weights share an f16 scale d; byte j holds weight j's 4-bit code q in its low
// nibble and weight j + 16's in its high nibble; w = d * (q - 8), so w/d runs -8 .. 7.
// 18 bytes per block, 4.5 bits per weight.
struct q4_0 {
  static constexpr type id = type::q4_0;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>((b.qs[j] & 0x0f) - 8) * d;
      out[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::int8_t q[32];
    b.d.bits = detail::fit_scale<32, -8, 7>(x, importance, q);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>((q[j] + 8) | ((q[j + 16] + 8) << 4));
  }
  static float dot(const block& w, const q8_0::block* a) {
    int sum = 0;
    for (int j = 0; j < 16; ++j)
      sum += ((w.qs[j] & 0x0f) - 8) * a->qs[j] + ((w.qs[j] >> 4) - 8) * a->qs[j + 16];
    return static_cast<float>(sum) * to_f32(w.d) * to_f32(a->d);
  }
};
static_assert(sizeof(q4_0::block) == 18 && offsetof(q4_0::block, d) == 0 && offsetof(q4_0::block, qs) == 2);
static_assert(BlockFormat<q4_0>);

// q4_1: 32 weights share an f16 scale d and an f16 offset m; 4-bit codes q packed as in
// q4_0 (weights j and j + 16 in byte j); w = d * q + m with q in 0 .. 15.
// 20 bytes per block, 5 bits per weight.
struct q4_1 {
  static constexpr type id = type::q4_1;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; gk::f16 m; std::uint8_t qs[16]; };
  using dot_type = q8_1;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d), m = to_f32(b.m);
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>(b.qs[j] & 0x0f) * d + m;
      out[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::uint8_t q[32];
    detail::fit_affine<32, 15>(x, importance, q, b.d.bits, b.m.bits);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
  }
  // sum (d q + m) da qa = d da sum(q qa) + m da sum(qa). The activation sum is taken from
  // the codes, not from q8_1's s: s is rounded to f16, which puts the reference's dot
  // ~100x further from the decoded rows' dot than float rounding does.
  static float dot(const block& w, const q8_1::block* a) {
    int sum = 0, sa = 0;
    for (int j = 0; j < 16; ++j) {
      sum += (w.qs[j] & 0x0f) * a->qs[j] + (w.qs[j] >> 4) * a->qs[j + 16];
      sa += a->qs[j] + a->qs[j + 16];
    }
    const float da = to_f32(a->d);
    return to_f32(w.d) * da * static_cast<float>(sum) + to_f32(w.m) * (da * static_cast<float>(sa));
  }
};
static_assert(sizeof(q4_1::block) == 20 && offsetof(q4_1::block, d) == 0 && offsetof(q4_1::block, m) == 2 &&
              offsetof(q4_1::block, qs) == 4);
static_assert(BlockFormat<q4_1>);

// q5_0: 32 weights share an f16 scale d; each 5-bit code q has its low 4 bits packed as
// in q4_0 and its fifth bit at bit j of qh (a little-endian 32-bit word, weight j);
// w = d * (q - 16), so w/d runs -16 .. 15. 22 bytes per block, 5.5 bits per weight.
struct q5_0 {
  static constexpr type id = type::q5_0;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; std::uint8_t qh[4]; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    int c[32];
    detail::unpack_5bit(b.qs, b.qh, c);
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(c[j] - 16) * d;
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::int8_t q[32];
    b.d.bits = detail::fit_scale<32, -16, 15>(x, importance, q);
    std::uint8_t c[32];
    for (int j = 0; j < 32; ++j) c[j] = static_cast<std::uint8_t>(q[j] + 16);
    detail::pack_5bit(c, b.qs, b.qh);
  }
  static float dot(const block& w, const q8_0::block* a) {
    int c[32];
    detail::unpack_5bit(w.qs, w.qh, c);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += (c[j] - 16) * a->qs[j];
    return to_f32(w.d) * to_f32(a->d) * static_cast<float>(sum);
  }
};
static_assert(sizeof(q5_0::block) == 22 && offsetof(q5_0::block, d) == 0 && offsetof(q5_0::block, qh) == 2 &&
              offsetof(q5_0::block, qs) == 6);
static_assert(BlockFormat<q5_0>);

// q5_1: 32 weights share an f16 scale d and an f16 offset m; 5-bit codes q stored as in
// q5_0; w = d * q + m with q in 0 .. 31. 24 bytes per block, 6 bits per weight.
struct q5_1 {
  static constexpr type id = type::q5_1;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; gk::f16 m; std::uint8_t qh[4]; std::uint8_t qs[16]; };
  using dot_type = q8_1;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d), m = to_f32(b.m);
    int c[32];
    detail::unpack_5bit(b.qs, b.qh, c);
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(c[j]) * d + m;
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::uint8_t q[32];
    detail::fit_affine<32, 31>(x, importance, q, b.d.bits, b.m.bits);
    detail::pack_5bit(q, b.qs, b.qh);
  }
  // as q4_1: the activation sum from the codes, not the f16-rounded s
  static float dot(const block& w, const q8_1::block* a) {
    int c[32];
    detail::unpack_5bit(w.qs, w.qh, c);
    int sum = 0, sa = 0;
    for (int j = 0; j < 32; ++j) {
      sum += c[j] * a->qs[j];
      sa += a->qs[j];
    }
    const float da = to_f32(a->d);
    return to_f32(w.d) * da * static_cast<float>(sum) + to_f32(w.m) * (da * static_cast<float>(sa));
  }
};
static_assert(sizeof(q5_1::block) == 24 && offsetof(q5_1::block, d) == 0 && offsetof(q5_1::block, m) == 2 &&
              offsetof(q5_1::block, qh) == 4 && offsetof(q5_1::block, qs) == 8);
static_assert(BlockFormat<q5_1>);

// q1_0: 128 weights share an f16 scale d; bit j % 8 of byte j / 8 is weight j's sign:
// w = +d when set, -d when clear. 18 bytes per block, 1.125 bits per weight.
struct q1_0 {
  static constexpr type id = type::q1_0;
  static constexpr int block_size = 128;
  struct block { gk::f16 d; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d), nd = -d;
    for (int j = 0; j < 128; ++j) out[j] = ((b.qs[j / 8] >> (j % 8)) & 1) ? d : nd;
  }
  // With signs fixed by the weights, the error is sum w (|x| - d)^2: least at the
  // weighted mean of |x|; the halves either side of it are tried after rounding.
  static void encode(const float* x, block& b, const float* importance) {
    double sw = 0, swa = 0;
    for (int j = 0; j < 128; ++j) {
      const double w = importance ? importance[j] : 1.0;
      sw += w;
      swa += w * std::fabs(x[j]);
    }
    const std::uint16_t h0 = detail::f16_finite(sw > 0 ? static_cast<float>(swa / sw) : 0.0f);
    b.d.bits = h0;
    double best = -1;
    for (int step = -1; step <= 1; ++step) {
      std::uint16_t h;
      if (!detail::f16_step(h0, step, h)) continue;
      const float d = f16_to_f32(h);
      double err = 0;
      for (int j = 0; j < 128; ++j) {
        const double e = static_cast<double>(std::fabs(x[j])) - d;
        err += (importance ? importance[j] : 1.0) * e * e;
      }
      if (best < 0 || err < best) { best = err; b.d.bits = h; }
    }
    for (int j = 0; j < 16; ++j) {
      std::uint8_t bits = 0;
      for (int k = 0; k < 8; ++k) bits |= static_cast<std::uint8_t>((x[8 * j + k] >= 0.0f) << k);
      b.qs[j] = bits;
    }
  }
  // Four q8_0 blocks per weight block: a signed integer sum in each, scaled by its d.
  static float dot(const block& w, const q8_0::block* a) {
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
      int s = 0;
      for (int j = 0; j < 32; ++j) s += ((w.qs[4 * k + j / 8] >> (j % 8)) & 1) ? a[k].qs[j] : -a[k].qs[j];
      sum += to_f32(a[k].d) * static_cast<float>(s);
    }
    return to_f32(w.d) * sum;
  }
};
static_assert(sizeof(q1_0::block) == 18 && offsetof(q1_0::block, d) == 0 && offsetof(q1_0::block, qs) == 2);
static_assert(BlockFormat<q1_0>);

// q2_0: 64 weights share an f16 scale d; bits 2 (j % 4) .. +1 of byte j / 4 are weight j's
// code q; w = d * (q - 1), so w/d is one of -1, 0, 1, 2. 18 bytes per block, 2.25 bits
// per weight.
struct q2_0 {
  static constexpr type id = type::q2_0;
  static constexpr int block_size = 64;
  struct block { gk::f16 d; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 64; ++j) out[j] = static_cast<float>(((b.qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
  }
  static void encode(const float* x, block& b, const float* importance) {
    std::int8_t q[64];
    b.d.bits = detail::fit_scale<64, -1, 2>(x, importance, q);
    for (int j = 0; j < 16; ++j) {
      std::uint8_t bits = 0;
      for (int k = 0; k < 4; ++k) bits |= static_cast<std::uint8_t>((q[4 * j + k] + 1) << (2 * k));
      b.qs[j] = bits;
    }
  }
  // Two q8_0 blocks per weight block: an integer sum in each, scaled by its d.
  static float dot(const block& w, const q8_0::block* a) {
    float sum = 0.0f;
    for (int k = 0; k < 2; ++k) {
      int s = 0;
      for (int j = 0; j < 32; ++j) s += (((w.qs[8 * k + j / 4] >> (2 * (j % 4))) & 3) - 1) * a[k].qs[j];
      sum += to_f32(a[k].d) * static_cast<float>(s);
    }
    return to_f32(w.d) * sum;
  }
};
static_assert(sizeof(q2_0::block) == 18 && offsetof(q2_0::block, d) == 0 && offsetof(q2_0::block, qs) == 2);
static_assert(BlockFormat<q2_0>);

}  // namespace gk::formats

GK_EXACT_FP_END
