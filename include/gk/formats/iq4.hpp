// SPDX-License-Identifier: MIT
// The non-linear 4-bit formats iq4_nl and iq4_xs. A 4-bit code is not a level of a
// uniform grid but an index into the 16 integers of codebooks::kvalues_iq4nl (-127 ..
// 113, denser near zero, as trained weights are), times a scale: one f16 per 32 weights
// (iq4_nl), or per 32 weights a 6-bit signed integer times one f16 per 256 (iq4_xs).
//
// Encoding is gk's own search and minimises the stored error sum imp_i * (x_i - w_i)^2
// itself; without importance (NULL) every weight counts the same (imp_i = 1).
//   1. A group of 32 gets the exact best continuous scale: as t = 1/d grows, weight i
//      moves to the next codebook value where t x_i crosses a midpoint between values,
//      so ordering those crossings and sweeping them visits every assignment nearest
//      rounding can make, each with its least-squares scale and error. Both signs of d
//      are swept (the codebook is not symmetric), and the best few scales are kept.
//   2. iq4_nl: each kept scale is rounded to f16 (and the halves either side tried), the
//      codes chosen again for the rounded scale, and the result refitted once.
//      iq4_xs: super-block scales d put the largest group scale at (or near) either end of
//      the 6-bit range; for each, every group picks the integer, among those either side
//      of each of its kept scales over d (and 0), whose re-chosen codes err least; d is
//      then refitted by least squares to the chosen integers, rounded and re-evaluated
//      while the error falls, and finally nudged by one half either way.
// The lookup from a value to its nearest codebook entry is derived from the codebook at
// first use. Measured against the reference's encoders (1000 rows of 1024 from each test
// distribution, with and without importance): sqrt(error ratio) 0.92-0.98 (0.006-0.49 on
// constant rows), about 2.5 ms (iq4_nl) and 3.5 ms (iq4_xs) per 4096-weight row here
// against the reference's 0.9 ms.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gk/core/exact_fp.hpp"
#include "gk/formats/codebooks.inc"
#include "gk/formats/format.hpp"
#include "gk/formats/kquants.hpp"
#include "gk/formats/legacy.hpp"

GK_EXACT_FP_BEGIN

namespace gk::formats {

namespace nl4 {

inline constexpr const std::int8_t* values = codebooks::kvalues_iq4nl;
inline constexpr int lo_value = -127, hi_value = 113;  // the codebook's ends
inline constexpr int zero_code = 8;                      // the entry nearest 0 (value 1)
static_assert(codebooks::kvalues_iq4nl[0] == lo_value && codebooks::kvalues_iq4nl[15] == hi_value);

// Nearest codebook index for v, from a table over half-unit steps of v: every midpoint
// between neighbouring (integer) values is a multiple of 1/2, so within a step the
// nearest entry does not change. At a midpoint the upper entry is taken.
inline const std::array<std::uint8_t, 2 * (hi_value - lo_value) + 1>& nearest_table() {
  static const auto table = [] {
    std::array<std::uint8_t, 2 * (hi_value - lo_value) + 1> t{};
    for (std::size_t m = 0; m < t.size(); ++m) {
      const float v = lo_value + 0.5f * static_cast<float>(m) + 0.25f;
      int best = 0;
      for (int k = 1; k < 16; ++k)
        if (std::fabs(v - values[k]) < std::fabs(v - values[best])) best = k;
      t[m] = static_cast<std::uint8_t>(best);
    }
    return t;
  }();
  return table;
}

inline int nearest(const std::uint8_t* table, float v) noexcept {
  v = std::min(std::max(static_cast<float>(lo_value), v), static_cast<float>(hi_value));  // NaN: lo
  return table[static_cast<int>(2.0f * v - 2.0f * lo_value)];
}

// Codes for the decoded group scale d (the float decode multiplies codebook values by)
// and the weighted error they leave, computed as decode computes the weights. Without
// codes wanted, the count may stop early once past `enough` (the caller's best so far).
inline float group_codes(const std::uint8_t* table, const float* x, const float* w, float d, std::uint8_t* L,
                         float enough = std::numeric_limits<float>::infinity()) noexcept {
  float err = 0.0f;
  if (d == 0.0f) {
    for (int i = 0; i < 32; ++i) {
      err += w[i] * x[i] * x[i];
      if (L) L[i] = zero_code;
    }
    return err;
  }
  const float inv = 1.0f / d;
  for (int i0 = 0; i0 < 32; i0 += 8) {
    for (int i = i0; i < i0 + 8; ++i) {
      const int q = nearest(table, x[i] * inv);
      const float diff = d * static_cast<float>(values[q]) - x[i];
      err += w[i] * diff * diff;
      if (L) L[i] = static_cast<std::uint8_t>(q);
    }
    if (err > enough) return err;
  }
  return err;
}

// The K scales with the largest explained energy (sum w x v)^2 / sum w v^2 offered so
// far, best first. An offer that ties an entry (to 1e-9) goes ahead of it: the sweep
// offers smaller |d| later, and of equally good scales the smaller leaves more room in a
// 6-bit group scale (a constant group fits every codebook value equally well).
template <int K>
struct top_scales {
  float d[K];
  double score[K];
  int n = 0;
  void offer(float dd, double s) noexcept {
    int at = n < K ? n : K;
    while (at > 0 && score[at - 1] * (1.0 - 1e-9) <= s) --at;
    if (at >= K) return;
    for (int k = (n < K ? n : K - 1); k > at; --k) { d[k] = d[k - 1]; score[k] = score[k - 1]; }
    d[at] = dd;
    score[at] = s;
    if (n < K) ++n;
  }
};

// The K best continuous scales of one group of 32 (step 1 above); pos holds d > 0, neg
// d < 0 (as -d).
template <int K>
void sweep_group(const float* x, const float* w, top_scales<K>& pos, top_scales<K>& neg) {
  // Midpoints between neighbouring values, above and below the zero code.
  constexpr auto mids = [] {
    std::array<float, 15> m{};
    for (int k = 0; k < 15; ++k) m[k] = 0.5f * (static_cast<float>(codebooks::kvalues_iq4nl[k]) + codebooks::kvalues_iq4nl[k + 1]);
    return m;
  }();
  // The weights by magnitude, largest first: for one midpoint, the crossings m / |y_i|
  // of the weights on one side of zero then come in order of growing t, so the events
  // are 15 sorted runs (one per midpoint) to merge rather than a set to sort.
  std::uint8_t order[32];
  for (int i = 0; i < 32; ++i) order[i] = static_cast<std::uint8_t>(i);
  std::sort(order, order + 32, [&](int a, int b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  });
  for (int sign = 0; sign < 2; ++sign) {
    auto& out = sign ? neg : pos;
    // y = x (d > 0) or -x (d = -d' < 0); t = 1/d' > 0. Event key: t's bits (positive
    // floats order as their bits), then the weight index and the code it moves to.
    std::uint64_t buf[2][32 * 8];
    int bounds[17], nr = 0, ne = 0;
    double sxv = 0.0, svv = 0.0;
    float y[32];
    for (int i = 0; i < 32; ++i) {
      y[i] = sign ? -x[i] : x[i];
      sxv += static_cast<double>(w[i]) * y[i] * values[zero_code];
      svv += static_cast<double>(w[i]) * values[zero_code] * values[zero_code];
    }
    const auto push = [&](float t, int i, int to) {
      buf[0][ne++] = (static_cast<std::uint64_t>(f32_bits(t)) << 16) | static_cast<std::uint64_t>(i << 4 | to);
    };
    for (int c = zero_code; c < 15; ++c) {  // upward past mids[c], for y > 0
      bounds[nr++] = ne;
      for (const int i : order)
        if (y[i] > 0.0f) push(mids[c] / y[i], i, c + 1);
    }
    for (int c = zero_code; c > 0; --c) {  // downward past mids[c - 1], for y < 0
      bounds[nr++] = ne;
      for (const int i : order)
        if (y[i] < 0.0f) push(mids[c - 1] / y[i], i, c - 1);
    }
    bounds[nr] = ne;
    int src = 0;
    while (nr > 1) {  // merge neighbouring runs pairwise
      int m = 0;
      for (int r = 0; r < nr; r += 2) {
        const int b0 = bounds[r], b1 = bounds[std::min(r + 1, nr)], b2 = bounds[std::min(r + 2, nr)];
        std::merge(buf[src] + b0, buf[src] + b1, buf[src] + b1, buf[src] + b2, buf[1 - src] + b0);
        bounds[m++] = b0;
      }
      bounds[m] = ne;
      nr = m;
      src = 1 - src;
    }
    const std::uint64_t* ev = buf[src];
    const auto offer = [&] {  // the cheap test first: most states are not among the best
      if (svv > 0.0 && (out.n < K || sxv * sxv >= out.score[K - 1] * (1.0 - 1e-9) * svv))
        out.offer(static_cast<float>(sxv / svv), sxv * sxv / svv);
    };
    offer();
    for (int k = 0; k < ne; ++k) {
      const int i = static_cast<int>((ev[k] >> 4) & 0xfff), to = static_cast<int>(ev[k] & 0xf);
      const double vf = values[y[i] > 0.0f ? to - 1 : to + 1], vt = values[to];
      sxv += static_cast<double>(w[i]) * y[i] * (vt - vf);
      svv += static_cast<double>(w[i]) * (vt * vt - vf * vf);
      offer();
    }
  }
}

// Two groups' codes in 16 bytes: byte j holds weight j (low nibble) and j + 16 (high).
inline void pack(const std::uint8_t* L, std::uint8_t* qs) noexcept {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<std::uint8_t>(L[j] | (L[j + 16] << 4));
}

}  // namespace nl4

// iq4_nl: 32 weights share an f16 scale d; byte j holds weight j's 4-bit code q in its
// low nibble and weight j + 16's in its high nibble; w = d * kvalues_iq4nl[q].
// 18 bytes per block, 4.5 bits per weight.
struct iq4_nl {
  static constexpr type id = type::iq4_nl;
  static constexpr int block_size = 32;
  struct block { gk::f16 d; std::uint8_t qs[16]; };
  using dot_type = q8_0;

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(nl4::values[b.qs[j] & 0xf]);
      out[j + 16] = d * static_cast<float>(nl4::values[b.qs[j] >> 4]);
    }
  }
  static void encode(const float* x, block& b, const float* importance) {
    const auto* table = nl4::nearest_table().data();
    float w[32];
    kq::error_weights(importance, 32, w);
    std::uint8_t L[32], T[32];
    float best = nl4::group_codes(table, x, w, 0.0f, L);
    std::uint16_t best_h = 0;
    constexpr int K = 4;
    nl4::top_scales<K> pos, neg;
    nl4::sweep_group<K>(x, w, pos, neg);
    auto consider = [&](std::uint16_t h) {
      const float d = f16_to_f32(h);
      if (d == 0.0f) return false;
      const float e = nl4::group_codes(table, x, w, d, T, best);
      if (e < best) {
        best = e; best_h = h;
        std::copy(T, T + 32, L);
        return true;
      }
      return false;
    };
    for (int k = 0; k < pos.n + neg.n; ++k) {
      const std::uint16_t h0 = detail::f16_finite(k < pos.n ? pos.d[k] : -neg.d[k - pos.n]);
      for (int step = -1; step <= 1; ++step) {
        std::uint16_t h;
        if (detail::f16_step(h0, step, h)) consider(h);
      }
    }
    // the least-squares scale for the codes the rounded scale chose
    for (int iter = 0; iter < 2 && best_h != 0; ++iter) {
      double sxv = 0, svv = 0;
      for (int i = 0; i < 32; ++i) {
        const double v = nl4::values[L[i]];
        sxv += w[i] * x[i] * v;
        svv += w[i] * v * v;
      }
      if (!(svv > 0)) break;
      const std::uint16_t h = detail::f16_finite(static_cast<float>(sxv / svv));
      if (h == best_h || !consider(h)) break;
    }
    b.d.bits = best_h;
    nl4::pack(L, b.qs);
  }
  static float dot(const block& w, const q8_0::block* a) {
    int sum = 0;
    for (int j = 0; j < 16; ++j)
      sum += nl4::values[w.qs[j] & 0xf] * a->qs[j] + nl4::values[w.qs[j] >> 4] * a->qs[j + 16];
    return static_cast<float>(sum) * (to_f32(w.d) * to_f32(a->d));
  }
};
static_assert(sizeof(iq4_nl::block) == 18 && offsetof(iq4_nl::block, d) == 0 && offsetof(iq4_nl::block, qs) == 2);
static_assert(BlockFormat<iq4_nl>);

// iq4_xs: 256 weights in eight groups of 32. Group g has a 6-bit scale ls (its low 4 bits
// in nibble g % 2 of scales_l[g / 2], its top 2 bits at bits 2g, 2g+1 of scales_h) and
// w = (d * (ls - 32)) * kvalues_iq4nl[q], d the f16 super-block scale. Group g's codes
// are the 16 bytes qs[16g ..], packed as in iq4_nl. 136 bytes per block, 4.25 bits per
// weight.
struct iq4_xs {
  static constexpr type id = type::iq4_xs;
  static constexpr int block_size = qk_k;
  struct block { gk::f16 d; std::uint16_t scales_h; std::uint8_t scales_l[qk_k / 64]; std::uint8_t qs[qk_k / 2]; };
  using dot_type = q8_K;

  // group g's signed scale ls - 32, in -32 .. 31
  static int group_scale(const block& b, int g) {
    return (((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((b.scales_h >> (2 * g)) & 3) << 4)) - 32;
  }

  static void decode(const block& b, float* out) {
    const float d = to_f32(b.d);
    for (int g = 0; g < 8; ++g) {
      const float dl = d * static_cast<float>(group_scale(b, g));
      const std::uint8_t* qs = b.qs + 16 * g;
      for (int j = 0; j < 16; ++j) {
        out[32 * g + j] = dl * static_cast<float>(nl4::values[qs[j] & 0xf]);
        out[32 * g + j + 16] = dl * static_cast<float>(nl4::values[qs[j] >> 4]);
      }
    }
  }

  static void encode(const float* x, block& b, const float* importance) {
    const auto* table = nl4::nearest_table().data();
    float w[qk_k];
    kq::error_weights(importance, qk_k, w);

    // step 1: each group's best continuous scales, both signs
    constexpr int K = 3;
    float cand[8][2 * K];
    int ncand[8];
    float s_big = 0.0f;
    for (int g = 0; g < 8; ++g) {
      nl4::top_scales<K> pos, neg;
      nl4::sweep_group<K>(x + 32 * g, w + 32 * g, pos, neg);
      ncand[g] = 0;
      for (int k = 0; k < pos.n; ++k) cand[g][ncand[g]++] = pos.d[k];
      for (int k = 0; k < neg.n; ++k) cand[g][ncand[g]++] = -neg.d[k];
      const bool pos_wins = pos.n > 0 && (neg.n == 0 || pos.score[0] >= neg.score[0]);
      const float top = pos_wins ? pos.d[0] : (neg.n > 0 ? -neg.d[0] : 0.0f);
      if (std::fabs(top) > std::fabs(s_big)) s_big = top;
    }

    // step 2: for a super-block scale d, each group's best integer scale and its error
    std::int8_t cls[8];
    auto evaluate = [&](float d) {
      float total = 0.0f;
      for (int g = 0; g < 8; ++g) {
        const float* xg = x + 32 * g;
        const float* wg = w + 32 * g;
        float best = nl4::group_codes(table, xg, wg, 0.0f, nullptr);
        cls[g] = 0;
        int tried[4 * K + 1], nt = 0;
        tried[nt++] = 0;
        for (int k = 0; k < ncand[g] && d != 0.0f; ++k) {
          const float t = std::clamp(cand[g][k] / d, -64.0f, 64.0f);
          const int a0 = static_cast<int>(std::floor(t));
          for (int a = a0; a <= a0 + 1; ++a) {
            const int l = std::clamp(a, -32, 31);
            if (std::find(tried, tried + nt, l) != tried + nt) continue;
            tried[nt++] = l;
            const float e = nl4::group_codes(table, xg, wg, d * static_cast<float>(l), nullptr, best);
            if (e < best) { best = e; cls[g] = static_cast<std::int8_t>(l); }
          }
        }
        total += best;
      }
      return total;
    };

    std::int8_t ls[8] = {};
    float best_err = std::numeric_limits<float>::infinity(), best_d = 0.0f;
    auto consider = [&](float d) {
      const float e = evaluate(d);
      if (e < best_err) {
        best_err = e; best_d = d;
        std::copy(cls, cls + 8, ls);
        return true;
      }
      return false;
    };
    consider(0.0f);
    if (s_big != 0.0f) {
      for (const float t : {0.0f, 1.0f, 2.0f}) {
        consider(kq::f16_round(s_big / (-32.0f + t)));
        consider(kq::f16_round(s_big / (31.0f - t)));
      }
      // step 3: least squares for d with the integer scales fixed, x ~ d * (ls * v)
      for (int iter = 0; iter < 4; ++iter) {
        double saa = 0, sax = 0;
        std::uint8_t q[32];
        for (int g = 0; g < 8; ++g) {
          nl4::group_codes(table, x + 32 * g, w + 32 * g, best_d * static_cast<float>(ls[g]), q);
          for (int i = 0; i < 32; ++i) {
            const double a = static_cast<double>(ls[g]) * nl4::values[q[i]];
            saa += w[32 * g + i] * a * a;
            sax += w[32 * g + i] * a * x[32 * g + i];
          }
        }
        if (!(saa > 0)) break;
        const float nd = kq::f16_round(static_cast<float>(sax / saa));
        if (nd == best_d || !consider(nd)) break;
      }
      const std::uint16_t h0 = to_f16(best_d).bits;
      for (int step = -1; step <= 1; step += 2) {
        std::uint16_t h;
        if (detail::f16_step(h0, step, h)) consider(f16_to_f32(h));
      }
    }

    b.d = to_f16(best_d);
    b.scales_h = 0;
    std::uint8_t L[32];
    for (int g = 0; g < 8; ++g) {
      const unsigned u = static_cast<unsigned>(ls[g] + 32);
      if (g % 2 == 0) b.scales_l[g / 2] = static_cast<std::uint8_t>(u & 0xf);
      else b.scales_l[g / 2] = static_cast<std::uint8_t>(b.scales_l[g / 2] | ((u & 0xf) << 4));
      b.scales_h = static_cast<std::uint16_t>(b.scales_h | ((u >> 4) << (2 * g)));
      nl4::group_codes(table, x + 32 * g, w + 32 * g, best_d * static_cast<float>(ls[g]), L);
      nl4::pack(L, b.qs + 16 * g);
    }
  }

  // Per group an integer sum of codebook value * activation times the integer scale,
  // all groups summed as integers (at most 8 * 32 * 32 * 127 * 127, inside int), then
  // scaled once in float.
  static float dot(const block& w, const q8_K::block* a) {
    int total = 0;
    for (int g = 0; g < 8; ++g) {
      const std::uint8_t* qs = w.qs + 16 * g;
      const std::int8_t* q8 = a->qs + 32 * g;
      int s = 0;
      for (int j = 0; j < 16; ++j) s += nl4::values[qs[j] & 0xf] * q8[j] + nl4::values[qs[j] >> 4] * q8[j + 16];
      total += group_scale(w, g) * s;
    }
    return to_f32(w.d) * a->d * static_cast<float>(total);
  }
};
static_assert(sizeof(iq4_xs::block) == 136 && offsetof(iq4_xs::block, d) == 0 &&
              offsetof(iq4_xs::block, scales_h) == 2 && offsetof(iq4_xs::block, scales_l) == 4 &&
              offsetof(iq4_xs::block, qs) == 8);
static_assert(BlockFormat<iq4_xs>);

}  // namespace gk::formats

GK_EXACT_FP_END
