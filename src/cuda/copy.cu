// SPDX-License-Identifier: MIT
// CUDA kernels: data movement (gk/cpu/copy.hpp is the definition): dup/cpy/cont, set_rows,
// repeat, concat.
//
// dup/cpy/cont copy in flat order (i0 fastest): destination element k is source element k,
// each located through its own tensor's shape and byte strides, so any views on either side
// work. One type on both sides moves bytes (a unit is an element, or a block for block
// formats with packed rows), so NaN payloads and block bytes survive as on the CPU; f32,
// f16 and bf16 convert through f32 with the CPU's rounding (device_math.cuh). Into a block
// format a thread gathers one block's 32 values from the source's flat order and encodes
// them with the CPU's encoder restated for the device, so the bytes equal the CPU's:
// q8_0 (max-abs scale), q4_0 and q5_0 (fit_scale: scale grid, exact crossing sweep, f16
// neighbours), q4_1 and q5_1 (fit_affine: 48 (scale, anchor) candidates, least squares,
// two refits, f16 neighbours), iq4_nl (crossing sweep over the codebook's midpoints, f16
// neighbours, two refits), all without importance as the CPU's copies encode. Every
// rounding of the CPU's contraction-off build is spelled out (__fmul_rn, __dadd_rn ...).
// Other formats are not encoded here: those copies stay on the CPU.
// The search encoders run one 32-weight block per thread, ~255 registers with some
// spilling: a copy into them is an encode of the rows, not a bandwidth-bound move.
//
// set_rows: one block per source row; a row whose index a later source row of the same
// slice repeats is skipped, so the later row wins as on the CPU whatever the block order.
// repeat and concat move element bytes by index arithmetic.
#include <cmath>
#include <string>
#include <type_traits>

#include "device_math.cuh"
#include "gk/formats/codebooks.inc"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr unsigned cp_threads = 256;


__device__ __forceinline__ char* at(const tview& t, std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  return t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// unit bytes from s to d (unit: an element or a block)
__device__ __forceinline__ void move_unit(char* d, const char* s, int unit) {
  switch (unit) {
    case 1: *d = *s; return;
    case 2: *reinterpret_cast<std::uint16_t*>(d) = *reinterpret_cast<const std::uint16_t*>(s); return;
    case 4: *reinterpret_cast<std::uint32_t*>(d) = *reinterpret_cast<const std::uint32_t*>(s); return;
    case 8: *reinterpret_cast<std::uint64_t*>(d) = *reinterpret_cast<const std::uint64_t*>(s); return;
    default:
      if (unit % 2 == 0 && (reinterpret_cast<std::uintptr_t>(d) | reinterpret_cast<std::uintptr_t>(s)) % 2 == 0) {
        for (int b = 0; b < unit; b += 2)
          *reinterpret_cast<std::uint16_t*>(d + b) = *reinterpret_cast<const std::uint16_t*>(s + b);
      } else {
        for (int b = 0; b < unit; ++b) d[b] = s[b];
      }
  }
}

// Flat-order copy over n units of d: unit > 0 moves that many bytes, unit == 0 converts
// float types (dt, st ids). Units of block formats are counted with ne0 in blocks.
template <class IT>
__global__ __launch_bounds__(cp_threads) void copy_flat_kernel(tview d, int dt, tview s, int st, int unit, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * cp_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * cp_threads) {
    IT i0, i1, i2, i3, j0, j1, j2, j3;
    split_index(k, d.ne, i0, i1, i2, i3);
    split_index(k, s.ne, j0, j1, j2, j3);
    char* pd = at(d, i0, i1, i2, i3);
    const char* ps = at(s, j0, j1, j2, j3);
    if (unit) move_unit(pd, ps, unit);
    else dm::store(pd, dt, dm::load(ps, st));
  }
}

// ---- encoders: gk::formats::W::encode restated (importance none, as copies encode) ----

// q8_0: d = max|x| / 127, q = nearest(x / d) (legacy.hpp)
__device__ __forceinline__ void encode_q8_0(const float* x, char* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float v = fabsf(x[j]);
    amax = amax < v ? v : amax;  // std::max(amax, v)
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  auto* qs = reinterpret_cast<std::int8_t*>(out + 2);
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<std::int8_t>(__float2int_rn(__fmul_rn(x[j], id)));
  const std::uint16_t h = dm::f16_bits(d);
  out[0] = static_cast<char>(h & 0xff);
  out[1] = static_cast<char>(h >> 8);
}

// ---- q4_0 / q5_0: detail::fit_scale<32, lo, hi> (legacy.hpp) without importance ----
// Every weight is 1, so the CPU's products by w are exact and left out here. Its
// operations are otherwise kept one for one, each rounding spelled out (__fmul_rn,
// __fadd_rn, __dmul_rn, __dadd_rn) so nvcc fuses nothing the CPU rounds twice.

constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23
__device__ __forceinline__ float round_code(float v) { return __fsub_rn(__fadd_rn(v, round_magic), round_magic); }
template <int lo, int hi>
__device__ __forceinline__ float nearest_code(float v) {
  const float c = round_code(v);
  return __fmul_rn(0.5f, __fadd_rn(__fsub_rn(fabsf(__fsub_rn(c, static_cast<float>(lo))), fabsf(__fsub_rn(c, static_cast<float>(hi)))),
                                   static_cast<float>(lo + hi)));
}
__device__ __forceinline__ std::uint16_t f16_finite(float d) {
  std::uint16_t h = dm::f16_bits(d);
  if ((h & 0x7fffu) > 0x7bffu) h = static_cast<std::uint16_t>((h & 0x8000u) | 0x7bffu);
  return h;
}
__device__ __forceinline__ bool f16_step(std::uint16_t h, int step, std::uint16_t& out) {
  const int m = static_cast<int>(h & 0x7fffu) + step;
  if (m < 0 || m > 0x7bff) return false;
  out = static_cast<std::uint16_t>((h & 0x8000u) | static_cast<unsigned>(m));
  return true;
}
__device__ __forceinline__ float f16_value(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }

template <int K>
struct best_scales {
  float d[K];
  double score[K];
  int n = 0;
  __device__ void offer(float dd, double s) {
    int at = n < K ? n : K;
    while (at > 0 && score[at - 1] < s) --at;
    if (at >= K) return;
    for (int k = (n < K ? n : K - 1); k > at; --k) {
      d[k] = d[k - 1];
      score[k] = score[k - 1];
    }
    d[at] = dd;
    score[at] = s;
    if (n < K) ++n;
  }
};

constexpr int grid_points = 32;  // scale_grid<32, lo, hi>::G for the 4- and 5-bit codes
struct scale_grids {
  float q4_0[grid_points], q5_0[grid_points];
};

template <int lo, int hi>
__device__ int best_on_grid(const float* y, const float* t) {
  float sxq[grid_points], sqq[grid_points];
  for (int j = 0; j < grid_points; ++j) sxq[j] = sqq[j] = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float yi = y[i];
#pragma unroll
    for (int j = 0; j < grid_points; ++j) {
      const float c = nearest_code<lo, hi>(__fmul_rn(t[j], yi));
      sxq[j] = __fadd_rn(sxq[j], __fmul_rn(yi, c));
      sqq[j] = __fadd_rn(sqq[j], __fmul_rn(c, c));
    }
  }
  int best = -1;
  float top = 0.0f;
#pragma unroll
  for (int j = 0; j < grid_points; ++j) {
    const float e = __fdiv_rn(__fmul_rn(sxq[j], sxq[j]), sqq[j]);
    if (sqq[j] > 0.0f && sxq[j] > 0.0f && e > top) {
      top = e;
      best = j;
    }
  }
  return best;
}

// sweep_window: the crossings of (ta, tb] in order, each assignment's least-squares d offered.
// Between neighbouring grid points a weight crosses at most 3 boundaries (t1 (r^2 - 1) < 2.4
// for these grids); 8 per weight leaves room for the ones float rounding puts at ta.
template <int lo, int hi, int K>
__device__ void sweep_window(const float* y, float ta, float tb, best_scales<K>& out) {
  constexpr int cap = 32 * 8;
  float et[cap];
  unsigned short ei[cap];  // weight index << 8 | (code - lo)
  signed char cur[32];
  double sxq = 0.0, sqq = 0.0;
  int ne = 0;
  for (int i = 0; i < 32; ++i) {
    float v = __fmul_rn(ta, y[i]);
    v = v < static_cast<float>(lo) ? static_cast<float>(lo) : v;
    v = static_cast<float>(hi) < v ? static_cast<float>(hi) : v;
    int c = static_cast<int>(round_code(v));
    cur[i] = static_cast<signed char>(c);
    sxq = __dadd_rn(sxq, __dmul_rn(static_cast<double>(y[i]), static_cast<double>(c)));
    sqq = __dadd_rn(sqq, static_cast<double>(c * c));
    if (y[i] > 0.0f) {
      for (; c < hi && ne < cap; ++c) {
        const float t = __fdiv_rn(__fadd_rn(static_cast<float>(c), 0.5f), y[i]);
        if (!(t <= tb)) break;
        et[ne] = t;
        ei[ne++] = static_cast<unsigned short>(i << 8 | (c + 1 - lo));
      }
    } else if (y[i] < 0.0f) {
      for (; c > lo && ne < cap; --c) {
        const float t = __fdiv_rn(__fsub_rn(static_cast<float>(c), 0.5f), y[i]);
        if (!(t <= tb)) break;
        et[ne] = t;
        ei[ne++] = static_cast<unsigned short>(i << 8 | (c - 1 - lo));
      }
    }
  }
  if (sqq > 0.0 && sxq > 0.0) out.offer(static_cast<float>(__ddiv_rn(sxq, sqq)), __ddiv_rn(__dmul_rn(sxq, sxq), sqq));
  // (t, index) is a total order here (one weight's crossings are 1/|y| >= 1 apart), so any
  // sort gives std::sort's order
  for (int k = 1; k < ne; ++k) {
    const float t = et[k];
    const unsigned short e = ei[k];
    int m = k - 1;
    while (m >= 0 && (et[m] > t || (et[m] == t && (ei[m] >> 8) > (e >> 8)))) {
      et[m + 1] = et[m];
      ei[m + 1] = ei[m];
      --m;
    }
    et[m + 1] = t;
    ei[m + 1] = e;
  }
  for (int k = 0; k < ne; ++k) {
    const int i = ei[k] >> 8, from = cur[i], to = static_cast<int>(ei[k] & 0xff) + lo;
    sxq = __dadd_rn(sxq, __dmul_rn(static_cast<double>(y[i]), static_cast<double>(to - from)));
    sqq = __dadd_rn(sqq, static_cast<double>(to * to - from * from));
    cur[i] = static_cast<signed char>(to);
    if (sqq > 0.0 && sxq > 0.0) out.offer(static_cast<float>(__ddiv_rn(sxq, sqq)), __ddiv_rn(__dmul_rn(sxq, sxq), sqq));
  }
}

template <int lo, int hi>
__device__ double codes_for_scale(const float* x, const float* y, float amax, float d, signed char* q) {
  const float r = __fdiv_rn(amax, d);
  if (!(fabsf(r) <= 0x1p22f)) return __longlong_as_double(0x7ff0000000000000ll);
  double err = 0.0;
  for (int i = 0; i < 32; ++i) {
    const float c = nearest_code<lo, hi>(__fmul_rn(y[i], r));
    q[i] = static_cast<signed char>(c);
    const double e = __dsub_rn(static_cast<double>(x[i]), static_cast<double>(__fmul_rn(c, d)));
    err = __dadd_rn(err, __dmul_rn(e, e));
  }
  return err;
}

// the f16 bits of d; q gets the codes
template <int lo, int hi>
__device__ std::uint16_t fit_scale(const float* x, const float* grid, signed char* q) {
  constexpr int M = -lo > hi ? -lo : hi, K = 3;
  for (int i = 0; i < 32; ++i) q[i] = 0;
  float amax = 0.0f;
  bool constant = true;
  for (int i = 0; i < 32; ++i) {
    const float a = fabsf(x[i]);
    amax = amax < a ? a : amax;
    constant = constant && x[i] == x[0];
  }
  if (!(amax > 0.0f)) return 0;
  float y[32];
  for (int i = 0; i < 32; ++i) y[i] = __fdiv_rn(x[i], amax);
  float cand[2 * M];
  int nc = 0;
  if (constant) {
    for (int k = lo; k <= hi; ++k)
      if (k != 0) cand[nc++] = __fdiv_rn(x[0], static_cast<float>(k));
  } else {
    best_scales<K> best_d;
    for (int s = 0; s < 2; ++s) {  // d > 0 on y, then d < 0 as d' on -y (the range is not symmetric)
      float yy[32];
      for (int i = 0; i < 32; ++i) yy[i] = s ? -y[i] : y[i];
      const int g = best_on_grid<lo, hi>(yy, grid);
      if (g < 0) continue;
      best_scales<K> part;
      sweep_window<lo, hi>(yy, grid[g - 1 > 0 ? g - 1 : 0], grid[g + 1 < grid_points - 1 ? g + 1 : grid_points - 1], part);
      for (int k = 0; k < part.n; ++k) best_d.offer(__fmul_rn(__fmul_rn(s ? -1.0f : 1.0f, part.d[k]), amax), part.score[k]);
    }
    for (int k = 0; k < best_d.n; ++k) cand[nc++] = best_d.d[k];
  }
  std::uint16_t best_h = 0;
  double best = 0.0;
  for (int i = 0; i < 32; ++i) best = __dadd_rn(best, __dmul_rn(static_cast<double>(x[i]), static_cast<double>(x[i])));
  signed char tmp[32];
  std::uint16_t tried[3 * 2 * M];
  int ntried = 0;
  for (int k = 0; k < nc; ++k) {
    const std::uint16_t h0 = f16_finite(cand[k]);
    for (int step = -1; step <= 1; ++step) {
      std::uint16_t h;
      if (!f16_step(h0, step, h) || (h & 0x7fffu) == 0) continue;
      bool seen = false;
      for (int t = 0; t < ntried; ++t) seen = seen || tried[t] == h;
      if (seen) continue;
      tried[ntried++] = h;
      const double err = codes_for_scale<lo, hi>(x, y, amax, f16_value(h), tmp);
      if (err < best) {
        best = err;
        best_h = h;
        for (int i = 0; i < 32; ++i) q[i] = tmp[i];
      }
    }
  }
  return best_h;
}

__device__ __forceinline__ void put_f16(char* out, std::uint16_t h) {
  out[0] = static_cast<char>(h & 0xff);
  out[1] = static_cast<char>(h >> 8);
}

// q4_0: d, then byte j = (q_j + 8) | (q_{j+16} + 8) << 4
__device__ __noinline__ void encode_q4_0(const float* x, char* out, const scale_grids& g) {
  signed char q[32];
  put_f16(out, fit_scale<-8, 7>(x, g.q4_0, q));
  for (int j = 0; j < 16; ++j) out[2 + j] = static_cast<char>((q[j] + 8) | ((q[j + 16] + 8) << 4));
}

// q5_0: d, qh (fifth bits, bit j of a little-endian word), qs (low nibbles as q4_0)
__device__ __noinline__ void encode_q5_0(const float* x, char* out, const scale_grids& g) {
  signed char q[32];
  put_f16(out, fit_scale<-16, 15>(x, g.q5_0, q));
  std::uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    const int c0 = q[j] + 16, c1 = q[j + 16] + 16;
    out[6 + j] = static_cast<char>((c0 & 0x0f) | ((c1 & 0x0f) << 4));
    h |= static_cast<std::uint32_t>(c0 >> 4) << j;
    h |= static_cast<std::uint32_t>(c1 >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) out[2 + k] = static_cast<char>(h >> (8 * k));
}

// ---- q4_1 / q5_1: detail::fit_affine<32, qmax> (legacy.hpp) without importance ----

struct affine_pass {
  double err, nd, nm;
  bool ok;
};

// codes for the decoded (d, m), their error and least-squares (nd, nm): fit_affine's `run`
template <int qmax>
__device__ affine_pass affine_run(const float* x, const float* y, bool spread, float range, float mn, double sw,
                                  double swx, float d, float m, unsigned char* qq) {
  const float a = spread && d != 0.0f ? __fdiv_rn(range, d) : 0.0f;
  const float b = spread && d != 0.0f ? __fdiv_rn(__fsub_rn(mn, m), d) : 0.0f;
  const bool by_y = spread && fabsf(a) <= 0x1p21f && fabsf(b) <= 0x1p21f;
  double err = 0.0, swq = 0.0, swqq = 0.0, swxq = 0.0;
  for (int i = 0; i < 32; ++i) {
    float c;
    if (by_y) {
      c = nearest_code<0, qmax>(__fadd_rn(__fmul_rn(y[i], a), b));
    } else {
      float v = 0.0f;
      if (d != 0.0f) {
        v = __fdiv_rn(__fsub_rn(x[i], m), d);
        v = v < 0.0f ? 0.0f : v;
        v = static_cast<float>(qmax) < v ? static_cast<float>(qmax) : v;
      }
      c = round_code(v);
    }
    qq[i] = static_cast<unsigned char>(c);
    const double e = __dsub_rn(static_cast<double>(x[i]), static_cast<double>(__fadd_rn(__fmul_rn(c, d), m)));
    err = __dadd_rn(err, __dmul_rn(e, e));
    swq = __dadd_rn(swq, static_cast<double>(c));
    swqq = __dadd_rn(swqq, static_cast<double>(__fmul_rn(c, c)));
    swxq = __dadd_rn(swxq, __dmul_rn(static_cast<double>(x[i]), static_cast<double>(c)));
  }
  const double det = __dsub_rn(__dmul_rn(sw, swqq), __dmul_rn(swq, swq));
  affine_pass p{err, 0.0, 0.0, det > 0.0};
  if (p.ok) {
    p.nd = __ddiv_rn(__dsub_rn(__dmul_rn(sw, swxq), __dmul_rn(swq, swx)), det);
    p.nm = __ddiv_rn(__dsub_rn(__dmul_rn(swqq, swx), __dmul_rn(swq, swxq)), det);
    p.ok = p.nd > 0.0;
  }
  return p;
}

template <int qmax>
__device__ void fit_affine(const float* x, unsigned char* q, std::uint16_t& dh, std::uint16_t& mh) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < 32; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = mx < x[i] ? x[i] : mx;
  }
  double sw = 0.0, swx = 0.0;
  for (int i = 0; i < 32; ++i) {
    sw = __dadd_rn(sw, 1.0);
    swx = __dadd_rn(swx, static_cast<double>(x[i]));
  }
  const float range = __fsub_rn(mx, mn);
  const bool spread = range > 0.0f && range < INFINITY;
  float y[32];
  for (int i = 0; i < 32; ++i) y[i] = spread ? __fdiv_rn(__fsub_rn(x[i], mn), range) : 0.0f;
  unsigned char tmp[32];
  mh = f16_finite(mn);
  dh = 0;
  double best = affine_run<qmax>(x, y, spread, range, mn, sw, swx, 0.0f, f16_value(mh), q).err;
  auto consider = [&](std::uint16_t hd, std::uint16_t hm) {
    const affine_pass p = affine_run<qmax>(x, y, spread, range, mn, sw, swx, f16_value(hd), f16_value(hm), tmp);
    if (p.err < best) {
      best = p.err;
      dh = hd;
      mh = hm;
      for (int i = 0; i < 32; ++i) q[i] = tmp[i];
    }
    return p;
  };
  if (mx == mn) {  // constant: m carries the value, d * q what rounding m to f16 lost
    const float r = __fsub_rn(mn, f16_value(mh));
    if (r != 0.0f)
      for (int c = 1; c <= qmax; ++c) consider(f16_finite(__fdiv_rn(r, static_cast<float>(c))), mh);
    return;
  }
  if (!spread) return;
  // step 1: 16 scales x 3 anchors, least squares per candidate, the best K = 4 kept
  constexpr int S = 16, C = 3 * S, K = 4;
  float swq[C], swqq[C], swyq[C];
  for (int j = 0; j < C; ++j) swq[j] = swqq[j] = swyq[j] = 0.0f;
  float swy = 0.0f, swyy = 0.0f, swf = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float yi = y[i];
    swf = __fadd_rn(swf, 1.0f);
    swy = __fadd_rn(swy, yi);
    swyy = __fadd_rn(swyy, __fmul_rn(yi, yi));
    for (int sc = 0; sc < S; ++sc) {
      const float d0 = __fdiv_rn(__fadd_rn(0.8f, __fdiv_rn(__fmul_rn(0.3f, static_cast<float>(sc)), static_cast<float>(S - 1))),
                                 static_cast<float>(qmax));
      const float slack = __fsub_rn(1.0f, __fmul_rn(d0, static_cast<float>(qmax)));
      const float it = __fdiv_rn(1.0f, d0);
#pragma unroll
      for (int an = 0; an < 3; ++an) {
        const float m0 = an == 0 ? 0.0f : an == 1 ? slack : __fmul_rn(0.5f, slack);
        const int j = 3 * sc + an;
        const float c = nearest_code<0, qmax>(__fadd_rn(__fmul_rn(yi, it), __fdiv_rn(-m0, d0)));
        swq[j] = __fadd_rn(swq[j], c);
        swqq[j] = __fadd_rn(swqq[j], __fmul_rn(c, c));
        swyq[j] = __fadd_rn(swyq[j], __fmul_rn(yi, c));
      }
    }
  }
  double top_err[K];
  float top_d[K], top_m[K];
  int nt = 0;
  for (int j = 0; j < C; ++j) {
    const double det = __dsub_rn(__dmul_rn(static_cast<double>(swf), static_cast<double>(swqq[j])),
                                 __dmul_rn(static_cast<double>(swq[j]), static_cast<double>(swq[j])));
    if (!(det > 0.0)) continue;
    const double d = __ddiv_rn(__dsub_rn(__dmul_rn(static_cast<double>(swf), static_cast<double>(swyq[j])),
                                         __dmul_rn(static_cast<double>(swq[j]), static_cast<double>(swy))),
                               det);
    const double m = __ddiv_rn(__dsub_rn(__dmul_rn(static_cast<double>(swqq[j]), static_cast<double>(swy)),
                                         __dmul_rn(static_cast<double>(swq[j]), static_cast<double>(swyq[j]))),
                               det);
    if (!(d > 0.0)) continue;
    const double e = __dsub_rn(__dsub_rn(static_cast<double>(swyy), __dmul_rn(d, static_cast<double>(swyq[j]))),
                               __dmul_rn(m, static_cast<double>(swy)));
    int at = nt < K ? nt : K;
    while (at > 0 && top_err[at - 1] > e) --at;
    if (at >= K) continue;
    for (int k = (nt < K ? nt : K - 1); k > at; --k) {
      top_err[k] = top_err[k - 1];
      top_d[k] = top_d[k - 1];
      top_m[k] = top_m[k - 1];
    }
    top_err[at] = e;
    top_d[at] = static_cast<float>(__dmul_rn(d, static_cast<double>(range)));
    top_m[at] = static_cast<float>(__dadd_rn(static_cast<double>(mn), __dmul_rn(m, static_cast<double>(range))));
    if (nt < K) ++nt;
  }
  // step 2: round, refit twice
  for (int k = 0; k < nt; ++k) {
    float d = top_d[k], m = top_m[k];
    for (int r = 0; r < 3; ++r) {
      const std::uint16_t hd = f16_finite(d), hm = f16_finite(m);
      if ((hd & 0x7fffu) == 0) break;
      const affine_pass p = consider(hd, hm);
      if (r == 2 || !p.ok) break;
      d = static_cast<float>(p.nd);
      m = static_cast<float>(p.nm);
    }
  }
  // step 3: the neighbouring halves of the best (d, m)
  const std::uint16_t bd = dh, bm = mh;
  for (int sd = -1; sd <= 1; ++sd)
    for (int sm = -1; sm <= 1; ++sm) {
      std::uint16_t hd, hm;
      if ((sd || sm) && f16_step(bd, sd, hd) && f16_step(bm, sm, hm)) consider(hd, hm);
    }
}

// q4_1: d, m, then byte j = q_j | q_{j+16} << 4
__device__ __noinline__ void encode_q4_1(const float* x, char* out) {
  unsigned char q[32];
  std::uint16_t dh, mh;
  fit_affine<15>(x, q, dh, mh);
  put_f16(out, dh);
  put_f16(out + 2, mh);
  for (int j = 0; j < 16; ++j) out[4 + j] = static_cast<char>(q[j] | (q[j + 16] << 4));
}

// q5_1: d, m, qh (fifth bits), qs (low nibbles)
__device__ __noinline__ void encode_q5_1(const float* x, char* out) {
  unsigned char q[32];
  std::uint16_t dh, mh;
  fit_affine<31>(x, q, dh, mh);
  put_f16(out, dh);
  put_f16(out + 2, mh);
  std::uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    out[8 + j] = static_cast<char>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
    h |= static_cast<std::uint32_t>(q[j] >> 4) << j;
    h |= static_cast<std::uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) out[4 + k] = static_cast<char>(h >> (8 * k));
}

// ---- iq4_nl: iq4_nl::encode (iq4.hpp) without importance ----

namespace cb = gk::codebooks;
__constant__ std::int8_t nl_values[16] = {
    cb::kvalues_iq4nl[0],  cb::kvalues_iq4nl[1],  cb::kvalues_iq4nl[2],  cb::kvalues_iq4nl[3],
    cb::kvalues_iq4nl[4],  cb::kvalues_iq4nl[5],  cb::kvalues_iq4nl[6],  cb::kvalues_iq4nl[7],
    cb::kvalues_iq4nl[8],  cb::kvalues_iq4nl[9],  cb::kvalues_iq4nl[10], cb::kvalues_iq4nl[11],
    cb::kvalues_iq4nl[12], cb::kvalues_iq4nl[13], cb::kvalues_iq4nl[14], cb::kvalues_iq4nl[15]};
constexpr int nl_lo = -127, nl_hi = 113, nl_zero = 8;
static_assert(cb::kvalues_iq4nl[0] == nl_lo && cb::kvalues_iq4nl[15] == nl_hi && cb::kvalues_iq4nl[8] == 1);

// nl4::nearest: the entry nearest the centre of v's half-unit step (the CPU's table, whose
// entry m is the first k minimising |lo + m/2 + 1/4 - values[k]|)
__device__ __forceinline__ int nl_nearest(float v) {
  v = static_cast<float>(nl_lo) < v ? v : static_cast<float>(nl_lo);  // NaN: lo
  v = static_cast<float>(nl_hi) < v ? static_cast<float>(nl_hi) : v;
  const int m = static_cast<int>(__fsub_rn(__fmul_rn(2.0f, v), 2.0f * nl_lo));
  const float c = __fadd_rn(__fadd_rn(static_cast<float>(nl_lo), __fmul_rn(0.5f, static_cast<float>(m))), 0.25f);
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (fabsf(__fsub_rn(c, static_cast<float>(nl_values[k]))) < fabsf(__fsub_rn(c, static_cast<float>(nl_values[best]))))
      best = k;
  return best;
}

// nl4::group_codes (the early stop only shortens a count whose result is then not used)
__device__ float nl_group_codes(const float* x, float d, unsigned char* L) {
  float err = 0.0f;
  if (d == 0.0f) {
    for (int i = 0; i < 32; ++i) {
      err = __fadd_rn(err, __fmul_rn(x[i], x[i]));
      L[i] = nl_zero;
    }
    return err;
  }
  const float inv = __fdiv_rn(1.0f, d);
  for (int i = 0; i < 32; ++i) {
    const int q = nl_nearest(__fmul_rn(x[i], inv));
    const float diff = __fsub_rn(__fmul_rn(d, static_cast<float>(nl_values[q])), x[i]);
    err = __fadd_rn(err, __fmul_rn(diff, diff));
    L[i] = static_cast<unsigned char>(q);
  }
  return err;
}

template <int K>
struct nl_top {
  float d[K];
  double score[K];
  int n = 0;
  __device__ void offer(float dd, double s) {
    int at = n < K ? n : K;
    while (at > 0 && __dmul_rn(score[at - 1], 1.0 - 1e-9) <= s) --at;
    if (at >= K) return;
    for (int k = (n < K ? n : K - 1); k > at; --k) {
      d[k] = d[k - 1];
      score[k] = score[k - 1];
    }
    d[at] = dd;
    score[at] = s;
    if (n < K) ++n;
  }
};

// nl4::sweep_group for one sign: the crossings as 15 sorted runs, merged pairwise as the
// CPU merges them, then swept
template <int K>
__device__ void nl_sweep_sign(const float* y, const unsigned char* order, nl_top<K>& out) {
  unsigned long long buf[2][32 * 8];
  int bounds[17], nr = 0, ne = 0;
  double sxv = 0.0, svv = 0.0;
  for (int i = 0; i < 32; ++i) {
    sxv = __dadd_rn(sxv, static_cast<double>(y[i]));
    svv = __dadd_rn(svv, 1.0);
  }
  auto push = [&](float t, int i, int to) {
    buf[0][ne++] = (static_cast<unsigned long long>(__float_as_uint(t)) << 16) | static_cast<unsigned long long>(i << 4 | to);
  };
  auto mid = [](int k) { return __fmul_rn(0.5f, static_cast<float>(nl_values[k] + nl_values[k + 1])); };
  for (int c = nl_zero; c < 15; ++c) {
    bounds[nr++] = ne;
    for (int o = 0; o < 32; ++o) {
      const int i = order[o];
      if (y[i] > 0.0f) push(__fdiv_rn(mid(c), y[i]), i, c + 1);
    }
  }
  for (int c = nl_zero; c > 0; --c) {
    bounds[nr++] = ne;
    for (int o = 0; o < 32; ++o) {
      const int i = order[o];
      if (y[i] < 0.0f) push(__fdiv_rn(mid(c - 1), y[i]), i, c - 1);
    }
  }
  bounds[nr] = ne;
  int src = 0;
  while (nr > 1) {
    int m = 0;
    for (int r = 0; r < nr; r += 2) {
      const int b0 = bounds[r], b1 = bounds[r + 1 < nr ? r + 1 : nr], b2 = bounds[r + 2 < nr ? r + 2 : nr];
      // std::merge: from the first range while the second's head is not smaller
      int p = b0, q = b1, o = b0;
      while (p < b1 && q < b2) buf[1 - src][o++] = buf[src][q] < buf[src][p] ? buf[src][q++] : buf[src][p++];
      while (p < b1) buf[1 - src][o++] = buf[src][p++];
      while (q < b2) buf[1 - src][o++] = buf[src][q++];
      bounds[m++] = b0;
    }
    bounds[m] = ne;
    nr = m;
    src = 1 - src;
  }
  auto offer = [&] {
    if (svv > 0.0 && (out.n < K || __dmul_rn(sxv, sxv) >= __dmul_rn(__dmul_rn(out.score[K - 1], 1.0 - 1e-9), svv)))
      out.offer(static_cast<float>(__ddiv_rn(sxv, svv)), __ddiv_rn(__dmul_rn(sxv, sxv), svv));
  };
  offer();
  for (int k = 0; k < ne; ++k) {
    const unsigned long long e = buf[src][k];
    const int i = static_cast<int>((e >> 4) & 0xfff), to = static_cast<int>(e & 0xf);
    const double vf = nl_values[y[i] > 0.0f ? to - 1 : to + 1], vt = nl_values[to];
    sxv = __dadd_rn(sxv, __dmul_rn(static_cast<double>(y[i]), __dsub_rn(vt, vf)));
    svv = __dadd_rn(svv, __dsub_rn(__dmul_rn(vt, vt), __dmul_rn(vf, vf)));
    offer();
  }
}

__device__ __noinline__ void encode_iq4_nl(const float* x, char* out) {
  unsigned char L[32], T[32];
  float best = nl_group_codes(x, 0.0f, L);
  std::uint16_t best_h = 0;
  constexpr int K = 4;
  nl_top<K> pos, neg;
  {
    // the weights by magnitude, largest first, ties by index
    unsigned char order[32];
    for (int i = 0; i < 32; ++i) order[i] = static_cast<unsigned char>(i);
    for (int k = 1; k < 32; ++k) {
      const unsigned char v = order[k];
      const float fv = fabsf(x[v]);
      int m = k - 1;
      while (m >= 0 && (fabsf(x[order[m]]) < fv || (fabsf(x[order[m]]) == fv && order[m] > v))) {
        order[m + 1] = order[m];
        --m;
      }
      order[m + 1] = v;
    }
    float y[32];
    for (int i = 0; i < 32; ++i) y[i] = x[i];
    nl_sweep_sign<K>(y, order, pos);
    for (int i = 0; i < 32; ++i) y[i] = -x[i];
    nl_sweep_sign<K>(y, order, neg);
  }
  auto consider = [&](std::uint16_t h) {
    const float d = f16_value(h);
    if (d == 0.0f) return false;
    const float e = nl_group_codes(x, d, T);
    if (e < best) {
      best = e;
      best_h = h;
      for (int i = 0; i < 32; ++i) L[i] = T[i];
      return true;
    }
    return false;
  };
  for (int k = 0; k < pos.n + neg.n; ++k) {
    const std::uint16_t h0 = f16_finite(k < pos.n ? pos.d[k] : -neg.d[k - pos.n]);
    for (int step = -1; step <= 1; ++step) {
      std::uint16_t h;
      if (f16_step(h0, step, h)) consider(h);
    }
  }
  for (int iter = 0; iter < 2 && best_h != 0; ++iter) {
    double sxv = 0.0, svv = 0.0;
    for (int i = 0; i < 32; ++i) {
      const double v = nl_values[L[i]];
      sxv = __dadd_rn(sxv, __dmul_rn(static_cast<double>(x[i]), v));
      svv = __dadd_rn(svv, __dmul_rn(v, v));
    }
    if (!(svv > 0.0)) break;
    const std::uint16_t h = f16_finite(static_cast<float>(__ddiv_rn(sxv, svv)));
    if (h == best_h || !consider(h)) break;
  }
  put_f16(out, best_h);
  for (int j = 0; j < 16; ++j) out[2 + j] = static_cast<char>(L[j] | (L[j + 16] << 4));
}

// one instantiation per format, so the search encoders' registers do not weigh on the others
template <type T>
__device__ __forceinline__ void encode_block(const float* x, char* out, const scale_grids& g) {
  if constexpr (T == type::q8_0) encode_q8_0(x, out);
  else if constexpr (T == type::q4_0) encode_q4_0(x, out, g);
  else if constexpr (T == type::q5_0) encode_q5_0(x, out, g);
  else if constexpr (T == type::q4_1) encode_q4_1(x, out);
  else if constexpr (T == type::q5_1) encode_q5_1(x, out);
  else if constexpr (T == type::iq4_nl) encode_iq4_nl(x, out);
}

// Flat-order copy into a block format: one thread per destination block; d's rows packed.
template <type T, class IT>
__global__ __launch_bounds__(cp_threads) void copy_encode_kernel(tview d, int block_bytes, tview s, int st,
                                                                 IT nblocks, scale_grids grids) {
  const IT per_row = static_cast<IT>(d.ne[0] / 32);
  for (IT b = static_cast<IT>(blockIdx.x) * cp_threads + threadIdx.x; b < nblocks;
       b += static_cast<IT>(gridDim.x) * cp_threads) {
    const IT r = b / per_row, c = b % per_row;
    float x[32];
    const IT k0 = r * static_cast<IT>(d.ne[0]) + c * 32;  // flat index of the block's first value
    for (int j = 0; j < 32; ++j) {
      IT j0, j1, j2, j3;
      split_index(k0 + static_cast<IT>(j), s.ne, j0, j1, j2, j3);
      x[j] = dm::load(at(s, j0, j1, j2, j3), st);
    }
    IT i0, i1, i2, i3;
    split_index(r, d.ne + 1, i1, i2, i3, i0);  // row r of d: (i1, i2, i3); i0 is unused
    encode_block<T>(x, d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3] + c * block_bytes, grids);
  }
}

// set_rows: d[:, ids[i, i2 % c1, i3 % c2], i2, i3] = s[:, i, i2, i3]; one block per (i, i2, i3)
// T: the destination's block format, or f32 for the float types (dt says which)
template <type T>
__global__ __launch_bounds__(cp_threads) void copy_set_rows_kernel(tview d, int dt, int block_bytes, tview s, int st,
                                                                   tview ids, int ids64, scale_grids grids) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t i = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
  const char* irow = ids.data + (i2 % ids.ne[1]) * ids.nb[1] + (i3 % ids.ne[2]) * ids.nb[2];
  auto id_at = [&](std::int64_t j) -> std::int64_t {
    const char* p = irow + j * ids.nb[0];
    return ids64 ? *reinterpret_cast<const std::int64_t*>(p) : *reinterpret_cast<const std::int32_t*>(p);
  };
  const std::int64_t idx = id_at(i);
  // a later source row with the same index wins: this one then writes nothing
  int later = 0;
  for (std::int64_t j = i + 1 + threadIdx.x; j < s.ne[1] && !later; j += cp_threads) later = id_at(j) == idx;
  if (__syncthreads_or(later) || idx < 0 || idx >= d.ne[1]) return;
  const char* src = s.data + i * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
  char* dst = d.data + idx * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
  if constexpr (T == type::f32) {
    for (std::int64_t e = threadIdx.x; e < d.ne[0]; e += cp_threads)
      dm::store(dst + e * d.nb[0], dt, dm::load(src + e * s.nb[0], st));
  } else {
    for (std::int64_t c = threadIdx.x; c < d.ne[0] / 32; c += cp_threads) {
      float x[32];
      for (int j = 0; j < 32; ++j) x[j] = dm::load(src + (c * 32 + j) * s.nb[0], st);
      encode_block<T>(x, dst + c * block_bytes, grids);
    }
  }
}

// repeat: d[i] = s[i % s.ne] as bytes
template <class IT>
__global__ __launch_bounds__(cp_threads) void copy_repeat_kernel(tview d, tview s, int unit, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * cp_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * cp_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    move_unit(at(d, i0, i1, i2, i3), at(s, i0 % s.ne[0], i1 % s.ne[1], i2 % s.ne[2], i3 % s.ne[3]), unit);
  }
}

// concat along dim: a's part first, then b's, as bytes; a_nd is a.ne[dim]
template <class IT>
__global__ __launch_bounds__(cp_threads) void copy_concat_kernel(tview d, tview a, tview b, int dim, std::int64_t a_nd,
                                                                 int unit, IT n) {
  for (IT k = static_cast<IT>(blockIdx.x) * cp_threads + threadIdx.x; k < n; k += static_cast<IT>(gridDim.x) * cp_threads) {
    IT i0, i1, i2, i3;
    split_index(k, d.ne, i0, i1, i2, i3);
    const std::int64_t id = dim == 0 ? i0 : dim == 1 ? i1 : dim == 2 ? i2 : i3;
    const bool in_b = id >= a_nd;
    const std::int64_t off = in_b ? a_nd : 0;  // into b: that dim starts again at 0
    const std::int64_t j0 = i0 - (dim == 0 ? off : 0), j1 = i1 - (dim == 1 ? off : 0), j2 = i2 - (dim == 2 ? off : 0),
                       j3 = i3 - (dim == 3 ? off : 0);
    const char* ps = in_b ? at(b, j0, j1, j2, j3) : at(a, j0, j1, j2, j3);
    move_unit(at(d, i0, i1, i2, i3), ps, unit);
  }
}

bool is_f(type t) { return is_float_type(t); }
int tid(type t) { return static_cast<int>(t); }
bool encodable(type t) {
  return t == type::q8_0 || t == type::q4_0 || t == type::q5_0 || t == type::q4_1 || t == type::q5_1 ||
         t == type::iq4_nl;
}

// scale_grid<32, lo, hi>::t (legacy.hpp), computed as the CPU computes it (host pow)
void fill_grid(float* t, int lo, int hi) {
  const double m = -lo < hi ? -lo : hi, M = -lo < hi ? hi : -lo, U = 2.0;
  const double t0 = 0.75 * (m + 0.5), t1 = U * (M + 0.5);
  for (int j = 0; j < grid_points; ++j) t[j] = static_cast<float>(t0 * std::pow(t1 / t0, j / (grid_points - 1.0)));
}
const scale_grids& grids() {
  static const scale_grids g = [] {
    scale_grids r;
    fill_grid(r.q4_0, -8, 7);
    fill_grid(r.q5_0, -16, 15);
    return r;
  }();
  return g;
}
bool plain(type t) { return gk::block_size(t) == 1; }
bool unit_ok(type t) { return plain(t) && (type_size(t) == 1 || type_size(t) == 2 || type_size(t) == 4 || type_size(t) == 8); }

unsigned grid_for(std::int64_t n, const exec& x) {
  const std::int64_t cap = static_cast<std::int64_t>(x.props.sm_count > 0 ? x.props.sm_count : 132) * 16;
  const std::int64_t b = (n + cp_threads - 1) / cp_threads;
  return static_cast<unsigned>(b < 1 ? 1 : b < cap ? b : cap);
}

// f(std::integral_constant<type, T>) for the encodable format t
template <class F>
void with_format(type t, F&& f) {
  switch (t) {
    case type::q8_0: return f(std::integral_constant<type, type::q8_0>{});
    case type::q4_0: return f(std::integral_constant<type, type::q4_0>{});
    case type::q5_0: return f(std::integral_constant<type, type::q5_0>{});
    case type::q4_1: return f(std::integral_constant<type, type::q4_1>{});
    case type::q5_1: return f(std::integral_constant<type, type::q5_1>{});
    case type::iq4_nl: return f(std::integral_constant<type, type::iq4_nl>{});
    default: throw error("gk: CUDA: copy: no device encoder for " + std::string(gk::name(t)));
  }
}

template <class Launch>
void launch_sized(std::int64_t n, Launch&& l) {
  if (n < (std::int64_t{1} << 31)) l(std::uint32_t{});
  else l(std::uint64_t{});
}

// a block-format tensor's geometry in units of blocks (ne0 / block size, nb0 = block bytes)
tview unit_view(const tensor* t) {
  tview v = view_of(t);
  const std::int64_t bs = gk::block_size(t->type);
  if (bs > 1) {
    v.ne[0] /= bs;
    v.nb[0] = static_cast<std::int64_t>(type_size(t->type));
  }
  return v;
}

}  // namespace

bool copy_supports(const tensor* node) {
  const tensor* a = node->src[0];
  if (!a) return false;
  switch (node->op) {
    case op::dup: case op::cpy: case op::cont:
      if (a->nelements() != node->nelements()) return false;
      if (a->type == node->type) {
        if (plain(a->type)) return true;
        // blocks as units: packed rows, and rows in whole blocks
        return a->rows_contiguous() && node->rows_contiguous();
      }
      if (!is_f(a->type)) return false;
      if (is_f(node->type)) return true;
      return encodable(node->type) && node->rows_contiguous() && node->ne[0] % 32 == 0;
    case op::set_rows: {
      const tensor* ids = node->src[1];
      if (!ids || (ids->type != type::i64 && ids->type != type::i32)) return false;
      if (a->type != type::f32 && a->type != type::f16) return false;
      if (a->ne[0] != node->ne[0] || a->ne[2] != node->ne[2] || a->ne[3] != node->ne[3]) return false;
      if (ids->ne[0] != a->ne[1] || ids->ne[1] <= 0 || ids->ne[2] <= 0) return false;
      if (is_f(node->type)) return true;
      return encodable(node->type) && node->rows_contiguous() && node->ne[0] % 32 == 0;
    }
    case op::repeat:
      return unit_ok(a->type) && a->type == node->type && a->can_repeat_to(*node) && !a->is_empty();
    case op::concat: {
      const tensor* b = node->src[1];
      const int dim = node->param_i32(0);
      return b && unit_ok(a->type) && a->type == node->type && b->type == node->type && dim >= 0 && dim < 4;
    }
    default: return false;
  }
}

void copy_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  switch (node->op) {
    case op::dup: case op::cpy: case op::cont: {
      if (a->type == node->type || is_f(node->type)) {
        const tview d = unit_view(node), s = unit_view(a);
        const std::int64_t n = d.ne[0] * d.ne[1] * d.ne[2] * d.ne[3];
        if (n == 0) return;
        const int unit = a->type == node->type ? static_cast<int>(type_size(a->type)) : 0;
        launch_sized(n, [&](auto it) {
          using IT = decltype(it);
          copy_flat_kernel<IT><<<grid_for(n, x), cp_threads, 0, x.stream>>>(d, tid(node->type), s, tid(a->type), unit,
                                                                           static_cast<IT>(n));
        });
      } else {
        const std::int64_t nblocks = node->nelements() / 32;
        if (nblocks == 0) return;
        with_format(node->type, [&](auto fmt) {
          launch_sized(node->nelements(), [&](auto it) {
            using IT = decltype(it);
            copy_encode_kernel<decltype(fmt)::value, IT><<<grid_for(nblocks, x), cp_threads, 0, x.stream>>>(
                view_of(node), static_cast<int>(type_size(node->type)), view_of(a), tid(a->type),
                static_cast<IT>(nblocks), grids());
          });
        });
      }
      break;
    }
    case op::set_rows: {
      const tensor* ids = node->src[1];
      const std::int64_t rows = a->nrows();
      if (rows == 0) return;
      auto launch = [&](auto fmt) {
        copy_set_rows_kernel<decltype(fmt)::value><<<static_cast<unsigned>(rows), cp_threads, 0, x.stream>>>(
            view_of(node), tid(node->type), static_cast<int>(type_size(node->type)), view_of(a), tid(a->type),
            view_of(ids), ids->type == type::i64 ? 1 : 0, grids());
      };
      if (is_f(node->type)) launch(std::integral_constant<type, type::f32>{});
      else with_format(node->type, launch);
      break;
    }
    case op::repeat: {
      const std::int64_t n = node->nelements();
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        copy_repeat_kernel<IT><<<grid_for(n, x), cp_threads, 0, x.stream>>>(
            view_of(node), view_of(a), static_cast<int>(type_size(a->type)), static_cast<IT>(n));
      });
      break;
    }
    case op::concat: {
      const std::int64_t n = node->nelements();
      launch_sized(n, [&](auto it) {
        using IT = decltype(it);
        copy_concat_kernel<IT><<<grid_for(n, x), cp_threads, 0, x.stream>>>(
            view_of(node), view_of(a), view_of(node->src[1]), node->param_i32(0), a->ne[node->param_i32(0)],
            static_cast<int>(type_size(a->type)), static_cast<IT>(n));
      });
      break;
    }
    default: throw error("gk: CUDA: no copy kernel for " + describe(node));
  }
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
