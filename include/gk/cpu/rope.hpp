// SPDX-License-Identifier: MIT
// CPU kernel for rope (all modes: normal, neox, mrope, imrope, vision). f32 or f16 rows,
// output of the input's type. One row (i1, i2, i3) per work unit; a thread builds the
// cos/sin table of token i2 when its rows move to a new token.
//
// Arithmetic, chosen to give the reference's bits where its compiled code is scalar:
//   theta_k  = p * s^k by repeated float multiplication, s = powf(base, -2/n_dims)
//   theta    = (theta_k / ff_k) * freq_scale, YaRN-blended by fma(interp, 1 - mix, extrap * mix)
//   mscale   = attn_factor, times fma(0.1, logf(1/freq_scale), 1) under YaRN
//   cos, sin = cosf(theta) * mscale, sinf(theta) * mscale   (glibc's, as the reference calls)
//   x0' = fma(x0, cos, -(x1 * sin)),  x1' = fma(x0, sin, x1 * cos)
// (the reference is built with -march=native and GCC's default contraction; these are the
// fusions GCC chose in its scalar loops). Measured against it: neox, mrope, imrope,
// vision and every f16 row are bit-identical, as are most normal-mode f32 rows; on some
// short ones (1, 3, 9, 17 pairs in the tests) the reference's vectorised loop rounds both
// products separately (mul + addsub, no fma), and there the two differ by up to an ulp
// of the output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gk/core/exact_fp.hpp"
#include "gk/cpu/rows.hpp"
#include "gk/ops/rope.hpp"
#include "gk/tensor.hpp"

GK_EXACT_FP_BEGIN

namespace gk::cpu::rope {

inline bool supports(const tensor* node) noexcept {
  const tensor* a = node->src[0];
  const tensor* pos = node->src[1];
  const tensor* ff = node->src[2];
  if (!a || !pos || pos->type != type::i32 || (ff && ff->type != type::f32)) return false;
  if (node->op != op::rope) return false;
  return (a->type == type::f32 || a->type == type::f16) && node->type == a->type && a->same_shape(*node);
}

// The parameters of one rope node, read from op_params.
struct params {
  int n_dims, mode, n_ctx_orig, n_offs;
  float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
  int sections[4];
  explicit params(const tensor* node) {
    n_dims = node->param_i32(1);
    mode = node->param_i32(2);
    n_ctx_orig = node->param_i32(4);
    freq_base = node->param_f32(5);
    freq_scale = node->param_f32(6);
    ext_factor = node->param_f32(7);
    attn_factor = node->param_f32(8);
    beta_fast = node->param_f32(9);
    beta_slow = node->param_f32(10);
    for (int i = 0; i < 4; ++i) sections[i] = node->param_i32(11 + i);
    n_offs = node->param_i32(15);
  }
  bool multi() const noexcept { return (mode & rope_type_mrope) != 0; }
};

// cos and sin of pair k = i0/2 into cache[i0], cache[i0 + 1].
struct yarn {
  float freq_scale, ext_factor, mscale, corr[2];
  explicit yarn(const params& p) : freq_scale(p.freq_scale), ext_factor(p.ext_factor), mscale(p.attn_factor) {
    rope_yarn_corr_dims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr);
    if (ext_factor != 0.0f) mscale *= std::fma(0.1f, std::log(1.0f / freq_scale), 1.0f);
  }
  void operator()(float theta_extrap, std::int64_t i0, float* cache) const {
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
      const float y = (static_cast<float>(static_cast<int>(i0) / 2) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
      const float ramp = 1 - std::min(1.0f, std::max(0.0f, y));
      const float mix = ramp * ext_factor;
      theta = std::fma(theta_interp, 1 - mix, theta_extrap * mix);
    }
    cache[i0] = std::cos(theta) * mscale;
    cache[i0 + 1] = std::sin(theta) * mscale;
  }
};

namespace detail {

// Which position axis (0 t, 1 h, 2 w, 3 e) drives pair `sector` of a multi-mode row.
inline int multi_axis(int sector, const int* s, bool interleaved) {
  if (interleaved) {  // imrope: t, h, w take turns while each has pairs left
    if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
    if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
    if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
    return 3;
  }
  if (sector < s[0]) return 0;
  if (sector < s[0] + s[1]) return 1;
  if (sector < s[0] + s[1] + s[2]) return 2;
  return 3;
}

// cos/sin for the n_pairs pairs of token i2 (entries 0 .. 2*n_pairs of cache).
inline void fill_cache(const params& p, const yarn& yr, float theta_scale, const std::int32_t* pos, std::int64_t n2,
                       const float* ff, std::int64_t n_pairs, std::int64_t i2, float* cache) {
  if (!p.multi()) {
    float theta = static_cast<float>(pos[i2]);
    for (std::int64_t k = 0; k < n_pairs; ++k) {
      yr(ff ? theta / ff[k] : theta, 2 * k, cache);
      theta *= theta_scale;
    }
    return;
  }
  // Each axis has its own running theta. Vision restarts an axis's theta where its
  // section begins (the reference's independent sections); the others run on.
  const int* s = p.sections;
  const int sect_dims = s[0] + s[1] + s[2] + s[3];
  const int starts[4] = {0, s[0], s[0] + s[1], s[0] + s[1] + s[2]};
  const bool interleaved = p.mode == rope_type_imrope, independent = p.mode == rope_type_vision;
  float base[4], theta[4];
  for (int ax = 0; ax < 4; ++ax) theta[ax] = base[ax] = static_cast<float>(pos[i2 + n2 * ax]);
  for (std::int64_t k = 0; k < n_pairs; ++k) {
    const int sector = static_cast<int>(k % sect_dims);
    if (independent)
      for (int ax = 0; ax < 4; ++ax)
        if (sector == starts[ax]) {
          theta[ax] = base[ax];
          break;  // the reference's else-if chain: only the first axis starting here restarts
        }
    const float t = theta[multi_axis(sector, s, interleaved)];
    yr(ff ? t / ff[k] : t, 2 * k, cache);
    for (int ax = 0; ax < 4; ++ax) theta[ax] *= theta_scale;
  }
}

inline void rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = std::fma(x0, c, -(x1 * s));
  y1 = std::fma(x0, s, x1 * c);
}

inline void rope(const exec& ex, tensor* node) {
  const tensor* a = node->src[0];
  const tensor* pos_t = node->src[1];
  const tensor* ff_t = node->src[2];
  const params p(node);
  const yarn yr(p);
  const std::int64_t n0 = a->ne[0];
  const std::int64_t nd = p.n_dims, off = p.n_offs;
  if (nd % 2 || nd > n0 || off < 0 || off % 2 || off + nd > n0 || (p.mode == rope_type_vision && 2 * nd != n0))
    throw error("gk: cpu: rope: n_dims " + std::to_string(nd) + " / n_offs " + std::to_string(off) +
                " do not fit rows of " + describe(a));
  const bool vision = p.mode == rope_type_vision;
  const std::int64_t n_pairs = vision ? nd : nd / 2;
  if (p.multi()) {
    const std::int64_t sd = std::int64_t{p.sections[0]} + p.sections[1] + p.sections[2] + p.sections[3];
    if (sd <= 0 || sd > n0) throw error("gk: cpu: rope: bad sections for " + describe(a));
  }
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(nd));
  // positions and factors are small vectors; read them once, packed
  const auto* pos = static_cast<const std::int32_t*>(pos_t->data);
  if (pos_t->nb[0] != sizeof(std::int32_t)) throw error("gk: cpu: rope: positions must be packed");
  if (ff_t && ff_t->nb[0] != sizeof(float)) throw error("gk: cpu: rope: freq_factors must be packed");
  const float* ff = ff_t ? static_cast<const float*>(ff_t->data) : nullptr;

  float* cache = ex.scr->get<float>(0, static_cast<std::size_t>(2 * n_pairs + 2));
  float* in_buf = ex.scr->get<float>(1, static_cast<std::size_t>(n0));
  row_writer w(node, ex.scr->get<float>(2, static_cast<std::size_t>(n0)));
  std::int64_t cached_i2 = -1;
  for_rows(a->ne, ex.begin(a->nrows()), ex.end(a->nrows()), [&](std::int64_t i1, std::int64_t i2, std::int64_t i3) {
    if (i2 != cached_i2) {
      fill_cache(p, yr, theta_scale, pos, a->ne[2], ff, n_pairs, i2, cache);
      cached_i2 = i2;
    }
    const float* x = row_read(a, i1, i2, i3, in_buf);
    float* y = w.begin(i1, i2, i3);  // may alias x (in place): each pair is read before it is written
    // pair k is (first + k*step, first + k*step + dist)
    std::int64_t first = off, step = 1, dist = nd / 2;
    if (p.mode == rope_type_normal) step = 2, dist = 1;
    if (vision) first = 0, dist = nd;
    if (y != x) {
      for (std::int64_t i = 0; i < off; ++i) y[i] = x[i];
      for (std::int64_t i = vision ? n0 : off + nd; i < n0; ++i) y[i] = x[i];
    }
    for (std::int64_t k = 0; k < n_pairs; ++k) {
      const std::int64_t j = first + k * step;
      rotate(x[j], x[j + dist], cache[2 * k], cache[2 * k + 1], y[j], y[j + dist]);
    }
    w.commit();
  });
}

}  // namespace detail

inline void compute(const exec& ex, tensor* node) {
  if (!supports(node))
    throw error("gk: cpu: rope takes f32 or f16 rows (output of the same type), i32 positions and f32 "
                "freq_factors; got " +
                describe(node) + " from " + describe(node->src[0]));
  detail::rope(ex, node);
}

}  // namespace gk::cpu::rope

GK_EXACT_FP_END
