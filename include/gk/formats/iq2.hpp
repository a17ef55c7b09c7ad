// SPDX-License-Identifier: MIT
// The 2-bit lattice formats iq2_xxs, iq2_xs and iq2_s. A 256-weight super-block has one
// f16 scale d; groups of 8 weights are one point of a fixed grid (iq2xxs_grid: 256
// points, iq2xs_grid: 512, iq2s_grid: 1024; every coordinate is 8, 25 or 43) with a sign
// per weight, times a 4-bit sub-block scale s: w = d * (0.5 + s) * 0.25 * grid * sign,
// that is d * (2s+1)/8 * grid * sign. iq2_xxs and iq2_xs spend 7 bits on the signs of a
// group: the eighth is implied, so the count of negative weights is even (ksigns_iq2xs);
// iq2_s stores all 8. All three dot with q8_K activations.
//
// Encoding is gk's own search for the least weighted squared error sum imp_i*(x_i - w_i)^2
// (imp_i = 1 without importance: a null importance is uniform importance, also for
// iq2_xxs and iq2_xs, which the reference refuses to encode without one). For a fixed
// group scale S the best grid point and signs of a group are found exactly, over the
// whole grid: with the signs of x, point p costs S^2 B_p - 2 S A_p (plus a constant), where
// A_p = sum w|x| p and B_p = sum w p^2; where the sign count must be even and x's is odd,
// the cheapest single flip adds 4 S min_j w_j|x_j| p_j, which is taken off A_p. A_p and B_p
// are computed once per group for every grid point, so trying a scale is one vectorised
// pass of S*B_p - 2A_p over the grid. Then:
//   1. each sub-block gets its best real scale: a sweep of scales that put its largest
//      magnitude near the top coordinate 43 (and, for flat sub-blocks, near 25 or 8), the
//      best refined by least squares on its points (Lloyd steps) while the error falls;
//   2. candidate f16 super-block scales are ranked by how well odd multiples of d/8 meet
//      the sub-block targets (each miss weighted by its sub-block's curvature), and the
//      best four are tried exactly: each sub-block takes, of the two odd scales either side
//      of its target, the one whose re-chosen points err least;
//   3. d is refitted by least squares to the chosen scales and points, rounded to f16 and
//      the choice repeated while the error falls.
// More d candidates or more sub-block scales per candidate gain under 0.1%: the error left
// is the grid's. Measured against the reference's encoders (1000 rows of 1024 from each of
// 5 distributions, with and without importance): sqrt(error ratio) 0.73-0.96 (constant
// rows, which have an exact code here, ~0); about 0.8, 1.5 and 2.8 ms per 4096-weight row
// (iq2_xxs, iq2_xs, iq2_s) here against the reference's 1.3, 2.5 and 0.8 ms.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/codebooks.inc"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace iq2 {

// ---- decoding pieces ------------------------------------------------------------------

// Coordinate j of a packed grid point (one byte per coordinate, coordinate 0 lowest).
constexpr int coord(std::uint64_t point, int j) noexcept { return static_cast<int>((point >> (8 * j)) & 0xffu); }

// The 8-bit sign mask of a 7-bit sign index: bit 7 makes the count of set bits even.
constexpr std::uint8_t signs_of(int index) noexcept { return codebooks::ksigns_iq2xs[index & 127]; }

// One group: out[j] = (db * grid_j), negated where sign bit j is set. db is the sub-block
// scale d * (0.5 + s) * 0.25, formed by the caller in that order.
inline void decode_group(float db, std::uint64_t point, unsigned signs, float* out) noexcept {
  for (int j = 0; j < 8; ++j) {
    const float v = db * static_cast<float>(coord(point, j));
    out[j] = (signs >> j) & 1u ? -v : v;
  }
}

// The integer dot of one group with 8 activations: sum grid_j * sign_j * q_j.
inline int dot_group(std::uint64_t point, unsigned signs, const std::int8_t* q) noexcept {
  int s = 0;
  for (int j = 0; j < 8; ++j) {
    const int v = coord(point, j) * q[j];
    s += (signs >> j) & 1u ? -v : v;
  }
  return s;
}

inline float sub_scale(float d, int s) noexcept { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

// ---- the encoder's search -----------------------------------------------------------------

// Four floats at a time for the passes over the grid: GCC/clang vector extensions (SSE2 and
// NEON width, so no ABI questions), elementwise arrays elsewhere.
#if defined(__GNUC__) || defined(__clang__)
using lanes = float __attribute__((vector_size(16)));
inline lanes splat(float x) noexcept { return lanes{x, x, x, x}; }
inline lanes vmin(lanes a, lanes b) noexcept { return a < b ? a : b; }
inline float hmin(lanes a) noexcept {
  float r = a[0];
  for (int i = 1; i < 4; ++i) r = a[i] < r ? a[i] : r;
  return r;
}
#else
struct lanes {
  float v[4];
  friend lanes operator+(lanes a, lanes b) noexcept { for (int i = 0; i < 4; ++i) a.v[i] += b.v[i]; return a; }
  friend lanes operator-(lanes a, lanes b) noexcept { for (int i = 0; i < 4; ++i) a.v[i] -= b.v[i]; return a; }
  friend lanes operator*(lanes a, lanes b) noexcept { for (int i = 0; i < 4; ++i) a.v[i] *= b.v[i]; return a; }
};
inline lanes splat(float x) noexcept { lanes r; for (float& v : r.v) v = x; return r; }
inline lanes vmin(lanes a, lanes b) noexcept { for (int i = 0; i < 4; ++i) a.v[i] = b.v[i] < a.v[i] ? b.v[i] : a.v[i]; return a; }
inline float hmin(lanes a) noexcept { float r = a.v[0]; for (int i = 1; i < 4; ++i) r = a.v[i] < r ? a.v[i] : r; return r; }
#endif
inline lanes load(const float* p) noexcept { lanes v; std::memcpy(&v, p, sizeof v); return v; }
inline void store(float* p, lanes v) noexcept { std::memcpy(p, &v, sizeof v); }

// A grid as the search reads it: floats of its N points, four points at a time, coordinate
// by coordinate (g[8p + 4j + i] is coordinate j of point p + i, p a multiple of 4), so a
// pass over the grid reads memory in order. Derived from the codebook at first use.
template <int N>
struct lattice {
  float g[8 * N];
  float at(int p, int j) const noexcept { return g[8 * (p & ~3) + 4 * j + (p & 3)]; }
};

template <int N>
const lattice<N>& lattice_of() {
  static const lattice<N>* const table = [] {
    auto* t = new lattice<N>;
    const std::uint64_t* grid = N == 256   ? codebooks::iq2xxs_grid
                                : N == 512 ? codebooks::iq2xs_grid
                                           : codebooks::iq2s_grid;
    for (int p = 0; p < N; ++p)
      for (int j = 0; j < 8; ++j) t->g[8 * (p & ~3) + 4 * j + (p & 3)] = static_cast<float>(coord(grid[p], j));
    return t;
  }();
  return *table;
}

// The search over one super-block for a grid of N points, sign counts forced even or not,
// and one 4-bit scale per `per_scale` weights. Fills d (an f16 value), the scale codes s
// (0..15), and per group of 8 the point index and the 8-bit sign mask.
template <int N, bool even_signs, int per_scale>
struct search {
  static constexpr int n_groups = qk_k / 8;
  static constexpr int n_sub = qk_k / per_scale;
  static constexpr int gps = per_scale / 8;  // groups per sub-block
  static constexpr float top = 43.0f;        // the largest grid coordinate

  struct result {
    float d;
    std::uint8_t s[n_sub];
    std::uint16_t point[n_groups];
    std::uint8_t signs[n_groups];
  };

  // Per group, for every point p: A2[p] = 2 A'_p (A' with the parity flip taken off) and
  // B[p]; S*(S*B[p] - A2[p]) is the point's error at scale S less the constant sum w x^2.
  struct tables {
    std::vector<float> buf;  // n_groups * 2 * N
    float* A2(int g) { return buf.data() + static_cast<std::size_t>(2 * g) * N; }
    float* B(int g) { return buf.data() + static_cast<std::size_t>(2 * g + 1) * N; }
  };

  static tables& scratch() {
    thread_local tables t;
    if (t.buf.size() != static_cast<std::size_t>(2 * n_groups) * N) t.buf.assign(static_cast<std::size_t>(2 * n_groups) * N, 0.0f);
    return t;
  }

  // min over points of S*B - A2: one pass over the grid, in two chains of four lanes
  static float group_min(const float* A2, const float* B, float S) noexcept {
    const lanes s = splat(S);
    lanes m0 = splat(std::numeric_limits<float>::max()), m1 = m0;  // two chains
    for (int p = 0; p < N; p += 8) {
      m0 = vmin(m0, s * load(B + p) - load(A2 + p));
      m1 = vmin(m1, s * load(B + p + 4) - load(A2 + p + 4));
    }
    return hmin(vmin(m0, m1));
  }
  // the first point attaining group_min (the same float expression, so equality holds)
  static int group_argmin(const float* A2, const float* B, float S) noexcept {
    const float m = group_min(A2, B, S);
    for (int p = 0; p < N; ++p)
      if (S * B[p] - A2[p] == m) return p;
    int best = 0;  // only if a compiler evaluated the two passes differently
    float bv = std::numeric_limits<float>::max();
    for (int p = 0; p < N; ++p) {
      const float v = S * B[p] - A2[p];
      if (v < bv) { bv = v; best = p; }
    }
    return best;
  }

  // error (less the constant) of sub-block k at scale S, points chosen exactly
  static float sub_error(tables& t, int k, float S) noexcept {
    float sum = 0.0f;
    for (int g = k * gps; g < (k + 1) * gps; ++g) sum += group_min(t.A2(g), t.B(g), S);
    return S * sum;
  }
  // least-squares scale for the points best at S: sum A' / sum B, with the curvature sum B
  static float sub_refit(tables& t, int k, float S, float& curv) noexcept {
    float a = 0.0f, b = 0.0f;
    for (int g = k * gps; g < (k + 1) * gps; ++g) {
      const int p = group_argmin(t.A2(g), t.B(g), S);
      a += t.A2(g)[p];
      b += t.B(g)[p];
    }
    curv = b;
    return b > 0.0f ? 0.5f * a / b : 0.0f;
  }

  // each sub-block picks the better of the odd scales either side of its target for d;
  // returns the total error (less the constant)
  static float choose(tables& t, const float* target, float d, std::uint8_t* s) noexcept {
    float total = 0.0f;
    const float unit = d * 0.125f;
    for (int k = 0; k < n_sub; ++k) {
      const float r = target[k] / unit;  // the wanted odd multiple 2s+1
      int lo = static_cast<int>(std::floor((std::min(std::max(r, 1.0f), 31.0f) - 1.0f) * 0.5f));
      lo = std::min(std::max(lo, 0), 15);
      const int hi = std::min(lo + 1, 15);
      float best = std::numeric_limits<float>::max();
      for (int c = lo; c <= hi; ++c) {
        const float e = sub_error(t, k, unit * static_cast<float>(2 * c + 1));
        if (e < best) { best = e; s[k] = static_cast<std::uint8_t>(c); }
      }
      total += best;
    }
    return total;
  }

  static void run(const float* x, const float* importance, result& r) {
    const lattice<N>& L = lattice_of<N>();
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    float amax = 0.0f;
    for (int i = 0; i < qk_k; ++i) amax = std::max(amax, std::fabs(x[i]));
    std::memset(&r, 0, sizeof r);
    if (!(amax > 0.0f) || !std::isfinite(amax)) return;

    // the tables, and the signs of x per group
    tables& t = scratch();
    bool odd[n_groups];
    for (int g = 0; g < n_groups; ++g) {
      const float* xg = x + 8 * g;
      const float* wg = w + 8 * g;
      float a[8];
      unsigned sg = 0;
      for (int j = 0; j < 8; ++j) {
        a[j] = wg[j] * std::fabs(xg[j]);
        if (xg[j] < 0.0f) sg |= 1u << j;
      }
      r.signs[g] = static_cast<std::uint8_t>(sg);
      odd[g] = even_signs && (std::popcount(sg) & 1);
      float* A2 = t.A2(g);
      float* B = t.B(g);
      // A2 and B four points at a time
      const lanes f = splat(odd[g] ? 2.0f : 0.0f), two = splat(2.0f);
      lanes av[8], wv[8];
      for (int j = 0; j < 8; ++j) { av[j] = splat(a[j]); wv[j] = splat(wg[j]); }
      for (int p = 0; p < N; p += 4) {
        lanes sa = splat(0.0f), sb = splat(0.0f), mn = splat(std::numeric_limits<float>::max());
        for (int j = 0; j < 8; ++j) {
          const lanes c = load(L.g + 8 * p + 4 * j);
          const lanes v = av[j] * c;
          sa = sa + v;
          sb = sb + wv[j] * (c * c);
          mn = vmin(mn, v);
        }
        // an odd sign count must flip the cheapest sign, 4 S min_j a_j g_j: take 2 min off A
        store(A2 + p, two * (sa - f * mn));
        store(B + p, sb);
      }
    }

    // step 1: the best real scale of each sub-block, and its curvature
    float target[n_sub], curv[n_sub];
    float smax = 0.0f;
    for (int k = 0; k < n_sub; ++k) {
      float m = 0.0f;
      for (int i = k * per_scale; i < (k + 1) * per_scale; ++i) m = std::max(m, std::fabs(x[i]));
      target[k] = 0.0f;
      curv[k] = 0.0f;
      if (!(m > 0.0f)) continue;
      const float base = m / top;
      float bestS = base, best = std::numeric_limits<float>::max();
      // the largest magnitude near the top coordinate 43, and (for flat sub-blocks, where
      // a grid point of equal coordinates fits) near 25 and 8
      constexpr float factor[] = {0.6f, 0.687f, 0.786f, 0.9f, 1.03f, 1.18f, 1.35f, 1.55f, 43.0f / 25.0f, 43.0f / 8.0f};
      for (float fct : factor) {
        const float S = base * fct;
        const float e = sub_error(t, k, S);
        if (e < best) { best = e; bestS = S; }
      }
      float c = 0.0f;
      for (int it = 0; it < 3; ++it) {
        const float S = sub_refit(t, k, bestS, c);
        if (!(S > 0.0f)) break;
        const float e = sub_error(t, k, S);
        if (!(e < best)) break;
        best = e;
        bestS = S;
      }
      sub_refit(t, k, bestS, c);
      target[k] = bestS;
      curv[k] = c;
      smax = std::max(smax, bestS);
    }
    if (!(smax > 0.0f)) return;

    // step 2: candidate d ranked by the weighted miss of the targets, the best few tried
    constexpr int keep = 4;  // 8, or 2 more scales per sub-block, gain under 0.1%
    float cand[keep], cerr[keep];
    int nc = 0;
    const float d0 = 8.0f * smax / 31.0f;
    for (int i = 0; i < 48; ++i) {
      const float d = kq::f16_round(d0 * (0.88f + 0.01f * static_cast<float>(i)));
      if (!(d > 0.0f)) continue;
      bool dup = false;
      for (int m = 0; m < nc; ++m) dup |= cand[m] == d;
      if (dup) continue;
      const float unit = d * 0.125f;
      float e = 0.0f;
      for (int k = 0; k < n_sub; ++k) {
        const float rr = std::min(std::max(target[k] / unit, 1.0f), 31.0f);
        const float l = 2.0f * std::nearbyint((rr - 1.0f) * 0.5f) + 1.0f;
        const float miss = unit * l - target[k];
        e += curv[k] * miss * miss;
      }
      int pos = nc < keep ? nc++ : keep;
      for (; pos > 0 && cerr[pos - 1] > e; --pos)
        if (pos < keep) { cand[pos] = cand[pos - 1]; cerr[pos] = cerr[pos - 1]; }
      if (pos < keep) { cand[pos] = d; cerr[pos] = e; }
    }
    float best = std::numeric_limits<float>::max(), best_d = 0.0f;
    std::uint8_t s[n_sub], try_s[n_sub];
    for (int c = 0; c < nc; ++c) {
      const float e = choose(t, target, cand[c], try_s);
      if (e < best) { best = e; best_d = cand[c]; std::copy(try_s, try_s + n_sub, s); }
    }

    // step 3: least-squares refit of d to the chosen scales and points
    for (int it = 0; it < 3 && best_d > 0.0f; ++it) {
      float num = 0.0f, den = 0.0f;
      for (int k = 0; k < n_sub; ++k) {
        const float l = static_cast<float>(2 * s[k] + 1);
        const float S = best_d * 0.125f * l;
        for (int g = k * gps; g < (k + 1) * gps; ++g) {
          const int p = group_argmin(t.A2(g), t.B(g), S);
          num += l * 0.5f * t.A2(g)[p];
          den += l * l * t.B(g)[p];
        }
      }
      if (!(den > 0.0f)) break;
      const float d = kq::f16_round(8.0f * num / den);
      if (!(d > 0.0f) || d == best_d) break;
      const float e = choose(t, target, d, try_s);
      if (!(e < best)) break;
      best = e; best_d = d; std::copy(try_s, try_s + n_sub, s);
    }
    if (!(best < 0.0f)) return;  // no better than all zeros

    // the points and signs for the final scales
    r.d = best_d;
    std::copy(s, s + n_sub, r.s);
    for (int g = 0; g < n_groups; ++g) {
      const int k = g / gps;
      const float S = best_d * 0.125f * static_cast<float>(2 * s[k] + 1);
      const int p = group_argmin(t.A2(g), t.B(g), S);
      r.point[g] = static_cast<std::uint16_t>(p);
      if (odd[g]) {  // flip the sign that costs least: min_j w_j |x_j| grid_j
        int jm = 0;
        float vm = std::numeric_limits<float>::max();
        for (int j = 0; j < 8; ++j) {
          const float v = w[8 * g + j] * std::fabs(x[8 * g + j]) * L.at(p, j);
          if (v < vm) { vm = v; jm = j; }
        }
        r.signs[g] ^= static_cast<std::uint8_t>(1u << jm);
      }
    }
  }
};

}  // namespace iq2

// iq2_xxs: per 32 weights, two 32-bit words (four u16 of qs, little-endian): the first
// holds four 8-bit indices into iq2xxs_grid (one per group of 8), the second four 7-bit
// sign indices (bits 7l..7l+6, into ksigns_iq2xs) and the 4-bit scale s (bits 28-31).
// w = d * (0.5 + s) * 0.25 * grid * sign. 66 bytes per 256 weights, 2.0625 bits per weight.
struct iq2_xxs {
  static constexpr type id = type::iq2_xxs;
  static constexpr int block_size = qk_k;
  struct block {
    gk::f16 d;
    std::uint16_t qs[qk_k / 8];
  };
  using dot_type = q8_K;

  static std::uint32_t word(const block& b, int i) noexcept {
    return static_cast<std::uint32_t>(b.qs[2 * i]) | static_cast<std::uint32_t>(b.qs[2 * i + 1]) << 16;
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int k = 0; k < 8; ++k) {
      const std::uint32_t idx = word(b, 2 * k), aux = word(b, 2 * k + 1);
      const float db = iq2::sub_scale(d, static_cast<int>(aux >> 28));
      for (int l = 0; l < 4; ++l)
        iq2::decode_group(db, codebooks::iq2xxs_grid[(idx >> (8 * l)) & 0xffu], iq2::signs_of((aux >> (7 * l)) & 127u),
                          out + 32 * k + 8 * l);
    }
  }

  // A null importance counts as uniform importance.
  static void encode(const float* x, block& b, const float* importance) {
    typename iq2::search<256, true, 32>::result r;
    iq2::search<256, true, 32>::run(x, importance, r);
    b.d = to_f16(r.d);
    for (int k = 0; k < 8; ++k) {
      std::uint32_t idx = 0, aux = static_cast<std::uint32_t>(r.s[k]) << 28;
      for (int l = 0; l < 4; ++l) {
        idx |= static_cast<std::uint32_t>(r.point[4 * k + l]) << (8 * l);
        aux |= static_cast<std::uint32_t>(r.signs[4 * k + l] & 127u) << (7 * l);
      }
      b.qs[4 * k] = static_cast<std::uint16_t>(idx);
      b.qs[4 * k + 1] = static_cast<std::uint16_t>(idx >> 16);
      b.qs[4 * k + 2] = static_cast<std::uint16_t>(aux);
      b.qs[4 * k + 3] = static_cast<std::uint16_t>(aux >> 16);
    }
  }

  // Integer sums per 32 weights times the odd scale 2s+1; scaled once, in float.
  static float dot(const block& w, const q8_K::block* a) {
    int bsum = 0;
    for (int k = 0; k < 8; ++k) {
      const std::uint32_t idx = word(w, 2 * k), aux = word(w, 2 * k + 1);
      int sumi = 0;
      for (int l = 0; l < 4; ++l)
        sumi += iq2::dot_group(codebooks::iq2xxs_grid[(idx >> (8 * l)) & 0xffu], iq2::signs_of((aux >> (7 * l)) & 127u),
                               a->qs + 32 * k + 8 * l);
      bsum += sumi * static_cast<int>(2 * (aux >> 28) + 1);
    }
    return (to_f32(w.d) * a->d) * static_cast<float>(bsum) * 0.125f;
  }
};
static_assert(sizeof(iq2_xxs::block) == 66 && offsetof(iq2_xxs::block, qs) == 2);
static_assert(BlockFormat<iq2_xxs>);

// iq2_xs: per group of 8 one u16 of qs: a 9-bit index into iq2xs_grid (bits 0-8) and a
// 7-bit sign index (bits 9-15, into ksigns_iq2xs). scales byte k holds the 4-bit scales
// of weights 32k..32k+15 (low nibble) and 32k+16..32k+31 (high nibble).
// w = d * (0.5 + s) * 0.25 * grid * sign. 74 bytes per 256 weights, 2.3125 bits per weight.
struct iq2_xs {
  static constexpr type id = type::iq2_xs;
  static constexpr int block_size = qk_k;
  struct block {
    gk::f16 d;
    std::uint16_t qs[qk_k / 8];
    std::uint8_t scales[qk_k / 32];
  };
  using dot_type = q8_K;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int h = 0; h < 16; ++h) {
      const float db = iq2::sub_scale(d, (b.scales[h / 2] >> (4 * (h & 1))) & 0xf);
      for (int l = 0; l < 2; ++l) {
        const unsigned q = b.qs[2 * h + l];
        iq2::decode_group(db, codebooks::iq2xs_grid[q & 511u], iq2::signs_of(q >> 9), out + 16 * h + 8 * l);
      }
    }
  }

  // A null importance counts as uniform importance.
  static void encode(const float* x, block& b, const float* importance) {
    typename iq2::search<512, true, 16>::result r;
    iq2::search<512, true, 16>::run(x, importance, r);
    b.d = to_f16(r.d);
    for (int g = 0; g < 32; ++g)
      b.qs[g] = static_cast<std::uint16_t>(r.point[g] | (r.signs[g] & 127u) << 9);
    for (int k = 0; k < 8; ++k) b.scales[k] = static_cast<std::uint8_t>(r.s[2 * k] | r.s[2 * k + 1] << 4);
  }

  // Integer sums per 16 weights times the odd scale 2s+1; scaled once, in float.
  static float dot(const block& w, const q8_K::block* a) {
    int bsum = 0;
    for (int h = 0; h < 16; ++h) {
      int sumi = 0;
      for (int l = 0; l < 2; ++l) {
        const unsigned q = w.qs[2 * h + l];
        sumi += iq2::dot_group(codebooks::iq2xs_grid[q & 511u], iq2::signs_of(q >> 9), a->qs + 16 * h + 8 * l);
      }
      bsum += sumi * (2 * ((w.scales[h / 2] >> (4 * (h & 1))) & 0xf) + 1);
    }
    return (to_f32(w.d) * a->d) * static_cast<float>(bsum) * 0.125f;
  }
};
static_assert(sizeof(iq2_xs::block) == 74 && offsetof(iq2_xs::block, qs) == 2 &&
              offsetof(iq2_xs::block, scales) == 66);
static_assert(BlockFormat<iq2_xs>);

// iq2_s: per group g of 8, the low 8 bits of a 10-bit index into iq2s_grid in qs[g], its
// 8 sign bits (bit j set: weight j negative) in qs[32 + g], and the top 2 index bits in
// bits 2(g%4)..2(g%4)+1 of qh[g/4]. scales as iq2_xs: byte k, low nibble for weights
// 32k..32k+15, high nibble for 32k+16..32k+31. w = d * (0.5 + s) * 0.25 * grid * sign.
// 82 bytes per 256 weights, 2.5625 bits per weight.
struct iq2_s {
  static constexpr type id = type::iq2_s;
  static constexpr int block_size = qk_k;
  struct block {
    gk::f16 d;
    std::uint8_t qs[qk_k / 4];
    std::uint8_t qh[qk_k / 32];
    std::uint8_t scales[qk_k / 32];
  };
  using dot_type = q8_K;

  static std::uint64_t point(const block& b, int g) noexcept {
    return codebooks::iq2s_grid[b.qs[g] | ((b.qh[g / 4] >> (2 * (g % 4))) & 3u) << 8];
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int h = 0; h < 16; ++h) {
      const float db = iq2::sub_scale(d, (b.scales[h / 2] >> (4 * (h & 1))) & 0xf);
      for (int l = 0; l < 2; ++l) {
        const int g = 2 * h + l;
        iq2::decode_group(db, point(b, g), b.qs[32 + g], out + 8 * g);
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    typename iq2::search<1024, false, 16>::result r;
    iq2::search<1024, false, 16>::run(x, importance, r);
    std::memset(&b, 0, sizeof b);
    b.d = to_f16(r.d);
    for (int g = 0; g < 32; ++g) {
      b.qs[g] = static_cast<std::uint8_t>(r.point[g] & 0xffu);
      b.qs[32 + g] = r.signs[g];
      b.qh[g / 4] |= static_cast<std::uint8_t>((r.point[g] >> 8) << (2 * (g % 4)));
    }
    for (int k = 0; k < 8; ++k) b.scales[k] = static_cast<std::uint8_t>(r.s[2 * k] | r.s[2 * k + 1] << 4);
  }

  // Integer sums per 16 weights times the odd scale 2s+1; scaled once, in float.
  static float dot(const block& w, const q8_K::block* a) {
    int bsum = 0;
    for (int h = 0; h < 16; ++h) {
      int sumi = 0;
      for (int l = 0; l < 2; ++l) {
        const int g = 2 * h + l;
        sumi += iq2::dot_group(point(w, g), w.qs[32 + g], a->qs + 8 * g);
      }
      bsum += sumi * (2 * ((w.scales[h / 2] >> (4 * (h & 1))) & 0xf) + 1);
    }
    return (to_f32(w.d) * a->d) * static_cast<float>(bsum) * 0.125f;
  }
};
static_assert(sizeof(iq2_s::block) == 82 && offsetof(iq2_s::block, qs) == 2 && offsetof(iq2_s::block, qh) == 66 &&
              offsetof(iq2_s::block, scales) == 74);
static_assert(BlockFormat<iq2_s>);

}  // namespace gk::formats

GK_EXACT_FP_END
