// SPDX-License-Identifier: MIT
// The 3-bit lattice formats iq3_xxs and iq3_s. A 256-weight super-block has one f16 scale
// d and eight sub-blocks of 32 weights, each with a 4-bit scale s; the weights go in
// fours to a point of a codebook grid (iq3xxs_grid: 256 points, iq3s_grid: 512) whose
// coordinates are 8 positive levels, and every weight has its own sign bit (iq3_xxs:
// seven per eight weights, the eighth making the count of minus signs even).
//
// Both decode to w = D * (2s+1) * g * sign with D = d/4 (iq3_xxs) or d (iq3_s), so one
// encoder serves both. It is gk's own search for the least sum imp_i * (x_i - w_i)^2
// (imp = 1 without importance: a null importance is uniform importance):
//   1. for a fixed sub-block scale sigma = D*(2s+1) the best codes are found exactly: the
//      error of grid point g for a quad is sigma^2*A_g - 2*sigma*B_g, with A_g, B_g
//      (weighted sums of the point's levels against |x|) tabulated once per quad, so every
//      point of the grid is scored at two multiply-adds; signs follow x, and where iq3_xxs
//      needs an odd group of eight to flip one sign, every single flip is scored (more
//      flips only cost more) and the cheapest taken;
//   2. each sub-block gets a continuous scale from a sweep of starting scales (and starts
//      that put its largest |x| on a level the grid repeats four times), each refined by
//      a weighted least-squares step on its codes;
//   3. candidate super-block scales, each rounded to f16 first (the value decoded), let
//      every sub-block try the integer scales around its target with codes re-chosen;
//      the best is refitted by least squares to those integers and codes, re-rounded and
//      re-evaluated while the error falls, then its f16 neighbours are tried.
// The reference chooses codes before quantising the sub-block scales and never
// re-chooses them; re-choosing against the decoded scales is most of what this buys.
// Measured against the reference's encoders (1000 rows of 1024 from each distribution of
// tests/vs_ggml, with and without importance): sqrt(error ratio) 0.69-0.94 (iq3_xxs) and
// 0.15-0.91 (iq3_s) where the data vary, under 0.001 on constant rows (the grids fit a run
// of equal values only with their diagonal points, at scales the reference's sweep does
// not try); 4-5 ms (iq3_xxs) and 7-9 ms (iq3_s) of CPU per 4096-weight row at -O2 here,
// the reference's 2 and 1.3 ms.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace iq3 {

// ksigns_iq2xs[i] is i with bit 7 set to make the count of set bits even: a group of
// eight sign bits of even parity is stored as its low seven.
constexpr bool ksigns_are_parity_completion() {
  for (int i = 0; i < 128; ++i) {
    int ones = 0;
    for (int b = 0; b < 7; ++b) ones += (i >> b) & 1;
    if (codebooks::ksigns_iq2xs[i] != (i | ((ones & 1) << 7))) return false;
  }
  return true;
}
static_assert(ksigns_are_parity_completion(), "iq3_xxs encoding relies on ksigns_iq2xs completing even parity");

// Coordinate c of grid point g as a float, and its square: the codebook read once.
template <int N>
struct levels {
  float v[4][N], v2[4][N];
  float top, bottom;  // the largest and smallest coordinate
  float diagonal[8];  // the levels v for which (v, v, v, v) is a grid point
  int n_diagonal;
};

template <int N>
levels<N> make_levels(const std::uint32_t (&grid)[N]) {
  levels<N> t{};
  t.top = 0.0f;
  t.bottom = 255.0f;
  for (int g = 0; g < N; ++g)
    for (int c = 0; c < 4; ++c) {
      const float v = static_cast<float>((grid[g] >> (8 * c)) & 0xffu);
      t.v[c][g] = v;
      t.v2[c][g] = v * v;
      t.top = std::max(t.top, v);
      t.bottom = std::min(t.bottom, v);
    }
  t.n_diagonal = 0;
  for (int g = 0; g < N; ++g)
    if (t.v[0][g] == t.v[1][g] && t.v[0][g] == t.v[2][g] && t.v[0][g] == t.v[3][g] && t.n_diagonal < 8)
      t.diagonal[t.n_diagonal++] = t.v[0][g];
  return t;
}

inline const levels<256>& xxs_levels() {
  static const levels<256> t = make_levels(codebooks::iq3xxs_grid);
  return t;
}
inline const levels<512>& s_levels() {
  static const levels<512> t = make_levels(codebooks::iq3s_grid);
  return t;
}

// Smallest of e[0..N) and its first index. Eight running minima keep the loop free of
// the index (so it vectorises); the index is then found by a scan for the value, eight
// at a time.
template <int N>
inline float min_index(const float* e, int* idx) noexcept {
  float m[8];
  for (int k = 0; k < 8; ++k) m[k] = e[k];
  for (int g = 8; g < N; g += 8)
    for (int k = 0; k < 8; ++k) m[k] = e[g + k] < m[k] ? e[g + k] : m[k];
  float best = m[0];
  for (int k = 1; k < 8; ++k) best = m[k] < best ? m[k] : best;
  if (idx) {
    int g = 0;
    for (; g < N - 8; g += 8) {
      int hit = 0;
      for (int k = 0; k < 8; ++k) hit |= e[g + k] == best;
      if (hit) break;
    }
    while (g < N - 1 && !(e[g] == best)) ++g;
    *idx = g;
  }
  return best;
}

// The codes of one 32-weight sub-block: a grid index per quad and a sign mask per eight
// weights (bit m set: weight m of the eight is negative).
struct sub_codes {
  std::uint16_t grid[8];
  std::uint8_t signs[4];
};

// One sub-block prepared for scoring scales: |x|, error weights, the signs of x and, per
// quad and grid point, A = sum_c w_c v_c^2 and B = sum_c w_c |x_c| v_c.
template <int N, bool Parity>
struct sub_search {
  const levels<N>* lv;
  float t[32], w[32];
  float tw2;              // sum w |x|^2: the error of decoding zeros
  float tmax;
  std::uint8_t neg[4];    // signs of x per eight
  bool odd[4];            // iq3_xxs: that eight has an odd count of minus signs
  alignas(64) float A[8][N];
  alignas(64) float B[8][N];

  void prepare(const float* x, const float* wt, const levels<N>& L) noexcept {
    lv = &L;
    tw2 = 0.0f;
    tmax = 0.0f;
    for (int i = 0; i < 32; ++i) {
      t[i] = std::fabs(x[i]);
      w[i] = wt[i];
      tw2 += w[i] * t[i] * t[i];
      tmax = std::max(tmax, t[i]);
    }
    for (int k = 0; k < 4; ++k) {
      std::uint8_t s = 0;
      for (int i = 0; i < 8; ++i)
        if (x[8 * k + i] < 0.0f) s = static_cast<std::uint8_t>(s | (1u << i));
      neg[k] = s;
      odd[k] = Parity && (std::popcount(static_cast<unsigned>(s)) & 1);
    }
    for (int q = 0; q < 8; ++q) {
      const float* wq = w + 4 * q;
      const float* tq = t + 4 * q;
      const float wt0 = wq[0] * tq[0], wt1 = wq[1] * tq[1], wt2 = wq[2] * tq[2], wt3 = wq[3] * tq[3];
      for (int g = 0; g < N; ++g) {
        A[q][g] = wq[0] * L.v2[0][g] + wq[1] * L.v2[1][g] + wq[2] * L.v2[2][g] + wq[3] * L.v2[3][g];
        B[q][g] = wt0 * L.v[0][g] + wt1 * L.v[1][g] + wt2 * L.v[2][g] + wt3 * L.v[3][g];
      }
    }
  }

  // The least error of the sub-block decoded at scale sigma (> 0), with the codes that
  // reach it when out is given.
  float eval(float sigma, sub_codes* out) const noexcept {
    alignas(64) float E[2][N];
    alignas(64) float F[N];
    float total = tw2;
    const float s4 = 4.0f * sigma;
    for (int k = 0; k < 4; ++k) {
      float e[2];
      int gi[2] = {0, 0};
      for (int h = 0; h < 2; ++h) {
        const float* a = A[2 * k + h];
        const float* b = B[2 * k + h];
        float* eh = E[h];
        for (int g = 0; g < N; ++g) eh[g] = sigma * (sigma * a[g] - 2.0f * b[g]);
        e[h] = min_index<N>(eh, out || odd[k] ? &gi[h] : nullptr);
      }
      if (!odd[k]) {
        total += e[0] + e[1];
        if (out) {
          out->grid[2 * k] = static_cast<std::uint16_t>(gi[0]);
          out->grid[2 * k + 1] = static_cast<std::uint16_t>(gi[1]);
          out->signs[k] = neg[k];
        }
        continue;
      }
      // One of the eight signs must go against x: weight m then costs 4*sigma*w*|x|*v
      // more at every grid point. The point each quad holds now bounds every flip from
      // above, the grid's smallest level from below; only flips that may win are scanned.
      float best = std::numeric_limits<float>::infinity(), lb[8];
      int bm = 0;
      for (int m = 0; m < 8; ++m) {
        const int h = m / 4, c = m % 4;
        const float cost = s4 * w[8 * k + m] * t[8 * k + m];
        lb[m] = e[0] + e[1] + cost * lv->bottom;
        const float ub = e[0] + e[1] + cost * lv->v[c][gi[h]];
        if (ub < best) { best = ub; bm = m; }
      }
      int bg = gi[bm / 4];
      for (int m = 0; m < 8; ++m) {
        if (!(lb[m] < best)) continue;
        const int h = m / 4, c = m % 4;
        const float cost = s4 * w[8 * k + m] * t[8 * k + m];
        const float* v = lv->v[c];
        const float* eh = E[h];
        for (int g = 0; g < N; ++g) F[g] = eh[g] + cost * v[g];
        int gf = 0;
        const float o = min_index<N>(F, &gf) + e[1 - h];
        if (o < best) { best = o; bm = m; bg = gf; }
      }
      total += best;
      if (out) {
        const int h = bm / 4;
        out->grid[2 * k + h] = static_cast<std::uint16_t>(bg);
        out->grid[2 * k + 1 - h] = static_cast<std::uint16_t>(gi[1 - h]);
        out->signs[k] = static_cast<std::uint8_t>(neg[k] ^ (1u << bm));
      }
    }
    return total;
  }

  // Weighted sums for least squares on codes c: x ~ scale * a, with a_i = v_i * (+1 when
  // the code's sign is that of x, else -1), in the |x| frame: sum w a |x| and sum w a^2.
  void moments(const sub_codes& c, double& sat, double& saa) const noexcept {
    sat = 0.0;
    saa = 0.0;
    for (int i = 0; i < 32; ++i) {
      const int k = i / 8, m = i % 8;
      float a = lv->v[i % 4][c.grid[i / 4]];
      if (((c.signs[k] ^ neg[k]) >> m) & 1u) a = -a;
      sat += static_cast<double>(w[i]) * a * t[i];
      saa += static_cast<double>(w[i]) * a * a;
    }
  }
};

struct superblock_codes {
  gk::f16 d;
  int s[8];
  sub_codes codes[8];
};

// The search of the header comment for one super-block. unit is D/d (1/4 for iq3_xxs).
// Finite x give finite d (f16_round saturates).
template <int N, bool Parity>
superblock_codes fit_superblock(const float* x, const float* importance, const levels<N>& L, float unit) {
  superblock_codes r{};
  float amax = 0.0f;
  for (int i = 0; i < qk_k; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0.0f) || !std::isfinite(amax)) return r;  // d = 0: every weight decodes to 0
  // The search runs on x * p, p a power of two putting max |x| in [0.5, 1), so squared
  // errors stay far from float's limits; d is chosen and f16-rounded in the true scale.
  int ex = 0;
  std::frexp(amax, &ex);
  const float p = std::ldexp(1.0f, std::clamp(-ex, -100, 100));
  float xs[qk_k], w[qk_k];
  for (int i = 0; i < qk_k; ++i) xs[i] = x[i] * p;
  kq::error_weights(importance, qk_k, w);
  std::unique_ptr<sub_search<N, Parity>[]> sb(new sub_search<N, Parity>[8]);
  sub_codes tmp;

  // 2. continuous scales per sub-block
  float sig[8], sig_max = 0.0f;
  for (int j = 0; j < 8; ++j) {
    auto& S = sb[j];
    S.prepare(xs + 32 * j, w + 32 * j, L);
    sig[j] = 0.0f;
    if (!(S.tmax > 0.0f)) continue;
    float best = std::numeric_limits<float>::infinity();
    // Starts put the largest |x| on the top level (a sweep around it) or on a level the
    // grid repeats in all four coordinates: the only points that fit a run of equal
    // values, which the sweep misses (iq3_s repeats only its lowest level).
    for (int k = 0; k < 5 + L.n_diagonal; ++k) {
      float sigma = k < 5 ? S.tmax / (L.top * (0.8f + 0.1f * static_cast<float>(k))) : S.tmax / L.diagonal[k - 5];
      for (int pass = 0; pass < (k < 5 ? 2 : 1); ++pass) {
        // Errors are differences of sums of size tw2, so they carry noise near 1e-7*tw2;
        // a start must beat the best by more, or sub-blocks holding the same values may
        // pick different, equally exact scales that no one super-block scale serves.
        const float e = S.eval(sigma, &tmp);
        if (e < best - 1e-6f * S.tw2) { best = e; sig[j] = sigma; }
        double sat, saa;
        S.moments(tmp, sat, saa);
        if (!(sat > 0.0 && saa > 0.0)) break;
        sigma = static_cast<float>(sat / saa);
      }
    }
    sig_max = std::max(sig_max, sig[j]);
  }
  if (!(sig_max > 0.0f)) return r;  // all zeros: d = 0 decodes every weight to 0

  // 3. super-block scale
  int cs[8];
  sub_codes cc[8];
  auto evaluate = [&](float D) {
    float total = 0.0f;
    for (int j = 0; j < 8; ++j) {
      int s_lo = 0, s_hi = 0;
      if (sig[j] > 0.0f && D > 0.0f) {
        const float target = std::min((sig[j] / D - 1.0f) * 0.5f, 1e6f);
        const int s0 = static_cast<int>(std::floor(target));
        s_lo = std::clamp(s0, 0, 15);
        s_hi = std::clamp(s0 + 1, 0, 15);
      }
      float best = std::numeric_limits<float>::infinity();
      for (int s = s_lo; s <= s_hi; ++s) {
        const float e = D > 0.0f ? sb[j].eval(D * static_cast<float>(2 * s + 1), &tmp) : sb[j].tw2;
        if (e < best) {
          best = e;
          cs[j] = s;
          cc[j] = D > 0.0f ? tmp : sub_codes{};
        }
      }
      total += best;
    }
    return total;
  };
  float best_err = std::numeric_limits<float>::infinity(), best_d = 0.0f;
  auto consider = [&](float d) {
    const float e = evaluate(d * unit * p);
    if (e < best_err) {
      best_err = e;
      best_d = d;
      std::copy(cs, cs + 8, r.s);
      std::copy(cc, cc + 8, r.codes);
      return true;
    }
    return false;
  };
  for (const float m : {31.0f, 30.0f, 29.0f, 28.0f, 27.0f, 32.0f}) consider(kq::f16_round(sig_max / m / unit / p));

  for (int iter = 0; iter < 4; ++iter) {
    double sat = 0, saa = 0;
    for (int j = 0; j < 8; ++j) {
      double a, b;
      sb[j].moments(r.codes[j], a, b);
      const double f = 2 * r.s[j] + 1;
      sat += f * a;
      saa += f * f * b;
    }
    if (!(saa > 0.0 && sat > 0.0)) break;
    const float nd = kq::f16_round(static_cast<float>(sat / saa / unit / p));
    if (nd == best_d || !consider(nd)) break;
  }
  // the f16 values either side (those of a subnormal d are far apart)
  const std::uint16_t db = to_f16(best_d).bits;
  for (const int step : {-2, -1, 1, 2}) {
    const int nb = static_cast<int>(db) + step;
    if (nb <= 0 || nb >= 0x7c00) continue;
    consider(f16_to_f32(static_cast<std::uint16_t>(nb)));
  }
  r.d = to_f16(best_d);
  return r;
}

}  // namespace iq3

// iq3_xxs: 256 weights, f16 super-block scale d. qs[0..63] holds one iq3xxs_grid index
// per four weights (index 8j + k for weights 32j + 4k .. +3); qs[64 + 4j ..] holds, per
// 32-weight sub-block j, a little-endian 32-bit word: bits 7l..7l+6 the sign bits of
// weights 32j + 8l .. +7 (the eighth completed to even parity, see ksigns_iq2xs) and
// bits 28-31 the sub-block scale s. w = (d * (0.5 + s) * 0.5) * g * sign, g the grid
// point's byte for the weight (4 .. 62). 98 bytes per block, 3.0625 bits per weight.
struct iq3_xxs {
  static constexpr type id = type::iq3_xxs;
  static constexpr int block_size = qk_k;
  struct block { gk::f16 d; std::uint8_t qs[3 * qk_k / 8]; };
  using dot_type = q8_K;

  static std::uint32_t word(const block& b, int j) {
    const std::uint8_t* p = b.qs + qk_k / 4 + 4 * j;
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 8; ++j) {
      const std::uint32_t aux = word(b, j);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const std::uint8_t signs = codebooks::ksigns_iq2xs[(aux >> (7 * l)) & 127u];
        for (int m = 0; m < 8; ++m) {
          const std::uint32_t g = codebooks::iq3xxs_grid[b.qs[8 * j + 2 * l + m / 4]];
          const float v = static_cast<float>((g >> (8 * (m % 4))) & 0xffu);
          out[32 * j + 8 * l + m] = db * v * ((signs >> m) & 1u ? -1.0f : 1.0f);
        }
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    const auto r = iq3::fit_superblock<256, true>(x, importance, iq3::xxs_levels(), 0.25f);
    b.d = r.d;
    for (int j = 0; j < 8; ++j) {
      std::uint32_t aux = static_cast<std::uint32_t>(r.s[j]) << 28;
      for (int k = 0; k < 8; ++k) b.qs[8 * j + k] = static_cast<std::uint8_t>(r.codes[j].grid[k]);
      for (int l = 0; l < 4; ++l) aux |= static_cast<std::uint32_t>(r.codes[j].signs[l] & 127u) << (7 * l);
      for (int i = 0; i < 4; ++i) b.qs[qk_k / 4 + 4 * j + i] = static_cast<std::uint8_t>(aux >> (8 * i));
    }
  }

  // Integer sums per sub-block times 2s+1, one integer per block; the 1/4 of
  // (0.5 + s) * 0.5 = (2s+1)/4 applied last (exact).
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0;
    for (int j = 0; j < 8; ++j) {
      const std::uint32_t aux = word(w, j);
      int s = 0;
      for (int l = 0; l < 4; ++l) {
        const std::uint8_t signs = codebooks::ksigns_iq2xs[(aux >> (7 * l)) & 127u];
        for (int m = 0; m < 8; ++m) {
          const std::uint32_t g = codebooks::iq3xxs_grid[w.qs[8 * j + 2 * l + m / 4]];
          const int v = static_cast<int>((g >> (8 * (m % 4))) & 0xffu) * a->qs[32 * j + 8 * l + m];
          s += (signs >> m) & 1u ? -v : v;
        }
      }
      sum += s * static_cast<int>(2 * (aux >> 28) + 1);
    }
    return to_f32(w.d) * a->d * static_cast<float>(sum) * 0.25f;
  }
};
static_assert(sizeof(iq3_xxs::block) == 98 && offsetof(iq3_xxs::block, qs) == 2);
static_assert(BlockFormat<iq3_xxs>);

// iq3_s: 256 weights, f16 super-block scale d. The grid index of weights 32j + 4k .. +3
// is qs[8j + k] plus 256 * bit k of qh[j] (9 bits into iq3s_grid); signs[4j + l] holds
// the sign bits of weights 32j + 8l .. +7 (bit m set: negative); the 4-bit scale s of
// sub-block j is the low (j even) or high (j odd) nibble of scales[j / 2].
// w = (d * (1 + 2s)) * g * sign, g the grid point's byte for the weight (1 .. 15).
// 110 bytes per block, 3.4375 bits per weight.
struct iq3_s {
  static constexpr type id = type::iq3_s;
  static constexpr int block_size = qk_k;
  struct block {
    gk::f16 d;
    std::uint8_t qs[qk_k / 4];
    std::uint8_t qh[qk_k / 32];
    std::uint8_t signs[qk_k / 8];
    std::uint8_t scales[qk_k / 64];
  };
  using dot_type = q8_K;

  static int scale(const block& b, int j) { return (b.scales[j / 2] >> (4 * (j & 1))) & 0xf; }
  static std::uint32_t point(const block& b, int j, int k) {
    return codebooks::iq3s_grid[b.qs[8 * j + k] | (((b.qh[j] >> k) & 1u) << 8)];
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 8; ++j) {
      const float db = d * static_cast<float>(1 + 2 * scale(b, j));
      for (int i = 0; i < 32; ++i) {
        const float v = static_cast<float>((point(b, j, i / 4) >> (8 * (i % 4))) & 0xffu);
        out[32 * j + i] = db * v * ((b.signs[4 * j + i / 8] >> (i % 8)) & 1u ? -1.0f : 1.0f);
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    const auto r = iq3::fit_superblock<512, false>(x, importance, iq3::s_levels(), 1.0f);
    std::memset(&b, 0, sizeof b);
    b.d = r.d;
    for (int j = 0; j < 8; ++j) {
      for (int k = 0; k < 8; ++k) {
        b.qs[8 * j + k] = static_cast<std::uint8_t>(r.codes[j].grid[k] & 0xffu);
        b.qh[j] = static_cast<std::uint8_t>(b.qh[j] | ((r.codes[j].grid[k] >> 8) << k));
      }
      for (int l = 0; l < 4; ++l) b.signs[4 * j + l] = r.codes[j].signs[l];
      b.scales[j / 2] = static_cast<std::uint8_t>(b.scales[j / 2] | (r.s[j] << (4 * (j & 1))));
    }
  }

  // Integer sums per sub-block times 2s+1, one integer per block, scaled once.
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int i = 0; i < 32; ++i) {
        const int v = static_cast<int>((point(w, j, i / 4) >> (8 * (i % 4))) & 0xffu) * a->qs[32 * j + i];
        s += (w.signs[4 * j + i / 8] >> (i % 8)) & 1u ? -v : v;
      }
      sum += s * (1 + 2 * scale(w, j));
    }
    return to_f32(w.d) * a->d * static_cast<float>(sum);
  }
};
static_assert(sizeof(iq3_s::block) == 110 && offsetof(iq3_s::block, qs) == 2 && offsetof(iq3_s::block, qh) == 66 &&
              offsetof(iq3_s::block, signs) == 74 && offsetof(iq3_s::block, scales) == 106);
static_assert(BlockFormat<iq3_s>);

}  // namespace gk::formats

GK_EXACT_FP_END
