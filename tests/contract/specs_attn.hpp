// SPDX-License-Identifier: MIT
// The kernel contract's spec of flash_attn_ext (included by specs.hpp).
//
// dims: {D, n_q, n_kv, n_head}; K and V have n_head / 2 heads (grouped-query, two query
// heads per K/V head) when n_head is even, else n_head. q [D, n_q, n_head] f32, K/V
// [D, n_kv, n_head_kv] of one type, mask [n_kv, n_q] f16; result [D, n_head, n_q] f32.
//
// The float64 reference is the op's formula as cpu/attn.hpp states it: q is encoded once
// into K's activation format (f16 for f16 K, q8_0 blocks for q8_0 K) and read back, then
//   s_j = scale * (K_j . q)  [softcapped: c * tanh(s_j / c)]  + mask_j
//   out = sum_j exp(s_j - max) V_j / sum_j exp(s_j - max)
// in double, with IEEE rules deciding what a planted NaN/Inf in q becomes (a NaN or an
// infinite score makes the row NaN on both sides).
//
// Magnitude of an output element o_i: an absolute error e in score j moves o_i by
// p_j (v_ji - o_i) e. A score's error is gamma(D) * scale * sum |q k| from the dot plus a
// few roundings of |s_j| and |max| in the exponential's argument; the V sum adds
// gamma(n_kv) * sum p_j |v_ji|; the normalisation a few ulps of |o_i|. Each part is
// weighted by its own chain length over the spec's depth (D + n_kv + 64), so the gate's
// gamma(depth) * magnitude is the sum of the parts' own bounds. Checked by hand: the bound
// goes red when q skips its encoding (f16 or q8_0) or one key is dropped, and stays green
// for a 1e-4 error in one key's weight out of hundreds (inside the dot's worst case).
//
// Gate 4 (f16 K/V): see gate4_fill below.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gk/formats/all.hpp"
#include "harness.hpp"

namespace gk_contract {

inline void add_attn(harness& h, const profile& p) {
  using namespace detail;
  struct variant {
    gk::type kv;
    float softcap;
  };
  for (variant vr : {variant{gk::type::f16, 0.0f}, variant{gk::type::q8_0, 0.0f}, variant{gk::type::f16, 20.0f}}) {
    spec s;
    s.name = std::string("flash_attn_ext ") + std::string(gk::name(vr.kv)) + " K/V (f16 mask, GQA 2:1" +
             (vr.softcap != 0.0f ? ", softcap 20" : "") + ")";
    s.family = "dense";
    const gk::type kv = vr.kv;
    const float softcap = vr.softcap;
    auto heads_kv = [](const dims& d) { return d[3] % 2 == 0 ? d[3] / 2 : d[3]; };
    s.inputs = [kv, heads_kv](const dims& d) {
      input_decl q = f32_rows(d[0], d[1], -1, 1, true);
      q.ne = {d[0], d[1], d[3], 1};
      input_decl k = f32_rows(d[0], d[2], -1, 1, false);
      k.ne = {d[0], d[2], heads_kv(d), 1};
      k.type = kv;
      input_decl v = k;
      input_decl m = f32_rows(d[2], d[1], -2, 2, false);
      m.type = gk::type::f16;
      return std::vector<input_decl>{q, k, v, m};
    };
    s.build = [softcap](gk::context& c, const std::vector<gk::tensor*>& in, const dims& d) {
      return gk::flash_attn_ext(c, in[0], in[1], in[2], in[3], 1.0f / std::sqrt(static_cast<float>(d[0])), 0.0f, softcap);
    };
    s.ref = [kv, softcap, heads_kv](const input_set& in, const dims& d, reference& r) {
      const std::int64_t D = d[0], nq = d[1], nkv = d[2], H = d[3], ratio = H / heads_kv(d);
      const double scale = 1.0f / std::sqrt(static_cast<float>(D));
      // q as the kernel reads it: encoded into K's dot format and back
      std::vector<double> qx(in[0].v.size());
      gk::formats::visit(kv, [&]<class W>(std::type_identity<W>) {
        using A = typename W::dot_type;
        std::vector<float> row(static_cast<std::size_t>(D)), back(row.size());
        std::vector<typename A::block> blocks(static_cast<std::size_t>((D + A::block_size - 1) / A::block_size));
        for (std::int64_t rr = 0; rr < nq * H; ++rr) {
          for (std::int64_t i = 0; i < D; ++i) row[i] = static_cast<float>(in[0].v[rr * D + i]);
          gk::encode_row<A>(row.data(), blocks.data(), D);
          gk::decode_row<A>(blocks.data(), back.data(), D);
          for (std::int64_t i = 0; i < D; ++i) qx[rr * D + i] = back[i];
        }
      });
      for (std::int64_t iq = 0; iq < nq; ++iq)
        for (std::int64_t hh = 0; hh < H; ++hh) {
          const double* q = qx.data() + (hh * nq + iq) * D;
          const std::int64_t hk = hh / ratio;
          std::vector<double> sc(static_cast<std::size_t>(nkv)), smag(sc.size());
          double mx = -inf;
          bool nan = false;
          for (std::int64_t j = 0; j < nkv; ++j) {
            const double* k = in[1].v.data() + (hk * nkv + j) * D;
            double dot = 0, dabs = 0;
            for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i], dabs += std::fabs(q[i] * k[i]);
            double s0 = scale * dot;
            if (softcap != 0.0f) s0 = softcap * std::tanh(s0 / softcap);
            s0 += in[3].v[static_cast<std::size_t>(iq * nkv + j)];
            sc[j] = s0;
            smag[j] = dabs;
            nan |= std::isnan(s0);
            mx = std::max(mx, s0);
          }
          if (nan) mx = qnan;
          double sum = 0;
          std::vector<double> pj(sc.size());
          for (std::int64_t j = 0; j < nkv; ++j) sum += pj[j] = std::exp(sc[j] - mx);
          for (double& x : pj) x /= sum;
          for (std::int64_t i = 0; i < D; ++i) {
            double o = 0;
            for (std::int64_t j = 0; j < nkv; ++j) o += pj[j] * in[2].v[(hk * nkv + j) * D + i];
            // each part weighted by its own chain length over the spec's depth, so that
            // gamma(depth) * mag is the sum of gamma(part) * part
            const double depth = static_cast<double>(D + nkv) + 64;
            double mag = std::fabs(o) * 8 / depth;
            for (std::int64_t j = 0; j < nkv; ++j) {
              const double vj = in[2].v[(hk * nkv + j) * D + i];
              const double score = scale * smag[j] * static_cast<double>(D + 4) + (std::fabs(sc[j]) + std::fabs(mx)) * 8;
              mag += pj[j] * (std::fabs(vj - o) * (score + 8) + std::fabs(vj) * static_cast<double>(nkv + 4)) / depth;
            }
            r.push(o, std::isfinite(mag) ? mag : 0.0);
          }
        }
    };
    if (kv == gk::type::f16) {
      // gate 4: q = 0 and mask = 0 make every score 0 and every weight exp(0) = 1, so each
      // output is (sum_j V_j) / n_kv with n_kv a power of two: an exact sum of integer V
      // (|v| <= 2048, exact in f16; the second half of the keys mirrors the first) that an
      // f16 accumulation of V misses
      s.gate4_dims = {64, 2, 1024, 2};
      s.gate4_fill = [](input_set& in, const dims& d, std::mt19937& rng) {
        std::uniform_int_distribution<int> u(1, 2048), e(-1, 1);
        std::fill(in[0].v.begin(), in[0].v.end(), 0.0);
        std::fill(in[3].v.begin(), in[3].v.end(), 0.0);
        const std::int64_t D = d[0], nkv = d[2], half = nkv / 2, hkv = in[2].d.ne[2];
        for (std::int64_t hk = 0; hk < hkv; ++hk)
          for (std::int64_t j = 0; j < half; ++j)
            for (std::int64_t i = 0; i < D; ++i) {
              const double x = u(rng);
              in[2].v[(hk * nkv + j) * D + i] = x;
              in[2].v[(hk * nkv + half + j) * D + i] = -x + e(rng);
            }
      };
      s.gate4_terms = [heads_kv](const input_set& in, const dims& d) {
        const std::int64_t D = d[0], nq = d[1], nkv = d[2], H = d[3], ratio = H / heads_kv(d);
        std::vector<std::vector<double>> out;
        for (std::int64_t iq = 0; iq < nq; ++iq)
          for (std::int64_t hh = 0; hh < H; ++hh)
            for (std::int64_t i = 0; i < D; ++i) {
              std::vector<double> t;
              for (std::int64_t j = 0; j < nkv; ++j) t.push_back(in[2].v[((hh / ratio) * nkv + j) * D + i]);
              out.push_back(t);
            }
        return out;
      };
      s.gate4_scale = 1.0 / 1024;
      s.gate4_post = 2;  // the sum times 1 / (sum of weights): exact here, allowed two roundings
    }
    const std::int64_t kvt = p.attn_tile_kv, qt = p.attn_tile_q;
    s.served = {{128, 1, 300, 4}, {64, 7, 64, 2}, {128, 33, 65, 8}};
    s.tiles = {{2, kvt, 1, 1, 1024, "keys"}, {1, qt, 1, 1, 40, "query rows"}};
    s.accumulator = "f32 (online softmax)";
    s.depth = [](const dims& d) { return static_cast<double>(d[0] + d[2]) + 64; };
    s.launch = "attn_";
    h.add(std::move(s));
  }
}

}  // namespace gk_contract
