// SPDX-License-Identifier: MIT
// rope on the device, every mode the CPU has (normal, neox, mrope, imrope, vision),
// partial rotation (n_dims < ne0, n_offs), freq_factors and YaRN; f32 and f16 rows.
//
// Two kernels: the first builds the cos/sin table of every (token, pair) into scratch,
// the second turns each row's pairs with it and copies the elements outside the span.
// The table is the CPU's arithmetic (cpu/rope.hpp): theta_k is p multiplied k times by
// s = powf(base, -2/n_dims) (each thread repeats the k multiplications, so the rounding
// chain is the CPU's), divided by the frequency factor, YaRN-blended with the same fma,
// and the mode's axis/section logic is the CPU's. powf, logf and the YaRN correction
// dims are evaluated on the host, as the CPU does. cosf/sinf are the one libm pair with no
// device twin: they are taken in double and rounded once (dm::libm_cos/sin), which agrees
// with glibc's to within an ulp, so an output can differ from the CPU by ~1 ulp of the
// table value times |x|. The turn is x0' = fma(x0, c, -(x1 s)), x1' = fma(x0, s, x1 c).
#include <cmath>
#include <string>

#include "device_math.cuh"
#include "gk/ops/rope.hpp"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr int rope_threads = 128;

struct rope_args {
  int mode, n_dims, n_offs;
  int sections[4];
  float theta_scale, freq_scale, ext_factor, mscale, corr0, corr1;
  const std::int32_t* pos;
  const float* ff;       // null: none
  std::int64_t n2;       // tokens
  std::int64_t n_pairs;  // per row
};

// Which position axis drives pair `sector` of a multi-mode row (the CPU's multi_axis).
__device__ __forceinline__ int multi_axis(int sector, const int* s, bool interleaved) {
  if (interleaved) {
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

// cache[(i2 * n_pairs + k) * 2 + {0, 1}] = cos, sin of pair k of token i2
__global__ void __launch_bounds__(rope_threads) rope_cache_kernel(rope_args a, float* cache) {
  const std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (t >= a.n2 * a.n_pairs) return;
  const std::int64_t i2 = t / a.n_pairs, k = t % a.n_pairs;
  float theta_extrap;
  if (!(a.mode & rope_type_mrope)) {
    float theta = static_cast<float>(a.pos[i2]);
    for (std::int64_t j = 0; j < k; ++j) theta = __fmul_rn(theta, a.theta_scale);
    theta_extrap = theta;
  } else {
    const int* s = a.sections;
    const int sect_dims = s[0] + s[1] + s[2] + s[3];
    const int starts[4] = {0, s[0], s[0] + s[1], s[0] + s[1] + s[2]};
    const bool interleaved = a.mode == rope_type_imrope, independent = a.mode == rope_type_vision;
    float base[4], theta[4];
#pragma unroll
    for (int ax = 0; ax < 4; ++ax) theta[ax] = base[ax] = static_cast<float>(a.pos[i2 + a.n2 * ax]);
    float cur = 0.0f;
    for (std::int64_t j = 0; j <= k; ++j) {
      const int sector = static_cast<int>(j % sect_dims);
      if (independent) {  // the CPU's loop with break: only the first axis starting here restarts
        bool done = false;
#pragma unroll
        for (int ax = 0; ax < 4; ++ax)
          if (!done && sector == starts[ax]) {
            theta[ax] = base[ax];
            done = true;
          }
      }
      if (j == k) {
        const int ax = multi_axis(sector, s, interleaved);  // a select chain keeps theta in registers
        cur = ax == 0 ? theta[0] : ax == 1 ? theta[1] : ax == 2 ? theta[2] : theta[3];
      }
#pragma unroll
      for (int ax = 0; ax < 4; ++ax) theta[ax] = __fmul_rn(theta[ax], a.theta_scale);
    }
    theta_extrap = cur;
  }
  if (a.ff) theta_extrap = __fdiv_rn(theta_extrap, a.ff[k]);
  // the CPU's yarn::operator()
  const float theta_interp = __fmul_rn(a.freq_scale, theta_extrap);
  float theta = theta_interp;
  if (a.ext_factor != 0.0f) {
    const float y = __fdiv_rn(__fsub_rn(static_cast<float>(k), a.corr0), fmaxf(0.001f, __fsub_rn(a.corr1, a.corr0)));
    const float ramp = __fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y)));
    const float mix = __fmul_rn(ramp, a.ext_factor);
    theta = __fmaf_rn(theta_interp, __fsub_rn(1.0f, mix), __fmul_rn(theta_extrap, mix));
  }
  cache[2 * t] = __fmul_rn(dm::libm_cos(theta), a.mscale);
  cache[2 * t + 1] = __fmul_rn(dm::libm_sin(theta), a.mscale);
}

// One block per row (i1, i2, i3); thread slots s over the row's elements.
__global__ void __launch_bounds__(rope_threads) rope_rows_kernel(rope_args a, tview x, tview y, int t,
                                                                 const float* cache, bool in_place) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t i1 = r % x.ne[1], i2 = (r / x.ne[1]) % x.ne[2], i3 = r / (x.ne[1] * x.ne[2]);
  const char* xr = x.data + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3];
  char* yr = y.data + i1 * y.nb[1] + i2 * y.nb[2] + i3 * y.nb[3];
  const std::int64_t n0 = x.ne[0], nd = a.n_dims, off = a.n_offs;
  const bool vision = a.mode == rope_type_vision, normal = a.mode == rope_type_normal;
  const std::int64_t span_lo = vision ? 0 : off, span_hi = vision ? n0 : off + nd;
  const float* c = cache + i2 * a.n_pairs * 2;
  for (std::int64_t s = threadIdx.x; s < n0; s += blockDim.x) {
    if (s < span_lo || s >= span_hi) {
      if (!in_place) dm::store(yr + s * y.nb[0], t, dm::load(xr + s * x.nb[0], t));
      continue;
    }
    std::int64_t k, dist;
    if (vision) {
      if (s >= nd) continue;
      k = s, dist = nd;
    } else if (normal) {
      if ((s - off) & 1) continue;
      k = (s - off) / 2, dist = 1;
    } else {
      if (s - off >= nd / 2) continue;
      k = s - off, dist = nd / 2;
    }
    const float x0 = dm::load(xr + s * x.nb[0], t), x1 = dm::load(xr + (s + dist) * x.nb[0], t);
    const float cs = c[2 * k], sn = c[2 * k + 1];
    dm::store(yr + s * y.nb[0], t, __fmaf_rn(x0, cs, -__fmul_rn(x1, sn)));
    dm::store(yr + (s + dist) * y.nb[0], t, __fmaf_rn(x0, sn, __fmul_rn(x1, cs)));
  }
}

}  // namespace

bool rope_supports(const tensor* node) {
  if (node->op != op::rope) return false;
  const tensor* a = node->src[0];
  const tensor* pos = node->src[1];
  const tensor* ff = node->src[2];
  if (!a || !pos || pos->type != type::i32 || pos->nb[0] != 4) return false;
  if (ff && (ff->type != type::f32 || ff->nb[0] != 4)) return false;
  if (!((a->type == type::f32 || a->type == type::f16) && node->type == a->type && a->same_shape(*node)))
    return false;
  const std::size_t es = gk::type_size(a->type);
  for (int i = 0; i < 4; ++i)
    if (a->nb[i] % es || node->nb[i] % es) return false;
  // the row geometry the CPU accepts (it throws otherwise; so would run)
  const std::int64_t n0 = a->ne[0], nd = node->param_i32(1), off = node->param_i32(15);
  const int mode = node->param_i32(2);
  if (nd % 2 || nd > n0 || off < 0 || off % 2 || off + nd > n0 || (mode == rope_type_vision && 2 * nd != n0))
    return false;
  if (mode & rope_type_mrope) {
    std::int64_t sd = 0;
    for (int i = 0; i < 4; ++i) sd += node->param_i32(11 + i);
    if (sd <= 0 || sd > n0) return false;
  }
  return true;
}

void rope_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tensor* ff = node->src[2];
  rope_args p{};
  p.n_dims = node->param_i32(1);
  p.mode = node->param_i32(2);
  const int n_ctx_orig = node->param_i32(4);
  const float freq_base = node->param_f32(5);
  p.freq_scale = node->param_f32(6);
  p.ext_factor = node->param_f32(7);
  const float attn_factor = node->param_f32(8);
  const float beta_fast = node->param_f32(9), beta_slow = node->param_f32(10);
  for (int i = 0; i < 4; ++i) p.sections[i] = node->param_i32(11 + i);
  p.n_offs = node->param_i32(15);
  // host arithmetic as the CPU's (cpu/rope.hpp: params, yarn, rope)
  float corr[2];
  rope_yarn_corr_dims(p.n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
  p.corr0 = corr[0];
  p.corr1 = corr[1];
  p.mscale = attn_factor;
  if (p.ext_factor != 0.0f) p.mscale *= std::fma(0.1f, std::log(1.0f / p.freq_scale), 1.0f);
  p.theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(p.n_dims));
  p.pos = static_cast<const std::int32_t*>(node->src[1]->data);
  p.ff = ff ? static_cast<const float*>(ff->data) : nullptr;
  p.n2 = a->ne[2];
  p.n_pairs = p.mode == rope_type_vision ? p.n_dims : p.n_dims / 2;

  const std::int64_t entries = p.n2 * p.n_pairs;
  float* cache = static_cast<float*>(x.scratch(static_cast<std::size_t>(entries > 0 ? entries : 1) * 2 * sizeof(float)));
  if (entries > 0) {
    rope_cache_kernel<<<blocks_for(entries, rope_threads), rope_threads, 0, x.stream>>>(p, cache);
    GK_CUDA_LAUNCHED();
  }
  const bool in_place = a->data == node->data && a->same_strides(*node);
  const int t = a->type == type::f16 ? 1 : 0;
  rope_rows_kernel<<<static_cast<unsigned>(a->nrows()), rope_threads, 0, x.stream>>>(p, view_of(a), view_of(node), t,
                                                                                      cache, in_place);
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
