// SPDX-License-Identifier: MIT
// What every CUDA kernel file shares: error checks, the per-node execution state, and a
// by-value view of a tensor's geometry for kernels.
//
// A kernel file owns one op family. It provides, in namespace gk::cuda (ops.hpp):
//   bool <family>_supports(const tensor* node);   // true only for what it computes right
//   void <family>_run(const tensor* node, exec& x); // launches on x.stream, no sync
// Tensor data pointers are device addresses. Sources may be non-contiguous views; a
// kernel that needs contiguity says so in its _supports.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gk/core/error.hpp"
#include "gk/tensor.hpp"

namespace gk::cuda {

inline void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw gk::error(std::string("gk: CUDA: ") + what + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
#define GK_CUDA_CHECK(expr) ::gk::cuda::check((expr), #expr, __FILE__, __LINE__)
// after every launch
#define GK_CUDA_LAUNCHED() ::gk::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// Per-device facts kernels size their launches by.
struct device_props {
  int device = 0;
  int cc = 0;               // compute capability, 90 for 9.0
  int sm_count = 0;
  std::size_t smem_per_block_optin = 0;  // bytes a block may ask for after cudaFuncSetAttribute
  std::size_t l2_bytes = 0;
};

// The execution state a node's kernels run with. scratch() hands out device memory that
// stays valid until the next scratch() call on this exec (one node's temporaries); it
// grows and never shrinks.
struct exec {
  cudaStream_t stream = nullptr;
  device_props props;

  void* scratch(std::size_t bytes) {
    if (bytes > scratch_size_) {
      if (scratch_) GK_CUDA_CHECK(cudaFreeAsync(scratch_, stream));
      std::size_t n = scratch_size_ ? scratch_size_ : (1u << 20);
      while (n < bytes) n *= 2;
      GK_CUDA_CHECK(cudaMallocAsync(&scratch_, n, stream));
      scratch_size_ = n;
    }
    return scratch_;
  }
  void release() {
    if (scratch_) cudaFreeAsync(scratch_, stream);
    scratch_ = nullptr;
    scratch_size_ = 0;
  }

 private:
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
};

// A tensor's geometry by value, for kernel arguments: strides in bytes.
struct tview {
  char* data;
  std::int64_t ne[4];
  std::int64_t nb[4];
};
inline tview view_of(const tensor* t) {
  tview v;
  v.data = static_cast<char*>(t->data);
  for (int i = 0; i < 4; ++i) {
    v.ne[i] = t->ne[i];
    v.nb[i] = static_cast<std::int64_t>(t->nb[i]);
  }
  return v;
}

// Loads and stores of the float types, in the CPU's conversions (round to nearest even).
__device__ __forceinline__ float load_f32(const char* p) { return *reinterpret_cast<const float*>(p); }
__device__ __forceinline__ float load_f16(const char* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }
__device__ __forceinline__ float load_bf16(const char* p) {
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
}
// t: 0 f32, 1 f16, 30 bf16 (gk::type ids)
__device__ __forceinline__ float load_float(const char* p, int t) {
  return t == 0 ? load_f32(p) : t == 1 ? load_f16(p) : load_bf16(p);
}
__device__ __forceinline__ void store_float(char* p, int t, float v) {
  if (t == 0) *reinterpret_cast<float*>(p) = v;
  else if (t == 1) *reinterpret_cast<__half*>(p) = __float2half_rn(v);
  else *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(v);
}
inline bool is_float_type(type t) { return t == type::f32 || t == type::f16 || t == type::bf16; }

// Flat element index k -> (i0, i1, i2, i3) over extents ne (ne[3] implied).
template <class IT>
__device__ __forceinline__ void split_index(IT k, const std::int64_t* ne, IT& i0, IT& i1, IT& i2, IT& i3) {
  const IT n0 = static_cast<IT>(ne[0]), n1 = static_cast<IT>(ne[1]), n2 = static_cast<IT>(ne[2]);
  i0 = k % n0;
  k /= n0;
  i1 = k % n1;
  k /= n1;
  i2 = k % n2;
  i3 = k / n2;
}

inline unsigned blocks_for(std::int64_t n, unsigned per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace gk::cuda
