// SPDX-License-Identifier: MIT
// The decode mat-vec of the integer weight formats (N <= 8 columns per weight slab): the
// activation columns are encoded once per node to W::dot_type (q8_0, q8_1 or q8_K, the
// CPU's bytes), then every weight block is dotted with them in integers (__dp4a) and
// scaled with the CPU's float operations (matvec_q8.cuh). This is the CPU's definition
// (dot_row<W> over encode_row<W::dot_type>) up to the order in which block terms are added,
// where the float mat-vec (matmul.cu, matvec_q) decoded every weight to float and spent
// 7-10 instructions per weight and column on it.
//
// Two kernels per node:
//   encode_act<A>: a warp per activation block (32 values for q8_0/q8_1, 256 for q8_K),
//     the columns into scratch, codes contiguous per column (chunk kc at byte 32 kc, so a
//     lane reads its chunk's 32 codes as two 16-byte loads), then the scales, then q8_K's
//     16-value sums. Activations are encoded per node and never cached across nodes: the
//     q, k and v projections of one token encode the same column three times (at K = 4096,
//     20 KB of traffic and one small launch each, against megabytes of weights), and a
//     cache would need the graph to say when a column changes.
//   matvec_q8<W, NC>: 8 warps a block, 2 weight rows a warp. As matvec_q does, each warp
//     copies its rows' bytes of a 2048-weight slab into shared memory with 16-byte cp.async
//     (coalesced, all in flight at once, every weight byte read once), double-buffered, so
//     slab s + 1 streams in while slab s is dotted. Lane l takes chunks l, l + 32 of the
//     slab: unpacks its 32 codes into 8 words of signed bytes once per row, then per column
//     loads the 32 activation codes (L1: every warp of the SM reads the same column) and
//     runs 8 __dp4a. The chunks of one 256-weight block (8 lanes) add their integer sums by
//     shuffles, and the block's first lane applies the float term. Per lane, the terms of
//     its blocks are summed in f32; a warp shuffle tree ends the row.
//   matvec_wide<W, R> instead of matvec_q8 for one-column decode of q4_K, q5_K,
//     q6_K, q2_K, q3_K and iq4_xs (matvec_wide.cuh): a lane takes two chunks that share
//     code bytes and reads them once with the widest aligned loads, a persistent grid,
//     the next task's weights loaded before the current one is dotted, and the first
//     task's before the encoder has finished (programmatic dependent launch, sm_90+).
//     Measured on the H200 (bench_cuda, N = 1, M = 14336, % of the copy bandwidth, chunk
//     kernel -> wide): q4_K 23 -> 48, q5_K 22 -> 49, q6_K 32 -> 45, q2_K 18 -> 29, q3_K
//     16 -> 24, iq4_xs 25 -> 35 (the reference: 37, 42, 35, 20, 17, 37).
//     The 32- and 64-weight formats (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4, nvfp4)
//     take it too when rows are whole groups of 256 weights: a lane loads two whole blocks
//     (nvfp4 one) as aligned words and needs no other lane (wide32). Same measure, M 4096
//     / 14336, chunk kernel -> wide: q8_0 31 -> 38-41 / 55 -> 61-62, q4_0 19 -> 26-27 /
//     37 -> 47-48, q4_1 21 -> 32 / 40 -> 53, q5_0 21 -> 28 / 39 -> 51, q5_1 23 -> 31 / 43
//     -> 58, iq4_nl 16 -> 24 / 29 -> 38, mxfp4 15 -> 21 / 27 -> 33, nvfp4 14 -> 21 / 23 ->
//     35 (the reference: q8_0 43-46 / 59-60, q4_0 26-29 / 42, mxfp4 24 / 32, nvfp4 26-27 /
//     37).
//   matvec_stream<W, R, Bulk>: matvec_wide's tasks and arithmetic with the weights fed through
//     shared memory (a ring of 3-6 tasks a warp, by cp.async.bulk or cp.async) and the
//     column's activations copied there once a block; the default for q4_0, q4_1, q8_0,
//     q4_K, q5_K, q6_K, q2_K, q3_K, iq3_s, iq4_nl, iq4_xs and tq2_0 on 16-byte aligned rows
//     (ms_bulk_default and ms_default, with the figures).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "matvec.cuh"
#include "matvec_q8.cuh"
#include "matvec_wide.cuh"

namespace gk::cuda {

namespace {

namespace F = gk::formats;
using mv::mm_args;

// Planted controls for the tests (test_cuda_matmul.cpp, tag [.control]): 1 the encoder
// rounds toward zero, 2 the mat-vec drops the last block of every row. 0 in normal use.
int g_plant = 0;

// ---- activation layout in scratch ----------------------------------------------------------

struct act_layout {
  std::int64_t nblk, d_off, bs_off, col_stride;
};
template <class A>
act_layout layout_of(std::int64_t kp) {
  act_layout l;
  l.nblk = kp / A::block_size;
  l.d_off = kp;
  l.bs_off = kp + 4 * l.nblk;
  const std::int64_t end = l.bs_off + (A::id == type::q8_K ? 32 * l.nblk : 0);
  l.col_stride = (end + 15) / 16 * 16;
  return l;
}

// ---- encode_act --------------------------------------------------------------------------

// Programmatic dependent launch (common.cuh): the encoder lets the mat-vec that follows it
// in the stream start before it ends; the mat-vec loads its first weights (which no kernel
// still running writes: the encoder only writes the scratch columns) and then waits.

struct enc_args {
  mm_args p;              // columns: x_column(p, q), q < p.ncols, p.kp values each
  char* out;
  std::int64_t col_stride;
  std::int64_t d_off, bs_off;
  bool cpu;               // the CPU's blocks (the byte test), not the mat-vec's layout
  int plant;
};

constexpr int enc_warps = 4, enc_threads = 32 * enc_warps;

template <class A>
__global__ __launch_bounds__(enc_threads) void encode_act(enc_args e) {
  pdl_launch_dependents();  // matvec_wide may start and fetch weights while this runs
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t nblk = e.p.kp / A::block_size;
  const std::int64_t blk = blockIdx.x * static_cast<std::int64_t>(enc_warps) + warp;
  if (blk >= nblk) return;  // a whole warp
  for (std::int64_t q = blockIdx.y; q < e.p.ncols; q += gridDim.y) {
    const float* x = mv::x_column(e.p, q) + blk * A::block_size;
    char* col = e.out + q * e.col_stride;
    if constexpr (A::block_size == 32) {
      const float v = x[lane];
      std::uint16_t dbits;
      int sum;
      float d;
      int qv = q8::encode_q8_32(v, dbits, sum, d);
      if (e.plant == 1) {  // the control: truncation instead of nearest
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        qv = __float2int_rz(__fmul_rn(v, id));
      }
      if (e.cpu) {
        constexpr int qs_at = A::id == type::q8_1 ? 4 : 2;
        char* b = col + blk * static_cast<std::int64_t>(sizeof(typename A::block));
        b[qs_at + lane] = static_cast<char>(qv);
        if (lane == 0) {
          b[0] = static_cast<char>(dbits & 0xff);
          b[1] = static_cast<char>(dbits >> 8);
          if constexpr (A::id == type::q8_1) {
            // d * sum is NaN only as inf * 0 (an inf in the block: d = inf, codes 0); the
            // CPU's product is then the default NaN, x86's 0xffc00000, f16 0xfe00 (an
            // aarch64 CPU writes 0x7e00); the device's would be 0x7fff
            const float ds = __fmul_rn(d, static_cast<float>(sum));
            const std::uint16_t sbits = ds != ds ? std::uint16_t{0xfe00} : dm::f16_bits(ds);
            b[2] = static_cast<char>(sbits & 0xff);
            b[3] = static_cast<char>(sbits >> 8);
          }
        }
      } else {
        col[blk * 32 + lane] = static_cast<char>(qv);
        if (lane == 0) reinterpret_cast<float*>(col + e.d_off)[blk] = fmt::h2f(dbits);
      }
    } else {
      // q8_K (kquants.hpp): xm the first value of the largest magnitude, iscale = -127 / xm,
      // q = nearest_clamped(iscale x), d = 1 / iscale; lane l holds values 8l .. 8l + 7
      float v[8];
      const float4* x4 = reinterpret_cast<const float4*>(x + 8 * lane);
      const float4 a0 = x4[0], a1 = x4[1];
      v[0] = a0.x, v[1] = a0.y, v[2] = a0.z, v[3] = a0.w, v[4] = a1.x, v[5] = a1.y, v[6] = a1.z, v[7] = a1.w;
      float amax = 0.0f, xm = 0.0f;
      int at = 0x7fffffff;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (fabsf(v[j]) > amax) {
          amax = fabsf(v[j]);
          xm = v[j];
          at = 8 * lane + j;
        }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, amax, o), ox = __shfl_xor_sync(0xffffffffu, xm, o);
        const int oi = __shfl_xor_sync(0xffffffffu, at, o);
        if (oa > amax || (oa == amax && oi < at)) {
          amax = oa;
          xm = ox;
          at = oi;
        }
      }
      int qv[8];
      float d = 0.0f;
      if (!(amax > 0.0f)) {
#pragma unroll
        for (int j = 0; j < 8; ++j) qv[j] = 0;
      } else {
        const float iscale = __fdiv_rn(-127.0f, xm);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          qv[j] = q8::q8k_code(iscale, v[j]);
          if (e.plant == 1) qv[j] = max(-127, min(127, __float2int_rz(__fmul_rn(iscale, v[j]))));
        }
        d = __fdiv_rn(1.0f, iscale);
      }
      int s8 = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) s8 += qv[j];
      const int s16 = s8 + __shfl_xor_sync(0xffffffffu, s8, 1);  // lanes 2k, 2k + 1: sub-block k
      unsigned w0 = 0, w1 = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w0 |= (static_cast<unsigned>(qv[j]) & 0xffu) << (8 * j);
        w1 |= (static_cast<unsigned>(qv[4 + j]) & 0xffu) << (8 * j);
      }
      char* qs;
      float* dp;
      short* bs;
      if (e.cpu) {
        char* b = col + blk * static_cast<std::int64_t>(sizeof(typename A::block));
        qs = b + 4;
        dp = reinterpret_cast<float*>(b);
        bs = reinterpret_cast<short*>(b + 260);
      } else {
        qs = col + blk * 256;
        dp = reinterpret_cast<float*>(col + e.d_off) + blk;
        bs = reinterpret_cast<short*>(col + e.bs_off) + 16 * blk;
      }
      reinterpret_cast<unsigned*>(qs + 8 * lane)[0] = w0;
      reinterpret_cast<unsigned*>(qs + 8 * lane)[1] = w1;
      if ((lane & 1) == 0) bs[lane / 2] = static_cast<short>(s16);
      if (lane == 0) *dp = d;
    }
  }
}

// ---- matvec_q8 -------------------------------------------------------------------------------

constexpr int mq_warps = 8, mq_threads = 32 * mq_warps, mq_rows_per_warp = 2, mq_rows = mq_warps * mq_rows_per_warp;
// weights per shared-memory slab: 64 chunks, two per lane
constexpr int mq_slab = 2048;

// one row's slab bytes, with room for a misaligned start and end
template <class W>
constexpr int mq_buf_bytes() {
  constexpr int bytes = mq_slab / W::block_size * static_cast<int>(sizeof(typename W::block));
  return (bytes + 30) / 16 * 16;
}
// two buffers per row, plus 16 bytes: ld_words reads the aligned word after a field's last
// byte, which for the last row's last block is past its buffer (the value is not used)
template <class W>
constexpr std::size_t mq_smem() {
  return static_cast<std::size_t>(2 * mq_rows) * mq_buf_bytes<W>() + 16;
}

// At most 128 registers (2 blocks, 16 warps an SM), as matvec_q.
// Direct (decode, one column): no staging; each lane reads its chunks' bytes straight from
// global memory (ld_words' 4-byte loads), so there is no shared memory and no block-wide
// barrier per slab. ld_words reads the aligned word that holds a field's last byte, so the
// last block of the last row may read up to 3 bytes past the tensor's end (never past the
// allocation's granule; the bytes are not used). Measured against the staged kernel: see
// matvec_q8_direct below.
template <class W, int NC, bool Direct = false>
__global__ __launch_bounds__(mq_threads, 2) void matvec_q8(mm_args p, q8::act_cols a, int plant) {
  using Q = q8::q8dot<W>;
  constexpr int R = mq_rows_per_warp, B = W::block_size, S = sizeof(typename W::block), CH = Q::ch, NP = Q::np;
  constexpr int buf = mq_buf_bytes<W>();
  extern __shared__ __align__(16) unsigned char wbuf[];  // [2][warps][R][buf]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(mq_rows) + warp * R;
  const mv::col_groups<NC> groups(p);
  const std::int64_t dropped = plant == 2 ? p.kp / B - 1 : -1;  // the control's lost block

  for (std::int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    int nc;
    const std::int64_t q0 = groups.first(p, g, nc);
    const char* w;
    float* y0;
    const bool ok = mv::column_of(p, q0, w, y0);  // every column of a group shares the slab

    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

    // this warp's rows' bytes of the slab at k0 into buffer nb, as one cp.async group
    auto fetch = [&](std::int64_t k0, int nb) {
      const int bytes = static_cast<int>(p.kp - k0 < mq_slab ? p.kp - k0 : mq_slab) / B * S;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (!ok || row0 + r >= p.m) continue;
        const std::uintptr_t src = reinterpret_cast<std::uintptr_t>(w + (row0 + r) * p.w_nb1) + k0 / B * S;
        const int off = static_cast<int>(src & 15);
        const char* base = reinterpret_cast<const char*>(src - off);
        unsigned char* dst = wbuf + ((nb * mq_warps + warp) * R + r) * buf;
        const int n16 = (off + bytes + 15) / 16;
        for (int i = lane; i < n16; i += 32) mv::copy16_async(dst + 16 * i, base + 16 * i);
      }
      mv::copy_async_commit();
    };
    if constexpr (!Direct) {
      __syncthreads();  // the previous group's buffers are read
      fetch(0, 0);
    }
    int it = 0;
    for (std::int64_t k0 = 0; k0 < p.kp; k0 += mq_slab, ++it) {
      const int len = static_cast<int>(p.kp - k0 < mq_slab ? p.kp - k0 : mq_slab);
      const int cur = it & 1;
      if constexpr (!Direct) {
        const bool more = k0 + mq_slab < p.kp;
        __syncthreads();  // the buffer about to be refilled is read
        if (more) fetch(k0 + mq_slab, cur ^ 1);
        if (more) mv::copy_async_wait<1>();
        else mv::copy_async_wait<0>();
        __syncthreads();
      }
      if (!ok) continue;
      const unsigned char* wr[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (Direct) {
          // rows past the end read the last row (their sums are never written)
          const std::int64_t row = row0 + r < p.m ? row0 + r : p.m - 1;
          wr[r] = reinterpret_cast<const unsigned char*>(w + row * p.w_nb1) + k0 / B * S;
        } else {
          const int off =
              static_cast<int>((reinterpret_cast<std::uintptr_t>(w + (row0 + r) * p.w_nb1) + k0 / B * S) & 15);
          wr[r] = wbuf + ((cur * mq_warps + warp) * R + r) * buf + off;
        }
      }
      const int chunks = len / 32;  // a whole number of blocks: groups of CH lanes live or not together
      for (int cb = 0; cb < chunks; cb += 32) {
        const int cl = cb + lane;
        const bool live = cl < chunks;
        const int cs = live ? cl : 0;
        const std::int64_t kc = k0 / 32 + cs;  // the chunk's index in the row
        typename Q::wc u[R];
#pragma unroll
        for (int r = 0; r < R; ++r) Q::unpack(wr[r] + (cs / CH) * S, cs % CH, u[r]);
        const bool lead = live && cs % CH == 0 && kc / CH != dropped;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (c >= nc) break;
          const q8::act_col ac{a.base + (q0 + c) * a.col_stride, a.d_off, a.bs_off};
          const int4* xp = reinterpret_cast<const int4*>(ac.c + 32 * kc);
          const int4 xa = __ldg(xp), xb = __ldg(xp + 1);
          const int x[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
          for (int r = 0; r < R; ++r) {
            int pr[NP];
            Q::part(u[r], x, ac, kc, pr);
            if constexpr (CH > 1) {
#pragma unroll
              for (int o = 1; o < CH; o <<= 1)
#pragma unroll
                for (int i = 0; i < NP; ++i) pr[i] += __shfl_xor_sync(0xffffffffu, pr[i], o);
            }
            if (lead) acc[r][c] += Q::term(u[r], ac, kc, pr);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], o);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const std::int64_t row = row0 + r;
      if (r != lane || row >= p.m) continue;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        if (c >= nc) break;
        const char* wc;
        float* y;
        mv::column_of(p, q0 + c, wc, y);
        y[row] = ok ? acc[r][c] : __int_as_float(0x7fc00000);
      }
    }
  }
}

// ---- matvec_wide ----------------------------------------------------------------------------

// One column per weight slab (decode) of a format with wide dots (matvec_wide.cuh), on rows
// aligned as its loads need. 4 warps a block; a warp's work is a sequence of tasks (R rows,
// one step of 8 groups of 256 weights of each): lane l takes two chunks of group l / 4 of
// the step (lane l % 4 of it) and loads their bytes once (wide32: the group's 8 or 4 whole
// blocks, two or one a lane, each lane its own block terms, no shuffles). The grid holds only as many blocks as are
// resident at once, and a warp walks its row groups (grid-stride) and their steps as one
// flat sequence, loading task t + 1's weight words before dotting task t (two register
// buffers used in turn), so every warp keeps a task's loads in flight from start to end,
// across row groups too. The first task's loads go out before pdl_wait, while the kernel
// ahead (the encoder, or a node that wrote none of the weight) still runs; a warp whose
// last loads are out lets the next kernel start (pdl_launch_dependents). A block's 4 lanes
// add their parts by shuffles and its first lane adds the term to its row's sum; at a row
// group's last step the lanes' sums meet in a warp tree, as in matvec_q8.
// H200, bench_cuda N 1 (activations claimed, exec::claim), GB/s at M 4096 / 14336, no PDL
// -> PDL after any node -> and the early trigger: q4_0 1341 / 2342 -> 1502 / 2449 -> 1670 /
// 2578, q4_K 1289 / 2257 -> 1440 / 2377 -> 1587 / 2508, q2_K 849 / 1370 -> 1000 / 1445 ->
// 1075 / 1532 (one run each).
constexpr int mw_warps = 4, mw_threads = 32 * mw_warps;

// bytes of a 256-weight group: a block, or 8 (nvfp4: 4) whole blocks (wide32)
template <class W>
constexpr int wide_group_bytes() {
  if constexpr (q8::wide_whole<W>)
    return q8::wide<W>::bytes;
  else
    return static_cast<int>(sizeof(typename W::block));
}

// bytes of the lattice grid matvec_wide keeps in shared memory for W (0: none)
template <class W>
constexpr int wide_tab_bytes() {
  if constexpr (requires { q8::wide<W>::tab_bytes; })
    return q8::wide<W>::tab_bytes;
  else
    return 0;
}

// One task's arithmetic, shared by matvec_wide and matvec_stream: group b of the step (b >=
// nb: a dead group, its terms dropped, as is the planted control's block `dropped`), lane
// sub of its 4, the R rows' words in cur; adds each row's term to acc. The activations come
// by __ldg (Ldg, global memory) or a plain load (shared memory).
template <class W, int R, bool Ldg>
__device__ __forceinline__ void wide_task(const unsigned (&cur)[R][q8::wide<W>::words], const q8::act_col& ac,
                                          int sub, int b, int nb, int dropped, float (&acc)[R],
                                          const void* tab = nullptr) {
  using V = q8::wide<W>;
  using Q = q8::q8dot<W>;
  constexpr int L = V::lanes, NP = Q::np;
  const bool live = b < nb;
  const int bb = live ? b : 0;
  int x[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int4* at = reinterpret_cast<const int4*>(ac.c + 256 * static_cast<std::int64_t>(bb) + 32 * V::chunk(sub, i / 2)) +
                     i % 2;
    int4 t;
    if constexpr (Ldg) t = __ldg(at);
    else t = *at;
    x[4 * i] = t.x;
    x[4 * i + 1] = t.y;
    x[4 * i + 2] = t.z;
    x[4 * i + 3] = t.w;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (q8::wide_whole<W>) {  // each lane its own blocks' terms: no shuffles
#pragma unroll
      for (int j = 0; j < V::blocks; ++j) {
        const float t = V::term(cur[r], sub, j, x, ac, bb);
        if (live && b != dropped) acc[r] += t;
      }
    } else {
      int pr[NP];
      typename Q::wc h;
      if constexpr (Ldg && wide_tab_bytes<W>() > 0)  // matvec_wide: the grid from shared memory
        V::parts_tab(cur[r], sub, x, ac, bb, pr, h, tab);
      else
        V::parts(cur[r], sub, x, ac, bb, pr, h);
#pragma unroll
      for (int o = 1; o < L; o <<= 1)
#pragma unroll
        for (int i = 0; i < NP; ++i) pr[i] += __shfl_xor_sync(0xffffffffu, pr[i], o);
      if (live && sub == 0 && b != dropped) acc[r] += Q::term(h, ac, static_cast<std::int64_t>(bb) * Q::ch, pr);
    }
  }
}
// A row group's end: the lanes' sums of row row0 + r meet in a warp tree, lane r stores it.
template <int R>
__device__ __forceinline__ void wide_rows_end(float (&acc)[R], int lane, std::int64_t row0, std::int64_t m, float* y) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if (lane == r && row0 + r < m) y[row0 + r] = acc[r];
    acc[r] = 0.0f;
  }
}

template <class W, int R>
__global__ __launch_bounds__(mw_threads) void matvec_wide(mm_args p, q8::act_cols a, int plant) {
  using V = q8::wide<W>;
  constexpr int L = V::lanes, G = 32 / L, NV = V::words, S = wide_group_bytes<W>();
  static_assert(L == 4);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane % L, grp = lane / L;
  const int nb = static_cast<int>(p.kp / 256), steps = (nb + G - 1) / G;  // nb: groups of 256
  const std::int64_t groups = (p.m + R - 1) / R;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * mw_warps;
  const int dropped = plant == 2 ? nb - 1 : -1;  // the control's lost block
  // iq2_xxs, iq3_xxs and iq3_s: the grid copied once a block (wide_lattice::parts_tab), read
  // from shared memory. H200, bench_cuda N 1, % of the copy bandwidth at M 4096 / 14336,
  // two rounds against the grid through L1: iq2_xxs 15 / 22 -> 15 / 23, iq3_xxs 20 / 28 ->
  // 21 / 29-30, iq3_s (GK_CUDA_MQ_STREAM=0; it streams by default) 21 / 28 -> 21 / 30.
  constexpr int TB = wide_tab_bytes<W>();
  __shared__ __align__(16) unsigned tab[TB > 0 ? TB / 4 : 1];
  if constexpr (TB > 0) {
    const unsigned* grid = reinterpret_cast<const unsigned*>(q8::lattice_grid<W>::get().v);
    for (int i = threadIdx.x; i < TB / 4; i += blockDim.x) tab[i] = __ldg(grid + i);
    __syncthreads();
  }
  bool waited = false;
  for (std::int64_t q = blockIdx.y; q < p.ncols; q += gridDim.y) {
    const char* w;
    float* y;
    const bool ok = mv::column_of(p, q, w, y);
    // task (g, s): row group g, step s; next() moves to the following task
    std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * mw_warps + warp;
    int s = 0;
    // the weight vectors of task (tg, ts) into dst; rows past the end read the last row and
    // a step's dead groups the row's first block (their sums are never used)
    auto fetch = [&](std::int64_t tg, int ts, unsigned (&dst)[R][NV]) {
      const int b = ts * G + grp;
      const int bb = b < nb ? b : 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::int64_t row = tg * R + r < p.m ? tg * R + r : p.m - 1;
        V::load(reinterpret_cast<const unsigned char*>(w + row * p.w_nb1) + bb * S, sub, dst[r]);
      }
    };
    // two buffers used in turn (a copy from one to the other cost ~100 moves a task)
    unsigned va[R][NV], vb[R][NV];
    if (ok && g < groups) fetch(g, 0, va);
    if (!waited) {
      pdl_wait();
      waited = true;
    }
    if (!ok) {  // an expert index out of range: NaN rows, as matvec_q8
      for (std::int64_t row = g * R; row < p.m; row += stride * R)
        for (int r = 0; r < R; ++r)
          if (lane == 0 && row + r < p.m) y[row + r] = __int_as_float(0x7fc00000);
      continue;
    }
    const q8::act_col ac{a.base + q * a.col_stride, a.d_off, a.bs_off};
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    // task (g, s) on cur, with the next task's loads into nxt before its arithmetic
    auto task = [&](const unsigned (&cur)[R][NV], unsigned (&nxt)[R][NV]) {
      const bool last = s + 1 == steps;
      const std::int64_t ng = last ? g + stride : g;
      const int ns = last ? 0 : s + 1;
      if (ng < groups) fetch(ng, ns, nxt);
      else if (q + gridDim.y >= p.ncols) pdl_launch_dependents();  // this warp's last loads are out
      wide_task<W, R, true>(cur, ac, sub, s * G + grp, nb, dropped, acc, tab);
      if (last) wide_rows_end<R>(acc, lane, g * R, p.m, y);
      g = ng;
      s = ns;
    };
    while (g < groups) {
      task(va, vb);
      if (g >= groups) break;
      task(vb, va);
    }
  }
}

// ---- matvec_stream ---------------------------------------------------------------------------

// matvec_wide's tasks and arithmetic, fed through shared memory instead of registers, so a
// warp keeps ms_depth - 1 tasks' weights in flight instead of one. matvec_wide holds the
// next task's words in a second register buffer: 80-124 registers a lane, 4-6 blocks an
// SM, about one task (2.3 KB of q4_0) in flight a warp, and the activation loads of each
// task (L2, issued as the task starts) in its critical path; Nsight Compute read it as
// latency-bound (q4_0 M 14336: 44-46% of DRAM peak, warps active 33%).
//   - The block first copies its column's encoded activations (codes, scales, q8_K sums:
//     col_stride bytes) into shared memory; every task reads them from there.
//   - Each warp has a ring of ms_depth stages, one task each (R rows x 8 groups of 256
//     weights, the rows' bytes as they lie). Lanes copy a task with 16-byte cp.async,
//     zero-filling past a row's last live group (nothing past it is read), one commit group
//     a task, ms_depth - 1 tasks ahead of the one being dotted.
//     With Bulk (sm_90+) one lane copies a task instead: R cp.async.bulk (a row's live
//     bytes each) counted on the stage's mbarrier, which the warp waits on. Nsight Compute
//     had the per-lane copies (address and size arithmetic, commit, wait: ~146 warp
//     instructions a task of q4_0 at R 2) make the cp.async kernel issue 1.5x matvec_wide's
//     instructions (q4_0 M 14336: 6.24 M against 4.15 M).
//   - A task's words come from its stage by the same V::load, into one register buffer;
//     terms, shuffles and sums are matvec_wide's, so every output is its bits.
// Needs: weight rows 16-byte aligned (data and strides), rows of whole 256-weight groups,
// the column and the stages within the device's (and the launch record's) shared memory.
// ms_min_blocks: ptxas's register budget for 5 blocks an SM, 96 a lane (without it, 128-161
// for the 32-weight formats and q5_K at R 2, no spills either way): q5_K 34 -> 44% of the
// copy bandwidth at M 4096, 57 -> 61% at M 14336 (wide -> stream), where with 157 registers
// the stream kernel read 38 / 56%. With bulk copies, 6 (80 registers) and 8 (64) measured
// worse or equal for every format (nineteenth session, benchmarks/RESULTS.md).
constexpr int ms_depth = 4, ms_min_blocks = 5;
constexpr std::size_t ms_smem_max = 96 * 1024;  // launches/matvec_q8.txt; every chip served has it

// The formats one-column decode sends to matvec_stream<W, R, false> (cp.async) by default:
// since the nineteenth session only where bulk copies (ms_bulk_default, below) cannot run
// (cc < 90, or a task's bytes not a multiple of 16). GK_CUDA_MQ_STREAM=1: every format
// with a wide dot, 0: none; for measuring. Chosen by measurement (sixteenth session, H200,
// bench_cuda N 1, % of the copy bandwidth at M 4096 / 14336, K 4096, matvec_wide ->
// matvec_stream, two runs alternating): q8_0 55 / 70-71 -> 57 / 85, q5_K 34 / 57 -> 44 /
// 61, q6_K 34 / 52 -> 38 / 52, q3_K 20 / 29 -> 22 / 30, q2_K 25 / 37 -> 26 / 37, iq3_s 21 /
// 27 -> 22 / 27. Not these, where the stream kernel lost at M 14336, the rows of a model's
// FFN (gate, up, and down's 4096 rows of 14336: as many tasks a warp): q4_0 39 / 61 -> 38-39
// / 58, q4_K 37 / 57-58 -> 36-37 / 55, iq4_xs 29 / 43 -> 29-30 / 38, mxfp4 29 / 38 -> 27 /
// 36, nvfp4 29 / 40 -> 31 / 36, iq2_xxs 14 / 20 -> 14-15 / 19-20. Nor the rest, measured
// later (seventeenth session, same command, two rounds alternating, the same in both): q4_1
// 47-48 / 73-74 -> 47 / 71, q5_0 44-45 / 65 -> 43-44 / 60, q5_1 48 / 72-73 -> 49 / 70,
// iq4_nl 33 / 44 -> 34 / 41, iq2_xs 15 / 21 -> 15 / 20-21, iq2_s 16 / 22-23 -> 16 / 22,
// iq3_xxs 20 / 26 -> 21 / 25-26, iq1_s 10 / 15 -> 10 / 15, iq1_m 11 / 17-18 -> 12 / 18,
// tq1_0 12 / 14 -> 10 / 13, tq2_0 22 / 30 -> 21 / 29.
// Also measured and not kept (same session): the 32-weight formats whose lane's bytes are
// not 16-byte multiples (q4_0's 36: 9 four-byte loads a lane) reading them as the aligned
// 16-byte vectors around them (3 loads), moved into place by two selects a word, on 16-byte
// aligned weights. Fewer loads did not pay for the selects and registers (q4_0 64 / 80 ->
// 64 / 96 at R 1 / 2): M 4096 / 14336 q4_0 39 / 60 -> 41 / 58, q4_1 47 / 73-74 -> 46 / 64-65,
// q5_0 44 / 65 -> 42 / 57-58, iq4_nl 33 / 45 -> 31 / 41-42; only q8_0 gained (52 / 69 -> 50 /
// 73), which takes matvec_stream (85 at M 14336) anyway.
template <class W>
constexpr bool ms_default = std::is_same_v<W, F::q8_0> || std::is_same_v<W, F::q5_K> || std::is_same_v<W, F::q6_K> ||
                            std::is_same_v<W, F::q3_K> || std::is_same_v<W, F::q2_K> || std::is_same_v<W, F::iq3_s>;

// The formats one-column decode sends to matvec_stream<W, R, true> (bulk copies) by default
// where ms_bulk_ok allows, each with its ring depth (ms_depth_of; GK_CUDA_MQ_STREAM=2: every
// format with a wide dot). Where bulk copies are not allowed, those of ms_default take
// matvec_stream<W, R, false> and the rest matvec_wide. Chosen by measurement (nineteenth
// session, H200, bench_cuda N 1, % of the copy bandwidth at M 4096 / 14336, K 4096, two
// rounds; matvec_wide -> bulk at depth 4 / depth 3 / depth 6; R 1 lost everywhere but q6_K):
// q4_0 44-45 / 68-69 -> 42-43 / 70-71, 43 / 71, 42 / 66-67; q4_1 48 / 73 -> 46 / 74, 45 /
// 77, 43 / 71; q4_K 37-38 / 58-59 -> 39 / 61, 39 / 63, 36 / 57; q5_K 35 / 56-57 -> 44 / 63,
// 41 / 63-64, 41 / 62-63; q6_K 34 / 53 -> 41-42 / 63, 39-40 / 63-64, 42 / 60; q2_K 25 / 36 ->
// 26 / 40, 26 / 39, 26 / 39; q3_K 20 / 31 -> 23 / 33, 23 / 33-34, 27 / 35; iq3_s 21 / 29 ->
// 23 / 31, 23 / 30, 23 / 30; iq4_nl 34 / 48 -> 31 / 45, 31 / 46-47, 37 / 48; iq4_xs 30 / 46
// -> 32 / 42, 33 / 43-44, 34 / 45; tq2_0 23 / 32 -> 22-23 / 33-34, 23 / 33, 23 / 36; q8_0
// (cp.async stream 53 / 83) 54 / 69 -> 57-58 / 83-84, 55 / 81-82, (depth 6: more shared
// memory than allowed, wide). Not these, where matvec_wide stayed as fast or faster: q5_0
// 46 / 68 -> 46-47 / 66-67, 41 / 68, 45 / 61; mxfp4 31 / 41 -> 28 / 40, 28 / 40, 29 / 42;
// iq2_xxs 15 / 22 -> 15 / 21 at every depth; one round at depth 4: q5_1 48 / 73 -> 48 / 73,
// nvfp4 31 / 43 -> 32 / 39, iq2_xs 17 / 23 -> 16 / 22, iq2_s 16 / 23 -> 16 / 24, iq3_xxs 21
// / 29 -> 21 / 28, iq1_s 10 / 15 -> 10 / 15, iq1_m 11 / 18 -> 12 / 17, tq1_0 12 / 15 -> 11
// / 15.
template <class W>
constexpr bool ms_bulk_default =
    std::is_same_v<W, F::q4_0> || std::is_same_v<W, F::q4_1> || std::is_same_v<W, F::q8_0> ||
    std::is_same_v<W, F::q4_K> || std::is_same_v<W, F::q5_K> || std::is_same_v<W, F::q6_K> ||
    std::is_same_v<W, F::q2_K> || std::is_same_v<W, F::q3_K> || std::is_same_v<W, F::iq3_s> ||
    std::is_same_v<W, F::iq4_nl> || std::is_same_v<W, F::iq4_xs> || std::is_same_v<W, F::tq2_0>;

// the ring's depth: 4 for cp.async; for bulk copies, as measured above
template <class W, bool Bulk>
constexpr int ms_depth_of() {
  if constexpr (!Bulk)
    return ms_depth;
  else if constexpr (std::is_same_v<W, F::q4_0> || std::is_same_v<W, F::q4_1> || std::is_same_v<W, F::q4_K>)
    return 3;
  else if constexpr (std::is_same_v<W, F::q3_K> || std::is_same_v<W, F::iq4_nl> || std::is_same_v<W, F::iq4_xs> ||
                     std::is_same_v<W, F::tq2_0>)
    return 6;
  else
    return ms_depth;
}

// Bulk copies need every task's live bytes of a row (whole groups) in multiples of 16: any
// count of groups when a group is, else only whole tasks (rows of 8k groups)
template <class W>
constexpr bool ms_bulk_ok(std::int64_t kp) {
  return wide_group_bytes<W>() % 16 == 0 || kp % (8 * 256) == 0;
}

template <class W, int R>
constexpr std::size_t ms_stage_bytes() {
  return static_cast<std::size_t>(R) * 8 * wide_group_bytes<W>();
}

// Bulk: each task copied by one lane with R cp.async.bulk (one a row) counted on the stage's
// mbarrier (sm_90+), instead of every lane's 16-byte cp.async. Needs a row's live bytes of
// every task to be a multiple of 16 (bulk_ok). Bytes past a row's live groups are not
// zero-filled: they are a former task's (or never written), and only the dead groups that
// drop their terms read them.
template <class W, int R, bool Bulk>
__global__ __launch_bounds__(mw_threads, ms_min_blocks) void matvec_stream(mm_args p, q8::act_cols a, int plant) {
  using V = q8::wide<W>;
  constexpr int L = V::lanes, G = 32 / L, NV = V::words, D = ms_depth_of<W, Bulk>();
  constexpr int S = wide_group_bytes<W>(), TB = G * S;  // a group's bytes, a row's bytes a task
  constexpr int SB = static_cast<int>(ms_stage_bytes<W, R>());
  static_assert(L == 4 && TB % 16 == 0);
  extern __shared__ __align__(16) unsigned char ms_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane % L, grp = lane / L;
  const int nb = static_cast<int>(p.kp / 256), steps = (nb + G - 1) / G;
  const std::int64_t groups = (p.m + R - 1) / R;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * mw_warps;
  const std::int64_t act_bytes = (a.col_stride + 127) / 128 * 128;
  unsigned char* const col = ms_smem;
  unsigned char* const ring = ms_smem + act_bytes + static_cast<std::int64_t>(warp) * D * SB;
  const int dropped = plant == 2 ? nb - 1 : -1;
  // Bulk: the warp's D stage barriers after the rings; bit k of ph the parity of stage k's
  // next phase
  unsigned long long* const bars =
      reinterpret_cast<unsigned long long*>(ms_smem + act_bytes + static_cast<std::int64_t>(mw_warps) * D * SB) +
      warp * D;
  unsigned ph = 0;
  if constexpr (Bulk) {
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < D; ++i) mv::bulk_init(bars + i);
      mv::bulk_init_fence();
    }
    __syncwarp();
  }
  bool waited = false;
  for (std::int64_t q = blockIdx.y; q < p.ncols; q += gridDim.y) {
    const char* w;
    float* y;
    const bool ok = mv::column_of(p, q, w, y);
    const bool last_col = q + gridDim.y >= p.ncols;
    // the warp's tasks in order: (g, s) -> (g, s + 1) ... (g + stride, 0)
    std::int64_t ig = static_cast<std::int64_t>(blockIdx.x) * mw_warps + warp;  // task to issue
    int is = 0;
    // task (ig, is) into its stage (cp.async, then one commit group, empty past the end)
    auto issue = [&](int stage) {
      if (ok && ig < groups) {
        unsigned char* dst = ring + stage * SB;
        const int live = (nb - is * G < G ? nb - is * G : G) * S;  // bytes of the row's live groups
        if constexpr (Bulk) {
          if (lane == 0) {
            mv::bulk_expect(bars + stage, static_cast<unsigned>(R * live));
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const std::int64_t row = ig * R + r < p.m ? ig * R + r : p.m - 1;
              mv::bulk_copy(dst + r * TB,
                            reinterpret_cast<const unsigned char*>(w + row * p.w_nb1) + static_cast<std::int64_t>(is) * TB,
                            static_cast<unsigned>(live), bars + stage);
            }
          }
        } else {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const std::int64_t row = ig * R + r < p.m ? ig * R + r : p.m - 1;
            const unsigned char* src =
                reinterpret_cast<const unsigned char*>(w + row * p.w_nb1) + static_cast<std::int64_t>(is) * TB;
            for (int o = 16 * lane; o < live; o += 512)  // 16-byte pieces lane, lane + 32, ...
              mv::copy_async_zfill(dst + r * TB + o, src + o, live - o < 16 ? live - o : 16);
          }
        }
        if (++is == steps) {
          is = 0;
          ig += stride;
        }
      } else if (last_col && waited) {
        pdl_launch_dependents();  // this warp's last loads are out (never before its own wait)
      }
      if constexpr (!Bulk) mv::copy_async_commit();
    };
    std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * mw_warps + warp;  // task being dotted
    int s = 0, stage = 0;
#pragma unroll
    for (int i = 0; i < D - 1; ++i) issue(i);
    if (!waited) {
      pdl_wait();
      waited = true;
    }
    // the column's activations, once a block (all its warps see the same column)
    __syncthreads();  // the previous column's readers are done
    if (ok) {
      const int4* src = reinterpret_cast<const int4*>(a.base + q * a.col_stride);
      for (std::int64_t i = threadIdx.x; i < a.col_stride / 16; i += mw_threads)
        reinterpret_cast<int4*>(col)[i] = __ldg(src + i);
    }
    __syncthreads();
    if (!ok) {  // an expert index out of range: NaN rows, as matvec_q8
      for (std::int64_t row = g * R; row < p.m; row += stride * R)
        for (int r = 0; r < R; ++r)
          if (lane == 0 && row + r < p.m) y[row + r] = __int_as_float(0x7fc00000);
      if constexpr (!Bulk) mv::copy_async_wait<0>();
      continue;
    }
    const q8::act_col ac{reinterpret_cast<const char*>(col), a.d_off, a.bs_off};
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    while (g < groups) {
      if constexpr (Bulk) {
        mv::bulk_wait(bars + stage, (ph >> stage) & 1u);  // task (g, s) has landed
        ph ^= 1u << stage;
      } else {
        mv::copy_async_wait<D - 2>();  // task (g, s) has landed
      }
      __syncwarp();  // ... for every lane, and the stage issued next is read
      unsigned cur[R][NV];
      const unsigned char* st = ring + stage * SB;
#pragma unroll
      for (int r = 0; r < R; ++r) V::load(st + r * TB + grp * S, sub, cur[r]);
      issue(stage == 0 ? D - 1 : stage - 1);
      stage = stage + 1 == D ? 0 : stage + 1;
      const bool last = s + 1 == steps;
      wide_task<W, R, false>(cur, ac, sub, s * G + grp, nb, dropped, acc);
      if (last) {
        wide_rows_end<R>(acc, lane, g * R, p.m, y);
        g += stride;
        s = 0;
      } else {
        ++s;
      }
    }
    if constexpr (!Bulk) mv::copy_async_wait<0>();  // the empty tail groups (Bulk: every task issued was waited for)
  }
}

// ---- host side -------------------------------------------------------------------------------

template <class A>
void launch_encode(const mm_args& p, char* out, const act_layout& l, bool cpu, std::int64_t col_stride,
                   cudaStream_t stream) {
  enc_args e{};
  e.p = p;
  e.out = out;
  e.col_stride = col_stride;
  e.d_off = l.d_off;
  e.bs_off = l.bs_off;
  e.cpu = cpu;
  e.plant = g_plant;
  const dim3 grid(blocks_for(l.nblk, enc_warps), mv::grid_y(p.ncols));
  encode_act<A><<<grid, enc_threads, 0, stream>>>(e);
  GK_CUDA_LAUNCHED();
}

// One-column groups take the unstaged kernel (GK_CUDA_MQ_DIRECT=0 keeps them staged).
// Measured on the H200 (bench_cuda, N = 1, weights from HBM, % of the copy bandwidth,
// staged -> direct): q8_0 30 -> 31 / 48 -> 56 (M 4096 / 14336), q4_0 18 -> 19 / 32 -> 38,
// q4_K 15 -> 14 / 23 -> 23, q2_K 10 -> 10 / 17 -> 18, iq4_xs 14 -> 15 / 24 -> 25: the
// staging was not what held the K-quants back (their unpack and the lanes' shuffles are).
// A one-lane-per-256-weights variant (each lane a whole K-quant block: no shuffles, every
// lane its own float term; 4 or 2 rows a warp, warp-private cp.async staging) was measured
// in the same way and was slower everywhere: q4_0 37 -> 21-23%, q4_K 23 -> 20%, q2_K 18 ->
// 14%, iq2_xxs 13 -> 9-10% at M 14336 (q6_K equal), so it was taken out again.
bool matvec_q8_direct() {
  static const bool on = [] {
    const char* e = std::getenv("GK_CUDA_MQ_DIRECT");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// GK_CUDA_MQ_WIDE=0 keeps the chunk kernel for the formats with wide dots;
// GK_CUDA_MQ_R=1|2 sets matvec_wide's rows a warp (default 2); GK_CUDA_PDL=0 (common.cuh)
// launches without programmatic dependent launch. For measuring. (Copying the next task's
// buffer over the current one instead of using two in turn measured slower: q4_K / q5_K at
// M 14336, 47 / 48% of the copy bandwidth -> 45 / 43%.)
int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

// early: the kernel before it in the stream writes none of the weight bytes (encode_act, or
// a node whose output is elsewhere), so the weights may be read before it ends; otherwise
// (it might have written them: a quantized KV cache) the launch is plainly ordered.
template <class W, int R>
void launch_wide(const mm_args& p, const q8::act_cols& a, bool early, exec& x) {
  // as many blocks as fit on the device at once (per device: the count is the same for
  // every device of one architecture, and a process rarely mixes them)
  static std::atomic<int> resident{0};
  int per_sm = resident.load(std::memory_order_relaxed);
  if (per_sm == 0) {
    GK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, matvec_wide<W, R>, mw_threads, 0));
    per_sm = per_sm > 0 ? per_sm : 1;
    resident.store(per_sm, std::memory_order_relaxed);
  }
  const std::int64_t need = (p.m + mw_warps * R - 1) / (mw_warps * R);
  const std::int64_t cap = static_cast<std::int64_t>(per_sm) * (x.props.sm_count > 0 ? x.props.sm_count : 1);
  pdl_launch(matvec_wide<W, R>, dim3(static_cast<unsigned>(need < cap ? need : cap), mv::grid_y(p.ncols)),
             dim3(mw_threads), 0, early, x, p, a, g_plant);
}

// matvec_stream when it can run (16-byte aligned rows, its shared memory within the
// device's), sized as matvec_wide: as many blocks as are resident at once; false otherwise.
template <class W, int R, bool Bulk>
bool launch_stream(const mm_args& p, const q8::act_cols& a, bool early, exec& x) {
  if (x.props.cc < (Bulk ? 90 : 80)) return false;
  if (Bulk && !ms_bulk_ok<W>(p.kp)) return false;
  const std::int64_t all = reinterpret_cast<std::intptr_t>(p.w) | p.w_nb1 | p.w_nb2 | p.w_nb3;
  if ((all & 15) != 0) return false;
  const std::size_t cap = x.props.smem_per_block_optin < ms_smem_max ? x.props.smem_per_block_optin : ms_smem_max;
  // + 16: ld_words reads the aligned word after a field's last byte (q6_K's d at 208 of 210)
  const std::size_t smem = static_cast<std::size_t>((a.col_stride + 127) / 128 * 128) +
                           static_cast<std::size_t>(mw_warps) * ms_depth_of<W, Bulk>() * ms_stage_bytes<W, R>() +
                           (Bulk ? static_cast<std::size_t>(mw_warps) * ms_depth_of<W, Bulk>() * 8 : 0) + 16;
  if (smem > cap) return false;
  mv::allow_smem<matvec_stream<W, R, Bulk>>(cap, x.props.device);
  // blocks resident an SM, by shared bytes (a few distinct K a model): (smem << 8) | count
  static std::atomic<std::uint64_t> seen[4];
  int per_sm = 0;
  for (auto& e : seen) {
    const std::uint64_t v = e.load(std::memory_order_relaxed);
    if (v >> 8 == smem) per_sm = static_cast<int>(v & 0xff);
  }
  if (per_sm == 0) {
    GK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, matvec_stream<W, R, Bulk>, mw_threads, smem));
    per_sm = per_sm > 0 ? (per_sm < 255 ? per_sm : 255) : 1;
    static std::atomic<unsigned> next{0};
    seen[next.fetch_add(1, std::memory_order_relaxed) % 4].store((std::uint64_t{smem} << 8) | per_sm,
                                                                 std::memory_order_relaxed);
  }
  // (Measured and not kept: half the resident blocks, so that the next mat-vec's blocks fit
  // beside them and fetch early: -10 to -25%; a grid sized so every warp takes the same
  // number of row groups: -1 to -5%, q8_0 at M 4096 -9%.)
  const std::int64_t need = (p.m + mw_warps * R - 1) / (mw_warps * R);
  const std::int64_t most = static_cast<std::int64_t>(per_sm) * (x.props.sm_count > 0 ? x.props.sm_count : 1);
  pdl_launch(matvec_stream<W, R, Bulk>, dim3(static_cast<unsigned>(need < most ? need : most), mv::grid_y(p.ncols)),
             dim3(mw_threads), smem, early, x, p, a, g_plant);
  return true;
}

template <class W, int NC>
void launch_matvec(const mm_args& p, const q8::act_cols& a, std::int64_t groups, bool early, exec& x) {
  if constexpr (NC == 1 && q8::has_wide<W>) {
    static const int wide = env_int("GK_CUDA_MQ_WIDE", 1), rows = env_int("GK_CUDA_MQ_R", 2),
                     stream = env_int("GK_CUDA_MQ_STREAM", -1);
    const std::int64_t all = reinterpret_cast<std::intptr_t>(p.w) | p.w_nb1 | p.w_nb2 | p.w_nb3;
    if (wide && (stream == 2 || (stream == -1 && ms_bulk_default<W>)) && p.kp % 256 == 0) {
      if (rows == 1 ? launch_stream<W, 1, true>(p, a, early, x) : launch_stream<W, 2, true>(p, a, early, x)) return;
    }
    if (wide && (stream >= 1 || (stream == -1 && ms_default<W>)) && p.kp % 256 == 0) {
      if (rows == 1 ? launch_stream<W, 1, false>(p, a, early, x) : launch_stream<W, 2, false>(p, a, early, x)) return;
    }
    if (wide && (all & (q8::wide<W>::align - 1)) == 0 && p.kp % 256 == 0) {
      if (rows == 1) return launch_wide<W, 1>(p, a, early, x);
      return launch_wide<W, 2>(p, a, early, x);
    }
  }
  if constexpr (NC == 1) {
    if (matvec_q8_direct()) {
      const dim3 grid(blocks_for(p.m, mq_rows), mv::grid_y(groups));
      matvec_q8<W, 1, true><<<grid, mq_threads, 0, x.stream>>>(p, a, g_plant);
      GK_CUDA_LAUNCHED();
      return;
    }
  }
  constexpr std::size_t smem = mq_smem<W>();
  static_assert(smem <= 99 * 1024, "matvec_q8: more shared memory than sm_86/89/120 give a block");
  mv::allow_smem<matvec_q8<W, NC>>(smem, x.props.device);
  const dim3 grid(blocks_for(p.m, mq_rows), mv::grid_y(groups));
  matvec_q8<W, NC><<<grid, mq_threads, smem, x.stream>>>(p, a, g_plant);
  GK_CUDA_LAUNCHED();
}

template <class W>
void apply(const mm_args& p, const q8::act_cols& a, bool early, exec& x) {
  const std::int64_t per_slab = p.ids ? 1 : p.n, slabs = p.ncols / per_slab;
  if (per_slab == 1) return launch_matvec<W, 1>(p, a, slabs, early, x);
  if (per_slab == 2) return launch_matvec<W, 2>(p, a, slabs, early, x);
  if (per_slab <= 4) return launch_matvec<W, 4>(p, a, slabs, early, x);
  launch_matvec<W, 8>(p, a, slabs * ((per_slab + 7) / 8), early, x);
}

template <class A>
q8::act_cols cols_of(const mm_args& p, const void* act) {
  const act_layout l = layout_of<A>(p.kp);
  return q8::act_cols{static_cast<const char*>(act), l.col_stride, l.d_off, l.bs_off};
}

template <class W>
void run(const mm_args& p, void* act, exec& x) {
  using A = typename W::dot_type;
  const act_layout l = layout_of<A>(p.kp);
  launch_encode<A>(p, static_cast<char*>(act), l, false, l.col_stride, x.stream);
  apply<W>(p, cols_of<A>(p, act), true, x);
}

}  // namespace

bool matvec_q8_serves(type w) {
  bool yes = false;
  formats::visit(w, [&]<class W>(std::type_identity<W>) { yes = q8::has_q8dot<W>; });
  return yes;
}

std::size_t matvec_q8_scratch(type w, const mm_args& p) {
  std::size_t bytes = 0;
  formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>)
      bytes = static_cast<std::size_t>(layout_of<typename W::dot_type>(p.kp).col_stride * p.ncols);
  });
  return bytes;
}

type matvec_q8_act(type w) {
  type a = type::f32;
  formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) a = W::dot_type::id;
  });
  return a;
}

void matvec_q8_encode(type w, const mm_args& p, void* act, q8::act_cols& cols, exec& x) {
  const bool done = formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) {
      using A = typename W::dot_type;
      const act_layout l = layout_of<A>(p.kp);
      launch_encode<A>(p, static_cast<char*>(act), l, false, l.col_stride, x.stream);
      cols = cols_of<A>(p, act);
    } else {
      throw error("gk: CUDA: matvec_q8 has no block dot for " + std::string(gk::name(w)));
    }
  });
  if (!done) throw error("gk: CUDA: matvec_q8: unknown weight type");
}

q8::act_cols matvec_q8_cols(type w, const mm_args& p, const void* act) {
  q8::act_cols cols{};
  const bool done = formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) cols = cols_of<typename W::dot_type>(p, act);
    else throw error("gk: CUDA: matvec_q8 has no block dot for " + std::string(gk::name(w)));
  });
  if (!done) throw error("gk: CUDA: matvec_q8: unknown weight type");
  return cols;
}

void matvec_q8_apply(type w, const mm_args& p, const q8::act_cols& cols, bool early, exec& x) {
  const bool done = formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) apply<W>(p, cols, early, x);
    else throw error("gk: CUDA: matvec_q8 has no block dot for " + std::string(gk::name(w)));
  });
  if (!done) throw error("gk: CUDA: matvec_q8: unknown weight type");
}

void matvec_q8_run(type w, const mm_args& p, void* act, exec& x) {
  const bool done = formats::visit(w, [&]<class W>(std::type_identity<W>) {
    if constexpr (q8::has_q8dot<W>) run<W>(p, act, x);
    else throw error("gk: CUDA: matvec_q8 has no block dot for " + std::string(gk::name(w)));
  });
  if (!done) throw error("gk: CUDA: matvec_q8: unknown weight type");
}

// ---- for tests (test_cuda_matmul.cpp) ----

// The planted controls: 0 none, 1 the encoder truncates, 2 the mat-vec drops each row's last
// block. Not thread-safe; set between graph computes.
void mmq_plant(int control);           // mmq.cu
void matmul_claim_plant(int control);  // matmul.cu
void matvec_q8_plant(int control) {
  g_plant = control;
  mmq_plant(control);
  matmul_claim_plant(control);
}

// rows x k floats (host) encoded on device 0 by encode_act into act's (q8_0, q8_1, q8_K)
// CPU blocks (host, rows * row_size(act, k) bytes).
void matvec_q8_encode_rows(type act, const float* x, std::int64_t k, std::int64_t rows, void* out) {
  const std::size_t in_bytes = static_cast<std::size_t>(k * rows) * sizeof(float);
  const std::size_t row_bytes = gk::row_size(act, k), out_bytes = row_bytes * static_cast<std::size_t>(rows);
  void *dx = nullptr, *dy = nullptr;
  GK_CUDA_CHECK(cudaSetDevice(0));
  GK_CUDA_CHECK(cudaMalloc(&dx, in_bytes));
  GK_CUDA_CHECK(cudaMalloc(&dy, out_bytes));
  GK_CUDA_CHECK(cudaMemcpy(dx, x, in_bytes, cudaMemcpyHostToDevice));
  GK_CUDA_CHECK(cudaMemset(dy, 0xff, out_bytes));
  mm_args p{};
  p.x = static_cast<const float*>(dx);
  p.k = p.kp = k;
  p.ncols = rows;
  auto go = [&]<class A>(std::type_identity<A>) {
    launch_encode<A>(p, static_cast<char*>(dy), layout_of<A>(k), true, static_cast<std::int64_t>(row_bytes), nullptr);
  };
  if (act == type::q8_0) go(std::type_identity<F::q8_0>{});
  else if (act == type::q8_1) go(std::type_identity<F::q8_1>{});
  else if (act == type::q8_K) go(std::type_identity<F::q8_K>{});
  else throw error("gk: CUDA: matvec_q8_encode_rows: " + std::string(gk::name(act)) + " is not an activation format");
  GK_CUDA_CHECK(cudaDeviceSynchronize());
  GK_CUDA_CHECK(cudaMemcpy(out, dy, out_bytes, cudaMemcpyDeviceToHost));
  GK_CUDA_CHECK(cudaFree(dx));
  GK_CUDA_CHECK(cudaFree(dy));
}

}  // namespace gk::cuda
