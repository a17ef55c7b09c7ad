// SPDX-License-Identifier: MIT
// The 1-bit-class lattice formats iq1_s and iq1_m. Weights come in groups of 8; a group is
// one point of the 2048-point lattice iq1s_grid (coordinates -1, 0, +1, 11 bits of index),
// shifted as a whole by +-1/8 (iq1s_delta / iq1m_delta) and multiplied by its sub-block's
// scale d * (2s + 1), s a 3-bit integer and d one f16 per 256 weights. Each weight thus
// takes one of three levels dl * {-1 + delta, delta, 1 + delta}. Dots pair them with q8_K.
//
// Encoding is gk's own search for the least error sum imp_i * (x_i - w_i)^2 (imp_i = 1
// when importance is null: the reference refuses to encode iq1_s without an imatrix, gk
// treats a null one as uniform). Its core is exact: for a fixed group scale and shift, the
// best lattice point of a group is found by taking each coordinate's best level and, when
// that pattern is off the lattice, a best-first search over the cheapest coordinate
// changes (pruned by the best point found so far; a full scan of the 2048 points if the
// search runs long). The pattern -> index map it uses is derived from iq1s_grid at first
// use. On top of that:
//   1. per sub-block, the best real scale: a sweep of starting scales, each refined by
//      alternating "best lattice points and shifts" and "least squares scale";
//   2. candidate f16 super-block scales d (the largest sub-block scale over a range of odd
//      multipliers), and for each every sub-block tries the two odd multipliers around its
//      target, re-chooses points and shifts, and keeps the least error;
//   3. d is refitted by least squares to the chosen integers and points, f16-rounded and
//      re-evaluated while the error falls; then each sub-block takes the best of all eight
//      multipliers of the final d;
//   4. all of it again for -x, i.e. for a negative d (the lattice is not symmetric), and
//      the smaller error kept.
// The search needs no row statistics, so both formats encode block by block.
// Measured against the reference's encoders (1000 rows of 1024 from each of 5
// distributions, with and without importance): sqrt(error ratio) 0.49-0.91 (constant
// rows ~0.001); about 5 ms per 4096-weight row here against the reference's 0.7 ms (iq1_s)
// and 2.6 ms (iq1_m).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace iq1 {

// ---- the lattice -------------------------------------------------------------------------
// A group's pattern is sum_j t_j * 3^j with t_j = coordinate j + 1 (0, 1, 2); coordinate j
// is byte j of the iq1s_grid entry.

inline constexpr int n_patterns = 6561;  // 3^8
inline constexpr int n_points = 2048;

struct lattice {
  std::int16_t index_of[n_patterns];  // lattice index of a pattern, -1 when off the lattice
  std::uint8_t lo[n_points], hi[n_points];  // pattern of coordinates 0-3 and 4-7 (0..80)
};

inline const lattice& grid() {
  static const lattice g = [] {
    lattice l{};
    std::fill(l.index_of, l.index_of + n_patterns, static_cast<std::int16_t>(-1));
    for (int k = 0; k < n_points; ++k) {
      int p = 0, pw = 1, half[2] = {0, 0};
      for (int j = 0; j < 8; ++j) {
        const int t = static_cast<std::int8_t>(codebooks::iq1s_grid[k] >> (8 * j)) + 1;
        p += t * pw;
        half[j / 4] += t * (j < 4 ? pw : pw / 81);
        pw *= 3;
      }
      l.index_of[p] = static_cast<std::int16_t>(k);
      l.lo[k] = static_cast<std::uint8_t>(half[0]);
      l.hi[k] = static_cast<std::uint8_t>(half[1]);
    }
    return l;
  }();
  return g;
}

// coordinate j (-1, 0, 1) of lattice point k
inline int coord(int k, int j) noexcept { return static_cast<std::int8_t>(codebooks::iq1s_grid[k] >> (8 * j)); }

// ---- the best lattice point of one group -------------------------------------------------

struct point { float err; int index; };

// The lattice point that minimises sum w_j (x_j - dl * (coord_j + delta))^2 over 8 weights,
// the levels computed in float exactly as the decoders do.
inline point best_point(const float* x, const float* w, float dl, float delta) noexcept {
  const lattice& g = grid();
  static constexpr int pow3[8] = {1, 3, 9, 27, 81, 243, 729, 2187};
  const float v[3] = {dl * (-1.0f + delta), dl * delta, dl * (1.0f + delta)};
  float c[8][3];
  int best_t[8], p = 0;
  float base = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float e0 = x[j] - v[0], e1 = x[j] - v[1], e2 = x[j] - v[2];
    c[j][0] = w[j] * e0 * e0;
    c[j][1] = w[j] * e1 * e1;
    c[j][2] = w[j] * e2 * e2;
    int bt = c[j][1] < c[j][0] ? 1 : 0;
    bt = c[j][2] < c[j][bt] ? 2 : bt;
    best_t[j] = bt;
    base += c[j][bt];
    p += bt * pow3[j];
  }
  if (g.index_of[p] >= 0) return {base, g.index_of[p]};

  // Off the lattice. The cheapest single coordinate change that lands on it bounds the
  // answer; changes cheaper than that bound are then combined best-first (sorted by added
  // cost, one per coordinate, each branch stopped when it cannot beat the best found).
  struct change { float cost; int step, j; };
  change ch[16];
  float best = std::numeric_limits<float>::infinity();
  int best_index = -1, n = 0;
  for (int j = 0; j < 8; ++j)
    for (int t = 0; t < 3; ++t)
      if (t != best_t[j]) {
        const change a{c[j][t] - c[j][best_t[j]], (t - best_t[j]) * pow3[j], j};
        const int k = g.index_of[p + a.step];
        if (k >= 0) {
          if (a.cost < best) { best = a.cost; best_index = k; }
        } else {
          ch[n++] = a;
        }
      }
  int m = 0;  // keep the off-lattice changes cheaper than the bound, sorted
  for (int i = 0; i < n; ++i) {
    if (!(ch[i].cost < best)) continue;
    const change a = ch[i];
    int k = m++;
    while (k > 0 && ch[k - 1].cost > a.cost) { ch[k] = ch[k - 1]; --k; }
    ch[k] = a;
  }
  int nodes = 0;
  struct walker {
    const lattice& g; const change* ch; int m; float& best; int& best_index; int& nodes;
    void operator()(int from, int pat, float cost, unsigned used) {
      for (int a = from; a < m; ++a) {
        if (cost + ch[a].cost >= best) return;
        if (used & (1u << ch[a].j)) continue;
        // pairs of this change with a later one are checked here; deeper sets recurse
        for (int b = a + 1; b < m; ++b) {
          const float cb = cost + ch[a].cost + ch[b].cost;
          if (cb >= best) break;
          if ((used | (1u << ch[a].j)) & (1u << ch[b].j)) continue;
          if (++nodes > 400) return;
          const int k = g.index_of[pat + ch[a].step + ch[b].step];
          if (k >= 0) { best = cb; best_index = k; }
        }
        if (++nodes > 400) return;
        (*this)(a + 1, pat + ch[a].step, cost + ch[a].cost, used | (1u << ch[a].j));
      }
    }
  };
  walker{g, ch, m, best, best_index, nodes}(0, p, 0.0f, 0u);
  if (nodes > 400 || best_index < 0) {
    // full scan: per-half costs of every 4-coordinate pattern, then every point
    float lo[81], hi[81];
    for (int h = 0; h < 2; ++h) {
      float* s = h ? hi : lo;
      for (int q = 0; q < 81; ++q)
        s[q] = c[4 * h][q % 3] + c[4 * h + 1][(q / 3) % 3] + c[4 * h + 2][(q / 9) % 3] + c[4 * h + 3][q / 27];
    }
    best = std::numeric_limits<float>::infinity();
    best_index = 0;  // when every cost overflowed to inf (|x| near float's limit)
    for (int k = 0; k < n_points; ++k) {
      const float e = lo[g.lo[k]] + hi[g.hi[k]];
      if (e < best) { best = e; best_index = k; }
    }
    return {best, best_index};
  }
  return {base + best, best_index};
}

// ---- one sub-block at a fixed scale ----------------------------------------------------------
// A sub-block is n_groups groups of 8 under one scale dl; the shift is shared by the whole
// sub-block (iq1_s) or chosen per group (iq1_m).

struct sub_choice {
  float err;
  std::uint16_t index[4];
  bool neg[4];  // shift -1/8
};

inline float delta_of(bool neg) noexcept { return neg ? -codebooks::iq1s_delta : codebooks::iq1s_delta; }

inline sub_choice fit_sub(const float* x, const float* w, int n_groups, bool shared_shift, float dl) noexcept {
  sub_choice out{};
  if (shared_shift) {
    sub_choice s[2]{};
    for (int sh = 0; sh < 2; ++sh) {
      for (int gi = 0; gi < n_groups; ++gi) {
        const point pt = best_point(x + 8 * gi, w + 8 * gi, dl, delta_of(sh));
        s[sh].err += pt.err;
        s[sh].index[gi] = static_cast<std::uint16_t>(pt.index);
        s[sh].neg[gi] = sh;
      }
    }
    return s[1].err < s[0].err ? s[1] : s[0];
  }
  for (int gi = 0; gi < n_groups; ++gi) {
    const point a = best_point(x + 8 * gi, w + 8 * gi, dl, delta_of(false));
    const point b = best_point(x + 8 * gi, w + 8 * gi, dl, delta_of(true));
    const bool neg = b.err < a.err;
    out.err += neg ? b.err : a.err;
    out.index[gi] = static_cast<std::uint16_t>(neg ? b.index : a.index);
    out.neg[gi] = neg;
  }
  return out;
}

// Sums for the least-squares scale of fixed points and shifts: x ~ scale * m * (coord + delta).
inline void accumulate_ls(const float* x, const float* w, int n_groups, const sub_choice& s, float m, double& sqx,
                          double& sq2) noexcept {
  for (int gi = 0; gi < n_groups; ++gi) {
    const float dt = delta_of(s.neg[gi]);
    for (int j = 0; j < 8; ++j) {
      const double q = static_cast<double>(m) * (static_cast<float>(coord(s.index[gi], j)) + dt);
      sqx += w[8 * gi + j] * q * x[8 * gi + j];
      sq2 += w[8 * gi + j] * q * q;
    }
  }
}

// The best real scale of one sub-block (>= 0): starting scales put the largest magnitude on
// each level from 1/8 to 5/4 of the scale, each refined by alternating best points and
// least squares.
inline float search_scale(const float* x, const float* w, int n_groups, bool shared_shift) noexcept {
  const int n = 8 * n_groups;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0.0f)) return 0.0f;
  float best_err = std::numeric_limits<float>::infinity(), best_dl = 0.0f;
  for (const float f : {0.125f, 0.8125f, 1.0f, 1.1875f}) {
    float dl = amax / f;
    for (int pass = 0; pass < 3; ++pass) {
      const sub_choice s = fit_sub(x, w, n_groups, shared_shift, dl);
      if (s.err < best_err) { best_err = s.err; best_dl = dl; }
      if (pass == 2) break;
      double sqx = 0, sq2 = 0;
      accumulate_ls(x, w, n_groups, s, 1.0f, sqx, sq2);
      if (!(sq2 > 0) || !(sqx > 0)) break;
      const float nd = static_cast<float>(sqx / sq2);
      if (nd == dl || !std::isfinite(nd)) break;
      dl = nd;
    }
  }
  return best_dl;
}

// ---- a whole super-block ----------------------------------------------------------------------
// n_sub sub-blocks of n_groups groups; fills the 3-bit scales ls and each sub-block's points
// and shifts (their errors in ch[j].err); returns d (exactly an f16, >= 0).
inline float fit_positive(const float* x, const float* w, int n_sub, int n_groups, bool shared_shift,
                          std::uint8_t* ls, sub_choice* ch) noexcept {
  const int sub = 8 * n_groups;
  float s[16], s_hi = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    s[j] = search_scale(x + j * sub, w + j * sub, n_groups, shared_shift);
    s_hi = std::max(s_hi, s[j]);
  }
  if (!(s_hi > 0.0f)) {
    for (int j = 0; j < n_sub; ++j) {
      ls[j] = 0;
      ch[j] = fit_sub(x + j * sub, w + j * sub, n_groups, shared_shift, 0.0f);
    }
    return 0.0f;
  }

  std::uint8_t cls[16];
  sub_choice cch[16];
  auto evaluate = [&](float d) {
    float total = 0.0f;
    for (int j = 0; j < n_sub; ++j) {
      const float t = d > 0.0f ? std::min(s[j] / d, 1e6f) : 0.0f;
      const int a0 = std::clamp(static_cast<int>(std::floor((t - 1.0f) * 0.5f)), 0, 7);
      const int a1 = std::min(a0 + 1, 7);
      float best = std::numeric_limits<float>::infinity();
      for (int a = a0; a <= a1; ++a) {
        const sub_choice c = fit_sub(x + j * sub, w + j * sub, n_groups, shared_shift,
                                     d * static_cast<float>(2 * a + 1));
        if (c.err < best) { best = c.err; cls[j] = static_cast<std::uint8_t>(a); cch[j] = c; }
      }
      total += best;
    }
    return total;
  };

  float best_err = std::numeric_limits<float>::infinity(), best_d = 0.0f;
  auto consider = [&](float d) {
    const float e = evaluate(d);
    if (e < best_err) {
      best_err = e; best_d = d;
      std::copy(cls, cls + n_sub, ls);
      std::copy(cch, cch + n_sub, ch);
      return true;
    }
    return false;
  };

  for (const float m : {12.0f, 12.8f, 13.6f, 14.4f, 15.2f, 16.0f}) consider(kq::f16_round(s_hi / m));

  for (int iter = 0; iter < 4; ++iter) {
    double sqx = 0, sq2 = 0;
    for (int j = 0; j < n_sub; ++j)
      accumulate_ls(x + j * sub, w + j * sub, n_groups, ch[j], static_cast<float>(2 * ls[j] + 1), sqx, sq2);
    if (!(sq2 > 0) || !(sqx > 0)) break;
    const float nd = kq::f16_round(static_cast<float>(sqx / sq2));
    if (nd == best_d || !consider(nd)) break;
  }
  // with d settled, each sub-block takes the best of all eight scales
  for (int j = 0; j < n_sub; ++j) {
    float be = std::numeric_limits<float>::infinity();
    for (int a = 0; a < 8; ++a) {
      const sub_choice c = fit_sub(x + j * sub, w + j * sub, n_groups, shared_shift,
                                   best_d * static_cast<float>(2 * a + 1));
      if (c.err < be) { be = c.err; ls[j] = static_cast<std::uint8_t>(a); ch[j] = c; }
    }
  }
  return best_d;
}

// The lattice is not symmetric (a third of its points have no mirror image in it), so a
// negative d, which mirrors every group, is a different choice: the super-block is fitted
// both ways (the negative one as -x with positive d) and the smaller error kept.
inline float fit_superblock(const float* x, const float* w, int n_sub, int n_groups, bool shared_shift,
                            std::uint8_t* ls, sub_choice* ch) noexcept {
  const int n = 8 * n_groups * n_sub;
  const float d1 = fit_positive(x, w, n_sub, n_groups, shared_shift, ls, ch);
  float nx[qk_k];
  std::uint8_t ls2[16];
  sub_choice ch2[16];
  for (int i = 0; i < n; ++i) nx[i] = -x[i];
  const float d2 = fit_positive(nx, w, n_sub, n_groups, shared_shift, ls2, ch2);
  float e1 = 0.0f, e2 = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    e1 += ch[j].err;
    e2 += ch2[j].err;
  }
  if (e2 < e1) {
    std::copy(ls2, ls2 + n_sub, ls);
    std::copy(ch2, ch2 + n_sub, ch);
    return -d2;
  }
  return d1;
}

}  // namespace iq1

// iq1_s: eight sub-blocks of 32 weights, each with a 3-bit scale s and one shift sign
// against the f16 super-block scale d; each group of 8 weights is a point of iq1s_grid
// (11-bit index k, coordinates g_j in {-1, 0, 1}), w = d * (2s + 1) * (g_j + delta) with
// delta = -1/8 when the sub-block's sign bit is set, +1/8 otherwise. qs[4b + l] holds the
// low 8 bits of group l's index in sub-block b; qh[b] holds the top 3 bits of group l's
// index at bit 3l, s at bits 12-14 and the shift sign at bit 15.
// 50 bytes per block, 1.5625 bits per weight.
struct iq1_s {
  static constexpr type id = type::iq1_s;
  static constexpr int block_size = qk_k;
  struct block { gk::f16 d; std::uint8_t qs[qk_k / 8]; std::uint16_t qh[qk_k / 32]; };
  using dot_type = q8_K;

  static int index(const block& b, int ib, int l) { return b.qs[4 * ib + l] | (((b.qh[ib] >> (3 * l)) & 7) << 8); }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * static_cast<float>(2 * ((b.qh[ib] >> 12) & 7) + 1);
      const float delta = (b.qh[ib] & 0x8000) ? -codebooks::iq1s_delta : codebooks::iq1s_delta;
      for (int l = 0; l < 4; ++l) {
        const int k = index(b, ib, l);
        for (int j = 0; j < 8; ++j) out[32 * ib + 8 * l + j] = dl * (static_cast<float>(iq1::coord(k, j)) + delta);
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    std::uint8_t ls[8];
    iq1::sub_choice ch[8];
    b.d = to_f16(iq1::fit_superblock(x, w, 8, 4, true, ls, ch));
    for (int ib = 0; ib < 8; ++ib) {
      unsigned h = (static_cast<unsigned>(ls[ib]) << 12) | (ch[ib].neg[0] ? 0x8000u : 0u);
      for (int l = 0; l < 4; ++l) {
        b.qs[4 * ib + l] = static_cast<std::uint8_t>(ch[ib].index[l] & 255);
        h |= static_cast<unsigned>(ch[ib].index[l] >> 8) << (3 * l);
      }
      b.qh[ib] = static_cast<std::uint16_t>(h);
    }
  }

  // Integer sums per sub-block: codes times activations, and the shift sign times the
  // activations' 16-weight sums; 8 * sum + shifts is exact in int and in float, and is
  // scaled by d * a.d / 8 once.
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0, sum_shift = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = 2 * ((w.qh[ib] >> 12) & 7) + 1;
      int s = 0;
      for (int l = 0; l < 4; ++l) {
        const int k = index(w, ib, l);
        for (int j = 0; j < 8; ++j) s += iq1::coord(k, j) * a->qs[32 * ib + 8 * l + j];
      }
      sum += ls * s;
      sum_shift += ls * ((w.qh[ib] & 0x8000) ? -1 : 1) * (a->bsums[2 * ib] + a->bsums[2 * ib + 1]);
    }
    return to_f32(w.d) * a->d * (static_cast<float>(8 * sum + sum_shift) * codebooks::iq1s_delta);
  }
};
static_assert(sizeof(iq1_s::block) == 50 && offsetof(iq1_s::block, qs) == 2 && offsetof(iq1_s::block, qh) == 34);
static_assert(BlockFormat<iq1_s>);

// iq1_m: sixteen sub-blocks of 16 weights, each with a 3-bit scale s; each group of 8 is a
// point of iq1s_grid with its own shift sign, w = d * (2s + 1) * (g_j + delta), delta =
// -1/8 when the group's sign bit is set. There is no separate d field: read as four
// little-endian 16-bit words, scales holds the s of sub-block j at bit 3(j % 4) of word
// j / 4, and the top nibbles of the words 0-3 are the nibbles 0-3 of d's f16 bits. qs[2j + l]
// is the low 8 bits of group l's index in sub-block j; qh[j] holds, for group 2j + l,
// the top 3 bits of its index at bit 4l and its shift sign at bit 4l + 3.
// 56 bytes per block, 1.75 bits per weight.
struct iq1_m {
  static constexpr type id = type::iq1_m;
  static constexpr int block_size = qk_k;
  struct block { std::uint8_t qs[qk_k / 8]; std::uint8_t qh[qk_k / 16]; std::uint8_t scales[qk_k / 32]; };
  using dot_type = q8_K;

  static unsigned word(const block& b, int k) { return b.scales[2 * k] | (static_cast<unsigned>(b.scales[2 * k + 1]) << 8); }
  static float scale(const block& b) {
    const unsigned u = (word(b, 0) >> 12) | ((word(b, 1) >> 8) & 0x00f0) | ((word(b, 2) >> 4) & 0x0f00) |
                       (word(b, 3) & 0xf000);
    return f16_to_f32(static_cast<std::uint16_t>(u));
  }
  static int sub_scale(const block& b, int j) { return 2 * ((word(b, j / 4) >> (3 * (j % 4))) & 7) + 1; }
  // index and shift sign of group l (0, 1) of sub-block j
  static int index(const block& b, int j, int l) { return b.qs[2 * j + l] | (((b.qh[j] >> (4 * l)) & 7) << 8); }
  static bool neg(const block& b, int j, int l) { return (b.qh[j] >> (4 * l + 3)) & 1; }

  static void decode(const block& b, float* out) {
    const float d = scale(b);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(sub_scale(b, j));
      for (int l = 0; l < 2; ++l) {
        const float delta = neg(b, j, l) ? -codebooks::iq1m_delta : codebooks::iq1m_delta;
        const int k = index(b, j, l);
        for (int i = 0; i < 8; ++i) out[16 * j + 8 * l + i] = dl * (static_cast<float>(iq1::coord(k, i)) + delta);
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);
    std::uint8_t ls[16];
    iq1::sub_choice ch[16];
    const unsigned d = to_f16(iq1::fit_superblock(x, w, 16, 2, false, ls, ch)).bits;
    unsigned words[4] = {0, 0, 0, 0};
    for (int j = 0; j < 16; ++j) {
      words[j / 4] |= static_cast<unsigned>(ls[j]) << (3 * (j % 4));
      unsigned h = 0;
      for (int l = 0; l < 2; ++l) {
        b.qs[2 * j + l] = static_cast<std::uint8_t>(ch[j].index[l] & 255);
        h |= ((static_cast<unsigned>(ch[j].index[l] >> 8)) | (ch[j].neg[l] ? 8u : 0u)) << (4 * l);
      }
      b.qh[j] = static_cast<std::uint8_t>(h);
    }
    for (int k = 0; k < 4; ++k) {
      words[k] |= ((d >> (4 * k)) & 0xfu) << 12;
      b.scales[2 * k] = static_cast<std::uint8_t>(words[k] & 255);
      b.scales[2 * k + 1] = static_cast<std::uint8_t>(words[k] >> 8);
    }
  }

  // As iq1_s, with the shift sign per group of 8 (the activations' 8-weight sums are
  // summed here, q8_K keeps only 16-weight sums).
  static float dot(const block& w, const q8_K::block* a) {
    int sum = 0, sum_shift = 0;
    for (int j = 0; j < 16; ++j) {
      const int ls = sub_scale(w, j);
      int s = 0, sh = 0;
      for (int l = 0; l < 2; ++l) {
        const int k = index(w, j, l);
        int sa = 0;
        for (int i = 0; i < 8; ++i) {
          s += iq1::coord(k, i) * a->qs[16 * j + 8 * l + i];
          sa += a->qs[16 * j + 8 * l + i];
        }
        sh += neg(w, j, l) ? -sa : sa;
      }
      sum += ls * s;
      sum_shift += ls * sh;
    }
    return scale(w) * a->d * (static_cast<float>(8 * sum + sum_shift) * codebooks::iq1m_delta);
  }
};
static_assert(sizeof(iq1_m::block) == 56 && offsetof(iq1_m::block, qh) == 32 && offsetof(iq1_m::block, scales) == 48);
static_assert(BlockFormat<iq1_m>);

}  // namespace gk::formats

GK_EXACT_FP_END
