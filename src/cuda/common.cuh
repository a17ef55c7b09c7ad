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
#include <cstdlib>
#include <string>
#include <utility>

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

// Programmatic dependent launch (compute capability 9.0 and newer). A kernel launched with
// pdl_launch() may start before the kernel ahead of it in the stream ends, once that one's
// blocks have all run pdl_launch_dependents() or exited. Before pdl_wait() it may read only
// what the kernel ahead cannot write (weights: no kernel writes them, which the launching
// host code checks against the node before) and write nothing; pdl_wait() returns when the
// kernel ahead has ended and its writes are visible. Elsewhere both are no-ops and the
// launches are plainly ordered.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Per-device facts kernels size their launches by.
struct device_props {
  int device = 0;
  int cc = 0;               // compute capability, 90 for 9.0
  int sm_count = 0;
  std::size_t smem_per_block_optin = 0;  // bytes a block may ask for after cudaFuncSetAttribute
  std::size_t l2_bytes = 0;
  // the virtual architecture this library's code for the device came from (90 for
  // compute_90): a build for several chips compiles them from the lowest one's PTX, and
  // code from PTX below 9.0 has no griddepcontrol, so pdl_launch must not overlap it
  int ptx = 0;
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
    for (act_claim& c : claims_) {
      if (c.buf) cudaFreeAsync(c.buf, stream);
      c = act_claim{};
    }
  }

  // ---- encoded activations kept across nodes (matmul.cu) ----
  // A mul_mat that encodes its source's columns to 8-bit blocks (matvec_q8's layout) claims
  // them for the nodes after it that multiply the same source by other weights (q/k/v,
  // gate/up). A claim names the source tensor as well as its address: the graph allocator
  // hands one address to many tensors over an execution, so an address alone could name
  // another tensor's encoding. The backend drops every claim when a graph starts and ends,
  // and a claim as soon as a node writes any byte its source spans (wrote).
  //
  // The buffer holding src's columns encoded to enc (kp values a column), or null.
  // by_address: the planted control (test_cuda_matmul): the naive claim, keyed by address
  // alone and kept across writes.
  const void* claimed(const tensor* src, type enc, std::int64_t kp, bool by_address = false) const {
    for (const act_claim& c : claims_)
      if (c.data && c.data == src->data && (by_address || c.src == src) && c.enc == enc && c.kp == kp) return c.buf;
    return nullptr;
  }
  // A buffer of `bytes` for src's columns encoded to enc; the claim holds from here (the
  // encoder writing it is next in stream order). One claim per encoding: a new one
  // replaces the last of its encoding.
  void* claim(const tensor* src, type enc, std::int64_t kp, std::size_t bytes) {
    act_claim* c = nullptr;
    for (act_claim& e : claims_)  // its encoding's buffer, else an unused one, else in turn
      if (e.buf && e.enc == enc) c = &e;
    for (act_claim& e : claims_)
      if (!c && !e.buf) c = &e;
    if (!c) c = &claims_[next_++ % 3];
    if (bytes > c->cap) {
      if (c->buf) GK_CUDA_CHECK(cudaFreeAsync(c->buf, stream));
      c->buf = nullptr;
      c->cap = 0;
      GK_CUDA_CHECK(cudaMallocAsync(&c->buf, bytes, stream));
      c->cap = bytes;
    }
    c->src = src;
    c->data = src->data;
    c->lo = reinterpret_cast<std::uintptr_t>(src->data);
    c->hi = c->lo + src->nbytes();
    c->enc = enc;
    c->kp = kp;
    return c->buf;
  }
  // node has run: drop the claims on any byte it wrote (unless by_address, the control)
  void wrote(const tensor* node, bool by_address = false) {
    last_ = node;
    if (by_address) return;
    const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(node->data), hi = lo + node->nbytes();
    for (act_claim& c : claims_)
      if (c.data && lo < c.hi && c.lo < hi) c.data = nullptr, c.src = nullptr;
  }
  void drop_claims() {
    for (act_claim& c : claims_) c.data = nullptr, c.src = nullptr;
    last_ = nullptr;
  }
  // True when the node run last in this graph wrote none of t's bytes: its last kernel, the
  // one before the next launch in the stream, leaves t as it was (every kernel of a node
  // writes only the node's output and scratch, which holds no tensor).
  bool last_spares(const tensor* t) const {
    if (!last_) return false;
    const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(last_->data), hi = lo + last_->nbytes();
    const std::uintptr_t tlo = reinterpret_cast<std::uintptr_t>(t->data), thi = tlo + t->nbytes();
    return hi <= tlo || thi <= lo;
  }

 private:
  struct act_claim {
    const tensor* src = nullptr;
    const void* data = nullptr;  // null: no claim (the buffer stays for the next)
    std::uintptr_t lo = 0, hi = 0;
    type enc = type::f32;
    std::int64_t kp = 0;
    void* buf = nullptr;
    std::size_t cap = 0;
  };
  void* scratch_ = nullptr;
  std::size_t scratch_size_ = 0;
  act_claim claims_[3];  // one per activation encoding (q8_0, q8_1, q8_K)
  unsigned next_ = 0;
  const tensor* last_ = nullptr;  // the node run last in this graph (wrote)
};

// Launches k<<<grid, block, smem, x.stream>>>(args...), with programmatic stream
// serialization when pdl (and compute capability 9.0+; GK_CUDA_PDL=0 never).
template <class... P, class... A>
void pdl_launch(void (*k)(P...), dim3 grid, dim3 block, std::size_t smem, bool pdl, const exec& x, A&&... args) {
  static const bool on = [] {
    const char* e = std::getenv("GK_CUDA_PDL");
    return !(e && e[0] == '0' && !e[1]);
  }();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = x.stream;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl && on && x.props.cc >= 90 && x.props.ptx >= 90 ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...), "cudaLaunchKernelEx", __FILE__, __LINE__);
}

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
