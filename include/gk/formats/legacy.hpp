// SPDX-License-Identifier: MIT
// The 32-weight formats with one scale per block (q4_0 … q8_1), the activation formats
// q8_0/q8_1 that dots pair them with, and the low-bit q1_0/q2_0.
// Every weight is w = d * q (+ m for the _1 variants) with d (and m) stored as f16.
//
// Encoders are searches for the least importance-weighted squared error, not max-abs
// rules. For w = d * q with q in a range of integers the search is exact before rounding:
// as 1/d grows, each weight's nearest code changes at known points, so sweeping those
// points in order visits every assignment nearest rounding can produce, and each gets its
// least-squares d. The best few d are then rounded to f16 (and the halves either side
// tried), with the codes chosen again for the rounded d, since that is the d decoded.
// The affine _1 formats search a grid of scales around (max - min) / qmax instead, each
// refined by weighted least squares on (d, m) and re-rounded.
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

// Importance weights of a block: the given ones, or all 1.
template <int N>
std::array<float, N> weights_of(const float* importance) noexcept {
  std::array<float, N> w;
  for (int i = 0; i < N; ++i) w[i] = importance ? importance[i] : 1.0f;
  return w;
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

// Visits, in order of growing t = 1/d > 0, every code assignment q_i = clamp(round(t x_i),
// lo, hi) and offers each one's least-squares scale. Element i changes code where t x_i
// crosses a half-integer, so the assignments are the prefixes of the sorted crossings.
template <int N, int lo, int hi, int K>
void sweep_scales(const float* x, const float* w, best_scales<K>& out) {
  static_assert(lo <= 0 && hi >= 0 && hi - lo >= 1, "the code range must contain 0 and one more code");
  struct crossing { float t; std::uint16_t i; std::int8_t to; };
  std::array<crossing, N * (hi - lo)> ev;
  int ne = 0;
  for (int i = 0; i < N; ++i) {
    if (x[i] > 0.0f)
      for (int c = 0; c < hi; ++c) ev[ne++] = {(c + 0.5f) / x[i], static_cast<std::uint16_t>(i), static_cast<std::int8_t>(c + 1)};
    else if (x[i] < 0.0f)
      for (int c = 0; c > lo; --c) ev[ne++] = {(c - 0.5f) / x[i], static_cast<std::uint16_t>(i), static_cast<std::int8_t>(c - 1)};
  }
  std::sort(ev.begin(), ev.begin() + ne,
            [](const crossing& a, const crossing& b) { return a.t < b.t || (a.t == b.t && a.i < b.i); });
  std::array<std::int8_t, N> cur{};
  double sxq = 0.0, sqq = 0.0;
  for (int k = 0; k < ne; ++k) {
    const int i = ev[k].i, from = cur[i], to = ev[k].to;
    sxq += static_cast<double>(w[i]) * x[i] * (to - from);
    sqq += static_cast<double>(w[i]) * (to * to - from * from);
    cur[i] = static_cast<std::int8_t>(to);
    if (sqq > 0.0 && sxq > 0.0) out.offer(static_cast<float>(sxq / sqq), sxq * sxq / sqq);
  }
}

// Nearest codes in [lo, hi] for the decoded scale d != 0, and their weighted error.
template <int N, int lo, int hi>
double codes_for_scale(const float* x, const float* w, float d, std::int8_t* q) noexcept {
  double err = 0.0;
  for (int i = 0; i < N; ++i) {
    const float t = std::clamp(x[i] / d, static_cast<float>(lo), static_cast<float>(hi));
    const int c = static_cast<int>(std::nearbyint(t));
    q[i] = static_cast<std::int8_t>(c);
    const double e = static_cast<double>(x[i]) - static_cast<float>(c) * d;
    err += w[i] * e * e;
  }
  return err;
}

// w = d * q, q in [lo, hi], d an f16: the least weighted-error scale and codes. When the
// range is not symmetric, d < 0 is searched too, as d' = -d > 0 with codes in [-hi, -lo].
// Returns d's bits; q gets the codes.
template <int N, int lo, int hi>
std::uint16_t fit_scale(const float* x, const float* importance, std::int8_t* q) {
  const auto w = weights_of<N>(importance);
  constexpr int K = 6;
  best_scales<K> pos, neg;
  sweep_scales<N, lo, hi>(x, w.data(), pos);
  if constexpr (lo != -hi) sweep_scales<N, -hi, -lo>(x, w.data(), neg);  // d = -d', q = -q'
  std::uint16_t best_h = 0;
  double best = 0.0;
  for (int i = 0; i < N; ++i) best += static_cast<double>(w[i]) * x[i] * x[i];  // d = 0
  std::array<std::int8_t, N> tmp;
  for (int k = 0; k < pos.n + neg.n; ++k) {
    const std::uint16_t h0 = f16_finite(k < pos.n ? pos.d[k] : -neg.d[k - pos.n]);
    for (int step = -1; step <= 1; ++step) {
      std::uint16_t h;
      if (!f16_step(h0, step, h)) continue;
      const float d = f16_to_f32(h);
      if (d == 0.0f) continue;
      const double err = codes_for_scale<N, lo, hi>(x, w.data(), d, tmp.data());
      if (err < best) { best = err; best_h = h; }
    }
  }
  if ((best_h & 0x7fffu) == 0) {
    for (int i = 0; i < N; ++i) q[i] = 0;
    return 0;
  }
  codes_for_scale<N, lo, hi>(x, w.data(), f16_to_f32(best_h), q);
  return best_h;
}

// w = d * q + m, q in [0, qmax], d and m f16: the codes and halves of least weighted
// error found from a grid of scales (0.8 .. 1.1 of (max - min) / qmax, the low end anchored
// at the minimum, the maximum or between), each refined twice by weighted least squares
// on (d, m) with the codes chosen again for the rounded halves; the best is then polished
// over the neighbouring halves of d and m.
template <int N, int qmax>
void fit_affine(const float* x, const float* importance, std::uint8_t* q, std::uint16_t& dh, std::uint16_t& mh) {
  const auto w = weights_of<N>(importance);
  float mn = x[0], mx = x[0];
  for (int i = 1; i < N; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
  std::array<std::uint8_t, N> tmp;
  // codes for the decoded (d, m) and the weighted error, decoding as decode does
  auto assign = [&](float d, float m, std::uint8_t* qq) {
    double err = 0.0;
    for (int i = 0; i < N; ++i) {
      const float t = d != 0.0f ? std::clamp((x[i] - m) / d, 0.0f, static_cast<float>(qmax)) : 0.0f;
      const int c = static_cast<int>(std::nearbyint(t));
      qq[i] = static_cast<std::uint8_t>(c);
      const float y = static_cast<float>(c) * d + m;
      const double e = static_cast<double>(x[i]) - y;
      err += w[i] * e * e;
    }
    return err;
  };
  mh = f16_finite(mn);
  dh = 0;
  double best = assign(0.0f, f16_to_f32(mh), q);
  auto consider = [&](std::uint16_t hd, std::uint16_t hm) {
    const double err = assign(f16_to_f32(hd), f16_to_f32(hm), tmp.data());
    if (err < best) { best = err; dh = hd; mh = hm; std::copy(tmp.begin(), tmp.end(), q); }
  };
  if (mx == mn) {  // constant: m carries the value, d * q what rounding m to f16 lost
    const float r = mn - f16_to_f32(mh);
    if (r != 0.0f)
      for (int c = 1; c <= qmax; ++c) consider(f16_finite(r / static_cast<float>(c)), mh);
    return;
  }
  const float range = mx - mn;
  if (!(range < std::numeric_limits<float>::infinity())) return;  // past float: keep m alone
  for (int is = 0; is <= 24; ++is) {
    const float d0 = range / qmax * (0.8f + 0.0125f * is);
    for (int anchor = 0; anchor < 3; ++anchor) {
      const float slack = range - d0 * qmax;  // negative: the codes cannot span the range
      float m = mn + (anchor == 0 ? 0.0f : anchor == 1 ? slack : 0.5f * slack);
      float d = d0;
      for (int it = 0; it < 3; ++it) {
        // codes for (d, m), then the weighted least-squares (d, m) for those codes
        double sw = 0, swq = 0, swqq = 0, swx = 0, swxq = 0;
        for (int i = 0; i < N; ++i) {
          const float t = std::clamp((x[i] - m) / d, 0.0f, static_cast<float>(qmax));
          const double c = std::nearbyint(t);
          sw += w[i]; swq += w[i] * c; swqq += w[i] * c * c; swx += w[i] * x[i]; swxq += w[i] * x[i] * c;
        }
        const double det = sw * swqq - swq * swq;
        if (!(det > 0.0)) break;
        const double nd = (sw * swxq - swq * swx) / det, nm = (swqq * swx - swq * swxq) / det;
        if (!(nd > 0.0)) break;
        const std::uint16_t hd = f16_finite(static_cast<float>(nd)), hm = f16_finite(static_cast<float>(nm));
        consider(hd, hm);
        d = f16_to_f32(hd);
        m = f16_to_f32(hm);
        if (d == 0.0f) break;
      }
    }
  }
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
