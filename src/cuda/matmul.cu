// SPDX-License-Identifier: MIT
// CUDA matrix products and row gathers: mul_mat, mul_mat_id, get_rows, with weights in every
// format gk decodes (formats.cuh) and f32/f16/bf16 activations.
//
// Main idea: the weight is decoded on the fly, 32 weights (one "chunk") at a time, into
// registers with the CPU's exact float operations; what differs between the kernels is
// only how decoded weights meet the activations.
//   - get_rows: a thread per chunk decodes and stores; bit-identical to the CPU.
//   - stage: activations of any float type and strides become packed f32 columns in
//     scratch, zero-padded to a whole number of chunks (mul_mat_id gathers its (slot,
//     token) columns here, so the kernels below see one column list either way). The
//     matvec kernels skip it for contiguous, 16-byte aligned f32 columns (x_direct).
//   - matvec_q8<W, NC> (matvec_q8.cu): the N <= 8 decode path of every integer format:
//     activations encoded once per node to W::dot_type, integer dots by __dp4a and the
//     CPU's float operations per block, so it reproduces the CPU's dot_row up to the order
//     in which block terms are added. GK_CUDA_MATMUL=matvec_f (matmul_set_path(3)) takes
//     the float mat-vec below instead, kept as the second opinion the tests run. The
//     encoded columns of mul_mat's source are claimed (common.cuh, exec::claim) for the
//     later mul_mats of the same tensor in the graph (q/k/v, gate/up), which skip the
//     encoder; GK_CUDA_ACT_CLAIMS=0 encodes every node's own.
//   - matvec_q<W, NC> (block formats, matvec_f only) and matvec_f<W, NC> (f32/f16/bf16
//     with aligned rows): the float N <= 8 decode path, laid out as matvec but reading the weight 16 bytes
//     at a time (matvec_q: cp.async into shared memory, double-buffered; matvec_f:
//     straight into registers); q4_0 and q4_K skip the float decode for an
//     integer-to-float dot.
//   - matvec<W, NC>: float weights with unaligned rows. A warp owns 2-4
//     weight rows, each lane a chunk; a block of 8 warps owns 16-32 rows and stages a
//     K-slab of up to NC columns in shared memory, padded to 33 floats per 32 so that
//     lanes reading the same offset of different chunks hit different banks. Each decoded
//     chunk is dotted with all NC columns before the next is read, so the weight is read
//     once per NC columns. Sums are f32, four partial chains per chunk (FFMA latency 4
//     cycles, one chain would stall), then a warp shuffle tree.
//   - mmq (mmq.cu): the prompt path of the integer formats, mul_mat with more than 8
//     columns per slab and mul_mat_id from more than 8 tokens: int8 tensor cores on the
//     same q8 activations, every output the CPU's dot_row bit for bit.
//   - gemm::prompt_id (gemm.cuh): mul_mat_id of f32/f16/bf16 weights from more than 8
//     tokens, the columns grouped by expert on the host, one cuBLAS GEMM per expert.
//   - matmul_mma<W>: prompt path (more than mma_min_n columns per slab, any weight but
//     f32/bf16): decoded weights and activations rounded to f16 in shared memory,
//     mma.sync m16n8k16 with f32 sums.
//   - reference: one thread per output, decode then dot in double: the definition the fast
//     path is checked against (matmul_set_path(1), or GK_CUDA_MATMUL=reference).
// Accuracy: the CPU encodes activations to q8_0/q8_1/q8_K for integer formats; so does
// matvec_q8, with the CPU's bytes; the float paths do not: matvec keeps them f32, the tensor-core path rounds weights and activations
// to f16 (2^-11 relative, ~8x finer than q8), so the device lands closer to the truth than
// the CPU. Out-of-range expert or row ids give NaN outputs (the CPU throws).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "formats.cuh"
#include "gemm.cuh"
#include "matvec.cuh"
#include "matvec_q8.cuh"
#include "ops.hpp"

namespace gk::cuda {

namespace {

namespace F = gk::formats;

// 0 auto, 1 reference, 2 matvec for every N (the dp4a matvec_q8 where it serves the
// format, else the float one), 3 the float mat-vec for every N, never matvec_q8, 4 as auto
// but prompts of integer formats on the f16 tensor-core paths (cuBLAS, matmul_mma) instead
// of mmq.cu (GK_CUDA_MATMUL=reference | matvec | matvec_f | f16)
int path_override() {
  static const int p = [] {
    const char* e = std::getenv("GK_CUDA_MATMUL");
    if (e && std::strcmp(e, "reference") == 0) return 1;
    if (e && std::strcmp(e, "matvec") == 0) return 2;
    if (e && std::strcmp(e, "matvec_f") == 0) return 3;
    if (e && std::strcmp(e, "f16") == 0) return 4;
    return 0;
  }();
  return p;
}
int g_path = -1;

// GK_CUDA_ACT_CLAIMS=0: every mul_mat encodes its own columns (for measuring).
bool claims_on() {
  static const bool on = [] {
    const char* e = std::getenv("GK_CUDA_ACT_CLAIMS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
// The planted control of test_cuda_matmul (matvec_q8_plant): 5 keys claims by address alone
// and keeps them across writes (the naive claim the regression test must catch).
int g_claim_plant = 0;

// the column description and helpers shared with matvec_q8.cu (matvec.cuh)
using mv::mm_args;
using mv::x_column;
using mv::column_of;
using mv::copy16_async;
using mv::copy_async_commit;
using mv::copy_async_wait;
using mv::grid_y;

// ---- staging -------------------------------------------------------------------------------

struct stage_args {
  const char* b;
  int type;
  std::int64_t nb0, nb1, nb2, nb3;
  std::int64_t k, kp;
  std::int64_t n, ne12;          // mul_mat
  std::int64_t n_used, ne11;     // mul_mat_id (n_used > 0)
  float* out;
};

constexpr int stage_threads = 256;
__global__ __launch_bounds__(stage_threads) void stage_columns(stage_args a) {
  const std::int64_t q = blockIdx.x;
  const char* src;
  if (a.n_used > 0) {
    const std::int64_t tok = q / a.n_used, e = q % a.n_used;
    src = a.b + (e % a.ne11) * a.nb1 + tok * a.nb2;
  } else {
    const std::int64_t i1 = q % a.n, s = q / a.n, i2 = s % a.ne12, i3 = s / a.ne12;
    src = a.b + i1 * a.nb1 + i2 * a.nb2 + i3 * a.nb3;
  }
  float* dst = a.out + q * a.kp;
  for (std::int64_t i = threadIdx.x; i < a.kp; i += stage_threads)
    dst[i] = i < a.k ? load_float(src + i * a.nb0, a.type) : 0.0f;
}

// ---- the reference: one thread per output, double sums -------------------------------------

constexpr int ref_threads = 128;
template <class W>
__global__ __launch_bounds__(ref_threads) void matmul_reference(mm_args p) {
  const std::int64_t row = blockIdx.x * static_cast<std::int64_t>(ref_threads) + threadIdx.x;
  if (row >= p.m) return;
  for (std::int64_t q = blockIdx.y; q < p.ncols; q += gridDim.y) {
    const char* w;
    float* y;
    const bool ok = column_of(p, q, w, y);
    if (!ok) { y[row] = __int_as_float(0x7fc00000); continue; }
    const auto* wr = reinterpret_cast<const typename W::block*>(w + row * p.w_nb1);
    const float* x = p.x + q * p.kp;
    double s = 0.0;
    float f[32];
    for (std::int64_t c = 0; c < p.kp / 32; ++c) {
      fmt::decode_chunk<W>(wr, c, p.k, f);
      for (int j = 0; j < 32; ++j) s += static_cast<double>(f[j]) * static_cast<double>(x[32 * c + j]);
    }
    y[row] = static_cast<float>(s);
  }
}

// ---- matvec: warp per row, lane per chunk, NC columns per pass -----------------------------

constexpr int mv_warps = 8, mv_threads = 32 * mv_warps;
// Rows per warp: each lane's activation chunk is loaded from shared memory once and used
// for all of them. For one or two columns the chunk is held in registers (32 or 64) and
// a warp takes 2 rows, so a 4096-row matrix still spreads over 256 blocks (~2 per SM);
// with 4 or 8 columns the activations are read per row (registers would not hold them)
// and a warp takes 4 rows.
template <int NC>
constexpr int mv_rows_per_warp() { return NC <= 2 ? 2 : 4; }
template <int NC>
constexpr int mv_rows() { return mv_warps * mv_rows_per_warp<NC>(); }
// K-slab staged at once: 2048 weights = 64 chunks, two per lane; NC * 2112 floats of
// shared memory (8 columns: 67.6 KB, so three blocks fit an SM's 227 KB).
constexpr int mv_slab = 2048;
constexpr int mv_slab_padded = mv_slab / 32 * 33;

template <int NC>
constexpr std::size_t mv_smem() { return static_cast<std::size_t>(NC) * mv_slab_padded * sizeof(float); }

template <class W, int NC>
__global__ __launch_bounds__(mv_threads) void matvec(mm_args p) {
  constexpr int R = mv_rows_per_warp<NC>();
  constexpr bool x_in_regs = NC <= 2;
  extern __shared__ float xs[];  // [NC][mv_slab_padded]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(mv_rows<NC>()) + warp * R;
  const mv::col_groups<NC> groups(p);

  for (std::int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    int nc;
    const std::int64_t q0 = groups.first(p, g, nc);
    const char* w;
    float* y0;
    const bool ok = column_of(p, q0, w, y0);  // every column of a group shares the slab

    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

    for (std::int64_t k0 = 0; k0 < p.kp; k0 += mv_slab) {
      const int len = static_cast<int>(p.kp - k0 < mv_slab ? p.kp - k0 : mv_slab);
      __syncthreads();
      for (int c = 0; c < NC; ++c) {
        const float* x = c < nc ? x_column(p, q0 + c) + k0 : nullptr;
        for (int i = threadIdx.x; i < len; i += mv_threads)
          xs[c * mv_slab_padded + (i >> 5) * 33 + (i & 31)] = c < nc ? x[i] : 0.0f;
      }
      __syncthreads();
      if (!ok) continue;
      const int chunks = len / 32;
      // one chunk of one row against the NC columns at xc (x_in_regs: xv)
      auto dot_chunk = [&](int r, int cl, const float* xc, const float (*xv)[32]) {
        const auto* wr = reinterpret_cast<const typename W::block*>(w + (row0 + r) * p.w_nb1);
        float f[32];
        fmt::decode_chunk<W>(wr, k0 / 32 + cl, p.k, f);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int j = 0; j < 32; ++j)
            s[j & 3] = fmaf(f[j], x_in_regs ? xv[x_in_regs ? c : 0][j] : xc[c * mv_slab_padded + j], s[j & 3]);
          acc[r][c] += (s[0] + s[1]) + (s[2] + s[3]);
        }
      };
      if constexpr (x_in_regs) {
        // chunk outer, rows inner: the activation chunk is read from shared memory once
        for (int cl = lane; cl < chunks; cl += 32) {
          const float* xc = xs + cl * 33;
          float xv[NC][32];
#pragma unroll
          for (int c = 0; c < NC; ++c)
#pragma unroll
            for (int j = 0; j < 32; ++j) xv[c][j] = xc[c * mv_slab_padded + j];
#pragma unroll
          for (int r = 0; r < R; ++r)
            if (row0 + r < p.m) dot_chunk(r, cl, xc, xv);
        }
      } else {
        // rows outer: with 4-8 columns the activations stay in shared memory, and one
        // decoded chunk at a time keeps the kernel near 128 registers (chunk-outer order
        // let the compiler interleave four rows' decodes: 255 registers and spills)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (row0 + r >= p.m) break;
          for (int cl = lane; cl < chunks; cl += 32) dot_chunk(r, cl, xs + cl * 33, nullptr);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], o);
    if (lane < R) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const std::int64_t row = row0 + r;
        if (r != lane || row >= p.m) continue;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (c >= nc) break;
          const char* wc;
          float* y;
          column_of(p, q0 + c, wc, y);
          y[row] = ok ? acc[r][c] : __int_as_float(0x7fc00000);
        }
      }
    }
  }
}

// ---- matvec_q: block formats, weight bytes staged per warp ---------------------------------
// The decode above reads a block's bytes one or two at a time straight from device memory:
// 18 loads per q4_0 chunk, each waiting ~600 ns, and too few in flight to fill HBM. Here each
// warp first copies its rows' bytes of the K-slab (at most 64 chunks: 1152 bytes of q4_0,
// 2304 of q8_1) into shared memory with 16-byte cp.async, all of them in flight at once and
// coalesced across the warp, then decodes from shared memory as matvec does. The copy starts
// at the 16-byte boundary below the slab and ends at the one above: a few bytes outside the
// row are read (never past the 16-byte segment holding the row's last byte).
constexpr int mvq_rows_per_warp = 2;
constexpr int mvq_rows = mv_warps * mvq_rows_per_warp;

template <class W>
constexpr int mvq_buf_bytes() {
  constexpr int bytes = mv_slab / W::block_size * static_cast<int>(sizeof(typename W::block));
  return (bytes + 30) / 16 * 16;  // room for a misaligned start and end
}
// Weight buffers: with one or two columns, two, so that slab s + 1 loads while slab s is
// decoded (K = 4096 is just two slabs: both in flight from the start); with more columns
// the activation slab takes the shared memory and one buffer is kept.
template <int NC>
constexpr int mvq_buffers() { return NC <= 2 ? 2 : 1; }
template <class W, int NC>
constexpr std::size_t mvq_smem() {
  return mv_smem<NC>() + static_cast<std::size_t>(mvq_buffers<NC>() * mvq_rows) * mvq_buf_bytes<W>();
}
// the most dynamic shared memory a mat-vec block asks for: every chip served allows it
constexpr std::size_t mv_smem_limit = 99 * 1024;

// q4_K chunk c (its scale dl and min ml) against NC columns, as dl * sum(q x) - ml * sum(x):
// the codes become floats four at a time (one 32-bit shared load, a shift and mask, then
// PRMT into 2^23 + q and a subtract), ~4.5 instructions a weight against decode_chunk's ~7,
// which left q4_K issue-bound. Needs the codes 4-byte aligned in shared memory.
template <int NC>
__device__ __forceinline__ void dot_q4_K(const F::q4_K::block& b, int c, const float* xc,
                                         const float (*xv)[32], float* acc) {
  const float d = fmt::h2f(b.d), dmin = fmt::h2f(b.dmin);
  int sc, m;
  fmt::scale_min_k4(b.scales, c, sc, m);
  const float dl = fmt::mul(d, fmt::i2f(sc)), ml = fmt::mul(dmin, fmt::i2f(m));
  const unsigned* q = reinterpret_cast<const unsigned*>(b.qs + 32 * (c / 2));
  const int shift = 4 * (c & 1);
  unsigned u[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) u[i] = (q[i] >> shift) & 0x0f0f0f0fu;
#pragma unroll
  for (int cc = 0; cc < NC; ++cc) {
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sx[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float x = NC <= 2 ? xv[NC <= 2 ? cc : 0][j] : xc[cc * mv_slab_padded + j];
      const float qf = __uint_as_float(__byte_perm(u[j / 4], 0x4b000000u, 0x7440 + j % 4)) - 8388608.0f;
      s[j & 3] = fmaf(qf, x, s[j & 3]);
      sx[j & 1] += x;
    }
    acc[cc] += dl * ((s[0] + s[1]) + (s[2] + s[3])) - ml * (sx[0] + sx[1]);
  }
}

// q4_0 the same way, as d * sum((q - 8) x): its codes sit at byte 2 of an 18-byte block,
// so they are read as 16-bit halves and paired into words before the PRMT.
template <int NC>
__device__ __forceinline__ void dot_q4_0(const F::q4_0::block& b, const float* xc, const float (*xv)[32], float* acc) {
  const float d = fmt::h2f(b.d);
  const auto* q = reinterpret_cast<const unsigned short*>(b.qs);
  unsigned lo[4], hi[4];  // weights 4i .. 4i + 3 and 16 + 4i .. 16 + 4i + 3, a byte each
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned w = q[2 * i] | (static_cast<unsigned>(q[2 * i + 1]) << 16);
    lo[i] = w & 0x0f0f0f0fu;
    hi[i] = (w >> 4) & 0x0f0f0f0fu;
  }
#pragma unroll
  for (int cc = 0; cc < NC; ++cc) {
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float x0 = NC <= 2 ? xv[NC <= 2 ? cc : 0][j] : xc[cc * mv_slab_padded + j];
      const float x1 = NC <= 2 ? xv[NC <= 2 ? cc : 0][j + 16] : xc[cc * mv_slab_padded + j + 16];
      // 2^23 + q as a float, minus 2^23 + 8: q - 8 exactly
      const float q0 = __uint_as_float(__byte_perm(lo[j / 4], 0x4b000000u, 0x7440 + j % 4)) - 8388616.0f;
      const float q1 = __uint_as_float(__byte_perm(hi[j / 4], 0x4b000000u, 0x7440 + j % 4)) - 8388616.0f;
      s[j & 1] = fmaf(q0, x0, s[j & 1]);
      s[2 + (j & 1)] = fmaf(q1, x1, s[2 + (j & 1)]);
    }
    acc[cc] += d * ((s[0] + s[1]) + (s[2] + s[3]));
  }
}

// At most 128 registers (2 blocks, 16 warps an SM): q2_K/q3_K/q6_K took 150-230 and ran
// 8 warps an SM, too few loads in flight.
template <class W, int NC>
__global__ __launch_bounds__(mv_threads, 2) void matvec_q(mm_args p) {
  constexpr int R = mvq_rows_per_warp, B = W::block_size, S = sizeof(typename W::block);
  constexpr int buf = mvq_buf_bytes<W>(), NB = mvq_buffers<NC>();
  extern __shared__ __align__(16) float xs[];  // [NC][mv_slab_padded], then [NB][warps][R][buf] bytes
  char* wbuf = reinterpret_cast<char*>(xs + NC * mv_slab_padded);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(mvq_rows) + warp * R;
  const mv::col_groups<NC> groups(p);

  for (std::int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    int nc;
    const std::int64_t q0 = groups.first(p, g, nc);
    const char* w;
    float* y0;
    const bool ok = column_of(p, q0, w, y0);

    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] = 0.0f;

    // this warp's rows' bytes of the K-slab at k0 into buffer nb, as one cp.async group
    auto fetch = [&](std::int64_t k0, int nb) {
      const int bytes = static_cast<int>(p.kp - k0 < mv_slab ? p.kp - k0 : mv_slab) / B * S;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (!ok || row0 + r >= p.m) continue;
        const std::uintptr_t src = reinterpret_cast<std::uintptr_t>(w + (row0 + r) * p.w_nb1) + k0 / B * S;
        const int off = static_cast<int>(src & 15);
        const char* base = reinterpret_cast<const char*>(src - off);
        char* dst = wbuf + ((nb * mv_warps + warp) * R + r) * buf;
        const int n16 = (off + bytes + 15) / 16;
        for (int i = lane; i < n16; i += 32) copy16_async(dst + 16 * i, base + 16 * i);
      }
      copy_async_commit();
    };
    if constexpr (NB == 2) {
      __syncthreads();  // the previous group's buffers are read
      fetch(0, 0);
    }
    int it = 0;
    for (std::int64_t k0 = 0; k0 < p.kp; k0 += mv_slab, ++it) {
      const int len = static_cast<int>(p.kp - k0 < mv_slab ? p.kp - k0 : mv_slab);
      const int cur = NB == 2 ? (it & 1) : 0;
      const bool more = NB == 2 && k0 + mv_slab < p.kp;
      __syncthreads();  // the previous slab's activations and weights are read
      if (NB == 1) fetch(k0, 0);
      else if (more) fetch(k0 + mv_slab, cur ^ 1);
      for (int c = 0; c < NC; ++c) {
        const float* x = c < nc ? x_column(p, q0 + c) + k0 : nullptr;
        for (int i = threadIdx.x; i < len; i += mv_threads)
          xs[c * mv_slab_padded + (i >> 5) * 33 + (i & 31)] = c < nc ? x[i] : 0.0f;
      }
      if (more) copy_async_wait<1>();
      else copy_async_wait<0>();
      __syncthreads();
      if (!ok) continue;
      int off[R];
#pragma unroll
      for (int r = 0; r < R; ++r)
        off[r] = static_cast<int>((reinterpret_cast<std::uintptr_t>(w + (row0 + r) * p.w_nb1) + k0 / B * S) & 15);
      const int chunks = len / 32;
      // one chunk of one row against the NC columns at xc (NC <= 2: xv)
      auto dot_chunk = [&](int r, int cl, const float* xc, const float (*xv)[32]) {
        const auto* wr =
            reinterpret_cast<const typename W::block*>(wbuf + ((cur * mv_warps + warp) * R + r) * buf + off[r]);
        if constexpr (W::id == type::q4_0) {
          dot_q4_0<NC>(wr[cl], xc, xv, acc[r]);
          return;
        }
        if constexpr (W::id == type::q4_K) {
          if ((off[r] & 3) == 0) {
            dot_q4_K<NC>(wr[cl / 8], cl % 8, xc, xv, acc[r]);
            return;
          }
        }
        float f[32];
        fmt::decode_chunk<W>(wr, cl, p.k, f);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int j = 0; j < 32; ++j)
            s[j & 3] = fmaf(f[j], NC <= 2 ? xv[NC <= 2 ? c : 0][j] : xc[c * mv_slab_padded + j], s[j & 3]);
          acc[r][c] += (s[0] + s[1]) + (s[2] + s[3]);
        }
      };
      if constexpr (NC <= 2) {
        for (int cl = lane; cl < chunks; cl += 32) {
          const float* xc = xs + cl * 33;
          float xv[NC][32];
#pragma unroll
          for (int c = 0; c < NC; ++c)
#pragma unroll
            for (int j = 0; j < 32; ++j) xv[c][j] = xc[c * mv_slab_padded + j];
#pragma unroll
          for (int r = 0; r < R; ++r)
            if (row0 + r < p.m) dot_chunk(r, cl, xc, xv);
        }
      } else {
        // rows outer, as in matvec: chunk-outer order interleaves the rows' decodes (255
        // registers and spills at NC = 8)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (row0 + r >= p.m) break;
          for (int cl = lane; cl < chunks; cl += 32) dot_chunk(r, cl, xs + cl * 33, nullptr);
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
        column_of(p, q0 + c, wc, y);
        y[row] = ok ? acc[r][c] : __int_as_float(0x7fc00000);
      }
    }
  }
}

// ---- matvec_f: f32/f16/bf16 weights, 16-byte loads --------------------------------------
// A block of 8 warps owns R rows and splits their k among its 256 threads: thread t reads
// 16-byte vectors t, t + 256, ... of each row (a warp 512 contiguous bytes per load), U of
// them per row in flight before the first use (U = 2; 1 for 8 columns), with the matching activations as float4
// (L1/L2 hits: every block reads the same columns); each thread's partial sums go through a
// warp shuffle tree, then the 8 warps' through shared memory. R = 4 rows (2 for more than 2
// columns): M = 4096 gives 1024 blocks, up to 8 an SM, and each block ends after one or two
// round trips to memory. Measured on the H200 (a standalone copy of both kernels, f16,
// K 4096, weights rotated over 1 GiB, % of the copy bandwidth at M 4096 / 14336): a warp
// per 4 whole rows (4 warps a block, U 4; the kernel before) 60 / 80%, this 67 / 90%. In
// gk (bench_cuda, same session) f16 went 49 / 68% -> 54 / 74%, bf16 51 / 68% -> 54 / 74%,
// f32 -> 70 / 85%. That left the kernel at 38.5-39.5 us (f16, M 14336) where the standalone
// copy took 30.2: the difference was the prologue, about ten 64-bit divisions (group, slab,
// column) every block ran before its first load. mm_args::flat (one slab, no ids) skips them:
// 32.4 us, and bench_cuda f16 / bf16 / f32 at M 14336 84 / 88 / 96% of the copy.
// Launched early (pdl_launch) after a node that wrote none of the weight: the first weight
// loads go out before pdl_wait, and a block whose loads are done lets the next kernel start.
// bench_cuda N 1, GB/s at M 4096 / 14336, no PDL -> PDL -> and the trigger (one run each):
// f16 2652 / 3712 -> 3023 / 3903 -> 3096 / 3911, bf16 2578 / 3689 -> 2898 / 3843 -> 2988 /
// 3876, f32 3449 / 4195 -> 3667 / 4265 -> 3765 / 4276.
// Needs 16-byte aligned rows and activation columns and k a whole number of vectors; the
// host falls back to matvec otherwise.
constexpr int mvf_warps = 8, mvf_threads = 32 * mvf_warps;
template <int NC>
constexpr int mvf_rows() { return NC <= 2 ? 4 : 2; }

template <class W>
__device__ __forceinline__ void widen(const uint4& v, float* o) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
  if constexpr (W::id == type::f32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __uint_as_float(u[i]);
  } else if constexpr (W::id == type::f16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      o[2 * i] = f.x;
      o[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[2 * i] = __uint_as_float(u[i] << 16);
      o[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  }
}

template <class W, int NC>
__global__ __launch_bounds__(mvf_threads) void matvec_f(mm_args p) {
  constexpr int R = mvf_rows<NC>(), E = 16 / static_cast<int>(sizeof(typename W::block)), U = NC >= 8 ? 1 : 2;
  __shared__ float red[mvf_warps][R][NC];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(R);
  const mv::col_groups<NC> groups(p);
  const std::int64_t nv = p.k / E;  // vectors per row
  bool waited = false;  // pdl_wait: before the first activation load and the first store

  for (std::int64_t g = blockIdx.y; g < groups.count; g += gridDim.y) {
    int nc;
    const std::int64_t q0 = groups.first(p, g, nc);
    const char* w;
    float* y0;
    const bool ok = column_of(p, q0, w, y0);
    const uint4* wr[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      wr[r] = reinterpret_cast<const uint4*>(w + (row0 + r < p.m ? row0 + r : row0) * p.w_nb1);
    const float4* xc[NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) xc[c] = reinterpret_cast<const float4*>(x_column(p, q0 + (c < nc ? c : 0)));

    float acc[R][NC][2];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c][0] = acc[r][c][1] = 0.0f;

    if (ok) {
      for (std::int64_t v0 = tid; v0 < nv; v0 += mvf_threads * U) {
        // every load issued before the first use: addresses past the row are clamped to its
        // last vector (loaded, never used) instead of branched around, which had the compiler
        // issue part of them only after the first sums (Hopper SASS), two round trips a block.
        // H200, bench_cuda decode, GB/s at M 4096 / 14336, branched -> clamped, one run each:
        // f16 2209 / 2946 -> 2301 / 3148, f32 2732 / 3309 -> 2955 / 3603, bf16 2208 / 2868 ->
        // 2006 / 2698. bf16 keeps the branches, but the same branched bf16 code read 2322 /
        // 3181 in a later run: between the two forms its difference is within run-to-run noise
        constexpr bool clamp = W::id != type::bf16;
        uint4 wv[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const bool in = v0 + mvf_threads * u < nv;
          const std::int64_t vu = in ? v0 + mvf_threads * u : nv - 1;
#pragma unroll
          for (int r = 0; r < R; ++r) wv[u][r] = clamp || in ? __ldg(wr[r] + vu) : make_uint4(0u, 0u, 0u, 0u);
        }
        if (!waited) {
          pdl_wait();
          waited = true;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const std::int64_t v = v0 + mvf_threads * u;
          if (v >= nv) break;
#pragma unroll
          for (int c = 0; c < NC; ++c) {
            float xv[E];
#pragma unroll
            for (int h = 0; h < E / 4; ++h) {
              const float4 t = __ldg(xc[c] + v * (E / 4) + h);
              xv[4 * h] = t.x;
              xv[4 * h + 1] = t.y;
              xv[4 * h + 2] = t.z;
              xv[4 * h + 3] = t.w;
            }
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float f[E];
              widen<W>(wv[u][r], f);
#pragma unroll
              for (int j = 0; j < E; ++j) acc[r][c][j & 1] = fmaf(f[j], xv[j], acc[r][c][j & 1]);
            }
          }
        }
      }
    }
    if (!waited) {
      pdl_wait();
      waited = true;
    }
    if (g + gridDim.y >= groups.count) pdl_launch_dependents();  // this block's loads are done
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        float s = acc[r][c][0] + acc[r][c][1];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) red[warp][r][c] = s;
      }
    __syncthreads();
    if (tid < R * NC) {
      const int r = tid / NC, c = tid % NC;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < mvf_warps; ++i) s += red[i][r][c];
      const std::int64_t row = row0 + r;
      if (row < p.m && c < nc) {
        const char* wc;
        float* y;
        column_of(p, q0 + c, wc, y);
        y[row] = ok ? s : __int_as_float(0x7fc00000);
      }
    }
    __syncthreads();  // red is read before the next group writes it
  }
}

// ---- prompt path: tensor cores, f16 operands, f32 sums ----------------------------------------
// A block owns 64 weight rows x 64 columns of one slab; per K-step of 64 each thread decodes
// one chunk (bit-exact f32, then rounded to f16) into shared memory and converts half a
// column's slab of activations to f16; four warps (2 x 2) each run 2 x 4 m16n8k16 MMAs per
// 16 of K. Shared rows are 64 + 8 halves (36 words), so the fragment loads of the 8 groups
// x 4 threads of a warp land in 32 different banks. f16 operands: each weight and
// activation is rounded once to 11 bits (relative 2^-12), which is still ~8x finer than
// the q8 activations the CPU uses for integer formats; f16 weights are exact, and the CPU
// rounds their activations to f16 too. f32/bf16 weights stay on the f32 matvec path
// (f16 would lose bf16's range).
// Columns per slab above which mul_mat takes the tensor-core path (the matvec below reads
// the weight once per 8 columns and is f32-FMA bound past that).
constexpr int mma_min_n = 8;
// above this many columns (per weight slab) mul_mat goes to cuBLAS (gemm.cuh), when present
constexpr int gemm_min_n = 64;
constexpr int mma_bm = 64, mma_bn = 64, mma_bk = 64, mma_threads = 128, mma_ld = mma_bk + 8;

__device__ __forceinline__ void mma_16816(float* c, const unsigned* a, const unsigned* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // the host picks this path only for compute capability >= 8.0
#endif
}

template <class W>
__global__ __launch_bounds__(mma_threads) void matmul_mma(mm_args p) {
  __shared__ __align__(16) __half as[mma_bm * mma_ld];
  __shared__ __align__(16) __half bs[mma_bn * mma_ld];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 1, wn = warp & 1, g = lane >> 2, t = lane & 3;
  const std::int64_t row0 = blockIdx.x * static_cast<std::int64_t>(mma_bm);
  const mv::col_groups<mma_bn> groups(p);
  const std::int64_t chunks = p.kp / 32;
  const int lr = tid >> 1, lh = tid & 1;  // the row (column) and chunk this thread loads

  for (std::int64_t grp = blockIdx.y; grp < groups.count; grp += gridDim.y) {
    int nc;
    const std::int64_t q0 = groups.first(p, grp, nc);
    const char* w;
    float* y0;
    column_of(p, q0, w, y0);
    const std::int64_t arow = row0 + lr;
    const auto* wr = reinterpret_cast<const typename W::block*>(w + (arow < p.m ? arow : 0) * p.w_nb1);
    const float* xcol = p.x + (q0 + (lr < nc ? lr : 0)) * p.kp;

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    for (std::int64_t k0 = 0; k0 < p.kp; k0 += mma_bk) {
      const std::int64_t chunk = k0 / 32 + lh;
      float f[32];
      if (arow < p.m && chunk < chunks) {
        fmt::decode_chunk<W>(wr, chunk, p.k, f);
      } else {
#pragma unroll
        for (int j = 0; j < 32; ++j) f[j] = 0.0f;
      }
      __half2 xb[16];
      if (lr < nc && chunk < chunks) {
        const float4* x4 = reinterpret_cast<const float4*>(xcol + 32 * chunk);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float4 v = x4[j];
          xb[2 * j] = __floats2half2_rn(v.x, v.y);
          xb[2 * j + 1] = __floats2half2_rn(v.z, v.w);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 16; ++j) xb[j] = __floats2half2_rn(0.0f, 0.0f);
      }
      __syncthreads();  // the previous step's fragments are read
      __half2* ad = reinterpret_cast<__half2*>(as + lr * mma_ld + 32 * lh);
      __half2* bd = reinterpret_cast<__half2*>(bs + lr * mma_ld + 32 * lh);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        ad[j] = __floats2half2_rn(f[2 * j], f[2 * j + 1]);
        bd[j] = xb[j];
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < mma_bk; kk += 16) {
        unsigned a[2][4], b[4][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          const __half* base = as + (wm * 32 + mi * 16 + g) * mma_ld + kk + 2 * t;
          a[mi][0] = *reinterpret_cast<const unsigned*>(base);
          a[mi][1] = *reinterpret_cast<const unsigned*>(base + 8 * mma_ld);
          a[mi][2] = *reinterpret_cast<const unsigned*>(base + 8);
          a[mi][3] = *reinterpret_cast<const unsigned*>(base + 8 * mma_ld + 8);
        }
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const __half* base = bs + (wn * 32 + ni * 8 + g) * mma_ld + kk + 2 * t;
          b[ni][0] = *reinterpret_cast<const unsigned*>(base);
          b[ni][1] = *reinterpret_cast<const unsigned*>(base + 8);
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni]);
      }
    }
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t r = row0 + wm * 32 + mi * 16 + g + (e >= 2 ? 8 : 0);
          const int c = wn * 32 + ni * 8 + 2 * t + (e & 1);
          if (r >= p.m || c >= nc) continue;
          const char* wc;
          float* y;
          column_of(p, q0 + c, wc, y);
          y[r] = acc[mi][ni][e];
        }
    __syncthreads();  // the next group overwrites the tiles
  }
}

// ---- get_rows --------------------------------------------------------------------------------

struct rows_args {
  const char* a;
  std::int64_t a_nb1, a_nb2, a_nb3, a_rows, k;
  const char* idx;
  std::int64_t i_nb0, i_nb1, i_nb2;
  char* y;
  std::int64_t y_nb1, y_nb2, y_nb3;
  std::int64_t ne1, ne2;  // dst rows per (i11), (i12)
};

constexpr int rows_threads = 128;
template <class W>
__global__ __launch_bounds__(rows_threads) void get_rows_kernel(rows_args p) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t i10 = r % p.ne1, i11 = (r / p.ne1) % p.ne2, i12 = r / (p.ne1 * p.ne2);
  const int ix = *reinterpret_cast<const int*>(p.idx + i10 * p.i_nb0 + i11 * p.i_nb1 + i12 * p.i_nb2);
  float* y = reinterpret_cast<float*>(p.y + i10 * p.y_nb1 + i11 * p.y_nb2 + i12 * p.y_nb3);
  if (ix < 0 || ix >= p.a_rows) {  // the CPU throws; a NaN row is what the device can say
    for (std::int64_t i = threadIdx.x; i < p.k; i += rows_threads) y[i] = __int_as_float(0x7fc00000);
    return;
  }
  const auto* src = reinterpret_cast<const typename W::block*>(p.a + ix * p.a_nb1 + i11 * p.a_nb2 + i12 * p.a_nb3);
  if constexpr (fmt::is_float<W>) {
    for (std::int64_t i = threadIdx.x; i < p.k; i += rows_threads) y[i] = fmt::load_elem<W>(src, i);
  } else {
    for (std::int64_t c = threadIdx.x; c < p.k / 32; c += rows_threads) {
      float f[32];
      fmt::decode_chunk<W>(src, c, p.k, f);
      float4* o = reinterpret_cast<float4*>(y + 32 * c);
      if ((reinterpret_cast<std::uintptr_t>(o) & 15) == 0) {
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = make_float4(f[4 * j], f[4 * j + 1], f[4 * j + 2], f[4 * j + 3]);
      } else {
#pragma unroll
        for (int j = 0; j < 32; ++j) y[32 * c + j] = f[j];
      }
    }
  }
}

// i32 rows stay i32 (the reference's rule): bytes
__global__ __launch_bounds__(rows_threads) void get_rows_i32(rows_args p) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t i10 = r % p.ne1, i11 = (r / p.ne1) % p.ne2, i12 = r / (p.ne1 * p.ne2);
  const int ix = *reinterpret_cast<const int*>(p.idx + i10 * p.i_nb0 + i11 * p.i_nb1 + i12 * p.i_nb2);
  int* y = reinterpret_cast<int*>(p.y + i10 * p.y_nb1 + i11 * p.y_nb2 + i12 * p.y_nb3);
  if (ix < 0 || ix >= p.a_rows) return;
  const int* src = reinterpret_cast<const int*>(p.a + ix * p.a_nb1 + i11 * p.a_nb2 + i12 * p.a_nb3);
  for (std::int64_t i = threadIdx.x; i < p.k; i += rows_threads) y[i] = src[i];
}

// ---- host side -------------------------------------------------------------------------------

bool weight_format(type t) { return formats::visit(t, [](auto) {}); }

// Raises a kernel's dynamic shared-memory limit once per device (a call costs about a
// microsecond of host time, a whole node's worth at decode sizes).
// early: the kernel ahead in the stream writes none of the weight's bytes (matvec_f may
// then start before it ends, pdl_launch)
template <class W, int NC>
void launch_matvec(const mm_args& p, std::int64_t groups, bool early, exec& x) {
  if constexpr (fmt::is_float<W>) {
    // staged columns are kp floats in aligned scratch; direct ones were checked by the caller
    const auto bits = reinterpret_cast<std::uintptr_t>(p.w) | static_cast<std::uintptr_t>(p.w_nb1 | p.w_nb2 | p.w_nb3);
    if (bits % 16 == 0 && p.k * static_cast<std::int64_t>(sizeof(typename W::block)) % 16 == 0) {
      const dim3 grid(blocks_for(p.m, mvf_rows<NC>()), grid_y(groups));
      pdl_launch(matvec_f<W, NC>, grid, dim3(mvf_threads), 0, early, x, p);
      return;
    }
    constexpr std::size_t smem = mv_smem<NC>();
    mv::allow_smem<matvec<W, NC>>(smem, x.props.device);
    const dim3 grid(blocks_for(p.m, mv_rows<NC>()), grid_y(groups));
    matvec<W, NC><<<grid, mv_threads, smem, x.stream>>>(p);
  } else if constexpr (mvq_smem<W, NC>() > mv_smem_limit) {
    // weights of many bytes per weight beside 8 columns: more shared memory than a block
    // may have on the smaller chips (sm_86/89/120: 99 KiB); decode from global instead
    constexpr std::size_t smem = mv_smem<NC>();
    mv::allow_smem<matvec<W, NC>>(smem, x.props.device);
    const dim3 grid(blocks_for(p.m, mv_rows<NC>()), grid_y(groups));
    matvec<W, NC><<<grid, mv_threads, smem, x.stream>>>(p);
  } else {
    constexpr std::size_t smem = mvq_smem<W, NC>();
    mv::allow_smem<matvec_q<W, NC>>(smem, x.props.device);
    const dim3 grid(blocks_for(p.m, mvq_rows), grid_y(groups));
    matvec_q<W, NC><<<grid, mv_threads, smem, x.stream>>>(p);
  }
  GK_CUDA_LAUNCHED();
}

template <class W>
void run_matmul(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  const tensor* ids = node->op == op::mul_mat_id ? node->src[2] : nullptr;
  mm_args p{};
  p.w = static_cast<const char*>(a->data);
  p.w_nb1 = static_cast<std::int64_t>(a->nb[1]);
  p.w_nb2 = static_cast<std::int64_t>(a->nb[2]);
  p.w_nb3 = static_cast<std::int64_t>(a->nb[3]);
  p.k = a->ne[0];
  p.kp = (p.k + 31) / 32 * 32;
  p.m = a->ne[1];
  p.y = static_cast<char*>(node->data);
  p.y_nb1 = static_cast<std::int64_t>(node->nb[1]);
  p.y_nb2 = static_cast<std::int64_t>(node->nb[2]);
  p.y_nb3 = static_cast<std::int64_t>(node->nb[3]);
  stage_args s{};
  s.b = static_cast<const char*>(b->data);
  s.type = static_cast<int>(b->type);
  s.nb0 = static_cast<std::int64_t>(b->nb[0]);
  s.nb1 = static_cast<std::int64_t>(b->nb[1]);
  s.nb2 = static_cast<std::int64_t>(b->nb[2]);
  s.nb3 = static_cast<std::int64_t>(b->nb[3]);
  s.k = p.k;
  s.kp = p.kp;
  if (ids) {
    p.ids = static_cast<const char*>(ids->data);
    p.ids_nb0 = static_cast<std::int64_t>(ids->nb[0]);
    p.ids_nb1 = static_cast<std::int64_t>(ids->nb[1]);
    p.n_used = ids->ne[0];
    p.n_as = a->ne[2];
    p.ncols = ids->ne[0] * ids->ne[1];
    p.n = 1;
    s.n_used = p.n_used;
    s.ne11 = b->ne[1];
  } else {
    p.n = b->ne[1];
    p.ne12 = b->ne[2];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.ncols = b->ne[1] * b->ne[2] * b->ne[3];
    s.n = p.n;
    s.ne12 = p.ne12;
  }
  if (p.ncols == 0 || p.m == 0) return;
  p.flat = !ids && p.ncols == p.n;
  const int path = g_path >= 0 ? g_path : path_override();
  const std::int64_t per_slab = ids ? 1 : p.n, slabs = p.ncols / per_slab;
  // prompts of the integer formats: int8 tensor cores on the CPU's 8-bit activations (mmq.cu);
  // mul_mat_id's too, from more than mma_min_n tokens (its columns grouped by expert)
  const bool mmq = path == 0 && x.props.cc >= 80 && matvec_q8_serves(W::id) &&
                   (ids ? ids->ne[1] > mma_min_n && p.n_as <= mmq_max_experts : per_slab > mma_min_n);
  // other prompts: cuBLAS on tensor cores (gemm.cuh), when it can serve the node
  if constexpr (W::id != type::q8_K) {
    if (!mmq && !ids && (path == 0 || path == 4) && p.n > gemm_min_n && gemm::prompt<W>(node, x)) return;
  }
  // mul_mat_id of float weights from more than mma_min_n tokens: cuBLAS per expert
  if (ids && (path == 0 || path == 4) && ids->ne[1] > mma_min_n && gemm::prompt_id<W>(node, x)) return;
  // matvec reads contiguous, 16-byte aligned f32 activations in place (decode's usual case)
  const bool matvec_path = path == 2 || path == 3 || ((path == 0 || path == 4) && (per_slab <= mma_min_n || x.props.cc < 80 ||
                                                                     W::id == type::f32 || W::id == type::bf16));
  // integer formats with a dp4a block dot: activations encoded to W::dot_type as the CPU does
  const bool q8 = (matvec_path && path != 3 && matvec_q8_serves(W::id)) || mmq;
  const bool direct = (matvec_path || mmq) && !ids && b->type == type::f32 && s.nb0 == 4 && p.k == p.kp &&
                      ((reinterpret_cast<std::uintptr_t>(s.b) | static_cast<std::uintptr_t>(s.nb1 | s.nb2 | s.nb3)) & 15) == 0;
  if (direct) {
    p.x = reinterpret_cast<const float*>(s.b);
    p.x_direct = true;
    p.x_nb1 = s.nb1;
    p.x_nb2 = s.nb2;
    p.x_nb3 = s.nb3;
  }
  // mul_mat's encoded columns outlive the node (exec::claim): the next mul_mat of b by a
  // weight with the same activation format reads them instead of encoding again
  const bool keep = q8 && !ids && path != 1 && claims_on();
  const type enc = keep ? matvec_q8_act(W::id) : type::f32;
  if (const void* have = keep ? x.claimed(b, enc, p.kp, g_claim_plant == 5) : nullptr) {
    const q8::act_cols cols = matvec_q8_cols(W::id, p, have);
    if (mmq) {
      const std::size_t mmq_bytes = mmq_scratch(W::id, p);
      return mmq_run(W::id, p, cols, mmq_bytes ? x.scratch(mmq_bytes) : nullptr, x);
    }
    return matvec_q8_apply(W::id, p, cols, x.last_spares(a), x);
  }
  // one scratch hand-out for the node: staged f32 columns, then matvec_q8's encoded ones
  // (unless claimed), then mmq's
  const std::size_t staged_bytes = direct ? 0 : (static_cast<std::size_t>(p.ncols * p.kp) * sizeof(float) + 15) / 16 * 16;
  const std::size_t act_bytes = q8 && !keep ? matvec_q8_scratch(W::id, p) : 0;
  const std::size_t mmq_bytes = mmq ? mmq_scratch(W::id, p) : 0;
  const std::size_t all_bytes = staged_bytes + act_bytes + mmq_bytes;
  char* scratch = all_bytes ? static_cast<char*>(x.scratch(all_bytes)) : nullptr;
  char* act = keep ? static_cast<char*>(x.claim(b, enc, p.kp, matvec_q8_scratch(W::id, p))) : scratch + staged_bytes;
  if (!direct) {
    float* staged = reinterpret_cast<float*>(scratch);
    s.out = staged;
    p.x = staged;
    stage_columns<<<static_cast<unsigned>(p.ncols), stage_threads, 0, x.stream>>>(s);
    GK_CUDA_LAUNCHED();
  }

  if (path == 1) {
    const dim3 grid(blocks_for(p.m, ref_threads), grid_y(p.ncols));
    matmul_reference<W><<<grid, ref_threads, 0, x.stream>>>(p);
    GK_CUDA_LAUNCHED();
    return;
  }
  if (mmq) {
    q8::act_cols cols{};
    matvec_q8_encode(W::id, p, act, cols, x);
    return mmq_run(W::id, p, cols, mmq_bytes ? scratch + staged_bytes + act_bytes : nullptr, x);
  }
  if constexpr (W::id != type::f32 && W::id != type::bf16) {
    if (per_slab > mma_min_n && x.props.cc >= 80 && path != 2 && path != 3) {
      const dim3 grid(blocks_for(p.m, mma_bm), grid_y(slabs * ((per_slab + mma_bn - 1) / mma_bn)));
      matmul_mma<W><<<grid, mma_threads, 0, x.stream>>>(p);
      GK_CUDA_LAUNCHED();
      return;
    }
  }
  if (q8) return matvec_q8_run(W::id, p, act, x);
  // the kernel ahead: stage_columns (writes scratch) or the last node's last one. mul_mat_id
  // never starts early (its ids, read before pdl_wait, may be the last node's output).
  const bool early = !ids && (!direct || x.last_spares(a));
  if (per_slab == 1) return launch_matvec<W, 1>(p, slabs, early, x);
  if (per_slab == 2) return launch_matvec<W, 2>(p, slabs, early, x);
  if (per_slab <= 4) return launch_matvec<W, 4>(p, slabs, early, x);
  launch_matvec<W, 8>(p, slabs * ((per_slab + 7) / 8), early, x);
}

template <class W>
void run_get_rows(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  rows_args p{};
  p.a = static_cast<const char*>(a->data);
  p.a_nb1 = static_cast<std::int64_t>(a->nb[1]);
  p.a_nb2 = static_cast<std::int64_t>(a->nb[2]);
  p.a_nb3 = static_cast<std::int64_t>(a->nb[3]);
  p.a_rows = a->ne[1];
  p.k = a->ne[0];
  p.idx = static_cast<const char*>(b->data);
  p.i_nb0 = static_cast<std::int64_t>(b->nb[0]);
  p.i_nb1 = static_cast<std::int64_t>(b->nb[1]);
  p.i_nb2 = static_cast<std::int64_t>(b->nb[2]);
  p.y = static_cast<char*>(node->data);
  p.y_nb1 = static_cast<std::int64_t>(node->nb[1]);
  p.y_nb2 = static_cast<std::int64_t>(node->nb[2]);
  p.y_nb3 = static_cast<std::int64_t>(node->nb[3]);
  p.ne1 = node->ne[1];
  p.ne2 = node->ne[2];
  const std::int64_t rows = node->ne[1] * node->ne[2] * node->ne[3];
  if (rows == 0) return;
  if constexpr (std::is_void_v<W>) get_rows_i32<<<static_cast<unsigned>(rows), rows_threads, 0, x.stream>>>(p);
  else get_rows_kernel<W><<<static_cast<unsigned>(rows), rows_threads, 0, x.stream>>>(p);
  GK_CUDA_LAUNCHED();
}

bool float_act(type t) { return t == type::f32 || t == type::f16 || t == type::bf16; }
bool f32_rows(const tensor* t) { return t->type == type::f32 && t->nb[0] == sizeof(float); }

}  // namespace

// For tests: 0 auto, 1 the reference kernel, 2 matvec for every N (no tensor cores; matvec_q8
// where it serves the format), 3 the float mat-vec for every N. Not thread-safe; set it
// between graph computes.
void matmul_set_path(int path) { g_path = path; }

void matmul_claim_plant(int control) { g_claim_plant = control; }
bool claims_by_address() { return g_claim_plant == 5; }

bool matmul_supports(const tensor* n) {
  const tensor* a = n->src[0];
  const tensor* b = n->src[1];
  if (!a || !b) return false;
  switch (n->op) {
    case op::get_rows:
      if (b->type != type::i32 || !a->rows_contiguous()) return false;
      if (a->type == type::i32) return n->type == type::i32 && n->nb[0] == 4;
      return weight_format(a->type) && f32_rows(n);
    case op::mul_mat:
      return weight_format(a->type) && a->type != type::q8_K && a->rows_contiguous() && float_act(b->type) &&
             f32_rows(n);
    case op::mul_mat_id:
      return weight_format(a->type) && a->type != type::q8_K && a->rows_contiguous() && float_act(b->type) &&
             f32_rows(n) && n->src[2] && n->src[2]->type == type::i32;
    default:
      return false;
  }
}

void matmul_run(const tensor* n, exec& x) {
  if (n->op == op::get_rows && n->src[0]->type == type::i32) return run_get_rows<void>(n, x);
  const bool ok = formats::visit(n->src[0]->type, [&]<class W>(std::type_identity<W>) {
    if (n->op == op::get_rows) run_get_rows<W>(n, x);
    else if constexpr (W::id != type::q8_K) run_matmul<W>(n, x);
  });
  if (!ok) throw error("gk: CUDA: no kernel for " + describe(n));
}

}  // namespace gk::cuda
