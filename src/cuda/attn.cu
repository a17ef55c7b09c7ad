// SPDX-License-Identifier: MIT
// flash_attn_ext on the device: Q f32; K f32/f16/bf16/q8_0/q4_0 (quantized K decoded in
// the kernel); V f32/f16/bf16/q8_0/q4_0; f16 mask broadcast over heads and batches; ALiBi;
// logit softcap; sinks; grouped-query heads. Result [DV, n_head, n_q, batch] f32.
//
// Main idea: a block of 128 threads owns up to 8 query rows that read the same K/V head
// (consecutive query positions of one head, or the heads of one GQA group when n_q is
// small) and walks a range of keys in tiles of 32: the tile of K and V is decoded into
// shared memory once for all its rows, each thread scores (row, key) pairs, one warp per
// row does the online-softmax step (running max m, sum s, rescale factor alpha), and each
// thread accumulates its columns of V for every row in f32. Long key ranges are split
// across blocks (grid.y) so decode (one query row) still fills the GPU; every split
// leaves (m, s, acc) and a second kernel merges them in split order, adds the sink and
// normalises.
//
// Scores reproduce the CPU's (cpu/attn.hpp) bits: q is encoded as the CPU encodes it for
// K's dot (rounded to f16/bf16 for float K; q8_0 blocks for q8_0/q4_0 K, scale
// amax/127 and nearest codes), and each dot is the format's row definition: the float
// formats' 16 lanes summed in index order then the fixed pairwise tree
// (formats/float.hpp), or the quantized blocks' exact integer sums scaled and added in
// block order (formats/legacy.hpp); then * scale, softcap by gk's tanh, + slope * mask.
// What differs from the CPU is only the softmax order: the CPU streams keys one at a
// time, here a tile's max comes first and splits are merged, so exponentials and sums
// round differently (a few ulp of the output; tests allow 1e-5 relative).
//
// Edge rows follow the CPU: a key whose mask is -inf is skipped (its K and V are never
// used, so garbage in masked cache slots cannot leak in), a row with every key masked
// outputs 0, a sink joins the sum with a zero value row, NaN scores make the row NaN.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "device_math.cuh"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr int attn_threads = 128;  // 4 warps
constexpr int attn_qt = 8;         // query rows per block (two per warp in the score step)
constexpr int attn_kt = 32;        // keys per tile: one per lane in the score step
constexpr int attn_merge_threads = 128;
// Dynamic shared memory a tile kernel may ask for: 99 KiB, what every chip served can opt in
// to (sm_86/89/120; launches/attn.txt records it for the kernel-contract gate). Head sizes
// whose tiles need more (float K with D_k + D_v past ~600) are refused and run on the CPU.
constexpr std::size_t attn_smem_max = 99 * 1024;

// K kinds: float rows (f32/f16/bf16 kept as f32 in shared memory) or 32-weight blocks
enum kkind : int { k_float = 0, k_q8_0 = 1, k_q4_0 = 2 };

struct attn_args {
  tview q, k, v, mask, out;
  int k_type, v_type;                  // gk::type ids
  float scale, softcap;                // scale already divided by softcap when softcap != 0
  const float* slopes;                 // per q head; null: 1
  const char* sinks;                   // f32 per q head; null: none
  std::int64_t sinks_nb0;
  std::int64_t DK, DV, n_q, n_head, n_kv, nk2, rk2;
  std::int64_t rows_per_group, tiles_per_group, kv_per_split;
  int n_split;
  float* part;                         // [row][split][2 + DV]: m, s, acc
};

__device__ __forceinline__ float neg_inf() { return -std::numeric_limits<float>::infinity(); }

// v rounded as the CPU's encode to K's dot type (f16 / bf16 / f32)
__device__ __forceinline__ float round_to(float v, int t) {
  if (t == 1) return __half2float(__ushort_as_half(dm::f16_bits(v)));
  if (t == 30) return __uint_as_float(static_cast<std::uint32_t>(dm::bf16_bits(v)) << 16);
  return v;
}

// element d of a V row, decoded as the CPU's row_read
__device__ __forceinline__ float v_elem(const char* row, std::int64_t d, std::int64_t nb0, int t) {
  if (t == 8) {  // q8_0: 34-byte blocks, f16 d then 32 signed codes
    const char* b = row + (d >> 5) * 34;
    const float sc = __half2float(*reinterpret_cast<const __half*>(b));
    return __fmul_rn(sc, static_cast<float>(static_cast<std::int8_t>(b[2 + (d & 31)])));
  }
  if (t == 2) {  // q4_0: 18-byte blocks, f16 d then 16 bytes: weight j low nibble, j + 16 high
    const char* b = row + (d >> 5) * 18;
    const float sc = __half2float(*reinterpret_cast<const __half*>(b));
    const int w = static_cast<int>(d & 31);
    const auto byte = static_cast<std::uint8_t>(b[2 + (w & 15)]);
    const int code = (w < 16 ? (byte & 0x0f) : (byte >> 4)) - 8;
    return __fmul_rn(static_cast<float>(code), sc);
  }
  return dm::load(row + d * nb0, t);
}

struct smem_layout {
  std::size_t p, live, m, s, alpha, vf, kd, qd, qv, kv, total;
};
// Offsets in bytes into the dynamic shared memory (all 4-byte aligned).
__host__ __device__ inline smem_layout layout_of(int kk, std::int64_t DK, std::int64_t DV) {
  smem_layout l{};
  std::size_t o = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t at = o;
    o += (bytes + 15) / 16 * 16;
    return at;
  };
  const std::int64_t nb = DK / 32;
  l.p = take(sizeof(float) * attn_qt * attn_kt);
  l.live = take(sizeof(unsigned) * attn_qt);
  l.m = take(sizeof(float) * attn_qt);
  l.s = take(sizeof(float) * attn_qt);
  l.alpha = take(sizeof(float) * attn_qt);
  l.vf = take(sizeof(float) * attn_kt * static_cast<std::size_t>(DV));
  if (kk == k_float) {
    l.kd = l.qd = 0;
    l.qv = take(sizeof(float) * attn_qt * static_cast<std::size_t>(DK));
    l.kv = take(sizeof(float) * attn_kt * static_cast<std::size_t>(DK + 1));  // odd stride: no bank conflicts
  } else {
    l.kd = take(sizeof(float) * attn_kt * static_cast<std::size_t>(nb));
    l.qd = take(sizeof(float) * attn_qt * static_cast<std::size_t>(nb));
    l.qv = take(static_cast<std::size_t>(attn_qt * DK));
    l.kv = take(static_cast<std::size_t>(attn_kt * (DK + 4)));  // (DK + 4) / 4 words: odd for DK % 32 == 0
  }
  l.total = o;
  return l;
}

template <int KK, int DVC>
__global__ void __launch_bounds__(attn_threads) attn_tile_kernel(attn_args a) {
  extern __shared__ __align__(16) unsigned char sm[];
  const smem_layout L = layout_of(KK, a.DK, a.DV);
  float* sp = reinterpret_cast<float*>(sm + L.p);
  unsigned* slive = reinterpret_cast<unsigned*>(sm + L.live);
  float* sm_m = reinterpret_cast<float*>(sm + L.m);
  float* sm_s = reinterpret_cast<float*>(sm + L.s);
  float* sm_alpha = reinterpret_cast<float*>(sm + L.alpha);
  float* svf = reinterpret_cast<float*>(sm + L.vf);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const std::int64_t DK = a.DK, DV = a.DV, nb = DK / 32;
  const int dk = static_cast<int>(DK), dv = static_cast<int>(DV), nbi = static_cast<int>(nb);
  const std::int64_t gi = blockIdx.x / a.tiles_per_group, ti = blockIdx.x % a.tiles_per_group;
  const std::int64_t ik2 = gi % a.nk2, iq3 = gi / a.nk2;
  const std::int64_t kv0 = std::int64_t{blockIdx.y} * a.kv_per_split;
  const std::int64_t kv1 = kv0 + a.kv_per_split < a.n_kv ? kv0 + a.kv_per_split : a.n_kv;

  // the block's rows: r -> (iq1, iq2); invalid past rows_per_group
  auto row_of = [&](int qi, std::int64_t& iq1, std::int64_t& iq2) {
    const std::int64_t r = ti * attn_qt + qi;
    if (r >= a.rows_per_group) return false;
    iq1 = r % a.n_q;
    iq2 = ik2 * a.rk2 + r / a.n_q;
    return true;
  };

  // q rows, encoded as the CPU encodes them for K's dot: warp w does rows w and w + 4
  for (int qi = warp; qi < attn_qt; qi += attn_threads / 32) {
    std::int64_t iq1, iq2;
    const bool ok = row_of(qi, iq1, iq2);
    const char* qr = ok ? a.q.data + iq1 * a.q.nb[1] + iq2 * a.q.nb[2] + iq3 * a.q.nb[3] : nullptr;
    if (KK == k_float) {
      float* qv = reinterpret_cast<float*>(sm + L.qv) + qi * DK;
      for (std::int64_t i = lane; i < DK; i += 32)
        qv[i] = ok ? round_to(*reinterpret_cast<const float*>(qr + i * a.q.nb[0]), a.k_type) : 0.0f;
    } else {
      std::int8_t* qc = reinterpret_cast<std::int8_t*>(sm + L.qv) + qi * DK;
      float* qd = reinterpret_cast<float*>(sm + L.qd) + qi * nb;
      for (std::int64_t b = 0; b < nb; ++b) {
        const float x = ok ? *reinterpret_cast<const float*>(qr + (b * 32 + lane) * a.q.nb[0]) : 0.0f;
        float amax = fabsf(x);  // q8_0::encode: std::max(amax, |x|) never takes a NaN
        if (amax != amax) amax = 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
          const float v = __shfl_xor_sync(0xffffffffu, amax, o);
          amax = v > amax ? v : amax;
        }
        const float d = __fdiv_rn(amax, 127.0f);
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        qc[b * 32 + lane] = static_cast<std::int8_t>(__float2int_rn(__fmul_rn(x, id)));
        if (lane == 0) qd[b] = __half2float(__ushort_as_half(dm::f16_bits(d)));
      }
    }
  }
  if (tid < attn_qt) {
    sm_m[tid] = neg_inf();
    sm_s[tid] = 0.0f;
  }
  float acc[attn_qt][DVC];
#pragma unroll
  for (int qi = 0; qi < attn_qt; ++qi)
#pragma unroll
    for (int c = 0; c < DVC; ++c) acc[qi][c] = 0.0f;

  const char* kbase = a.k.data + ik2 * a.k.nb[2] + iq3 * a.k.nb[3];
  const char* vbase = a.v.data + ik2 * a.v.nb[2] + iq3 * a.v.nb[3];

  for (std::int64_t t0 = kv0; t0 < kv1; t0 += attn_kt) {
    const int nk = static_cast<int>(kv1 - t0 < attn_kt ? kv1 - t0 : attn_kt);
    __syncthreads();  // the previous tile is no longer read
    // K tile
    if (KK == k_float) {
      float* kv = reinterpret_cast<float*>(sm + L.kv);
      for (int e = tid; e < nk * dk; e += attn_threads) {
        const int j = e / dk, i = e % dk;
        kv[j * (DK + 1) + i] = dm::load(kbase + (t0 + j) * a.k.nb[1] + i * a.k.nb[0], a.k_type);
      }
    } else {
      std::int8_t* kc = reinterpret_cast<std::int8_t*>(sm + L.kv);
      float* kd = reinterpret_cast<float*>(sm + L.kd);
      constexpr int bytes = KK == k_q8_0 ? 34 : 18;
      for (int e = tid; e < nk * dk; e += attn_threads) {
        const int j = e / dk, i = e % dk;
        const char* blk = kbase + (t0 + j) * a.k.nb[1] + (i >> 5) * bytes;
        int code;
        if (KK == k_q8_0) {
          code = static_cast<std::int8_t>(blk[2 + (i & 31)]);
        } else {
          const int w = static_cast<int>(i & 31);
          const auto byte = static_cast<std::uint8_t>(blk[2 + (w & 15)]);
          code = (w < 16 ? (byte & 0x0f) : (byte >> 4)) - 8;
        }
        kc[j * (DK + 4) + i] = static_cast<std::int8_t>(code);
      }
      for (int e = tid; e < nk * nbi; e += attn_threads) {
        const int j = e / nbi, b = e % nbi;
        kd[j * nb + b] = __half2float(*reinterpret_cast<const __half*>(kbase + (t0 + j) * a.k.nb[1] + b * bytes));
      }
    }
    // V tile, decoded to f32
    for (int e = tid; e < nk * dv; e += attn_threads) {
      const int j = e / dv, d = e % dv;
      svf[j * DV + d] = v_elem(vbase + (t0 + j) * a.v.nb[1], d, a.v.nb[0], a.v_type);
    }
    __syncthreads();

    // scores: warp w scores rows w, w + 4 against key `lane`; then that row's online step
    for (int qi = warp; qi < attn_qt; qi += attn_threads / 32) {
      std::int64_t iq1 = 0, iq2 = 0;
      const bool row_ok = row_of(qi, iq1, iq2);
      bool live = row_ok && lane < nk;
      float s = neg_inf();
      if (live) {
        float mv = 0.0f;
        if (a.mask.data) {
          const char* mp = a.mask.data + iq1 * a.mask.nb[1] + (iq2 % a.mask.ne[2]) * a.mask.nb[2] +
                           (iq3 % a.mask.ne[3]) * a.mask.nb[3];
          const float slope = a.slopes ? a.slopes[iq2] : 1.0f;
          mv = __fmul_rn(slope, __half2float(*reinterpret_cast<const __half*>(mp + (t0 + lane) * 2)));
        }
        live = mv != neg_inf();
        if (live) {
          float dot;
          if (KK == k_float) {
            const float* kr = reinterpret_cast<const float*>(sm + L.kv) + lane * (DK + 1);
            const float* qv = reinterpret_cast<const float*>(sm + L.qv) + qi * DK;
            float l[16];
#pragma unroll
            for (int u = 0; u < 16; ++u) l[u] = 0.0f;
            int i0 = 0;
            for (; i0 + 16 <= dk; i0 += 16)
#pragma unroll
              for (int u = 0; u < 16; ++u) l[u] = __fadd_rn(l[u], __fmul_rn(kr[i0 + u], qv[i0 + u]));
#pragma unroll
            for (int u = 0; u < 16; ++u)
              if (i0 + u < dk) l[u] = __fadd_rn(l[u], __fmul_rn(kr[i0 + u], qv[i0 + u]));
#pragma unroll
            for (int u = 0; u < 8; ++u) l[u] = __fadd_rn(l[u], l[u + 8]);
#pragma unroll
            for (int u = 0; u < 4; ++u) l[u] = __fadd_rn(l[u], l[u + 4]);
            l[0] = __fadd_rn(l[0], l[2]);
            l[1] = __fadd_rn(l[1], l[3]);
            dot = __fadd_rn(l[0], l[1]);
          } else {
            const int* kc = reinterpret_cast<const int*>(sm + L.kv + lane * (DK + 4));
            const int* qc = reinterpret_cast<const int*>(sm + L.qv + qi * DK);
            const float* kd = reinterpret_cast<const float*>(sm + L.kd) + lane * nb;
            const float* qd = reinterpret_cast<const float*>(sm + L.qd) + qi * nb;
            dot = 0.0f;
            for (std::int64_t b = 0; b < nb; ++b) {
              int isum = 0;
#pragma unroll
              for (int w = 0; w < 8; ++w) isum = __dp4a(kc[b * 8 + w], qc[b * 8 + w], isum);
              const float f = static_cast<float>(isum);
              const float bd = KK == k_q8_0 ? __fmul_rn(f, __fmul_rn(kd[b], qd[b])) : __fmul_rn(__fmul_rn(f, kd[b]), qd[b]);
              dot = __fadd_rn(dot, bd);
            }
          }
          s = __fmul_rn(dot, a.scale);
          if (a.softcap != 0.0f) s = __fmul_rn(a.softcap, dm::tanh(s));
          s = __fadd_rn(s, mv);
        }
      }
      const unsigned live_bits = __ballot_sync(0xffffffffu, live);
      // online step for row qi: tile max (NaN never wins), rescale, probabilities
      float mx = live ? s : neg_inf();
      for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, mx, o);
        mx = v > mx ? v : mx;
      }
      const float m_old = sm_m[qi];
      const float m_new = mx > m_old ? mx : m_old;
      const float alpha = m_old == neg_inf() ? 0.0f : dm::exp(__fsub_rn(m_old, m_new));
      const float p = live ? dm::exp(__fsub_rn(s, m_new)) : 0.0f;
      float ps = p;
      for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
      sp[qi * attn_kt + lane] = p;
      __syncwarp();
      if (lane == 0) {
        slive[qi] = live_bits;
        sm_alpha[qi] = alpha;
        sm_m[qi] = m_new;
        sm_s[qi] = sm_s[qi] * alpha + ps;
      }
    }
    __syncthreads();

    // P V: thread owns columns tid + 128 c of every row
#pragma unroll
    for (int qi = 0; qi < attn_qt; ++qi) {
      const float al = sm_alpha[qi];
#pragma unroll
      for (int c = 0; c < DVC; ++c) acc[qi][c] *= al;
    }
    for (int j = 0; j < nk; ++j) {
      float vv[DVC];
#pragma unroll
      for (int c = 0; c < DVC; ++c) {
        const std::int64_t d = tid + attn_threads * c;
        vv[c] = d < DV ? svf[j * DV + d] : 0.0f;
      }
#pragma unroll
      for (int qi = 0; qi < attn_qt; ++qi) {
        if (!((slive[qi] >> j) & 1u)) continue;  // masked: V never read, as on the CPU
        const float p = sp[qi * attn_kt + j];
#pragma unroll
        for (int c = 0; c < DVC; ++c) acc[qi][c] = fmaf(p, vv[c], acc[qi][c]);
      }
    }
  }
  __syncthreads();

  // partial state of every valid row
#pragma unroll
  for (int qi = 0; qi < attn_qt; ++qi) {
    std::int64_t iq1, iq2;
    if (!row_of(qi, iq1, iq2)) continue;
    const std::int64_t R = iq1 + a.n_q * (iq2 + a.n_head * iq3);
    float* out = a.part + (R * a.n_split + blockIdx.y) * (2 + DV);
    if (tid == 0) {
      out[0] = sm_m[qi];
      out[1] = sm_s[qi];
    }
#pragma unroll
    for (int c = 0; c < DVC; ++c) {
      const std::int64_t d = tid + attn_threads * c;
      if (d < DV) out[2 + d] = acc[qi][c];
    }
  }
}

// One block per query row: merge the splits in order, add the sink, normalise, store.
__global__ void __launch_bounds__(attn_merge_threads) attn_merge_kernel(attn_args a) {
  const std::int64_t R = blockIdx.x;
  const std::int64_t iq1 = R % a.n_q, iq2 = (R / a.n_q) % a.n_head, iq3 = R / (a.n_q * a.n_head);
  const float* part = a.part + R * a.n_split * (2 + a.DV);
  float M0 = neg_inf();  // the splits' common max; the sink may raise M past it
  for (int s = 0; s < a.n_split; ++s) {
    const float m = part[s * (2 + a.DV)];
    M0 = m > M0 ? m : M0;
  }
  float S = 0.0f;
  for (int s = 0; s < a.n_split; ++s) {
    const float m = part[s * (2 + a.DV)];
    const float f = m == neg_inf() ? 0.0f : dm::exp(__fsub_rn(m, M0));
    S = fmaf(part[s * (2 + a.DV) + 1], f, S);
  }
  float ms = 1.0f;  // the sink's rescale of everything so far
  if (a.sinks) {
    const float sk = *reinterpret_cast<const float*>(a.sinks + iq2 * a.sinks_nb0);
    float vs = 1.0f;
    if (sk > M0) ms = M0 == neg_inf() ? 0.0f : dm::exp(__fsub_rn(M0, sk));
    else vs = dm::exp(__fsub_rn(sk, M0));
    S = fmaf(S, ms, vs);
  }
  const float inv = S == 0.0f ? 0.0f : __fdiv_rn(1.0f, S);
  char* orow = a.out.data + iq2 * a.out.nb[1] + iq1 * a.out.nb[2] + iq3 * a.out.nb[3];
  for (std::int64_t d = threadIdx.x; d < a.DV; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < a.n_split; ++s) {
      const float m = part[s * (2 + a.DV)];
      if (m == neg_inf()) continue;  // nothing live in that split: its acc is 0
      acc = fmaf(part[s * (2 + a.DV) + 2 + d], dm::exp(__fsub_rn(m, M0)), acc);
    }
    *reinterpret_cast<float*>(orow + d * a.out.nb[0]) = __fmul_rn(__fmul_rn(acc, ms), inv);
  }
}

int kkind_of(type t) {
  switch (t) {
    case type::f32: case type::f16: case type::bf16: return k_float;
    case type::q8_0: return k_q8_0;
    case type::q4_0: return k_q4_0;
    default: return -1;
  }
}
bool v_readable(type t) {
  return t == type::f32 || t == type::f16 || t == type::bf16 || t == type::q8_0 || t == type::q4_0;
}

std::size_t smem_optin() {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 48 * 1024;
  }
  return static_cast<std::size_t>(v);
}

// The CPU's ALiBi slopes (cpu/attn.hpp's alibi), float pow on the host.
std::vector<float> alibi_slopes(float max_bias, std::int64_t n_head) {
  const auto nh = static_cast<std::uint32_t>(n_head);
  const std::uint32_t n_log2 = 1u << static_cast<std::uint32_t>(std::floor(std::log2(static_cast<double>(nh))));
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n_log2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_log2));
  std::vector<float> s(static_cast<std::size_t>(n_head));
  for (std::uint32_t h = 0; h < nh; ++h)
    s[h] = h < n_log2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n_log2) + 1));
  return s;
}

template <int KK>
void launch_kk(const attn_args& a, dim3 grid, std::size_t smem, cudaStream_t st) {
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      GK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<grid, attn_threads, smem, st>>>(a);
  };
  if (a.DV <= 128) go(attn_tile_kernel<KK, 1>);
  else if (a.DV <= 256) go(attn_tile_kernel<KK, 2>);
  else go(attn_tile_kernel<KK, 4>);
}

}  // namespace

bool attn_supports(const tensor* node) {
  if (node->op != op::flash_attn_ext || node->type != type::f32) return false;
  const tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3], *sinks = node->src[4];
  if (!q || !k || !v || q->type != type::f32) return false;
  const int kk = kkind_of(k->type);
  if (kk < 0 || !v_readable(v->type)) return false;
  const std::int64_t DK = k->ne[0], DV = v->ne[0];
  if (DK != q->ne[0] || DV > 4 * attn_threads || DK <= 0 || DV <= 0) return false;
  if (kk != k_float && DK % 32) return false;
  if ((v->type == type::q8_0 || v->type == type::q4_0) && DV % 32) return false;
  // one K/V head per block: v's heads and batches are k's
  if (v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3] || q->ne[3] != k->ne[3] || q->ne[2] % k->ne[2]) return false;
  if (v->ne[1] != k->ne[1]) return false;
  if (!k->rows_contiguous() || !v->rows_contiguous() || q->nb[0] % 4) return false;
  if (mask && (mask->type != type::f16 || mask->nb[0] != 2 || mask->ne[0] < k->ne[1] || mask->ne[1] < q->ne[1] ||
               mask->ne[2] <= 0 || mask->ne[3] <= 0))
    return false;
  if (sinks && (sinks->type != type::f32 || sinks->ne[0] < q->ne[2] || sinks->nb[0] % 4)) return false;
  if (node->nb[0] % 4) return false;
  const std::size_t need = layout_of(kk, DK, DV).total;
  return need <= attn_smem_max && need <= smem_optin();
}

void attn_run(const tensor* node, exec& x) {
  const tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *mask = node->src[3], *sinks = node->src[4];
  attn_args a{};
  a.q = view_of(q);
  a.k = view_of(k);
  a.v = view_of(v);
  a.out = view_of(node);
  if (mask) a.mask = view_of(mask);
  else a.mask.data = nullptr;
  a.k_type = static_cast<int>(k->type);
  a.v_type = static_cast<int>(v->type);
  float scale = node->param_f32(0);
  const float max_bias = node->param_f32(1);
  const float softcap = node->param_f32(2);
  if (softcap != 0.0f) scale /= softcap;
  a.scale = scale;
  a.softcap = softcap;
  a.sinks = sinks ? static_cast<const char*>(sinks->data) : nullptr;
  a.sinks_nb0 = sinks ? static_cast<std::int64_t>(sinks->nb[0]) : 0;
  a.DK = k->ne[0];
  a.DV = v->ne[0];
  a.n_q = q->ne[1];
  a.n_head = q->ne[2];
  a.n_kv = k->ne[1];
  a.nk2 = k->ne[2];
  a.rk2 = a.n_head / a.nk2;
  a.rows_per_group = a.n_q * a.rk2;
  a.tiles_per_group = (a.rows_per_group + attn_qt - 1) / attn_qt;
  const std::int64_t blocks_x = a.tiles_per_group * a.nk2 * q->ne[3];
  // split the keys until the grid is about two blocks per SM, keeping >= 4 tiles a split
  const std::int64_t tiles = (a.n_kv + attn_kt - 1) / attn_kt;
  std::int64_t n_split = (2 * std::int64_t{x.props.sm_count > 0 ? x.props.sm_count : 1} + blocks_x - 1) / blocks_x;
  n_split = std::max<std::int64_t>(1, std::min<std::int64_t>(n_split, tiles / 4));
  const std::int64_t tiles_per_split = tiles > 0 ? (tiles + n_split - 1) / n_split : 1;
  a.kv_per_split = tiles_per_split * attn_kt;
  n_split = tiles > 0 ? (tiles + tiles_per_split - 1) / tiles_per_split : 1;
  a.n_split = static_cast<int>(n_split);

  const std::int64_t rows = a.n_q * a.n_head * q->ne[3];
  const std::size_t slope_bytes = (max_bias > 0.0f && mask) ? (static_cast<std::size_t>(a.n_head) * 4 + 255) / 256 * 256 : 0;
  const std::size_t part_bytes = static_cast<std::size_t>(rows * n_split * (2 + a.DV)) * sizeof(float);
  char* scratch = static_cast<char*>(x.scratch(slope_bytes + part_bytes));
  a.slopes = nullptr;
  if (slope_bytes) {
    const std::vector<float> s = alibi_slopes(max_bias, a.n_head);
    GK_CUDA_CHECK(cudaMemcpyAsync(scratch, s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice, x.stream));
    a.slopes = reinterpret_cast<const float*>(scratch);
  }
  a.part = reinterpret_cast<float*>(scratch + slope_bytes);

  const int kk = kkind_of(k->type);
  const std::size_t smem = layout_of(kk, a.DK, a.DV).total;
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(n_split));
  if (kk == k_float) launch_kk<k_float>(a, grid, smem, x.stream);
  else if (kk == k_q8_0) launch_kk<k_q8_0>(a, grid, smem, x.stream);
  else launch_kk<k_q4_0>(a, grid, smem, x.stream);
  GK_CUDA_LAUNCHED();
  attn_merge_kernel<<<static_cast<unsigned>(rows), attn_merge_threads, 0, x.stream>>>(a);
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
