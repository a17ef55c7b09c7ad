// SPDX-License-Identifier: MIT
// The prompt path of mul_mat (many activation columns): cuBLAS on tensor cores.
//
// Quantized weights are decoded once per call into f16 scratch (each weight rounded to
// f16 once: 2^-11 relative at worst, the same rounding the mma.sync path makes), the
// activations are converted to f16 (f16 and quantized weights) or bf16 (bf16 weights: the
// CPU's own dot pairs bf16 weights with bf16 activations), and one GemmEx per weight slab
// sums in f32 (CUBLAS_COMPUTE_32F). f32 weights take f32 activations and an fp32 GEMM
// (no TF32). The decode pass moves the weight bytes once, M*K*2 bytes of f16 out, which is
// small beside a GEMM over N >= 32 columns.
//
// cuBLAS is opened at run time (dlopen): a build or a machine without it loses only this
// path (the mma.sync kernel serves instead), and nothing links against it.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "common.cuh"
#include "formats.cuh"

namespace gk::cuda::gemm {

// The few cuBLAS entry points used, with their C signatures (cublas_api.h, ABI-stable).
struct blas_api {
  using handle_t = void*;
  int (*create)(handle_t*) = nullptr;
  int (*set_stream)(handle_t, cudaStream_t) = nullptr;
  int (*gemm_ex)(handle_t, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                 const void*, void*, int, int, int, int) = nullptr;
  bool ok = false;
};

inline const blas_api& blas() {
  static blas_api api = [] {
    blas_api a;
    void* h = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                             "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) return a;
    a.create = reinterpret_cast<decltype(a.create)>(dlsym(h, "cublasCreate_v2"));
    a.set_stream = reinterpret_cast<decltype(a.set_stream)>(dlsym(h, "cublasSetStream_v2"));
    a.gemm_ex = reinterpret_cast<decltype(a.gemm_ex)>(dlsym(h, "cublasGemmEx"));
    a.ok = a.create && a.set_stream && a.gemm_ex;
    return a;
  }();
  return api;
}

// cuBLAS enum values (cublas_api.h / library_types.h)
constexpr int op_n = 0, op_t = 1;
constexpr int r_32f = 0, r_16f = 2, r_16bf = 14;
constexpr int compute_32f = 68, gemm_default = -1;

// One cuBLAS handle per device, bound to the stream of each call.
inline void* handle_for(int device) {
  static std::mutex m;
  static void* handles[64] = {};
  std::lock_guard<std::mutex> lock(m);
  if (device < 0 || device >= 64) return nullptr;
  if (!handles[device] && blas().create(&handles[device]) != 0) handles[device] = nullptr;
  return handles[device];
}

constexpr int conv_threads = 256;

// Activations (any float type, any strides) -> packed [k, n * ne12 * ne13] of f16 or bf16 or f32.
struct conv_args {
  const char* b;
  int type;
  std::int64_t nb0, nb1, nb2, nb3, k, n, ne12, cols;
  void* out;
  int out_type;  // 0 f32, 1 f16, 30 bf16
};
// element o of out, of out_type (0 f32, 1 f16, 30 bf16: gk::type numbers; rounded to nearest even)
__device__ __forceinline__ void store_converted(void* out, std::int64_t o, float v, int out_type) {
  if (out_type == 0) static_cast<float*>(out)[o] = v;
  else if (out_type == 1) static_cast<__half*>(out)[o] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(out)[o] = __float2bfloat16_rn(v);
}

__global__ __launch_bounds__(conv_threads) void convert_columns(conv_args a) {
  const std::int64_t q = blockIdx.y + static_cast<std::int64_t>(blockIdx.z) * gridDim.y;
  if (q >= a.cols) return;
  const std::int64_t i1 = q % a.n, s = q / a.n, i2 = s % a.ne12, i3 = s / a.ne12;
  const char* col = a.b + i1 * a.nb1 + i2 * a.nb2 + i3 * a.nb3;
  for (std::int64_t i = blockIdx.x * conv_threads + threadIdx.x; i < a.k; i += static_cast<std::int64_t>(gridDim.x) * conv_threads) {
    store_converted(a.out, q * a.k + i, load_float(col + i * a.nb0, a.type), a.out_type);
  }
}

// Weight rows (block format W) -> f16 [k, m]: one 32-weight chunk per thread.
template <class W>
__global__ __launch_bounds__(conv_threads) void decode_half(const char* w, std::int64_t nb1, std::int64_t k,
                                                          std::int64_t m, __half* out) {
  const std::int64_t chunks = k / 32;
  const std::int64_t g = blockIdx.x * static_cast<std::int64_t>(conv_threads) + threadIdx.x;
  if (g >= chunks * m) return;
  const std::int64_t r = g / chunks, c = g % chunks;
  float f[32];
  fmt::decode_chunk<W>(reinterpret_cast<const typename W::block*>(w + r * nb1), c, k, f);
  __half2* o = reinterpret_cast<__half2*>(out + r * k + 32 * c);
#pragma unroll
  for (int j = 0; j < 16; ++j) o[j] = __floats2half2_rn(f[2 * j], f[2 * j + 1]);
}

// y = w x for mul_mat (not _id) over every slab; false when this path cannot serve the node
// (no cuBLAS, odd row strides), so the caller uses its own kernels.
template <class W>
bool prompt(const tensor* node, exec& x) {
  const tensor* a = node->src[0];
  const tensor* b = node->src[1];
  if (node->op != op::mul_mat || !blas().ok || node->nb[0] != sizeof(float) || node->nb[1] % sizeof(float) != 0)
    return false;
  const std::int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
  if (k > INT32_MAX || m > INT32_MAX || n > INT32_MAX || (k % 32 != 0 && !fmt::is_float<W>)) return false;
  void* h = handle_for(x.props.device);
  if (!h || blas().set_stream(h, x.stream) != 0) return false;

  constexpr bool is_f32 = W::id == type::f32, is_bf16 = W::id == type::bf16, is_f16 = W::id == type::f16;
  const int act_type = is_f32 ? 0 : is_bf16 ? 30 : 1;
  const std::size_t act_size = is_f32 ? 4 : 2;
  const std::int64_t cols = n * b->ne[2] * b->ne[3];
  // scratch: [activations | decoded weights of one slab]
  const std::size_t act_bytes = (static_cast<std::size_t>(cols * k) * act_size + 255) / 256 * 256;
  const bool decode = !(is_f32 || is_bf16 || is_f16);
  const std::size_t w_bytes = decode ? static_cast<std::size_t>(k * m) * 2 : 0;
  char* scratch = static_cast<char*>(x.scratch(act_bytes + w_bytes));
  conv_args ca{static_cast<const char*>(b->data), static_cast<int>(b->type),
               static_cast<std::int64_t>(b->nb[0]), static_cast<std::int64_t>(b->nb[1]),
               static_cast<std::int64_t>(b->nb[2]), static_cast<std::int64_t>(b->nb[3]),
               k, n, b->ne[2], cols, scratch, act_type};
  const unsigned gy = static_cast<unsigned>(std::min<std::int64_t>(cols, 65535));
  const unsigned gz = static_cast<unsigned>((cols + gy - 1) / gy);
  convert_columns<<<dim3(blocks_for(std::min<std::int64_t>(k, 4096), conv_threads), gy, gz), conv_threads, 0, x.stream>>>(ca);
  GK_CUDA_LAUNCHED();

  const float one = 1.0f, zero = 0.0f;
  const std::int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
  for (std::int64_t i3 = 0; i3 < b->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < b->ne[2]; ++i2) {
      const char* wslab = static_cast<const char*>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
      const void* wp = wslab;
      int wtype = is_f32 ? r_32f : is_bf16 ? r_16bf : r_16f;
      std::int64_t lda = static_cast<std::int64_t>(a->nb[1]) / static_cast<std::int64_t>(is_f32 ? 4 : 2);
      if (decode) {
        // the slab is decoded once for all n columns (slabs repeat only under broadcast)
        __half* wh = reinterpret_cast<__half*>(scratch + act_bytes);
        decode_half<W><<<blocks_for(k / 32 * m, conv_threads), conv_threads, 0, x.stream>>>(
            wslab, static_cast<std::int64_t>(a->nb[1]), k, m, wh);
        GK_CUDA_LAUNCHED();
        wp = wh;
        lda = k;
      } else if (a->nb[1] % (is_f32 ? 4 : 2) != 0) {
        return false;
      }
      const char* bp = scratch + static_cast<std::size_t>((i3 * b->ne[2] + i2) * n * k) * act_size;
      char* yp = static_cast<char*>(node->data) + i2 * node->nb[2] + i3 * node->nb[3];
      const int st = blas().gemm_ex(h, op_t, op_n, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one,
                                    wp, wtype, static_cast<int>(lda), bp, wtype, static_cast<int>(k), &zero, yp, r_32f,
                                    static_cast<int>(node->nb[1] / sizeof(float)), compute_32f, gemm_default);
      if (st != 0) throw error("gk: CUDA: cublasGemmEx failed with status " + std::to_string(st) + " on " + describe(node));
    }
  (void)act_type;
  return true;
}

// mul_mat_id of float weights (f32, f16, bf16) from many tokens: the (slot, token) columns
// grouped by expert on the host (the ids are read back: one stream synchronisation), each
// expert's columns gathered and converted as prompt() converts them, one GemmEx per expert
// with columns, and its outputs scattered back. Per column the same operands and sums as
// prompt() on that expert's slab; the mat-vec per column it replaces read the expert's whole
// weight for every column (H200, 8 experts of 14336 x 4096, 1024 columns: 3.9 TFLOP/s).
struct id_col {
  std::int64_t src, dst;  // byte offsets of the column in the activations and in dst
};
__global__ __launch_bounds__(conv_threads) void gather_columns(const char* b, int type, std::int64_t nb0, std::int64_t k,
                                                               const id_col* cols, std::int64_t n, void* out,
                                                               int out_type) {
  const std::int64_t q = blockIdx.y + static_cast<std::int64_t>(blockIdx.z) * gridDim.y;
  if (q >= n) return;
  const char* col = b + cols[q].src;
  for (std::int64_t i = blockIdx.x * conv_threads + threadIdx.x; i < k; i += static_cast<std::int64_t>(gridDim.x) * conv_threads) {
    store_converted(out, q * k + i, load_float(col + i * nb0, type), out_type);
  }
}
__global__ __launch_bounds__(conv_threads) void scatter_columns(const float* y, std::int64_t m, const id_col* cols,
                                                                std::int64_t n, char* dst) {
  const std::int64_t q = blockIdx.y + static_cast<std::int64_t>(blockIdx.z) * gridDim.y;
  if (q >= n) return;
  float* d = reinterpret_cast<float*>(dst + cols[q].dst);
  for (std::int64_t i = blockIdx.x * conv_threads + threadIdx.x; i < m; i += static_cast<std::int64_t>(gridDim.x) * conv_threads)
    d[i] = y[q * m + i];
}

// false when this path cannot serve the node (no cuBLAS, a weight format other than f32,
// f16, bf16, an expert id out of range: the caller's kernels give those NaN outputs)
template <class W>
bool prompt_id(const tensor* node, exec& x) {
  constexpr bool is_f32 = W::id == type::f32, is_bf16 = W::id == type::bf16, is_f16 = W::id == type::f16;
  if constexpr (!(is_f32 || is_bf16 || is_f16)) {
    return false;
  } else {
    const tensor* a = node->src[0];
    const tensor* b = node->src[1];
    const tensor* ids = node->src[2];
    if (node->op != op::mul_mat_id || !blas().ok || node->nb[0] != sizeof(float) || ids->type != type::i32) return false;
    const std::int64_t k = a->ne[0], m = a->ne[1], n_as = a->ne[2], n_used = ids->ne[0], n_tok = ids->ne[1];
    const std::size_t esize = is_f32 ? 4 : 2;
    if (k > INT32_MAX || m > INT32_MAX || a->nb[1] % esize != 0 || n_used * n_tok == 0) return false;
    void* h = handle_for(x.props.device);
    if (!h || blas().set_stream(h, x.stream) != 0) return false;

    // the ids, read back (rows of n_used int32 at ids->nb[1])
    if (ids->nb[0] != sizeof(std::int32_t)) return false;
    std::vector<std::int32_t> id(static_cast<std::size_t>(n_used * n_tok));
    GK_CUDA_CHECK(cudaMemcpy2DAsync(id.data(), n_used * sizeof(std::int32_t), ids->data, ids->nb[1],
                                    n_used * sizeof(std::int32_t), n_tok, cudaMemcpyDeviceToHost, x.stream));
    GK_CUDA_CHECK(cudaStreamSynchronize(x.stream));
    std::vector<std::int64_t> count(static_cast<std::size_t>(n_as) + 1, 0);
    for (std::int32_t e : id) {
      if (e < 0 || e >= n_as) return false;
      ++count[static_cast<std::size_t>(e) + 1];
    }
    for (std::int64_t e = 0; e < n_as; ++e) count[e + 1] += count[e];  // first column of each expert
    const std::int64_t n = n_used * n_tok;
    std::vector<id_col> cols(static_cast<std::size_t>(n));
    std::vector<std::int64_t> next(count.begin(), count.end() - 1);
    for (std::int64_t tok = 0; tok < n_tok; ++tok)
      for (std::int64_t s = 0; s < n_used; ++s) {
        const std::int64_t e = id[tok * n_used + s];
        cols[next[e]++] = {(s % b->ne[1]) * static_cast<std::int64_t>(b->nb[1]) + tok * static_cast<std::int64_t>(b->nb[2]),
                           s * static_cast<std::int64_t>(node->nb[1]) + tok * static_cast<std::int64_t>(node->nb[2])};
      }

    // scratch: [column list | activations | outputs]
    const std::size_t list_bytes = (static_cast<std::size_t>(n) * sizeof(id_col) + 255) / 256 * 256;
    const std::size_t act_bytes = (static_cast<std::size_t>(n * k) * esize + 255) / 256 * 256;
    char* scratch = static_cast<char*>(x.scratch(list_bytes + act_bytes + static_cast<std::size_t>(n * m) * sizeof(float)));
    auto* dcols = reinterpret_cast<id_col*>(scratch);
    char* act = scratch + list_bytes;
    float* ytmp = reinterpret_cast<float*>(act + act_bytes);
    // from pageable memory: the call returns once the bytes are staged, so cols may go
    GK_CUDA_CHECK(cudaMemcpyAsync(dcols, cols.data(), static_cast<std::size_t>(n) * sizeof(id_col), cudaMemcpyHostToDevice,
                                  x.stream));
    const unsigned gy = static_cast<unsigned>(std::min<std::int64_t>(n, 65535));
    const unsigned gz = static_cast<unsigned>((n + gy - 1) / gy);
    gather_columns<<<dim3(blocks_for(std::min<std::int64_t>(k, 4096), conv_threads), gy, gz), conv_threads, 0, x.stream>>>(
        static_cast<const char*>(b->data), static_cast<int>(b->type), static_cast<std::int64_t>(b->nb[0]), k, dcols, n, act,
        is_f32 ? 0 : is_bf16 ? 30 : 1);
    GK_CUDA_LAUNCHED();
    const float one = 1.0f, zero = 0.0f;
    const int wtype = is_f32 ? r_32f : is_bf16 ? r_16bf : r_16f;
    for (std::int64_t e = 0; e < n_as; ++e) {
      const std::int64_t c0 = count[e], ce = count[e + 1] - count[e];
      if (ce == 0) continue;
      const int st = blas().gemm_ex(h, op_t, op_n, static_cast<int>(m), static_cast<int>(ce), static_cast<int>(k), &one,
                                    static_cast<const char*>(a->data) + e * a->nb[2], wtype,
                                    static_cast<int>(a->nb[1] / esize), act + static_cast<std::size_t>(c0 * k) * esize, wtype,
                                    static_cast<int>(k), &zero, ytmp + c0 * m, r_32f, static_cast<int>(m), compute_32f,
                                    gemm_default);
      if (st != 0) throw error("gk: CUDA: cublasGemmEx failed with status " + std::to_string(st) + " on " + describe(node));
    }
    scatter_columns<<<dim3(blocks_for(std::min<std::int64_t>(m, 4096), conv_threads), gy, gz), conv_threads, 0, x.stream>>>(
        ytmp, m, dcols, n, static_cast<char*>(node->data));
    GK_CUDA_LAUNCHED();
    return true;
  }
}

}  // namespace gk::cuda::gemm
