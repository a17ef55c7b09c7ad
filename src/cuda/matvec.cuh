// SPDX-License-Identifier: MIT
// What matmul.cu and matvec_q8.cu share: the one description of the columns mul_mat and
// mul_mat_id reduce to (mm_args), how a column finds its weight slab and output, the
// cp.async wrappers, and the entry points of the dp4a mat-vec (matvec_q8.cu).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common.cuh"

namespace gk::cuda::mv {

struct mm_args {
  const char* w;                 // weight data
  std::int64_t w_nb1, w_nb2, w_nb3;
  std::int64_t k, kp, m;         // weights per row, padded to 32, rows
  const float* x;                // staged columns, kp floats each
  char* y;                       // dst
  std::int64_t y_nb1, y_nb2, y_nb3;
  // mul_mat: column q = ((i3 * ne12 + i2) * n + i1); weight slab (i2 / r2, i3 / r3)
  std::int64_t n, ne12, r2, r3;
  // mul_mat_id (ids != nullptr): column q = tok * n_used + e; weight slab ids[e, tok]
  const char* ids;
  std::int64_t ids_nb0, ids_nb1, n_used, n_as;
  std::int64_t ncols;            // columns in all
  // mul_mat of a single slab (no ids, ncols == n): column q is i1 = q of weight slab 0, so
  // the kernels find its addresses without the 64-bit divisions of the general case (their
  // prologue, paid by every block before its first load)
  bool flat;
  // matvec only: x_direct reads mul_mat's f32 activations in place (column q at
  // x + i1 * x_nb1 + i2 * x_nb2 + i3 * x_nb3 bytes, 16-byte aligned, k == kp) instead of
  // staged columns; saves the staging kernel and its pass over the activations.
  bool x_direct;
  std::int64_t x_nb1, x_nb2, x_nb3;
};

// Column q's kp activations (staged, or mul_mat's own f32 columns when x_direct).
__device__ __forceinline__ const float* x_column(const mm_args& p, std::int64_t q) {
  if (!p.x_direct) return p.x + q * p.kp;
  if (p.flat) return reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.x) + q * p.x_nb1);
  const std::int64_t i1 = q % p.n, s = q / p.n, i2 = s % p.ne12, i3 = s / p.ne12;
  return reinterpret_cast<const float*>(reinterpret_cast<const char*>(p.x) + i1 * p.x_nb1 + i2 * p.x_nb2 +
                                        i3 * p.x_nb3);
}

// The weight slab and output column of column q; false for an expert index out of range.
__device__ __forceinline__ bool column_of(const mm_args& p, std::int64_t q, const char*& w, float*& y) {
  if (p.ids) {
    const std::int64_t tok = q / p.n_used, e = q % p.n_used;
    const int ex = *reinterpret_cast<const int*>(p.ids + e * p.ids_nb0 + tok * p.ids_nb1);
    y = reinterpret_cast<float*>(p.y + e * p.y_nb1 + tok * p.y_nb2);
    w = p.w + static_cast<std::int64_t>(ex) * p.w_nb2;
    return ex >= 0 && ex < p.n_as;
  }
  if (p.flat) {
    y = reinterpret_cast<float*>(p.y + q * p.y_nb1);
    w = p.w;
    return true;
  }
  const std::int64_t i1 = q % p.n, s = q / p.n, i2 = s % p.ne12, i3 = s / p.ne12;
  y = reinterpret_cast<float*>(p.y + i1 * p.y_nb1 + i2 * p.y_nb2 + i3 * p.y_nb3);
  w = p.w + (i2 / p.r2) * p.w_nb2 + (i3 / p.r3) * p.w_nb3;
  return true;
}

// The mat-vecs' column groups: up to NC consecutive columns of one weight slab (mul_mat_id:
// one column each, as every column may take another expert).
template <int NC>
struct col_groups {
  std::int64_t per_slab, per_slab_groups, count;
  __device__ __forceinline__ explicit col_groups(const mm_args& p)
      : per_slab(p.ids ? 1 : p.n),
        per_slab_groups((per_slab + NC - 1) / NC),
        count(p.flat ? per_slab_groups : (p.ncols / per_slab) * per_slab_groups) {}
  // group g's first column and its number of columns (nc)
  __device__ __forceinline__ std::int64_t first(const mm_args& p, std::int64_t g, int& nc) const {
    std::int64_t slab = 0, c0 = g * NC;
    if (!p.flat) {
      slab = g / per_slab_groups;
      c0 = (g - slab * per_slab_groups) * NC;
    }
    nc = static_cast<int>(per_slab - c0 < NC ? per_slab - c0 : NC);
    return slab * per_slab + c0;
  }
};

// N bytes (4, 8 or 16; both addresses aligned to N) copied from global to shared memory
// without passing through registers (16: bypassing L1)
template <int N>
__device__ __forceinline__ void copy_async(void* smem, const void* gmem) {
  static_assert(N == 4 || N == 8 || N == 16);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (N == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(N));
#else
  std::memcpy(smem, gmem, N);
#endif
}
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) { copy_async<16>(smem, gmem); }
// 16 bytes at smem: the n (1..16) bytes at gmem (16-byte aligned), then zeros; nothing past
// gmem + n is read
__device__ __forceinline__ void copy_async_zfill(void* smem, const void* gmem, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
#else
  std::memcpy(smem, gmem, static_cast<std::size_t>(n));
  std::memset(static_cast<char*>(smem) + n, 0, static_cast<std::size_t>(16 - n));
#endif
}
__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// until at most Pending of this thread's committed groups are still in flight
template <int Pending>
__device__ __forceinline__ void copy_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// Bulk copies (cp.async.bulk, sm_90+): one instruction moves n bytes (a multiple of 16, both
// addresses 16-byte aligned) from global to shared memory through the async proxy, and the
// bytes are counted on an mbarrier in the same shared memory. A phase of the barrier ends
// when its one arrival (bulk_expect, the bytes to come) has come and those bytes have
// landed; bulk_wait returns once the phase of the given parity has ended, after which plain
// loads see the bytes. Elsewhere they trap: the host launches them only where cc >= 90.
__device__ __forceinline__ void bulk_init(unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b) : "memory");
#else
  __trap();
#endif
}
// after bulk_init, before the barrier is used by the async proxy
__device__ __forceinline__ void bulk_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_expect(unsigned long long* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned n, unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(s),
               "l"(gmem), "r"(n), "r"(b)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void bulk_wait(unsigned long long* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  unsigned done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}

// Raises a kernel's dynamic shared-memory limit once per device (the kernels of matmul.cu,
// matvec_q8.cu and mmq.cu that take more than 48 KiB).
template <auto Kernel>
void allow_smem(std::size_t bytes, int device) {
  static std::atomic<std::uint64_t> done{0};
  const std::uint64_t bit = std::uint64_t{1} << (device & 63);
  if (bytes <= 48 * 1024 || (done.load(std::memory_order_relaxed) & bit)) return;
  GK_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done.fetch_or(bit, std::memory_order_relaxed);
}

inline unsigned grid_y(std::int64_t n) { return static_cast<unsigned>(n < 65535 ? (n > 0 ? n : 1) : 65535); }

}  // namespace gk::cuda::mv

namespace gk::cuda::q8 {
struct act_cols;  // matvec_q8.cuh
}

namespace gk::cuda {

// ---- the dp4a mat-vec (matvec_q8.cu) ----
// True when weight format w has device block dots against its activation format
// (W::dot_type: q8_0, q8_1 or q8_K); the others keep the float mat-vec.
bool matvec_q8_serves(type w);
// Bytes of scratch matvec_q8_run needs for p's columns (the encoded activations).
std::size_t matvec_q8_scratch(type w, const mv::mm_args& p);
// Encodes every column of p (x_column) to W::dot_type in act (16-byte aligned, at least
// matvec_q8_scratch bytes), then runs the mat-vec, NC = 1, 2, 4 or 8 columns at a time.
void matvec_q8_run(type w, const mv::mm_args& p, void* act, exec& x);
// Only the encoding of matvec_q8_run: p's columns into act, their layout into cols.
void matvec_q8_encode(type w, const mv::mm_args& p, void* act, q8::act_cols& cols, exec& x);
// The activation format w's columns are encoded to (q8_0, q8_1 or q8_K; f32 if none).
type matvec_q8_act(type w);
// The layout of p's columns already encoded in act (by matvec_q8_encode, for an earlier
// node: exec::claimed).
q8::act_cols matvec_q8_cols(type w, const mv::mm_args& p, const void* act);
// Only the mat-vec of matvec_q8_run, on encoded columns. early: the kernel just before it
// in the stream writes none of the weight bytes (programmatic dependent launch may then
// overlap the two).
void matvec_q8_apply(type w, const mv::mm_args& p, const q8::act_cols& cols, bool early, exec& x);

// ---- the int8 tensor-core prompt path (mmq.cu) ----
// Mul_mat or mul_mat_id of a format matvec_q8 serves, on columns encoded by
// matvec_q8_encode; compute capability 8.0 or newer. mul_mat_id (p.ids; at most
// mmq_max_experts experts) first groups its columns by expert on the device; mul_mat of
// one slab from enough columns first unpacks its weights once. Both in scratch (mmq_scratch
// bytes, 16-byte aligned; may be none).
constexpr std::int64_t mmq_max_experts = 4096;
std::size_t mmq_scratch(type w, const mv::mm_args& p);
void mmq_run(type w, const mv::mm_args& p, const q8::act_cols& cols, void* scratch, exec& x);

}  // namespace gk::cuda
