// SPDX-License-Identifier: MIT
// CUDA kernels: the reduce family (gk/cpu/reduce.hpp is the definition): sum, sum_rows,
// mean, argmax, argsort, top_k.
//
// Sums reproduce the CPU's order exactly, so they return its bits: the CPU sums a row in
// double over 8 lanes (element i into lane i % 8, in index order) and adds the lanes as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Here 8 threads own a row's 8 lanes (4 rows per
// warp, 32 per block) and the lane tree is three xor-shuffles: each shuffle adds a pair in
// the CPU's grouping, and IEEE addition is commutative, so the grouping is all that
// matters. A whole-tensor sum adds the row sums in row order on one thread, as the CPU.
// Each lane is a chain of n/8 dependent double adds: memory, not the chain, limits rows
// shorter than ~64k; H100/H200 run double adds at half the f32 rate.
//
// argmax reproduces the CPU's running-max rule: ties go to the last index, and a NaN
// restarts the run, so the answer is the last maximum of the last NaN-free stretch that
// has an element (0 for a row of NaNs). Four block reductions find it.
//
// argsort and top_k sort 64-bit keys (value mapped to an order-preserving 32-bit key) << 32
// | index: ascending on the key is the CPU's comparator (NaN after every number in both
// directions, -0 equal to +0) and the index breaks ties, which is exactly std::stable_sort
// (argsort) and the CPU's index tie-break (top_k). The sort is bitonic over the row padded
// to a power of two: in shared memory for chunks of up to 4096 keys, with global
// compare-exchange steps between chunk passes for longer rows. top_k writes the first k of
// the descending order.
#include "device_math.cuh"
#include "ops.hpp"

namespace gk::cuda {

namespace {

constexpr unsigned sum_threads = 256;  // 8 lanes per row, 32 rows per block
constexpr unsigned arg_threads = 256;
constexpr unsigned sort_threads = 512;
constexpr int sort_chunk = 4096;        // keys per shared-memory chunk: 32 KiB
constexpr unsigned step_threads = 256;

__device__ __forceinline__ const char* row_ptr(const tview& t, std::int64_t r) {
  const std::int64_t i1 = r % t.ne[1], i2 = (r / t.ne[1]) % t.ne[2], i3 = r / (t.ne[1] * t.ne[2]);
  return t.data + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// One row's sum in the CPU's order, returned to the row's lane 0 (the other 7 get a
// commuted copy). 8 consecutive threads own one row.
__device__ __forceinline__ double row_sum8(const char* p, std::int64_t nb0, int at, std::int64_t n, int lane) {
  double l = 0.0;
  for (std::int64_t i = lane; i < n; i += 8) l = __dadd_rn(l, static_cast<double>(dm::load(p + i * nb0, at)));
  l = __dadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
  l = __dadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
  l = __dadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 4));
  return l;
}

// sum_rows / mean: d has one element per row of a; or, with partial != null, the row sums
// in double for a whole-tensor sum.
__global__ __launch_bounds__(sum_threads) void reduce_rows_sum_kernel(tview d, int dt, tview a, int at, int mean,
                                                                      double* partial, std::int64_t nrows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (sum_threads / 8) + threadIdx.x / 8;
  const int lane = static_cast<int>(threadIdx.x % 8);
  // whole groups of 8 stay in the shuffles: a row past the end sums nothing
  const std::int64_t n = r < nrows ? a.ne[0] : 0;
  const double s = row_sum8(r < nrows ? row_ptr(a, r) : a.data, a.nb[0], at, n, lane);
  if (lane != 0 || r >= nrows) return;
  if (partial) {
    partial[r] = s;
    return;
  }
  float v = static_cast<float>(s);
  if (mean) v = __fdiv_rn(v, static_cast<float>(a.ne[0]));
  const std::int64_t i1 = r % d.ne[1], i2 = (r / d.ne[1]) % d.ne[2], i3 = r / (d.ne[1] * d.ne[2]);
  dm::store(d.data + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], dt, v);
}

// the row sums added in row order, as the CPU's total
__global__ __launch_bounds__(32) void reduce_total_kernel(char* d, int dt, const double* partial, std::int64_t nrows) {
  if (threadIdx.x != 0) return;
  double t = 0.0;
  for (std::int64_t r = 0; r < nrows; ++r) t = __dadd_rn(t, partial[r]);
  dm::store(d, dt, static_cast<float>(t));
}

// the block-wide maximum of v (all threads get it); sh holds arg_threads / 32 entries
template <class T>
__device__ __forceinline__ T block_max(T v, T* sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
  __syncthreads();
  v = sh[0];
  for (unsigned i = 1; i < arg_threads / 32; ++i) v = sh[i] > v ? sh[i] : v;
  return v;
}

// argmax of row blockIdx.x (a is a matrix): see the top of the file for the rule
__global__ __launch_bounds__(arg_threads) void reduce_argmax_kernel(tview d, tview a, int at) {
  __shared__ long long shi[arg_threads / 32];
  __shared__ float shf[arg_threads / 32];
  const char* p = a.data + static_cast<std::int64_t>(blockIdx.x) * a.nb[1];
  const std::int64_t n = a.ne[0];
  // L: the last element that is a number
  long long last = -1;
  for (std::int64_t i = threadIdx.x; i < n; i += arg_threads)
    if (!isnan(dm::load(p + i * a.nb[0], at))) last = i;
  last = block_max(last, shi);
  // S: one past the last NaN before L
  long long start = 0;
  for (std::int64_t i = threadIdx.x; i < last; i += arg_threads)
    if (isnan(dm::load(p + i * a.nb[0], at))) start = i + 1 > start ? i + 1 : start;
  start = block_max(start, shi);
  // the maximum of [S, L], then its last index there
  float m = -INFINITY;
  for (std::int64_t i = start + threadIdx.x; i <= last; i += arg_threads) {
    const float v = dm::load(p + i * a.nb[0], at);
    m = v > m ? v : m;
  }
  m = block_max(m, shf);
  long long idx = 0;
  for (std::int64_t i = start + threadIdx.x; i <= last; i += arg_threads)
    if (dm::load(p + i * a.nb[0], at) == m) idx = i;
  idx = block_max(idx, shi);
  if (threadIdx.x == 0)
    *reinterpret_cast<std::int32_t*>(d.data + static_cast<std::int64_t>(blockIdx.x) * d.nb[0]) =
        static_cast<std::int32_t>(idx);
}

// (order key << 32) | index for row r's element i; padding sorts after everything
__global__ __launch_bounds__(step_threads) void reduce_sort_keys_kernel(unsigned long long* keys, tview a, int at, int desc,
                                                                 std::int64_t padded, std::int64_t nrows) {
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * step_threads + threadIdx.x;
  if (k >= padded * nrows) return;
  const std::int64_t r = k / padded, i = k % padded;
  unsigned long long key = ~0ull;
  if (i < a.ne[0]) {
    float v = dm::load(row_ptr(a, r) + i * a.nb[0], at);
    unsigned int u;
    if (isnan(v)) {
      u = 0xffffffffu;
    } else {
      if (v == 0.0f) v = 0.0f;  // -0 sorts with +0
      const unsigned int b = __float_as_uint(v);
      u = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
      if (desc) u = ~u;  // never 0xffffffff: that is NaN's
    }
    key = (static_cast<unsigned long long>(u) << 32) | static_cast<unsigned long long>(i);
  }
  keys[k] = key;
}

// Bitonic stages k = k_lo .. k_hi (powers of two), each from step min(k/2, chunk/2) down
// to 1, on one chunk of one row in shared memory. Directions use the index within the row,
// so chunks sorted here are the global network's state (k <= chunk), or finish stage k of
// a merge whose steps >= chunk ran in global memory.
__global__ __launch_bounds__(sort_threads) void reduce_sort_chunk_kernel(unsigned long long* keys, std::int64_t padded,
                                                                  int chunk, std::int64_t k_lo, std::int64_t k_hi) {
  extern __shared__ unsigned long long sk[];
  const std::int64_t chunks = padded / chunk;
  const std::int64_t row = blockIdx.x / chunks, c = blockIdx.x % chunks;
  unsigned long long* g = keys + row * padded + c * chunk;
  for (int i = threadIdx.x; i < chunk; i += sort_threads) sk[i] = g[i];
  __syncthreads();
  const std::int64_t base = c * chunk;
  for (std::int64_t k = k_lo; k <= k_hi; k *= 2) {
    for (std::int64_t j = (k / 2 < chunk / 2 ? k / 2 : chunk / 2); j >= 1; j /= 2) {
      for (int p = threadIdx.x; p < chunk / 2; p += sort_threads) {
        const int i = static_cast<int>((p / j) * 2 * j + p % j), l = i + static_cast<int>(j);
        const bool asc = ((base + i) & k) == 0;
        const unsigned long long x = sk[i], y = sk[l];
        if ((x > y) == asc) {
          sk[i] = y;
          sk[l] = x;
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < chunk; i += sort_threads) g[i] = sk[i];
}

// one compare-exchange step (k, j) with j >= chunk, over every row
__global__ __launch_bounds__(step_threads) void reduce_sort_step_kernel(unsigned long long* keys, std::int64_t padded,
                                                                 std::int64_t nrows, std::int64_t k, std::int64_t j) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * step_threads + threadIdx.x;
  if (p >= nrows * padded / 2) return;
  const std::int64_t row = p / (padded / 2), q = p % (padded / 2);
  const std::int64_t i = (q / j) * 2 * j + q % j, l = i + j;
  unsigned long long* g = keys + row * padded;
  const bool asc = (i & k) == 0;
  const unsigned long long x = g[i], y = g[l];
  if ((x > y) == asc) {
    g[i] = y;
    g[l] = x;
  }
}

// the first d.ne[0] indices of each sorted row into d
__global__ __launch_bounds__(step_threads) void reduce_sort_write_kernel(tview d, const unsigned long long* keys,
                                                                  std::int64_t padded, std::int64_t nrows) {
  const std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * step_threads + threadIdx.x;
  if (k >= d.ne[0] * nrows) return;
  const std::int64_t r = k / d.ne[0], i = k % d.ne[0];
  *reinterpret_cast<std::int32_t*>(const_cast<char*>(row_ptr(d, r)) + i * d.nb[0]) =
      static_cast<std::int32_t>(keys[r * padded + i] & 0xffffffffu);
}

bool is_f(type t) { return is_float_type(t); }
int tid(type t) { return static_cast<int>(t); }

void sort_rows(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const bool desc = node->op == op::top_k || static_cast<sort_order>(node->param_i32(0)) == sort_order::desc;
  const std::int64_t n = a->ne[0], nrows = a->nrows();
  std::int64_t padded = 1;
  while (padded < n) padded *= 2;
  const int chunk = static_cast<int>(padded < sort_chunk ? padded : sort_chunk);
  auto* keys = static_cast<unsigned long long*>(x.scratch(static_cast<std::size_t>(padded * nrows) * 8));
  const std::int64_t total = padded * nrows;
  reduce_sort_keys_kernel<<<blocks_for(total, step_threads), step_threads, 0, x.stream>>>(keys, view_of(a), tid(a->type),
                                                                                   desc ? 1 : 0, padded, nrows);
  GK_CUDA_LAUNCHED();
  const unsigned chunk_blocks = static_cast<unsigned>(total / chunk);
  const std::size_t smem = static_cast<std::size_t>(chunk) * 8;
  if (chunk >= 2) {
    reduce_sort_chunk_kernel<<<chunk_blocks, sort_threads, smem, x.stream>>>(keys, padded, chunk, 2, chunk);
    GK_CUDA_LAUNCHED();
  }
  for (std::int64_t k = 2 * static_cast<std::int64_t>(chunk); k <= padded; k *= 2) {
    for (std::int64_t j = k / 2; j >= chunk; j /= 2) {
      reduce_sort_step_kernel<<<blocks_for(total / 2, step_threads), step_threads, 0, x.stream>>>(keys, padded, nrows, k, j);
      GK_CUDA_LAUNCHED();
    }
    reduce_sort_chunk_kernel<<<chunk_blocks, sort_threads, smem, x.stream>>>(keys, padded, chunk, k, k);
    GK_CUDA_LAUNCHED();
  }
  reduce_sort_write_kernel<<<blocks_for(node->ne[0] * nrows, step_threads), step_threads, 0, x.stream>>>(
      view_of(node), keys, padded, nrows);
  GK_CUDA_LAUNCHED();
}

}  // namespace

bool reduce_supports(const tensor* node) {
  const tensor* a = node->src[0];
  if (!a || !is_f(a->type)) return false;
  const bool rows_match = node->ne[1] == a->ne[1] && node->ne[2] == a->ne[2] && node->ne[3] == a->ne[3];
  switch (node->op) {
    case op::sum: return is_f(node->type);
    case op::sum_rows: return is_f(node->type) && node->ne[0] == 1 && rows_match;
    case op::mean: return node->type == type::f32 && node->ne[0] == 1 && rows_match;
    case op::argmax:
      return node->type == type::i32 && a->ne[2] == 1 && a->ne[3] == 1 && node->ne[0] == a->ne[1] &&
             a->ne[1] <= 0x7fffffff;
    case op::argsort: case op::top_k:
      // keys carry the index in 32 bits; rows up to 2^30 pad to a power of two in range
      return node->type == type::i32 && rows_match && a->ne[0] <= (std::int64_t{1} << 30) &&
             node->ne[0] <= a->ne[0] && (node->op == op::top_k || node->ne[0] == a->ne[0]);
    default: return false;
  }
}

void reduce_run(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  switch (node->op) {
    case op::sum: {
      const std::int64_t nrows = a->nrows();
      if (a->is_empty()) {
        // no rows: the CPU stores 0
        reduce_total_kernel<<<1, 32, 0, x.stream>>>(static_cast<char*>(node->data), tid(node->type), nullptr, 0);
        break;
      }
      auto* partial = static_cast<double*>(x.scratch(static_cast<std::size_t>(nrows) * sizeof(double)));
      reduce_rows_sum_kernel<<<blocks_for(nrows, sum_threads / 8), sum_threads, 0, x.stream>>>(
          view_of(node), tid(node->type), view_of(a), tid(a->type), 0, partial, nrows);
      GK_CUDA_LAUNCHED();
      reduce_total_kernel<<<1, 32, 0, x.stream>>>(static_cast<char*>(node->data), tid(node->type), partial, nrows);
      break;
    }
    case op::sum_rows: case op::mean: {
      const std::int64_t nrows = a->nrows();
      reduce_rows_sum_kernel<<<blocks_for(nrows, sum_threads / 8), sum_threads, 0, x.stream>>>(
          view_of(node), tid(node->type), view_of(a), tid(a->type), node->op == op::mean ? 1 : 0, nullptr, nrows);
      break;
    }
    case op::argmax:
      reduce_argmax_kernel<<<static_cast<unsigned>(a->ne[1]), arg_threads, 0, x.stream>>>(view_of(node), view_of(a),
                                                                                       tid(a->type));
      break;
    case op::argsort: case op::top_k: sort_rows(node, x); return;
    default: throw error("gk: CUDA: no reduce kernel for " + describe(node));
  }
  GK_CUDA_LAUNCHED();
}

}  // namespace gk::cuda
